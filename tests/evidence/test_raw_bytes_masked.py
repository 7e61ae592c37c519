"""A text cell that is not UTF-8 is shown and exported in its escaped form (``\\x80``,
:class:`idemview.ledger.rawtext.RawText`). A secret glued to an escaped byte (``\\x80alice@example.com``,
``\\xffBearer …``, ``\\x804111111111111111``) was missed by every detector, and the export wrote it in
clear; the same for a duplicate_effect sentence naming such an effect reference. Found by exporting a
SQLite ledger whose TEXT cells hold such bytes."""

from __future__ import annotations

import sqlite3

import pytest

from idemview.cli import main
from idemview.ledger.rawtext import RawText
from idemview.masking.engine import Masker

SECRETS = ("alice@example.com", "4111111111111111", "abcdef0123456789abcdef0123456789", "hunter2pass")


def test_secrets_after_an_escaped_byte_are_masked():
    m = Masker(key=b"k" * 32)
    got = {
        b: m.mask_message(RawText(b))
        for b in (
            b"\xff\xfe raw \x80alice@example.com",
            b"\x804111111111111111",
            b"\xffBearer abcdef0123456789abcdef0123456789",
            b"\xe9password=hunter2pass",
        )
    }
    assert got[b"\xff\xfe raw \x80alice@example.com"].startswith("\\xff\\xfe raw \\x80 [email#")
    assert got[b"\x804111111111111111"].startswith("\\x80 [card#") and got[b"\x804111111111111111"].endswith("1111]")
    assert "[bearer#" in got[b"\xffBearer abcdef0123456789abcdef0123456789"]
    assert "hunter2pass" not in got[b"\xe9password=hunter2pass"]
    # nothing to hide: the text is left exactly as it was (escapes glued or not)
    for b in (b"\xe9t\xe9 x", b"\xffplain"):
        assert m.mask_message(RawText(b)) == RawText(b)


def test_export_masks_secrets_glued_to_bytes_that_are_not_utf8(tmp_path):
    demo = tmp_path / "demo.db"
    assert main(["demo", str(demo), "--operations", "40"]) == 0  # the ledger, its layout and effects
    c = sqlite3.connect(demo)
    c.execute(
        "UPDATE operations SET error = CAST(x'80' || CAST('alice@example.com' AS BLOB) AS TEXT), "
        "request_body = CAST(x'ff' || CAST('4111111111111111' AS BLOB) AS TEXT) WHERE id <= 5"
    )
    c.execute(
        "UPDATE attempts SET error = CAST(x'ff' || CAST('Bearer abcdef0123456789abcdef0123456789' AS BLOB) AS TEXT)"
        " WHERE id <= 5"
    )
    c.commit()
    c.close()
    layout = str(tmp_path / "demo-layout.toml")
    for rows in ("operations", "attempts"):
        out = tmp_path / f"{rows}.csv"
        assert main(["export", str(demo), "--layout", layout, "--rows", rows, "--out", str(out)]) == 0
        text = out.read_bytes().decode("utf-8")
        assert not [s for s in SECRETS if s in text], rows
        assert ("[email#" in text and "[card#" in text) if rows == "operations" else "[bearer#" in text


@pytest.mark.xfail(
    strict=True,
    reason="a JSON payload that is a bare number is unwrapped (formatting._pre) and passes the masker as a "
    "number column's int; inside a list or object the same card number is tagged. Fix belongs in the "
    "export's payload formatters and their whole-column paths (not small)",
)
def test_export_masks_a_payload_that_is_a_bare_card_number(tmp_path):
    demo = tmp_path / "demo.db"
    assert main(["demo", str(demo), "--operations", "40"]) == 0
    c = sqlite3.connect(demo)
    c.execute(
        "UPDATE operations SET request_body = '4111111111111111', response_body = '[4111111111111111]' WHERE id <= 3"
    )
    c.commit()
    c.close()
    out = tmp_path / "ops.csv"
    assert main(["export", str(demo), "--layout", str(tmp_path / "demo-layout.toml"), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "[card#" in text  # the list's card is tagged
    assert "4111111111111111" not in text
