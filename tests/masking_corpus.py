"""The masking corpus (issue 19 item 8): secrets and personal data of many kinds, each in several
encodings and contexts, and look-alikes that must stay visible. Generated, deterministic, small.

Used by ``tests/unit/test_masking_corpus.py`` (recall 100 % on every secret kind, no look-alike masked)
and by ``benchmarks/bench_masking_corpus.py`` (precision and recall per kind, ``make bench-masking``).

Formats come from each issuer's documentation (prefix, alphabet, length): AWS access key ids
(``AKIA``/``ASIA`` + 16), Google API keys (``AIza`` + 35), GitHub tokens (``ghp_`` + 36,
``github_pat_``), GitLab (``glpat-`` + 20), Slack (``xoxb-``), Stripe (``sk_live_``, ``whsec_``),
Twilio API key SIDs (``SK`` + 32 hex), SendGrid (``SG.`` 22 ``.`` 43), npm (``npm_`` + 36),
PyPI (``pypi-AgEIcHlwaS5vcmc``: base64 of the macaroon's location ``pypi.org``), Azure storage
connection strings (``AccountKey=`` 88 base64) and AD client secrets (``xxxdQ~`` + 31-34). Cards pass
Luhn (ISO/IEC 7812) with real issuer prefixes, IBANs pass ISO 7064 mod 97-10 with their SWIFT-registry
length; SSNs avoid the SSA's never-issued areas; phone numbers use the ranges reserved for fiction
(Ofcom 020 7946 0xxx, NANP 555-01xx).

A :class:`Case` is one text or JSON value and the secret it carries (``secret`` is ``None`` for a
look-alike: the masker must return it unchanged).
"""

from __future__ import annotations

import base64
import html
import json
import random
import re
import string
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

__all__ = ["Case", "SECRET_KINDS", "LOOKALIKE_KINDS", "secret_cases", "lookalike_cases", "leaked_pieces"]


@dataclass(frozen=True)
class Case:
    """One corpus entry: ``kind`` (corpus kind), ``context`` (how it is wrapped), ``value`` (a ``str``
    or parsed JSON handed to ``Masker.mask_value``), ``secret`` (the text that must not survive, or
    ``None`` for a look-alike)."""

    kind: str
    context: str
    value: Any
    secret: str | None


_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + string.digits
_HEX = "0123456789abcdef"
_LOWER_DIGITS = string.ascii_lowercase + string.digits
_B64 = _ALNUM + "+/"
_B64URL = _ALNUM + "-_"


def _r(seed: str) -> random.Random:
    return random.Random(f"idemview-corpus-{seed}")


def _s(rnd: random.Random, alphabet: str, n: int) -> str:
    return "".join(rnd.choice(alphabet) for _ in range(n))


def _luhn_complete(prefix: str, length: int, rnd: random.Random) -> str:
    body = prefix + "".join(rnd.choice(string.digits) for _ in range(length - len(prefix) - 1))
    total = 0
    for i, ch in enumerate(reversed(body)):
        x = int(ch)
        if i % 2 == 0:
            x = x * 2 - 9 if x * 2 > 9 else x * 2
        total += x
    return body + str((10 - total % 10) % 10)


def _iban(country: str, bban: str) -> str:
    num = "".join(str(int(c, 36)) for c in bban + country + "00")
    check = 98 - int(num) % 97
    return f"{country}{check:02d}{bban}"


def _password(rnd: random.Random) -> str:
    # Letters, digits and the symbols people put in passwords that do not end a value in any syntax
    # (no quote, space, "&", ";", "<": a password holding those is caught by name, not by this corpus).
    core = _s(rnd, _ALNUM, 10) + rnd.choice("!*-_.$") + _s(rnd, _ALNUM, 3)
    return core


def _pem(label: str, rnd: random.Random) -> tuple[str, str]:
    body = "\n".join(_s(rnd, _B64, 64) for _ in range(4))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", body


def _jwt(rnd: random.Random) -> str:
    def b64(d: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()

    return (
        b64({"alg": "HS256", "typ": "JWT"})
        + "."
        + b64({"sub": _s(rnd, string.digits, 10), "iat": 1716200000})
        + "."
        + _s(rnd, _B64URL, 43)
    )


# kind -> (carrier text, secret). The carrier is the secret in its natural form (a header, a
# connection string, a field); contexts below wrap the carrier.
def _kinds() -> dict[str, Callable[[random.Random], tuple[str, str]]]:
    def const(fmt: str, secret: Callable[[random.Random], str]):
        def make(rnd: random.Random) -> tuple[str, str]:
            s = secret(rnd)
            return fmt.format(s=s), s

        return make

    def pem(label):
        def make(rnd):
            return _pem(label, rnd)

        return make

    def card(prefix, length, fmt=None):
        def make(rnd):
            n = _luhn_complete(prefix, length, rnd)
            if fmt == "groups":
                shown = " ".join(n[i : i + 4] for i in range(0, len(n), 4))
            elif fmt == "amex":
                shown = f"{n[:4]} {n[4:10]} {n[10:]}"
            else:
                shown = n
            return f"card {shown}", n

        return make

    def iban(country, bban_fn, spaced=False):
        def make(rnd):
            v = _iban(country, bban_fn(rnd))
            shown = " ".join(v[i : i + 4] for i in range(0, len(v), 4)) if spaced else v
            return f"pay to {shown}", v

        return make

    def azure_conn(rnd):
        key = _s(rnd, _B64, 86) + "=="
        return (
            f"DefaultEndpointsProtocol=https;AccountName=acme{rnd.randrange(100)};AccountKey={key};"
            "EndpointSuffix=core.windows.net"
        ), key

    def gcp_sa(rnd):
        text, body = _pem("PRIVATE KEY", rnd)
        doc = {"type": "service_account", "project_id": "acme-prod", "private_key_id": "k1", "private_key": text}
        return json.dumps(doc), body

    def basic(rnd):
        cred = base64.b64encode(f"svc-{rnd.randrange(99)}:{_password(rnd)}".encode()).decode()
        return f"Authorization: Basic {cred}", cred

    def pg_detail(rnd):
        tok = "tok_" + _s(rnd, _ALNUM, 24)
        msg = 'duplicate key value violates unique constraint "tokens_pkey"\n'
        return msg + f"DETAIL: Key (api_token)=({tok}) already exists.", tok

    def curl(rnd):
        pw = _password(rnd)
        return f"curl -sS -u deploy:{pw} https://api.example.com/v1/charges", pw

    def mongodb(rnd):
        pw = _password(rnd)
        return f"mongodb+srv://app:{pw}@cluster0.ab1cd.mongodb.net/orders?retryWrites=true", pw

    def slack_hook(rnd):
        path = f"T{_s(rnd, _UPPER_DIGITS, 8)}/B{_s(rnd, _UPPER_DIGITS, 8)}/{_s(rnd, _ALNUM, 24)}"
        return f"https://hooks.slack.com/services/{path}", path

    def azure_sas(rnd):
        sig = base64.b64encode(rnd.randbytes(32)).decode()
        return (
            "https://acme.blob.core.windows.net/exports/a.csv?sv=2022-11-02&se=2026-01-01T00%3A00%3A00Z&sp=r"
            f"&sig={quote(sig, safe='')}",
            quote(sig, safe=""),
        )

    def azure_ad(rnd):
        s = _s(rnd, _ALNUM, 3) + rnd.choice(string.digits) + "Q~" + _s(rnd, _ALNUM + "_~.-", 31)
        return f"client_id=1b2c3d4e AZURE_CLIENT_SECRET {s}", s

    return {
        "aws_access_key_id": const("aws_access_key_id {s}", lambda r: "AKIA" + _s(r, _UPPER_DIGITS, 16)),
        "aws_session_key_id": const("key id {s}", lambda r: "ASIA" + _s(r, _UPPER_DIGITS, 16)),
        "aws_secret_access_key": const(
            "aws_secret_access_key = {s}", lambda r: _s(r, _ALNUM, 20) + "/" + _s(r, _ALNUM, 19)
        ),
        "gcp_api_key": const("maps key {s}", lambda r: "AIza" + _s(r, _ALNUM + "_-", 35)),
        "gcp_oauth_token": const("upstream sent {s}", lambda r: "ya29." + _s(r, _ALNUM + "_-", 60)),
        "gcp_service_account": gcp_sa,
        "azure_storage_key": azure_conn,
        "azure_sas_signature": azure_sas,
        "azure_ad_client_secret": azure_ad,
        "github_pat": const("GH {s}", lambda r: "ghp_" + _s(r, _ALNUM, 36)),
        "github_fine_grained_pat": const(
            "GH {s}", lambda r: "github_pat_" + _s(r, _ALNUM, 22) + "_" + _s(r, _ALNUM, 59)
        ),
        "gitlab_pat": const("GL {s}", lambda r: "glpat-" + _s(r, _ALNUM + "_-", 20)),
        "slack_bot_token": const("slack {s}", lambda r: f"xoxb-{r.randrange(10**11, 10**12)}-{_s(r, _ALNUM, 24)}"),
        "slack_webhook": slack_hook,
        "stripe_secret_key": const("stripe {s}", lambda r: "sk_live_" + _s(r, _ALNUM, 24)),
        "stripe_restricted_key": const("stripe {s}", lambda r: "rk_test_" + _s(r, _ALNUM, 24)),
        "stripe_webhook_secret": const("signing {s}", lambda r: "whsec_" + _s(r, _ALNUM, 32)),
        "twilio_api_key": const("twilio {s}", lambda r: "SK" + _s(r, _HEX, 32)),
        "sendgrid_key": const("mail {s}", lambda r: "SG." + _s(r, _ALNUM + "_-", 22) + "." + _s(r, _ALNUM + "_-", 43)),
        "npm_token": const("//registry.npmjs.org/:_authToken={s}", lambda r: "npm_" + _s(r, _ALNUM, 36)),
        "pypi_token": const("TWINE_PASSWORD {s}", lambda r: "pypi-AgEIcHlwaS5vcmc" + _s(r, _B64URL, 60)),
        "openai_key": const("llm {s}", lambda r: "sk-proj-" + _s(r, _ALNUM + "_-", 48)),
        "huggingface_token": const("hub {s}", lambda r: "hf_" + _s(r, _ALNUM, 34)),
        "jwt": lambda r: (lambda j: (f"got {j}", j))(_jwt(r)),
        "jwt_after_underscore": lambda r: (lambda j: (f"cache_key=session_{j}", j))(_jwt(r)),
        "bearer_token": const("Authorization: Bearer {s}", lambda r: _s(r, _ALNUM, 32)),
        "basic_auth": basic,
        "pem_rsa_private_key": pem("RSA PRIVATE KEY"),
        "pem_openssh_private_key": pem("OPENSSH PRIVATE KEY"),
        "dsn_postgres": const("postgresql://app:{s}@db.internal:5432/ledger", _password),
        "dsn_mysql": const("mysql+pymysql://root:{s}@10.0.0.7/shop", _password),
        "dsn_redis": const("redis://:{s}@cache:6379/0", _password),
        "dsn_amqp": const("amqp://worker:{s}@rabbit.internal/prod", _password),
        "dsn_mongodb_srv": mongodb,
        "card_visa": card("4", 16),
        "card_visa_grouped": card("4", 16, "groups"),
        "card_mastercard": card("51", 16),
        "card_mastercard_2series": card("2221", 16, "groups"),
        "card_amex": card("37", 15, "amex"),
        "card_discover": card("6011", 16),
        "card_jcb": card("35", 16),
        "iban_de": iban("DE", lambda r: _s(r, string.digits, 18)),
        "iban_gb": iban("GB", lambda r: "NWBK" + _s(r, string.digits, 14), spaced=True),
        "iban_fr": iban("FR", lambda r: _s(r, string.digits, 23)),
        "email": const(
            "notify {s}", lambda r: f"{_s(r, string.ascii_lowercase, 8)}.{_s(r, string.ascii_lowercase, 6)}@example.com"
        ),
        "email_plus_tag": const("from {s}", lambda r: f"ops+{_s(r, string.ascii_lowercase, 7)}@mail.example.org"),
        "email_idn": const("Kontakt {s}", lambda r: f"jürgen.{_s(r, string.ascii_lowercase, 6)}@müller-straße.de"),
        "phone_e164": const("call {s}", lambda r: f"+44 20 7946 0{r.randrange(100, 999)}"),
        "phone_nanp": const("sms to {s}", lambda r: f"415-555-01{r.randrange(10, 99)}"),
        "ssn_us": const(
            "ssn {s}", lambda r: f"{r.randrange(100, 665)}-{r.randrange(10, 99)}-{r.randrange(1000, 9999)}"
        ),
        "password_json_field": const('{{"user": "ops", "password": "{s}"}}', _password),
        "password_xml_element": const(
            "<wsse:UsernameToken><wsse:Password>{s}</wsse:Password></wsse:UsernameToken>", _password
        ),
        "password_xml_attribute": const('<login user="ops" password="{s}"/>', _password),
        "password_form": const("username=ops&password={s}&remember=1", _password),
        "api_key_header": const("X-Api-Key: {s}", lambda r: _s(r, _ALNUM, 32)),
        "token_query_param": const("GET /callback?state=xyz&access_token={s} HTTP/1.1", lambda r: _s(r, _ALNUM, 40)),
        "password_log_line": const("login failed for user=ops password={s} from 10.1.2.3", _password),
        "pg_detail_key": pg_detail,
        "curl_user_password": curl,
        "redis_cli_password": const("redis-cli -h cache -a {s} PING", _password),
        "mysql_cli_password": const("mysqldump -u root -p{s} shop", _password),
        "password_nbsp": const("password\u00a0{s}", _password),
        "password_nbsp_colon": const("password\u00a0: {s}", _password),
        "password_fullwidth_colon": const("password\uff1a{s}", _password),
        "cookie_header": const("Cookie: sessionid={s}; theme=dark", lambda r: _s(r, _ALNUM, 32)),
    }


def _contexts(carrier: str) -> Iterator[tuple[str, Any]]:
    """The carrier as plain text, JSON value, JSON text, log line, stack trace, XML, URL- and
    form-encoded, HTTP header."""
    yield "plain", carrier
    yield "json_value", {"event": "charge.failed", "detail": carrier, "attempt": 2}
    yield "json_text", json.dumps({"event": "charge.failed", "detail": carrier})
    yield "json_in_json", json.dumps({"body": json.dumps({"detail": carrier})})
    yield "log_line", f"2026-05-01T10:00:00.123Z ERROR worker-3 op=capture: {carrier}"
    yield (
        "stack_trace",
        'Traceback (most recent call last):\n  File "/app/pay.py", line 41, in capture\n'
        f"    raise UpstreamError(msg)\npay.UpstreamError: {carrier}",
    )
    yield "xml_element", f"<fault><detail>{html.escape(carrier, quote=False)}</detail></fault>"
    yield "url_encoded", f"https://app.acme.test/retry?next={quote(carrier, safe='')}&n=2"
    yield "form_encoded", f"op=capture&detail={quote_plus(carrier)}"
    yield "http_header", f"X-Upstream-Error: {carrier}"


def secret_cases() -> list[Case]:
    """Every secret kind in every context (plus JSON numbers for cards, base64 for Basic)."""
    out: list[Case] = []
    for kind, make in _kinds().items():
        carrier, secret = make(_r(kind))
        for ctx, value in _contexts(carrier):
            out.append(Case(kind, ctx, value, secret))
        if kind.startswith("card_"):
            out.append(Case(kind, "json_number", {"amount": 1200, "pan": None, "n": int(secret)}, secret))
            out.append(Case(kind, "json_number_text", json.dumps({"amount": 1200, "source": int(secret)}), secret))
    return out


SECRET_KINDS: tuple[str, ...] = tuple(_kinds())


def _lookalikes() -> dict[str, Callable[[random.Random], str]]:
    def luhn_fail(r):
        n = _luhn_complete("4", 16, r)
        return n[:-1] + str((int(n[-1]) + 1) % 10)

    return {
        "uuid": lambda r: str(uuid.UUID(int=r.getrandbits(128), version=4)),
        "uuid_upper": lambda r: str(uuid.UUID(int=r.getrandbits(128), version=4)).upper(),
        "git_sha1": lambda r: _s(r, _HEX, 40),
        "sha256_hex": lambda r: _s(r, _HEX, 64),
        "docker_digest": lambda r: "sha256:" + _s(r, _HEX, 64),
        "iso_timestamp": lambda r: (
            f"2026-0{r.randrange(1, 9)}-1{r.randrange(0, 9)}T0{r.randrange(0, 9)}:1{r.randrange(0, 9)}:00."
            f"{r.randrange(100000, 999999)}+02:00"
        ),
        "epoch_ms": lambda r: str(1_700_000_000_000 + r.randrange(10**10)),
        "order_id": lambda r: f"ord_2026{r.randrange(1000, 9999)}_{r.randrange(10**6):06d}",
        "luhn_failing_digits": luhn_fail,
        "version_string": lambda r: (
            f"v{r.randrange(1, 9)}.{r.randrange(20)}.{r.randrange(20)}-rc.{r.randrange(9)}+build.{r.randrange(999)}"
        ),
        "idempotency_key": lambda r: f"idem-{_s(r, _HEX, 8)}-{_s(r, _HEX, 4)}-capture",
        "stripe_object_id": lambda r: "ch_3" + _s(r, _ALNUM, 23),
        "ulid_request_id": lambda r: "req_01" + _s(r, "0123456789ABCDEFGHJKMNPQRSTVWXYZ", 24),
        "traceparent": lambda r: f"00-{_s(r, _HEX, 32)}-{_s(r, _HEX, 16)}-01",
        "ipv4_port": lambda r: f"10.{r.randrange(255)}.{r.randrange(255)}.{r.randrange(1, 255)}:5432",
        "invoice_number": lambda r: f"INV-2026-{r.randrange(10**6):06d}",
        "amount": lambda r: f"+{r.randrange(10**7, 10**8)}.{r.randrange(10, 99)}",
        "k8s_pod": lambda r: f"payments-worker-{_s(r, _LOWER_DIGITS, 10)}-{_s(r, _LOWER_DIGITS, 5)}",
        "token_counter": lambda r: f"tokens_used={r.randrange(10**5)}",
        "key_in_detail_not_sensitive": lambda r: f"Key (idempotency_key)=(ord-{r.randrange(10**5)}) already exists",
    }


LOOKALIKE_KINDS: tuple[str, ...] = tuple(_lookalikes())


def lookalike_cases() -> list[Case]:
    """Every look-alike in every context a ledger holds it in; each must come back unchanged."""
    out: list[Case] = []
    for kind, make in _lookalikes().items():
        v = make(_r("look-" + kind))
        for ctx, value in (
            ("plain", v),
            ("json_value", {"id": v, "status": "completed"}),
            ("json_text", json.dumps({"ref": v, "status": "completed"})),
            ("log_line", f"2026-05-01T10:00:00.123Z INFO worker-3 done ref={v} in 12 ms"),
            ("xml_element", f"<Reference>{html.escape(v)}</Reference>"),
            ("url_query", f"https://app.example.com/ops?ref={quote(v, safe='')}&page=2"),
        ):
            out.append(Case(kind, ctx, value, None))
    return out


def _views(text: str) -> list[str]:
    """The output as written and as decoded the ways the corpus encodes (URL, form, XML, JSON)."""
    views = [text, unquote(text), unquote_plus(text), html.unescape(text)]
    views.append(text.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\"))
    views += [_SEPARATORS.sub("", v) for v in list(views)]
    return views


_TAG = re.compile(r"\[[a-z][a-z0-9_]{0,31}#[0-9a-f]{6}(?: …\d{4})?\]")
_SEPARATORS = re.compile(r"[\s\-]|\\n")


def leaked_pieces(secret: str, output: Any) -> list[str]:
    """The 6-character pieces of ``secret`` (per line, whitespace-separated segment) that appear in
    ``output`` (a ``str``, or parsed JSON serialised first) or in one of its decoded views. Tags are
    removed first (their hex is random by design). Empty list: nothing leaked."""
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    views = _views(_TAG.sub("\x00", text))
    found: list[str] = []
    for seg in {*secret.split(), _SEPARATORS.sub("", secret)}:
        for i in range(len(seg) - 5):
            piece = seg[i : i + 6]
            if any(piece in v for v in views):
                found.append(piece)
    return found
