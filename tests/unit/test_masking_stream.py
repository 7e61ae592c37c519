"""The stream masker (idemview.masking.stream, issue 27 item 1) gives exactly the whole-document mask.

Oracle: ``encode(masker.mask_value(jsontext.loads(text)))`` with a Masker of the same key, and the same
counts. ``SMALL`` is shrunk so that every level of the generated documents is walked by the stream code
(a container longer than SMALL is streamed; shorter ones are handed to the Masker's own walk), and the
secrets land across those boundaries.
"""

from __future__ import annotations

import json
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from idemview.domain import jsontext
from idemview.evidence.writer import ColumnSpec, _dumps, _make_formatter
from idemview.masking import stream
from idemview.masking.masker import Masker
from idemview.masking.stream import JsonText, mask_json_text

KEY = b"s" * 32

# Secrets in every encoding the masker decodes (percent/form, JSON \u escapes, HTML entities, base64),
# plain shapes, and ordinary text.
SECRETS = [
    "user.name@example.com",
    "4111 1111 1111 1111",
    "Bearer abcDEF123456ghiJKL",
    "postgres://app:hunter2pw@db.internal:5432/x",
    "password=s3cr3t-Value",
    "card%3D4111111111111111",
    "token%3Dabc123DEF456ghi",
    "mail: user&#64;example.com",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "AKIAIOSFODNN7EXAMPLE",
    "DE89 3704 0044 0532 0130 00",
    "+44 20 7946 0958",
    "cGFzc3dvcmQ9aHVudGVyMg==",
    "ordinary words, nothing here",
    "it_0000042",
    "",
]
NAMES = ["id", "note", "email", "password", "api_key", "name", "value", "key", "Authorization", "tags", "x"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.sampled_from([4111111111111111, 5555555555554444, 1700000000000, 4242424242424242.0]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(SECRETS),
    st.text(max_size=12),
    st.builds(lambda a, b: a + " " + b, st.sampled_from(SECRETS), st.sampled_from(SECRETS)),
)


def _header(v):
    return {"name": "Cookie", "value": v}


values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.dictionaries(st.sampled_from(NAMES + SECRETS[:3]), inner, max_size=6),
        st.builds(_header, inner),
        st.builds(lambda v: ["Authorization", v], inner),
    ),
    max_leaves=40,
)
containers = st.one_of(st.lists(values, min_size=1, max_size=8), st.dictionaries(st.sampled_from(NAMES), values))
layouts = st.sampled_from(
    [
        {"separators": (",", ":")},
        {"indent": 2},
        {"ensure_ascii": True},
        {"indent": "\t", "ensure_ascii": False},
    ]
)


def whole(text: str) -> tuple[str | None, dict]:
    m = Masker(key=KEY)
    try:
        v = jsontext.loads(text)
    except ValueError:
        return None, {}
    if not isinstance(v, (dict, list)):
        return None, {}
    return _dumps(m.mask_value(v)), m.counts


def streamed(text: str) -> tuple[str | None, dict]:
    m = Masker(key=KEY)
    out = mask_json_text(m, text, _dumps)
    return out, (m.counts if out is not None else {})


@pytest.fixture(params=[8, 40, 300])
def small(request, monkeypatch):
    monkeypatch.setattr(stream, "SMALL", request.param)
    return request.param


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=containers, layout=layouts)
def test_stream_equals_whole_document(small, doc, layout):
    text = json.dumps(doc, **layout)
    assert streamed(text) == whole(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    doc=containers,
    cut=st.integers(min_value=0, max_value=10**6),
    junk=st.sampled_from(["", ",", "]", "}", '"', "x", "{"]),
)
def test_broken_json_is_refused_like_the_parser(small, doc, cut, junk):
    """Truncated or spliced text: the stream masker returns None exactly when the parser refuses it
    (the caller then masks the text whole), and otherwise the same mask."""
    text = json.dumps(doc)
    at = cut % (len(text) + 1)
    broken = text[:at] + junk + text[at + (1 if junk else 0) :]
    got, counts = streamed(broken)
    exp, exp_counts = whole(broken)
    assert got == exp
    if got is not None:
        assert counts == exp_counts


@pytest.mark.parametrize("depth", [99, 100, 101, 150])
def test_nesting_bound_is_the_parsers(small, depth):
    pad = ["ordinary text long enough to stream " * 2, "user@example.com"]
    doc: object = pad
    for _ in range(depth - 1):
        doc = [doc, "x" * 20]
    text = json.dumps(doc)
    got = streamed(text)
    assert got == whole(text)
    assert (got[0] is None) == (depth > 100)


def test_a_realistic_document_streams_at_the_default_size():
    items = [{"id": f"it_{i:07d}", "email": f"u{i}@example.com", "n": 4111111111111111} for i in range(3000)]
    doc = {"items": items, "auth": {"name": "Authorization", "value": "Bearer zzzZZZ999aaa"}}
    text = json.dumps(doc)
    assert len(text) > stream.SMALL
    got, counts = streamed(text)
    assert (got, counts) == whole(text)
    assert counts["email"] == 3000 and counts["card"] == 3000
    assert "u42@example.com" not in got


def test_the_writer_gives_the_same_cell_streamed_or_parsed():
    text = json.dumps([{"note": f"pay 4111 1111 1111 1111 row {i}", "password": "pw" + str(i)} for i in range(4000)])
    col = ColumnSpec("response", "json")
    a, b = Masker(key=KEY), Masker(key=KEY)
    streamed_cell = _make_formatter(col, a, "")(JsonText(text, lambda: json.loads(text)))
    parsed_cell = _make_formatter(col, b, "")(json.loads(text))
    assert streamed_cell == parsed_cell
    assert a.counts == b.counts and a.counts["password"] == 4000
    # broken JSON falls back to the whole-value path: its text, masked as text
    c = Masker(key=KEY)
    broken = text[:-1]
    assert _make_formatter(col, c, "")(JsonText(broken, lambda: broken)) == _make_formatter(col, Masker(key=KEY), "")(
        broken
    )


def test_stream_memory_is_bounded_by_the_text_not_the_tree():
    """A 4 MB document of small objects: the stream peaks near the size of its output (the parse tree
    of the whole-document path is many times the text)."""
    text = json.dumps([{"id": f"it_{i:07d}", "qty": i % 7, "tags": ["a", "b"], "ok": True} for i in range(60000)])
    m = Masker(key=KEY)
    tracemalloc.start()
    try:
        out = mask_json_text(m, text, _dumps)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    tracemalloc.start()
    try:
        whole_out = _dumps(Masker(key=KEY).mask_value(json.loads(text)))
        whole_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out == whole_out
    assert peak < 4 * len(text), f"stream peak {peak / len(text):.1f}x the text"
    assert whole_peak > 2 * peak, "the oracle path is not heavier: the test shows nothing"
