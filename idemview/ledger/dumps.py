"""Dump files as ledgers (DESIGN §5.3): which paths are dumps, and which tables a dump holds.

A **dump** is what a DBA hands an investigator instead of credentials: one ``.csv``, ``.parquet`` or
``.jsonl`` file (one table, named after the file: ``celery_taskmeta.parquet`` is the table
``celery_taskmeta``), or a folder of such files, one per table, all of one format. It is read through
DuckDB (:mod:`idemview.ledger.dump_engine`), read-only, so every preset and finding runs in SQL on it.

This module only looks at names and file kinds (it never imports DuckDB): :func:`is_dump_path` is how
:func:`idemview.ledger.connect.parse_url` recognises a dump among the other ways to name a ledger, and
:func:`list_dump` says what a dump holds or, in one line, what to fix (:class:`DumpError`, exit 2).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from idemview.errors import InputError
from idemview.paths import readable_file, special_kind, symlink_target

#: File name endings read as dumps, and the format each is read as.
FORMATS = {".csv": "csv", ".parquet": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}
#: How messages name the formats.
FORMAT_TITLES = {"csv": "CSV", "parquet": "Parquet", "jsonl": "JSON Lines"}
#: The SQLAlchemy backend name of a dump URL (``duckdb:///PATH``, what a saved connection stores).
BACKEND = "duckdb"


class DumpError(InputError):
    """A dump that cannot be read as one: no such file, an empty folder, a folder mixing formats, two
    files for one table, a file that is not valid CSV/Parquet/JSON Lines. Exit code 2; the message is
    one line naming the file and what to fix. Nothing was written."""


@dataclass(frozen=True)
class DumpTable:
    """One table of a dump: ``name`` (the file name without its ending), ``path`` (absolute,
    symlinks resolved) and ``format`` (``csv``, ``parquet`` or ``jsonl``)."""

    name: str
    path: Path
    format: str


@dataclass(frozen=True)
class Dump:
    """A dump: ``root`` (the file or folder the user named, absolute) and its ``tables`` in name
    order. ``format`` is the one format of its files."""

    root: Path
    tables: tuple[DumpTable, ...]

    @property
    def format(self) -> str:
        return self.tables[0].format

    @property
    def files(self) -> list[Path]:
        return [t.path for t in self.tables]


def format_of(path: str | Path) -> str | None:
    """The dump format a file name says (``"csv"``, ``"parquet"``, ``"jsonl"``), or ``None``."""
    return FORMATS.get(Path(path).suffix.lower())


#: What no header names a column (:func:`looks_like_value`): a number, an ISO 8601 date, time or both
#: (with fractions and an offset or Z), a UUID.
_VALUE = re.compile(
    r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?"
    r"|\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}(:?\d{2})?)?"
    r"|\d{2}:\d{2}(:\d{2}(\.\d+)?)?"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)


def looks_like_value(name: str) -> bool:
    """True when a CSV column name is shaped like a cell value rather than a name (see :data:`_VALUE`)."""
    return _VALUE.fullmatch(name.strip()) is not None


def headerless_csv(engine, table: str, names) -> bool:
    """True when ``table`` of a dump ``engine`` (:func:`~idemview.ledger.dump_engine.open_dump_engine`)
    is a CSV file whose column ``names`` (the file's first row, DuckDB reads it as the header) seem to
    be a row of data: at least one is a number, an ISO date/time or a UUID (:func:`looks_like_value`).
    A header names columns, so one such name is taken as the sign; the cost of a wrong guess is a
    message that does not list the names, never a value printed. ``False`` for any other engine."""
    dump = getattr(getattr(engine, "dialect", None), "dump", None)
    if not isinstance(dump, Dump):
        return False
    fmt = next((t.format for t in dump.tables if t.name.lower() == table.lower()), None)
    return fmt == "csv" and any(looks_like_value(str(n)) for n in names)


def is_dump_path(text: str | Path) -> bool:
    """True when ``text`` names a dump: a path (not a URL) ending in ``.csv``, ``.parquet``, ``.jsonl``
    or ``.ndjson`` (whether or not it exists: a missing dump is then said to be missing), or an existing
    folder. A SQLite file (``.db``, or any other existing file) is not a dump."""
    s = str(text)
    if "://" in s or not s.strip():
        return False
    p = Path(s)
    if format_of(p) is not None:
        return True
    try:
        return p.is_dir()
    except OSError:
        return False


def list_dump(path: str | Path) -> Dump:
    """The tables of the dump at ``path`` (a file or a folder, see the module docstring).

    A folder is read one level deep; hidden files and files of other endings (a README, a checksum
    list) are left out. Raises :class:`DumpError` for a missing path, a FIFO/device, a file of an
    unknown ending, a folder with no dump file, with files of several formats, or with two files that
    would be the same table (``a.csv`` and ``A.csv``)."""
    p = Path(path).expanduser()
    kind = special_kind(p)
    if kind is not None and kind != "a folder":
        raise DumpError(f"{p} is {kind}, not a dump file; refusing to open it")
    if p.suffix and format_of(p) is None and not p.is_dir():
        raise DumpError(f"{p} is not a dump file: the name must end in .csv, .parquet or .jsonl")
    link = symlink_target(p)
    if link is not None and not p.exists():
        raise DumpError(f"{p} is a symlink to {link}, which does not exist")
    if not p.exists():
        raise DumpError(f"no dump file or folder at {p} (give a .csv, .parquet or .jsonl file, or a folder of them)")
    root = p.resolve()
    if root.is_dir():
        files = [f for f in sorted(root.iterdir()) if not f.name.startswith(".") and format_of(f) is not None]
        if not files:
            raise DumpError(
                f"the folder {p} holds no .csv, .parquet or .jsonl file (a dump folder has one file per table)"
            )
    else:
        if format_of(root) is None and link is not None:  # DuckDB would read the target, by its name's format
            raise DumpError(
                f"{p} is a symlink to {root}, which is not a dump file: a link is read as the file it points to, "
                "and that file's name must end in .csv, .parquet or .jsonl (give the dump file itself)"
            )
        if format_of(root) is None:
            raise DumpError(f"{p} is not a dump file: the name must end in .csv, .parquet or .jsonl")
        files = [root]
    formats = sorted({format_of(f) or "" for f in files})
    if len(formats) > 1:
        names = " and ".join(FORMAT_TITLES[f] for f in formats)
        raise DumpError(f"the folder {p} mixes {names} files: keep one format per dump folder (one file per table)")
    tables: dict[str, DumpTable] = {}
    for f in files:
        readable_file(f, "dump")  # a FIFO in the folder would block the read forever
        if not f.is_file():
            raise DumpError(f"{f} is not a regular file (a dump folder holds one file per table)")
        name = f.name[: -len(f.suffix)]
        other = tables.get(name.lower())
        if other is not None:
            raise DumpError(f"{other.path.name} and {f.name} in {p} would both be the table {name!r}: keep one")
        tables[name.lower()] = DumpTable(name, f.resolve(), format_of(f) or "")
    return Dump(root, tuple(sorted(tables.values(), key=lambda t: t.name)))


def file_hashes(dump: Dump) -> list[dict]:
    """``[{"table", "file", "format", "bytes", "sha256"}]`` for each file of ``dump`` (``file`` is its
    name; the manifest records which files a finding or export was computed from). Reads each file once,
    in 1 MiB blocks (bounded memory). Raises ``OSError`` when a file cannot be read."""
    out = []
    for t in dump.tables:
        h = hashlib.sha256()
        size = 0
        with open(t.path, "rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)
                size += len(block)
        out.append({"table": t.name, "file": t.path.name, "format": t.format, "bytes": size, "sha256": h.hexdigest()})
    return out


def _register() -> None:
    # SQLAlchemy finds the dialect by name (duckdb+idemview_dump://) without importing DuckDB now.
    from sqlalchemy.dialects import registry

    registry.register("duckdb.idemview_dump", "idemview.ledger.dump_engine", "DumpDialect")


_register()
