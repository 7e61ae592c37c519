"""Masking rules as data (DESIGN.md §6): kinds, detectors, field-name vocabulary, :class:`MaskRules`.

Split out of :mod:`idemview.masking.masker` (issue 25 item 6); every public name is still importable
from there.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

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


def _at_tag(s: str, i: int) -> bool:
    return s.startswith("[", i) and TAG_RE.match(s, i) is not None
