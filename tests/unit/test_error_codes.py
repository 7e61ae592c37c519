"""Database errors are classified by code (issue 25 item 4): each error here is produced for real by the
server or SQLite (a statement timeout, a cancel from another session, a killed session, ``interrupt()``)
and :func:`idemview.ledger.errors.classify` names it from its SQLSTATE / errno / result code."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from idemview.errors import Cancelled, ConnectionLost, QueryCancelled, QueryTimedOut
from idemview.ledger.connect import open_engine
from idemview.ledger.dialects import MYSQL, POSTGRESQL, SQLITE
from idemview.ledger.errors import classify, driver_family, error_code

FOREVER_SQLITE = "WITH RECURSIVE r(x) AS (SELECT started() UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r"
HEAVY_MYSQL = (
    "SELECT count(*) FROM information_schema.columns a, information_schema.columns b, information_schema.columns c"
)


def _raised(fn) -> DBAPIError:
    with pytest.raises(DBAPIError) as ei:
        fn()
    return ei.value


def _stop_when_running(admin_url: str, find_sql: str, stop_sql: str) -> threading.Thread:
    """A thread that waits (bounded: 20 s) until ``find_sql`` names the session running the test's
    statement, then runs ``stop_sql`` (formatted with that session's id) from its own session."""

    def run():
        admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as c:
                for _ in range(200):
                    pid = c.exec_driver_sql(find_sql).scalar()
                    if pid is not None:
                        c.exec_driver_sql(stop_sql.format(pid=int(pid)))
                        return
                    time.sleep(0.1)
        finally:
            admin.dispose()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


# -- SQLite --------------------------------------------------------------------------------------------


def _sqlite_file(tmp_path):
    p = tmp_path / "empty.sqlite"
    sqlite3.connect(p).close()
    return p


def test_sqlite_interrupt_is_cancelled(tmp_path):
    conn = sqlite3.connect(_sqlite_file(tmp_path), check_same_thread=False)
    started = threading.Event()

    def mark():
        started.set()
        return 1

    conn.create_function("started", 0, mark)
    stopper = threading.Thread(target=lambda: started.wait(20) and conn.interrupt(), daemon=True)
    stopper.start()
    with pytest.raises(sqlite3.OperationalError) as ei:
        conn.execute(FOREVER_SQLITE).fetchall()
    stopper.join()
    e = ei.value
    assert driver_family(e) == SQLITE and error_code(e) == sqlite3.SQLITE_INTERRUPT
    got = classify(e, cancel_requested=True)
    assert isinstance(got, QueryCancelled) and isinstance(got, Cancelled)
    assert got.code == sqlite3.SQLITE_INTERRUPT and got.__cause__ is e


def test_sqlite_deadline_is_timed_out(tmp_path):
    engine = open_engine(str(_sqlite_file(tmp_path)), statement_timeout_s=0.05)
    try:
        with engine.connect() as c:
            c.connection.dbapi_connection.create_function("started", 0, lambda: 1)
            e = _raised(lambda: c.exec_driver_sql(FOREVER_SQLITE).scalar())
        got = classify(e)
        assert isinstance(got, QueryTimedOut) and got.code == sqlite3.SQLITE_INTERRUPT
        assert got.exit_code == 3
    finally:
        engine.dispose()


def test_sqlite_query_errors_are_not_classified(tmp_path):
    engine = open_engine(str(_sqlite_file(tmp_path)))
    try:
        with engine.connect() as c:
            e = _raised(lambda: c.exec_driver_sql("SELECT * FROM no_such_table").all())
        assert error_code(e) == sqlite3.SQLITE_ERROR and classify(e) is None
    finally:
        engine.dispose()


# -- PostgreSQL ----------------------------------------------------------------------------------------

# In this test process's own database: another process's test (xdist's other worker, another checkout) may
# be running the same statement on the same server at the same moment, and must not be the one stopped.
PG_FIND = (
    "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(37)' AND state = 'active'"
    " AND datname = current_database() LIMIT 1"
)


@pytest.mark.postgres
def test_postgres_statement_timeout(pg_url):
    engine = open_engine(pg_url, statement_timeout_s=0.2)
    try:
        with engine.connect() as c:
            e = _raised(lambda: c.exec_driver_sql("SELECT pg_sleep(30)").all())
        assert driver_family(e) == POSTGRESQL
        got = classify(e)
        assert isinstance(got, QueryTimedOut) and got.code == "57014"
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_cancel_backend(pg_url):
    engine = open_engine(pg_url)
    try:
        stopper = _stop_when_running(pg_url, PG_FIND, "SELECT pg_cancel_backend({pid})")
        with engine.connect() as c:
            e = _raised(lambda: c.exec_driver_sql("SELECT pg_sleep(37)").all())
        stopper.join()
        assert error_code(e) == "57014"
        # the same SQLSTATE as a timeout: who asked tells them apart
        assert isinstance(classify(e, cancel_requested=True), QueryCancelled)
        assert isinstance(classify(e, cancel_requested=False), QueryTimedOut)
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_terminated_session_is_lost(pg_url):
    engine = open_engine(pg_url)
    try:
        stopper = _stop_when_running(pg_url, PG_FIND, "SELECT pg_terminate_backend({pid})")
        with engine.connect() as c:
            e = _raised(lambda: c.exec_driver_sql("SELECT pg_sleep(37)").all())
        stopper.join()
        got = classify(e)
        assert isinstance(got, ConnectionLost) and got.code == "57P01" and got.exit_code == 3
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_refused_write_and_bad_sql_are_not_classified(pg_url):
    engine = open_engine(pg_url)
    try:
        with engine.connect() as c:
            e = _raised(lambda: c.exec_driver_sql("CREATE TABLE t_refused (x int)"))
            assert error_code(e) == "25006" and classify(e) is None  # read_only_sql_transaction
        with engine.connect() as c:
            e = _raised(lambda: c.exec_driver_sql("SELEC 1"))
            assert error_code(e) == "42601" and classify(e) is None
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_unreachable_is_lost():
    e = _raised(lambda: create_engine("postgresql+psycopg://postgres@127.0.0.1:1/x").connect())
    assert isinstance(classify(e), ConnectionLost)


# -- MariaDB / MySQL, under both SQLAlchemy dialect names ------------------------------------------------

MY_FIND = (
    "SELECT id FROM information_schema.processlist"
    " WHERE info LIKE 'SELECT count(*) FROM information_schema.columns a%%' AND db = DATABASE() LIMIT 1"
)


@pytest.fixture(params=["mysql+pymysql", "mariadb+pymysql"])
def my_url(request, mysql_url):
    return make_url(mysql_url).set(drivername=request.param).render_as_string(hide_password=False)


@pytest.mark.mysql
def test_mysql_statement_timeout(my_url):
    engine = open_engine(my_url, statement_timeout_s=0.2)
    try:
        with engine.connect() as c:
            e = _raised(lambda: c.exec_driver_sql(HEAVY_MYSQL).all())
        assert driver_family(e) == MYSQL
        got = classify(e)
        assert isinstance(got, QueryTimedOut) and got.code in (1969, 3024)
    finally:
        engine.dispose()


def _killed(url: str, stmt: str) -> BaseException:
    """The error a heavy query raises when another session runs ``stmt`` (``KILL QUERY {pid}``, ``KILL {pid}``)."""
    engine = open_engine(url)
    try:
        stopper = _stop_when_running(url, MY_FIND, stmt)
        with engine.connect() as c:
            e = _raised(lambda: c.exec_driver_sql(HEAVY_MYSQL).all())
        stopper.join()
        return e
    finally:
        engine.dispose()


@pytest.mark.mysql
def test_mysql_kill_query_is_cancelled(my_url, capsys):
    from idemview.cli import database_failed

    e = _killed(my_url, "KILL QUERY {pid}")
    got = classify(e)
    assert isinstance(got, QueryCancelled) and got.code == 1317
    # the CLI: another session's KILL QUERY is not the user's Ctrl-C (exit 3, not 130; found by a tester)
    assert database_failed(e) == 3
    err = capsys.readouterr().err
    assert err.startswith("idemview: the database failed: another session stopped the query (")
    assert "1317" in err and err.count("\n") == 1


@pytest.mark.mysql
def test_mysql_killed_session_is_lost(my_url, capsys):
    from idemview.cli import database_failed

    e = _killed(my_url, "KILL {pid}")
    got = classify(e)
    assert isinstance(got, ConnectionLost) and got.code in (2013, 1927)
    assert database_failed(e) == 3
    err = capsys.readouterr().err
    assert err.startswith("idemview: the database failed: the connection was lost (") and err.count("\n") == 1


@pytest.mark.mysql
def test_mysql_bad_sql_is_not_classified(my_url):
    engine = open_engine(my_url)
    try:
        with engine.connect() as c:
            e = _raised(lambda: c.exec_driver_sql("SELEC 1"))
        assert error_code(e) == 1064 and classify(e) is None
    finally:
        engine.dispose()
