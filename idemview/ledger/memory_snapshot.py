"""The in-memory SQLite database a snapshot of a key-value store is loaded into (Redis, DynamoDB).

A snapshot reads the records of a store that cannot group, join or compare (Redis, DynamoDB) into
idemview's reference tables (``operations`` + ``attempts``, :mod:`idemview.ledger.reference`) in a
named shared-cache memory database (``file:…?mode=memory&cache=shared``): the values (customer data)
never touch the disk, the GUI's worker threads each get a read-only connection (``PRAGMA query_only`` +
an authorizer denying ATTACH), and the database lives as long as the engine holds its keeper
connection. A large Redis snapshot is *spilled* instead (:func:`new_memory_db` ``spill=True``, issue
27): SQLite's private temporary database, its pages beyond a bounded cache in an unlinked file (the
exposure judgment is in that docstring), one connection shared by the threads behind a lock. This
module is the set-up every snapshot shares, written once:

- :func:`new_memory_db`: the database, no journal, the tables created (the indexes wait for the load);
- :func:`insert_statements`: the ``INSERT`` of both tables for a layout's mapped columns;
- :func:`load_rows`: one batch's rows, bulk first, a failing batch row by row (bad rows counted);
- :func:`finish`: the unique (scope, key) index (SCAN/Scan twins dropped), an optional step that needs
  it (Redis's key joins), the other indexes and ``ANALYZE``;
- :func:`memory_engine`: the read-only SQLAlchemy engine over it;
- :func:`prefetched`: the next batch read on a thread while this one is loaded;
- :func:`loading`: the load's guard (GC paused, the database discarded on an error);
- :class:`MemorySnapshotInfo`: the fields and report logic every snapshot's info shares.
"""

from __future__ import annotations

import gc
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from idemview.ledger.sqlite_functions import connect_sqlite

T = TypeVar("T")

#: What converting one record's values may raise (ValueError covers UnicodeError; ArithmeticError covers
#: OverflowError): that record is unreadable, the snapshot goes on.
CONVERSION_ERRORS = (ValueError, TypeError, ArithmeticError)

#: The memory database's page size in bytes (set before its tables are created).
PAGE_SIZE = 16384

#: The ``attempts`` insert: the attempt row's columns as the compiled mapping yields them.
ATTEMPT_INSERT = (
    "INSERT INTO attempts (id, scope, idempotency_key, attempt_no, started_at, finished_at, "
    "outcome, request_hash, effect_ref, worker, error) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
)


@dataclass(kw_only=True)
class MemorySnapshotInfo:
    """What every snapshot read (the base of Redis's ``SnapshotInfo`` and DynamoDB's
    ``DynamoSnapshotInfo``): ``url`` (no credential), ``layout``; when: ``started_at``/``finished_at``
    on idemview's clock, ``server_time``/``server_time_end`` the server's clock at the start/end (aware
    UTC; the "as of"), ``clock_skew_s`` server - local (seconds), ``clock`` ("server", or "local" when
    the server's clock could not be read); counts: ``scanned`` keys/items read, ``loaded`` records,
    ``not_matching`` ones the layout's key regex rejects, ``undecodable`` ones that could not be read."""

    url: str
    layout: str
    started_at: datetime
    finished_at: datetime | None = None
    server_time: datetime | None = None
    server_time_end: datetime | None = None
    clock_skew_s: float | None = None
    clock: str = "server"
    scanned: int = 0
    loaded: int = 0
    not_matching: int = 0
    undecodable: int = 0

    def set_server_time(self, at: datetime) -> None:
        """Record ``at`` (aware UTC) as the snapshot's "as of" and the skew against the local clock now."""
        self.server_time = at
        self.clock_skew_s = round((at - datetime.now(UTC)).total_seconds(), 3)

    def load(self, keeper: sqlite3.Connection, op_sql: str, att_sql: str, ops: list[tuple], atts: list[tuple]) -> None:
        """:func:`load_rows` of one batch, counted: the rows SQLite took as ``loaded``, the rest
        ``undecodable``."""
        if ops:
            n_bad = load_rows(keeper, op_sql, att_sql, ops, atts)
            self.loaded += len(ops) - n_bad
            self.undecodable += n_bad

    def to_json(self) -> dict:
        """The fields as a JSON-ready dict, the times as ISO 8601 text (:func:`idemview.ledger.times.iso`)."""
        from idemview.ledger.times import iso

        d = asdict(self)
        for k in ("started_at", "finished_at", "server_time", "server_time_end"):
            d[k] = iso(getattr(self, k))
        return d


def snapshot_metadata():
    """The snapshot's tables: the reference ``idemview`` layout's ``operations`` and ``attempts``
    (:func:`idemview.ledger.reference.add_reference_tables`), with ``attempt_count`` nullable (a record
    may lack the count) and a unique (scope, key) index (SCAN may return a key twice)."""
    from sqlalchemy import MetaData

    from idemview.ledger.reference import add_reference_tables

    md = MetaData()
    add_reference_tables(md, snapshot=True)
    return md


def ddl() -> tuple[list[str], list[str]]:
    """(CREATE TABLE statements, CREATE INDEX statements, the unique (scope, key) index first) of
    :func:`snapshot_metadata`; the indexes are built after the bulk load (one sort each instead of a
    B-tree insert per row)."""
    from sqlalchemy.dialects import sqlite as sqlite_dialect
    from sqlalchemy.schema import CreateIndex, CreateTable

    md = snapshot_metadata()
    first: list[str] = []
    later: list[str] = []
    d = sqlite_dialect.dialect()
    for name in ("operations", "attempts"):
        t = md.tables[name]
        first.append(str(CreateTable(t).compile(dialect=d)))
        for ix in sorted(t.indexes, key=lambda ix: (not ix.unique, str(ix.name))):
            later.append(str(CreateIndex(ix).compile(dialect=d)))
    return first, later


def _ro_authorizer(action, arg1, arg2, dbname, source):
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def memory_engine(uri: str, keeper: sqlite3.Connection):
    """A SQLAlchemy engine over the snapshot database ``uri`` (from :func:`new_memory_db`); each pooled
    connection is read-only (``query_only`` + ATTACH denied). The ``keeper`` connection keeps the
    database alive as long as the engine lives.

    A spilled database (``uri == ""``, :func:`new_memory_db` with ``spill=True``) is private to its one
    connection, so every checkout gets that connection (``StaticPool``; an export reads rows on one
    checkout while it looks up on another), behind :class:`_Serialized`: one thread in SQLite at a time.
    It is made read-only here, once loaded; ATTACH is refused by ``SQLITE_LIMIT_ATTACHED = 0`` too."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import QueuePool, StaticPool

    if not uri:
        keeper.execute("PRAGMA query_only = ON")
        keeper.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        keeper.set_authorizer(_ro_authorizer)
        shared = _Serialized(keeper, threading.RLock())
        eng = create_engine("sqlite+pysqlite://", creator=lambda: shared, poolclass=StaticPool)
        eng._idemview_keeper = keeper  # type: ignore[attr-defined]
        return eng

    def creator():
        c = connect_sqlite(uri, uri=True, check_same_thread=False)
        c.execute("PRAGMA query_only = ON")
        c.execute("PRAGMA temp_store = MEMORY")
        c.set_authorizer(_ro_authorizer)
        return c

    # QueuePool, not the SingletonThreadPool SQLAlchemy picks for a memory URL: that one closes a
    # thread's connection when more threads than its size have used it, under a running query.
    eng = create_engine("sqlite+pysqlite://", creator=creator, poolclass=QueuePool, pool_size=4, max_overflow=16)
    eng._idemview_keeper = keeper  # type: ignore[attr-defined]  # lifetime of the memory database
    return eng


#: The page cache of a spilled snapshot database (:func:`new_memory_db` ``spill=True``), in KiB: what
#: of the database stays in the process's memory; the rest is in its unlinked file (the OS's page cache).
SPILL_CACHE_KB = 32768


class _Serialized:
    """A sqlite3 connection or cursor shared by threads, every call made holding one re-entrant lock
    (the same for the connection and its cursors); the cursors it returns are wrapped too, and closed
    and released under the lock.

    Why: SQLite serializes the calls of threads on one connection, but a callback (the ATTACH
    authorizer, a registered SQL function such as SQLAlchemy's ``regexp``) runs holding SQLite's mutex
    and needs the GIL, which another thread may hold while it waits for that mutex: a deadlock, seen
    with twelve threads scanning a spilled snapshot. Here a waiting thread waits for the lock, with the
    GIL released. ``interrupt`` (a cancel from another thread) is the one call made without it: it
    must reach the statement running."""

    __slots__ = ("_obj", "_lock")

    def __init__(self, obj, lock):
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_lock", lock)

    def __getattr__(self, name):
        attr = getattr(self._obj, name)
        if not callable(attr) or name == "interrupt":
            return attr
        lock = self._lock

        def call(*a, **k):
            with lock:
                out = attr(*a, **k)
            if isinstance(out, sqlite3.Cursor):
                return self if out is self._obj else _Serialized(out, lock)
            return out

        return call

    def __setattr__(self, name, value):
        with self._lock:
            setattr(self._obj, name, value)

    def __iter__(self):
        return self

    def __next__(self):
        with self._lock:
            return next(self._obj)

    def __del__(self):
        obj = getattr(self, "_obj", None)
        if isinstance(obj, sqlite3.Cursor):  # its statement reset under the lock, not by the GC anywhere
            with self._lock:
                object.__setattr__(self, "_obj", None)
                del obj


def new_memory_db(name: str, *, spill: bool = False) -> tuple[str, sqlite3.Connection, list[str]]:
    """(URI, keeper connection, index statements, the unique (scope, key) one first) of a fresh
    snapshot database holding the reference tables.

    Default: a shared-cache memory database ``file:idemview-<name>-<uuid>`` that nobody else sees until
    it is complete: no rollback journal, one transaction for the whole load (a cancel or error discards
    it with the keeper); the indexes come after the load (one sort each instead of a B-tree insert per
    row), sorted in memory (``temp_store``: nothing of the values is written to a temporary file).

    ``spill=True`` (URI ``""``; Redis from :data:`~idemview.ledger.redis_kv.mapping.SPILL_MIN_KEYS`
    keys): the memory a snapshot takes is bounded by construction, not by the store's size: SQLite's
    private temporary database (empty file name), whose pages beyond :data:`SPILL_CACHE_KB` of cache
    go to a file SQLite creates 0600 in its temporary directory and **unlinks at once** (no name
    anyone can open; the space is freed when the connection closes or the process ends, killed too),
    as do the index sorts and the scan's GROUP BY B-trees (``temp_store`` = FILE: the same kind of
    unlinked file). The exposure judgment: the values are not masked in it (the findings read them
    raw, as from the store); they are in the page cache and may reach the disk blocks of the
    temporary directory while the process runs, readable by root or someone who can read this
    process's memory anyway, never by a path; the same as swap for the memory database. One
    connection only (the database is private to it): :func:`memory_engine` shares it."""
    if spill:
        uri = ""
        keeper = connect_sqlite("", check_same_thread=False)
    else:
        uri = f"file:idemview-{name}-{uuid.uuid4().hex}?mode=memory&cache=shared"
        keeper = connect_sqlite(uri, uri=True, check_same_thread=False)
    # 16 KiB pages, not 4 KiB: every page of a memory database is held with its cache header (~250
    # bytes) and a partly filled tail; a 1M-key Redis snapshot's RSS fell by ~6 % (docs/benchmarks-history.md)
    keeper.execute(f"PRAGMA page_size = {PAGE_SIZE}")
    if spill:  # after page_size: SQLite forgets a cache size set before the page size changes
        keeper.execute(f"PRAGMA cache_size = -{SPILL_CACHE_KB}")
    keeper.execute("PRAGMA journal_mode = OFF")
    keeper.execute("PRAGMA synchronous = OFF")
    # Temporary data in memory too: with SQLite's default (files), building an index of more than
    # cache_size (2 MB) of keys sorts it in runs written to deleted files in /var/tmp (seen at 200k
    # Redis keys: 7 files, one per index), so keys and times touched the disk. In memory the sort
    # costs a little more CPU (no merge of runs; ~+0.3 s at 200k keys) and no disk. A spilled
    # database is in such a file already: its sorts too (bounded memory).
    keeper.execute(f"PRAGMA temp_store = {'FILE' if spill else 'MEMORY'}")
    tables, indexes = ddl()
    for stmt in tables:
        keeper.execute(stmt)
    return uri, keeper, indexes


def insert_statements(columns: Iterable[str]) -> tuple[str, str]:
    """(``operations`` insert, ``attempts`` insert) for the rows a snapshot's mapper yields: ``id,
    scope, idempotency_key, kind, status, expires_at`` and then ``columns`` (a compiled layout's mapped
    columns; the columns it does not map stay NULL)."""
    cols = ("id", "scope", "idempotency_key", "kind", "status", "expires_at", *columns)
    op_sql = f"INSERT INTO operations ({', '.join(cols)}) VALUES ({','.join('?' * len(cols))})"
    return op_sql, ATTEMPT_INSERT


def finish(keeper: sqlite3.Connection, indexes: list[str], between: Callable[[], Any] | None = None) -> int:
    """Build the indexes and statistics after the load; returns how many records were dropped because
    an earlier one had the same (scope, key).

    A SCAN (Redis) may return a key twice: the first read (the lower id) is kept, the twin and its
    attempt dropped. The unique (scope, key) index ``indexes[0]`` is built in a statement of its own,
    with a journal, so that a twin fails it cleanly. ``between()`` runs once it exists and before the
    other indexes (Redis's key joins rely on it). Statistics (``ANALYZE``) let SQLite pick the key and
    intent indexes over the status index in the findings' anti-joins (without them
    unresolved_failure took 27 s on 100k keys, not 0.1 s)."""
    keeper.commit()
    keeper.execute("PRAGMA journal_mode = MEMORY")
    dropped = 0
    try:
        keeper.execute(indexes[0])
    except sqlite3.IntegrityError:
        cur = keeper.execute(
            "DELETE FROM operations WHERE id NOT IN (SELECT min(id) FROM operations GROUP BY scope, idempotency_key)"
        )
        dropped = cur.rowcount
        keeper.execute("DELETE FROM attempts WHERE id NOT IN (SELECT id FROM operations)")
        keeper.execute(indexes[0])
    if between is not None:
        between()
    for stmt in indexes[1:]:
        keeper.execute(stmt)
    keeper.execute("ANALYZE")
    keeper.commit()
    return dropped


def load_rows(keeper: sqlite3.Connection, op_sql: str, att_sql: str, ops: list[tuple], atts: list[tuple]) -> int:
    """Insert one batch's ``operations`` and ``attempts`` rows; returns how many records SQLite could not
    take (an integer beyond 64 bits, a lone surrogate in a text): those are dropped with their attempt
    and counted unreadable by the caller. The bulk insert is tried first; only a batch that fails is
    loaded again row by row (after removing what the failed bulk insert had written: ids are this
    batch's own)."""
    try:
        keeper.executemany(op_sql, ops)
        if atts:
            keeper.executemany(att_sql, atts)
        return 0
    except (*CONVERSION_ERRORS, sqlite3.InterfaceError, sqlite3.DataError):
        pass
    lo, hi = ops[0][0], ops[-1][0]
    keeper.execute("DELETE FROM attempts WHERE id BETWEEN ? AND ?", (lo, hi))
    keeper.execute("DELETE FROM operations WHERE id BETWEEN ? AND ?", (lo, hi))
    att_of = {a[0]: a for a in atts}
    bad = 0
    for op in ops:
        a = att_of.get(op[0])
        try:
            keeper.execute(op_sql, op)
        except (*CONVERSION_ERRORS, sqlite3.InterfaceError, sqlite3.DataError):
            bad += 1
            continue
        if a is not None:
            try:
                keeper.execute(att_sql, a)
            except (*CONVERSION_ERRORS, sqlite3.InterfaceError, sqlite3.DataError):
                keeper.execute("DELETE FROM operations WHERE id = ?", (op[0],))
                bad += 1
    return bad


@contextmanager
def loading(keeper: sqlite3.Connection) -> Iterator[None]:
    """Guard a snapshot's load: the cyclic garbage collector paused for its duration (the load makes no
    reference cycles, and a collection would walk every row tuple made so far), and the ``keeper``
    closed, so the half-loaded memory database discarded, when anything raises (a cancel too)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    except BaseException:
        keeper.close()
        raise
    finally:
        if paused:
            gc.enable()


def prefetched(batches: Iterable[T], token, depth: int = 2) -> Iterator[T]:
    """Iterate ``batches`` one step ahead on a thread: the next batch's SCAN and pipeline wait on
    Redis (the GIL is released on the socket) while this one is decoded and loaded. Errors and
    cancellation reach the consumer; leaving the loop early stops the reader."""
    import queue

    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def run():
        try:
            for item in batches:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(end)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
            q.put(e)

    th = threading.Thread(target=run, name="idemview-snapshot-read", daemon=True)
    th.start()
    try:
        while True:
            item = q.get()
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            if token is not None:
                token.check()
            yield item
    finally:
        stop.set()
        th.join(timeout=30)
