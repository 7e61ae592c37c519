"""Effect records: the downstream rows that prove a side effect happened (DESIGN §4 ``[effects]``, §5).

An :class:`EffectSource` binds a layout's :class:`~idemview.layouts.layout.EffectsSpec` to a read-only
engine — the ledger's own database (reconciliation then runs as SQL joins) or another one (a saved
connection, a URL or a SQLite file; both sides are then streamed in link order and merged with bounded
memory, see :mod:`idemview.findings.effects`). Nothing is ever written to either database.

Links are compared as exact text on both sides: integer foreign keys are cast to text, MySQL/MariaDB
compare binary strings (their default collations would merge ``Ch_1`` and ``ch_1``), and ordering for
the merge is byte order on every engine (PostgreSQL ``COLLATE "C"``, MySQL binary, SQLite's default),
which is also Python's ``str`` order for UTF-8 text.
"""

from __future__ import annotations

import heapq
import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from itertools import chain, islice
from pathlib import Path
from typing import Any

from sqlalchemy import (
    LargeBinary,
    String,
    Text,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal,
    literal_column,
    select,
    true,
    type_coerce,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.cursor import BufferedRowCursorFetchStrategy
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement, Select
from sqlalchemy.types import TypeDecorator

from idemview.domain.model import EffectRecord
from idemview.layouts.layout import EffectsSpec, LayoutError
from idemview.ledger.dialects import family
from idemview.ledger.rawtext import LedgerText, RawText, decode_text
from idemview.ledger.sqlx import as_text, epoch_seconds, exact_text
from idemview.ledger.times import from_epoch

#: Links per query when effect records are read for a set of operations.
LINK_BATCH = 500
#: Rows per fetch of the merge's link streams (plain driver tuples: a few MB per fetch).
STREAM_BATCH = 50_000
#: Chunks a database server's link stream is fetched ahead of the merge (:class:`StartedStream`).
READ_AHEAD = 2
#: SQLite page cache (KiB) for a sequential pass (:func:`sequential_pass`).
SEQUENTIAL_CACHE_KB = 16384


class _ByteOrder(FunctionElement):
    """An expression to ORDER BY in byte order (the merge compares with Python's ``str`` order)."""

    type = String()
    inherit_cache = True
    name = "byte_order"


@compiles(_ByteOrder)
def _byte_order_default(el, compiler, **kw):
    (arg,) = list(el.clauses)
    return compiler.process(arg, **kw)


@compiles(_ByteOrder, "sqlite")
def _byte_order_sqlite(el, compiler, **kw):
    # a column declared NOCASE or RTRIM would group and sort loosely; BINARY is memcmp (an index on a
    # BINARY column still serves it)
    (arg,) = list(el.clauses)
    return f"{compiler.process(arg, **kw)} COLLATE BINARY"


@compiles(_ByteOrder, "postgresql")
def _byte_order_pg(el, compiler, **kw):
    # the database's collation (often en_US) sorts 'a' < 'B'; "C" sorts by bytes
    (arg,) = list(el.clauses)
    return f'({compiler.process(arg, **kw)}) COLLATE "C"'


def byte_order(expr: ColumnElement) -> ColumnElement:
    """``expr`` for ``ORDER BY`` (and ``GROUP BY``) in byte order on every engine: PostgreSQL
    ``COLLATE "C"``, SQLite ``COLLATE BINARY``; MySQL links are already binary strings."""
    return _ByteOrder(expr)


def link_bytes(v: Any) -> bytes:
    """A link as the UTF-8 bytes the merge compares (byte order = the databases' ``ORDER BY``
    :func:`byte_order`): a :class:`~idemview.ledger.rawtext.RawText` as its stored bytes."""
    if isinstance(v, bytes):
        return v
    if isinstance(v, RawText):
        return v.raw
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return str(v).encode("utf-8")  # a number kept in a text column (SQLite's dynamic typing)


def links_as_bytes(values: list) -> list:
    """:func:`link_bytes` of each of ``values``, without a Python call per value when they all have
    one type already (bytes: as they are; str: ``encode``)."""
    types = set(map(type, values))
    if types == {bytes} or not types:
        return values
    if types == {str}:
        return list(map(str.encode, values))  # UTF-8, strict: as link_bytes
    return [link_bytes(v) for v in values]


def link_from_bytes(b: bytes) -> str:
    """The link ``b`` as the ``str`` the other queries bind (a RawText when it is not UTF-8)."""
    return decode_text(b)


@contextmanager
def sequential_pass(c: Connection, text_as_bytes: bool = False) -> Iterator[None]:
    """For one sequential pass over a table on ``c``: on SQLite, the memory map and the large page
    cache set for interactive reads (:mod:`idemview.ledger.connect`) are turned off — they would only
    fill RSS with pages read once — and sorts larger than the small cache spill to temporary files
    instead of memory (``temp_store``); ``text_as_bytes``: text cells arrive as their stored bytes
    (``text_factory = bytes``, no decoding). Everything is restored afterwards. Other engines: as is."""
    if c.dialect.name != "sqlite":
        yield
        return
    raw: Any = c.connection.dbapi_connection
    old: dict[str, Any] = {
        p: c.exec_driver_sql(f"PRAGMA {p}").scalar() for p in ("mmap_size", "cache_size", "temp_store")
    }
    old_factory = raw.text_factory
    c.exec_driver_sql("PRAGMA mmap_size = 0")
    c.exec_driver_sql(f"PRAGMA cache_size = -{SEQUENTIAL_CACHE_KB}")
    # a memory database (a snapshot) keeps its sorts in memory: a file would put its keys on the disk
    if any(r[1] == "main" and r[2] for r in c.exec_driver_sql("PRAGMA database_list")):
        c.exec_driver_sql("PRAGMA temp_store = FILE")
    if text_as_bytes:
        raw.text_factory = bytes
    try:
        yield
    finally:
        raw.text_factory = old_factory
        for p, v in old.items():
            try:
                c.exec_driver_sql(f"PRAGMA {p} = {int(v)}")
            except Exception:  # noqa: BLE001 - a failed restore only costs speed on this connection
                pass


def stream_raw(engine: Engine, q: Select, batch: int | None = None) -> Iterator[Sequence[Any]]:
    """The rows of ``q`` as the driver's plain tuples, ``batch`` rows per list (default
    :data:`STREAM_BATCH`), for one sequential pass.

    PostgreSQL and MySQL/MariaDB: a server-side cursor, ``batch`` rows per round trip, no SQLAlchemy
    ``Row`` per row. SQLite: text cells arrive as their stored bytes (the merge compares bytes) and
    the pass runs under :func:`sequential_pass`."""
    batch = batch or STREAM_BATCH
    with engine.connect() as c, sequential_pass(c, text_as_bytes=True):
        res = c.execution_options(stream_results=True, max_row_buffer=batch).execute(q)
        yield from _fetch(res, batch)


def _fetch(res: Any, batch: int) -> Iterator[Sequence[Any]]:
    """The rows of a streamed result as the driver's plain tuples, ``batch`` per list; closes it."""
    # A server-side result keeps its first row(s) in a buffer, unprocessed: take them first. The
    # buffer is SQLAlchemy's own attribute (2.0/2.1); should a release rename it, the rows are read
    # through the public, slower partitions() instead of being skipped.
    strategy = res.cursor_strategy
    if isinstance(strategy, BufferedRowCursorFetchStrategy):
        buffered = getattr(strategy, "_rowbuffer", None)
        if buffered is None:
            for part in res.partitions(batch):
                yield [tuple(r) for r in part]
            res.close()
            return
        if buffered:
            yield list(buffered)
            buffered.clear()
    cur = res.cursor
    while True:
        rows = cur.fetchmany(batch)
        if not rows:
            break
        yield rows
    res.close()


@contextmanager
def binary_results(c: Connection, binary: bool = True) -> Iterator[None]:
    """On PostgreSQL through psycopg 3: the server-side cursors ``c`` opens meanwhile fetch their rows
    in PostgreSQL's binary format (``bytea`` arrives as ``bytes``, integers unparsed from text: about a
    third less client CPU for the merge's million links). Other engines and drivers: as is."""
    raw: Any = c.connection.dbapi_connection if binary and family(c.engine) == "postgresql" else None
    factory = getattr(raw, "server_cursor_factory", None)
    if factory is None:
        yield
        return
    from psycopg import ServerCursor
    from psycopg.pq import Format

    class _BinaryServerCursor(factory):  # type: ignore[misc,valid-type]
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            self.format = Format.BINARY

    if not issubclass(factory, ServerCursor):  # a driver's own factory: left alone
        yield
        return
    raw.server_cursor_factory = _BinaryServerCursor
    try:
        yield
    finally:
        raw.server_cursor_factory = factory


class StartedStream:
    """:func:`stream_raw` of ``q`` whose statement starts now: a background thread opens the connection
    and executes it — the database's sort runs then (PostgreSQL's in its server, SQLite's inside one
    ``sqlite3_step`` in C, the GIL released both ways) — while the caller goes on with other work;
    iterating (in the caller's thread) then yields the sorted rows, ``batch`` per list.

    ``read_ahead`` 0: the thread does nothing but the execution and the caller fetches, so no GIL is
    contended while rows are converted (a thread reading ahead from SQLite would make every
    ``sqlite3_step`` of the other stream wait for the GIL). ``read_ahead`` n (for a database server):
    the thread goes on fetching, at most n chunks ahead of the caller (a bounded queue), so that the
    server produces the next rows — the end of its sort, its grouping — while the caller merges the
    last ones instead of both waiting in turn on each fetch.

    ``in_thread`` False, or an engine whose pool gives each thread its own connection (SQLite
    ``:memory:``) or shares one: executed at once in the caller's thread, no reading ahead. An exception
    from the thread is raised in the caller's iteration. :meth:`close` (also after a full iteration, or
    on leaving it early) stops the thread, waits for it and returns the connection."""

    def __init__(
        self,
        engine: Engine,
        q: Select,
        batch: int | None = None,
        in_thread: bool = True,
        binary: bool = False,
        read_ahead: int = 0,
    ):
        self._binary = binary
        self._stack = ExitStack()
        self._res: Any = None
        self._exc: BaseException | None = None
        self._batch = batch or STREAM_BATCH
        self._t: threading.Thread | None = None
        self._ahead: queue.Queue | None = None
        self._stop = threading.Event()
        if in_thread and threads_allowed(engine):
            if read_ahead > 0:
                self._ahead = queue.Queue(maxsize=read_ahead)
            self._t = threading.Thread(target=self._run, args=(engine, q), name="idemview-stream", daemon=True)
            self._t.start()
        else:
            self._start(engine, q)

    def _start(self, engine: Engine, q: Select) -> None:
        try:
            c = self._stack.enter_context(engine.connect())
            self._stack.enter_context(sequential_pass(c, text_as_bytes=True))
            with binary_results(c, self._binary):
                self._res = c.execution_options(stream_results=True, max_row_buffer=self._batch).execute(q)
        except BaseException as e:  # noqa: BLE001 - raised in the consumer's thread
            self._exc = e

    def _run(self, engine: Engine, q: Select) -> None:
        self._start(engine, q)
        ahead = self._ahead
        if ahead is None:
            return
        try:
            if self._exc is None:
                for chunk in _fetch(self._res, self._batch):
                    if not self._put(chunk):
                        return
        except BaseException as e:  # noqa: BLE001 - raised in the consumer's thread
            self._exc = e
        self._put(_END)

    def _put(self, item: Any) -> bool:
        """Queue ``item`` for the caller unless it stopped reading (then False)."""
        assert self._ahead is not None
        while not self._stop.is_set():
            try:
                self._ahead.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[Sequence[Any]]:
        try:
            if self._ahead is not None:
                while (chunk := self._ahead.get()) is not _END:
                    yield chunk
                if self._exc is not None:
                    raise self._exc
                return
            if self._t is not None:
                self._t.join()
            if self._exc is not None:
                raise self._exc
            yield from _fetch(self._res, self._batch)
        finally:
            self.close()

    def close(self) -> None:
        """Stop reading ahead, wait for the thread, close the result and return the connection
        (idempotent)."""
        self._stop.set()
        if self._t is not None:
            self._t.join()
        if self._res is not None:
            self._res.close()
            self._res = None
        self._stack.close()


#: The end of a :class:`StartedStream`'s read-ahead queue.
_END = object()


class IndexOrderedStream:
    """The rows of ``select(*cols).where(link IS NOT NULL)`` from ``table`` in byte order of ``link``
    (the merge's order) as chunks of driver tuples, read in an order an index *serves*: no sort in the
    database. Built by :meth:`open`, which returns ``None`` when no index serves it (the caller then lets
    the database sort: :class:`StartedStream`).

    SQLite only (its planner says whether an ORDER BY needs a temporary B-tree: ``EXPLAIN QUERY
    PLAN``): either the whole ordered statement is served (an index on the link alone), or — the
    reference schema's ``(scope, key)`` index — one statement per scope, ``WHERE scope = ? ORDER BY
    link``, each an index range in byte order, merged in Python (:func:`heapq.merge`; one statement
    alone needs no merge). Scopes are enumerated by seeks on that index (``scope > ?`` ``LIMIT 1``), at
    most :data:`MAX_SCOPE_STREAMS`; a NULL scope is a stream of its own. Memory: one fetch of
    ``batch`` rows split between the scope statements.

    Iterating yields the chunks; :meth:`close` (also after a full iteration) closes the statements
    and returns the connection. :attr:`groups`: the conditions of the scope statements (empty when one
    statement reads the whole table in order), by which the caller can look rows up through the same
    index (``group AND link IN (...)``)."""

    def __init__(self, stack: ExitStack, results: list, batch: int, groups: list):
        self._stack, self._results, self._batch = stack, results, batch
        self.groups = groups

    @classmethod
    def open(
        cls,
        engine: Engine,
        table,
        cols: list,
        link: ColumnElement,
        scope: tuple[ColumnElement, Any] | None,
        batch: int | None = None,
    ) -> IndexOrderedStream | None:
        """An :class:`IndexOrderedStream`, or None (another engine than SQLite, or no index serves the
        order: the planner would sort, or there are more than :data:`MAX_SCOPE_STREAMS` scopes).
        ``scope``: the scope as compared (exact text) and the one table column it is, or None."""
        if family(engine) != "sqlite" or not threads_allowed(engine):
            return None
        batch = batch or STREAM_BATCH
        stack = ExitStack()
        try:
            c = stack.enter_context(engine.connect())
            stack.enter_context(sequential_pass(c, text_as_bytes=True))
            base = select(*cols).select_from(table).where(link.is_not(None))
            whole = base.order_by(byte_order(link))
            groups: list = []
            if _served(c, whole):
                qs = [whole]
            else:
                found = _scope_groups(c, table, *scope) if scope is not None else None
                if found is None:
                    stack.close()
                    return None
                groups = found
                qs = [base.where(g).order_by(byte_order(link)) for g in groups]
                if not all(_served(c, q) for q in qs[:1] + qs[-1:]):  # the NULL scope's, if any, is last
                    stack.close()
                    return None
            per = max(1000, batch // max(1, len(qs)))
            opts = {"stream_results": True, "max_row_buffer": per}
            return cls(stack, [c.execution_options(**opts).execute(q) for q in qs], batch, groups)
        except BaseException:
            stack.close()
            raise

    def __iter__(self) -> Iterator[Sequence[Any]]:
        try:
            if len(self._results) == 1:
                yield from _fetch(self._results[0], self._batch)
                return
            per = max(1000, self._batch // len(self._results))
            merged = heapq.merge(*[chain.from_iterable(_fetch(r, per)) for r in self._results])
            while chunk := list(islice(merged, self._batch)):
                yield chunk
        finally:
            self.close()

    def close(self) -> None:
        """Close the statements and return the connection (idempotent)."""
        for r in self._results:
            r.close()
        self._results = []
        self._stack.close()


#: Scopes of a ledger read as one index-ordered statement each (:class:`IndexOrderedStream`); a ledger
#: with more lets the database sort its links.
MAX_SCOPE_STREAMS = 32


def _plan(c: Connection, q: Select) -> list[str]:
    """SQLite's plan of ``q`` (``EXPLAIN QUERY PLAN``: one line per step, upper case); a statement it
    cannot explain this way (e.g. one with expanding IN parameters) counts as sorted."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        comp = q.compile(c)
        args = tuple(None for _ in (comp.positiontup or ()))  # the plan does not depend on the values
        steps = [r[-1] for r in c.exec_driver_sql(f"EXPLAIN QUERY PLAN {comp}", args)]
    except SQLAlchemyError:
        return ["USE TEMP B-TREE (no plan)"]
    return [(d.decode("utf-8", "replace") if isinstance(d, bytes) else str(d)).upper() for d in steps]


def _served(c: Connection, q: Select) -> bool:
    """Whether SQLite runs ``q`` without sorting (no temporary B-tree in its plan)."""
    return not any("TEMP B-TREE" in p for p in _plan(c, q))


def _seeks(c: Connection, q: Select) -> bool:
    """Whether SQLite runs ``q`` as an index search without sorting (``SEARCH``, not a ``SCAN``)."""
    plan = _plan(c, q)
    return any(p.startswith("SEARCH") for p in plan) and not any("TEMP B-TREE" in p for p in plan)


def _scope_groups(c: Connection, table, scope: ColumnElement, column) -> list | None:
    """``scope = ?`` for each distinct scope (and ``column IS NULL`` last, when the column allows NULL
    and a record has none), found by index seeks; None when the seeks are not served by an index or
    there are more than :data:`MAX_SCOPE_STREAMS` scopes. Scopes are bound as the stored bytes they
    were read as (on a ``text_as_bytes`` connection): ``CAST(? AS TEXT)`` of them is the exact stored
    text."""
    first = select(scope).select_from(table).where(scope.is_not(None)).order_by(byte_order(scope)).limit(1)
    after = bindparam("after", type_=scope.type)
    nxt = select(scope).select_from(table).where(scope > after).order_by(byte_order(scope)).limit(1)
    null = select(literal(1)).select_from(table).where(column.is_(None)).limit(1)
    if not (_served(c, first) and _seeks(c, nxt) and (not column.nullable or _seeks(c, null))):
        return None
    found: list = []
    v = c.execute(first).scalar()
    while v is not None:
        found.append(v)
        if len(found) > MAX_SCOPE_STREAMS:
            return None
        v = c.execute(nxt, {"after": v}).scalar()
    groups = [scope == bindparam(f"scope_{i}", v, type_=scope.type) for i, v in enumerate(found)]
    if column.nullable and c.execute(null).first() is not None:
        groups.append(column.is_(None))
    return groups


def threads_allowed(engine: Engine) -> bool:
    """Whether another thread may read through ``engine``: not with a pool that hands each thread its
    own connection (SQLite ``:memory:``: another thread would see an empty database) or shares one."""
    from sqlalchemy.pool import SingletonThreadPool, StaticPool

    return not isinstance(engine.pool, (SingletonThreadPool, StaticPool))


def link_text(col, dialect: str) -> ColumnElement:
    """A link column as text compared exactly on ``dialect`` (see the module docstring)."""
    typ = col.type
    if isinstance(typ, TypeDecorator):  # LedgerText (SQLite text columns as reflected) and the like
        typ = typ.impl_instance
    # a text column stays as it is: a CAST would hide it from its index (lookups, the merge's order)
    t = col if isinstance(typ, String) else as_text(col)
    if dialect in ("mysql", "mariadb"):
        return exact_text(t)
    if dialect == "sqlite":
        # a column declared NOCASE or RTRIM would compare loosely (as the ledger's keys, reader._exact)
        return type_coerce(t.collate("BINARY"), LedgerText())
    return t


def _looks_like_path(connection: str) -> bool:
    return "/" in connection or "\\" in connection or connection.endswith((".db", ".sqlite", ".sqlite3"))


def open_effects_engine(connection: str, base: str | Path | None = None) -> Engine:
    """Open a layout's ``[effects] connection`` read-only: a saved connection's name (password from the
    keyring), a server URL, or a SQLite file — a path or ``sqlite:///`` URL, resolved against ``base``
    (the layout file's folder) and confined to it (:func:`idemview.paths.confined`: a layout is shared
    data and may not make idemview read another application's files, issue #19 item 3). Every engine is
    made by :func:`~idemview.ledger.connect.open_engine` (its option allow-list applies).

    A server URL is taken only from a layout built in code (``base`` None: the caller's own argument);
    written in a layout file it is :class:`~idemview.paths.ServerInLayout` before anything connects.

    Raises :class:`~idemview.ledger.connect.ConnectError` when it cannot be opened,
    :class:`~idemview.paths.PathOutsideLayout` for a path outside the layout's folder,
    :class:`~idemview.ledger.driver_options.ConnectionOptionRefused` for a refused URL option."""
    from idemview.config import ConnectionStore, CredentialStore
    from idemview.ledger.connect import ConnectError, open_engine, parse_url
    from idemview.paths import confined

    if "://" not in connection:
        saved = None if _looks_like_path(connection) else ConnectionStore().find(connection)
        if saved is not None:  # the user's own saved connection: may name any database
            return open_engine(saved.url(CredentialStore().get(saved.id)))
        p = confined(connection, base, "effects connection")
        if p.exists():
            return open_engine(parse_url(str(p)))
        raise ConnectError(f"effects connection {connection!r} is neither a URL, a SQLite file, nor a saved connection")
    u = parse_url(connection)
    if u.get_backend_name() == "sqlite":
        u = u.set(database=str(confined(u.database or "", base, "effects connection")))
    elif base is not None:  # written in a layout file: shared data may not choose a server
        from idemview.ledger.connect import safe_url
        from idemview.paths import ServerInLayout

        raise ServerInLayout(
            f"the layout's [effects] connection names a database server ({safe_url(u)}): a layout file may "
            "name a SQLite file in its folder or a saved connection; save that server as a connection and "
            "write its name in the layout"
        )
    return open_engine(u)


class EffectSource:
    """The effect table of ``ledger``'s layout, read through ``engine`` (default: the ledger's own).

    Columns of every select: ``link`` (text), and where declared ``record_id``, ``reference``, ``at_e``
    (epoch seconds) and the ``show`` columns. Raises :class:`LayoutError` (``missing`` set) when the
    table or a column is absent; a link column of the operations table that is missing likewise."""

    def __init__(self, ledger, engine: Engine | None = None):
        spec: EffectsSpec | None = ledger.layout.effects
        if spec is None:
            raise LayoutError(f"layout {ledger.layout.name!r} has no [effects] section")
        self.spec = spec
        self.ledger = ledger
        self.engine = engine if engine is not None else ledger.engine
        self.same_database = self.engine is ledger.engine
        schema = spec.schema if spec.schema is not None else (ledger.layout.schema if self.same_database else None)
        self.table = ledger.reflect(schema, spec.table, spec.columns(), "effects", engine=self.engine)
        t = self.table
        fx_dialect = family(self.engine)  # MySQL and MariaDB under either name
        self.link = link_text(t.c[spec.link_effect], fx_dialect)
        self.where = and_(*[ledger.predicate(t, p) for p in spec.where]) if spec.where else true()
        self.record_id = t.c[spec.id] if spec.id else None
        self.reference = link_text(t.c[spec.reference], fx_dialect) if spec.reference else None
        self.at_e = epoch_seconds(t.c[spec.time.column], spec.time, fx_dialect) if spec.time else None
        # Grouping every record with its time: on SQLite an expression the link's index cannot serve, so
        # that the table is read in storage order and grouped in a temporary B-tree — through the index
        # each record's time would be one more random probe of the table (3.6 s instead of ~1 s at 1M).
        # Lookups (IN lists) and the merge's count-only pass keep ``link``, which the index serves.
        self._group_link = (
            as_text(t.c[spec.link_effect]).collate("BINARY")
            if fx_dialect == "sqlite" and self.at_e is not None
            else self.link
        )
        self.operation_link = self._operation_link()

    def _operation_link(self) -> ColumnElement:
        """The operations-side expression the effect link is compared with."""
        lo, led = self.spec.link_operation, self.ledger
        if lo == "key":
            return led.key_expr
        if lo == "effect_ref":
            if "effect_ref" not in led.layout.fields:
                raise LayoutError(
                    f"layout {led.layout.name!r}: [effects] links on effect_ref, which [operations.fields] does not map"
                )
            return led.effect_expr
        cols = {c.key: c for c in led.ops.c}
        col = cols[lo] if lo in cols else next((c for k, c in cols.items() if k.lower() == lo.lower()), None)
        if col is None:
            raise LayoutError(
                f"layout {led.layout.name!r}: [effects] links on operations column {lo!r}, "
                f"which table {led.ops.name} lacks",
                [f"column {led.ops.name}.{lo}"],
            )
        return link_text(col, led.dialect)

    # ------------------------------------------------------------------------------------ selects

    def _columns(self) -> list[ColumnElement]:
        cols: list[ColumnElement] = [self.link.label("link")]
        if self.record_id is not None:
            cols.append(self.record_id.label("record_id"))
        if self.reference is not None:
            cols.append(self.reference.label("reference"))
        if self.at_e is not None:
            cols.append(self.at_e.label("at_e"))
        cols += [self.table.c[c].label(f"show_{i}") for i, c in enumerate(self.spec.show)]
        return cols

    def records_select(self) -> Select:
        """Every effect record (the layout's ``where`` applied; NULL links left out)."""
        return select(*self._columns()).select_from(self.table).where(self.where, self.link.is_not(None))

    def grouped_select(self, since_e: float | None = None, recent_since_e: float | None = None) -> Select:
        """One row per link: ``link, n`` (records) and ``first_e`` (earliest time, when declared).
        ``since_e``: only records at or after that epoch second. ``recent_since_e``: also ``n_recent``,
        the records at or after it (records older than the ledger's retention may belong to operations
        already purged from it)."""
        link = self._group_link
        cols = [link.label("link"), func.count().label("n")]
        if self.at_e is not None:
            cols.append(func.min(self.at_e).label("first_e"))
            if recent_since_e is not None:
                cols.append(func.sum(case((self.at_e >= recent_since_e, 1), else_=0)).label("n_recent"))
        q = select(*cols).select_from(self.table).where(self.where, link.is_not(None))
        if since_e is not None and self.at_e is not None:
            q = q.where(self.at_e >= since_e)
        return q.group_by(link)

    def _record(self, r) -> EffectRecord:
        m = r._mapping
        return EffectRecord(
            link=m["link"],
            record_id=m.get("record_id"),
            reference=m.get("reference"),
            at=from_epoch(m["at_e"]) if m.get("at_e") is not None else None,
            shown={c: m[f"show_{i}"] for i, c in enumerate(self.spec.show)},
        )

    def records_for(
        self,
        links: Iterable[str],
        limit_per_link: int | None = None,
        earliest: dict | None = None,
        counts: dict | None = None,
    ) -> dict[str, list[EffectRecord]]:
        """Effect records by link for ``links`` (queried in batches of :data:`LINK_BATCH`, each an
        ``IN`` list the link column's index can serve), ordered by time then identity. Filled, when
        given, over *all* the records of each link (also those past ``limit_per_link``): ``earliest``,
        link -> the earliest time (epoch seconds; links without a timed record are left out);
        ``counts``, link -> the number of records (links without one are left out)."""
        out: dict[str, list[EffectRecord]] = {}
        links = sorted({x for x in links if x is not None})
        with self.engine.connect() as c:
            for i in range(0, len(links), LINK_BATCH):
                batch = links[i : i + LINK_BATCH]
                for r in c.execute(self.records_select().where(self.link.in_(batch))):
                    m = r._mapping
                    if counts is not None:
                        counts[m["link"]] = counts.get(m["link"], 0) + 1
                    at_e = m.get("at_e")
                    if earliest is not None and at_e is not None:
                        seen = earliest.get(m["link"])
                        earliest[m["link"]] = at_e if seen is None or at_e < seen else seen
                    lst = out.setdefault(m["link"], [])
                    if limit_per_link is None or len(lst) < limit_per_link:
                        lst.append(self._record(r))
        for lst in out.values():
            lst.sort(key=lambda e: (e.at is None, e.at or 0, str(e.record_id)))
        return out

    def records_of_operation(self, scope: str, key: str) -> list[EffectRecord]:
        """The effect records of one operation (every record of ``(scope, key)``), for the detail view."""
        led = self.ledger
        with led.engine.connect() as c:
            links = [
                r[0]
                for r in c.execute(
                    select(self.operation_link)
                    .select_from(led.ops)
                    .where(led.scope_expr == scope, led.key_expr == key, self.operation_link.is_not(None))
                    .distinct()
                )
            ]
        recs = self.records_for(links)
        return sorted(
            (e for lst in recs.values() for e in lst), key=lambda e: (e.at is None, e.at or 0, str(e.record_id))
        )

    def stream_links(self, recent_since_e: float | None = None, started: bool = False) -> Iterable[Sequence[Any]]:
        """Per link, in byte order: ``(link, n)`` — and ``n_recent`` (the records at or after
        ``recent_since_e``) when that and a time column are given — as chunks of driver tuples
        (:func:`stream_raw`; links as the driver returns them, see :func:`links_as_bytes`).

        Only what the merge compares: no earliest time (on an index of the link alone that would
        mean a table lookup per record; it is read afterwards for the few links reported). Grouped
        and ordered by the same byte-order expression, so that one sort serves both (PostgreSQL).
        ``started``: a :class:`StartedStream` (the statement runs now, in a thread)."""
        pg = family(self.engine) == "postgresql"
        # PostgreSQL: the link as its UTF-8 bytes (what the merge compares; with binary results no
        # decoding, no encoding back), still grouped and ordered by the text in byte order; as TEXT, so
        # that convert_to's argument is the grouped expression itself (a varchar gets an implicit cast)
        key = byte_order(cast(self.link, Text) if pg else self.link)
        shown = func.convert_to(key, literal_column("'UTF8'"), type_=LargeBinary) if pg else key
        cols = [shown.label("link"), func.count().label("n")]
        if recent_since_e is not None and self.at_e is not None:
            cols.append(func.sum(case((self.at_e >= recent_since_e, 1), else_=0)).label("n_recent"))
        q = select(*cols).select_from(self.table).where(self.where, self.link.is_not(None)).group_by(key).order_by(key)
        if started:
            return StartedStream(self.engine, q, in_thread=True, binary=pg, read_ahead=READ_AHEAD if pg else 0)
        return stream_raw(self.engine, q)

    def describe(self) -> dict:
        """Where the effect records are read from, for manifests and the GUI (never a user name or
        password): ``{"table", "dialect", "host", "database", "same_database"}``."""
        from idemview.ledger.connect import describe

        where = f"{self.spec.schema}.{self.spec.table}" if self.spec.schema else self.spec.table
        return {"table": where, **describe(self.engine), "same_database": self.same_database}
