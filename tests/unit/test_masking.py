"""Masking engine (DESIGN §6): field names, value detectors, tags, counts, log filter.

Real values are asserted. The property tests plant generated secrets (Luhn-valid cards, mod-97-valid
IBANs, JWTs, provider keys, ...) at random places in random text and JSON and check that neither the
secret nor any 6-character piece of it survives.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import pickle
import re
import string
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from idemview.domain.model import Payload
from idemview.masking.masker import (
    _KV_SKIP_VALUES,
    CREDENTIAL_KINDS,
    TAG_RE,
    Masker,
    MaskingLogFilter,
    MaskRules,
    iban_valid,
    luhn_valid,
)

KEY = b"k" * 32
TAG = r"\[[a-z_]+#[0-9a-f]{6}(?: …\d{4})?\]"


def tag(kind: str) -> str:
    return rf"\[{kind}#[0-9a-f]{{6}}\]"


@pytest.fixture
def m() -> Masker:
    return Masker(key=KEY)


def kinds_in(text: str) -> list[str]:
    return re.findall(r"\[([a-z_]+)#[0-9a-f]{6}", text)


def strip_tags(text: str) -> str:
    """Tags carry random hex by design; remove them before looking for pieces of a secret."""
    return TAG_RE.sub("\x00", text)


def assert_no_leak(secret: str, output: str, context: str = "") -> None:
    """Neither the secret nor any 6-character substring of it may appear in the output, except
    substrings that the surrounding (non-secret) text itself contains."""
    if secret not in context:
        assert secret not in output, f"secret {secret!r} survived in {output!r}"
    rest = strip_tags(output)
    variants = {secret, re.sub(r"[ \-]", "", secret)}
    for v in variants:
        for i in range(len(v) - 5):
            piece = v[i : i + 6]
            if piece in context:
                continue
            assert piece not in rest, f"{piece!r} of {secret!r} survived in {output!r}"


# ---------------------------------------------------------------------------------------------
# Check digits


def test_luhn_and_iban_checks():
    assert luhn_valid("4242424242424242")
    assert luhn_valid("378282246310005")  # Amex test number
    assert not luhn_valid("4242424242424241")
    assert iban_valid("DE89370400440532013000")
    assert iban_valid("GB82 WEST 1234 5698 7654 32")
    assert not iban_valid("DE89370400440532013001")  # check digits wrong
    assert not iban_valid("DE8937040044053201300")  # wrong length for DE
    assert not iban_valid("ZZ89370400440532013000")  # unknown country


# ---------------------------------------------------------------------------------------------
# Field names


@pytest.mark.parametrize(
    "name,kind",
    [
        ("password", "password"),
        ("passwd", "password"),
        ("userPassword", "password"),
        ("DB_PASSWORD", "password"),
        ("secret", "secret"),
        ("client_secret", "secret"),
        ("token", "token"),
        ("access_token", "token"),
        ("refreshToken", "token"),
        ("api_key", "api_key"),
        ("apikey", "api_key"),
        ("X-Api-Key", "api_key"),
        ("APIKey", "api_key"),
        ("access_key", "api_key"),
        ("Authorization", "authorization"),
        ("Proxy-Authorization", "authorization"),
        ("auth", "authorization"),
        ("Cookie", "cookie"),
        ("Set-Cookie", "cookie"),
        ("session", "session"),
        ("session_id", "session"),
        ("sessionid", "session"),
        ("credentials", "credential"),
        ("private_key", "private_key"),
        ("card", "card"),
        ("card_number", "card"),
        ("cardNumber", "card"),
        ("pan", "card"),
        ("cvv", "cvv"),
        ("cvc", "cvv"),
        ("card_verification_code", "cvv"),
        ("ssn", "ssn"),
        ("iban", "iban"),
        ("email", "email"),
        ("customerEmail", "email"),
        ("email_address", "email"),
        ("phone", "phone"),
        ("phone_number", "phone"),
        ("msisdn", "phone"),
        ("pin", "pin"),
        ("Stripe-Signature", "signature"),
    ],
)
def test_sensitive_field_names(m, name, kind):
    assert m.column_kind(name) == kind


@pytest.mark.parametrize(
    "name",
    [
        "key",
        "idempotency_key",
        "Idempotency-Key",
        "dedup_key",
        "scope",
        "status",
        "created_at",
        "tokens_used",
        "prompt_tokens",
        "max_tokens",
        "token_count",
        "token_type",
        "next_page_token",
        "password_changed_at",
        "card_brand",
        "card_last4",
        "cardLast4",
        "card_exp_month",
        "email_verified",
        "email_id",
        "authorization_id",
        "auth_method",
        "author",
        "company",
        "shipping",
        "spinner",
        "access_key_id",
        "session_timeout",
        "fingerprint",
        "intent_ref",
    ],
)
def test_names_that_are_not_sensitive(m, name):
    assert m.column_kind(name) is None


def test_sensitive_column_masks_any_type_but_none_and_bool(m):
    row = m.mask_row(
        {
            "password": "hunter2",
            "cvv": 123,
            "card_number": 4242424242424242,
            "email": None,
            "session": {"user": 5},
            "pin": b"\x01\x02",
            "phone": True,
            "status": "completed",
            "attempts": 3,
        }
    )
    assert re.fullmatch(tag("password"), row["password"])
    assert re.fullmatch(tag("cvv"), row["cvv"])
    assert re.fullmatch(r"\[card#[0-9a-f]{6} …4242\]", row["card_number"])
    assert row["email"] is None and row["phone"] is True
    assert re.fullmatch(tag("session"), row["session"])
    assert re.fullmatch(tag("pin"), row["pin"])
    assert row["status"] == "completed" and row["attempts"] == 3


# ---------------------------------------------------------------------------------------------
# Detectors, one by one, in columns whose names say nothing


JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

DETECTED = [
    # (free text, expected output as regex, kinds)
    (f"token {JWT} expired", rf"token {tag('jwt')} expired", ["jwt"]),
    ("Authorization: Bearer 8f3a9c0d1e2b4a57.Zm9v", rf"Authorization: Bearer {tag('bearer')}", ["bearer"]),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", rf"Authorization: Basic {tag('basic')}", ["basic"]),
    ("header bearer ya3ZkQ8sLm2P0qRt", rf"header bearer {tag('bearer')}", ["bearer"]),
    ("key AKIAIOSFODNN7EXAMPLE used", rf"key {tag('aws_key')} used", ["aws_key"]),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", tag("github_token"), ["github_token"]),
    ("pat github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", rf"pat {tag('github_token')}", ["github_token"]),
    ("STRIPE=sk_live_4eC39HqLyjWDarjtT1zdp7dc", rf"STRIPE={tag('stripe_key')}", ["stripe_key"]),
    ("rk_test_51Habcdefghij0123456789", tag("stripe_key"), ["stripe_key"]),
    ("slack xoxb-123456789012-abcdefghijkl", rf"slack {tag('slack_token')}", ["slack_token"]),
    ("AIzaSyA1234567890abcdefghijklmnopqrstuv", tag("google_api_key"), ["google_api_key"]),
    ("openai sk-proj-abcdefghijklmnopqrstuvwxyz012345", rf"openai {tag('api_key')}", ["api_key"]),
    (
        "postgres://app:s3cr3t@db.internal:5432/ledger",
        rf"postgres://app:{tag('password')}@db.internal:5432/ledger",
        ["password"],
    ),
    (
        "mysql+pymysql://root:p%40ss@127.0.0.1/x",
        rf"mysql\+pymysql://root:{tag('password')}@127\.0\.0\.1/x",
        ["password"],
    ),
    ("redis://:p@ss#w0rd@cache:6379/0", rf"redis://:{tag('password')}@cache:6379/0", ["password"]),
    (
        "GET https://api.example.com/cb?access_token=abcDEF123&page=2 failed",
        rf"GET https://api\.example\.com/cb\?access_token={tag('token')}&page=2 failed",
        ["token"],
    ),
    (
        "https://maps.example.com/x?key=zzz999&sig=AbC123%3D",
        rf"https://maps\.example\.com/x\?key={tag('api_key')}&sig={tag('signature')}",
        ["api_key", "signature"],
    ),
    (
        "https://s3.example.com/o?X-Amz-Credential=AK%2F2024&X-Amz-Signature=abc123",
        rf"https://s3\.example\.com/o\?X-Amz-Credential={tag('credential')}&X-Amz-Signature={tag('signature')}",
        ["credential", "signature"],
    ),
    ("cb#access_token=abcDEF123&state=x", rf"cb#access_token={tag('token')}&state=x", ["token"]),
    ("contact Jane.Doe+ops@Example.co.uk now", rf"contact {tag('email')} now", ["email"]),
    ("card 4242 4242 4242 4242 declined", r"card \[card#[0-9a-f]{6} …4242\] declined", ["card"]),
    ("pan=4000-0566-5566-5556", r"pan=\[card#[0-9a-f]{6} …5556\]", ["card"]),
    ("amex 378282246310005.", r"amex \[card#[0-9a-f]{6} …0005\]\.", ["card"]),
    ("to DE89 3704 0044 0532 0130 00 EUR", rf"to {tag('iban')} EUR", ["iban"]),
    ("GB82WEST12345698765432", tag("iban"), ["iban"]),
    ("call +44 20 7946 0958 now", rf"call {tag('phone')} now", ["phone"]),
    ("call (415) 555-2671 or 415.555.2671", rf"call {tag('phone')} or {tag('phone')}", ["phone", "phone"]),
    ("tel:+14155552671", rf"tel:{tag('phone')}", ["phone"]),
    (
        "host=db user=app password=s3cret dbname=x",
        rf"host=db user=app password={tag('password')} dbname=x",
        ["password"],
    ),
    (
        '{"password": "hunter2", "tokens_used": 5}',
        rf'\{{"password": "{tag("password")}", "tokens_used": 5\}}',
        ["password"],
    ),
    ('{\\"api_key\\": \\"abc123\\"}', rf'\{{\\"api_key\\": \\"{tag("api_key")}\\"\}}', ["api_key"]),
    ("Cookie: sid=abc123; theme=dark", rf"Cookie: {tag('cookie')}; theme=dark", ["cookie"]),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
        tag("private_key"),
        ["private_key"],
    ),
]


@pytest.mark.parametrize("text,expected,kinds", DETECTED)
def test_detectors_in_free_text(m, text, expected, kinds):
    out = m.mask_text(text)
    assert re.fullmatch(expected, out, re.S), out
    assert kinds_in(out) == kinds
    assert m.counts == {k: kinds.count(k) for k in kinds}


@pytest.mark.parametrize("text,expected,kinds", DETECTED)
def test_detectors_in_a_neutral_column(m, text, expected, kinds):
    out = m.mask_row({"error": text})["error"]
    assert re.fullmatch(expected, out, re.S)


def test_error_message_with_several_secrets(m):
    msg = (
        "charge failed for jane@example.com card 4242424242424242: upstream "
        "https://pay.example.com/v1/charges?api_key=sk_test_abcdefghij0123 returned 402; "
        "retry with Authorization: Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."
    )
    out = m.mask_text(msg)
    assert out == (
        f"charge failed for {m.tag('email', 'jane@example.com')} card "
        f"{m.tag('card', '4242424242424242')}: upstream https://pay.example.com/v1/charges?api_key="
        f"{m.tag('api_key', 'sk_test_abcdefghij0123')} returned 402; retry with Authorization: Bearer "
        f"{m.tag('jwt', 'eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.')}"
    )
    for s in ("jane@example.com", "4242424242424242", "sk_test_abcdefghij0123", "eyJzdWIiOiJ4In0"):
        assert_no_leak(s, out, msg.replace(s, ""))


def test_nested_json_by_name_and_by_value(m):
    doc = {
        "order_id": "ord_0001",
        "amount": 4200,
        "customer": {
            "customerEmail": "jane@example.com",
            "phone": "+33 1 23 45 67 89",
            "note": "call me at +33 1 23 45 67 89",
        },
        "payment_method": {"card": {"number": "4242 4242 4242 4242", "brand": "visa", "last4": "4242", "cvc": "123"}},
        "headers": [
            ["Authorization", "Bearer abc.def.ghi"],
            ["Accept", "application/json"],
            {"name": "Cookie", "value": "sid=77"},
        ],
        "attempts": [{"error": "DSN postgres://svc:pw123456@db/x refused"}],
        "tokens_used": 1200,
        "ok": True,
        "missing": None,
    }
    out = m.mask_value(doc)
    assert out["order_id"] == "ord_0001" and out["amount"] == 4200 and out["tokens_used"] == 1200
    assert out["ok"] is True and out["missing"] is None
    assert re.fullmatch(tag("email"), out["customer"]["customerEmail"])
    assert re.fullmatch(tag("phone"), out["customer"]["phone"])
    # same phone, by name and in free text: same tag
    assert out["customer"]["note"] == f"call me at {out['customer']['phone']}"
    # "card" names the whole sub-object: one tag for all of it
    # the whole card object is one tag; it keeps the number's last four (keep_card_last4, issue #20 11c)
    assert re.fullmatch(r"\[card#[0-9a-f]{6} …4242\]", out["payment_method"]["card"])
    assert out["headers"][0] == ["Authorization", m.tag("authorization", "Bearer abc.def.ghi")]
    assert out["headers"][1] == ["Accept", "application/json"]
    assert out["headers"][2]["name"] == "Cookie"
    assert re.fullmatch(tag("cookie"), out["headers"][2]["value"])
    assert re.fullmatch(rf"DSN postgres://svc:{tag('password')}@db/x refused", out["attempts"][0]["error"])
    assert doc["customer"]["customerEmail"] == "jane@example.com"  # input left untouched
    text = json.dumps(out)
    for s in ("jane@example.com", "23 45 67 89", "4242 4242 4242 4242", "pw123456", "sid=77"):
        assert s not in text


def test_dict_keys_are_masked_too(m):
    out = m.mask_value({"jane@example.com": 3, "plain": 1})
    assert list(out.values()) == [3, 1]
    assert re.fullmatch(tag("email"), next(iter(out)))


def test_payload_is_masked_and_stays_a_payload(m):
    p = Payload("json", {"password": "x", "k": "v"}, size=30)
    out = m.mask_value(p)
    assert isinstance(out, Payload) and out.encoding == "json" and out.size == 30
    assert out.value["k"] == "v" and re.fullmatch(tag("password"), out.value["password"])
    broken = Payload("json", '{"email": "a@b.co"', problem="broken JSON near a@b.co")
    out = m.mask_value(broken)
    assert "a@b.co" not in out.value and "a@b.co" not in out.problem


def test_passthrough_types(m):
    now = datetime(2024, 5, 1, tzinfo=UTC)
    for v in (None, True, 7, 1.5, Decimal("1.10"), now, b"\x00raw"):
        assert m.mask_value(v, "note") is v or m.mask_value(v, "note") == v
    assert m.counts == {}


# ---------------------------------------------------------------------------------------------
# Look-alikes that must stay visible


@pytest.mark.parametrize(
    "text",
    [
        "order 4242424242424241 failed",  # fails Luhn
        "ORD-2024-000123-4567",
        "123e4567-e89b-12d3-a456-426614174000",  # UUID
        "12345678-1234-5678-1234-567812345678",  # all-digit UUID
        "2024-05-01T10:00:00+02:00",
        "2024-05-01T10:00:00.123456Z",
        "2024-05-01 10:00:00",
        "1716200000000",
        "1716200000000000",
        "created 1716200000123 ms",  # epoch ms / µs
        "v1.2.3",
        "1.2.3+20240501",
        "2.0.0-rc.1+build.5",  # versions
        "idem-8f3a9c0d1e2b4a57",
        "ch_3N9aZbLkdF8q2m",
        "cus_123456",
        "pi_3MtwBwLkdIwHu7ix28a3tqPa",
        "9223372036854775807",  # BIGINT max (not a card prefix)
        "balance +12345678.90",
        "delta +1",
        "offset +05:30",
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "10.0.0.1:5432",
        "Basic validation failed",
        "Bearer token expired",
        "tokens_used=1200 prompt_tokens: 900",
        "token_count: 3",
        "next_page_token=abc",
        "Key (idempotency_key)=(ord-1) already exists",
        "status: completed",
        "retry after 30s (attempt 3 of 5)",
        "DE is the country",
        "pk_live_51Habcdefghij0123",
        "author: Jane",
        "company=ACME",
        "shipping: express",
    ],
)
def test_look_alikes_stay_visible(m, text):
    assert m.mask_text(text) == text
    assert m.counts == {}


# ---------------------------------------------------------------------------------------------
# Tags


def test_equal_values_equal_tags_within_one_masker(m):
    a = m.mask_text("card 4242 4242 4242 4242")
    b = m.mask_text("card 4242-4242-4242-4242")
    c = m.mask_value(4242424242424242, "card_number")
    t = m.tag("card", "4242424242424242")
    assert a == f"card {t}" and b == f"card {t}" and c == t
    assert m.mask_text("JANE@example.com") == m.mask_value("jane@example.com", "email")
    assert m.mask_text("x postgres://a:pw@h/d") == m.mask_text("x postgres://b:pw@h/d").replace("//b:", "//a:")
    assert m.tag("email", "a@b.co") != m.tag("email", "c@b.co")


def test_other_masker_other_tags():
    values = ["jane@example.com", "4242424242424242", "hunter2-secret", "AKIAIOSFODNN7EXAMPLE"]
    m1, m2 = Masker(), Masker()
    t1 = [m1.tag("x", v) for v in values]
    t2 = [m2.tag("x", v) for v in values]
    assert t1 != t2
    assert sum(a == b for a, b in zip(t1, t2, strict=False)) <= 1  # 1 in 16^6 chance each
    assert Masker(key=KEY).tag("x", "v") == Masker(key=KEY).tag("x", "v")


def test_card_tag_keeps_last_four_only_when_asked():
    assert re.fullmatch(r"\[card#[0-9a-f]{6} …4242\]", Masker().tag("card", "4242424242424242"))
    rules = MaskRules.from_config({"keep_card_last4": False})
    assert re.fullmatch(tag("card"), Masker(rules).tag("card", "4242424242424242"))


def test_masking_is_idempotent(m):
    for text, _, _ in DETECTED:
        once = m.mask_text(text)
        assert m.mask_text(once) == once


def test_counts_and_reset(m):
    m.mask_text("a@b.co and c@d.co, 4242424242424242")
    m.mask_value({"password": "x", "note": "a@b.co"})
    assert m.counts == {"email": 3, "card": 1, "password": 1}
    counts = m.counts
    counts["email"] = 99  # a copy
    assert m.counts["email"] == 3
    m.reset_counts()
    assert m.counts == {}
    m.mask_text("a@b.co")  # cached result still counts
    assert m.counts == {"email": 1}
    assert m.mask_text("x@y.co", count=False) == m.mask_text("x@y.co", count=False)
    assert m.mask_value({"password": "p"}, count=False)["password"].startswith("[password#")
    assert m.counts == {"email": 1}


def test_key_is_never_exposed():
    m = Masker()
    assert "key=<hidden>" in repr(m)
    with pytest.raises(TypeError):
        pickle.dumps(m)
    public = {a: getattr(m, a) for a in dir(m) if not a.startswith("_")}
    assert not any(isinstance(v, (bytes, bytearray)) for v in public.values())
    with pytest.raises(TypeError):
        Masker(key="not-bytes")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Revealing


@pytest.mark.parametrize(
    "column,value,cred",
    [
        ("password", "x", True),
        ("api_key", "x", True),
        ("session_id", "x", True),
        ("cvv", 123, True),
        ("email", "a@b.co", False),
        ("card_number", "4242424242424242", False),
        ("phone", "+1", False),
        ("iban", "DE89370400440532013000", False),
        ("note", f"jwt {JWT}", True),
        ("note", "Authorization: Basic dXNlcjpwYXNz", True),
        ("note", "postgres://a:pw@h/d", True),
        ("note", "AKIAIOSFODNN7EXAMPLE", True),
        ("note", "card 4242424242424242", False),
        ("note", "jane@example.com", False),
        ("note", {"deep": [{"token": "t"}]}, True),
        ("note", {"deep": ["a@b.co"]}, False),
        ("email", f"oops {JWT}", True),
        ("note", "plain", False),
        ("password", None, False),
    ],
)
def test_is_credential(m, column, value, cred):
    assert m.is_credential(column, value) is cred
    assert m.counts == {}
    assert ("jwt" in CREDENTIAL_KINDS) and ("email" not in CREDENTIAL_KINDS)


# ---------------------------------------------------------------------------------------------
# Configuration


def test_rules_from_config():
    rules = MaskRules.from_config(
        {
            "fields": [
                "member_no",
                {"name": "taxRef", "kind": "tax_id", "credential": False},
                {"name": "vault_handle", "kind": "handle", "credential": True},
            ],
            "not_sensitive": ["session_id"],
            "patterns": [
                {"kind": "acme_key", "regex": r"acme_[a-z0-9]{8}"},
                {"kind": "order_pin", "regex": r"PIN (?P<secret>\d{4})", "credential": False},
            ],
            "disable": ["phone"],
        }
    )
    m = Masker(rules, key=KEY)
    assert m.column_kind("member_no") == "sensitive" and m.column_kind("tax_ref") == "tax_id"
    assert m.column_kind("session_id") is None and m.column_kind("session") == "session"
    out = m.mask_text("use acme_abc12345 with PIN 1234, call +44 20 7946 0958")
    assert re.fullmatch(rf"use {tag('acme_key')} with PIN {tag('order_pin')}, call \+44 20 7946 0958", out)
    assert m.is_credential("vault_handle", "x") and not m.is_credential("tax_ref", "x")
    assert m.is_credential("note", "acme_abc12345") and not m.is_credential("note", "PIN 1234")
    d = rules.describe()
    assert "phone" not in d["detectors"] and d["patterns"][0]["kind"] == "acme_key"
    assert len(d["rules_sha256"]) == 64
    assert d != MaskRules.default().describe()


@pytest.mark.parametrize(
    "config,message",
    [
        ({"disable": ["jwt"]}, "cannot be disabled"),
        ({"disable": ["nope"]}, "unknown masking detector"),
        ({"patterns": [{"kind": "x", "regex": "("}]}, "invalid regex"),
        ({"patterns": [{"kind": "Bad Kind", "regex": "x"}]}, "kind"),
        ({"fields": [{"kind": "x"}]}, "expected a name"),
        ({"colour": "red"}, "unknown masking config keys"),
    ],
)
def test_rules_from_config_errors(config, message):
    with pytest.raises(ValueError, match=message):
        MaskRules.from_config(config)


# ---------------------------------------------------------------------------------------------
# Logs


def test_log_filter_masks_message_args_and_traceback():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(MaskingLogFilter(Masker(key=KEY)))
    log = logging.getLogger("idemview.test.masking")
    log.propagate = False
    log.addHandler(handler)
    try:
        log.warning("connect %s as %s (%d tries)", "postgres://app:hunter2@db/x", "jane@example.com", 3)
        try:
            raise RuntimeError("auth failed for token ghp_abcdefghijklmnopqrstuvwxyz0123456789")
        except RuntimeError:
            log.exception("boom with card %s", "4242 4242 4242 4242")
        log.warning("bad args %s %s for a@b.co", "only-one")  # must not raise nor drop it
    finally:
        log.removeHandler(handler)
    out = stream.getvalue()
    assert "bad args" in out
    for s in ("hunter2", "jane@example.com", "ghp_abcdefghij", "4242 4242 4242 4242", "a@b.co"):
        assert s not in out
    assert re.search(rf"WARNING connect postgres://app:{tag('password')}@db/x as {tag('email')} \(3 tries\)", out)
    assert "RuntimeError: auth failed for token [github_token#" in out
    assert "Traceback" in out


# ---------------------------------------------------------------------------------------------
# Property tests: generated secrets never survive

ALNUM = string.ascii_letters + string.digits
UPPER_NUM = string.ascii_uppercase + string.digits
B64URL = ALNUM + "-_"
PW_CHARS = ALNUM + "._~!$*+-"

# Filler from words that contain no secret shape; numbers deliberately included.
WORDS = [
    "payment",
    "failed",
    "retry",
    "order",
    "status",
    "completed",
    "timeout",
    "upstream",
    "idempotency_key",
    "tokens_used",
    "attempt",
    "3",
    "42",
    "(attempt 3 of 5)",
    "v1.2.3",
    "2024-05-01T10:00:00Z",
    "ord-1234",
    "ch_3N9aZb",
    "→",
    "ünïcödé",
    "at",
    "for",
    "the",
    "123e4567-e89b-12d3-a456-426614174000",
    "HTTP 502",
    "ms",
    "EUR",
    "DE",
]
SEPARATORS = [" ", "\n", ", ", "; ", " (", ") ", "\t", " | ", '"', ". ", " = ", ": "]


def _luhn_complete(body: str) -> str:
    for d in "0123456789":
        if luhn_valid(body + d):
            return body + d
    raise AssertionError


@st.composite
def cards(draw):
    prefix, length = draw(
        st.sampled_from(
            [
                ("4", 16),
                ("4", 13),
                ("4", 19),
                ("51", 16),
                ("55", 16),
                ("2221", 16),
                ("2720", 16),
                ("34", 15),
                ("37", 15),
                ("6011", 16),
                ("65", 16),
                ("35", 16),
                ("36", 14),
                ("62", 19),
            ]
        )
    )
    body = prefix + draw(st.text("0123456789", min_size=length - 1 - len(prefix), max_size=length - 1 - len(prefix)))
    number = _luhn_complete(body)
    style = draw(st.sampled_from(["plain", "space", "dash"]))
    if style == "plain" or length not in (15, 16):
        return number
    sep = " " if style == "space" else "-"
    groups = [number[:4], number[4:10], number[10:]] if length == 15 else [number[i : i + 4] for i in range(0, 16, 4)]
    return sep.join(groups)


@st.composite
def ibans(draw):
    country, fmt = draw(
        st.sampled_from(
            [
                ("DE", "n18"),
                ("FR", "n23"),
                ("ES", "n20"),
                ("BE", "n12"),
                ("CH", "n17"),
                ("PL", "n24"),
                ("AT", "n16"),
                ("GB", "a4n14"),
                ("NL", "a4n10"),
                ("IT", "a1n22"),
            ]
        )
    )
    bban = ""
    for kind, n in re.findall(r"([an])(\d+)", fmt):
        bban += draw(
            st.text(string.ascii_uppercase if kind == "a" else string.digits, min_size=int(n), max_size=int(n))
        )
    numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
    check = 98 - int(numeric) % 97
    iban = f"{country}{check:02d}{bban}"
    assert iban_valid(iban)
    if draw(st.booleans()):
        spaced = " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
        return spaced.lower() if draw(st.booleans()) else spaced
    return iban


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@st.composite
def jwts(draw):
    header = {"alg": draw(st.sampled_from(["HS256", "RS256", "ES256"])), "typ": "JWT"}
    claims = draw(
        st.dictionaries(
            st.sampled_from(["sub", "iat", "exp", "scope", "tenant"]),
            st.one_of(st.integers(0, 2**40), st.text(ALNUM, max_size=12)),
            min_size=1,
            max_size=4,
        )
    )
    sig = draw(st.binary(min_size=32, max_size=64))
    return ".".join([_b64url(json.dumps(header).encode()), _b64url(json.dumps(claims).encode()), _b64url(sig)])


emails = st.builds(
    lambda local, dom, tld: f"{local}@{dom}.{tld}",
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._%+-]{0,20}", fullmatch=True).filter(
        lambda s: ".." not in s and not s.endswith(".")
    ),
    st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True),
    st.sampled_from(["com", "org", "io", "co.uk", "de", "example"]),
)

phones = st.builds(
    lambda cc, groups, sep: "+" + cc + sep + sep.join(groups),
    st.sampled_from(["1", "33", "44", "49", "353", "81"]),
    st.lists(st.text("0123456789", min_size=2, max_size=4), min_size=3, max_size=4).filter(
        lambda g: 8 <= len("".join(g)) <= 11
    ),
    st.sampled_from([" ", "-", ""]),
)

# (kind of secret, strategy for (text to embed, the secret part of it))
SECRETS = {
    "card": cards().map(lambda c: (c, c)),
    "iban": ibans().map(lambda i: (i, i)),
    "jwt": jwts().map(lambda j: (j, j)),
    "email": emails.map(lambda e: (e, e)),
    "phone": phones.map(lambda p: (p, p)),
    "aws": st.text(UPPER_NUM, min_size=16, max_size=16).map(lambda s: ("AKIA" + s,) * 2),
    "github": st.text(ALNUM, min_size=36, max_size=36).map(lambda s: ("ghp_" + s,) * 2),
    "stripe": st.tuples(
        st.sampled_from(["sk_live_", "sk_test_", "rk_live_"]), st.text(ALNUM, min_size=24, max_size=32)
    ).map(lambda t: (t[0] + t[1],) * 2),
    "slack": st.text(ALNUM, min_size=24, max_size=24).map(lambda s: (f"xoxb-1234567890-{s}",) * 2),
    "google": st.text(B64URL, min_size=35, max_size=35).map(lambda s: ("AIza" + s,) * 2),
    "bearer": st.text(ALNUM + "._~+/-", min_size=16, max_size=48).map(lambda t: (f"Authorization: Bearer {t}", t)),
    "basic": st.tuples(st.text(ALNUM, min_size=3, max_size=10), st.text(PW_CHARS, min_size=8, max_size=20))
    .map(lambda t: base64.b64encode(f"{t[0]}:{t[1]}".encode()).decode())
    .map(lambda b: (f"Authorization: Basic {b}", b)),
    "dsn": st.tuples(
        st.sampled_from(["postgres", "postgresql+psycopg", "mysql", "redis", "amqp"]),
        st.text(PW_CHARS, min_size=8, max_size=24),
    ).map(lambda t: (f"{t[0]}://svc_user:{t[1]}@db.internal:5432/ledger", t[1])),
    "url_token": st.tuples(
        st.sampled_from(["token", "access_token", "api_key", "sig", "key"]),
        st.text(ALNUM + "-._~%", min_size=10, max_size=40),
    ).map(lambda t: (f"https://api.example.com/v1/hook?page=2&{t[0]}={t[1]}&x=1", t[1])),
    "named": st.tuples(
        st.sampled_from(["password", "client_secret", "api_key", "X-Api-Key", "refresh_token", "DB_PASSWORD"]),
        st.sampled_from(["{}={}", "{}: {}", '"{}": "{}"', "{} = '{}'"]),
        st.text(PW_CHARS, min_size=8, max_size=24).filter(lambda v: v not in _KV_SKIP_VALUES),
    ).map(lambda t: (t[1].format(t[0], t[2]), t[2])),  # documented placeholders
}

planted = st.sampled_from(sorted(SECRETS)).flatmap(lambda k: SECRETS[k])


@st.composite
def texts_with_secrets(draw):
    """Random filler text with 1-3 secrets at random positions; returns (text, secrets, filler)."""
    parts: list[str] = []
    secrets_: list[str] = []
    filler_parts: list[str] = []
    n = draw(st.integers(1, 3))
    slots = draw(st.lists(st.lists(st.sampled_from(WORDS), max_size=4), min_size=n + 1, max_size=n + 1))
    for i in range(n + 1):
        words = " ".join(slots[i])
        parts.append(words)
        filler_parts.append(words)
        if i < n:
            embed, secret = draw(planted)
            parts.append(draw(st.sampled_from(SEPARATORS)) + embed + draw(st.sampled_from(SEPARATORS)))
            filler_parts.append(embed.replace(secret, " "))
            secrets_.append(secret)
    return "".join(parts), secrets_, " ".join(filler_parts)


PROPS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(texts_with_secrets())
def test_property_no_secret_survives_in_text(data):
    text, secrets_, filler = data
    m = Masker()
    out = m.mask_text(text)
    for s in secrets_:
        assert_no_leak(s, out, filler)
    # one masked span may cover several secrets (a credential value runs on to the end of its line),
    # so the count proves only that masking happened; assert_no_leak above is the property that matters
    assert sum(m.counts.values()) >= (1 if secrets_ else 0)


json_leaf = st.one_of(
    st.integers(-(10**18), 10**18), st.floats(allow_nan=False), st.booleans(), st.none(), st.sampled_from(WORDS)
)
json_keys = st.sampled_from(
    ["note", "detail", "message", "ref", "items", "meta", "tokens_used", "idempotency_key", "status"]
)


@st.composite
def json_with_secrets(draw):
    """A random JSON document with secrets in string values at random depths."""
    secrets_: list[str] = []
    filler: list[str] = []

    def leaf():
        if draw(st.integers(0, 3)) == 0:
            text, ss, fill = draw(texts_with_secrets())
            secrets_.extend(ss)
            filler.append(fill)
            return text
        value = draw(json_leaf)
        filler.append(json.dumps(value))  # non-secret leaves may show anything
        return value

    def node(depth):
        if depth == 0 or draw(st.integers(0, 2)) == 0:
            return leaf()
        if draw(st.booleans()):
            return [node(depth - 1) for _ in range(draw(st.integers(0, 3)))]
        return {draw(json_keys): node(depth - 1) for _ in range(draw(st.integers(0, 3)))}

    doc = {"kind": "payment.capture", "payload": node(3), "error": leaf()}
    return doc, secrets_, " ".join(filler) + " " + " ".join(WORDS)


@PROPS
@given(json_with_secrets())
def test_property_no_secret_survives_in_json(data):
    doc, secrets_, filler = data
    m = Masker()
    parsed = json.dumps(m.mask_value(doc), ensure_ascii=False)
    as_text = m.mask_text(json.dumps(doc, ensure_ascii=False))
    for s in secrets_:
        assert_no_leak(s, parsed, filler)
        assert_no_leak(s, as_text, filler)


def _normalized(secret: str) -> str:
    return re.sub(r"[\s\-]", "", secret).lower()


@settings(max_examples=200, deadline=None)
@given(planted, planted)
def test_property_tags_equal_iff_values_equal(a, b):
    """Within one Masker: the same secret (up to formatting: card/IBAN/phone spacing, e-mail case)
    gets the same tag; a different secret gets a different one."""
    m = Masker(key=KEY)
    ta = m.mask_text(f"x {a[0]} y")
    assert m.mask_text(f"x {a[0]} y") == ta
    tb = m.mask_text(f"x {b[0]} y")
    if _normalized(a[1]) == _normalized(b[1]) and a[0].replace(a[1], "") == b[0].replace(b[1], ""):
        assert ta == tb
    elif _normalized(a[1]) != _normalized(b[1]):
        assert ta != tb


# ---------------------------------------------------------------------------------------------
# QA leaks (multi-word credentials, spaced/lower-case IBANs, AWS secrets, dotted cards, 00-phones,
# SSNs): each secret is gone whole, no 6-character piece of it survives.


def _masked_whole(m: Masker, text: str, secret: str, kind: str) -> str:
    out = m.mask_text(text)
    assert_no_leak(secret, out, text.replace(secret, " "))
    assert kind in kinds_in(out), out
    return out


@pytest.mark.parametrize(
    "text,secret,rest",
    [
        ("password: correct horse battery staple", "correct horse battery staple", ""),
        ("passphrase = correct horse battery staple\nnext line", "correct horse battery staple", "\nnext line"),
        ("secret: two words here; retry=3", "two words here", "; retry=3"),
        ("pwd=lemon tree sunset, user=jane", "lemon tree sunset", ", user=jane"),
        ("login password: violet rabbit engine user: jane", "violet rabbit engine", " user: jane"),
        ('{"note": "password: orange kettle window"}', "orange kettle window", '"}'),
        ('{\\"note\\": \\"password: orange kettle window\\"}', "orange kettle window", '\\"}'),
        ("error='password: purple zebra dancing' at x", "purple zebra dancing", "' at x"),
        ("password=p&ssw0rd-long&user=jane", "p&ssw0rd-long", "&user=jane"),
        ("token: alpha beta, gamma delta", "alpha beta, gamma delta", ""),
    ],
)
def test_credential_label_masks_the_whole_value(m, text, secret, rest):
    out = m.mask_text(text)
    assert_no_leak(secret, out, text.replace(secret, " "))
    assert out.endswith(rest), out
    assert len(kinds_in(out)) == 1 and kinds_in(out)[0] in CREDENTIAL_KINDS
    assert m.mask_text(out) == out


def test_multi_word_value_keeps_logfmt_and_personal_pairs(m):
    assert re.fullmatch(
        rf"host=db user=app password={tag('password')} dbname=x",
        m.mask_text("host=db user=app password=s3cret dbname=x"),
    )
    out = m.mask_text("phone: 020 7946 0958 (mobile) status: ok")
    assert re.fullmatch(rf"phone: {tag('phone')} \(mobile\) status: ok", out), out


@pytest.mark.parametrize(
    "text,secret",
    [
        ("iban: de89 3704 0044 0532 0130 00", "de89 3704 0044 0532 0130 00"),
        ("wire to de89 3704 0044 0532 0130 00 today", "de89 3704 0044 0532 0130 00"),
        ("pay to de89370400440532013000 now", "de89370400440532013000"),
        ("to gb82 west 1234 5698 7654 32.", "gb82 west 1234 5698 7654 32"),
        ("IBAN DE89 3704 0044 0532 0130 00, ref 7", "DE89 3704 0044 0532 0130 00"),
    ],
)
def test_spaced_and_lower_case_ibans_are_masked_whole(m, text, secret):
    out = m.mask_text(text)
    assert_no_leak(secret, out, text.replace(secret, " "))
    assert kinds_in(out) == ["iban"], out
    assert out == text.replace(secret, m.tag("iban", "DE89370400440532013000")) or "gb82" in text
    assert iban_valid(secret)


@pytest.mark.parametrize(
    "text",
    [
        "span be742c2c9c8bf1f0 closed",  # a hex id that happens to pass mod-97 as a BE IBAN
        "ref xde89370400440532013000",  # not delimited
        "ref dE89370400440532013000",  # mixed case: not an IBAN as written
    ],
)
def test_iban_look_alikes_stay_visible(m, text):
    assert m.mask_text(text) == text


AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    "text,secret,kind",
    [
        (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "aws_secret"),
        (f"aws_secret_access_key {AWS_SECRET}", AWS_SECRET, "aws_secret"),
        (f"secret {AWS_SECRET} rotated", AWS_SECRET, "aws_secret"),
        (f"creds AKIAIOSFODNN7EXAMPLE {AWS_SECRET}", AWS_SECRET, "aws_secret"),
        (f'{{"AccessKeyId": "ASIAIOSFODNN7EXAMPLE", "SecretAccessKey": "{AWS_SECRET}"}}', AWS_SECRET, "aws_secret"),
        ("card 4111.1111.1111.1111 declined", "4111.1111.1111.1111", "card"),
        ("call 0044 20 7946 0958 now", "0044 20 7946 0958", "phone"),
        ("tel 020 7946 0958", "020 7946 0958", "phone"),
        ("mobile no. 07700 900123", "07700 900123", "phone"),
        ("phone: 0044 20 7946 0958", "0044 20 7946 0958", "phone"),
        ("ssn 078-05-1120 on file", "078-05-1120", "ssn"),
        ("social security number 078 05 1120", "078 05 1120", "ssn"),
        ("SSN#: 078051120", "078051120", "ssn"),
        ("applicant 078-05-1120 rejected", "078-05-1120", "ssn"),
    ],
)
def test_more_secrets_in_free_text(m, text, secret, kind):
    out = m.mask_text(text)
    assert_no_leak(secret, out, text.replace(secret, " "))
    assert kind in kinds_in(out), out
    assert m.mask_text(out) == out


def test_aws_secret_is_a_credential_and_tags_like_its_column(m):
    assert m.is_credential("note", f"aws_secret_access_key {AWS_SECRET}")
    assert m.mask_value(AWS_SECRET, "aws_secret_access_key") == m.mask_text(AWS_SECRET + " secret").split()[0]


@pytest.mark.parametrize(
    "text",
    [
        "due 2026-11-30",
        "window 2026-11-30T08:00:00Z..2026-12-01",
        "ORD-078-05-1120",
        "078-05-11200",
        "v078-05-1120",
        "000-12-3456 placeholder",
        "666-12-3456",
        "900-12-3456",
        "123-00-4567",
        "git 9fceb02d0ae598e95dc970b74767f19372d61af8 secret rotated",  # SHA-1: hex, not base64-ish
        "secret path /var/lib/app/data/Archive2024/ReportsFinal/x.csv",
        "order 0044 20 7946 0958 1234 5678",  # > 15 digits: not a phone
        "amount 4111.11",
        "ip 10.20.30.40",
        "oid 1.3.6.1.4.1.2021.10.1.3.1",
        "batch 00123 45 67",
        "at 2024-05-01 00:12:34",
        "offset 0012 secs",
    ],
)
def test_more_look_alikes_stay_visible(m, text):
    assert m.mask_text(text) == text
    assert m.counts == {}


@pytest.mark.parametrize(
    "text, secret",
    [("pw=hunter2 host=db", "hunter2"), ("login failed pw: hunter2", "hunter2"), ('{"db_pw": "s3cr3t"}', "s3cr3t")],
)
def test_pw_is_a_password_name(text, secret):
    """``pw`` as a whole word names a password (found by a tester); ``pwned`` does not."""
    m = Masker()
    assert secret not in m.mask_text(text) and "[password#" in m.mask_text(text)
    assert m.mask_text("pwned by someone") == "pwned by someone"
