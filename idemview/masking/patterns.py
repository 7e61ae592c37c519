"""Detector regexes and the cheap per-text gates that decide which detectors run (DESIGN.md §6)."""

from __future__ import annotations

import re

from idemview.masking.validators import _IBAN_LENGTHS

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
    _F_BYTEX,
) = (1 << i for i in range(20))
# The escaped form of a byte that is not UTF-8 (idemview.ledger.rawtext.RawText, as the grid shows it):
# glued to what follows, it hid the e-mail, card or token after it from every detector (the escapes
# glued to a word: a run of escapes is one).
_BYTE_ESC_RE = re.compile(r"\\x[0-9a-fA-F]{2}(?=[^\s\\])")
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
    if "\\x" in text and _BYTE_ESC_RE.search(text) is not None:
        f |= _F_BYTEX
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


_has_upper = re.compile(r"[A-Z]").search
_has_lower = re.compile(r"[a-z]").search
_has_digit = re.compile(r"[0-9]").search


_MISSING = object()
