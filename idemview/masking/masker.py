"""The masking engine (DESIGN.md §6): one code path for grid, detail views, clipboard, CSV, manifest, logs.

This module is its public face; the code lives by concern (issue 25 item 6): :mod:`~idemview.masking.rules`
(kinds, name vocabulary, :class:`MaskRules`), :mod:`~idemview.masking.validators` (Luhn, IBAN, card last
four), :mod:`~idemview.masking.patterns` (detector regexes and gates), :mod:`~idemview.masking.detectors`
(one method per shape), :mod:`~idemview.masking.engine` (:class:`Masker`), :mod:`~idemview.masking.known`
(secrets this process holds, ``user:password@host``), :mod:`~idemview.masking.messages` (errors and logs)
and :mod:`~idemview.masking.stream` (JSON text masked as a stream, in bounded memory).

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

from idemview.masking.engine import MAX_MASK_DEPTH, Masker, dump_json
from idemview.masking.known import (
    _KNOWN_SECRETS,
    MIN_KNOWN_SECRET_LEN,
    mask_userinfo,
    register_secret,
    url_password_candidates,
)
from idemview.masking.messages import (
    MaskingLogFilter,
    install_log_masking,
    mask_message,
    message_masker,
    set_rules_source,
)
from idemview.masking.patterns import _KV_SKIP_VALUES
from idemview.masking.rules import (
    CREDENTIAL_KINDS,
    DETECTORS,
    OPTIONAL_DETECTORS,
    TAG_RE,
    MaskRules,
    PatternRule,
    normalize_name,
)
from idemview.masking.validators import _plain_shape, card_last4, iban_valid, luhn_valid

__all__ = [
    "CREDENTIAL_KINDS",
    "DETECTORS",
    "MAX_MASK_DEPTH",
    "MIN_KNOWN_SECRET_LEN",
    "OPTIONAL_DETECTORS",
    "MaskRules",
    "Masker",
    "MaskingLogFilter",
    "PatternRule",
    "TAG_RE",
    "_KNOWN_SECRETS",
    "_KV_SKIP_VALUES",
    "_plain_shape",
    "card_last4",
    "dump_json",
    "iban_valid",
    "install_log_masking",
    "luhn_valid",
    "mask_message",
    "mask_userinfo",
    "message_masker",
    "normalize_name",
    "register_secret",
    "set_rules_source",
    "url_password_candidates",
]
