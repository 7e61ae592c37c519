"""Value checks the detectors rely on (DESIGN.md §6): Luhn and issuer prefixes for cards, ISO 13616
for IBANs, the card's last four digits, and the shapes proven unchanged by every detector.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from decimal import Decimal
from itertools import accumulate
from typing import Any
from urllib.parse import unquote_plus

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


# Runs of >= 13 digits with single space/dash/dot separators; card windows are searched inside a run.
_CARD_RUN_RE = re.compile(r"(?<!\d)\d(?:[ .\-]?\d){12,}(?!\d)")
_DIGITS_RE = re.compile(r"\d+")
_CARD_TEXT_RE = re.compile(r"\s*\d[\d .\-]*\d\s*")

_CARD_MIN = 10**12

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
      card run; one with a longer run is plain exactly when the card detector's own rule
      (:func:`card_spans`) finds no card in it; in hex (no separators) a card is a whole digit run
      of 13-19 digits with a plausible issuer and a valid Luhn sum, checked here exactly as the card
      detector does.
    """
    if len(text) == 36 and _UUID_SHAPE_RE.fullmatch(text) is not None:
        runs = text.encode("ascii").translate(_HEX_LETTERS_TO_SPACE, b"-").split()
        # a long run: the card detector alone can change a UUID (above); ask it, as _d_card does
        return max(map(len, runs), default=0) < 13 or next(iter(card_spans(text)), None) is None
    if _LOWER_HEX_RE.fullmatch(text) is None or _HEX_IBAN_START_RE.match(text) is not None:
        return False
    if len(text) >= _HASH_MIN and not text.isdigit():
        return True  # a digest: its digit runs are no card (_in_hash_token)
    runs = text.encode("ascii").translate(_HEX_LETTERS_TO_SPACE).split()
    if max(map(len, runs), default=0) < 13:
        return True
    for run in runs:
        if 12 < len(run) < 20:
            d = run.decode("ascii")
            if _iin_plausible(d) and luhn_valid(d):
                return False
    return True


_HEX_BYTES = b"0123456789abcdefABCDEF"
# _plain_shape's translation (hex letters to spaces) with every digit made "0": a run of 13 or more
# digits is then found by a plain substring search for 13 zeros.
_UUID_RUNS = bytes.maketrans(b"abcdefABCDEF0123456789", b" " * 12 + b"0" * 10)
_ZEROS_13 = b"0" * 13


def _plain_uuid_chunk(values: list[str]) -> list[int] | None:
    """For a chunk of texts that are all canonical UUIDs: the positions (ascending) of those that
    hold a run of 13 or more digits once the hyphens are dropped (which :func:`_plain_shape` asks the
    card detector about), found by one pass over the joined chunk instead of one call per text;
    ``None`` when some text is not a canonical UUID (ask :func:`_plain_shape` per text).

    Exact: every text is 36 characters; the chunk joined by ``\n`` (line ``i`` is text ``i``, 37 bytes
    a line) is ASCII, holds hyphens at offsets 8, 13, 18, 23 and ``\n`` at 36 of every line and,
    hex digits removed, nothing but those: one canonical UUID per line. With hex letters made spaces,
    digits ``0`` and hyphens dropped (``_plain_shape``'s own translation) each line is 32 bytes plus
    the ``\n``, which no digit run crosses; a run of 13 or more starting at byte ``b`` is in line
    ``b // 33``, and the next search starts at the following line. ``values`` must all be ``str``."""
    n = len(values)
    if not values or set(map(len, values)) != {36}:
        return None
    try:
        b = ("\n".join(values) + "\n").encode("ascii")
    except UnicodeEncodeError:
        return None
    if b.translate(None, _HEX_BYTES) != b"----\n" * n:
        return None
    if not (b[8::37] == b[13::37] == b[18::37] == b[23::37] == b"-" * n and b[36::37] == b"\n" * n):
        return None
    shape = b.translate(_UUID_RUNS, b"-")
    out: list[int] = []
    at = shape.find(_ZEROS_13)
    while at >= 0:
        line = at // 33
        out.append(line)
        at = shape.find(_ZEROS_13, (line + 1) * 33)
    return out


# 32: _HASH_MIN (below; test_export_fast_paths checks they agree)
_HEX_DIGEST_MIN = 32
_LOWER_HEX_BYTES = b"0123456789abcdef"
# A text starting like an IBAN candidate ([a-f]{2}[0-9]{2}), found after the "," that precedes it.
_HEX_IBAN_AFTER_COMMA = re.compile(r",[a-f]{2}[0-9]{2}")


def _plain_hex_chunk(values: list[str]) -> list[int] | None:
    """:func:`_plain_uuid_chunk` for texts that are all lower-case hex of at least ``_HASH_MIN``
    characters (digests: an md5 ``intent_ref``, a binary payload as hex): the positions of the texts
    to ask :func:`_plain_shape` about (a superset of those it does not prove plain), or ``None`` when
    some text is not of that shape.

    Exact: every text is at least ``_HASH_MIN`` long, and the chunk joined by ``,`` is ASCII holding,
    lower-case hex digits removed, exactly the ``,`` of the joins: every text is lower-case hex. For
    such a text ``_plain_shape`` is True when it does not start ``[a-f]{2}[0-9]{2}`` (the IBAN case)
    and is not all digits (the digest rule); those two kinds are returned. The IBAN starts are found by
    one search of ``"," + joined``: a
    match at offset ``b`` is the text that starts at offset ``b`` of ``joined`` (the running sum of
    the lengths). ``values`` must all be ``str``."""
    if not values or min(map(len, values)) < _HEX_DIGEST_MIN:
        return None
    joined = ",".join(values)
    try:
        ascii_ = joined.encode("ascii")
    except UnicodeEncodeError:
        return None
    if ascii_.translate(None, _LOWER_HEX_BYTES) != b"," * (len(values) - 1):
        return None
    doubt = {i for i, d in enumerate(map(str.isdigit, values)) if d} if True in map(str.isdigit, values) else set()
    hits = [m.start() for m in _HEX_IBAN_AFTER_COMMA.finditer("," + joined)]
    if hits:
        starts = [0, *accumulate(len(v) + 1 for v in values)]
        doubt.update(bisect_left(starts, b) for b in hits)
    return sorted(doubt)


def _plain_chunk(values: list[str]) -> list[int] | None:
    """:func:`_plain_uuid_chunk`, else :func:`_plain_hex_chunk`: the positions of the texts of a chunk
    of UUIDs or of hex digests that :func:`_plain_shape` does not prove plain; ``None`` for another
    chunk (ask per text)."""
    out = _plain_uuid_chunk(values)
    return out if out is not None else _plain_hex_chunk(values)


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
            for a, b in card_spans(v):
                found.add("".join(ch for ch in v[a:b] if ch.isdigit()))
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


_HEXDIGITS = frozenset("0123456789abcdefABCDEF")
_HASH_MIN = 32  # MD5 in hex; SHA-1 40, SHA-256 64


def _in_hash_token(text: str, start: int, end: int) -> bool:
    """True when ``text[start:end]`` (a run of digits) lies inside a hex token of at least 32 characters
    that holds a letter a-f: a digest (MD5, SHA-1, SHA-256, a sidekiq-unique-jobs digest), whose digits
    are not a card even where a run of them passes Luhn (1 in ~3,600 random MD5s had one in a tester's
    43,559 Sidekiq digests). A card printed inside such a token is not a shape any system writes."""
    if not text[start:end].isdigit():
        return False  # a printed card (4-4-4-4) is no part of a digest
    a, b = start, end
    while a > 0 and text[a - 1] in _HEXDIGITS:
        a -= 1
    while b < len(text) and text[b] in _HEXDIGITS:
        b += 1
    if b - a < _HASH_MIN or (a == start and b == end):
        return False
    return any(ch not in "0123456789" for ch in text[a:b])


def card_spans(text: str) -> Iterable[tuple[int, int]]:
    """Spans of ``text`` that are card numbers (the card detector's one rule: :data:`_CARD_RUN_RE`
    runs, :func:`_card_spans` inside each, digest tokens left alone by :func:`_in_hash_token`),
    as ``(start, end)`` offsets into ``text``."""
    for m in _CARD_RUN_RE.finditer(text):
        base = m.start()
        for s, e in _card_spans(m.group()):
            if not _in_hash_token(text, base + s, base + e):
                yield (base + s, base + e)


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
