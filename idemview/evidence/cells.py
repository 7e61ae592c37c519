"""The reversible formula guard of evidence CSV cells (DESIGN §7; OWASP "CSV Injection").

A spreadsheet runs a cell as a formula when its text starts with ``=``, ``+``, ``-``, ``@``, tab, CR
or NUL (and the fullwidth ``＝ ＋ － ＠`` in CJK locales). Writing ``'`` in front neutralises it, but the
guard must be undone exactly by a reader (:func:`decode`), so the quote itself is escaped too:

1. **At the start of a cell**: a ``'`` is added when the text starts with a formula starter (unless the
   whole text is a plain number such as ``-5``, which no spreadsheet runs) **or with** ``'``. So every
   written cell that starts with ``'`` had one added: the reader removes exactly one.
2. **Inside a cell**, after ``;``, CR and LF: a spreadsheet in a semicolon-separator locale (most of
   Europe) splits a comma-separated line at every ``;`` it sees outside what *it* takes for quotes, and a
   field written bare before a quoted one (an integer id) puts it out of step with the writer's quoting:
   ``5,"order-2;=cmd|' /C calc'!A0"`` opens as a cell ``5,"order-2`` and a formula cell
   ``=cmd|' /C calc'!A0"`` (and a line break inside a field starts a row there). A ``'`` is added after
   each ``;``, CR or LF followed by a formula starter (directly or after a ``"``) **or by** ``'``; the
   reader removes the ``'`` after each ``;``, CR or LF that has one.
3. A text equal to the NULL literal is written with a ``'`` in front (rule 1's prefix), so the NULL
   cell means NULL only. When the NULL literal itself needs the guard (``=NULL()``), a text equal to it
   cannot be told apart; :func:`CellCodec.collides` names it so the writer can count it.

The manifest records this as ``csv.formula_guard`` (:data:`GUARD_SPEC`); a manifest without it (older
exports) was written with rule 1 for formula starters only, which :func:`decode_legacy` undoes.
"""

from __future__ import annotations

import re

__all__ = ["FORMULA_STARTERS", "GUARD_SPEC", "CellCodec", "decode", "decode_legacy", "encode", "is_plain_number"]

# The ASCII starters (OWASP "CSV injection"), and their fullwidth forms, which spreadsheets in CJK
# locales take as the same operators (a found-by-tester case: "＝HYPERLINK(...)").
FORMULA_STARTERS = "=+-@\t\r\0\uff1d\uff0b\uff0d\uff20"
_LEAD = frozenset(FORMULA_STARTERS + "'")
# A plain number: sign, digits, decimal point, exponent. Spreadsheets read it as a number, never as a
# formula, so it is written unchanged ("-1+2", "+A1", "=1" stay guarded).
_NUMERIC_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_STARTERS_CLASS = "".join("\\x00" if c == "\0" else re.escape(c) for c in FORMULA_STARTERS)
_INNER_RE = re.compile(f"([;\\r\\n])(?=\"?[{_STARTERS_CLASS}]|')")
_INNER_UNDO_RE = re.compile("([;\\r\\n])'")

#: What the manifest says about the guard (``csv.formula_guard``): enough to undo it without this code.
GUARD_SPEC = {
    "version": 2,
    "prefix": "'",
    "at_start": "added before text starting with = + - @ TAB CR NUL (or fullwidth ＝＋－＠), unless the text "
    "is a plain number, and before text starting with ' or equal to the NULL literal",
    "inside": "added after each ; CR LF that is followed by one of those starters (directly or after a \") or by '",
    "undo": "remove the ' that starts a cell, then the ' after each ; CR LF that has one",
}


def is_plain_number(s: str) -> bool:
    """``s`` is a plain number (``-42``, ``+15``, ``-1250.5``, ``1e-5``): no spreadsheet runs it."""
    return _NUMERIC_RE.fullmatch(s) is not None


def _inner(s: str) -> str:
    if ";" in s or "\n" in s or "\r" in s:
        return _INNER_RE.sub("\\1'", s)
    return s


def encode(s: str) -> str:
    """``s`` guarded (rules 1 and 2 of the module doc). Exactly undone by :func:`decode`."""
    if not s:
        return s
    e = _inner(s)
    if s[0] in _LEAD and _NUMERIC_RE.fullmatch(s) is None:
        return "'" + e
    return e


def decode(c: str) -> str:
    """The text :func:`encode` turned into ``c``."""
    if c[:1] == "'":
        c = c[1:]
    if ";'" in c or "\n'" in c or "\r'" in c:
        c = _INNER_UNDO_RE.sub("\\1", c)
    return c


def decode_legacy(c: str) -> str:
    """Undo the guard of manifests without ``formula_guard.version`` (rule 1, formula starters only)."""
    return c[1:] if len(c) > 1 and c[0] == "'" and c[1] in FORMULA_STARTERS else c


class CellCodec:
    """The guard with a NULL literal (rule 3): ``null_cell`` is what a NULL is written as, :meth:`text`
    encodes a non-NULL text, :meth:`read` turns a cell back into ``None`` or the text."""

    __slots__ = ("null", "null_cell", "_null_text")

    def __init__(self, null: str) -> None:
        self.null = null
        self.null_cell = encode(null)
        # A text equal to the literal gets rule 1's prefix, which encode() gives no text that does not
        # need it: unambiguous, unless the literal needs that prefix itself (then it is the NULL cell).
        guarded = bool(null) and null[0] in _LEAD and _NUMERIC_RE.fullmatch(null) is None
        self._null_text = self.null_cell if guarded else "'" + _inner(null)

    def text(self, s: str) -> str:
        """The cell of the non-NULL text ``s``."""
        if s == self.null:
            return self._null_text
        return encode(s)

    def collides(self, s: str) -> bool:
        """``s`` is a text whose cell is the NULL cell (only when the literal itself is guarded)."""
        return s == self.null and self._null_text == self.null_cell

    def read(self, c: str) -> str | None:
        """``None`` for the NULL cell, else the text the cell holds."""
        if c == self.null_cell:
            return None
        return decode(c)
