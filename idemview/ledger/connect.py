"""Read-only connections to ledgers, enforced by the database session itself (DESIGN §8).

- SQLite: opened through a ``file:`` URI with ``mode=ro``, plus ``PRAGMA query_only`` and an authorizer
  that denies ATTACH (an attached file could otherwise be created and written);
- PostgreSQL: ``default_transaction_read_only=on`` and ``statement_timeout`` as connection options;
- MySQL/MariaDB: ``SET SESSION TRANSACTION READ ONLY`` and a statement time limit on every connection;
- a dump (``.csv``/``.parquet``/``.jsonl`` file or folder, DuckDB): only the dump's files readable,
  configuration locked, one SELECT per statement (:mod:`idemview.ledger.dump_engine`).

Every session also runs in UTC (PostgreSQL ``TimeZone``, MySQL ``time_zone``) so that times are read
unshifted. Errors are raised as :class:`ConnectError` whose message never contains a password.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from idemview.domain import jsontext
from idemview.errors import CannotConnect, InputError
from idemview.ledger.dialects import DUCKDB, MYSQL, POSTGRESQL, SQLITE, family
from idemview.ledger.driver_options import check_url_options, driver_connect_args
from idemview.ledger.pg_sqlascii import adapt as adapt_sql_ascii
from idemview.ledger.pg_times import adapt as adapt_pg_times
from idemview.ledger.rawtext import decode_text
from idemview.ledger.sqlite_functions import connect_sqlite
from idemview.paths import note_source, readable_file
from idemview.urls import _SCHEME_RE, hide_password, looks_like_url, split_url  # noqa: F401  (re-exported)

DEFAULT_STATEMENT_TIMEOUT_S = 60.0
# SQLite's memory for batch work (scan, export), bounded by construction (issue 27;
# docs/benchmarks-history.md "SQLite scan memory"). Was 256 MiB cache + 1 GiB map + in-memory temp b-trees:
# a 2M-row scan peaked at 0.9-2 GB RSS.
#: page cache per connection (KiB), filled on demand; it also caps each in-memory sort run (vdbesort.c)
SQLITE_CACHE_KB = 65536
#: no memory map: every mapped page of the file that a scan touches counts in the process's RSS (up to the
#: whole file); the operating system's page cache keeps the file at memory speed without it
SQLITE_MMAP_BYTES = 0
#: temporary sort / GROUP BY / DISTINCT b-trees larger than the cache spill to a temporary file (0600,
#: unlinked as soon as it is opened: os_unix.c unixOpen) instead of growing in memory. They hold keys and
#: values of the user's own ledger file, which is already on this disk; a Redis snapshot keeps its sorts in
#: memory instead (memory_snapshot.py): its values were never on disk.
SQLITE_TEMP_STORE = "FILE"
PG_WORK_MEM = "64MB"  # per sort/hash node of a findings query


_TIMEOUTS = threading.local()


def statement_timed_out() -> bool:
    """True when this thread's last interrupted SQLite statement was stopped by the statement timeout
    (rather than by a cancel or Ctrl-C); reading it clears it."""
    v = getattr(_TIMEOUTS, "flag", False)
    _TIMEOUTS.flag = False
    return v


class ConnectError(CannotConnect):
    """The ledger cannot be reached or opened; the message is safe to show (no password). An
    :class:`idemview.errors.CannotConnect` (exit code 3)."""


def redact(text_: str) -> str:
    """A message made safe to show: every secret this process knows, anything shaped like
    ``user:password@host`` (URL or not), ``password=...`` pairs, and every value the masker detects
    (e-mail, card, API key...; a driver's error can quote ledger data) are masked
    (:func:`idemview.masking.masker.mask_message`, DESIGN §6)."""
    # Imported here: the masker sits above the ledger layer; messages are the one place it reaches down.
    from idemview.masking.masker import mask_message

    # the value only: closing brackets and quotes after it stay, and MySQL's "(using password: YES)"
    # (whether one was sent, not what it was) stays readable (issue #13 §9)
    text_ = re.sub(
        r"(password\s*[=:]\s*)(?!\[)(?!(?:YES|NO)\b)(\S+?)([)\]}'\",;.]*)(?=\s|$)", r"\1***\3", str(text_), flags=re.I
    )
    return mask_message(text_)


def parse_url(url: str) -> URL:
    """Parse a SQLAlchemy URL; a bare path to an existing file is taken as a SQLite ledger, a path
    ending in ``.csv``/``.parquet``/``.jsonl`` or to a folder as a dump (``duckdb:///PATH``,
    :mod:`idemview.ledger.dumps`).

    The user info ends at the last ``@`` (:func:`split_url`). A string shaped like a URL with one
    slash (``postgresql:/ops@db/x``) is a malformed URL, not a SQLite file name.
    Raises :class:`ConnectError` on a malformed URL (message without the password)."""
    from idemview.masking.masker import register_secret, url_password_candidates

    for pw in url_password_candidates(url):  # no message of this process will show it
        register_secret(pw)
    if "://" not in url:
        from idemview.ledger.dumps import BACKEND, is_dump_path

        p = Path(url)
        if is_dump_path(url):
            return URL.create(BACKEND, database=str(p))
        m = _SCHEME_RE.match(url)
        if m and not p.exists():
            raise ConnectError(
                f"not a database URL: {redact(hide_password(url))!r} (a URL needs two slashes: {m.group(1)}://...)"
            )
        if p.exists() or url.endswith((".db", ".sqlite", ".sqlite3")):
            return URL.create("sqlite", database=str(p))
    try:
        u = split_url(url)
        u.port  # noqa: B018 - a non-numeric port raises here, not later
        # postgres:// (Heroku, libpq, most PaaS) is the name SQLAlchemy 1.4 dropped: same database
        backend, plus, driver = u.drivername.partition("+")
        if backend == "postgres":
            u = u.set(drivername="postgresql" + plus + driver)
        return u
    except (ArgumentError, ValueError):
        raise ConnectError(
            f"not a database URL: {redact(hide_password(url))!r} (expected e.g. postgresql://host/db or sqlite:///path.db)"
        ) from None


@dataclass
class Interrupter:
    """Cancels the statement running on a connection (used by the GUI's Cancel and the timeout).

    SQLite: ``sqlite3.Connection.interrupt``; PostgreSQL: ``psycopg`` ``cancel``; MySQL: ``KILL QUERY``
    from a second connection."""

    engine: Engine

    def cancel(self, dbapi_conn) -> None:
        fam = family(self.engine)
        try:
            if fam in (SQLITE, DUCKDB):
                dbapi_conn.interrupt()
            elif fam == POSTGRESQL and hasattr(dbapi_conn, "cancel"):
                dbapi_conn.cancel()
            elif fam == MYSQL:
                tid = dbapi_conn.thread_id()
                with self.engine.connect() as c:
                    c.exec_driver_sql(f"KILL QUERY {int(tid)}")
        except Exception:  # cancelling is best effort; the statement timeout still applies
            pass


class _SqliteConn(sqlite3.Connection):
    """A sqlite3 connection that carries the start time of its current statement (for the timeout)."""

    _idem_start: list
    _idem_deadline: list


def _sqlite_authorizer(action, arg1, arg2, dbname, source):
    # Deny ATTACH/DETACH outright; every write is already refused by mode=ro and query_only.
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def open_engine(
    url: str | URL,
    *,
    statement_timeout_s: float = DEFAULT_STATEMENT_TIMEOUT_S,
    password: str | None = None,
    check: bool = True,
) -> Engine:
    """A read-only SQLAlchemy :class:`Engine` for ``url``.

    ``password`` (e.g. from the keyring) replaces the URL's. ``statement_timeout_s`` bounds each
    statement (seconds). With ``check``, one connection is opened to prove the ledger is reachable.
    Raises :class:`ConnectError` (unknown driver, unreachable server, missing SQLite file).

    The one entry for every SQL engine idemview makes (ARCHITECTURE.md "Promises"): the URL options are
    checked here, then a per-family helper below (``_sqlite_engine``, ``_postgresql_engine``,
    ``_mysql_engine``, :func:`_open_dump`) makes the engine read-only; those helpers are called from
    nowhere else."""
    u = parse_url(url) if isinstance(url, str) else url
    if password is not None:
        u = u.set(password=password)
    from idemview.masking.masker import register_secret

    register_secret(u.password)
    # The one gate for what a connection may carry (issue #19): refused before anything connects.
    check_url_options(u)
    forced = driver_connect_args(u)
    backend = u.get_backend_name()
    u = _default_driver(u, backend)
    timeout_ms = int(statement_timeout_s * 1000)
    # JSON columns (PostgreSQL json/jsonb, MySQL JSON) parsed through the one bounded parser.
    kw: dict = {"pool_pre_ping": True, "json_deserializer": jsontext.loads_or_text}
    try:
        if backend == "sqlite":
            engine = _sqlite_engine(u, statement_timeout_s, kw)
        elif backend == "postgresql":
            engine = _postgresql_engine(u, statement_timeout_s, timeout_ms, kw)
        elif backend in ("mysql", "mariadb"):
            engine = _mysql_engine(u, statement_timeout_s, timeout_ms, forced, kw)
        elif backend == "duckdb":
            engine = _open_dump(u, statement_timeout_s)
        else:
            # Any other SQLAlchemy dialect: read-only is requested through the DBAPI where possible;
            # the GUI shows the badge only when the session confirms it (see session_is_read_only).
            engine = create_engine(u, **kw)
    except NoSuchModuleError:
        raise ConnectError(f"no SQLAlchemy driver for {u.drivername!r}") from None
    except InputError:  # a refused path (paths.readable_file): the user's input, exit 2
        raise
    except (TypeError, ValueError) as e:
        # SQLAlchemy coerces allowed options while making the engine (connect_timeout=abc)
        raise ConnectError(
            f"cannot connect to {safe_url(u)}: the driver refused the connection settings ({redact(str(e))})"
        ) from None
    except ModuleNotFoundError as e:
        raise ConnectError(f"the driver for {u.drivername!r} is not installed ({e.name})") from None
    # The interactive limit, given back to a connection after batch use (_apply_timeout).
    engine._idem_statement_timeout_s = statement_timeout_s  # type: ignore[attr-defined]
    event.listen(engine, "engine_connect", _apply_timeout)
    if check:
        _check_reachable(engine, u, backend)
    return engine


def _default_driver(u: URL, backend: str) -> URL:
    """``postgresql://`` means psycopg (3), ``mysql://`` / ``mariadb://`` PyMySQL: the drivers idemview
    ships; a URL that names its driver keeps it."""
    if backend == "postgresql" and u.drivername == "postgresql":
        return u.set(drivername="postgresql+psycopg")
    if backend in ("mysql", "mariadb") and u.drivername in ("mysql", "mariadb"):
        return u.set(drivername=f"{backend}+pymysql")
    return u


def _sqlite_engine(u: URL, statement_timeout_s: float, kw: dict) -> Engine:
    """SQLite, for :func:`open_engine` only: a ``file:`` URI with ``mode=ro``, ``PRAGMA query_only``,
    ATTACH denied, and a progress handler that stops a statement past its limit; memory bounded by
    ``SQLITE_CACHE_KB``, ``SQLITE_MMAP_BYTES`` and ``SQLITE_TEMP_STORE`` (the one place they are set)."""
    db = u.database or ""
    if not db or db == ":memory:":
        raise ConnectError("a SQLite ledger must be a file (read-only :memory: has nothing to read)")
    path = Path(db)
    readable_file(path)  # a FIFO would block the open forever (issue #19 item 5)
    if not path.exists():
        raise ConnectError(f"no SQLite file at {redact(db)}")
    note_source(path)  # no writer may replace it (paths.check_write_target)
    # Percent-encode the path: '#', '?' and '%' in a file name would otherwise cut the URI (and
    # silently drop mode=ro, or open another file).
    uri = f"file:{quote(path.resolve().as_posix())}?mode=ro"

    def creator():
        # the one way idemview opens SQLite: md5 and the other functions its SQL uses (sqlite_functions)
        conn = connect_sqlite(uri, uri=True, check_same_thread=False, factory=_SqliteConn)
        # A TEXT cell that is not UTF-8 is read (as RawText, bytes kept) instead of aborting
        # the whole statement (issue #9, item 5).
        conn.text_factory = decode_text
        conn.execute("PRAGMA query_only = ON")
        # Read-side settings only (nothing of the ledger is written): a bounded page cache, no memory map,
        # temporary sort/group b-trees in a temporary file past the cache (module constants above).
        conn.execute(f"PRAGMA cache_size = -{int(SQLITE_CACHE_KB)}")
        conn.execute(f"PRAGMA mmap_size = {int(SQLITE_MMAP_BYTES)}")
        conn.execute(f"PRAGMA temp_store = {SQLITE_TEMP_STORE}")
        conn.set_authorizer(_sqlite_authorizer)
        start = [time.monotonic()]
        # The limit is per connection and per use (statement_timeout()): None = no limit.
        deadline: list[float | None] = [statement_timeout_s]

        # Abort a statement that runs past the timeout (returns non-zero -> interrupted). Being
        # Python, the handler also lets Ctrl-C interrupt a long statement.
        def progress():
            d = deadline[0]
            if d is not None and time.monotonic() - start[0] > d:
                _TIMEOUTS.flag = True
                return 1
            return 0

        conn.set_progress_handler(progress, 100_000)
        conn._idem_start = start
        conn._idem_deadline = deadline
        return conn

    engine = create_engine(URL.create("sqlite+pysqlite", database=str(path)), creator=creator, **kw)

    @event.listens_for(engine, "before_cursor_execute")
    def _reset_clock(conn, cursor, statement, params, context, executemany):
        raw = conn.connection.dbapi_connection
        st = getattr(raw, "_idem_start", None)
        if st is not None:
            st[0] = time.monotonic()

    return engine


def _postgresql_engine(u: URL, statement_timeout_s: float, timeout_ms: int, kw: dict) -> Engine:
    """PostgreSQL, for :func:`open_engine` only: ``default_transaction_read_only``, the statement
    timeout and UTC in the startup packet, so they hold before any statement."""
    # work_mem: findings group and join whole tables; with the stock 4 MB every hash and sort
    # spills to disk (a session setting, allowed in a read-only transaction).
    opts = (
        f"-c default_transaction_read_only=on -c statement_timeout={timeout_ms} "
        f"-c TimeZone=UTC -c work_mem={PG_WORK_MEM}"
    )
    engine = create_engine(u, connect_args={"options": opts, "connect_timeout": 10}, **kw)

    @event.listens_for(engine, "do_connect")
    def _pg_connect(dialect, conn_rec, cargs, cparams):
        # before SQLAlchemy's first query: a SQL_ASCII database returns text as bytes
        conn = dialect.loaded_dbapi.connect(*cargs, **cparams)
        adapt_sql_ascii(conn)
        adapt_pg_times(conn)  # infinity and years Python cannot hold: unknown times
        return conn

    @event.listens_for(engine, "connect")
    def _pg_limit(dbapi_conn, rec):
        dbapi_conn._idem_timeout = statement_timeout_s  # what the options above set

    return engine


def _mysql_engine(u: URL, statement_timeout_s: float, timeout_ms: int, forced: dict, kw: dict) -> Engine:
    """MySQL and MariaDB, for :func:`open_engine` only: ``forced`` (the driver's ``init_command``, from
    :func:`driver_connect_args`) makes the session read-only first; each connection then gets UTC and
    the statement limit (MariaDB ``max_statement_time``, MySQL ``max_execution_time``)."""
    # local_infile off and SET SESSION TRANSACTION READ ONLY as the driver's init_command
    # (driver_options.driver_connect_args): read-only before any other statement.
    engine = create_engine(u, connect_args={"connect_timeout": 10, **forced}, **kw)
    is_maria: list[bool | None] = [None]

    @event.listens_for(engine, "connect")
    def _ro(dbapi_conn, rec):
        cur = dbapi_conn.cursor()
        cur.execute("SET SESSION TRANSACTION READ ONLY")
        cur.execute("SET SESSION time_zone = '+00:00'")
        if is_maria[0] is None:
            cur.execute("SELECT VERSION()")
            is_maria[0] = "mariadb" in str(cur.fetchone()[0]).lower()
        if is_maria[0]:
            cur.execute(f"SET SESSION max_statement_time = {statement_timeout_s:.3f}")
        else:
            cur.execute(f"SET SESSION max_execution_time = {timeout_ms}")
        cur.close()
        dbapi_conn._idem_timeout = statement_timeout_s

    return engine


def _check_reachable(engine: Engine, u: URL, backend: str) -> None:
    """Open one connection (``open_engine(check=True)``); on failure dispose of ``engine`` and raise
    :class:`ConnectError` in one line, without the password."""
    try:
        with engine.connect() as c:
            # sqlite_master, not SELECT 1: a file that is not a database fails only on a real read
            c.execute(text("SELECT count(*) FROM sqlite_master" if backend == "sqlite" else "SELECT 1"))
    except (DBAPIError, SQLAlchemyError, OSError) as e:
        engine.dispose()
        if backend == "sqlite" and "not a database" in str(e):
            raise ConnectError(f"{redact(u.database or '')} is not a SQLite database") from None
        if backend == "sqlite" and u.database and Path(u.database).is_dir():
            raise ConnectError(f"{redact(u.database)} is a folder, not a SQLite database file") from None
        raise ConnectError(f"cannot connect to {safe_url(u)}: {short_error(e)}") from None
    except (AttributeError, LookupError, TypeError, ValueError, RuntimeError) as e:
        # A driver that chokes on a URL setting (pymysql with ?charset=bogus raises AttributeError)
        # before it reaches the server: the setting is the user's to fix, said in one line.
        engine.dispose()
        raise ConnectError(
            f"cannot connect to {safe_url(u)}: the driver refused the connection settings "
            f"({type(e).__name__}: {redact(str(e))})"
        ) from None


def _open_dump(u: URL, statement_timeout_s: float | None) -> Engine:
    """The read-only engine over the dump ``u`` names (``duckdb:///PATH``; a DuckDB database file or
    ``:memory:`` is not a dump and is refused). Every DuckDB engine idemview makes is made here."""
    from idemview.ledger.dump_engine import open_dump_engine
    from idemview.ledger.dumps import list_dump

    dump = list_dump(u.database or "")  # DumpError (exit 2): missing, empty, mixed, not a dump file
    for f in dump.files:
        note_source(f)  # no export may replace a file of the dump (paths.check_write_target)
    return open_dump_engine(dump, statement_timeout_s)


#: Execution option naming a connection's statement time limit in seconds (``None``: no limit); set on
#: an engine by :func:`batch_engine`. Without it a connection has the engine's interactive limit.
TIMEOUT_OPTION = "idemview_statement_timeout_s"
_UNSET = object()


def _apply_timeout(conn) -> None:
    """``engine_connect`` hook: give the checked-out connection the limit its engine asks for (the
    interactive one unless :data:`TIMEOUT_OPTION` says otherwise). Only a change costs a statement."""
    engine = conn.engine
    want = conn.get_execution_options().get(TIMEOUT_OPTION, _UNSET)
    if want is _UNSET:
        want = getattr(engine, "_idem_statement_timeout_s", DEFAULT_STATEMENT_TIMEOUT_S)
    raw = conn.connection.dbapi_connection
    fam = family(engine)
    if fam in (SQLITE, DUCKDB):
        d = getattr(raw, "_idem_deadline", None)
        if d is not None:
            d[0] = want
        return
    if getattr(raw, "_idem_timeout", _UNSET) == want:
        return
    cur = raw.cursor()
    try:
        if fam == POSTGRESQL:
            cur.execute(f"SET statement_timeout = {0 if want is None else max(1, int(want * 1000))}")
            # Outside a transaction block the SET stays for the session; SQLAlchemy's next statement
            # begins its own transaction.
            raw.commit()
        elif fam == MYSQL:
            cur.execute("SELECT VERSION()")
            if "mariadb" in str(cur.fetchone()[0]).lower():
                cur.execute(f"SET SESSION max_statement_time = {0 if want is None else want:.3f}")
            else:
                cur.execute(f"SET SESSION max_execution_time = {0 if want is None else int(want * 1000)}")
        else:
            return
    finally:
        cur.close()
    try:
        raw._idem_timeout = want
    except AttributeError:  # a driver connection without a __dict__: set again next time
        pass


def batch_engine(engine: Engine, timeout_s: float | None = None) -> Engine:
    """The same engine (same pool) for batch work: a whole-ledger scan or export is not an interactive
    query, so the interactive statement timeout does not apply (issue 11); ``timeout_s`` (seconds, or
    ``None`` for no limit) bounds each statement instead. Cancel still works (Ctrl-C, the GUI's Cancel
    through :class:`Interrupter`). Connections go back to the pool and get the interactive limit
    again at their next interactive use."""
    return engine.execution_options(**{TIMEOUT_OPTION: timeout_s})


def safe_url(u: URL | str) -> str:
    """The URL for messages and manifests: no user name, no password."""
    if isinstance(u, str):
        try:
            u = split_url(u)
        except (ArgumentError, ValueError):
            return redact(str(u))
    return redact(u._replace(username=None, password=None).render_as_string(hide_password=True))


def short_error(e: BaseException) -> str:
    """First line of a DBAPI error, without SQL, parameters or passwords."""
    orig = getattr(e, "orig", None) or e
    msg = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    return redact(msg)


def session_is_read_only(engine: Engine) -> bool:
    """Ask the live session whether it refuses writes (the GUI's READ-ONLY badge reads this).

    Decided by dialect family: ``mariadb+pymysql://`` asks the MySQL question too. An unknown dialect
    is not asked anything (False: the badge is shown only when the session confirms it)."""
    fam = family(engine)
    with engine.connect() as c:
        if fam == SQLITE:
            return bool(c.exec_driver_sql("PRAGMA query_only").scalar())
        if fam == DUCKDB:  # no file but the dump's, configuration locked (and the statement guard)
            locked = c.exec_driver_sql("SELECT current_setting('lock_configuration')").scalar()
            external = c.exec_driver_sql("SELECT current_setting('enable_external_access')").scalar()
            return bool(locked) and not bool(external)
        if fam == POSTGRESQL:
            return c.exec_driver_sql("SHOW transaction_read_only").scalar() == "on"
        if fam == MYSQL:
            for var in ("@@session.transaction_read_only", "@@session.tx_read_only"):
                try:
                    return bool(int(c.exec_driver_sql(f"SELECT {var}").scalar() or 0))
                except DBAPIError:
                    continue
    return False


def describe(engine: Engine) -> dict:
    """Ledger identity for manifests: dialect, host, database (never the user name or password). A dump
    (:mod:`idemview.ledger.dumps`) adds ``files``: ``[{"table", "file", "format", "bytes", "sha256"}]``,
    hashed now, so the evidence says which bytes it was computed from."""
    u = engine.url
    out: dict = {"dialect": engine.dialect.name, "host": u.host or "", "database": u.database or ""}
    dump = getattr(engine.dialect, "dump", None)  # the dialect: shared by the batch engines made from it
    if dump is not None:
        from idemview.ledger.dumps import file_hashes

        out["files"] = file_hashes(dump)
    return out
