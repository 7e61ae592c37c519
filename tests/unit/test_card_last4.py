"""``keep_card_last4`` holds on every path that masks a card (issue #20, item 11c): a card detected in
text, a value under a card name (text, a JSON number, a whole JSON value), a JSON number passing Luhn,
the named-field rule in text; every card of the masking corpus shows its own last four digits when
the option is on and none when it is off, and the manifest says which was applied."""

from __future__ import annotations

import json
import re

import pytest

from idemview.masking.masker import TAG_RE, Masker, MaskRules, card_last4
from tests.masking_corpus import secret_cases

KEY = bytes(range(32))
CARDS = [c for c in secret_cases() if c.kind.startswith("card_")]
CARD_TAG = re.compile(r"\[card#[0-9a-f]{6}(?: …(\d{4}))?\]")


def _maskers():
    return Masker(key=KEY), Masker(MaskRules.from_config({"keep_card_last4": False}), key=KEY)


def _text(v) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _card_tags(out) -> list[str | None]:
    """The last-four part of each card tag in ``out`` (``None`` for a tag without one)."""
    return [m.group(1) for m in CARD_TAG.finditer(_text(out))]


# Where a card value sits: as the corpus gives it (text and JSON contexts, the detectors), and the
# same value whole under a card-named column or field (the named-field rule, the Masker's JSON walk).
PLACES = {
    "as_is": lambda v: (v, None),
    "card_column": lambda v: (v, "card"),
    "pan_field_in_json": lambda v: ({"payment": {"pan": v, "amount": 1200}}, None),
    "card_list_pair": lambda v: ([["card_number", v]], None),
}


@pytest.mark.parametrize("place", list(PLACES))
def test_every_masked_card_keeps_its_last_four_when_on_and_none_when_off(place):
    assert len(CARDS) >= 7 * 12  # seven card kinds in every corpus context (text, JSON, number...)
    on, off = _maskers()
    for case in CARDS:
        value, column = PLACES[place](case.value)
        want = case.secret[-4:]
        got_on = on.mask_value(value, column)
        got_off = off.mask_value(value, column)
        for got in (got_on, got_off):
            assert case.secret not in _text(got), (case.kind, case.context, place)
        tags_on, tags_off = _card_tags(got_on), _card_tags(got_off)
        assert tags_on and tags_off, (case.kind, case.context, place, got_on)
        assert tags_on == [want] * len(tags_on), (case.kind, case.context, place, got_on)
        assert tags_off == [None] * len(tags_off), (case.kind, case.context, place, got_off)
        assert all(TAG_RE.fullmatch(m.group()) for m in CARD_TAG.finditer(_text(got_on)))  # a tag as documented


def test_whole_values_under_a_card_name():
    """The examples of the issue and variants: a JSON object, a JSON number (int and float), a card
    in words, bytes; two different cards keep none (one tag cannot name two cards)."""
    on, off = _maskers()
    for value in (
        {"number": "4242 4242 4242 4242", "exp": "12/30"},
        {"number": 4242424242424242},
        4242424242424242,
        4242424242424242.0,
        "Visa 4242-4242-4242-4242 exp 12/30",
        b"4242424242424242",
        ["4242424242424242"],
    ):
        t_on, t_off = on.mask_value(value, "card"), off.mask_value(value, "card")
        assert re.fullmatch(r"\[card#[0-9a-f]{6} …4242\]", t_on), (value, t_on)
        assert re.fullmatch(r"\[card#[0-9a-f]{6}\]", t_off), (value, t_off)
    # the float and the int are the same card number: the same tag
    assert on.mask_value(4242424242424242.0, "card") == on.mask_value(4242424242424242, "card")
    two = {"old": "4242424242424242", "new": "5555555555554444"}
    assert re.fullmatch(r"\[card#[0-9a-f]{6}\]", on.mask_value(two, "card"))
    assert re.fullmatch(r"\[card#[0-9a-f]{6}\]", on.mask_value("tok_visa", "card"))  # no card number in it
    assert card_last4({"a": ["x", {"b": "4000 0566 5566 5556"}]}) == "5556"
    assert card_last4("4242424242424242 and 4242-4242-4242-4242") == "4242"  # one card twice is one
    # a provider's card object (Stripe's payment_method_details.card) holds only its last four
    assert re.fullmatch(r"\[card#[0-9a-f]{6} …0005\]", on.mask_value({"brand": "amex", "last4": "0005"}, "card"))
    assert re.fullmatch(r"\[card#[0-9a-f]{6}\]", off.mask_value({"brand": "amex", "last4": "0005"}, "card"))


def test_manifest_says_what_was_applied(tmp_path):
    from idemview.evidence.writer import ColumnSpec, write_evidence

    for keep, sample in ((True, "…1234"), (False, "no digit")):
        m = Masker(MaskRules.from_config({"keep_card_last4": keep}), key=KEY)
        out = tmp_path / f"cards-{keep}.csv"
        res = write_evidence(
            out,
            [ColumnSpec("card", "json"), ColumnSpec("note", "text")],
            iter([({"number": "4242424242424242"}, "paid with 5555 5555 5555 4444")]),
            masker=m,
            manifest={},
        )
        rules = json.loads(open(res.manifest_path, encoding="utf-8").read())["masking"]["rules"]
        assert rules["keep_card_last4"] is keep
        assert sample in rules["card_tag"]
        text = out.read_text(encoding="utf-8")
        assert "4242424242424242" not in text and "5555 5555 5555 4444" not in text
        assert ("…4242" in text and "…4444" in text) is keep
        assert "…" not in text or keep
