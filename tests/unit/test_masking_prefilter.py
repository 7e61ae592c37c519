"""The masker's prefilter keeps recall (issue 21): a text it rejects (shorter than 6 characters, a UUID or
lower-case hex, or no detector family's required anchor: :func:`idemview.masking.patterns._families`)
gives no detection when every detector runs on it ungated. Checked over generated strings (anchor
characters, digit groups, pieces of real secrets) and over the masking corpus (tests/masking_corpus.py),
cut around each secret so that anchors go missing."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from idemview.config import new_masker
from idemview.masking.patterns import _families
from idemview.masking.validators import _plain_shape
from tests.masking_corpus import secret_cases

MASKER = new_masker()


def rejected(text: str) -> bool:
    """What ``Masker._mask_text`` skips without a detector (no user patterns)."""
    return len(text) < 6 or _plain_shape(text) or _families(text) == 0


def ungated(text: str) -> list[str]:
    """Kinds every detector step finds in ``text``, each run whatever the prefilter says."""
    found: list[str] = []
    out = text
    for _bits, step in MASKER._steps:
        out = step(out, found)
    return found


def _texts(v) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return [t for x in v.values() for t in _texts(x)] + [k for k in v if isinstance(k, str)]
    if isinstance(v, list):
        return [t for x in v for t in _texts(x)]
    return []


CASES = secret_cases()
SECRETS = sorted({c.secret for c in CASES if c.secret})
assert not MASKER.rules.patterns  # the property is about the built-in detectors


def test_corpus_cuts():
    """Every corpus text and secret, and every cut of them (a prefix/suffix/slice that loses an anchor):
    rejected means nothing found. Not vacuous: many cuts are rejected."""
    n_rejected = 0
    for c in CASES:
        for t in _texts(c.value) + ([json.dumps(c.value)] if not isinstance(c.value, str) else []):
            assert not rejected(t) or not ungated(t), (c.kind, c.context)
    for s in SECRETS:
        assert not rejected(s) or not ungated(s), s  # (a password alone is found by its name, not its shape)
        pieces = {s[i:j] for i in range(0, len(s), max(1, len(s) // 12)) for j in range(i + 1, len(s) + 1, 3)}
        for p in pieces:
            if rejected(p):
                n_rejected += 1
                assert not ungated(p), (s, p)
    assert n_rejected > 500


ANCHORS = list("@:/+=%&-._ \"'<>\\()#?;~") + ["://", "eyJ", "-----BEGIN ", "Bearer ", "token=", "\\u00", "&#"]
piece = st.one_of(
    st.text(alphabet="0123456789", min_size=1, max_size=19),
    st.text(alphabet="abcdefABCDEF0123456789-", min_size=1, max_size=40),
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-", min_size=1, max_size=48),
    st.sampled_from(ANCHORS),
    st.sampled_from(SECRETS).flatmap(lambda s: st.integers(0, len(s)).map(lambda i: s[i:] if i % 2 else s[:i])),
    st.text(min_size=1, max_size=8),
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(piece, min_size=1, max_size=8).map("".join))
def test_generated_rejected_texts_find_nothing(text):
    if rejected(text):
        assert ungated(text) == [], text


@pytest.mark.parametrize(
    "text",
    [
        "ch_1987200_1",
        "payment.capture",
        "succeeded",
        "billing.tasks.charge",
        "9e3779b1-0085-4d45-8757-71be6d021923",
        "ord_1987200",
        "result-123456",
    ],
)
def test_ledger_ids_and_statuses_are_rejected(text):
    """What the prefilter is for: the ids, kinds and statuses that fill a ledger never reach a detector."""
    assert rejected(text)
