"""The pieces the paged export masks a large cell in (``idemview.masking.stream``, issue 27 item 1) give
exactly the whole-cell mask: a long text cut at random page edges with secrets placed across them
(:func:`mask_text_pieces`), a JSON string's raw text cut inside escapes and surrogate pairs
(:func:`json_string_pieces`), a JSON document walked over a refillable window (:func:`mask_json_pages`),
and the formula guard applied piece by piece (``pages._Guard``). Also: the carry covers every detector
pattern whose longest match is bounded (:data:`CARRY`).
"""

from __future__ import annotations

import json
import re
from re import _parser  # type: ignore[attr-defined]
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from idemview.evidence import cells, pages
from idemview.evidence.writer import _dumps
from idemview.masking import detectors, patterns, rules, stream, validators
from idemview.masking.masker import Masker
from idemview.masking.stream import json_string_pieces, mask_json_pages, mask_json_text, mask_text_pieces

KEY = b"q" * 32
SECRETS = [
    "alice@example.com",
    "4111 1111 1111 1111",
    "Authorization: Bearer abcDEF1234567890xyzQRS",
    "postgres://app:hunter2pw@db.internal:5432/x",
    "password=s3cr3t-Value",
    "token%3Dabc123DEF456ghi",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "AKIAIOSFODNN7EXAMPLE",
    "DE89 3704 0044 0532 0130 00",
    "+44 20 7946 0958",
    "mysql -u root -phunter2 -h db",
    "<password>hunter2</password>",
    "caf\u00e9 \U0001f600 \u00e9\u00e8",
    "=cmd|' /C calc'!A0",
    "; -1+2\n@SUM(A1)",
]
FILLER = ["lorem ", "ipsum ", "dolor\n", "sit amet, ", "42 ", "x", " "]

segments = st.lists(st.one_of(st.sampled_from(SECRETS), st.sampled_from(FILLER)), min_size=1, max_size=120)


def _split(text: str, cuts: list[int]) -> list[str]:
    edges = sorted({min(len(text), c) for c in cuts})
    out, last = [], 0
    for e in edges:
        out.append(text[last:e])
        last = e
    out.append(text[last:])
    return out


@settings(max_examples=120, deadline=None)
@given(parts=segments, cuts=st.lists(st.integers(min_value=0, max_value=6000), max_size=12))
def test_text_in_pieces_equals_the_whole_text_mask(parts, cuts):
    text = "".join(parts)
    ref = Masker(key=KEY)
    want_cnt: dict[str, int] = {}
    want = ref._mask_text(text, want_cnt)
    m = Masker(key=KEY)
    cnt: dict[str, int] = {}
    # a carry above the longest secret here (the JWT, 92 characters); pieces of ~250 characters
    with mock.patch.object(stream, "CARRY", 200):
        got = list(mask_text_pieces(m, _split(text, cuts), cnt, size=250))
    assert "".join(got) == want
    assert cnt == want_cnt
    if len(text) > 1000:
        assert len(got) > 1  # it did come out in pieces


def test_a_long_secret_dense_text_comes_out_in_pieces_equal_to_the_whole():
    text = "".join(SECRETS[i % len(SECRETS)] + FILLER[i % len(FILLER)] for i in range(3000))
    want = Masker(key=KEY).mask_text(text)
    m = Masker(key=KEY)
    with mock.patch.object(stream, "CARRY", 400):
        got = list(mask_text_pieces(m, _split(text, list(range(0, len(text), 997))), m._counts, size=5000))
    assert len(got) > 10
    assert "".join(got) == want
    assert m.counts == Masker(key=KEY).detected_kinds(text)


raw_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)


@settings(max_examples=200, deadline=None)
@given(
    s=raw_text,
    ascii_only=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=10),
    size=st.integers(min_value=1, max_value=60),
)
def test_a_json_string_decoded_in_pieces(s, ascii_only, cuts, size):
    raw = " " + json.dumps(s + '\U0001f600\\"', ensure_ascii=ascii_only) + "\n"
    got = list(json_string_pieces(_split(raw, cuts), size=size))
    assert "".join(got) == json.loads(raw)


@pytest.mark.parametrize("raw", ['"abc', '"a" x', "[1]", '"\\x"', '"a\u0001"', "", '"\\ud83d'])
def test_not_one_json_string_is_refused(raw):
    try:
        json.loads(raw)
        ok = isinstance(json.loads(raw), str)
    except ValueError:
        ok = False
    if ok:  # the parser keeps a lone surrogate: so do the pieces
        assert "".join(json_string_pieces([raw[:3], raw[3:]], size=1)) == json.loads(raw)
        return
    with pytest.raises(ValueError):
        list(json_string_pieces([raw[:3], raw[3:]], size=1))


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.sampled_from([4111111111111111, 1.5e300, float("1e-7")]),
    st.sampled_from(SECRETS),
    st.text(max_size=20),
)
names = st.sampled_from(["id", "note", "password", "name", "value", "key", "items", "Authorization"])
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.dictionaries(names, inner, max_size=5),
        st.builds(lambda v: {"name": "Cookie", "value": v}, inner),
        st.builds(lambda v: ["Authorization", v], inner),
    ),
    max_leaves=40,
)
documents = st.one_of(st.lists(values, min_size=1, max_size=8), st.dictionaries(names, values, min_size=1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=documents, indent=st.sampled_from([None, 1]), cuts=st.lists(st.integers(0, 3000), max_size=15))
def test_a_document_walked_over_pages_equals_the_whole_text_walk(doc, indent, cuts):
    text = json.dumps(doc, indent=indent, ensure_ascii=False)
    with mock.patch.object(stream, "SMALL", 40), mock.patch.object(stream, "DROP", 50):
        ref = Masker(key=KEY)
        want = mask_json_text(ref, text, _dumps)
        m = Masker(key=KEY)
        out: list[str] = []
        r = mask_json_pages(m, _split(text, cuts), _dumps, out.append)
    assert r is True and want is not None
    assert "".join(out) == want
    assert m.counts == ref.counts


@settings(max_examples=80, deadline=None)
@given(doc=documents, cut=st.integers(1, 400), junk=st.sampled_from(["", "]", ",", "x", "}}", '"']))
def test_a_broken_document_over_pages_is_refused_like_the_whole_text(doc, cut, junk):
    text = json.dumps(doc)
    text = text[: cut % len(text)] + junk
    with mock.patch.object(stream, "SMALL", 40), mock.patch.object(stream, "DROP", 50):
        want = mask_json_text(Masker(key=KEY), text, _dumps)
        m = Masker(key=KEY)
        out: list[str] = []
        r = mask_json_pages(m, _split(text, [cut // 2, cut]), _dumps, out.append)
    if want is None:
        assert r is not True
        assert m.counts == {}
    else:
        assert r is True and "".join(out) == want


@settings(max_examples=300, deadline=None)
@given(
    s=st.text(st.sampled_from("=+-@'\t\r\n;\"0123456789.eE ab\uff1d"), max_size=40),
    cuts=st.lists(st.integers(0, 40), max_size=8),
)
def test_the_guard_in_pieces_equals_the_guard(s, cuts):
    got: list[str] = []
    g = pages._Guard(got.append)
    for piece in _split(s, cuts):
        g.feed(piece)
    g.close()
    assert "".join(got) == cells.encode(s)


def _widths() -> dict[str, int | None]:
    """Every compiled pattern of the masking modules: its longest match (``None``: unbounded)."""
    out: dict[str, int | None] = {}
    for mod in (patterns, validators, detectors, rules):
        for k, v in vars(mod).items():
            if isinstance(v, re.Pattern):
                hi = _parser.parse(v.pattern, v.flags).getwidth()[1]
                out[f"{mod.__name__}.{k}"] = hi if hi < _parser.MAXREPEAT else None
    return out


def test_the_carry_covers_every_bounded_pattern():
    w = _widths()
    bounded = {k: v for k, v in w.items() if v is not None}
    assert len(bounded) >= 15
    # the longest on 2026-12-04: the PostgreSQL key detail, 8,709 characters; CARRY is 16,384
    assert max(bounded.values()) <= stream.CARRY, sorted(bounded.items(), key=lambda kv: -kv[1])[:3]
