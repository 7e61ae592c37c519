"""The masking engine (DESIGN.md §6): one code path for grid, detail views, clipboard, CSV, manifest, logs.

A value leaving the database is masked by two kinds of rule, both plain data in :class:`MaskRules`:

* **field names** — a column or JSON field whose name says it holds a secret or personal datum
  (``password``, ``X-Api-Key``, ``customerEmail``, ``card_number`` ...) is masked whole, whatever it holds;
* **value detectors** — secrets recognised by their shape wherever they appear, free text included: JWTs,
  ``Bearer``/``Basic`` credentials, provider API keys, passwords and token parameters in URLs/DSNs,
  ``name=value`` / ``"name": value`` pairs with a sensitive name, card numbers passing Luhn, IBANs
  passing mod-97, e-mail addresses and phone numbers; also inside encodings (percent/form-encoded
  tokens, JSON ``\\uXXXX`` escapes: ``percent_encoded``), XML elements with a sensitive name
  (``<wsse:Password>``: ``xml_element``), PostgreSQL ``Key (col)=(val)`` details (``key_detail``) and
  ``-u user:pass`` command lines (``command_line``). The detectors are measured against a generated
  corpus (``tests/masking_corpus.py``; ``make bench-masking`` prints precision and recall per kind).

A masked value becomes a tag ``[kind#xxxxxx]``: the kind, and the first 6 hex digits of
HMAC-SHA256(value) under a key that is random per :class:`Masker` and never stored. Equal values give
equal tags within one Masker (an investigator can see that two rows carry the same card), different
Maskers give unrelated tags. Card numbers keep their last four digits: ``[card#3f9a1c …4242]``.

Credentials (passwords, tokens, API keys, JWTs, bearer/basic, DSN passwords, session ids, CVV, PIN) are
never revealable; personal data (e-mail, phone, card, IBAN, SSN) may be revealed one cell at a time by
the GUI on an explicit action (see :meth:`Masker.is_credential`).

Choices about names (deliberate, tested):

* ``session_id`` / ``sessionid`` **are** masked (kind ``session``, a credential): a web session id is a
  bearer credential (OWASP Session Management Cheat Sheet). ``*_id`` otherwise neutralises a name
  (``email_id``, ``card_id``, ``authorization_id`` are references to objects, not the datum itself).
* ``tokens`` (plural) is **not** a sensitive word: ``tokens_used``, ``prompt_tokens``, ``max_tokens``
  are LLM usage counters. Qualifier words neutralise a sensitive word too (``token_count``,
  ``token_type``, ``password_changed_at``, ``card_brand``, ``card_last4``, ``next_page_token``).
  Value detectors still run on such fields, so a real JWT under ``tokens`` is still masked.
* a bare ``key`` is not sensitive (it is the idempotency key); ``api_key``, ``private_key`` ... are.
  As a URL query parameter ``key=`` **is** masked (Google-style API keys), as are ``sig=``/``signature=``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote_plus
from uuid import UUID

from idemview.domain.jsontext import MAX_JSON_DEPTH
from idemview.domain.model import Payload
from idemview.masking.visible import visible

__all__ = [
    "CREDENTIAL_KINDS",
    "MaskRules",
    "Masker",
    "MaskingLogFilter",
    "PatternRule",
    "install_log_masking",
    "mask_message",
    "mask_userinfo",
    "register_secret",
    "url_password_candidates",
    "TAG_RE",
    "luhn_valid",
    "iban_valid",
]

# --------------------------------------------------------------------------------------------------
# Kinds

#: Kinds that are credentials: never revealable, whatever the GUI asks.
CREDENTIAL_KINDS: frozenset[str] = frozenset(
    {
        "password",
        "secret",
        "token",
        "api_key",
        "private_key",
        "authorization",
        "cookie",
        "session",
        "credential",
        "pin",
        "cvv",
        "signature",
        "jwt",
        "bearer",
        "basic",
        "aws_key",
        "github_token",
        "stripe_key",
        "slack_token",
        "google_api_key",
        "aws_secret",
    }
)

#: Built-in detectors. Only the personal-data ones may be switched off by configuration;
#: credential detectors are always on (credentials are never revealed, DESIGN §6).
DETECTORS: tuple[str, ...] = (
    "percent_encoded",
    "private_key",
    "url_password",
    "url_param",
    "jwt",
    "provider_key",
    "auth_header",
    "email",
    "iban",
    "phone",
    "ssn",
    "card",
    "named_value",
    "xml_element",
    "key_detail",
    "command_line",
)
OPTIONAL_DETECTORS: frozenset[str] = frozenset({"email", "iban", "card", "phone", "ssn"})

#: A tag as written by a Masker: ``[kind#xxxxxx]`` or, for cards, ``[card#xxxxxx …1234]``.
TAG_RE = re.compile(r"\[[a-z][a-z0-9_]{0,31}#[0-9a-f]{6}(?: …\d{4})?\]")
_KIND_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")

# --------------------------------------------------------------------------------------------------
# Field-name rules (data)

# Normalised word or phrase (words joined by "_") -> kind. Longest phrase wins.
_FIELD_WORDS: dict[str, str] = {
    # credentials
    "password": "password",
    "passwd": "password",
    "pwd": "password",
    "pw": "password",  # pw=..., db_pw, smtp_pw (a whole word only: "pwned" is not one)
    "pass": "password",
    "passphrase": "password",
    "pass_phrase": "password",
    "passwords": "password",
    "secret": "secret",
    "secrets": "secret",
    "token": "token",
    "otp": "token",
    "totp": "token",
    "verification_code": "token",
    "mfa_code": "token",
    "api_key": "api_key",
    "apikey": "api_key",
    "api_token": "api_key",
    "access_key": "api_key",
    "account_key": "api_key",  # Azure storage connection strings: AccountKey=...
    "shared_access_key": "api_key",  # Azure Service Bus / Event Hubs: SharedAccessKey=...
    "private_key": "private_key",
    "secret_key": "private_key",
    "signing_key": "private_key",
    "encryption_key": "private_key",
    "master_key": "private_key",
    "ssh_key": "private_key",
    "hmac_key": "private_key",
    "privatekey": "private_key",
    "secret_access_key": "aws_secret",
    "aws_secret_key": "aws_secret",
    "authorization": "authorization",
    "auth": "authorization",
    "cookie": "cookie",
    "cookies": "cookie",
    "session": "session",
    "sessionid": "session",
    "jsessionid": "session",
    "phpsessid": "session",
    "credential": "credential",
    "credentials": "credential",
    "creds": "credential",
    "signature": "signature",
    "pin": "pin",
    "cvv": "cvv",
    "cvc": "cvv",
    "cvv2": "cvv",
    "cvc2": "cvv",
    "csc": "cvv",
    "security_code": "cvv",
    "card_verification": "cvv",
    # personal data (revealable one cell at a time)
    "card": "card",
    "card_number": "card",
    "cardnumber": "card",
    "credit_card": "card",
    "creditcard": "card",
    "cc_number": "card",
    "ccnumber": "card",
    "pan": "card",
    "primary_account_number": "card",
    "ssn": "ssn",
    "social_security_number": "ssn",
    "iban": "iban",
    "email": "email",
    "e_mail": "email",
    "email_address": "email",
    "emailaddress": "email",
    "phone": "phone",
    "phone_number": "phone",
    "phonenumber": "phone",
    "telephone": "phone",
    "mobile": "phone",
    "msisdn": "phone",
}

# Substrings of the glued lower-case name (``userpassword``, ``xapikey``) -> kind. Only long,
# unambiguous stems: short ones (pan, pin, auth) would hit "company", "spinner", "author".
_GLUED_NAMES: dict[str, str] = {
    "password": "password",
    "passwd": "password",
    "passphrase": "password",
    "secret": "secret",
    "secretaccesskey": "aws_secret",
    "apikey": "api_key",
    "accesskey": "api_key",
    "accountkey": "api_key",
    "secretkey": "private_key",
    "privatekey": "private_key",
    "accesstoken": "token",
    "refreshtoken": "token",
    "authtoken": "token",
    "bearertoken": "token",
    "idtoken": "token",
    "sessionid": "session",
    "sessiontoken": "session",
    "credential": "credential",
    "creditcard": "card",
    "cardnumber": "card",
    "emailaddress": "email",
    "phonenumber": "phone",
    "authorization": "authorization",
}

# Words that turn a sensitive word into metadata about it (counts, types, times, display parts).
_QUALIFIERS: frozenset[str] = frozenset(
    {
        "count",
        "counts",
        "used",
        "usage",
        "total",
        "max",
        "min",
        "limit",
        "limits",
        "remaining",
        "length",
        "len",
        "size",
        "type",
        "types",
        "kind",
        "scheme",
        "method",
        "methods",
        "provider",
        "mode",
        "expires",
        "expiry",
        "expiration",
        "exp",
        "ttl",
        "timeout",
        "verified",
        "enabled",
        "required",
        "present",
        "version",
        "status",
        "state",
        "policy",
        "rotated",
        "changed",
        "updated",
        "created",
        "issued",
        "revoked",
        "refreshed",
        "last4",
        "last",
        "first6",
        "bin",
        "brand",
        "country",
        "funding",
        "network",
        "fingerprint",
        "month",
        "year",
        "name",
        "domain",
        "path",
        "page",
        "pagination",
        "cursor",
        "continuation",
        "template",
        "subject",
        "format",
        "amount",
        "currency",
        "is",
        "has",
        "strength",
        "algorithm",
        "alg",
    }
)
# "*_id" names reference an object, except for session ids, which are the credential itself.
_ID_WORDS: frozenset[str] = frozenset({"id", "ids", "uuid"})
_ID_SENSITIVE_KINDS: frozenset[str] = frozenset({"session"})

# Extra names sensitive only as URL query/fragment parameters (?key=AIza..., ?sig=..., X-Amz-*).
_URL_PARAM_NAMES: dict[str, str] = {
    "key": "api_key",
    "sig": "signature",
    "signature": "signature",
    "x_amz_signature": "signature",
    "x_amz_credential": "credential",
    "x_amz_security_token": "token",
    "x_goog_signature": "signature",
    "x_goog_credential": "credential",
    "code": "token",
    "client_secret": "secret",
}


def normalize_name(name: str) -> tuple[str, ...]:
    """Split a field name into lower-case words: ``X-Api-Key`` → ``("x", "api", "key")``,
    ``customerEmail`` → ``("customer", "email")``, ``APIKey`` → ``("api", "key")``."""
    s = _CAMEL1.sub(r"\1_\2", name)
    s = _CAMEL2.sub(r"\1_\2", s)
    return tuple(w for w in _NONALNUM.split(s.lower()) if w)


_CAMEL1 = re.compile(r"([a-z0-9])([A-Z])")
_CAMEL2 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_NONALNUM = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class PatternRule:
    """A user-supplied value detector (from the config file, as data).

    ``regex`` is a Python regular expression; if it has a named group ``secret`` only that group is
    masked, otherwise the whole match. ``credential`` says whether the kind may ever be revealed.
    Raises ``ValueError`` on a malformed kind or regex.
    """

    kind: str
    regex: str
    credential: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not _KIND_RE.fullmatch(self.kind):
            raise ValueError(f"masking pattern kind {self.kind!r}: use lower-case letters, digits, _")
        try:
            object.__setattr__(self, "_compiled", re.compile(self.regex))
        except (re.error, TypeError) as e:
            raise ValueError(f"masking pattern {self.kind!r}: invalid regex {self.regex!r}: {e}") from None

    @property
    def compiled(self) -> re.Pattern[str]:
        return self._compiled  # type: ignore[attr-defined]


@dataclass(frozen=True)
class MaskRules:
    """What is masked: field-name rules, enabled detectors and user patterns. Plain data.

    - ``field_words``: normalised word or ``_``-joined phrase → kind (e.g. ``"api_key": "api_key"``);
    - ``glued_names``: substrings of the glued name (``xapikey``) → kind;
    - ``qualifiers``: words that neutralise a sensitive word (``token_count``, ``card_brand``);
    - ``extra_fields``: exact normalised names → kind, checked first and never neutralised;
    - ``not_sensitive``: exact normalised names never masked by name (value detectors still apply);
    - ``url_param_names``: names sensitive only as URL parameters (``key``, ``sig``);
    - ``credential_kinds``: kinds never revealable;
    - ``detectors``: enabled built-in detectors (:data:`DETECTORS`);
    - ``patterns``: user :class:`PatternRule` s, run before the built-in detectors;
    - ``keep_card_last4``: card tags keep the last four digits.

    Use :meth:`default` or :meth:`from_config`.
    """

    field_words: Mapping[str, str]
    glued_names: Mapping[str, str]
    qualifiers: frozenset[str]
    extra_fields: Mapping[str, str]
    not_sensitive: frozenset[str]
    url_param_names: Mapping[str, str]
    credential_kinds: frozenset[str]
    detectors: frozenset[str]
    patterns: tuple[PatternRule, ...] = ()
    keep_card_last4: bool = True
    #: Where these rules came from: ``""`` for the shipped defaults, else the settings file's path and
    #: its ``[masking]`` table as read (listed in every manifest, see :meth:`describe`).
    source: str = ""
    config: Mapping[str, Any] = dataclasses.field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def default(cls) -> MaskRules:
        """The shipped rules: every detector on, the field names of DESIGN §6."""
        return cls(
            field_words=MappingProxyType(dict(_FIELD_WORDS)),
            glued_names=MappingProxyType(dict(_GLUED_NAMES)),
            qualifiers=_QUALIFIERS,
            extra_fields=MappingProxyType({}),
            not_sensitive=frozenset(),
            url_param_names=MappingProxyType(dict(_URL_PARAM_NAMES)),
            credential_kinds=CREDENTIAL_KINDS,
            detectors=frozenset(DETECTORS),
        )

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None, source: str = "") -> MaskRules:
        """The default rules extended by a ``[masking]`` table of the config file::

            fields = ["member_no", {name = "tax_ref", kind = "tax_id", credential = false}]
            not_sensitive = ["session_id"]        # names never masked by name
            patterns = [{kind = "acme_key", regex = "acme_[a-z0-9]{32}"}]   # credential by default
            disable = ["phone"]                   # only email, iban, card, phone may be disabled
            keep_card_last4 = true

        A field given as a bare string gets kind ``sensitive`` (revealable). A field's kind is a
        credential if ``credential = true`` or the kind is a built-in credential kind.
        Raises ``ValueError`` on an unknown key, a bad regex, or an attempt to disable a
        credential detector.
        """
        base = cls.default()
        if not config:
            return base if not source else dataclasses.replace(base, source=source)
        if not isinstance(config, Mapping):
            raise ValueError("masking config must be a table")
        known = {"fields", "not_sensitive", "patterns", "disable", "keep_card_last4"}
        unknown = set(config) - known
        if unknown:
            raise ValueError(f"unknown masking config keys: {sorted(unknown)}")
        extra: dict[str, str] = {}
        cred = set(base.credential_kinds)
        for item in config.get("fields") or []:
            if isinstance(item, str):
                name, kind, is_cred = item, "sensitive", None
            elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
                name, kind, is_cred = item["name"], item.get("kind", "sensitive"), item.get("credential")
            else:
                raise ValueError(f"masking field {item!r}: expected a name or {{name, kind}}")
            if not isinstance(kind, str) or not _KIND_RE.fullmatch(kind):
                raise ValueError(f"masking field {name!r}: bad kind {kind!r}")
            key = "_".join(normalize_name(name))
            if not key:
                raise ValueError(f"masking field {name!r}: empty name")
            extra[key] = kind
            if is_cred:
                cred.add(kind)
        not_sensitive = frozenset("_".join(normalize_name(n)) for n in config.get("not_sensitive") or [])
        patterns = []
        for p in config.get("patterns") or []:
            if not isinstance(p, Mapping) or "kind" not in p or "regex" not in p:
                raise ValueError(f"masking pattern {p!r}: expected {{kind, regex}}")
            rule = PatternRule(p["kind"], p["regex"], bool(p.get("credential", True)))
            patterns.append(rule)
            if rule.credential:
                cred.add(rule.kind)
        detectors = set(base.detectors)
        for d in config.get("disable") or []:
            if d not in DETECTORS:
                raise ValueError(f"unknown masking detector {d!r}")
            if d not in OPTIONAL_DETECTORS:
                raise ValueError(f"masking detector {d!r} guards credentials and cannot be disabled")
            detectors.discard(d)
        return cls(
            field_words=base.field_words,
            glued_names=base.glued_names,
            qualifiers=base.qualifiers,
            extra_fields=MappingProxyType(extra),
            not_sensitive=not_sensitive,
            url_param_names=base.url_param_names,
            credential_kinds=frozenset(cred),
            detectors=frozenset(detectors),
            patterns=tuple(patterns),
            keep_card_last4=bool(config.get("keep_card_last4", True)),
            source=source,
            config=MappingProxyType(dict(config)),
        )

    def classify_name(self, name: str) -> str | None:
        """Kind of a column/field name, or ``None`` when the name says nothing sensitive."""
        words = normalize_name(name)
        if not words:
            return None
        joined = "_".join(words)
        kind = self.extra_fields.get(joined)
        if kind is not None:
            return kind
        if joined in self.not_sensitive:
            return None
        kind = None
        n = len(words)
        fw = self.field_words
        for size in (3, 2, 1):
            for i in range(n - size + 1):
                kind = fw.get("_".join(words[i : i + size]))
                if kind is not None:
                    break
            if kind is not None:
                break
        if kind is None:
            glued = "".join(words)
            for stem, k in self.glued_names.items():
                if stem in glued:
                    kind = k
                    break
        if kind is None:
            return None
        for w in words:
            if w in self.qualifiers:
                return None
            if w in _ID_WORDS and kind not in _ID_SENSITIVE_KINDS:
                return None
        return kind

    def classify_url_param(self, name: str) -> str | None:
        """Kind of a URL query/fragment parameter name (``key``, ``sig`` count here), or ``None``."""
        k = self.url_param_names.get("_".join(normalize_name(name)))
        return k if k is not None else self.classify_name(name)

    def is_credential_kind(self, kind: str) -> bool:
        return kind in self.credential_kinds

    def describe(self) -> dict[str, Any]:
        """JSON-able summary for the evidence manifest (no key, no value)."""
        d = {
            "detectors": [x for x in DETECTORS if x in self.detectors],
            "field_words": sorted(self.field_words),
            "glued_names": sorted(self.glued_names),
            "qualifiers": sorted(self.qualifiers),
            "extra_fields": dict(sorted(self.extra_fields.items())),
            "not_sensitive": sorted(self.not_sensitive),
            "url_param_names": sorted(self.url_param_names),
            "credential_kinds": sorted(self.credential_kinds),
            "patterns": [{"kind": p.kind, "regex": p.regex, "credential": p.credential} for p in self.patterns],
            "keep_card_last4": self.keep_card_last4,
            "card_tag": (
                "[card#xxxxxx …1234]: the last four digits of the one card number the masked value is or "
                "holds (text, a JSON number, a whole JSON value under a card name); none when it holds "
                "several different ones"
                if self.keep_card_last4
                else "[card#xxxxxx]: no digit of the card kept"
            ),
            # whose key it is (this export's own, or the window's session key) is the manifest's masking_key
            "tag": "[kind#first 6 hex of HMAC-SHA256(value) under the masking key named in masking_key]",
        }
        if self.source:  # the user's [masking] settings, as read (absent for the shipped defaults)
            d["settings"] = {"file": self.source, "masking": json.loads(json.dumps(dict(self.config), default=str))}
        d["rules_sha256"] = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()
        return d


# --------------------------------------------------------------------------------------------------
# Value checks


def luhn_valid(digits: str) -> bool:
    """ISO/IEC 7812-1 Luhn check over a string of ASCII digits."""
    total = 0
    dbl = False
    for ch in reversed(digits):
        x = ord(ch) - 48
        if dbl:
            x = _LUHN_DBL[x]
        total += x
        dbl = not dbl
    return total % 10 == 0


_LUHN_DBL = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)


def _iin_plausible(d: str) -> bool:
    """Issuer prefix and length of the major card networks (ISO/IEC 7812 IIN ranges): cuts false
    positives such as 13-digit epoch milliseconds (leading 1) and random 16-digit ids."""
    n = len(d)
    a = d[0]
    if a == "4":  # Visa
        return n in (13, 16, 19)
    if a == "5":  # Mastercard 51-55, Maestro 50/56-59
        return 16 <= n <= 19
    if a == "2":  # Mastercard 2-series 2221-2720
        return n == 16 and 2221 <= int(d[:4]) <= 2720
    if a == "6":  # Discover, UnionPay, Maestro
        return 16 <= n <= 19
    if a == "3":
        ab = d[:2]
        if ab in ("34", "37"):  # Amex
            return n == 15
        if ab in ("30", "36", "38", "39"):  # Diners
            return n in (14, 16, 19)
        if ab == "35":  # JCB
            return 16 <= n <= 19
    return False


# ISO 13616 IBAN lengths by country (SWIFT IBAN registry).
_IBAN_LENGTHS: dict[str, int] = {
    "AD": 24,
    "AE": 23,
    "AL": 28,
    "AT": 20,
    "AZ": 28,
    "BA": 20,
    "BE": 16,
    "BG": 22,
    "BH": 22,
    "BI": 27,
    "BR": 29,
    "BY": 28,
    "CH": 21,
    "CR": 22,
    "CY": 28,
    "CZ": 24,
    "DE": 22,
    "DJ": 27,
    "DK": 18,
    "DO": 28,
    "EE": 20,
    "EG": 29,
    "ES": 24,
    "FI": 18,
    "FK": 18,
    "FO": 18,
    "FR": 27,
    "GB": 22,
    "GE": 22,
    "GI": 23,
    "GL": 18,
    "GR": 27,
    "GT": 28,
    "HR": 21,
    "HU": 28,
    "IE": 22,
    "IL": 23,
    "IQ": 23,
    "IS": 26,
    "IT": 27,
    "JO": 30,
    "KW": 30,
    "KZ": 20,
    "LB": 28,
    "LC": 32,
    "LI": 21,
    "LT": 20,
    "LU": 20,
    "LV": 21,
    "LY": 25,
    "MC": 27,
    "MD": 24,
    "ME": 22,
    "MK": 19,
    "MN": 20,
    "MR": 27,
    "MT": 31,
    "MU": 30,
    "NI": 28,
    "NL": 18,
    "NO": 15,
    "OM": 23,
    "PK": 24,
    "PL": 28,
    "PS": 29,
    "PT": 25,
    "QA": 29,
    "RO": 24,
    "RS": 22,
    "RU": 33,
    "SA": 24,
    "SC": 31,
    "SD": 18,
    "SE": 24,
    "SI": 19,
    "SK": 24,
    "SM": 27,
    "SO": 23,
    "ST": 25,
    "SV": 28,
    "TL": 23,
    "TN": 24,
    "TR": 26,
    "UA": 29,
    "VA": 22,
    "VG": 24,
    "XK": 20,
    "YE": 30,
}


def iban_valid(iban: str) -> bool:
    """ISO 13616 IBAN check: known country, its length, and ISO 7064 mod 97-10 == 1.
    Spaces are ignored; letters may be of either case."""
    s = iban.replace(" ", "").upper()
    if _IBAN_LENGTHS.get(s[:2]) != len(s) or not s[2:4].isdigit() or not s.isalnum():
        return False
    r = s[4:] + s[:4]
    try:
        return int("".join(str(int(c, 36)) for c in r)) % 97 == 1
    except ValueError:
        return False


def _looks_random(s: str) -> bool:
    """Heuristic for a credential after ``Bearer``/``Basic``: prose words are all letters with at
    most a leading capital; tokens carry digits, symbols, inner capitals or are long."""
    if len(s) >= 20:
        return True
    upper = lower = 0
    for ch in s:
        if ch.isdigit() or ch in "._~+/=-":
            return True
        if ch.isupper():
            upper += 1
        elif ch.islower():
            lower += 1
    return upper >= 2 and lower >= 1 or (upper >= 1 and not s[0].isupper())


# --------------------------------------------------------------------------------------------------
# Detector regexes (compiled once; each detector below documents its source)

# Cheap pre-filter (see _families). Python's regex engine is fast on an alternation of plain
# literals and slow on case-insensitive or named-group alternations or a \d start, so gates are
# literal alternations (on lower-cased text for names) and byte shapes; a string that passes none
# (ids, statuses, kinds: the common case) is returned untouched in well under a microsecond.
# Byte "shape" of a text for digit-based detectors: digit -> 0, A-Z -> 2, '-' '.' -> 3, a-z -> 4,
# else 1. bytes.translate / in / count run in C, far faster than a regex with a \d start.
_SHAPE = bytes(
    (0 if 48 <= i <= 57 else 2 if 65 <= i <= 90 else 3 if i in (45, 46) else 4 if 97 <= i <= 122 else 1)
    for i in range(256)
)
_PROVIDER_GATE_RE = re.compile(
    r"AKIA|ASIA|gh[pousr]_|github_pat_|_live_|_test_|whsec_|xox|xapp-|AIza|ya29\.|sk-|glpat-"
    r"|npm_|pypi-|SG\.|key-|shpat_|hf_|hooks\.slack|SK|Q~"
)
_STEM_GATE_RE = re.compile(
    r"b(?:earer|asic)|token|p(?:ass|wd?|an|in|hone)|s(?:ecret|ess|sn|ig)|key|auth"
    r"|c(?:ookie|red|ard|vv|vc|sc|ode)|iban|m(?:ail|obile|sisdn)|otp"
)
(
    _F_URL,
    _F_AT,
    _F_JWT,
    _F_PEM,
    _F_CARD,
    _F_PHONE,
    _F_IBAN,
    _F_PROV,
    _F_STEM,
    _F_AWS,
    _F_PHONE00,
    _F_SSN,
    _F_LABEL,
    _F_PCT,
    _F_CLI,
    _F_JSONU,
    _F_ENT,
    _F_B64,
    _F_NFKC,
) = (1 << i for i in range(19))
# AWS secret keys (40 base64 characters) need an AWS or "secret" context (on lower-cased text).
_AWS_GATE_RE = re.compile(r"akia|asia|aws|secret")


def _families(text: str) -> int:
    """Bit set of detector families that could match ``text`` (0: nothing to do).

    Each family is gated by a necessary condition that is cheap to test: a character that must be
    present (``://``, ``@``, ``+``, ``=``/``:``/whitespace for name=value and auth schemes), a
    minimum length (provider keys are >= 15 characters), or a digit shape computed in C.
    """
    f = 0
    if "://" in text:
        f |= _F_URL
    if "@" in text:
        f |= _F_AT
    if "eyJ" in text:
        f |= _F_JWT
    if "+" in text:
        f |= _F_PHONE
    if "-----BEGIN" in text:
        f |= _F_PEM
    if ("%" in text and _PCT_RE.search(text) is not None) or ("+" in text and "=" in text):
        f |= _F_PCT
    if "\\u" in text and _JSON_U_RE.search(text) is not None:
        f |= _F_JSONU
    if "&" in text and _HTML_ENT_RE.search(text) is not None:
        f |= _F_ENT
    if len(text) >= _B64_MIN and _B64_TOKEN_RE.search(text) is not None:
        f |= _F_B64
    if not text.isascii():
        f |= _F_NFKC
    if "-u" in text or "--user" in text or "-a" in text or "-p" in text or "--pass" in text:
        f |= _F_CLI
    low = None
    if "=" in text or ":" in text or " " in text or not text.isascii() or not text.isprintable():
        low = text.lower()
        if _STEM_GATE_RE.search(low) is not None:
            f |= _F_STEM
    if len(text) >= 15 and _PROVIDER_GATE_RE.search(text) is not None:
        f |= _F_PROV
    if len(text) >= 40 and f & (_F_STEM | _F_PROV):  # "secret" / "AKIA" (more in the detector)
        f |= _F_AWS
    sh = text.encode("utf-8", "surrogatepass").translate(_SHAPE)
    nd = sh.count(0)
    if nd >= 6 and low is not None and (f & _F_STEM or "tel" in low or "social" in low or "cell" in low):
        f |= _F_LABEL
    if nd >= 9:
        if nd >= 10 and " " in text and _phone00_start(text):
            f |= _F_PHONE00
        if sh.find(b"\0\0\0\3\0\0\3\0\0\0\0") >= 0:  # SSN "ddd-dd-dddd"
            f |= _F_SSN
    if nd >= 4:
        if nd >= 10 and sh.find(b"\0\0\0\0") >= 0:  # cards and NANP phones have a 4-digit group
            if nd >= 13:
                f |= _F_CARD
            if sh.find(b"\0\0\0\3\0\0\0\0") >= 0:  # NANP ends "ddd-dddd" / "ddd.dddd"
                f |= _F_PHONE
        if sh.find(b"\2\2\0\0") >= 0:
            f |= _F_IBAN
        else:
            m = _CCDD_LOWER_RE.search(sh)  # lower case: "ccdd" (literal search: fast)
            if m is not None and _lower_iban_start(text, sh, m.start()):
                f |= _F_IBAN
    return f


def _phone00_start(text: str) -> bool:
    """Gate for _PHONE00_RE: "00" + a non-zero digit at a word start (str.find beats a regex with a
    look-behind by 10x here; ids like "ord_00000123" have "00" but not at a word start)."""
    i = text.find("00")
    n = len(text)
    while i >= 0:
        if (
            i + 2 < n
            and "1" <= text[i + 2] <= "9"
            and (i == 0 or not text[i - 1].isalnum() and text[i - 1] not in "_+-./:")
        ):
            return True
        i = text.find("00", i + 2)  # a "00" at i+1 follows a "0": not a word start
    return False


_CCDD_LOWER_RE = re.compile(rb"\x04\x04\x00\x00")


def _lower_iban_start(text: str, sh: bytes, p: int) -> bool:
    """Gate for lower-case IBANs, after a shape pre-check in C: "ccdd" at a word start (or after a
    JSON escape such as ``\\n``) with a known country ``cc``. Lower-case hex ids often have that
    shape, so the country and boundary are checked here rather than by the IBAN regex."""
    if len(sh) != len(text):
        return True  # non-ASCII: indices differ, let the regex decide
    while p >= 0:
        if (p == 0 or sh[p - 1] not in (0, 2, 4) or (p >= 2 and text[p - 2] == "\\")) and text[
            p : p + 2
        ].upper() in _IBAN_LENGTHS:
            return True
        p = sh.find(b"\4\4\0\0", p + 1)
    return False


# A JSON/C escape just before a token is a boundary too ("\nAKIA...", "\u00e9eyJ..."), so
# JSON kept as text is masked like parsed JSON. Used as an alternative to each "not preceded by
# a word character" lookbehind; the escape letter itself never starts a match ((?<!\\) guards).
_ESC = r"(?<=\\[ntrbf])|(?<=\\u[0-9a-fA-F]{4})"

# RFC 7468 PEM private key blocks (also PGP "PRIVATE KEY BLOCK"); an unterminated block to the end.
_PEM_RE = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.S,
)

# RFC 3986 userinfo "user:password@" in any scheme://  (postgres://, redis://, https://, amqp://...)
_URL_USERINFO_RE = re.compile(
    r"(?:(?<![A-Za-z0-9+.\-])|" + _ESC + r")(?<!\\)[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s:/?#@\"'<>\[\]]*:([^\s/\"'<>]*)@"
)

# Query / fragment / matrix parameters: ?token=..., &sig=..., #access_token=..., ;jsessionid=...
_URL_PARAM_RE = re.compile(r"[?&#;]([A-Za-z][\w.\-]{0,63})=([^&#\s\"'<>]+)")

# RFC 7519 JWT / RFC 7515 JWS compact form: base64url(JSON header) starts with "eyJ" ({").
_JWT_RE = re.compile(
    r"(?:(?<![A-Za-z0-9\-])|" + _ESC + r")eyJ[A-Za-z0-9_\-]{2,}\.(?:eyJ[A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]*){0,3}"
    r"|[A-Za-z0-9_\-]{2,}(?:\.[A-Za-z0-9_\-]*){1,3})"
)

# Provider key formats, as documented by each provider (prefix + charset + length).
_PROVIDER_RE = re.compile(
    r"(?:(?<![A-Za-z0-9_\-])|" + _ESC + r")(?:"
    r"(?P<aws_key>(?:AKIA|ASIA)[A-Z0-9]{16})(?![A-Za-z0-9])"
    r"|(?P<github_token>(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"
    r"|(?P<stripe_key>(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9+/=]{16,})"
    r"|(?P<slack_token>xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-[A-Za-z0-9\-]{10,})"
    r"|(?P<google_api_key>AIza[0-9A-Za-z_\-]{35}|ya29\.[0-9A-Za-z_\-]{20,})"
    r"|(?P<api_key>sk-[A-Za-z0-9_\-]{20,}|glpat-[A-Za-z0-9_\-]{20,}|npm_[A-Za-z0-9]{36}"
    r"|pypi-AgE[A-Za-z0-9_\-]{20,}|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}|key-[0-9a-f]{32}"
    r"|shpat_[0-9a-fA-F]{32}|hf_[A-Za-z0-9]{30,}"
    r"|SK[0-9a-fA-F]{32}(?![A-Za-z0-9])"  # Twilio API key SID (the key's name and half of its credential)
    r"|[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-]))"  # Azure AD client secret
    r")"
    r"|(?<=hooks\.slack\.com/services/)(?P<slack_webhook>[A-Za-z0-9/]{20,})"
)

# RFC 7235 / 6750 / 7617 credentials after an auth scheme.
_AUTH_RE = re.compile(r"(?:(?<![A-Za-z0-9])|" + _ESC + r")(?i:(bearer|basic|token))(\s+)([A-Za-z0-9._~+/\-]+=*)")
_AUTH_CONTEXT_RE = re.compile(r"(?i)authori[sz]ation|auth\b|x-auth")

# E-mail addresses (RFC 5322 dot-atom, minus quote characters and separators that occur in URLs).
_EMAIL_RE = re.compile(
    r"(?:(?<![\w!#$%*+^{|}~.\-])|" + _ESC + r")(?<!\\)[\w!#$%*+^{|}~\-](?:[\w!#$%*+^{|}~.\-]{0,63})"
    r"@(?:[^\W_](?:[\w\-]{0,61}[^\W_])?\.)+(?:xn--[a-z0-9\-]{2,59}|[^\W\d_]{2,24})(?![\w\-])"
)

# Candidate IBAN (ISO 13616): country, 2 check digits, BBAN, optionally in groups separated by
# spaces; upper or lower case (validated upper-cased, see _iban_case_ok).
_IBAN_RE = re.compile(r"(?:(?<![A-Za-z0-9])|" + _ESC + r")[A-Za-z]{2}\d{2}(?: ?[A-Za-z0-9]){11,30}(?![A-Za-z0-9])")
_HEX_CHARS = frozenset("0123456789abcdef")


def _iban_case_ok(s: str) -> bool:
    """An IBAN is written all upper or all lower case (random mixed-case ids are not IBANs). An
    unspaced lower-case candidate made only of hex digits, with a hex letter in its BBAN, is a hex
    id (span ids, digests) that happens to pass mod-97 (1 in 97), not an IBAN."""
    if s.isupper():
        return True
    if not s.islower():
        return False
    return " " in s or not (_HEX_CHARS.issuperset(s) and not s[4:].isdigit())


# Runs of >= 13 digits with single space/dash/dot separators; card windows are searched inside a run.
_CARD_RUN_RE = re.compile(r"(?<!\d)\d(?:[ .\-]?\d){12,}(?!\d)")
_DIGITS_RE = re.compile(r"\d+")
_CARD_TEXT_RE = re.compile(r"\s*\d[\d .\-]*\d\s*")

# AWS secret access key: 40 base64 characters (mixed case, with a digit, "/" or "+"), looked for only
# in text that mentions AWS, an access key id (AKIA/ASIA) or a secret (see _F_AWS).
# Not inside a longer token ("~", "-", "_" or ".x" after it: a bearer token, a JWT part), which the
# auth-scheme and JWT detectors take whole.
_AWS_SECRET_RE = re.compile(
    r"(?:(?<![A-Za-z0-9/+=~_\-])|" + _ESC + r")[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=~_\-]|\.[A-Za-z0-9])"
)

# US SSN "ddd-dd-dddd" (SSA: area not 000/666/9xx, group not 00, serial not 0000); dates are 4-2-2.
_SSN_RE = re.compile(
    r"(?:(?<![\w\-./:])|" + _ESC + r")(?!000|666|9)\d{3}-(?!00)\d{2}-(?!0000)\d{4}"
    r"(?![\w\-]|[.:/]\d)"
)
# International numbers written with the "00" prefix and spaces (ITU-T E.123): "0044 20 7946 0958".
_PHONE00_RE = re.compile(r"(?:(?<![\w+\-./:])|" + _ESC + r")00[1-9]\d{0,3}(?: \d{1,4}){2,5}(?![\w\-./:]| \d)")
# A phone or SSN right after its label word, no ":" needed: "tel 020 7946 0958", "ssn 078 05 1120".
_LABEL_NUM_RE = re.compile(
    r"(?<![A-Za-z0-9_])(?i:(?P<ssn>ssn|social[ \-]security(?:[ \-](?:number|no\.?|nr\.?))?)"
    r"|phone|tel|telephone|mobile|cell(?:phone)?|msisdn)\.?"
    r"(?i:[ \t]*(?:number|no\.?|nr\.?|#))?[ \t]*[:=#]?[ \t]*"
    r"(?P<num>\(?\+?\d[\d ().\-/]{4,22}\d)(?!\d)"
)

# E.164-ish phone numbers need a leading + (ITU-T E.164: at most 15 digits); NANP needs its
# formatted shape. Plain digit runs are not phones: they are ids, order numbers, epochs.
_PHONE_RE = re.compile(r"(?:(?<![\w+/.])|" + _ESC + r")\+[1-9][\d ()\-]{6,24}\d(?!\d)")
_NANP_RE = re.compile(
    r"(?:(?<![\w\-.])|" + _ESC + r")(?:\([2-9]\d{2}\) ?|[2-9]\d{2}[\-.])[2-9]\d{2}[\-.]\d{4}(?!\d|[\-.]\d)"
)

# name=value, name: value, "name": "value", \"name\": \"value\" (JSON in JSON), name => value.
# A name may follow "--" (a long command-line option: "mysqldump --password=x", "psql --password=x"),
# and a quoted value may start on the next line (JSON pretty-printed with a line break after ':').
_KV_RE = re.compile(
    r"(?:(?<![\w.\-])|(?<=(?<![\w.\-])--)|" + _ESC + r")(?<!\\)(?P<name>[A-Za-z_][\w.\-]{0,63}?)(?:\\{0,7}[\"'])?"
    r"(?:[ \t\u00a0\u202f\u3000]*(?:=>|[:=\uff1a\uff1d])[ \t\u00a0\u202f\u3000]*"
    r"(?:\r?\n[ \t]*(?=[\"']))?|[\u00a0\u202f]+)"
    r"(?P<val>(?P<q0>(?P<bs>\\{3,7})\"(?:(?!(?P=bs)\").){0,4096}?(?P=bs)\")|(?P<q1>\\\"(?:[^\"\\]|\\[^\"])*?\\\")|(?P<q2>\"(?:[^\"\\\n]|\\.)*\")|(?P<q3>'[^'\n]*')"
    r"|(?P<bare>(?:(?i:bearer|basic|token)[ \t]+)?[^\s&,;\"'<>(){}\[\]]+))"
)
# Continuation of an unquoted credential value (see Masker._kv_value_end): characters of a word,
# then more words after a space/","/"&" unless that word starts another name=value pair.
_KV_WORD = r"""(?:[^\s;,&"'\\]|'(?=\w)|\\\\|\\(?![nrtbfu"'\\]))"""
_KV_PAIR = r"""[A-Za-z_][\w.\-]{0,63}(?:\\?["'])?[ \t]*(?:=>|[:=])"""
_KV_CRED_REST_RE = re.compile(rf"{_KV_WORD}*(?:(?:[ \t]+|[,&][ \t]*)(?!{_KV_PAIR}){_KV_WORD}+)*")
# Further digit groups after a phone/ssn/card/iban name: "phone: 020 7946 0958".
_KV_DIGIT_REST_RE = re.compile(r"(?:[ \t]+[()+\-./]*\d[\d()+\-./]*(?![^\s,;\"'&]))*")
_NUMBERISH_KINDS = frozenset({"phone", "ssn", "card", "iban"})
# Placeholders left visible after a sensitive name ("password=None" tells an investigator that no
# password was set). Exact spellings only: a password that *is* one of these stays visible.
# YES / NO: MySQL's "Access denied for user 'app'@'host' (using password: YES)" says whether a password
# was sent, not what it was; masking it hid the one useful word of the message (issue #13 §9).
_KV_SKIP_VALUES = frozenset(
    {
        "null",
        "NULL",
        "None",
        "none",
        "true",
        "false",
        "True",
        "False",
        "undefined",
        "nil",
        "",
        "***",
        "********",
        "YES",
        "NO",
        "Yes",
        "No",
        "yes",
        "no",
    }
)

_PHONE_SPLIT_RE = re.compile(r"\d+")

# Percent-encoding (RFC 3986 §2.1) and form encoding (WHATWG application/x-www-form-urlencoded): a
# token holding %XX is decoded, masked, and replaced by its masked decoded form when that hid anything.
_PCT_RE = re.compile(r"%[0-9A-Fa-f]{2}")
_PCT_TOKEN_MAX = 16384  # longer tokens are blobs; decoding them would triple the cost of a big cell
_PCT_TOKEN_RE = re.compile(r"[^\s\"'<>]*(?:%[0-9A-Fa-f]{2}|\w\+\w)[^\s\"'<>]*")
# JSON "\uXXXX" escapes (json.dumps' default ensure_ascii, or a writer that escapes letters to hide
# them: "\u0070assword", "bob\u0040example.com") are decoded for the detectors; the escapes of '"',
# '\\' and control characters stay escaped so JSON text stays JSON.
_JSON_U_RE = re.compile(
    # a surrogate only as a pair at one escape depth: a lone one (valid JSON, no character) is left as
    # written; ASCII letters, digits and punctuation but '"', '\\' and controls are decoded too
    r"(?<!\\)(\\+)u(?:d[89ab][0-9a-f]{2}\1ud[c-f][0-9a-f]{2}|00[89a-f][0-9a-f]|0[1-9a-f][0-9a-f]{2}"
    r"|[1-9a-ce-f][0-9a-f]{3}|d[0-7][0-9a-f]{2}|00(?:2[013-9a-f]|[346][0-9a-f]|5[0-9abd-f]|7[0-9a-e]))",
    re.I,
)
# HTML/XML character references (HTML Living Standard §13.2.5.72-80, XML 1.0 §4.1): "&#x70;assword",
# "bob&#64;example.com", "&commat;" decoded for the detectors (html.unescape), kept decoded only when
# that hid something.
_HTML_ENT_RE = re.compile(r"&(?:#[0-9]{1,7};?|#[xX][0-9a-fA-F]{1,6};?|[A-Za-z][A-Za-z0-9]{1,31};)")
# A base64 / base64url token (RFC 4648 §4, §5) long enough to hide a secret ("eyJwYXNzd29yZCI6..." is
# '{"password": ...'): decoded; when the decoded text is UTF-8 a detector masks, the whole token is
# masked. Random bytes, hex digests and ids do not decode to UTF-8 text: they stay as written.
_B64_MIN = 16
_B64_MAX = 16384  # longer tokens are blobs (images, archives): not decoded
_B64_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{16,}={0,2}(?![A-Za-z0-9+/_\-=])")

# XML elements whose (local) name is sensitive: <wsse:Password>...</wsse:Password> (OASIS WS-Security
# UsernameToken), <password>...</password>; also escaped inside another document (&lt;...&gt;).
_XML_ELEMENT_RE = re.compile(
    r"(?:<|&lt;)(?:[A-Za-z_][\w.\-]*:)?(?P<name>[A-Za-z_][\w.\-]{0,63})(?:\s[^<>]{0,512}?)?(?:>|&gt;)"
    r"(?P<val>(?:(?!&lt;)[^<]){1,8192}?)(?:<|&lt;)/"
)

# PostgreSQL's unique/foreign-key violation detail (src/backend/access/nbtree/nbtinsert.c,
# ri_triggers.c): "Key (col[, col...])=(val[, val...]) already exists." / "is not present in table".
_PG_KEY_DETAIL_RE = re.compile(
    r"(?<![\w])\((?P<names>[^()\n]{1,512})\)=\((?P<vals>[^\n]{0,8192}?)\)"
    r"(?=\s+(?:already exists|is not present|is still referenced|conflicts with)|\.?\s*(?:$|\\n|\"))",
    re.M,
)

# A user and password on a command line: curl/wget/httpie ``-u user:pass`` / ``--user user:pass`` /
# ``--user=user:pass`` (curl(1) "-u, --user <user:password>").
# redis-cli(1) ``-a <password>`` / ``--pass <password>``; mysql(1) / mariadb ``-p<password>`` (no space:
# "-p password" asks for it). Looked for only in text naming the client.
_CLI_REDIS_RE = re.compile(r"(?<![\w\-])(?:-a|--pass)[ \t]+(['\"]?)(?P<pw>[^\s'\"]+)\1")
_CLI_MYSQL_RE = re.compile(r"(?<![\w\-])-p(?P<pw>[^\s'\"\-][^\s'\"]+)")
_CLI_USER_RE = re.compile(r"(?<![\w\-])(?:-u|--user)(?:[ \t]+|=)(['\"]?)(?P<user>[^\s:'\"]*):(?P<pw>[^\s'\"]+)\1")


# --------------------------------------------------------------------------------------------------


class Masker:
    """Masks values with one set of :class:`MaskRules` and one HMAC key.

    ``key`` (bytes) defaults to 32 random bytes, per instance; it is never stored, logged, pickled
    or shown. Make one Masker per GUI session and one per export. Not thread-safe for ``counts``
    (use one per thread/worker).
    """

    _TEXT_CACHE_MAX = 16384
    _TEXT_CACHE_LEN = 160

    def __init__(self, rules: MaskRules | None = None, key: bytes | None = None) -> None:
        self.rules = rules if rules is not None else MaskRules.default()
        if key is not None and not isinstance(key, (bytes, bytearray)):
            raise TypeError("Masker key must be bytes")
        self.__key = bytes(key) if key is not None else secrets.token_bytes(32)
        self._counts: dict[str, int] = {}
        self._name_cache: dict[str, str | None] = {}
        self._url_name_cache: dict[str, str | None] = {}
        self._text_cache: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._tag_cache: dict[tuple[str, str], str] = {}
        self._key_cache: dict[str, tuple[str, str | None, tuple[str, ...]]] = {}
        self._pct_depth = 0  # nesting of _d_percent_encoded (decodes at most twice)
        det = self.rules.detectors
        # (detector, families that must have triggered, function), in the order they must run.
        self._steps = [
            (bits, fn)
            for name, bits, fn in (
                ("percent_encoded", _F_JSONU, self._d_json_escapes),
                ("percent_encoded", _F_PCT, self._d_percent_encoded),
                ("percent_encoded", _F_ENT, self._d_html_entities),
                ("percent_encoded", _F_NFKC, self._d_lookalike_letters),
                ("private_key", _F_PEM, self._d_pem),
                ("url_password", _F_URL, self._d_url_password),
                ("url_param", _F_STEM, self._d_url_param),
                ("jwt", _F_JWT, self._d_jwt),
                ("provider_key", _F_PROV, self._d_provider),
                ("provider_key", _F_AWS, self._d_aws_secret),
                ("auth_header", _F_STEM, self._d_auth),
                ("percent_encoded", _F_B64, self._d_base64),
                ("email", _F_AT, self._d_email),
                ("iban", _F_IBAN, self._d_iban),
                ("phone", _F_PHONE, self._d_phone),  # before cards: "+4915123456789" is a phone
                ("phone", _F_PHONE00, self._d_phone00),
                ("ssn", _F_SSN, self._d_ssn),
                ("named_value", _F_LABEL, self._d_labelled_number),
                ("card", _F_CARD, self._d_card),
                ("xml_element", _F_STEM, self._d_xml_element),
                ("key_detail", _F_STEM, self._d_key_detail),
                ("command_line", _F_CLI, self._d_command_line),
                ("named_value", _F_STEM, self._d_kv),
            )
            if name in det
        ]

    def __repr__(self) -> str:
        return f"<Masker rules={self.rules.describe()['rules_sha256'][:12]} key=<hidden>>"

    def __getstate__(self):
        raise TypeError("a Masker holds a session key and cannot be pickled")

    # ------------------------------------------------------------------ public API

    @property
    def counts(self) -> dict[str, int]:
        """Kind → number of values masked since creation or :meth:`reset_counts` (a copy)."""
        return dict(self._counts)

    def reset_counts(self) -> None:
        self._counts.clear()

    def count_total(self) -> int:
        """Number of values masked so far (the sum of :attr:`counts`, without copying them): a caller
        that caches masked output can tell from it whether a call masked anything."""
        return sum(self._counts.values())

    def column_kind(self, column: str | None) -> str | None:
        """Kind of a column / field name under these rules, or ``None`` if not sensitive by name."""
        if column is None:
            return None
        try:
            return self._name_cache[column]
        except KeyError:
            pass
        k = self.rules.classify_name(column) if isinstance(column, str) else None
        if len(self._name_cache) > 8192:
            self._name_cache.clear()
        self._name_cache[column] = k
        return k

    def unchanged_check(self) -> Callable[[str], bool] | None:
        """A cheap test that proves a text is one every rule of this Masker leaves unchanged (a
        canonical UUID or lower-case hex holding no card or IBAN, see ``_plain_shape``), for callers
        that mask many unique ids; ``None`` when user patterns exist (they may match anything).
        False from the test proves nothing: mask the text."""
        return None if self.rules.patterns else _plain_shape

    def mask_text(self, text: str, *, count: bool = True) -> str:
        """Mask every detected secret inside free text (JSON text, URLs, error messages, headers).

        Only the secret part is replaced: ``postgres://app:[password#1a2b3c]@db/x``,
        ``Authorization: Bearer [bearer#…]``. Returns ``text`` itself when nothing was found.
        Idempotent: tags are never re-masked. ``count=False`` leaves :attr:`counts` alone.
        """
        return self._mask_text(text, self._counts if count else {})

    def mask_message(self, text: str) -> str:
        """Mask a message (an error, a banner, a log line) before anyone sees it: secrets this process
        knows (:func:`register_secret`) are replaced first, then anything shaped like
        ``user:password@host`` (:func:`mask_userinfo`, URL or not), then every detector of
        :meth:`mask_text` (e-mail, card, API key...). Counts are left alone. DESIGN §6: error messages
        and logs are masked like any other value."""
        if not isinstance(text, str):
            text = str(text)
        text = _scrub_known(self, text)
        text = mask_userinfo(text, lambda pw: self._tag("password", pw))
        return self._mask_text(text, {})

    def mask_value(self, value: Any, column: str | None = None, *, count: bool = True) -> Any:
        """Mask one cell. ``column`` is its column or field name, if known.

        - sensitive column (by name): any non-``None``, non-bool value becomes one tag string;
        - ``None``, ``bool``, ``int``, ``float``, ``Decimal``, date/time values, ``UUID`` pass through;
        - ``str`` → :meth:`mask_text`;
        - ``dict`` / ``list`` / ``tuple`` (parsed JSON) → a new structure, recursively, using field
          names; keys are masked as text too; ``[name, value]`` pairs and ``{"name":..,"value":..}``
          header objects (HAR) are masked by their name;
        - ``bytes`` pass through (the caller decodes them first if they are text);
        - :class:`idemview.domain.model.Payload` → a new Payload with its value masked.

        ``count=False`` leaves :attr:`counts` alone (e.g. for a manifest's own fields).
        """
        return self._mask_value(value, column, self._counts if count else {})

    def for_column(self, column: str | None) -> Callable[[Any], Any]:
        """A function equivalent to ``lambda v: self.mask_value(v, column)``, with the column's
        name rule resolved once (used by exports and grids for speed)."""
        kind = self.column_kind(column)
        cnt = self._counts
        if kind is not None:
            tag_whole = self._tag_whole

            def masked_column(v: Any) -> Any:
                if v is None or v is True or v is False:
                    return v
                return tag_whole(kind, v, cnt)

            return masked_column
        tc = self._text_cache
        mask_text = self._mask_text
        mask_value = self._mask_value
        mask_dict = self._mask_dict
        passthrough = _PASSTHROUGH_TYPES

        def plain_column(v: Any) -> Any:
            t = type(v)
            if t is str:
                hit = tc.get(v)
                if hit is None:
                    return mask_text(v, cnt)
                if hit[1]:
                    for k in hit[1]:
                        cnt[k] = cnt.get(k, 0) + 1
                return hit[0]
            if t in passthrough:
                return v
            if t is dict:
                return mask_dict(v, cnt)
            return mask_value(v, None, cnt)

        return plain_column

    def mask_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """``{column: mask_value(value, column)}`` for a row given as a mapping."""
        return {k: self._mask_value(v, k, self._counts) for k, v in row.items()}

    def is_credential(self, column: str | None, value: Any) -> bool:
        """True if the cell holds (or its column names) a credential: it may then never be revealed,
        not even one cell at a time. Does not change :attr:`counts`."""
        kind = self.column_kind(column)
        cred = self.rules.credential_kinds
        if kind is not None and value is not None and kind in cred:
            return True
        scratch: dict[str, int] = {}
        self._mask_value(value, None, scratch)
        return any(k in cred for k in scratch)

    def detected_kinds(self, value: Any, column: str | None = None) -> dict[str, int]:
        """Which kinds this Masker would mask in ``value`` (a cell, text or parsed JSON; ``column``
        its column or field name), with how many values of each: ``{}`` when nothing is sensitive.
        The value is never returned or kept, and :attr:`counts` is left alone (the ledger audit,
        ``secret_at_rest``, asks this of sampled cells)."""
        scratch: dict[str, int] = {}
        self._mask_value(value, column, scratch)
        return scratch

    def tag(self, kind: str, value: Any) -> str:
        """The tag this Masker gives ``value`` as ``kind`` (counted)."""
        return self._tag_whole(kind, value, self._counts)

    # ------------------------------------------------------------------ tags

    def _hex(self, norm: str) -> str:
        return hmac.digest(self.__key, norm.encode("utf-8", "surrogatepass"), "sha256").hex()[:6]

    def _tag(self, kind: str, raw: str, value: Any = None) -> str:
        """Tag for a detected/whole string value. Normalisation makes formatting variants equal.
        ``value``: the value ``raw`` was written from, when it was not text (a JSON object or number
        under a card name), for the card's last four (:func:`card_last4`, the one rule for them)."""
        ck = (kind, raw)
        t = self._tag_cache.get(ck)
        if t is not None:
            return t
        last4 = None
        if kind == "card":
            norm = "".join(ch for ch in raw if ch.isdigit())
            if self.rules.keep_card_last4:
                last4 = card_last4(raw if value is None else value)
        elif kind == "iban":
            norm = raw.replace(" ", "").upper()
        elif kind == "email":
            norm = raw.strip().lower()
        elif kind in ("phone", "ssn"):
            norm = "".join(ch for ch in raw if ch.isdigit())
            if kind == "phone" and norm.startswith("00"):
                norm = norm[2:]  # "0044 20 ..." is "+44 20 ..."
        else:
            norm = raw
        t = f"[{kind}#{self._hex(norm)} …{last4}]" if last4 else f"[{kind}#{self._hex(norm)}]"
        if len(self._tag_cache) > 65536:
            self._tag_cache.clear()
        self._tag_cache[ck] = t
        return t

    def _tag_whole(self, kind: str, value: Any, cnt: dict[str, int]) -> str:
        """Whole-value tag for a value under a sensitive name (any type); counted in ``cnt``."""
        if isinstance(value, str):
            raw = value
        elif isinstance(value, (bytes, bytearray, memoryview)):
            raw = "b:" + bytes(value).hex()
        elif isinstance(value, (dict, list, tuple)):
            try:
                raw = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
            except (RecursionError, TypeError):  # nested past the encoder's recursion; keys of mixed types
                raw = dump_json(value, sort_keys=True)
        elif isinstance(value, datetime):
            raw = value.isoformat()
        elif type(value) is float and value.is_integer() and abs(value) < 1e19:
            raw = str(int(value))  # 4242424242424242.0 is the number 4242424242424242, not 17 digits
        else:
            raw = str(value)
        cnt[kind] = cnt.get(kind, 0) + 1
        return self._tag(kind, raw, None if isinstance(value, str) else value)

    # ------------------------------------------------------------------ values
    # Internals count into ``cnt`` (the Masker's counts, or a scratch dict for is_credential).

    def _mask_value(self, value: Any, column: str | None, cnt: dict[str, int]) -> Any:
        if value is None or value is True or value is False:
            return value
        if column is not None:
            kind = self._name_cache.get(column, _MISSING)
            if kind is _MISSING:
                kind = self.column_kind(column)
            if kind is not None:
                return self._tag_whole(kind, value, cnt)  # type: ignore[arg-type]
        t = type(value)
        if t is str:
            return self._mask_text(value, cnt)
        if t is int or t is float or t is Decimal:
            return value
        if t is dict:
            return self._mask_dict(value, cnt)
        if t is list or t is tuple:
            return self._mask_list(value, cnt)
        if isinstance(value, str):  # str subclasses (enums): keep the object if unchanged
            out = self._mask_text(str(value), cnt)
            return value if out == value else out
        if isinstance(
            value, (int, float, Decimal, datetime, date, time, timedelta, UUID, bytes, bytearray, memoryview)
        ):
            return value
        if isinstance(value, Mapping):
            return self._mask_dict(value, cnt)
        if isinstance(value, (list, tuple)):
            return self._mask_list(value, cnt)
        if isinstance(value, Payload):
            return Payload(
                value.encoding,
                self._mask_value(value.value, None, cnt),
                value.size,
                None if value.problem is None else self._mask_text(value.problem, cnt),
            )
        # Unknown object: what leaves is its text, so mask that.
        return self._mask_text(str(value), cnt)

    def _mask_dict(self, d: Mapping[Any, Any], cnt: dict[str, int]) -> dict[Any, Any]:
        return self._walk(d, cnt)

    def _mask_list(self, seq, cnt: dict[str, int]) -> list[Any]:
        return self._walk(seq, cnt)

    def _walk(self, root: Any, cnt: dict[str, int]) -> Any:
        """Mask a parsed JSON value (dicts, lists, tuples, Mappings) by a loop over an explicit stack,
        never recursion on the data: any nesting is walked in constant Python stack. Containers more
        than :data:`MAX_MASK_DEPTH` levels down are serialised to JSON text (iteratively too) and that
        text is masked as one value: shown, bounded, never a crash (issue 19 item 11)."""
        holder: list[Any] = [None]
        # (source container, where its copy goes, slot there, depth)
        stack: list[tuple[Any, Any, Any, int]] = [(root, holder, 0, 0)]
        pop, push = stack.pop, stack.append
        while stack:
            src, parent, slot, depth = pop()
            if depth >= MAX_MASK_DEPTH:
                parent[slot] = self._mask_text(dump_json(src), cnt)
                continue
            if isinstance(src, Mapping):
                parent[slot] = self._walk_dict(src, cnt, push, depth + 1)
            else:
                parent[slot] = self._walk_list(src, cnt, push, depth + 1)
        return holder[0]

    def _walk_dict(self, d: Mapping[Any, Any], cnt: dict[str, int], push, depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        keys = self._key_cache
        tc = self._text_cache
        # HAR-style header object {"name": "Cookie", "value": "..."}: the name governs the value.
        hdr_kind = None
        if len(d) <= 4 and "value" in d:
            nm = d.get("name", d.get("key"))
            if isinstance(nm, str):
                hdr_kind = self.column_kind(nm)
        for k, v in d.items():
            if type(k) is not str:
                if _is_container(v):
                    out[k] = None
                    push((v, out, k, depth))
                else:
                    out[k] = self._mask_value(v, None, cnt)
                continue
            ki = keys.get(k)
            if ki is None:
                # (masked key, kind of the name, kinds masked inside the key): keys repeat a lot.
                scratch: dict[str, int] = {}
                mk = self._mask_text(k, scratch)
                ki = (mk, self.column_kind(k), tuple(x for x, n in scratch.items() for _ in range(n)))
                if len(keys) > 8192:
                    keys.clear()
                keys[k] = ki
            mk, kind, key_kinds = ki
            if key_kinds:
                for kk in key_kinds:
                    cnt[kk] = cnt.get(kk, 0) + 1
                if mk in out:  # two keys masked alike: keep both
                    mk = f"{mk}~{len(out)}"
            if v is None or v is True or v is False:
                out[mk] = v
            elif kind is not None:
                out[mk] = self._tag_whole(kind, v, cnt)
            elif hdr_kind is not None and k == "value":
                out[mk] = self._tag_whole(hdr_kind, v, cnt)
            elif type(v) is str:
                hit = tc.get(v)
                if hit is None:
                    out[mk] = self._mask_text(v, cnt)
                else:
                    if hit[1]:
                        for kk in hit[1]:
                            cnt[kk] = cnt.get(kk, 0) + 1
                    out[mk] = hit[0]
            elif type(v) is int or type(v) is float:
                out[mk] = v if v < _CARD_MIN or not _card_number(v) else self._tag_number(v, cnt)
            elif _is_container(v):
                out[mk] = None  # the slot keeps the key order; filled when the stack reaches it
                push((v, out, mk, depth))
            else:
                out[mk] = self._mask_value(v, None, cnt)
        return out

    def _walk_list(self, seq, cnt: dict[str, int], push, depth: int) -> list[Any]:
        # [name, value] header pairs: [["Authorization", "Bearer ..."], ["Cookie", "sid=..."]]
        if len(seq) == 2 and isinstance(seq[0], str) and seq[1] is not None:
            kind = self.column_kind(seq[0])
            if kind is not None:
                return [self._mask_text(seq[0], cnt), self._tag_whole(kind, seq[1], cnt)]
        out: list[Any] = []
        for v in seq:
            if (type(v) is int or type(v) is float) and v >= _CARD_MIN and _card_number(v):
                out.append(self._tag_number(v, cnt))
            elif _is_container(v):
                out.append(None)
                push((v, out, len(out) - 1, depth))
            else:
                out.append(self._mask_value(v, None, cnt))
        return out

    def _tag_number(self, v: int | float, cnt: dict[str, int]) -> str:
        """A JSON number that is a card number (issue 19: ``{"n": 4111111111111111}``), as its tag."""
        cnt["card"] = cnt.get("card", 0) + 1
        return self._tag("card", str(int(v)))

    # ------------------------------------------------------------------ text

    def _mask_text(self, text: str, cnt: dict[str, int]) -> str:
        # Inside a percent-decoding step the result depends on its depth: never cached then.
        short = len(text) <= self._TEXT_CACHE_LEN and not self._pct_depth
        if short:
            hit = self._text_cache.get(text)
            if hit is not None:
                if hit[1]:
                    for k in hit[1]:
                        cnt[k] = cnt.get(k, 0) + 1
                return hit[0]
        out = text
        local: list[str] = []
        if self.rules.patterns:
            out = self._d_patterns(out, local)
        elif _plain_shape(text):
            return text  # unique ids and hex mostly: not cached, the check is cheaper than a cache slot
        if len(out) >= 6:  # nothing we detect by shape is shorter
            fams = _families(out)
            if fams:
                for bits, step in self._steps:
                    if fams & bits:
                        out = step(out, local)
        if short:
            if len(self._text_cache) >= self._TEXT_CACHE_MAX:
                self._text_cache.clear()
            self._text_cache[text] = (out, tuple(local))
        if local:
            for k in local:
                cnt[k] = cnt.get(k, 0) + 1
        return out

    # Each detector: (text, found) -> text. Detectors run in a fixed order so that specific shapes
    # (URLs, JWTs, provider keys, cards) are tagged before the generic name=value rule sees them.

    def _d_patterns(self, text: str, found: list[str]) -> str:
        for p in self.rules.patterns:
            rx = p.compiled
            if rx.search(text) is None:
                continue
            has_group = "secret" in rx.groupindex

            def repl(m: re.Match[str], kind=p.kind, has_group=has_group) -> str:
                if has_group and m.group("secret") is None:
                    return m.group()
                s, e = m.span("secret") if has_group else m.span()
                if s == e or _at_tag(m.string, s):
                    return m.group()
                found.append(kind)
                base = m.start()
                g = m.group()
                return g[: s - base] + self._tag(kind, m.string[s:e]) + g[e - base :]

            text = rx.sub(repl, text)
        return text

    def _d_percent_encoded(self, text: str, found: list[str]) -> str:
        """Tokens holding ``%XX``: decoded (form ``+`` as space), masked with every detector, and
        replaced by the masked decoded text when that hid something (``next=postgres%3A%2F%2Fu%3Apw%40h``
        becomes ``next=postgres://u:[password#…]@h``); left as written otherwise. Decoding twice at
        most (doubly encoded parameters); what decodes to the same text is left alone."""
        from urllib.parse import unquote_plus

        depth = self._pct_depth
        if depth >= 2:
            return text

        def repl(m: re.Match[str]) -> str:
            tok = m.group()
            if len(tok) > _PCT_TOKEN_MAX:  # a blob (base64 with "+"), not a URL or a form: as written
                return tok
            dec = unquote_plus(tok)
            if dec == tok:
                return tok
            self._pct_depth = 2  # the token as written, not decoded: if that finds a secret, keep it so
            try:
                plain: dict[str, int] = {}
                self._mask_text(tok, plain)
            finally:
                self._pct_depth = depth
            if plain:
                return tok  # masked as written by the steps after this one ("AccountKey=ab+cd==")
            sub: dict[str, int] = {}
            self._pct_depth = depth + 1
            try:
                out = self._mask_text(dec, sub)
            finally:
                self._pct_depth = depth
            if not sub:
                return tok
            found.extend(k for k, n in sub.items() for _ in range(n))
            return out

        return _PCT_TOKEN_RE.sub(repl, text)

    def _d_json_escapes(self, text: str, found: list[str]) -> str:
        """``\\uXXXX`` escapes of non-ASCII characters decoded (JSON text written with ensure_ascii),
        so the detectors see ``jürgen@müller.de`` or ``password\\u00a0x`` as written; the decoded text
        is kept only when it hid something (it is still valid JSON: only non-ASCII is decoded)."""

        def dec(m: re.Match[str]) -> str:
            esc = m.group()[len(m.group(1)) :].replace(m.group(1), "\\")  # any depth of JSON-in-JSON
            esc = "\\" + esc
            return esc.encode("ascii").decode("unicode_escape").encode("utf-16", "surrogatepass").decode("utf-16")

        decoded = _JSON_U_RE.sub(dec, text)
        scratch: dict[str, int] = {}
        out = self._mask_text(decoded, scratch)
        if not scratch:
            return text
        found.extend(k for k, n in scratch.items() for _ in range(n))
        return out

    def _d_html_entities(self, text: str, found: list[str]) -> str:
        """Character references decoded (``&#x70;assword=…``, ``bob&#64;example.com``), masked with
        every detector; the decoded, masked text replaces the original only when that hid something."""
        import html

        return self._decoded_view(text, html.unescape(text), found)

    def _d_lookalike_letters(self, text: str, found: list[str]) -> str:
        """Compatibility forms folded and invisible format characters dropped (Unicode NFKC, UAX #15;
        general category Cf): ``ｐａｓｓｗｏｒｄ=…`` (full-width) and ``pass\u200bword=…`` (a zero-width
        space in the name) read as ``password=…``; kept folded only when that hid something."""
        import unicodedata

        folded = unicodedata.normalize("NFKC", text)
        if any(unicodedata.category(c) == "Cf" for c in folded if not c.isascii()):
            folded = "".join(c for c in folded if c.isascii() or unicodedata.category(c) != "Cf")
        return self._decoded_view(text, folded, found)

    def _decoded_view(self, text: str, decoded: str, found: list[str]) -> str:
        """``decoded`` (``text`` in another spelling) masked with every detector when that hides
        something, else ``text`` unchanged; two levels of decoding at most."""
        if self._pct_depth >= 2 or decoded == text:
            return text
        scratch: dict[str, int] = {}
        depth = self._pct_depth
        self._pct_depth = depth + 1
        try:
            out = self._mask_text(decoded, scratch)
        finally:
            self._pct_depth = depth
        if not scratch:
            return text
        found.extend(k for k, n in scratch.items() for _ in range(n))
        return out

    def _d_base64(self, text: str, found: list[str]) -> str:
        """Base64 / base64url tokens whose decoded bytes are UTF-8 text holding something a detector
        masks (a JSON with a password, an e-mail, a card number) are masked whole, as the first kind
        found; two levels of decoding at most."""
        import base64
        import binascii

        depth = self._pct_depth
        if depth >= 2:
            return text

        def repl(m: re.Match[str]) -> str:
            tok = m.group()
            if len(tok) > _B64_MAX or _at_tag(text, m.start()):
                return tok
            body = tok.rstrip("=")
            if len(body) % 4 == 1:
                return tok
            padded = body + "=" * (-len(body) % 4)
            try:
                if "-" in body or "_" in body:
                    raw = base64.urlsafe_b64decode(padded)
                else:
                    raw = base64.b64decode(padded, validate=True)
                dec = raw.decode("utf-8")
            except (binascii.Error, ValueError):
                return tok
            if not dec.replace("\n", "").replace("\t", "").replace("\r", "").isprintable():
                return tok
            sub: dict[str, int] = {}
            self._pct_depth = depth + 1
            try:
                self._mask_text(dec, sub)
            finally:
                self._pct_depth = depth
            if not sub:
                return tok
            found.extend(k for k, n in sub.items() for _ in range(n))
            return self._tag(next(iter(sub)), tok)

        return _B64_TOKEN_RE.sub(repl, text)

    def _d_xml_element(self, text: str, found: list[str]) -> str:
        if "<" not in text and "&lt;" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            kind = self.column_kind(m.group("name"))
            vs = m.start("val")
            if kind is None or _at_tag(m.string, vs) or not m.group("val").strip():
                return m.group()
            found.append(kind)
            base = m.start()
            return m.group()[: vs - base] + self._tag(kind, m.group("val")) + m.group()[m.end("val") - base :]

        return _XML_ELEMENT_RE.sub(repl, text)

    def _d_key_detail(self, text: str, found: list[str]) -> str:
        if ")=(" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            names = [n.strip() for n in m.group("names").split(",")]
            kinds = [self.column_kind(n) for n in names]
            if not any(kinds):
                return m.group()
            raw = m.group("vals")
            vals = raw.split(", ")
            base = m.start()
            head = m.group()[: m.start("vals") - base]
            if len(vals) != len(names):  # a value holding ", ": the whole tuple as one
                first = next(k for k in kinds if k)
                found.append(first)
                return head + self._tag(first, raw) + ")"
            out = []
            for kind, v in zip(kinds, vals, strict=True):
                if kind is None or _at_tag(v, 0):
                    out.append(v)
                else:
                    found.append(kind)
                    out.append(self._tag(kind, v))
            return head + ", ".join(out) + ")"

        return _PG_KEY_DETAIL_RE.sub(repl, text)

    def _d_command_line(self, text: str, found: list[str]) -> str:
        def repl(m: re.Match[str]) -> str:
            if _at_tag(m.string, m.start("pw")):
                return m.group()
            found.append("password")
            base = m.start()
            return (
                m.group()[: m.start("pw") - base]
                + self._tag("password", m.group("pw"))
                + m.group()[m.end("pw") - base :]
            )

        text = _CLI_USER_RE.sub(repl, text)
        low = text.lower()
        if "redis-cli" in low:
            text = _CLI_REDIS_RE.sub(repl, text)
        if "mysql" in low or "mariadb" in low:
            text = _CLI_MYSQL_RE.sub(repl, text)
        return text

    def _d_pem(self, text: str, found: list[str]) -> str:
        if "-----BEGIN" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            found.append("private_key")
            return self._tag("private_key", m.group())

        return _PEM_RE.sub(repl, text)

    def _d_url_password(self, text: str, found: list[str]) -> str:
        if "://" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            pw = m.group(1)
            if not pw or _at_tag(m.string, m.start(1)):
                return m.group()
            found.append("password")
            s = m.start(1) - m.start()
            return m.group()[:s] + self._tag("password", pw) + "@"

        return _URL_USERINFO_RE.sub(repl, text)

    def _d_url_param(self, text: str, found: list[str]) -> str:
        if "=" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            name = m.group(1)
            kind = self._url_name_cache.get(name, _MISSING)
            if kind is _MISSING:
                kind = self.rules.classify_url_param(name)
                if len(self._url_name_cache) > 4096:
                    self._url_name_cache.clear()
                self._url_name_cache[name] = kind
            if kind is None or _at_tag(m.string, m.start(2)):
                return m.group()
            found.append(str(kind))
            return m.group()[: m.start(2) - m.start()] + self._tag(str(kind), m.group(2))

        return _URL_PARAM_RE.sub(repl, text)

    def _d_jwt(self, text: str, found: list[str]) -> str:
        if "eyJ" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            found.append("jwt")
            return self._tag("jwt", m.group())

        return _JWT_RE.sub(repl, text)

    def _d_provider(self, text: str, found: list[str]) -> str:
        def repl(m: re.Match[str]) -> str:
            kind = m.lastgroup or "api_key"
            if kind == "slack_webhook":
                kind = "slack_token"
            found.append(kind)
            return self._tag(kind, m.group())

        return _PROVIDER_RE.sub(repl, text)

    def _d_auth(self, text: str, found: list[str]) -> str:
        def repl(m: re.Match[str]) -> str:
            cred = m.group(3)
            if len(cred) < 6 or _at_tag(m.string, m.start(3)):
                return m.group()
            if not _looks_random(cred):
                before = m.string[max(0, m.start() - 40) : m.start()]
                if _AUTH_CONTEXT_RE.search(before) is None:
                    return m.group()
            scheme = m.group(1).lower()
            kind = "token" if scheme == "token" else scheme
            found.append(kind)
            return m.group(1) + m.group(2) + self._tag(kind, cred)

        return _AUTH_RE.sub(repl, text)

    def _d_aws_secret(self, text: str, found: list[str]) -> str:
        if _AWS_GATE_RE.search(text.lower()) is None:
            return text

        def repl(m: re.Match[str]) -> str:
            s = m.group()
            if not (_has_upper(s) and _has_lower(s) and (_has_digit(s) or "/" in s or "+" in s)):
                return s  # hex digests, words: not a base64 secret
            found.append("aws_secret")
            return self._tag("aws_secret", s)

        return _AWS_SECRET_RE.sub(repl, text)

    def _d_email(self, text: str, found: list[str]) -> str:
        if "@" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            found.append("email")
            return self._tag("email", m.group())

        return _EMAIL_RE.sub(repl, text)

    def _d_iban(self, text: str, found: list[str]) -> str:
        m = _IBAN_RE.search(text)
        if m is None:
            return text
        parts: list[str] = []
        pos = 0
        while m is not None:
            s = m.group()
            length = _IBAN_LENGTHS.get(s[:2].upper())
            end = -1
            if length:
                cnt = k = 0
                while k < len(s) and cnt < length:
                    if s[k] != " ":
                        cnt += 1
                    k += 1
                if cnt == length and (k == len(s) or s[k] == " ") and iban_valid(s[:k]) and _iban_case_ok(s[:k]):
                    end = k
            if end > 0:
                parts.append(text[pos : m.start()])
                parts.append(self._tag("iban", s[:end]))
                found.append("iban")
                pos = m.start() + end
                m = _IBAN_RE.search(text, pos)
            else:
                m = _IBAN_RE.search(text, m.start() + 1)
        parts.append(text[pos:])
        return "".join(parts)

    def _d_card(self, text: str, found: list[str]) -> str:
        m = _CARD_RUN_RE.search(text)
        if m is None:
            return text
        parts: list[str] = []
        pos = 0
        while m is not None:
            base = m.start()
            for s, e in _card_spans(m.group()):
                parts.append(text[pos : base + s])
                parts.append(self._tag("card", text[base + s : base + e]))
                found.append("card")
                pos = base + e
            m = _CARD_RUN_RE.search(text, m.end())
        parts.append(text[pos:])
        return "".join(parts)

    def _d_phone(self, text: str, found: list[str]) -> str:
        if "+" in text:
            text = _PHONE_RE.sub(lambda m: self._phone_repl(m, found), text)
        if "-" in text or "." in text or "(" in text:

            def nanp(m: re.Match[str]) -> str:
                found.append("phone")
                return self._tag("phone", m.group())

            text = _NANP_RE.sub(nanp, text)
        return text

    def _d_phone00(self, text: str, found: list[str]) -> str:
        def repl(m: re.Match[str]) -> str:
            n = sum(ch.isdigit() for ch in m.group()) - 2
            if not 8 <= n <= 15:
                return m.group()
            found.append("phone")
            return self._tag("phone", m.group())

        return _PHONE00_RE.sub(repl, text)

    def _d_ssn(self, text: str, found: list[str]) -> str:
        def repl(m: re.Match[str]) -> str:
            found.append("ssn")
            return self._tag("ssn", m.group())

        return _SSN_RE.sub(repl, text)

    def _d_labelled_number(self, text: str, found: list[str]) -> str:
        det = self.rules.detectors

        def repl(m: re.Match[str]) -> str:
            kind = "ssn" if m.group("ssn") else "phone"
            num = m.group("num")
            n = sum(ch.isdigit() for ch in num)
            if kind not in det or not (n == 9 if kind == "ssn" else 7 <= n <= 15):
                return m.group()
            found.append(kind)
            return m.group()[: m.start("num") - m.start()] + self._tag(kind, num)

        return _LABEL_NUM_RE.sub(repl, text)

    def _phone_repl(self, m: re.Match[str], found: list[str]) -> str:
        s = m.group()
        after = m.string[m.end() : m.end() + 2]
        if len(after) == 2 and after[0] in ".," and after[1].isdigit():
            return s  # "+12345678.90" is an amount, not a phone
        # Take whole digit groups while the total stays within E.164's 15 digits.
        total = 0
        end = 0
        for g in _PHONE_SPLIT_RE.finditer(s):
            n = len(g.group())
            if total + n > 15:
                break
            total += n
            end = g.end()
        if total < 8:
            return s
        found.append("phone")
        return self._tag("phone", s[:end]) + s[end:]

    def _d_kv(self, text: str, found: list[str]) -> str:
        # A search loop, not re.sub: when a name is not sensitive ("status: password=x") scanning
        # resumes at its value, so a sensitive pair inside that value is still seen.
        m = _KV_RE.search(text)
        if m is None:
            return text
        parts: list[str] = []
        last = 0
        while m is not None:
            kind = self.column_kind(m.group("name"))
            vs, ve = m.span("val")
            if m.group("q0") is not None:  # JSON in JSON in JSON: \\\"value\\\"
                w = len(m.group("bs")) + 1
                vs, ve = vs + w, ve - w
            elif m.group("q1") is not None:
                vs, ve = vs + 2, ve - 2
            elif m.group("bare") is None:
                vs, ve = vs + 1, ve - 1
            else:
                bare = m.group("bare")
                sp = bare.find(" ") if " " in bare else bare.find("\t")
                if sp > 0:  # "Bearer xyz": keep the scheme
                    while bare[sp] in " \t":
                        sp += 1
                    vs += sp
            val = text[vs:ve]
            if (
                kind is None
                or _at_tag(text, vs)
                or (m.group("bare") is not None and val.lower() in ("bearer", "basic", "token"))
            ):
                m = _KV_RE.search(text, m.start("val"))
                continue
            if m.group("bare") is not None:
                ve = self._kv_value_end(text, ve, kind)
                val = text[vs:ve]
            if val in _KV_SKIP_VALUES:
                m = _KV_RE.search(text, m.start("val"))
                continue
            found.append(kind)
            parts.append(text[last:vs])
            parts.append(self._tag(kind, val))
            last = ve
            m = _KV_RE.search(text, ve)
        if not parts:
            return text
        parts.append(text[last:])
        return "".join(parts)

    def _kv_value_end(self, text: str, ve: int, kind: str) -> int:
        """Where an unquoted value after a sensitive name ends (its first word ends at ``ve``).

        After a **credential** name (``password: correct horse battery staple``) the value runs on
        over further words up to the end of the line, a ``;``, a quote or JSON escape that closes an
        enclosing string (``"``, ``\\"``, ``\\n``, a ``'`` not followed by a letter), or a
        separator (space, ``,``, ``&``) followed by another ``name=`` / ``name:`` pair
        (``password=s3cret dbname=x`` keeps ``dbname=x`` visible). Unbalanced closing brackets at
        its end are left out (``(password: a b)``). Tags already in the text are never swallowed.
        After a **number-ish personal** name (phone, ssn, card, iban) it runs on over further
        space-separated groups made of digits and ``()+-./`` (``phone: 020 7946 0958``).
        """
        if kind in self.rules.credential_kinds:
            m = _KV_CRED_REST_RE.match(text, ve)  # both patterns match the empty string: never None
            end = m.end() if m else ve
        elif kind in _NUMBERISH_KINDS:
            m = _KV_DIGIT_REST_RE.match(text, ve)
            end = m.end() if m else ve
        else:
            return ve
        if end == ve:
            return ve
        i = text.find("[", ve, end)
        while i >= 0:
            if TAG_RE.match(text, i) is not None:
                end = i
                while end > ve and text[end - 1] in " \t,&":
                    end -= 1
                break
            i = text.find("[", i + 1, end)
        while end > ve and text[end - 1] in ")]}>":
            closer = text[end - 1]
            opener = "([{<"[")]}>".index(closer)]
            seg = text[ve - 1 : end]
            if seg.count(opener) >= seg.count(closer):
                break
            end -= 1
        return end


_MISSING = object()
# Shapes every detector leaves unchanged, proven cheaply (see _plain_shape).
_UUID_SHAPE_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_LOWER_HEX_RE = re.compile(r"[0-9a-f]+")
_HEX_IBAN_START_RE = re.compile(r"[a-f]{2}[0-9]{2}")
_HEX_LETTERS_TO_SPACE = bytes.maketrans(b"abcdefABCDEF", b" " * 12)


def _plain_shape(text: str) -> bool:
    """True when ``text`` is a canonical UUID or lower-case hex that no built-in detector changes,
    decided without running them (False: run them). Why that is exact, detector by detector:

    - only ``[0-9a-fA-F-]`` (UUID) or ``[0-9a-f]`` (hex): no ``@ : / + = ? & # ;``, space, quote,
      backslash or label word, so no URL, e-mail, auth scheme, name=value, phone (``+``, spaces,
      ``ddd-ddd-dddd``: UUID groups between hyphens are 4 or 12 long and the first is 8), SSN
      (``ddd-dd-dddd``, likewise), JWT (``eyJ``), PEM or provider key (every prefix holds a letter
      outside a-f, ``_``, ``.`` or ``-``; ``key-`` and ``sk-`` have k, s, y), hence no AWS secret
      either (it needs a provider or ``secret`` context);
    - IBAN: a UUID has no 15 letters/digits in a row; in lower-case hex the candidate must start the
      text (word start) and a lower-case hex candidate is an IBAN only when its BBAN is all digits:
      a text starting ``[a-f]{2}[0-9]{2}`` is left to the detectors;
    - card: a UUID whose digit runs, joined across hyphens, are all shorter than 13 digits has no
      card run; in hex (no separators) a card is a whole digit run of 13-19 digits with a plausible
      issuer and a valid Luhn sum, checked here exactly as the card detector does.
    """
    if len(text) == 36 and _UUID_SHAPE_RE.fullmatch(text) is not None:
        runs = text.encode("ascii").translate(_HEX_LETTERS_TO_SPACE, b"-").split()
        return max(map(len, runs), default=0) < 13
    if _LOWER_HEX_RE.fullmatch(text) is None or _HEX_IBAN_START_RE.match(text) is not None:
        return False
    runs = text.encode("ascii").translate(_HEX_LETTERS_TO_SPACE).split()
    if max(map(len, runs), default=0) < 13:
        return True
    for run in runs:
        if 12 < len(run) < 20:
            d = run.decode("ascii")
            if _iin_plausible(d) and luhn_valid(d):
                return False
    return True


# Exact types that never carry text, passed through unless their column is sensitive by name.
_PASSTHROUGH_TYPES = frozenset({int, float, Decimal, datetime, date, time, timedelta, UUID, bool, type(None)})


_has_upper = re.compile(r"[A-Z]").search
_has_lower = re.compile(r"[a-z]").search
_has_digit = re.compile(r"[0-9]").search


def _at_tag(s: str, i: int) -> bool:
    return s.startswith("[", i) and TAG_RE.match(s, i) is not None


_CARD_MIN = 10**12

#: Nesting the masker keeps as structure; deeper containers become their masked JSON text. The same
#: bound as the parser's (:data:`idemview.domain.jsontext.MAX_JSON_DEPTH`), for values that did not come
#: through it (API callers, driver-parsed columns).
MAX_MASK_DEPTH = MAX_JSON_DEPTH


def _is_container(v: Any) -> bool:
    t = type(v)
    return t is dict or t is list or t is tuple or (t is not str and isinstance(v, (Mapping, list, tuple)))


def dump_json(value: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON text of a value of any nesting, by a loop (``json.dumps`` recurses per level and
    fails past ~1000). Scalars as ``json.dumps`` writes them (``default=str`` for other objects)."""
    enc = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":")).encode
    parts: list[str] = []
    # items: a value to write, or a literal string marker (closing brackets, separators)
    stack: list[tuple[bool, Any]] = [(False, value)]
    while stack:
        literal, v = stack.pop()
        if literal:
            parts.append(v)
            continue
        if isinstance(v, Mapping):
            items = sorted(v.items(), key=lambda kv: str(kv[0])) if sort_keys else list(v.items())
            parts.append("{")
            stack.append((True, "}"))
            for n, (k, x) in enumerate(reversed(items)):
                stack.append((False, x))
                sep = "" if n == len(items) - 1 else ","
                stack.append((True, sep + enc(k if isinstance(k, str) else str(k)) + ":"))
        elif isinstance(v, (list, tuple)):
            parts.append("[")
            stack.append((True, "]"))
            for n, x in enumerate(reversed(v)):
                stack.append((False, x))
                if n != len(v) - 1:
                    stack.append((True, ","))
        else:
            parts.append(enc(v))
    return "".join(parts)


def card_last4(value: Any) -> str | None:
    """The last four digits a card tag keeps (``keep_card_last4``, issue #20 item 11c), for every
    path that tags a card: a detected card number in text, a value under a card name (``card``,
    ``pan``...) whether text, a JSON number or a whole JSON object/array, a JSON number passing Luhn.

    ``value``: text, a number, bytes (read as UTF-8) or parsed JSON. Returns the last four digits of
    the one card number it is or holds: text that is only a card number (13-19 digits with spaces,
    dashes or dots; Luhn not required, it is under a card name or was detected), else the card
    numbers found in it by the card detector's own rule (issuer prefix, Luhn, printed grouping) in
    its text and JSON leaves; else a card object's own ``last4`` field (a provider's card object holds
    no number). ``None`` when it holds none (``tok_visa``), or several different ones: one tag cannot
    name two cards, and naming one would hide the other."""
    found: set[str] = set()
    named: set[str] = set()  # last four digits given by name, used when no number is found
    stack = [value]
    while stack and len(found) < 2:
        v = stack.pop()
        if isinstance(v, (bytes, bytearray, memoryview)):
            v = bytes(v).decode("utf-8", "replace")
        if isinstance(v, str):
            digits = "".join(ch for ch in v if ch.isdigit())
            if 13 <= len(digits) <= 19 and _CARD_TEXT_RE.fullmatch(v) is not None:
                found.add(digits)
                continue
            if ("%" in v or "+" in v) and (plain := unquote_plus(v)) != v:
                v = plain  # URL/form-encoded: "card%204111…", "4111+1111+…" (the separators are spaces)
            for m in _CARD_RUN_RE.finditer(v):
                run = m.group()
                for a, b in _card_spans(run):
                    found.add("".join(ch for ch in run[a:b] if ch.isdigit()))
        elif type(v) is int or type(v) is float:
            if v >= _CARD_MIN and _card_number(v):
                found.add(str(int(v)))
        elif isinstance(v, Decimal):
            if v == v.to_integral_value() and 0 < v < 10**19:
                stack.append(str(int(v)))
        elif isinstance(v, Mapping):
            for k, x in v.items():
                # a provider's card object holds no number, only its last four (Stripe's card.last4)
                if isinstance(k, str) and k.lower() in _LAST4_FIELDS and isinstance(x, (str, int)):
                    if len(d := str(x)) == 4 and d.isdigit():
                        named.add(d)
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    if not found and len(named) == 1:
        return next(iter(named))
    return next(iter(found))[-4:] if len(found) == 1 else None


#: Field names that hold a card's last four digits in a card object (Stripe ``card.last4``, Adyen
#: ``lastFour``, Braintree ``last_4``).
_LAST4_FIELDS = frozenset({"last4", "last_4", "lastfour", "last_four"})


def _card_number(v: int | float) -> bool:
    """A JSON number (int, or a float holding an integer exactly) of 13-19 digits with a card
    issuer's prefix and a valid Luhn sum: a card number stored as a number, not as text."""
    if type(v) is float:
        if not v.is_integer() or v >= 1e19:
            return False
        v = int(v)
    if v >= 10**19:
        return False
    d = str(v)
    return _iin_plausible(d) and luhn_valid(d)


def _card_spans(run: str) -> Iterable[tuple[int, int]]:
    """Spans inside a digit run that are card numbers: 13-19 digits, plausible issuer prefix, Luhn
    valid, and either unseparated or grouped like a printed card (4-4-4-4[-3], 4-6-5, 4-6-4)."""
    groups = [(g.group(), g.start(), g.end()) for g in _DIGITS_RE.finditer(run)]
    if len(groups) == 1:
        d = groups[0][0]
        if 13 <= len(d) <= 19 and _iin_plausible(d) and luhn_valid(d):
            yield (0, len(run))
        return  # >19 unseparated digits: an id, not a card
    i = 0
    n = len(groups)
    while i < n:
        hit = None
        digits = ""
        for j in range(i, n):
            digits += groups[j][0]
            if len(digits) > 19:
                break
            if (
                len(digits) >= 13
                and _card_shape([len(g[0]) for g in groups[i : j + 1]])
                and _iin_plausible(digits)
                and luhn_valid(digits)
            ):
                hit = j
                break
        if hit is None:
            i += 1
        else:
            yield (groups[i][1], groups[hit][2])
            i = hit + 1


def _card_shape(lens: list[int]) -> bool:
    if len(lens) == 1:
        return 13 <= lens[0] <= 19
    if lens == [4, 6, 5] or lens == [4, 6, 4]:
        return True
    return len(lens) >= 4 and all(x == 4 for x in lens[:-1]) and 1 <= lens[-1] <= 4


class MaskingLogFilter(logging.Filter):
    """A ``logging.Filter`` that masks each record's message (after ``%`` formatting with its args),
    its formatted exception and its stack info, so no handler ever sees a secret.

    Attach it to **handlers** (``handler.addFilter(MaskingLogFilter(masker))``): a filter on a logger
    does not see records propagated from child loggers. Always returns True (never drops a record).
    """

    def __init__(self, masker: Masker | None = None, name: str = "") -> None:
        super().__init__(name)
        self.masker = masker  # None: the process-wide message masker (configured rules), at each record

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_idemview_masked", False):
            return True
        mask = (self.masker if self.masker is not None else message_masker()).mask_message
        try:
            msg = record.getMessage()
        except Exception:  # bad format args: mask what we have rather than drop the record
            msg = f"{record.msg} {record.args!r}"
        record.msg = visible(mask(msg), "\n\t")  # the display sink: no terminal escape reaches a handler
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask(record.exc_text)
        if record.stack_info:
            record.stack_info = mask(record.stack_info)
        record._idemview_masked = True
        return True


# --------------------------------------------------------------------------------------------------
# Messages: errors, GUI banners, log records (DESIGN §6 "logs and error messages")

# ``user:password@host`` wherever it appears, URL or not (a URL typed with one slash, a DSN without a
# scheme, a fragment in a driver's error). The password runs to the LAST ``@`` of the token, as libpq
# reads user info, so ``ops:ab@PW@cd@127.0.0.1`` masks ``ab@PW@cd`` whole. Two forms: with a scheme
# (``pg:/u:p@h``, ``pg://u:p@h``) the password may be anything but whitespace; without one, a password
# starting ``//`` is not taken (``postgresql://ops@host`` has no password, only a scheme colon).
# Bounded repeats keep a long token (a log line with a blob) linear, not quadratic.
_USERINFO_MSG_RE = re.compile(
    r"(?<![^\s\"'`<>(\[{=,;|])"
    r"(?:(?P<pre1>[A-Za-z][A-Za-z0-9+.\-]{0,30}:/{1,3}[^\s:/@\"'<>\[\]]{0,256}):(?P<pw1>\S{1,1024})@"
    r"|(?P<pre2>[^\s:/@\"'<>\[\]]{0,256}):(?P<pw2>(?!//)\S{1,1024})@)"
)

#: Secrets shorter than this are not scrubbed as literal strings (a 3-letter password would eat
#: ordinary words); shape detection still applies to them.
MIN_KNOWN_SECRET_LEN = 5
_KNOWN_SECRETS: dict[str, None] = {}  # insertion-ordered set, bounded
_KNOWN_MAX = 512
_MESSAGE_MASKER: Masker | None = None


def mask_userinfo(text: str, tag: Callable[[str], str] | None = None) -> str:
    """Replace the password of every ``user:password@host`` shape in ``text`` by ``tag(password)``
    (default: ``[password]``), whether or not the text parses as a URL. Tags already there are kept
    (idempotent). Used by every message path through :meth:`Masker.mask_message`."""
    if _USERINFO_QUICK_RE.search(text) is None:  # C-speed: no "x:...@" in any token, nothing to do
        return text
    tag = tag or (lambda _pw: "[password]")

    def repl(m: re.Match[str]) -> str:
        which = "1" if m.group("pw1") is not None else "2"
        pw = m.group("pw" + which)
        s = m.start("pw" + which)
        if _at_tag(m.string, s) or pw == "[password]":
            return m.group()
        return m.group("pre" + which) + ":" + tag(pw) + "@"

    def token(m: re.Match[str]) -> str:
        t = m.group()
        c = t.find(":")
        a = t.rfind("@")
        if c < 0 or a < c:  # most tokens: no "x:y@" possible, no regex run
            return t
        if len(t) > 2048:  # a blob: mask from the first ':' to the last '@', in O(n)
            return t[: c + 1] + tag(t[c + 1 : a]) + t[a:]
        return _USERINFO_MSG_RE.sub(repl, t)

    return _TOKEN_RE.sub(token, text)


_TOKEN_RE = re.compile(r"\S+")
_USERINFO_QUICK_RE = re.compile(r":\S*@")


def url_password_candidates(url: str) -> list[str]:
    """What in a typed connection string could be a password, well-formed or not: the text between
    the first ``:`` of the user info and the LAST ``@`` (``scheme:/``, ``scheme://`` or no scheme),
    as typed and percent-decoded. Empty when there is no ``@``. Used to register the secret before
    the string reaches any parser or message."""
    from urllib.parse import unquote

    if not isinstance(url, str) or "@" not in url:
        return []
    out: list[str] = []
    # "pg:/ops:pw@host" and "pg://ops:pw@host" have a scheme; "ops:pw@host" has none ("ops:" is the user).
    # "ops:/ pw@host" is both shapes at once: read with a scheme it holds no password, so it is read
    # again without one, which takes "/ pw" (never "//...": that is a scheme's colon, not a password).
    for rest in (re.sub(r"^[A-Za-z][A-Za-z0-9+.\-]{0,30}:/+", "", url, count=1), url):
        userinfo = rest[: rest.rfind("@")]
        if ":" not in userinfo:
            continue
        pw = userinfo.split(":", 1)[1]
        if rest is url and (out or pw.startswith("//")):
            break
        for p in (pw, unquote(pw)):
            if p and p not in out:
                out.append(p)
    return out


def register_secret(secret: str | None) -> None:
    """Remember a secret this process holds (a password typed, pasted or read from the keyring) so
    that :meth:`Masker.mask_message` removes it from every message, even where no shape gives it away
    (a password with a space in it). Kept in memory only, never stored or logged; secrets shorter
    than :data:`MIN_KNOWN_SECRET_LEN` are ignored."""
    if not isinstance(secret, str) or len(secret) < MIN_KNOWN_SECRET_LEN:
        return
    from urllib.parse import quote

    forms = {
        secret,
        quote(secret, safe=""),
        quote(secret, safe=":@/?#"),
        repr(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
    }
    for f in forms:
        if len(f) >= MIN_KNOWN_SECRET_LEN:
            _KNOWN_SECRETS.pop(f, None)
            _KNOWN_SECRETS[f] = None
    while len(_KNOWN_SECRETS) > _KNOWN_MAX:
        del _KNOWN_SECRETS[next(iter(_KNOWN_SECRETS))]


def _scrub_known(masker: Masker, text: str) -> str:
    if not _KNOWN_SECRETS:
        return text
    for s in sorted(tuple(_KNOWN_SECRETS), key=len, reverse=True):
        if s in text:
            text = text.replace(s, masker._tag("password", s))
    return text


_RULES_HOOK: Callable[[], MaskRules] | None = None


def set_rules_source(hook: Callable[[], MaskRules] | None) -> None:
    """Register where the configured rules come from (``idemview.config.masking_rules``, which reads the
    settings file: a layer above this one). The message masker is rebuilt with them on next use."""
    global _RULES_HOOK, _MESSAGE_MASKER
    _RULES_HOOK = hook
    _MESSAGE_MASKER = None


def message_masker() -> Masker:
    """The process-wide Masker for messages (errors, banners, logs); random key, never stored. Its rules
    are the configured ones (:func:`set_rules_source`), so a user's ``[masking]`` patterns reach every
    error, banner and log line too; a settings file that cannot be read leaves the shipped rules here
    (the command that needed them reports the file's error)."""
    global _MESSAGE_MASKER
    rules = None
    if _RULES_HOOK is not None:
        try:
            rules = _RULES_HOOK()
        except ValueError:
            rules = None
    if _MESSAGE_MASKER is None or (rules is not None and _MESSAGE_MASKER.rules is not rules):
        _MESSAGE_MASKER = Masker(rules)
    return _MESSAGE_MASKER


def mask_message(text: Any) -> str:
    """:meth:`Masker.mask_message` with the process-wide :func:`message_masker`: the one function
    every error, banner and log path calls before showing text."""
    return message_masker().mask_message(text if isinstance(text, str) else str(text))


_LOG_INSTALLED = False


def install_log_masking(masker: Masker | None = None) -> None:
    """Mask every log record of this process: a :class:`MaskingLogFilter` on each handler of the root
    logger, and a record factory that masks records as they are made (so handlers added later, and
    records of any logger, are masked too). Idempotent."""
    global _LOG_INSTALLED
    flt = MaskingLogFilter(masker)
    root = logging.getLogger()
    for h in root.handlers:
        if not any(isinstance(f, MaskingLogFilter) for f in h.filters):
            h.addFilter(flt)
    if _LOG_INSTALLED:
        return
    _LOG_INSTALLED = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            flt.filter(record)
        except Exception:  # masking must never lose a log record
            pass
        return record

    logging.setLogRecordFactory(factory)
