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
import errno
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Besides what this module uses, the names other modules and tests import from here (they lived in this
# module before it was split, issue 25 item 6) are re-exported.
from idemview.evidence.chunks import ColumnBatches, _column_chunks, _normalise_rows  # noqa: F401
from idemview.evidence.formatting import (  # noqa: F401
    _SHAREABLE,
    COLUMN_KINDS,
    FORMULA_STARTERS,
    ColumnSpec,
    _as_text,
    _Bare,
    _bare_cells,
    _BareColumn,
    _Counted,
    _decode_bytes,
    _dumps,
    _iso,
    _json_default,
    _make_column_cells,
    _make_column_formatter,
    _make_formatter,
    _Memo,
    _payload_plain,
    bare_cell,
    guard_formula,
)
from idemview.evidence.manifest import (  # noqa: F401
    _LEDGER_FORBIDDEN,
    _RESERVED,
    MANIFEST_FORMAT,
    VerifyReport,
    _build_manifest,
    _mask_uncounted,
    _plain,
    _sanitize_ledger,
    _strip_urls,
    _strip_userinfo,
    _utc_now_iso,
    manifest_path_for,
    verify_evidence,
)
from idemview.evidence.pages import CellStream
from idemview.masking.masker import Masker
from idemview.masking.visible import HiddenRows, has_hidden

__all__ = [
    "COLUMN_KINDS",
    "MANIFEST_FORMAT",
    "guard_formula",
    "publish_with_manifest",
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


#: Formatted characters held before they are written out (memory bounded by bytes, not rows).
FLUSH_CHARS = 4 << 20


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
class ExportResult:
    """What :func:`write_evidence` wrote: final paths, row count, SHA-256 (hex) and size (bytes) of
    the CSV, and the masking counts (kind → values masked) of this export."""

    path: str
    manifest_path: str
    rows: int
    sha256: str
    size: int
    masking: dict[str, int] = field(default_factory=dict)


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
        if type(cell) is CellStream:  # made while written: the caller writes it (_put_row)
            yield '"'
            yield cell
            yield '"'
            continue
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


_STR_ONLY = frozenset({str})
_BARE_ONLY = frozenset({_Bare})


def _csv_column(col: Sequence[str]) -> Sequence[str]:
    """One column's cells as the csv module writes them in a row of two or more fields (the
    ``QUOTE_NONNUMERIC`` writer of :class:`_CsvOut`): a :class:`_Bare` cell as it is unless it holds a
    delimiter, quote, CR or LF, every other cell (and such a bare one) in quotes with its quotes
    doubled (Modules/_csv.c ``join_append``). Whole-column steps where the column allows them."""
    if type(col) is _BareColumn:
        return col  # marked whole: every cell bare, none holding a delimiter, quote, CR or LF
    types = set(map(type, col))
    if types == _BARE_ONLY and _NEEDS_QUOTES.search("".join(col)) is None:
        return col  # every cell bare (numbers, instants, NULLs)
    if types == _STR_ONLY:
        if '"' in "".join(col):
            col = [c.replace('"', '""') for c in col]
        return ['"' + c + '"' for c in col]
    return [
        c
        if type(c) is _Bare and _NEEDS_QUOTES.search(c) is None
        else '"' + (c.replace('"', '""') if '"' in c else c) + '"'
        for c in col
    ]


def _csv_text(cols: Sequence[Sequence[str]]) -> str:
    """The text ``csv.writer(..., lineterminator="\r\n", quoting=QUOTE_NONNUMERIC).writerows(zip(*cols))``
    writes for formatted cells (``str``, :class:`_Bare`), built a column at a time and joined by
    ``str.join`` instead of a character loop per field; two or more columns (a lone empty field is
    the csv module's special case ``""``)."""
    if not cols or not cols[0]:
        return ""
    quoted = [_csv_column(c) for c in cols]
    return "\r\n".join(map(",".join, zip(*quoted, strict=True))) + "\r\n"


def _has_stream(cols_out: list[list[str]]) -> bool:
    return any(CellStream in set(map(type, col)) for col in cols_out)


def _put_row(out: _CsvOut, fields: list[str], hidden: HiddenRows, n: int) -> None:
    """Write one row field by field (:func:`_row_pieces`), a :class:`CellStream` piece by piece; the
    row's hidden characters noted as :meth:`HiddenRows.note` would (data row ``n + 1``)."""
    flag = [any(type(f) is not CellStream and not f.isprintable() and has_hidden(f) for f in fields)]

    def put_quoted(s: str) -> None:
        if not flag[0] and not s.isprintable() and has_hidden(s):
            flag[0] = True
        out.put(s.replace('"', '""') if '"' in s else s)

    for piece in _row_pieces(fields):
        if type(piece) is CellStream:
            piece.write(put_quoted)
        else:
            out.put(piece)
    hidden.note([["\0" if flag[0] else ""]], n)  # one cell standing for the row


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
    directory, base = os.path.dirname(final), os.path.basename(final)
    cols = _checked_columns(columns, manifest, check_every)
    if cancel is not None and cancel():
        raise ExportCancelled("export cancelled before it started")
    before = masker.counts
    hidden = HiddenRows()
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".part", dir=directory)
        with os.fdopen(fd, "wb") as f:
            out = _CsvOut(f)
            if excel:
                out.put("\ufeff")
            out.w.writerow([guard_formula(c.name) for c in cols])
            chunks = _ChunkFormatter(cols, masker, null_literal)
            n = _write_rows(
                out, chunks, _column_chunks(rows, chunks.names, len(cols)), hidden, progress, cancel, check_every
            )
            out.flush()
            f.flush()
            os.fsync(f.fileno())
        if cancel is not None and cancel():
            raise ExportCancelled(f"export cancelled after {n} rows")
        sha, size = out.h.hexdigest(), out.size
        after = masker.counts
        counts = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}
        doc = _build_manifest(manifest, cols, n, masker, counts, base, sha, size, excel, null_literal)
        if hidden.count:  # only then: a manifest without such rows is unchanged
            doc["hidden_characters"] = hidden.describe()
        mtext = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
        done, tmp = tmp, None  # from here publish_with_manifest owns (and cleans up) the finished file
        mfinal = publish_with_manifest(done, mtext.encode("utf-8"), final, overwrite=overwrite)
    except BaseException:
        _unlink_quiet(tmp)
        raise
    if progress is not None:
        progress(n)
    return ExportResult(final, mfinal, n, sha, size, counts)


def _checked_columns(
    columns: Sequence[ColumnSpec | tuple[str, str]], manifest: Mapping[str, Any], check_every: int
) -> list[ColumnSpec]:
    """The column specs, after the argument checks of :func:`write_evidence` (``ValueError``)."""
    cols = [c if isinstance(c, ColumnSpec) else ColumnSpec(*c) for c in columns]
    if not cols:
        raise ValueError("an export needs at least one column")
    clash = _RESERVED & set(manifest)
    if clash:
        raise ValueError(f"manifest entries use reserved keys: {sorted(clash)}")
    if check_every < 1:
        raise ValueError("check_every must be >= 1")
    return cols


class _CsvOut:
    """The CSV being written: ``w`` (a ``csv.writer``) collects lines, ``flush()`` encodes them to
    UTF-8 into the file, hashing (SHA-256) and counting bytes as it goes; ``put(text)`` writes text
    directly."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.h = hashlib.sha256()
        self.size = 0
        # The CSV text as the csv module wrote it, a list of lines: io.StringIO would hold it as
        # 4 bytes per character (its UCS-4 buffer), 200 MB for one 50 MB cell (issue 27 item 1).
        self.buf = _Lines()
        # RFC 4180 with every text field quoted (issue 19, item 16): _Bare cells (NULL, numbers)
        # are the only ones written bare. See cells.py for why quoting alone is not the guard.
        self.w = csv.writer(self.buf, lineterminator="\r\n", quoting=csv.QUOTE_NONNUMERIC)

    def put(self, text: str) -> None:
        data = text.encode("utf-8", "backslashreplace")
        self.h.update(data)
        self.f.write(data)
        self.size += len(data)

    def flush(self) -> None:
        lines = self.buf.take()
        if sum(map(len, lines)) <= FLUSH_CHARS:
            self.put("".join(lines))
            return
        for line in lines:  # a large row: no joined copy of it
            self.put(line)


class _ChunkFormatter:
    """A chunk's columns → their formatted cells (one function per column, chosen once).

    Typed columns not sensitive by name whose batch is one list object handed twice (two columns
    decoded from the same stored column, see plan._operation_columns) are formatted once per chunk,
    when formatting them masked nothing (the masker's ``count_total`` did not move)."""

    def __init__(self, cols: list[ColumnSpec], masker: Masker, null_literal: str) -> None:
        self.names = [c.name for c in cols]
        self.fns = [_make_column_cells(c, masker, null_literal) for c in cols]
        self.total = total = getattr(masker, "count_total", None)
        column_kind = getattr(masker, "column_kind", None)
        self.share = [
            c.kind
            if total is not None and column_kind is not None and c.kind in _SHAREABLE and column_kind(c.name) is None
            else None
            for c in cols
        ]

    def __call__(self, columns_in: list[Sequence[Any]]) -> list[list[str]]:
        out = []
        total = self.total
        shared: dict[tuple[int, str], list[str]] = {}
        for fn, vals, sk in zip(self.fns, columns_in, self.share, strict=True):
            if sk is not None and total is not None:
                hit = shared.get((id(vals), sk))
                if hit is not None:
                    out.append(hit)
                    continue
                t0 = total()
                cells_out = fn(vals)
                if total() == t0:  # nothing masked: the same text for the same list
                    shared[(id(vals), sk)] = cells_out
                out.append(cells_out)
            else:
                out.append(fn(vals))
        return out


def _write_rows(
    out: _CsvOut,
    fmt: _ChunkFormatter,
    take: Callable[[int, int], list[Sequence[Any]] | None],
    hidden: HiddenRows,
    progress: Callable[[int], Any] | None,
    cancel: Callable[[], bool] | None,
    check_every: int,
) -> int:
    """Format and write every row; returns the row count. ``ExportCancelled`` when ``cancel()`` says so.

    Rows are taken a chunk at a time and formatted column by column (:class:`_ChunkFormatter`). A
    chunk's row count adapts to the bytes of the previous one (one row at a time for multi-MB cells),
    never crosses a multiple of ``check_every`` (progress and cancel are polled there), and the CSV
    text is written out every FLUSH_CHARS: memory is bounded by bytes, not rows."""
    n = pending_chars = 0
    limit = 1
    while True:
        columns_in = take(min(limit, check_every - n % check_every), n)
        if columns_in is None:
            return n
        cols_out = fmt(columns_in)
        del columns_in
        k = len(cols_out[0])
        chars = sum(sum(map(len, col)) for col in cols_out)
        if chars >= BIG_ROW and (k == 1 or _has_stream(cols_out)):
            # large rows: written field by field (the csv module would build the whole line in a
            # 4-bytes-per-character buffer first), the same bytes (test_writer.py); a cell read in
            # pages (evidence/pages.py) is masked as it is written
            out.flush()
            for r in range(k):
                _put_row(out, [bare_cell(col, r) for col in cols_out], hidden, n + r)
        elif len(cols_out) > 1:
            hidden.note(cols_out, n)
            out.buf.write(_csv_text(cols_out))  # the csv module's text, a column at a time
        else:
            hidden.note(cols_out, n)
            col = cols_out[0]
            out.w.writerows(zip(map(_Bare, col) if type(col) is _BareColumn else col))
        del cols_out
        n += k
        pending_chars += chars
        limit = max(1, min(check_every, FLUSH_CHARS * k // max(1, chars)))
        at_check = n % check_every == 0
        if pending_chars >= FLUSH_CHARS or at_check:
            out.flush()
            pending_chars = 0
        if at_check:
            if progress is not None:
                progress(n)
            if cancel is not None and cancel():
                raise ExportCancelled(f"export cancelled after {n} rows")
