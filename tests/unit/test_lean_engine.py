"""The window's SQLite connections hold a small page cache and map no file (issue 27 item 3): set on every
checkout, also for a connection opened before; the session stays read-only; other engines are left alone."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from idemview.ledger.connect import SQLITE_CACHE_KB, open_engine
from idemview.services.leanengine import LEAN_CACHE_KB, bound_sqlite_memory


def _pragmas(engine) -> tuple[int, int, int]:
    with engine.connect() as c:
        return tuple(c.execute(text(f"PRAGMA {p}")).scalar() for p in ("cache_size", "mmap_size", "temp_store"))


@pytest.mark.parametrize("cache_kb", [LEAN_CACHE_KB, 2048])
def test_sqlite_connections_are_bounded_even_one_opened_before(tmp_path, cache_kb):
    p = tmp_path / "l.db"
    with sqlite3.connect(p) as c:
        c.execute("CREATE TABLE t (x INTEGER)")
        c.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1000)])
    engine = open_engine(str(p))
    try:
        assert _pragmas(engine)[0] == -SQLITE_CACHE_KB, "open_engine's own values: the export's"
        assert bound_sqlite_memory(engine, cache_kb) is True
        assert _pragmas(engine) == (-cache_kb, 0, 1)  # 1: FILE. The pooled connection from before, checked out again
        assert bound_sqlite_memory(engine, cache_kb) is False  # once is enough
        with engine.connect() as c:
            assert c.execute(text("SELECT count(*) FROM t")).scalar() == 1000
            with pytest.raises(Exception, match="readonly|read-only|query_only|attempt to write"):
                c.execute(text("INSERT INTO t VALUES (1)"))
    finally:
        engine.dispose()


@pytest.mark.parametrize("which", ["postgresql", "mysql", "mariadb"])
def test_other_engines_are_left_alone(request, which):
    url = request.getfixturevalue("pg_url" if which == "postgresql" else "mysql_url")
    if which == "mariadb":
        url = make_url(url).set(drivername="mariadb+pymysql").render_as_string(hide_password=False)
    engine = open_engine(url)
    try:
        assert bound_sqlite_memory(engine) is False
        with engine.connect() as c:
            assert c.execute(text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()
