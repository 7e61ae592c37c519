"""Text that is not valid UTF-8, read rather than refused (issue #9, item 5; DESIGN §9 "bad data").

SQLite stores whatever bytes it is given in a TEXT cell (``CAST(X'FFFE41' AS TEXT)``); Python's
``sqlite3`` refuses to decode such a cell and aborts the whole statement ("Could not decode to UTF-8
column ..."), which used to empty the grid, fail the scan and stop an export. idemview reads it instead:

- :func:`decode_text` is the read-only SQLite connection's ``text_factory``: valid UTF-8 becomes a plain
  ``str`` (the common, fast path); anything else becomes a :class:`RawText`;
- a :class:`RawText` *is* a ``str`` holding the bytes shown escaped (``b'\\xff\\xfeA'`` ->
  ``\\xff\\xfeA``), so every view, the masker, CSV and JSON take it as ordinary text; it keeps the
  original bytes in :attr:`RawText.raw`;
- it compares and hashes by those bytes: two different byte strings never compare equal, and a
  ``RawText`` never equals a plain ``str`` (whose bytes are valid UTF-8), even one spelling the same
  escapes: keys stay exact in Python as they are in SQL;
- bound back into SQL (a detail lookup, a findings evidence query, a keyset cursor), :class:`LedgerText`
  sends the original bytes and casts them to TEXT, so ``key = ?`` finds the stored row.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Text, cast
from sqlalchemy.types import TypeDecorator


class RawText(str):
    """A text cell whose bytes are not valid UTF-8: ``str(self)`` is the escaped display form,
    :attr:`raw` the bytes as stored. Equal only to another ``RawText`` with the same bytes."""

    __slots__ = ("raw",)
    raw: bytes

    def __new__(cls, raw: bytes) -> RawText:
        raw = bytes(raw)
        self = super().__new__(cls, raw.decode("utf-8", "backslashreplace"))
        self.raw = raw
        return self

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RawText):
            return self.raw == other.raw
        if isinstance(other, str):
            return False
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self) -> int:
        return hash((RawText, self.raw))

    def __reduce__(self):
        return (RawText, (self.raw,))

    def __copy__(self) -> RawText:
        return self

    def __deepcopy__(self, memo) -> RawText:
        return self

    def __repr__(self) -> str:
        # Messages quote keys with !r ("key 'abc'"): show the same escaped form the grid shows
        # ('key-\xff'), not Python's constructor syntax; the bytes stay in .raw.
        return "'" + str.__str__(self) + "'"


def decode_text(b: bytes) -> str:
    """``sqlite3`` ``text_factory``: the cell as ``str``; a :class:`RawText` when it is not UTF-8."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return RawText(b)


def raw_bytes(v: Any) -> Any:
    """The value to bind for ``v``: the stored bytes of a :class:`RawText`, else ``v`` unchanged."""
    return v.raw if isinstance(v, RawText) else v


class LedgerText(TypeDecorator):
    """The type of SQLite text columns and key expressions in idemview's queries: a bound value is
    sent as its UTF-8 bytes (a :class:`RawText` as its stored bytes) and cast to TEXT in SQL, so an
    undecodable key found in one query can be looked up in the next. ``CAST(? AS TEXT)`` of a constant
    still lets an index on the column serve ``column = ?``."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if isinstance(value, RawText):
            return value.raw
        return value

    def bind_expression(self, bindvalue):
        return cast(bindvalue, Text())

    def coerce_compared_value(self, op, value):
        # Comparisons with a literal keep this type (so the literal is bound through it).
        return self
