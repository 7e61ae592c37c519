"""Evidence export (DESIGN.md §7): ``FILE.csv`` plus ``FILE.csv.manifest.json``.

No database code: the caller hands column specs and rows (any iterable of sequences or mappings,
consumed once, streamed: memory stays flat in the number of rows). Every cell goes through
``masker.mask_value(value, column_name)`` before it is formatted.

CSV bytes (RFC 4180): UTF-8 (with a BOM when ``excel=True``), a header row, ``,`` delimiter, every
text field in ``"`` quotes (the header too; quotes doubled), NULL and typed cells (numbers, booleans,
instants) bare, CRLF line ends. NULL is an empty field unless a NULL literal is chosen. Instants are ISO-8601 with their
offset (aware values in UTC); naive values are written without an offset (none is invented). Integers
are written from Python ``int`` / ``Decimal`` / digit strings, never through ``float``, so a 19-digit
BIGINT keeps every digit. Every text cell and every header cell starting with ``=``, ``+``, ``-``,
``@``, tab, CR or NUL is prefixed with ``'`` (OWASP "CSV Injection"), the NULL literal included, unless
the cell is a plain number (sign, digits, decimal point, exponent: ``-5``, ``+15``, ``-1250.5``,
``1e-5``), which no spreadsheet runs as a formula; ``-1+2``, ``+A1``, ``=1`` stay guarded. The guard is
reversible and also covers what a semicolon-separator locale reads as the start of a cell inside a
field: :mod:`idemview.evidence.cells`.

The CSV and its manifest are written under temporary names in the destination directory and moved
into place only when complete; on error or cancellation both temporaries are removed and nothing exists
under the final names. The final names are claimed without replacing anything (a hard link, which fails
if the name exists; where links are not supported, an exclusive create of the name then a rename onto
it): a file another process created there meanwhile is never replaced, unless ``overwrite`` (the CLI's
``--force``) says so. Then :class:`FinalNameTaken` names the finished temporary files, which are kept.
"""

from __future__ import annotations

import csv
import enum
import errno
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import Decimal
from itertools import islice
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

from idemview import __version__
from idemview.domain.model import Payload
from idemview.evidence import cells
from idemview.masking.masker import Masker, normalize_name
from idemview.masking.stream import JsonText, mask_json_text
from idemview.masking.visible import HiddenRows

__all__ = [
    "COLUMN_KINDS",
    "ColumnBatches",
    "ColumnSpec",
    "ExportCancelled",
    "ExportResult",
    "FinalNameTaken",
    "VerifyReport",
    "manifest_path_for",
    "verify_evidence",
    "write_evidence",
]

COLUMN_KINDS = ("text", "integer", "number", "instant", "naive_instant", "boolean", "json")
MANIFEST_FORMAT = "idemview-evidence-manifest/1"
_RESERVED = frozenset({"format", "tool", "exported_at", "columns", "row_count", "masking", "csv", "hidden_characters"})
# Connection fields that must never reach a manifest (DESIGN §7: never a user name or password).
_LEDGER_FORBIDDEN = frozenset(
    {
        "user",
        "username",
        "user_name",
        "login",
        "uid",
        "role",
        "password",
        "passwd",
        "pwd",
        "pass",
        "secret",
        "token",
        "credentials",
        "credential",
        "auth",
        "authorization",
        "api_key",
        "private_key",
    }
)

#: Formatted characters held before they are written out (memory bounded by bytes, not rows).
FLUSH_CHARS = 4 << 20
# The formula starters and the guard live in cells.py (reversible; issue 19, items 15-16).
FORMULA_STARTERS = cells.FORMULA_STARTERS
# A plain number: sign, digits, decimal point, exponent. Spreadsheets read it as a number, never as a
# formula, so it is written unchanged (OWASP CSV injection concerns text that starts a formula:
# "-1+2", "+A1", "=1" stay guarded).
_NUMERIC_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INT_TEXT_RE = re.compile(r"[+-]?\d+")


class ExportCancelled(Exception):
    """The export was cancelled (``cancel()`` returned True); nothing was left under the final name."""


class FinalNameTaken(FileExistsError):
    """The final name (CSV or manifest) appeared while the export ran and was not replaced.

    ``path`` is the name that was taken; ``kept`` the finished temporary files (CSV, then manifest),
    left in place for the user to move. ``str()`` is one line naming both."""

    def __init__(self, path: str, kept: list[str]):
        self.path, self.kept = path, list(kept)
        super().__init__(
            f"{path} appeared while the export ran and was not replaced; the finished "
            f"export is kept as {' and '.join(self.kept)}"
        )


@dataclass(frozen=True)
class ColumnSpec:
    """One CSV column: its header ``name`` and how cells are written (``kind``):

    ``text`` (masked text), ``integer`` (exact), ``number`` (int/Decimal exact, float shortest
    round-trip repr), ``instant`` (aware datetime → ISO-8601 in UTC with ``+00:00``),
    ``naive_instant`` (naive datetime → ISO-8601 without offset), ``boolean`` (``true``/``false``),
    ``json`` (dict/list → compact JSON after masking; a bare JSON number such as ``-7`` is a
    number, not a formula, and is not prefixed). Raises ``ValueError`` on an unknown kind.
    ``description``: what the column holds, for a reader of the evidence (in the manifest when given).
    """

    name: str
    kind: str = "text"
    description: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ValueError(f"column name must be text, not {self.name!r}")
        if self.kind not in COLUMN_KINDS:
            raise ValueError(f"column {self.name!r}: unknown kind {self.kind!r} (one of {COLUMN_KINDS})")


@dataclass(frozen=True)
class ExportResult:
    """What :func:`write_evidence` wrote: final paths, row count, SHA-256 (hex) and size (bytes) of
    the CSV, and the masking counts (kind → values masked) of this export."""

    path: str
    manifest_path: str
    rows: int
    sha256: str
    size: int
    masking: dict[str, int] = field(default_factory=dict)


@dataclass
class VerifyReport:
    """Result of :func:`verify_evidence`; truthy when the CSV matches its manifest."""

    ok: bool
    csv_path: str
    manifest_path: str
    expected_sha256: str | None = None
    actual_sha256: str | None = None
    expected_size: int | None = None
    actual_size: int | None = None
    problems: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.ok


def manifest_path_for(csv_path: str | os.PathLike[str]) -> str:
    """``FILE.csv`` → ``FILE.csv.manifest.json``."""
    return os.fspath(csv_path) + ".manifest.json"


# --------------------------------------------------------------------------------------------------
# Cell formatting


def guard_formula(s: str) -> str:
    """OWASP CSV-injection guard: prefix ``'`` to text starting with ``= + - @`` TAB CR or NUL (or
    ``'``), unless the whole text is a plain number (``-42``, ``+15``, ``-1250.5``, ``1e-5``, ``-.5``),
    which no spreadsheet evaluates as a formula; ``-1+2``, ``+A1``, ``=1`` are guarded. A formula start
    after ``;``, CR or LF inside the text gets a ``'`` too. Undone exactly by
    :func:`idemview.evidence.cells.decode` (see that module)."""
    return cells.encode(s)


class _Bare(str):
    """A cell the CSV writer leaves unquoted under ``QUOTE_NONNUMERIC`` (it counts as a number: the
    ``__float__`` slot): NULL, integers and plain numbers. Quoted anyway if it holds a delimiter."""

    __slots__ = ()

    def __float__(self) -> float:  # pragma: no cover - never called; its presence is the point
        return float("nan")


def _decode_bytes(b: bytes | bytearray | memoryview) -> str:
    """Bytes in a text column: UTF-8 text if it decodes, else ``0x`` + hex (nothing is lost)."""
    raw = bytes(b)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + raw.hex()


def _iso(v: datetime | date | time) -> str:
    """Aware datetime → ISO-8601 in UTC with ``+00:00``; naive or date/time → as is (no offset
    invented)."""
    tz = getattr(v, "tzinfo", None)
    if tz is None or tz is UTC or not isinstance(v, datetime):
        return v.isoformat()
    if v.utcoffset() is None:
        return v.isoformat()
    return v.astimezone(UTC).isoformat()


def _json_default(o: Any) -> Any:
    if isinstance(o, (datetime, date, time)):
        return _iso(o)
    if isinstance(o, (Decimal, UUID)):
        return str(o)
    if isinstance(o, (bytes, bytearray, memoryview)):
        return _decode_bytes(o)
    if isinstance(o, enum.Enum):
        return o.value
    if isinstance(o, (set, frozenset)):
        return sorted(o, key=str)
    if isinstance(o, Payload):
        return _payload_plain(o)
    if hasattr(o, "to_dict"):
        return o.to_dict()
    return str(o)


def _payload_plain(p: Payload) -> Any:
    if p.encoding == "pickle" and p.value is None:
        return f"pickled, not decoded ({p.size} bytes)" if p.size is not None else "pickled, not decoded"
    return p.value


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_json_default)
_dumps = _ENCODER.encode


def _as_text(v: Any) -> str:
    """Text form of an (already masked) value."""
    if type(v) is str:
        return v
    if isinstance(v, str):
        return str(v.value) if isinstance(v, enum.Enum) else str(v)
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, (datetime, date, time)):
        return _iso(v)
    if isinstance(v, (dict, list, tuple)):
        return _dumps(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, enum.Enum):
        return str(v.value)
    return str(v)


def _make_formatter(col: ColumnSpec, masker: Masker, null: str) -> Callable[[Any], str]:
    """One closure per column: mask, then format, then guard. Specialised per kind for speed.
    Masking is ``masker.mask_value(v, name)`` (or its precomputed equivalent ``for_column``)."""
    name = col.name
    codec = cells.CellCodec(null)
    enc = codec.text  # every non-NULL text cell: guarded, and told apart from the NULL literal
    null = codec.null_cell  # a NULL literal such as "=NULL()" is text like any other
    for_column = getattr(masker, "for_column", None)
    mask = for_column(name) if for_column is not None else (lambda v: masker.mask_value(v, name))
    kind = col.kind
    bytes_types = (bytes, bytearray, memoryview)
    # Columns not sensitive by name pass ints and datetimes through unchanged (mask_value's rule),
    # so the formatter may skip the call for those exact types. Unknown maskers: always call.
    column_kind = getattr(masker, "column_kind", None)
    plain = column_kind is not None and column_kind(name) is None
    # The stream masker is the Masker's own walk: only for a real Masker, on a column not sensitive by name.
    streamable = plain and isinstance(masker, Masker)

    def pre(v: Any) -> Any:
        # Bytes and payloads become what a person would read before masking sees them.
        if isinstance(v, bytes_types):
            return _decode_bytes(v)
        if isinstance(v, Payload):
            return _payload_plain(v)
        return v

    if kind == "text":

        def fmt(v: Any) -> str:
            if v is None:
                return null
            if type(v) is str:
                s = mask(v)
            else:
                v = pre(v)
                if v is None:
                    return null
                s = mask(v)
            if type(s) is not str:
                s = _as_text(s)
            return enc(s)

        return fmt

    if kind == "integer":

        def fmt(v: Any) -> str:
            if v is None:
                return null
            if type(v) is int:
                if plain:
                    return str(v)
                m = mask(v)
            else:
                m = mask(pre(v))
            t = type(m)
            if t is int:
                return str(m)
            if m is True or m is False:
                return "1" if m else "0"
            if t is Decimal or isinstance(m, Decimal):
                if m.is_finite() and m == m.to_integral_value():
                    return str(int(m))
                return enc(str(m))
            if isinstance(m, int):
                return str(int(m))
            if isinstance(m, float):
                # A float cannot hold a long id exactly; say so by writing its exact repr.
                if m.is_integer() and abs(m) < 2**53:
                    return str(int(m))
                return enc(repr(m))
            s = _as_text(m)
            if _INT_TEXT_RE.fullmatch(s.strip()):
                return s.strip().lstrip("+")
            return enc(s)

        return fmt

    if kind == "number":

        def fmt(v: Any) -> str:
            if v is None:
                return null
            m = mask(pre(v))
            if m is True or m is False:
                return "1" if m else "0"
            if isinstance(m, float):
                return enc(repr(m))
            if isinstance(m, (int, Decimal)):
                return enc(str(m))
            s = _as_text(m)
            return s if _NUMERIC_RE.fullmatch(s) else enc(s)

        return fmt

    if kind in ("instant", "naive_instant"):

        def fmt(v: Any) -> str:
            if v is None:
                return null
            if type(v) is datetime:
                if plain:
                    tz = v.tzinfo
                    if tz is None:
                        return v.isoformat()
                    if tz is UTC and kind == "instant":
                        return v.isoformat()
                m = mask(v)
            else:
                m = mask(pre(v))
            if isinstance(m, (datetime, date, time)):
                if kind == "naive_instant" and isinstance(m, datetime) and m.tzinfo is not None:
                    return m.isoformat()  # keep the offset it has; do not convert
                return _iso(m)
            return enc(_as_text(m))

        return fmt

    if kind == "boolean":

        def fmt(v: Any) -> str:
            if v is None:
                return null
            m = mask(pre(v))
            if m is True or m is False:
                return "true" if m else "false"
            if type(m) is int and m in (0, 1):
                return "true" if m else "false"
            return enc(_as_text(m))

        return fmt

    # json
    def fmt_json(v: Any) -> str:
        if v is None:
            return null
        if type(v) is JsonText:
            # a large JSON cell masked as a stream, never parsed whole (issue 27); same text as below
            s = mask_json_text(masker, v.text, _dumps) if streamable else None
            if s is not None:
                return enc(s)
            v = v.fallback()
            if v is None:
                return null
        if type(v) is not dict:
            v = pre(v)
            if v is None:
                return null
        m = mask(v)
        if isinstance(m, str):
            return enc(m)
        return enc(_dumps(m))

    return fmt_json


_NONE_TYPE = type(None)
_SHAREABLE = frozenset({"integer", "number", "boolean", "instant", "naive_instant"})
_STR_OR_NONE = frozenset({str, _NONE_TYPE})
_INT_OR_NONE = frozenset({int, _NONE_TYPE})
_DATETIME_OR_NONE = frozenset({datetime, _NONE_TYPE})
_ROW_TYPES = frozenset({tuple, list})


class _Memo(dict):
    """Formatted text of each distinct value of one column in one chunk, computed once. Tags are keyed
    per Masker (one per export or session), so equal values give equal text and reusing it is exact.
    A value whose formatting masked something is remembered with what it masked (kind → values), and
    each reuse adds that to the Masker's counts (``add``): the export's masking counts stay one per
    cell, as if every cell had been formatted. ``counts()`` is a copy of the Masker's counts."""

    __slots__ = ("fn", "total", "counts", "add", "snap", "snap_total")

    def __init__(
        self,
        fn: Callable[[Any], str],
        total: Callable[[], int],
        counts: Callable[[], dict[str, int]] | None = None,
        add: Callable[[Mapping[str, int]], None] | None = None,
    ) -> None:
        super().__init__()
        self.fn, self.total, self.counts, self.add = fn, total, counts, add
        self.snap: dict[str, int] | None = None
        self.snap_total = -1

    def __missing__(self, v: Any) -> str:
        before = self.total()
        out = self.fn(v)
        after = self.total()
        if after == before:
            self[v] = out
            return out
        if self.counts is None or self.add is None:
            return out  # cannot replay the counts: format such a value again each time
        now = self.counts()
        snap = self.snap if self.snap is not None and self.snap_total == before else None
        self.snap, self.snap_total = now, after
        if snap is not None:  # else no snapshot from just before this call: not remembered this time
            delta = {k: n - snap.get(k, 0) for k, n in now.items() if n != snap.get(k, 0)}
            dict.__setitem__(self, v, _Counted(out, delta))
        return out

    def begin(self) -> _Memo:
        """Take the counts snapshot the first masking miss is measured against; returns ``self``."""
        if self.counts is not None:
            self.snap, self.snap_total = self.counts(), self.total()
        return self

    def get_text(self, v: Any) -> str:
        """The formatted text of ``v`` (counted again when its formatting masked something)."""
        out = self[v]
        if type(out) is _Counted:
            d = out.delta
            self.add(d)  # type: ignore[misc]
            snap = self.snap
            if snap is not None:  # the snapshot moves with the counts, so it stays comparable
                for k, n in d.items():
                    snap[k] = snap.get(k, 0) + n
                self.snap_total += sum(d.values())
            return out.text
        return out


class _Counted:
    """A memoised output whose formatting masked ``delta`` (kind → values)."""

    __slots__ = ("text", "delta")

    def __init__(self, text: str, delta: dict[str, int]) -> None:
        self.text, self.delta = text, delta


#: A typed cell (integer, number, boolean, instant) that is safe unquoted in any locale: a plain number,
#: ``true``/``false``, or digits-first ISO-8601 (no ``;``, quote or line break that could start a cell).
_SAFE_BARE_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|true|false|\d[\dT:.+\-Z ]*")


def _bare_cells(col: ColumnSpec, null: str) -> Callable[[list[str]], list[str]]:
    """A column's formatted cells with those written unquoted marked :class:`_Bare`: the NULL cell, and
    in typed columns (integer, number, boolean, instants) the cells in the kind's own form. Text and
    JSON cells are always quoted, as is a masked tag in a typed column."""
    null_cell = cells.CellCodec(null).null_cell
    bare_null = _Bare(null_cell)
    if col.kind in ("integer", "number", "boolean", "instant", "naive_instant"):
        safe = _SAFE_BARE_RE.fullmatch

        def typed(out: list[str]) -> list[str]:
            return [bare_null if c == null_cell else _Bare(c) if safe(c) else c for c in out]

        return typed

    def texts(out: list[str]) -> list[str]:
        if null_cell in out:
            return [bare_null if c == null_cell else c for c in out]
        return out

    return texts


def _make_column_formatter(col: ColumnSpec, masker: Masker, null: str) -> Callable[[Sequence[Any]], list[str]]:
    """One function per column, chosen once: the column's values of a chunk → their CSV texts, equal
    to ``[fmt(v) for v in values]`` with ``fmt`` from :func:`_make_formatter`. Shortcuts, each giving
    the same text: repeated ``str``/``int`` values are formatted once per chunk (only when the masker
    can tell whether formatting masked something, see :class:`_Memo`); plain ints and naive or UTC
    datetimes of columns not sensitive by name skip the masker (it passes them through unchanged)."""
    fmt = _make_formatter(col, masker, null)
    null_text = null  # a text equal to the literal is not "unchanged": it is told apart from NULL
    null = cells.CellCodec(null).null_cell
    total = getattr(masker, "count_total", None)
    add = getattr(masker, "add_counts", None)
    counts = (lambda: masker.counts) if add is not None else None
    column_kind = getattr(masker, "column_kind", None)
    plain = column_kind is not None and column_kind(col.name) is None
    kind = col.kind
    utc = UTC
    # Texts the masker proves it leaves unchanged (unique ids, hex) are written as they are: they
    # start with a hex digit, never with a formula character, so the guard leaves them too.
    check = getattr(masker, "unchanged_check", None)
    unchanged = check() if check is not None and plain and kind == "text" else None

    def vec(values: Sequence[Any]) -> list[str]:
        types = set(map(type, values))
        if plain:
            if kind == "integer" and types <= _INT_OR_NONE:
                if _NONE_TYPE in types:
                    return [null if v is None else str(v) for v in values]
                return list(map(str, values))
            if kind in ("instant", "naive_instant") and types <= _DATETIME_OR_NONE:
                return [
                    null
                    if v is None
                    else v.isoformat()
                    if v.tzinfo is None or v.tzinfo is utc  # what fmt writes for these, unmasked
                    else fmt(v)
                    for v in values
                ]
        if total is not None and (types <= _STR_OR_NONE or types <= _INT_OR_NONE):
            n = len(values)
            if n < 4 or len(set(values)) * 2 <= n:  # repeated values: format each one once
                return list(map(_Memo(fmt, total, counts, add).begin().get_text, values))
            if unchanged is not None and str in types:
                return [
                    v if v is not None and type(v) is str and v != null_text and unchanged(v) else fmt(v)
                    for v in values
                ]
        return list(map(fmt, values))

    return vec


#: A one-row chunk at least this many characters is written field by field (:func:`_row_pieces`).
BIG_ROW = 1 << 20
#: Characters of a large field quoted, encoded and written at a time.
PIECE_CHARS = 1 << 20


class _Lines:
    """A ``write`` target for ``csv.writer`` that keeps what it is given (one string per row)."""

    __slots__ = ("lines",)

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, s: str) -> int:
        self.lines.append(s)
        return len(s)

    def take(self) -> list[str]:
        out, self.lines = self.lines, []
        return out


# What makes the csv module quote a field it would write bare (a _Bare cell): the delimiter, the
# quote character, CR, LF (Modules/_csv.c, QUOTE_NONNUMERIC with lineterminator "\r\n").
_NEEDS_QUOTES = re.compile('[,"\r\n]')


def _row_pieces(fields: list[str]) -> Iterator[str]:
    """The CSV line ``csv.writer(..., lineterminator="\r\n", quoting=QUOTE_NONNUMERIC)`` writes for
    ``fields`` (formatted cells; :class:`_Bare` ones bare), as pieces: no field is copied more than
    once (its quotes doubled), and no piece holds more than one field."""
    for i, cell in enumerate(fields):
        if i:
            yield ","
        if isinstance(cell, _Bare) and not (cell == "" and len(fields) == 1) and not _NEEDS_QUOTES.search(cell):
            yield str.__str__(cell)
            continue
        yield '"'
        if len(cell) <= PIECE_CHARS:
            yield cell.replace('"', '""') if '"' in cell else cell
        else:  # a slice at a time: no whole quoted (nor encoded) copy of a large cell
            for i in range(0, len(cell), PIECE_CHARS):
                part = cell[i : i + PIECE_CHARS]
                yield part.replace('"', '""') if '"' in part else part
        yield '"'
    yield "\r\n"


class ColumnBatches:
    """Rows handed over a batch at a time as columns: ``batches`` yields lists of equally long
    column sequences (in column order). :func:`write_evidence` formats them as they are, without
    turning them into rows and back; as an iterator a ``ColumnBatches`` gives the rows (tuples)."""

    def __init__(self, batches: Iterable[Sequence[Sequence[Any]]]) -> None:
        self.batches = batches
        self._rows: Iterator[tuple] | None = None

    def __iter__(self) -> Iterator[tuple]:
        return self

    def __next__(self) -> tuple:
        if self._rows is None:
            self._rows = (row for cols in self.batches for row in zip(*cols, strict=True))
        return next(self._rows)


def _column_chunks(
    rows: Iterable[Sequence[Any] | Mapping[str, Any]] | ColumnBatches, names: list[str], ncols: int
) -> Callable[[int, int], list[Sequence[Any]] | None]:
    """``take(at_most, done)``: the next chunk of at most ``at_most`` rows as a list of columns, or
    ``None`` at the end (``done``: rows taken before, to number a bad row in ``ValueError``)."""
    if isinstance(rows, ColumnBatches):
        batches = iter(rows.batches)
        held: list[Sequence[Any]] = []
        pos = size = 0

        def take_batch(at_most: int, done: int) -> list[Sequence[Any]] | None:
            nonlocal held, pos, size
            while pos >= size:
                nxt = next(batches, None)
                if nxt is None:
                    return None
                held = list(nxt)
                lens = set(map(len, held))
                if len(held) != ncols or len(lens) != 1:
                    raise ValueError(
                        f"a batch after row {done} has {len(held)} columns for {ncols}, of lengths {sorted(lens)}"
                    )
                pos, size = 0, lens.pop()
            if pos == 0 and size <= at_most:
                pos = size
                return held
            end = min(size, pos + at_most)
            sliced: dict[int, Sequence[Any]] = {}  # a column handed twice (the same list) stays one list
            part = []
            for c in held:
                sc = sliced.get(id(c))
                if sc is None:
                    sc = sliced[id(c)] = c[pos:end]
                part.append(sc)
            pos = end
            return part

        return take_batch
    it = iter(rows)

    def take_rows(at_most: int, done: int) -> list[Sequence[Any]] | None:
        chunk = list(islice(it, at_most))
        if not chunk:
            return None
        return list(zip(*_normalise_rows(chunk, names, ncols, done), strict=True))

    return take_rows


def _normalise_rows(chunk: list[Any], names: list[str], ncols: int, done: int) -> list[Any]:
    """Rows of a chunk as sequences in column order (mappings by column name); ``ValueError`` for a
    row of the wrong length (numbered from 1 over the whole export)."""
    if set(map(type, chunk)) <= _ROW_TYPES and set(map(len, chunk)) == {ncols}:
        return chunk
    out = []
    for i, row in enumerate(chunk):
        if isinstance(row, Mapping):
            row = [row.get(x) for x in names]
        elif len(row) != ncols:
            raise ValueError(f"row {done + i + 1} has {len(row)} values for {ncols} columns")
        out.append(row)
    return out


# --------------------------------------------------------------------------------------------------
# Manifest helpers


def _strip_userinfo(s: str) -> str:
    """``postgresql://app:pw@db:5432/x?password=..`` → ``postgresql://db:5432/x`` (user, password
    and query removed); text that is not such a URL is returned unchanged."""
    if "://" not in s:
        return s
    try:
        parts = urlsplit(s)
    except ValueError:
        return s
    if not parts.scheme or not parts.netloc:
        return s
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _sanitize_ledger(d: Any) -> Any:
    """Drop user names and passwords from the ledger description (DESIGN §7)."""
    if isinstance(d, Mapping):
        out = {}
        for k, v in d.items():
            if isinstance(k, str) and "_".join(normalize_name(k)) in _LEDGER_FORBIDDEN:
                continue
            out[k] = _sanitize_ledger(v)
        return out
    if isinstance(d, (list, tuple)):
        return [_sanitize_ledger(x) for x in d]
    if isinstance(d, str):
        return _strip_userinfo(d)
    return d


def _plain(o: Any) -> Any:
    """JSON-able copy (datetimes ISO, enums by value, dataclasses via to_dict)."""
    return json.loads(json.dumps(o, default=_json_default))


def _strip_urls(o: Any) -> Any:
    if isinstance(o, str):
        return _strip_userinfo(o) if "@" in o else o
    if isinstance(o, dict):
        return {k: _strip_urls(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_strip_urls(x) for x in o]
    return o


def _mask_uncounted(masker: Masker, v: Any) -> Any:
    """Mask a manifest field without adding to the export's counts (maskers without the
    ``count`` keyword are called plainly)."""
    try:
        return masker.mask_value(v, None, count=False)
    except TypeError:
        return masker.mask_value(v, None)


def _utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _write_atomic_temp(directory: str, final_name: str, data: bytes) -> str:
    fd, tmp = tempfile.mkstemp(prefix=f".{final_name}.", suffix=".part", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _unlink_quiet(tmp)
        raise
    return tmp


_NO_LINK_ERRNOS = frozenset(
    e
    for e in (
        getattr(errno, n, None) for n in ("EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS", "EXDEV", "EMLINK", "EACCES")
    )
    if e is not None
)


def _claim(tmp: str, final: str) -> None:
    """Move ``tmp`` to ``final`` only if ``final`` does not exist; never replaces a file.

    A hard link fails with ``EEXIST`` when the name is taken (atomic, POSIX ``link(2)``); the temp name
    is then dropped. Where hard links are not supported (some FAT, SMB and FUSE file systems), the name
    is claimed by an exclusive create (``O_CREAT|O_EXCL``) and the finished file renamed onto that
    claim. Raises ``FileExistsError`` when the name is taken; ``tmp`` then still exists."""
    try:
        os.link(tmp, final)
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in _NO_LINK_ERRNOS:
            raise
        fd = os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # FileExistsError if taken
        os.close(fd)
        try:
            os.replace(tmp, final)
        except BaseException:
            _unlink_quiet(final)
            raise
        return
    _unlink_quiet(tmp)


def _unlink_quiet(p: str | None) -> None:
    if p:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def publish_with_manifest(tmp: str, manifest_bytes: bytes, final: str, *, overwrite: bool) -> str:
    """Put a finished file and its manifest under their final names: ``manifest_bytes`` is written
    beside ``tmp`` under a temporary name, then ``tmp`` becomes ``final`` and the manifest
    ``final + ".manifest.json"`` (the name returned). Without ``overwrite`` each name is claimed
    without replacing anything (:func:`_claim`); a name taken meanwhile raises
    :class:`FinalNameTaken`, keeping both finished temporary files. On any other failure both
    temporaries are removed and nothing is left under the final names. Used by the CSV export and
    the incident report (``evidence.report``)."""
    directory = os.path.dirname(final)
    mfinal = manifest_path_for(final)
    mtmp: str | None = None
    tmp_left: str | None = tmp
    replaced = False
    try:
        mtmp = _write_atomic_temp(directory, os.path.basename(mfinal), manifest_bytes)
        if overwrite:
            os.replace(tmp, final)
            tmp_left = None
            replaced = True
            os.replace(mtmp, mfinal)
            mtmp = None
        else:
            try:
                _claim(tmp, final)
            except FileExistsError:
                kept = [tmp, mtmp]
                tmp_left = mtmp = None  # finished work is kept, not cleaned up
                raise FinalNameTaken(final, kept) from None
            claimed_tmp, tmp_left = tmp, None
            replaced = True
            try:
                _claim(mtmp, mfinal)
            except FileExistsError:
                # Our file went in but the manifest's name is taken: give the file its temporary name
                # back (it is ours: we created that name a moment ago) and keep both.
                os.replace(final, claimed_tmp)
                replaced = False
                kept = [claimed_tmp, mtmp]
                mtmp = None
                raise FinalNameTaken(mfinal, kept) from None
            mtmp = None
    except BaseException:
        _unlink_quiet(tmp_left)
        _unlink_quiet(mtmp)
        if replaced:  # the file went in but its manifest did not: take it back out
            _unlink_quiet(final)
        raise
    return mfinal


# --------------------------------------------------------------------------------------------------


def write_evidence(
    path: str | os.PathLike[str],
    columns: Sequence[ColumnSpec | tuple[str, str]],
    rows: Iterable[Sequence[Any] | Mapping[str, Any]] | ColumnBatches,
    *,
    masker: Masker,
    manifest: Mapping[str, Any],
    excel: bool = False,
    null_literal: str = "",
    progress: Callable[[int], Any] | None = None,
    cancel: Callable[[], bool] | None = None,
    check_every: int = 1000,
    overwrite: bool = False,
) -> ExportResult:
    """Write masked evidence to ``path`` (CSV) and ``path + ".manifest.json"``; see the module doc.

    ``rows`` yields sequences in column order (or mappings by column name); it is consumed once.
    ``manifest`` holds the caller's entries (``ledger``: connection name, dialect, host, database;
    ``layout``: name + hash; ``filter``: structured + sentence; ``now``; ``rows``: what the rows are);
    user names, passwords and URL credentials in ``ledger`` are dropped, and every entry is masked.
    ``progress(rows_written)`` and ``cancel()`` are called every ``check_every`` rows (and at the
    start/end). Files are created with mode 0600 (``mkstemp``). ``overwrite`` replaces existing files
    under the final names; otherwise a final name that exists when the export finishes (another process
    created it meanwhile) is left alone and :class:`FinalNameTaken` is raised, keeping the finished
    temporary CSV and manifest under the names it gives.

    Raises ``ExportCancelled`` when ``cancel()`` returns True, ``ValueError`` for a row of the wrong
    length or a manifest entry that uses a reserved key; any exception from ``rows`` propagates. In
    every failure case no file exists under the final names.
    """
    final = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(final)
    base = os.path.basename(final)
    mfinal = manifest_path_for(final)
    cols = [c if isinstance(c, ColumnSpec) else ColumnSpec(*c) for c in columns]
    if not cols:
        raise ValueError("an export needs at least one column")
    clash = _RESERVED & set(manifest)
    if clash:
        raise ValueError(f"manifest entries use reserved keys: {sorted(clash)}")
    if check_every < 1:
        raise ValueError("check_every must be >= 1")
    if cancel is not None and cancel():
        raise ExportCancelled("export cancelled before it started")

    before = masker.counts
    ncols = len(cols)
    names = [c.name for c in cols]
    vecs = [_make_column_formatter(c, masker, null_literal) for c in cols]
    # Typed columns not sensitive by name whose batch is one list object handed twice (two columns
    # decoded from the same stored column, see plan._operation_columns) are formatted once per chunk.
    total = getattr(masker, "count_total", None)
    column_kind = getattr(masker, "column_kind", None)
    share = [
        c.kind
        if total is not None and column_kind is not None and c.kind in _SHAREABLE and column_kind(c.name) is None
        else None
        for c in cols
    ]
    shared: dict[tuple[int, str], list[str]] = {}
    hidden = HiddenRows()
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".part", dir=directory)
        h = hashlib.sha256()
        size = 0
        n = 0
        with os.fdopen(fd, "wb") as f:
            # The CSV text as the csv module wrote it, a list of lines: io.StringIO would hold it as
            # 4 bytes per character (its UCS-4 buffer), 200 MB for one 50 MB cell (issue 27 item 1).
            buf = _Lines()
            # RFC 4180 with every text field quoted (issue 19, item 16): _Bare cells (NULL, numbers)
            # are the only ones written bare. See cells.py for why quoting alone is not the guard.
            w = csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_NONNUMERIC)
            bare = [_bare_cells(c, null_literal) for c in cols]

            def put(text: str) -> None:
                nonlocal size
                data = text.encode("utf-8", "backslashreplace")
                h.update(data)
                f.write(data)
                size += len(data)

            def flush() -> None:
                lines = buf.take()
                if sum(map(len, lines)) <= FLUSH_CHARS:
                    put("".join(lines))
                    return
                for line in lines:  # a large row: no joined copy of it
                    put(line)

            if excel:
                put("\ufeff")
            w.writerow([guard_formula(x) for x in names])
            take = _column_chunks(rows, names, ncols)
            pending_chars = 0
            # Rows are taken a chunk at a time and formatted column by column (one function per
            # column, chosen once; equal values formatted once per chunk). A chunk's row count adapts
            # to the bytes of the previous one (one row at a time for multi-MB cells), never crosses a
            # multiple of ``check_every`` (progress and cancel are polled there), and the CSV text is
            # written out every FLUSH_CHARS: memory is bounded by bytes, not rows.
            limit = 1
            while True:
                columns_in = take(min(limit, check_every - n % check_every), n)
                if columns_in is None:
                    break
                out = []
                shared.clear()
                for vec, b, vals, sk in zip(vecs, bare, columns_in, share, strict=True):
                    if sk is not None and total is not None:
                        hit = shared.get((id(vals), sk))
                        if hit is not None:
                            out.append(hit)
                            continue
                        t0 = total()
                        cells_out = b(vec(vals))
                        if total() == t0:  # nothing masked: the same text for the same list
                            shared[(id(vals), sk)] = cells_out
                        out.append(cells_out)
                    else:
                        out.append(b(vec(vals)))
                del columns_in
                k = len(out[0])
                hidden.note(out, n)
                chars = sum(sum(map(len, col)) for col in out)
                if k == 1 and chars >= BIG_ROW:
                    # one large row: written field by field (the csv module would build the whole
                    # line in a 4-bytes-per-character buffer first), the same bytes (test_writer.py)
                    flush()
                    for piece in _row_pieces([col[0] for col in out]):
                        put(piece)
                else:
                    w.writerows(zip(*out, strict=True))
                del out
                n += k
                pending_chars += chars
                limit = max(1, min(check_every, FLUSH_CHARS * k // max(1, chars)))
                at_check = n % check_every == 0
                if pending_chars >= FLUSH_CHARS or at_check:
                    flush()
                    pending_chars = 0
                if at_check:
                    if progress is not None:
                        progress(n)
                    if cancel is not None and cancel():
                        raise ExportCancelled(f"export cancelled after {n} rows")
            flush()
            f.flush()
            os.fsync(f.fileno())
        if cancel is not None and cancel():
            raise ExportCancelled(f"export cancelled after {n} rows")
        sha = h.hexdigest()
        after = masker.counts
        counts = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}

        doc = _build_manifest(manifest, cols, n, masker, counts, base, sha, size, excel, null_literal)
        if hidden.count:  # only then: a manifest without such rows is unchanged
            doc["hidden_characters"] = hidden.describe()
        mtext = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
        done, tmp = tmp, None  # from here publish_with_manifest owns (and cleans up) the finished file
        publish_with_manifest(done, mtext.encode("utf-8"), final, overwrite=overwrite)
    except BaseException:
        _unlink_quiet(tmp)
        raise
    if progress is not None:
        progress(n)
    return ExportResult(final, mfinal, n, sha, size, counts)


def _build_manifest(
    entries: Mapping[str, Any],
    cols: list[ColumnSpec],
    n: int,
    masker: Masker,
    counts: dict[str, int],
    base: str,
    sha: str,
    size: int,
    excel: bool,
    null_literal: str,
) -> dict[str, Any]:
    caller: dict[str, Any] = {}
    for k, v in entries.items():
        v = _plain(v)
        if k in ("ledger", "connection"):
            v = _sanitize_ledger(v)
        caller[k] = _mask_uncounted(masker, _strip_urls(v))
    f, mk = caller.get("filter"), caller.get("masking_key")
    flt: dict[str, Any] = f if isinstance(f, dict) else {}
    key: dict[str, Any] = mk if isinstance(mk, dict) else {}
    # What a reader needs first (issue 20 §12): what was exported, for which `now`, how many rows, the
    # file's hash and whose masking key; every detail (masking word lists included) follows.
    summary = {
        "filter": flt.get("sentence_shown") or flt.get("sentence"),
        "now": caller.get("now"),
        "row_count": n,
        "sha256": sha,
        **({"masking_key": key.get("scope")} if key.get("scope") else {}),
    }
    return {
        "format": MANIFEST_FORMAT,
        "summary": summary,
        "tool": {"name": "idemview", "version": __version__},
        "exported_at": _utc_now_iso(),
        **caller,
        "columns": [
            {
                "name": _mask_uncounted(masker, c.name),
                "kind": c.kind,
                **({"description": c.description} if c.description else {}),
            }
            for c in cols
        ],
        "row_count": n,
        "masking": {"enabled": True, "rules": masker.rules.describe(), "counts": dict(sorted(counts.items()))},
        "csv": {
            "file": base,
            "sha256": sha,
            "bytes": size,
            "encoding": "utf-8",
            "bom": bool(excel),
            "header": True,
            "delimiter": ",",
            "quoting": "RFC 4180, every text field quoted (quotes doubled); NULL, numbers, booleans, instants bare",
            "line_terminator": "CRLF",
            "null": null_literal,
            "null_cell": cells.CellCodec(null_literal).null_cell,
            "formula_guard": cells.GUARD_SPEC,
        },
    }


def verify_evidence(csv_path: str | os.PathLike[str]) -> VerifyReport:
    """Recompute the CSV's SHA-256 and size and compare them with its manifest.

    Returns a :class:`VerifyReport` (truthy when they match); a missing or unreadable manifest is
    reported as a problem, not raised.
    """
    p = os.fspath(csv_path)
    mp = manifest_path_for(p)
    rep = VerifyReport(False, p, mp)
    try:
        with open(mp, encoding="utf-8") as f:
            doc = json.load(f)
        meta = doc["csv"] if "csv" in doc else doc["html"]  # an evidence CSV's manifest, or a report's
        rep.expected_sha256 = meta["sha256"]
        rep.expected_size = meta["bytes"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
        rep.problems.append(f"manifest unreadable: {type(e).__name__}: {e}")
        return rep
    h = hashlib.sha256()
    size = 0
    try:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
                size += len(chunk)
    except OSError as e:
        rep.problems.append(f"CSV unreadable: {e}")
        return rep
    rep.actual_sha256 = h.hexdigest()
    rep.actual_size = size
    if rep.actual_sha256 != rep.expected_sha256:
        rep.problems.append("SHA-256 differs from the manifest")
    if size != rep.expected_size:
        rep.problems.append(f"size {size} bytes differs from the manifest's {rep.expected_size}")
    rep.ok = not rep.problems
    return rep
