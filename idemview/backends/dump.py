"""Dump files (DESIGN §5.3, issue 23 item 3): a ``.csv``, ``.parquet``, ``.jsonl``/``.ndjson`` file or a
folder of them, one file per table, read through DuckDB (:mod:`idemview.ledger.dumps`,
:mod:`idemview.ledger.dump_engine`). Opened like a SQL database (every preset and finding runs in SQL),
so it is the SQL backend with its own matching, fields and name; never behind an SSH tunnel (a local
file)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.engine import URL

from idemview.backends.base import Choice, Field, Target
from idemview.backends.sql import SqlBackend
from idemview.errors import InputError

if TYPE_CHECKING:
    from idemview.config import Connection


class DumpBackend(SqlBackend):
    """Dumps: a path :func:`~idemview.ledger.dumps.is_dump_path` accepts, or a ``duckdb:///PATH`` URL
    (what a saved connection stores)."""

    name = "dump"
    title = "Dump file / folder"
    choices = (Choice("Dump file / folder", "duckdb"),)
    network = False
    priority = 10
    # idemview/ledger/dump_engine.py: allowed_paths + enable_external_access=false, lock_configuration,
    # ReadOnlyConnection (one SELECT per statement)
    read_only_note = (
        "Read-only: DuckDB may read only the dump's files (access to other files off, its configuration "
        "locked), and only one SELECT per statement runs."
    )

    def matches(self, target: Target) -> bool:
        from idemview.ledger.dumps import BACKEND, is_dump_path

        if isinstance(target, URL):
            return target.get_backend_name() == BACKEND
        if "://" in target:
            return target.split("://", 1)[0].split("+", 1)[0].lower() == BACKEND
        return is_dump_path(target)

    def owns_dialect(self, dialect: str) -> bool:
        return dialect == "duckdb"

    def target(self, conn: Connection, password: str | None = None) -> Target:
        from idemview.ledger.dumps import BACKEND

        return URL.create(BACKEND, database=conn.database)

    def fields(self, dialect: str) -> tuple[Field, ...]:
        return (
            Field(
                "database",
                "File or folder",
                "path",
                "/path/to/dump.parquet, .csv, .jsonl — or a folder with one file per table",
                help="Read read-only through DuckDB; a folder holds one file per table, all of one format",
                filter="Dumps (*.csv *.parquet *.jsonl *.ndjson);;All files (*)",
            ),
            Field(
                "note", "The files are never written to; the manifest of an export records each file's SHA-256.", "note"
            ),
        )

    def connection_from(self, name: str, text: str) -> tuple[Connection, str | None]:
        from idemview.config import Connection

        return Connection(name=name, dialect="duckdb", database=str(self.url(text).database or "")), None

    def needs_password(self, target: Target) -> bool:
        return False

    def known_dialect(self, u: URL) -> URL:
        return u  # the dump's own dialect, registered by idemview.ledger.dumps when it opens

    def url(self, target: Target) -> URL:
        """The SQL backend's :meth:`~SqlBackend.url`, refusing a dump URL or saved connection that names
        no path (``duckdb://``, an empty field): DuckDB and the dump reader would read it as the working
        directory and open whatever dump lies there. Raises :class:`InputError` (exit 2)."""
        u = super().url(target)
        if not (u.database or "").strip():
            raise InputError(
                "this dump names no file or folder: give a .csv, .parquet or .jsonl file, or a folder of them"
            )
        return u


BACKEND = DumpBackend()
