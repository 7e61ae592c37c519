"""Every connection is read-only, enforced by the database session itself (DESIGN §8)."""

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, text
from sqlalchemy.exc import DBAPIError

from idemview.ledger.connect import ConnectError, open_engine, safe_url, session_is_read_only


def _make_table(eng):
    md = MetaData()
    Table("t", md, Column("a", Integer))
    md.create_all(eng)
    with eng.begin() as c:
        c.execute(text("INSERT INTO t (a) VALUES (1)"))


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO t (a) VALUES (2)",
        "UPDATE t SET a = 3",
        "DELETE FROM t",
        "CREATE TABLE created_by_idemview (x INTEGER)",
        "DROP TABLE t",
    ],
)
def test_writes_are_refused_by_the_database(db, sql):
    writable, url = db
    _make_table(writable)
    ro = open_engine(url)
    assert session_is_read_only(ro) is True
    with pytest.raises(DBAPIError):
        with ro.connect() as c:
            c.execute(text(sql))
            c.commit()
    ro.dispose()
    # the table is untouched
    with writable.connect() as c:
        assert c.execute(text("SELECT a FROM t")).scalars().all() == [1]


def test_sqlite_attach_is_refused(sqlite_db, tmp_path):
    writable, path = sqlite_db
    _make_table(writable)
    ro = open_engine(path)
    target = tmp_path / "attached.db"
    with pytest.raises(DBAPIError, match="not authorized"):
        with ro.connect() as c:
            c.execute(text(f"ATTACH DATABASE '{target}' AS other"))
    assert not target.exists()


def test_sqlite_statement_timeout_interrupts(sqlite_db):
    writable, path = sqlite_db
    _make_table(writable)
    ro = open_engine(path, statement_timeout_s=0.2)
    slow = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 100000000) SELECT count(*) FROM r"
    with pytest.raises(DBAPIError, match="interrupted"):
        with ro.connect() as c:
            c.execute(text(slow)).scalar()


def test_postgres_statement_timeout(pg_url):
    ro = open_engine(pg_url, statement_timeout_s=0.2)
    with pytest.raises(DBAPIError, match="statement timeout"):
        with ro.connect() as c:
            c.execute(text("SELECT pg_sleep(2)"))


def test_missing_sqlite_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConnectError, match="no SQLite file"):
        open_engine(str(tmp_path / "nope.db"))


def test_unreachable_server_error_has_no_password():
    with pytest.raises(ConnectError) as ei:
        open_engine("postgresql://alice:s3cr3t-pw@127.0.0.1:1/db")
    assert "s3cr3t-pw" not in str(ei.value)
    assert "cannot connect" in str(ei.value)


def test_safe_url_drops_user_and_password():
    s = safe_url("postgresql://alice:s3cr3t@db.example:5432/ledger")
    assert "alice" not in s and "s3cr3t" not in s
    assert "db.example:5432/ledger" in s
