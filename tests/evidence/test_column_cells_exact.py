"""The writer's per-chunk column path gives exactly the per-cell path's cells (issue 27 item 2).

``formatting._make_column_cells`` (what the writer calls per column and chunk: memo per distinct value,
texts proven unchanged, plain ints and datetimes marked bare without the masker) must give, for any
chunk, the same cells (text, and bare or quoted) and the same masking counts as formatting each cell
alone (``_make_formatter``) and marking it (``_bare_cells``). And the exact gate added to the auth
detector must never skip a text the detector's regex matches.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from idemview.config import new_masker
from idemview.evidence.formatting import (
    ColumnSpec,
    _Bare,
    _bare_cells,
    _make_column_cells,
    _make_formatter,
    bare_cell,
)
from idemview.masking.masker import Masker
from idemview.masking.patterns import _AUTH_RE
from idemview.masking.validators import _HASH_MIN, _HEX_DIGEST_MIN, _plain_hex_chunk, _plain_shape, _plain_uuid_chunk
from tests.masking_corpus import lookalike_cases, secret_cases

KEY = b"k" * 32
# "N,A": a NULL cell the csv module quotes, so its column is not marked bare as a whole
NULLS = ["", "NULL", "0", "=NULL()", "2026-01-01T00:00:00", "N,A"]

_CORPUS_TEXTS = [c.value for c in secret_cases() + lookalike_cases() if isinstance(c.value, str)]


def _per_cell(col: ColumnSpec, masker: Masker, null: str, values: list) -> list[str]:
    fmt = _make_formatter(col, masker, null)
    bare = _bare_cells(col, null)
    return [bare([fmt(v)])[0] for v in values]


def _shape(cells: list[str]) -> list[tuple[str, bool]]:
    # a column marked bare as a whole (_BareColumn) counts as bare cells
    return [(str.__str__(c), isinstance(c, _Bare)) for c in (bare_cell(cells, i) for i in range(len(cells)))]


def _same(col: ColumnSpec, null: str, values: list) -> None:
    a, b = Masker(key=KEY), Masker(key=KEY)
    chunk = _make_column_cells(col, a, null)(values)
    cell = _per_cell(col, b, null, values)
    assert _shape(chunk) == _shape(cell)
    assert a.counts == b.counts


_texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(_CORPUS_TEXTS),
    st.sampled_from(["", "NULL", "0", "=NULL()", "-5", "=1+2", "user@example.com", "Bearer abcDEF1234567890xyzQRS"]),
    st.uuids().map(str),
)
# offsets to convert; a named zero offset is not the UTC singleton the fast path tests for
_OFFSETS = [timezone(timedelta(hours=2)), timezone(timedelta(0), "Z"), timezone(-timedelta(hours=5))]
_datetimes = st.one_of(
    st.datetimes(),
    st.datetimes(timezones=st.just(UTC)),
    st.datetimes(timezones=st.sampled_from(_OFFSETS)),
)
_ints = st.one_of(
    st.integers(), st.integers(min_value=10**12, max_value=10**19), st.sampled_from([0, -1, 4111111111111111])
)
_any = st.one_of(_texts, _ints, _datetimes, st.none(), st.booleans(), st.floats(allow_nan=False), st.binary(max_size=8))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["integer", "instant", "naive_instant"]),
    null=st.sampled_from(NULLS),
    values=st.lists(st.one_of(_ints, _datetimes, st.none()), max_size=30),
    name=st.sampled_from(["n", "updated_at", "card_number", "password"]),
)
def test_typed_columns_chunk_equals_per_cell(kind, null, values, name):
    _same(ColumnSpec(name, kind), null, values)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["integer", "instant", "naive_instant", "text", "number", "boolean", "json"]),
    null=st.sampled_from(NULLS),
    values=st.lists(_any, max_size=30),
)
def test_any_values_chunk_equals_per_cell(kind, null, values):
    _same(ColumnSpec("intent_ref", kind), null, values)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_texts, min_size=4, max_size=40), repeat=st.integers(min_value=1, max_value=4))
def test_text_columns_chunk_equals_per_cell_with_repeats(values, repeat):
    # repeated values take the memo, unique ones the proven-unchanged path: both against per cell
    _same(ColumnSpec("intent_ref"), "", values * repeat)
    _same(ColumnSpec("intent_ref"), "", values)


def test_typed_chunks_of_every_shape_equal_per_cell():
    naive = [datetime(2026, 1, 2, 3, 4, 5), datetime(999, 1, 1), datetime(2026, 1, 2, 3, 4, 5, 7)]
    aware = [
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))),
    ]
    for null in NULLS:
        for kind in ("instant", "naive_instant"):
            for values in (naive, naive + [None], aware, aware[:1] + [None], naive + aware, [None]):
                _same(ColumnSpec("t", kind), null, values)
        for values in ([0, 1, -5, 10**19], [None, 7], [True, 3], [None], [4111111111111111]):
            _same(ColumnSpec("n", "integer"), null, values)
            _same(ColumnSpec("card_number", "integer"), null, values)


def test_corpus_in_one_text_column_chunk_equals_per_cell():
    for i in range(0, len(_CORPUS_TEXTS), 500):
        _same(ColumnSpec("intent_ref"), "", _CORPUS_TEXTS[i : i + 500] + [None, ""])


_auth_text = st.lists(
    st.one_of(
        st.sampled_from(["bearer", "Bearer", "BASIC", "ToKeN", "token", "beare", "basi", "tok en", "ba\u017fic"]),
        st.sampled_from([" ", "\t", "\n", "=", ":", "\\n", "\\u0041", "abcDEF123456", "xyz+/=", "\u212a", "\u0130"]),
        st.text(max_size=6),
    ),
    max_size=10,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=_auth_text)
def test_auth_gate_never_skips_a_text_the_regex_matches(text):
    m = Masker(key=KEY)
    gated: list[str] = []
    scanned: list[str] = []
    assert m._d_auth(text, gated) == m._d_auth_scan(text, scanned)
    assert gated == scanned
    if text.isascii() and not any(w in text.lower() for w in ("bearer", "basic", "token")):
        assert _AUTH_RE.search(text) is None


def test_auth_gate_on_the_corpus():
    m = Masker(key=KEY)
    skipped = 0
    for text in _CORPUS_TEXTS:
        if text.isascii() and not any(w in text.lower() for w in ("bearer", "basic", "token")):
            assert _AUTH_RE.search(text) is None, text
            skipped += 1
        assert m._d_auth(text, []) == m._d_auth_scan(text, []), text
    assert 0 < skipped < len(_CORPUS_TEXTS)  # the gate is taken, and not for every text


# UUIDs the card detector must see (a 13+ digit run joined across hyphens) among plain ones
_CARD_UUIDS = ["abcd4111-1111-1111-1111-abcdefabcdef", "17156075-1713-4453-a731-2897eb000005"]
_uuid_texts = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.sampled_from(_CARD_UUIDS),
    st.from_regex(r"\A[0-9]{8}-[0-9]{4}-[0-9]{4}-[0-9a-f]{4}-[0-9]{12}\Z"),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_uuid_texts, min_size=1, max_size=60))
def test_uuid_chunk_check_equals_plain_shape_per_text(values):
    """The chunk names the UUIDs with a run of 13+ digits (hyphens dropped), which holds every one
    _plain_shape does not prove plain (it asks the card detector about those runs)."""
    todo = _plain_uuid_chunk(values)
    assert todo == [i for i, v in enumerate(values) if max(map(len, re.findall(r"[0-9]+", v.replace("-", "")))) >= 13]
    assert {i for i, v in enumerate(values) if not _plain_shape(v)} <= set(todo)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_uuid_texts, min_size=1, max_size=20))
def test_a_uuid_plain_shape_proves_is_one_the_masker_leaves_unchanged(values):
    m = new_masker()
    for v in values:
        if _plain_shape(v):
            assert m.mask_text(v) == v


_hex_texts = st.one_of(
    st.binary(min_size=16, max_size=60).map(bytes.hex),
    st.from_regex(r"\A[a-f]{2}[0-9]{2}[0-9a-f]{28,40}\Z"),
    st.from_regex(r"\A[0-9]{32,45}\Z"),
    st.sampled_from(["4111111111111111" + "a" * 16, "a" * 16 + "4111111111111111", "0" * 32]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_hex_texts, min_size=1, max_size=40))
def test_hex_chunk_check_names_every_text_plain_shape_does_not_prove(values):
    todo = _plain_hex_chunk(values)
    assert todo is not None
    assert {i for i, v in enumerate(values) if not _plain_shape(v)} <= set(todo)
    m = new_masker()
    for i, v in enumerate(values):
        if i not in todo:
            assert _plain_shape(v) and m.mask_text(v) == v


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(_hex_texts, min_size=1, max_size=20),
    odd=st.sampled_from(["", "ab", "A" * 40, "é" * 40, "a" * 39 + ",", "a" * 39 + "\n", "g" * 40, "0" * 31]),
    at=st.integers(min_value=0, max_value=20),
)
def test_hex_chunk_check_declines_a_chunk_with_any_other_text(values, odd, at):
    assert _plain_hex_chunk(values[:at] + [odd] + values[at:]) is None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(_uuid_texts, min_size=1, max_size=30),
    odd=st.sampled_from(["", "x", "0" * 36, "abcd4111-1111-1111-1111-abcdefabcde\n", "１" * 36, "g" * 36]),
    at=st.integers(min_value=0, max_value=30),
)
def test_uuid_chunk_check_declines_a_chunk_with_any_other_text(values, odd, at):
    values = values[:at] + [odd] + values[at:]
    assert _plain_uuid_chunk(values) is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(_uuid_texts, min_size=4, max_size=60, unique=True),
    null=st.sampled_from(["", "NULL", "abcd4111-1111-1111-1111-abcdefabcdef", "00000000-0000-0000-0000-000000000000"]),
    add_null=st.booleans(),
)
def test_uuid_columns_chunk_equals_per_cell(values, null, add_null):
    if add_null:
        values = values + [null]  # a text equal to the NULL literal is formatted (told apart), not kept
    _same(ColumnSpec("idempotency_key"), null, values)
    _same(ColumnSpec("idempotency_key"), null, values + [None])


def test_the_hex_chunk_minimum_is_the_digest_rule_minimum():
    assert _HEX_DIGEST_MIN == _HASH_MIN
