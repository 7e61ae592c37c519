"""Large cells read from the database in pages and masked as they arrive (issue 27 item 1).

A payload cell of at least :data:`PAGE_MIN` characters never arrives whole: the export's SELECT asks
for its length (SQLite ``length``, PostgreSQL and MySQL/MariaDB ``char_length``: characters, not bytes)
and gets ``NULL`` instead of its text (:func:`paged_columns`); the cell becomes a :class:`PagedCell`
that reads it again by record id in pages of :data:`PAGE_CHARS` characters with ``substr`` (all three
engines have it and count characters, so a page never splits a UTF-8 character). The formatter turns it
into a :class:`CellStream` (:func:`format_paged`): the masked, guarded cell, made while the writer
writes it: a JSON document through :func:`~idemview.masking.stream.mask_json_pages`, a document that is
one JSON string or a text through :func:`~idemview.masking.stream.mask_text_pieces`.

**One version of a cell.** A cell's pages are read in one transaction on a second connection
(PostgreSQL and MySQL/MariaDB ``REPEATABLE READ``, SQLite ``BEGIN``: one snapshot), and each page asks
for the cell's length again: a length other than the probe's raises :class:`CellChanged` (the export
stops with that message; nothing is published). A same-length rewrite between the probe and the first
page gives the newer version whole, never a mix of the two.

**Text that is not UTF-8** (SQLite and a PostgreSQL ``SQL_ASCII`` database keep any bytes in a text
cell; a driver that sends a page as bytes) arrives whole, in the same transaction, before any page:
SQLite's BLOB reader (and ``SQL_ASCII``'s byte pages, :meth:`PageReader._byte_pages`: its lengths
count bytes) first decodes the cell's bytes once without keeping them (one page in memory), and a
cell that fails is read whole through the connection (which makes it a
:class:`~idemview.ledger.rawtext.RawText`) and formatted by the whole-value path
(:class:`ReadWhole`), so it exports as it would below :data:`PAGE_MIN`. A valid cell is read twice
(the check keeps no text). Memory for a cell that fails: its bytes, their escaped text (up to 4 x the
bytes) and the masked text, as for any whole cell; it is hostile input, and nothing is lost.

Arrive whole as before: binary cells (their text, UTF-8 or hex, depends on the whole value; SQLite
``typeof`` tells them apart), pickle and binary encodings, ledgers without a record id, and cells the
masker cannot stream (a column sensitive by name is tagged whole; a JSON text the walk refuses, e.g.
broken, is read whole to give the whole-value path's text).
"""

from __future__ import annotations

import codecs
import re
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import Column, case, func, literal, literal_column, null, select
from sqlalchemy.exc import DBAPIError

from idemview.errors import IdemviewError
from idemview.evidence.cells import _INNER_RE, _LEAD, _NUMERIC_RE
from idemview.ledger.pg_sqlascii import is_sql_ascii
from idemview.masking.masker import Masker
from idemview.masking.stream import json_string_pieces, mask_json_pages, mask_text_pieces

__all__ = [
    "PAGE_CHARS",
    "PAGE_MIN",
    "CellChanged",
    "CellStream",
    "PageReader",
    "PagedCell",
    "ReadWhole",
    "paged_columns",
]

#: A text cell at least this many characters long is read in pages. Below it a cell arrives whole (its
#: text once, walked by mask_json_text): 120 x 5 MB documents peaked at 105 MB that way and 149 MB paged
#: (SQLite loads a 5 MB value whole for the probe's length(), and those blocks fragment the heap).
PAGE_MIN = 8 << 20
#: Characters read per page.
PAGE_CHARS = 1 << 20
_COPY = 1 << 20


class CellChanged(IdemviewError):
    """A cell read in pages changed length between the export's SELECT and its pages, or is not UTF-8:
    the export stops (nothing published) and the CLI prints the message, exit code 2. Not a ValueError:
    the stream masker reads ValueError as broken JSON."""


class ReadWhole(Exception):  # noqa: N818 - a signal, not an error
    """Raised by :meth:`PagedCell.pages` before its first page when the cell cannot be given as UTF-8
    text pages (see the module doc): ``value`` is the whole cell as the export's SELECT would have
    given it (a :class:`~idemview.ledger.rawtext.RawText` on SQLite, bytes from a driver that sends
    bytes). Not a ValueError: the stream masker reads ValueError as broken JSON."""

    def __init__(self, value: Any) -> None:
        super().__init__("cell read whole")
        self.value = value


def _length(expr: Any, dialect: str) -> Any:
    if dialect == "sqlite":  # text only: a BLOB's length counts bytes, and its text form needs it whole
        return case((func.typeof(expr) == "text", func.length(expr)), else_=null())
    return func.char_length(expr)


def paged_columns(sel: list[Any], encodings: dict[str, str | None], dialect: str) -> tuple[list[Any], dict[str, Any]]:
    """The export's select list with each text payload column ``p_*`` (``encodings``: payload name →
    encoding, json or text only) replaced by ``NULL`` where it is at least :data:`PAGE_MIN` characters,
    and a column ``n_p_*`` appended: the length of every non-NULL text cell (``-1`` on SQLite, whose
    ``length()`` of a text loads all of it: the probe loads a cell once, in its ``CASE``, and the
    length is then known from its pages); and ``{name: expression}`` of the paged columns. A row's cell
    is paged when its value is NULL and its ``n_p_*`` is not."""
    out, exprs, lengths = [], {}, []
    for c in sel:
        name = getattr(c, "name", "") or ""
        inner = getattr(c, "element", c)
        if not name.startswith("p_") or encodings.get(name[2:], "pickle") not in (None, "text", "json"):
            out.append(c)
            continue
        try:
            binary = inner.type.python_type is bytes
        except (AttributeError, NotImplementedError):  # a type without one (NullType): treated as text
            binary = False
        if binary:
            out.append(c)
            continue
        n = _length(inner, dialect)
        out.append(case((n >= PAGE_MIN, null()), else_=inner).label(name))
        if dialect == "sqlite":  # typeof() reads no content (a BLOB is never paged: its length is NULL)
            n = case((func.typeof(inner) == "text", literal(-1)), else_=null())
        lengths.append(n.label("n_" + name))
        exprs[name] = inner
    return out + lengths, exprs


def _base_column(expr: Any) -> Any:
    """The table column under a payload expression (``type_coerce``), or ``None``."""
    for _ in range(4):
        if isinstance(expr, Column):
            return expr
        expr = getattr(expr, "clause", None)
    return None


class PagedCell:
    """A cell read in pages (see the module doc): ``column`` (``p_*``), the record id ``rid``, its
    ``length`` in characters at the SELECT, and ``convert``: the export's converter of the whole text
    (:meth:`value`, for the cells the masker cannot stream)."""

    __slots__ = ("reader", "column", "rid", "length", "convert")

    def __init__(self, reader: PageReader, column: str, rid: Any, length: int, convert: Callable[[Any], Any]):
        self.reader, self.column, self.rid, self.length, self.convert = reader, column, rid, length, convert

    def pages(self) -> Iterator[str]:
        """The text, :data:`PAGE_CHARS` characters at a time (:class:`CellChanged` if its length moved;
        :class:`ReadWhole` before the first page for a cell that is not UTF-8 text)."""
        return self.reader.pages(self)

    def value(self) -> Any:
        """The converted whole value (what the export has for a cell that is not paged)."""
        try:
            return self.convert("".join(self.pages()))
        except ReadWhole as e:
            return self.convert(e.value)

    def __repr__(self) -> str:
        return f"<PagedCell {self.column} of record {self.rid!r}: {self.length} characters (-1: unknown)>"


class PageReader:
    """Reads :class:`PagedCell` pages of one export: ``table`` and its record id column ``rid``,
    ``exprs`` (column name → expression), on a second connection of ``engine`` opened at the first cell
    and closed by :meth:`close`."""

    def __init__(self, engine: Any, table: Any, rid: Any, exprs: dict[str, Any]) -> None:
        self.engine, self.table, self.rid, self.exprs = engine, table, rid, exprs
        self.dialect = engine.dialect.name
        self._conn: Any = None

    def cell(self, column: str, rid: Any, length: int, convert: Callable[[Any], Any]) -> PagedCell:
        """The paged cell of a row whose value came NULL with ``n_<column>`` ``length`` (``-1``: unknown)."""
        return PagedCell(self, column, rid, int(length), convert)

    def _connection(self) -> Any:
        if self._conn is None:
            c = self.engine.connect()
            if self.dialect != "sqlite":
                c = c.execution_options(isolation_level="REPEATABLE READ")
            self._conn = c
        return self._conn

    def pages(self, cell: PagedCell) -> Iterator[str]:
        c = self._connection()
        if self.dialect == "sqlite":
            c.exec_driver_sql("BEGIN")  # one read transaction for every page of the cell
        try:
            blob = self._sqlite_blob(c, cell) if self.dialect == "sqlite" else None
            if blob is not None:
                if not _utf8(iter(lambda: blob.read(PAGE_CHARS), b"")):
                    blob.close()
                    raise ReadWhole(self._whole(c, cell))
                blob.seek(0)
                yield from self._blob_pages(blob, cell)
            elif self.dialect == "postgresql" and is_sql_ascii(c.connection.dbapi_connection):
                yield from self._byte_pages(c, cell)
            else:
                yield from self._substr_pages(c, cell)
        finally:
            if self.dialect == "sqlite":
                c.exec_driver_sql("ROLLBACK")
            c.rollback()

    def _changed(self, cell: PagedCell, now: str) -> CellChanged:
        return CellChanged(
            f"{cell.column[2:]} of record {cell.rid!r} changed while it was exported "
            f"({cell.length} characters when selected, now {now}); export it again"
        )

    def _substr_pages(self, c: Any, cell: PagedCell) -> Iterator[str]:
        """``substr`` pages, each asking for the length again (the first page's when the probe had none)."""
        expr = self.exprs[cell.column]
        want = cell.length if cell.length >= 0 else None
        at = 1
        while want is None or at <= want:
            q = (
                select(func.substr(expr, at, PAGE_CHARS), _length(expr, self.dialect))
                .select_from(self.table)
                .where(self.rid == cell.rid)
                .limit(2)
            )
            rows = c.execute(q).fetchall()
            if want is None and len(rows) == 1 and rows[0][1] is not None:
                want = rows[0][1]
            if len(rows) != 1 or rows[0][1] != want:
                raise self._changed(
                    cell, "gone" if not rows else "not unique" if len(rows) > 1 else f"{rows[0][1]} characters"
                )
            page = rows[0][0]
            if isinstance(page, (bytes, bytearray, memoryview)):
                # A driver that sends this text as bytes (PostgreSQL SQL_ASCII, a binary character set):
                # substr may count bytes and split a character, and the bytes may not be UTF-8. The cell
                # arrives whole, as the export's SELECT would give it (decode_payload decides).
                if at == 1:
                    raise ReadWhole(self._whole(c, cell))
                raise self._changed(cell, "bytes instead of text")
            yield page
            at += PAGE_CHARS

    def _byte_pages(self, c: Any, cell: PagedCell) -> Iterator[str]:
        """A PostgreSQL ``SQL_ASCII`` database (:mod:`idemview.ledger.pg_sqlascii`): its lengths and
        ``substr`` count bytes, and a page read as text would be decoded alone (a character cut by its
        edge shown as escaped bytes). Its bytes are read instead (``textsend``), checked to be UTF-8 in
        a first pass (one page in memory), then decoded across page edges; else the cell arrives whole."""
        if not _utf8(self._bytes(c, cell)):
            raise ReadWhole(self._whole(c, cell))
        dec = codecs.getincrementaldecoder("utf-8")()
        for data in self._bytes(c, cell):
            if page := dec.decode(data):
                yield page
        if page := dec.decode(b"", final=True):  # nothing: the first pass decoded the same bytes
            yield page

    def _bytes(self, c: Any, cell: PagedCell) -> Iterator[bytes]:
        """The cell's bytes a page at a time, each asking for its length in bytes again (SQL_ASCII's
        ``char_length``, the probe's, counts bytes)."""
        expr = self.exprs[cell.column]
        at = 1
        while at <= cell.length:
            q = (
                select(func.substr(func.textsend(expr), at, PAGE_CHARS), func.octet_length(expr))
                .select_from(self.table)
                .where(self.rid == cell.rid)
                .limit(2)
            )
            rows = c.execute(q).fetchall()
            if len(rows) != 1 or rows[0][1] != cell.length:
                raise self._changed(
                    cell, "gone" if not rows else "not unique" if len(rows) > 1 else f"{rows[0][1]} bytes"
                )
            yield bytes(rows[0][0])
            at += PAGE_CHARS

    def _whole(self, c: Any, cell: PagedCell) -> Any:
        """The cell's whole value on the pages' connection (its transaction: the same version)."""
        expr = self.exprs[cell.column]
        rows = c.execute(select(expr).select_from(self.table).where(self.rid == cell.rid).limit(2)).fetchall()
        if len(rows) != 1:
            raise self._changed(cell, "gone" if not rows else "not unique")
        return rows[0][0]

    def _sqlite_blob(self, c: Any, cell: PagedCell) -> Any:
        """SQLite's incremental BLOB reader on the cell (``sqlite3.Blob``), or ``None`` where it cannot be
        used (the page is then read with ``substr``, which loads the whole value into SQLite's memory
        for every page): a payload that is not a plain column, a table without rowid, a database whose
        text is not UTF-8."""
        col = _base_column(self.exprs[cell.column])
        raw = c.connection.dbapi_connection
        if col is None or not hasattr(raw, "blobopen"):
            return None
        if c.exec_driver_sql("PRAGMA encoding").scalar() != "UTF-8":
            return None
        try:
            rows = c.execute(
                select(literal_column("rowid")).select_from(self.table).where(self.rid == cell.rid).limit(2)
            ).fetchall()
        except DBAPIError:  # WITHOUT ROWID
            return None
        if len(rows) != 1:
            raise self._changed(cell, "gone" if not rows else "not unique")
        schema = self.table.schema or "main"
        return raw.blobopen(self.table.name, col.name, rows[0][0], readonly=True, name=schema)

    def _blob_pages(self, blob: Any, cell: PagedCell) -> Iterator[str]:
        """The cell's UTF-8 bytes read :data:`PAGE_CHARS` bytes at a time and decoded (a character cut
        by a page is completed by the next); its character count checked against the probe's."""
        dec = codecs.getincrementaldecoder("utf-8")()
        n = 0
        try:
            with blob:
                while data := blob.read(PAGE_CHARS):
                    page = dec.decode(data)
                    n += len(page)
                    if 0 <= cell.length < n:
                        raise self._changed(cell, f"over {cell.length} characters")
                    yield page
            page = dec.decode(b"", final=True)
        except UnicodeDecodeError as e:
            raise CellChanged(f"{cell.column[2:]} of record {cell.rid!r} is not UTF-8 text ({e})") from None
        n += len(page)
        if 0 <= cell.length != n:
            raise self._changed(cell, f"{n} characters")
        if page:
            yield page

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _utf8(pages: Iterator[bytes]) -> bool:
    """Whether bytes given a page at a time are UTF-8: decoded and dropped (one page in memory)."""
    dec = codecs.getincrementaldecoder("utf-8")()
    try:
        for data in pages:
            dec.decode(data)
        dec.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


class CellStream:
    """A formatted CSV cell made while it is written: :meth:`write` hands its text to ``put`` in
    pieces (guarded as :func:`idemview.evidence.cells.encode` would the whole text). ``len()`` is the
    source cell's length (the writer's size estimate), not the written text's, and at least 16 Mi so
    that the writer always takes its field-by-field path for the row (``writer.BIG_ROW``). A cell
    whose pages raise :class:`ReadWhole` (before anything was fed) is written as ``whole`` formats its
    value: the non-paged formatter's cell, already guarded."""

    __slots__ = ("produce", "size", "whole")

    def __init__(
        self, produce: Callable[[Callable[[str], Any]], Any], size: int, whole: Callable[[Any], str] | None = None
    ) -> None:
        self.produce, self.size, self.whole = produce, size, whole

    def __len__(self) -> int:
        return max(self.size, 1 << 24)

    def write(self, put: Callable[[str], Any]) -> None:
        g = _Guard(put)
        try:
            self.produce(g.feed)
        except ReadWhole as e:
            if self.whole is None:
                raise
            put(self.whole(e.value))  # nothing was fed: the pages raise it before their first
            return
        g.close()


# What a text starting with a formula character holds while it may still be a plain number.
_NUMBER_PREFIX = re.compile(r"[+-]?[0-9]*\.?[0-9]*(?:[eE][+-]?[0-9]*)?\Z")


class _Guard:
    """:func:`idemview.evidence.cells.encode` over a text given in pieces: rule 1 (a ``'`` before a text
    starting with a formula character, unless the whole text is a plain number) decided once the text
    cannot be a number; rule 2 (a ``'`` after ``;`` CR LF followed by a starter or ``'``, looking two
    characters ahead) with the last two characters of each piece kept for the next."""

    __slots__ = ("put", "head", "carry")

    def __init__(self, put: Callable[[str], Any]) -> None:
        self.put = put
        self.head: str | None = ""  # the text so far while rule 1 is undecided, then None
        self.carry = ""

    def feed(self, s: str) -> None:
        if not s:
            return
        if self.head is not None:
            self.head += s
            h = self.head
            if h[0] in _LEAD and _NUMBER_PREFIX.match(h) is not None:
                return  # still a possible plain number
            self.head = None
            if h[0] in _LEAD:
                self.put("'")
            s = h
        b = self.carry + s
        cut = len(b) - 2
        self.put(_inner_upto(b, cut))
        self.carry = b[cut:]

    def close(self) -> None:
        if self.head is not None:  # the whole text is short, or a plain number
            h, self.head = self.head, None
            if h and h[0] in _LEAD and _NUMERIC_RE.fullmatch(h) is None:
                self.put("'")
            self.carry = h
        self.put(_inner_upto(self.carry, len(self.carry)))


def _inner_upto(b: str, cut: int) -> str:
    """``b[:cut]`` with rule 2's ``'`` inserted (its look-ahead may read past ``cut``)."""
    if ";" not in b and "\n" not in b and "\r" not in b:
        return b[:cut]
    parts, last = [], 0
    for m in _INNER_RE.finditer(b):
        if m.start() >= cut:
            break
        parts.append(b[last : m.end()])
        parts.append("'")
        last = m.end()
    parts.append(b[last:cut])
    return "".join(parts)


def format_paged(
    cell: PagedCell,
    masker: Masker,
    json_kind: bool,
    encode: Callable[[Any], str],
    whole: Callable[[Any], str],
    fmt: Callable[[Any], str],
) -> CellStream:
    """The :class:`CellStream` of a paged cell of a column not sensitive by name, masked by a real
    :class:`Masker`: a ``json`` column's cell as the JSON formatter writes it (``encode``: its compact
    encoder; ``whole``: its masked text of a whole value, unguarded, for a document the walk refuses),
    a text column's as the text formatter does (the masked text). ``fmt``: the column's formatter of
    a whole converted value (guarded), for a cell that is not UTF-8 text (:class:`ReadWhole`)."""

    def formatted(raw: Any) -> str:
        return fmt(cell.convert(raw))

    if not json_kind:

        def text(put: Callable[[str], Any]) -> None:
            for piece in mask_text_pieces(masker, cell.pages(), masker._counts):
                put(piece)

        return CellStream(text, cell.length, formatted)

    def document(put: Callable[[str], Any]) -> None:
        # The masked text goes to a temporary file first: a JSON text the walk refuses part-way (broken)
        # takes the whole-value path instead, so nothing of it may have been written yet.
        with tempfile.TemporaryFile("w+", encoding="utf-8", newline="") as tmp:
            r = mask_json_pages(masker, cell.pages(), encode, tmp.write)
            if r is None:
                r = _json_string(masker, cell, tmp.write)
            if r:
                tmp.seek(0)
                while piece := tmp.read(_COPY):
                    put(piece)
                return
        put(whole(cell.value()))

    return CellStream(document, cell.length, formatted)


def _json_string(masker: Masker, cell: PagedCell, write: Callable[[str], Any]) -> bool:
    """A document that is one JSON string: its decoded text masked (the JSON formatter writes a masked
    string as its text). ``False`` when it is not one (then nothing counted)."""
    cnt: dict[str, int] = {}
    try:
        for piece in mask_text_pieces(masker, json_string_pieces(cell.pages()), cnt):
            write(piece)
    except ValueError:
        return False
    masker.add_counts(cnt)
    return True
