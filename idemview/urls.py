"""Connection strings as typed by a user: a scheme check and a URL parser that splits the user info where
libpq does (issue #9). Pure string work on SQLAlchemy's :class:`~sqlalchemy.engine.URL`; no database, no
idemview module below it, so saved connections (:mod:`idemview.config`) and the ledger layer both use it."""

from __future__ import annotations

import re

from sqlalchemy.engine import URL, make_url

_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]{1,30}):/")


def looks_like_url(text_: str) -> bool:
    """True for ``scheme:/...`` (one slash or more, scheme of 2+ letters: ``C:/`` is a drive)."""
    return _SCHEME_RE.match(text_) is not None


def split_url(url: str) -> URL:
    """Parse a SQLAlchemy URL string with :func:`sqlalchemy.engine.make_url`, except that the user info
    ends at the LAST ``@`` before the host: ``postgresql://ops:ab@PW@cd@db/x`` is user ``ops``, password
    ``ab@PW@cd``, host ``db``. (SQLAlchemy 2.0's ``make_url`` splits at the first ``@`` and makes
    ``PW@cd@db`` the host; a password fragment would then show up as a host name, in messages and in
    saved connections — issue #9.) Raises ``ArgumentError`` or ``ValueError`` like ``make_url``."""
    from urllib.parse import quote, unquote

    if "://" not in url or url.split("://", 1)[1].count("@") < 2:
        return make_url(url)
    # Two '@' or more: the last one ends the user info. (An '@' in a query value then makes the URL
    # fail to connect with its host inside the masked password: a clear error, never a leak.)
    scheme, rest = url.split("://", 1)
    at = rest.rfind("@")
    userinfo, hostpart = rest[:at], rest[at + 1 :]
    user, sep, pw = userinfo.partition(":")
    # Percent-encode the user info as typed, then let make_url decode it: '@', '/', '?', '#' in a
    # password are data, not delimiters.
    fixed = (
        f"{scheme}://{quote(unquote(user), safe='')}"
        + (f":{quote(unquote(pw), safe='')}" if sep else "")
        + f"@{hostpart}"
    )
    return make_url(fixed)


def hide_password(typed: str) -> str:
    """``typed`` (a connection string as the user typed it, well-formed or not) with the password part
    replaced by ``***``, however short or odd it is: the text between the user's ``:`` and the LAST
    ``@``, read first with a ``scheme:/``/``scheme://`` prefix, then without one (``ops: pw@host``).
    Unlike the masker's shape rules this needs no minimum length and allows spaces, because the whole
    string is known to be a connection string (issue #9). Text without ``@`` is returned unchanged."""
    if "@" not in typed:
        return typed
    at = typed.rfind("@")
    m = _SCHEME_RE.match(typed)
    starts = ([m.end()] if m else []) + [0]
    for start in starts:
        while start < at and typed[start] == "/":
            start += 1
        colon = typed.find(":", start, at)
        if colon < 0:
            continue
        if start == 0 and typed.startswith("//", colon + 1):  # "scheme://user@host": no password
            continue
        return typed[: colon + 1] + "***" + typed[at:]
    return typed
