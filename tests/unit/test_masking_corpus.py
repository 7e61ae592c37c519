"""The masking corpus (issue 19 item 8): recall 100 % on every secret kind in every context, and no
look-alike masked. The corpus is generated (``tests/masking_corpus.py``); per-kind precision and
recall are reported by ``make bench-masking``."""

from __future__ import annotations

import pytest

from idemview.masking.masker import Masker
from tests.masking_corpus import LOOKALIKE_KINDS, SECRET_KINDS, leaked_pieces, lookalike_cases, secret_cases

SECRETS = secret_cases()
LOOKALIKES = lookalike_cases()


def test_corpus_is_broad():
    assert len(SECRET_KINDS) >= 40
    assert len(LOOKALIKE_KINDS) >= 15
    assert len({c.context for c in SECRETS}) >= 10


@pytest.mark.parametrize("case", SECRETS, ids=[f"{c.kind}-{c.context}" for c in SECRETS])
def test_no_piece_of_a_secret_survives(case):
    out = Masker(key=b"c" * 32).mask_value(case.value)
    assert leaked_pieces(case.secret, out) == [], out


@pytest.mark.parametrize("case", LOOKALIKES, ids=[f"{c.kind}-{c.context}" for c in LOOKALIKES])
def test_look_alikes_stay_visible(case):
    m = Masker(key=b"c" * 32)
    assert m.mask_value(case.value) == case.value
    assert m.counts == {}
