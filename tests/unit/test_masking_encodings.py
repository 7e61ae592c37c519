"""Secrets in another spelling (tester2, issue #19 item 8): each leaked unmasked through the CSV and the
GUI on main. One kind of fault — a detector sees only the text as written — fixed in the masker's own
steps (``Masker._mask_text``: decoded views of character references, ``\\u`` escapes of ASCII letters,
base64 tokens, compatibility/invisible letters; ``--name=value`` options), so every sink inherits it.
"""

from __future__ import annotations

import base64
import json
import sqlite3

import pytest

from idemview.cli import main
from idemview.masking.masker import Masker
from idemview.services.demo import write_demo
from idemview.services.session import SharedMasker
from tests.masking_corpus import leaked_pieces

PW = "Zq9!hunter2xK"


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


# (value as stored, the secret in it)
ENCODED = [
    (_b64(json.dumps({"password": PW})), PW),  # base64 of a JSON with a password
    ("payload=" + base64.urlsafe_b64encode(json.dumps({"pwd": PW}).encode()).decode().rstrip("="), PW),  # base64url
    (_b64("4111111111111111"), "4111111111111111"),  # a card number, base64
    (_b64("dave.jones@example.com"), "dave.jones@example.com"),  # an e-mail, base64
    ("&#x70;assword=" + PW, PW),  # hexadecimal character reference
    ("&#112;&#97;ssword: " + PW, PW),  # decimal character references
    ("contact dave.jones&#64;example.com", "dave.jones@example.com"),
    ('{"\\u0070assword": "' + PW + '"}', PW),  # JSON escape of an ASCII letter
    ('{"to": "dave.jones\\u0040example.com"}', "dave.jones@example.com"),
    ("psql --password=" + PW + " -h db", PW),  # a long command-line option
    ("mysqldump --user=app --password='" + PW + "' shop", PW),
    ('{\n  "password":\n    "' + PW + '"\n}', PW),  # quoted value on the next line
    ("\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44=" + PW, PW),  # full-width letters in the name
    ("pass\u200bword=" + PW, PW),  # a zero-width space in the name
]

LOOK_ALIKES = [
    "9b29bad7-491a-487a-8909-9749171ddb6f",
    "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881",
    "ORD_9F8A7B6C5D4E3F2A1B0C",
    "2CKfyJOgsi1LeMIOl8T3cpY/5+tNTlTi",  # base64 of random bytes
    _b64("hello world, this is fine"),  # base64 of harmless text
    _b64("1700000000"),  # base64 of an epoch
    "Tom &amp; Jerry &#169; 2026",
    "caf\u00e9 \uff21\uff22\uff23",
    '{"msg": "\\u0041BC"}',
    "req_AbCdEfGhIjKlMnOpQrSt",
    "--passes=3 --retries=5",
]


@pytest.mark.parametrize(("value", "secret"), ENCODED, ids=[str(i) for i in range(len(ENCODED))])
def test_secret_in_another_spelling_is_masked_in_csv_and_gui(value, secret):
    csv_cell = Masker().for_column("detail")(value)
    assert leaked_pieces(secret, csv_cell) == [], csv_cell
    gui = SharedMasker()
    assert leaked_pieces(secret, gui.text(value)) == []


def test_look_alikes_of_the_encodings_stay_visible():
    m = Masker()
    for text in LOOK_ALIKES:
        assert m.mask_text(text) == text
    assert m.counts == {}


def test_export_csv_masks_encoded_secrets_in_a_text_column(tmp_path, capsys):
    led = tmp_path / "prod.db"
    write_demo(led, operations=80, seed=3)
    values = [v for v, _s in ENCODED[:8]]
    with sqlite3.connect(led) as c:
        ids = [r[0] for r in c.execute("SELECT id FROM operations ORDER BY id LIMIT ?", (len(values),))]
        for i, v in zip(ids, values, strict=True):
            c.execute("UPDATE operations SET error = ? WHERE id = ?", (v, i))
    c.close()
    out = tmp_path / "ev.csv"
    layout = tmp_path / "prod-layout.toml"
    assert main(["export", str(led), "--layout", str(layout), "--now", "2026-06-15T12:00:00Z", "--out", str(out)]) == 0
    text = out.read_text("utf-8")
    for value, secret in ENCODED[:8]:
        # neither the secret nor its encoded spelling (the CSV doubles quotes: compare both forms)
        assert secret not in text and value not in text and value.replace('"', '""') not in text, value
    assert text.count("[password#") >= 4 and "[card#" in text and "[email#" in text
