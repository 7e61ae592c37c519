"""A read-only SQLAlchemy engine over a dump (DESIGN §5.3), through DuckDB and duckdb-engine.

Each pooled connection is an in-memory DuckDB database in which every file of the dump is a view
(``read_parquet`` / ``read_csv`` / ``read_json`` of that one file), so presets, detection and findings
run in SQL, in DuckDB, without loading the dump into memory. What keeps a dump from being written to —
or anything else from being read through it — is set on every connection before SQLAlchemy sees it
(:func:`_new_connection`), and is the whole of the promise for dumps:

- ``allowed_paths`` = the dump's files, then ``enable_external_access = false``: no other file,
  folder, URL or extension can be read or written (``read_csv('/etc/passwd')``, ``ATTACH``,
  ``INSTALL``, ``COPY … TO`` another file, ``EXPORT DATABASE``);
- ``lock_configuration = true``: no ``SET`` can undo the above;
- a statement guard (:class:`ReadOnlyConnection`): one statement per call, of type SELECT only
  (``duckdb.extract_statements``), so ``COPY … TO`` one of the dump's own files, ``CREATE``,
  ``INSERT``, ``PRAGMA``, ``CALL``, ``LOAD`` and ``SET`` are refused before DuckDB runs them; the
  DuckDB connection is reachable only through the guard (it has no other method);
- no Python replacement scans (a ``FROM df`` would read the caller's variables), no extension is
  installed or loaded on demand.

:class:`DumpDialect` is duckdb-engine's dialect with reflection read from DuckDB's own catalog
(``duckdb_columns()``): duckdb-engine 0.17 queries ``pg_catalog.pg_collation``, which DuckDB lacks,
under SQLAlchemy 2.1. Its views are reported as tables (a dump's files *are* its tables). Registered
with SQLAlchemy as ``duckdb+idemview_dump``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

import duckdb
import duckdb_engine
from sqlalchemy import create_engine, text
from sqlalchemy import types as sqltypes
from sqlalchemy.engine import URL, Engine

from idemview.domain import jsontext
from idemview.ledger.dumps import FORMAT_TITLES, Dump, DumpError, DumpTable

DRIVER = "idemview_dump"

_CONFIG = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "python_enable_replacements": False,
}


class StatementRefused(duckdb.PermissionException):
    """A statement other than one SELECT sent to a dump's connection (refused before DuckDB parses it
    further). A DBAPI error, so SQLAlchemy raises it as ``DBAPIError`` like a server's refusal."""


def check_statement(sql: str) -> None:
    """Refuse ``sql`` unless it is exactly one SELECT (``WITH …``, ``FROM x``, ``DESCRIBE`` and ``SHOW``
    parse as SELECT in DuckDB and read only). Raises :class:`StatementRefused`."""
    try:
        stmts = duckdb.extract_statements(sql)
    except duckdb.Error:
        raise StatementRefused("a dump is read-only: the statement could not be parsed, so it is not run") from None
    if len(stmts) != 1 or stmts[0].type != duckdb.StatementType.SELECT:
        kinds = ", ".join(sorted({s.type.name for s in stmts})) or "none"
        raise StatementRefused(f"a dump is read-only: only one SELECT may run on it (got {kinds})")


class ReadOnlyConnection:
    """The only handle on a dump's DuckDB connection: ``execute`` runs one SELECT (see
    :func:`check_statement`) under the statement time limit; fetching, ``interrupt``, ``close`` and the
    no-op transaction calls are passed on; nothing else exists (no ``register``, ``sql``, ``query``,
    ``read_csv``, ``install_extension``…). ``_idem_deadline`` is ``[seconds or None]``, set per use by
    :func:`idemview.ledger.connect._apply_timeout`."""

    __slots__ = ("_c", "_idem_deadline")

    def __init__(self, conn: duckdb.DuckDBPyConnection, timeout_s: float | None) -> None:
        self._c = conn
        self._idem_deadline: list[float | None] = [timeout_s]

    def execute(self, sql: str, parameters: Any = None) -> ReadOnlyConnection:
        check_statement(sql)
        limit = self._idem_deadline[0]
        timer = threading.Timer(limit, self._c.interrupt) if limit else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            if parameters is None:
                self._c.execute(sql)
            else:
                self._c.execute(sql, parameters)
        finally:
            if timer is not None:
                timer.cancel()
        return self

    def executemany(self, sql: str, parameters: Any = None) -> None:
        raise StatementRefused("a dump is read-only: executemany is not allowed")

    def fetchone(self):
        return self._c.fetchone()

    def fetchmany(self, size: int = 1):
        return self._c.fetchmany(size)

    def fetchall(self):
        return self._c.fetchall()

    @property
    def description(self):
        return self._c.description

    @property
    def rowcount(self) -> int:
        return -1

    def interrupt(self) -> None:
        self._c.interrupt()

    def close(self) -> None:
        self._c.close()

    def commit(self) -> None:  # nothing is ever written: the transaction calls end a read
        self._c.commit()

    def rollback(self) -> None:
        try:
            self._c.rollback()
        except duckdb.TransactionException:
            pass

    def begin(self) -> None:
        self._c.begin()


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _ident(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


#: Nested DuckDB types (what read_json infers for objects and arrays): read as JSON text instead, so
#: a layout's JSON paths work on them as on any engine's JSON column.
_NESTED = re.compile(r"^(STRUCT|MAP|UNION)\(|\[\d*\]$")


def _reader(t: DumpTable, conn: duckdb.DuckDBPyConnection) -> str:
    """The table function that reads ``t`` (its arguments are the file's literal path and fixed
    options, never a user's text)."""
    p = _lit(str(t.path))
    if t.format == "parquet":
        return f"read_parquet({p})"
    if t.format == "csv":
        # RFC 4180 as the dump tools write it (psql \copy CSV HEADER, mysqldump --tab, pandas, DuckDB):
        # comma, double quote, a header row; strict, so a row with too many fields is an error, not a
        # silently re-guessed dialect; skip=0, or the sniffer would skip malformed leading rows and take
        # a later row as the header. Column types are sniffed (timestamps, integers).
        return f"read_csv({p}, delim=',', quote='\"', escape='\"', header=true, strict_mode=true, skip=0)"
    auto = f"read_json({p}, format='newline_delimited')"
    cols = conn.execute(f"DESCRIBE SELECT * FROM {auto}").fetchall()
    spec = ", ".join(f"{_lit(c[0])}: {_lit('JSON' if _NESTED.search(c[1]) else c[1])}" for c in cols)
    return f"read_json({p}, format='newline_delimited', columns={{{spec}}})"


_HINTS = {
    "csv": "a dump CSV has a header row and as many comma-separated fields in every row",
    "parquet": "export the table again (the file is cut short or is not Parquet)",
    "jsonl": "a JSON Lines dump has one JSON object per line",
}


def _first_line(e: BaseException) -> str:
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    msg = lines[0] if lines else type(e).__name__
    return re.sub(r"^[A-Za-z ]+ Error: ", "", msg)[:300]


def _new_connection(dump: Dump, timeout_s: float | None, validate: bool = False) -> ReadOnlyConnection:
    """A fresh in-memory DuckDB connection with one view per table of ``dump``, locked read-only (see
    the module docstring), behind :class:`ReadOnlyConnection`. With ``validate`` every CSV and JSON
    Lines file is parsed once (``count(*)``) so that a malformed row is reported now, naming the file.
    Raises :class:`DumpError`."""
    conn = duckdb.connect(":memory:", config=dict(_CONFIG))
    try:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute("SET allowed_paths = $1", [[str(p) for p in dump.files]])
        for t in dump.tables:
            try:
                conn.execute(f"CREATE VIEW {_ident(t.name)} AS SELECT * FROM {_reader(t, conn)}")
                if validate and t.format != "parquet":
                    conn.execute(f"SELECT count(*) FROM {_ident(t.name)}").fetchall()
            except duckdb.Error as e:
                what = FORMAT_TITLES[t.format]
                raise DumpError(
                    f"{t.path} is not a readable {what} file ({_first_line(e)}); {_HINTS[t.format]}"
                ) from None
        conn.execute("SET enable_external_access = false")
        conn.execute("SET lock_configuration = true")
    except BaseException:
        conn.close()
        raise
    return ReadOnlyConnection(conn, timeout_s)


_TYPES: list[tuple[re.Pattern, Callable[[], sqltypes.TypeEngine]]] = [
    (re.compile(r"^(TINYINT|SMALLINT|INTEGER|UTINYINT|USMALLINT)$"), sqltypes.Integer),
    (re.compile(r"^(BIGINT|UINTEGER)$"), sqltypes.BigInteger),
    (re.compile(r"^(UBIGINT|HUGEINT|UHUGEINT|DECIMAL.*)$"), sqltypes.Numeric),
    (re.compile(r"^(DOUBLE|FLOAT|REAL)$"), sqltypes.Float),
    (re.compile(r"^(VARCHAR|TEXT|STRING)$"), sqltypes.String),
    (re.compile(r"^JSON$"), sqltypes.JSON),
    (re.compile(r"^(TIMESTAMP WITH TIME ZONE|TIMESTAMPTZ)$"), lambda: sqltypes.DateTime(timezone=True)),
    (re.compile(r"^(TIMESTAMP|TIMESTAMP_S|TIMESTAMP_MS|TIMESTAMP_NS|DATETIME)$"), sqltypes.DateTime),
    (re.compile(r"^DATE$"), sqltypes.Date),
    (re.compile(r"^TIME$"), sqltypes.Time),
    (re.compile(r"^BLOB$"), sqltypes.LargeBinary),
    (re.compile(r"^BOOLEAN$"), sqltypes.Boolean),
    (re.compile(r"^UUID$"), sqltypes.Uuid),
]


def sql_type(duck_type: str) -> sqltypes.TypeEngine:
    """The SQLAlchemy type for a DuckDB type name (``duckdb_columns().data_type``); ``NullType`` for
    one idemview has no use for (intervals, nested types outside JSON Lines)."""
    for pat, make in _TYPES:
        if pat.match(duck_type):
            return make()
    return sqltypes.NullType()


class DumpDialect(duckdb_engine.Dialect):
    """duckdb-engine's dialect, reflecting from DuckDB's catalog (``duckdb_views()``,
    ``duckdb_tables()``, ``duckdb_columns()``); a dump has no keys, indexes or constraints."""

    driver = DRIVER
    supports_statement_cache = False
    #: The dump this engine reads (set by :func:`open_dump_engine`; the manifest hashes its files).
    dump: Dump | None = None

    def _relations(self, connection, schema: str | None) -> list[str]:
        rows = connection.execute(
            text(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = :s "
                "UNION SELECT table_name FROM duckdb_tables() WHERE NOT internal AND schema_name = :s "
                "ORDER BY 1"
            ),
            {"s": schema or "main"},
        )
        return [r[0] for r in rows]

    def get_table_names(self, connection, schema=None, **kw):
        return self._relations(connection, schema)

    # The signatures are the base dialects' (SQLAlchemy passes scope, kind, include by keyword).
    def get_view_names(self, connection, schema=None, include=None, **kw):
        return []  # the dump's views are its tables (get_table_names)

    def get_materialized_view_names(self, connection, schema=None, **kw):
        return []

    def get_schema_names(self, connection, **kw):
        return ["main"]

    def has_table(self, connection, table_name, schema=None, **kw):
        return table_name in self._relations(connection, schema)

    def _names(self, connection, schema, filter_names) -> list[str]:
        have = self._relations(connection, schema)
        return [n for n in have if filter_names is None or n in set(filter_names)]

    def get_multi_columns(self, connection, schema=None, filter_names=None, scope=None, kind=None, **kw):
        names = self._names(connection, schema, filter_names)
        if not names:
            return []
        rows = connection.execute(
            text(
                "SELECT table_name, column_name, data_type, is_nullable FROM duckdb_columns() "
                "WHERE schema_name = :s ORDER BY table_name, column_index"
            ),
            {"s": schema or "main"},
        )
        out: dict = {(schema, n): [] for n in names}
        for table, col, typ, nullable in rows:
            if (schema, table) in out:
                out[(schema, table)].append(
                    {"name": col, "type": sql_type(typ), "nullable": bool(nullable), "default": None}
                )
        return list(out.items())

    def get_multi_pk_constraint(self, connection, schema=None, filter_names=None, scope=None, kind=None, **kw):
        return self._none(connection, schema, filter_names, lambda: {"constrained_columns": [], "name": None})

    def _none(self, connection, schema, filter_names, value):
        return [((schema, n), value()) for n in self._names(connection, schema, filter_names)]

    def get_multi_foreign_keys(
        self,
        connection,
        schema=None,
        filter_names=None,
        scope=None,
        kind=None,
        postgresql_ignore_search_path=False,
        **kw,
    ):
        return self._none(connection, schema, filter_names, list)

    def get_multi_indexes(self, connection, schema=None, filter_names=None, scope=None, kind=None, **kw):
        return self._none(connection, schema, filter_names, list)

    def get_multi_unique_constraints(self, connection, schema=None, filter_names=None, scope=None, kind=None, **kw):
        return self._none(connection, schema, filter_names, list)

    def get_multi_check_constraints(self, connection, schema=None, filter_names=None, scope=None, kind=None, **kw):
        return self._none(connection, schema, filter_names, list)

    def get_multi_table_comment(self, connection, schema=None, filter_names=None, scope=None, kind=None, **kw):
        return self._none(connection, schema, filter_names, lambda: {"text": None})

    def get_multi_table_options(self, connection, schema=None, filter_names=None, scope=None, kind=None, **kw):
        return self._none(connection, schema, filter_names, dict)


def open_dump_engine(dump: Dump, statement_timeout_s: float | None) -> Engine:
    """A read-only SQLAlchemy engine over ``dump`` (see the module docstring). Every file is checked
    once here (a malformed CSV/Parquet/JSON Lines file raises :class:`DumpError` naming it, exit 2);
    each pooled connection then gets its own views. ``statement_timeout_s`` bounds a statement (seconds,
    ``None``: no limit); a statement past it is interrupted."""
    _new_connection(dump, statement_timeout_s, validate=True).close()

    def creator():
        return duckdb_engine.ConnectionWrapper(_new_connection(dump, statement_timeout_s))  # type: ignore[arg-type]

    url = URL.create(f"duckdb+{DRIVER}", database=str(dump.root))
    engine = create_engine(url, creator=creator, json_deserializer=jsontext.loads_or_text, pool_pre_ping=True)
    engine.dialect.dump = dump  # type: ignore[attr-defined]  # which files (and hashes) the manifest names
    return engine
