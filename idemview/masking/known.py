"""Secrets this process knows (typed, pasted, read from the keyring) and ``user:password@host`` shapes:
scrubbed from every message before any other rule runs (DESIGN.md §6 "logs and error messages").
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from idemview.masking.rules import _at_tag

if TYPE_CHECKING:
    from idemview.masking.engine import Masker

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
