"""A batch SQLite engine (open_engine, as scan and export use it) holds bounded memory by construction
(issue 27; docs/benchmarks-history.md "SQLite scan memory"): every pooled connection reads back a 64 MiB page cache, no
memory map and temporary b-trees in a file, and stays read-only (mode=ro, query_only, ATTACH denied)."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import text

from idemview.ledger import connect
from idemview.ledger.connect import open_engine

PRAGMAS = ("cache_size", "mmap_size", "temp_store", "query_only")


def _ledger(tmp_path):
    p = tmp_path / "ledger.db"
    with sqlite3.connect(p) as c:
        c.execute("CREATE TABLE t (k TEXT, status TEXT)")
        c.executemany("INSERT INTO t VALUES (?, ?)", [(f"k{i}", "ok" if i % 3 else "failed") for i in range(3000)])
    return p


def _read_back(c) -> dict[str, int]:
    return {p: c.execute(text(f"PRAGMA {p}")).scalar() for p in PRAGMAS}


def test_every_batch_connection_reads_back_the_bounded_settings(tmp_path):
    engine = open_engine(str(_ledger(tmp_path)))
    try:
        # two connections at once: each one is made by the creator, not only the first
        with engine.connect() as a, engine.connect() as b:
            for c in (a, b):
                got = _read_back(c)
                # negative cache_size = KiB; temp_store 1 = FILE; mmap 0 = no map
                assert got == {"cache_size": -65536, "mmap_size": 0, "temp_store": 1, "query_only": 1}
                assert got["cache_size"] == -connect.SQLITE_CACHE_KB
                # a GROUP BY (a temporary b-tree) still answers
                rows = c.execute(text("SELECT status, count(*) FROM t GROUP BY status ORDER BY status")).all()
                assert [tuple(r) for r in rows] == [("failed", 1000), ("ok", 2000)]
    finally:
        engine.dispose()


def test_bounded_settings_keep_the_read_only_promises(tmp_path):
    engine = open_engine(str(_ledger(tmp_path)))
    try:
        with engine.connect() as c:
            with pytest.raises(Exception, match="readonly|read-only|query_only|attempt to write"):
                c.execute(text("INSERT INTO t VALUES ('x', 'ok')"))
            with pytest.raises(Exception, match="not authorized"):
                c.execute(text(f"ATTACH DATABASE '{tmp_path / 'other.db'}' AS o"))
        assert not (tmp_path / "other.db").exists()
        # mode=ro below query_only: with query_only turned off on a raw connection, the file still refuses
        raw = engine.raw_connection()
        try:
            raw.dbapi_connection.execute("PRAGMA query_only = OFF")
            with pytest.raises(sqlite3.OperationalError, match="readonly database"):
                raw.dbapi_connection.execute("INSERT INTO t VALUES ('x', 'ok')")
        finally:
            raw.invalidate()
    finally:
        engine.dispose()


def test_a_sequential_pass_restores_the_bounded_settings(tmp_path):
    """The export's stream (evidence/plan.py) and effects' pass set their own values and give back open_engine's."""
    from idemview.ledger.effects import sequential_pass

    engine = open_engine(str(_ledger(tmp_path)))
    try:
        with engine.connect() as c:
            before = _read_back(c)
            with sequential_pass(c):
                assert c.execute(text("SELECT count(*) FROM t")).scalar() == 3000
            assert _read_back(c) == before == {"cache_size": -65536, "mmap_size": 0, "temp_store": 1, "query_only": 1}
    finally:
        engine.dispose()
