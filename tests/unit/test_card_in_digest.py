"""A Luhn-valid run of digits inside a hex digest is no card (found by a tester: 12 of 43,559
sidekiq-unique-jobs digests were rewritten as ``[card#…]`` in an export, and raised a false
``secret_at_rest`` on the digest column)."""

from __future__ import annotations

import hashlib

import pytest

from idemview.config import new_masker
from idemview.masking.validators import card_spans, luhn_valid

CARD = "4111111111111111"  # Visa test number: issuer 4, Luhn valid


def digest_with(run: str, length: int) -> str:
    """A lower-case hex token of ``length`` characters with ``run`` inside, letters on both sides."""
    head = "51a"
    tail = hashlib.sha256(run.encode()).hexdigest()
    tail = "e" + tail.lstrip("0123456789")
    return (head + run + tail)[:length]


@pytest.mark.parametrize("length", [32, 40, 64])
def test_card_run_inside_a_digest_is_not_masked(length):
    d = digest_with(CARD, length)
    assert CARD in d and len(d) == length
    m = new_masker()
    assert m.mask_text(d) == d
    assert m.mask_text(f"uniquejobs:{d}:LOCKED") == f"uniquejobs:{d}:LOCKED"
    assert m.mask_text(f"digest {d} held by 2 jobs") == f"digest {d} held by 2 jobs"
    assert list(card_spans(d)) == []


def test_a_real_sidekiq_style_digest_with_a_luhn_run():
    # a digest whose own digits carry a Luhn-valid, issuer-plausible 16-digit run (variant of the
    # tester's `uniquejobs:51a…1039e04c…`)
    run = "5425233430109903"  # Mastercard test number
    assert luhn_valid(run)
    d = "51a" + run + "e04cbd2f7a9c01b3d"
    assert len(d) == 36
    assert new_masker().mask_text(d) == d


@pytest.mark.parametrize(
    "text",
    [
        CARD,
        f"card {CARD} charged",
        f"ab{CARD}",  # a short hex neighbour is no digest: still a card
        f"{CARD}deadbeef",  # 24 characters: below a digest's length
        "4111 1111 1111 1111",
        f'{{"pan": "{CARD}"}}',
    ],
)
def test_cards_outside_digests_stay_masked(text):
    out = new_masker().mask_text(text)
    assert CARD not in out.replace(" ", "")
    assert "card#" in out


def test_all_digit_token_is_not_a_digest():
    # 32 digits with no hex letter: an id, not a digest; a run over 19 digits was never a card, and
    # the rule for digests does not change that
    token = CARD * 2
    assert list(card_spans(token)) == []
