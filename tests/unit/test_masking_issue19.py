"""Issue 19 items 8-11 (masking side): each example of the issue, and a variant of our own.

Item 8: the inputs that leaked unmasked in the CSV (``Masker.for_column``, the writer's path) and the
GUI (``SharedMasker.text``, every grid/detail cell).
"""

from __future__ import annotations

import json

import pytest

from idemview.masking.masker import Masker
from idemview.services.session import SharedMasker
from tests.masking_corpus import leaked_pieces

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

# (value as stored, the secret in it)
ITEM8 = [
    ({"order": "o-1", "card": None, "n": 4111111111111111}, "4111111111111111"),  # card as a JSON number
    ([5555555555554444, 12], "5555555555554444"),  # variant: in a list
    ("<wsse:Security><wsse:Password>Sup3rS3cretPw</wsse:Password></wsse:Security>", "Sup3rS3cretPw"),
    ('<ns2:ClientSecret Type="x">QmFyQmF6UXV4</ns2:ClientSecret>', "QmFyQmF6UXV4"),  # variant
    ("ERROR: duplicate key\nDETAIL: Key (api_token)=(tok_8f7a6b5c4d3e2f1a) already exists.", "tok_8f7a6b5c4d3e2f1a"),
    ("DETAIL: Key (tenant, password)=(acme, Hunt3r2Hunt3r) is not present in table", "Hunt3r2Hunt3r"),  # variant
    (
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdo+/==;"
        "EndpointSuffix=core.windows.net",
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdo+/==",
    ),
    ("Endpoint=sb://x.servicebus.windows.net/;SharedAccessKey=c2VjcmV0c2VjcmV0c2VjcmV0", "c2VjcmV0c2VjcmV0c2VjcmV0"),
    ("retry?dsn=postgres%3A%2F%2Fapp%3Ahunter2pass%40db%3A5432%2Fx", "hunter2pass"),
    ("to=alice.smith%40example.com&x=1", "alice.smith@example.com"),
    ("cb?u=mysql%253A%252F%252Froot%253ADoubleEnc0ded%2540h", "DoubleEnc0ded"),  # variant: encoded twice
    ("contact jürgen@müller-straße.de", "jürgen@müller-straße.de"),
    (json.dumps({"to": "José.Núñez@correo.españa.es"}), "José.Núñez@correo.españa.es"),  # as JSON text
    ("curl -u user:pass1234 https://api.example.com", "pass1234"),
    ("wget --user=ops --password=x; curl --user 'ops:S3cr3tPw!' https://h", "S3cr3tPw!"),  # variant
    ("session_" + JWT, JWT),
    ("password\u00a0hunter2secret", "hunter2secret"),
    ("password\uff1ahunter2secret", "hunter2secret"),
    ("パスワード password\uff1dzenkaku9secret", "zenkaku9secret"),  # variant: full-width equals sign
]


@pytest.mark.parametrize(("value", "secret"), ITEM8, ids=[str(i) for i in range(len(ITEM8))])
def test_item8_examples_are_masked_in_csv_and_gui(value, secret):
    csv_cell = Masker().for_column("detail")(value)
    assert leaked_pieces(secret, csv_cell) == [], csv_cell
    gui = SharedMasker()
    assert leaked_pieces(secret, gui.value(value)) == []
    assert leaked_pieces(secret, gui.text(value if isinstance(value, str) else json.dumps(value))) == []


def test_item8_look_alikes_next_to_the_new_detectors_stay():
    m = Masker()
    for text in (
        "DETAIL: Key (idempotency_key)=(ord-1) already exists.",
        "<OrderId>ord_000123</OrderId>",
        "curl -u ops https://example.com",  # no password given
        "next=%2Forders%2F123&page=2",
        {"amount": 4111111111111112, "epoch_ms": 1716200000000},  # fails Luhn; an epoch
        "a+b=c 10+20=30",
    ):
        assert m.mask_value(text) == text
    assert m.counts == {}
