"""The memory database every key-value snapshot loads into (:mod:`idemview.ledger.memory_snapshot`): nothing
of the values reaches a file, not even the sort runs of an index build."""

from __future__ import annotations

import os
import sqlite3

import pytest

from idemview.ledger import memory_snapshot as mem


def _temp_files() -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if "etilqs" in target:  # SQLite's temporary files (sqlite3.c, unixGetTempname)
            out.add(target)
    return out


def test_the_keeper_sorts_in_memory_and_uses_16k_pages():
    _uri, keeper, _indexes = mem.new_memory_db("t")
    try:
        assert keeper.execute("PRAGMA temp_store").fetchone()[0] == 2  # MEMORY
        assert keeper.execute("PRAGMA page_size").fetchone()[0] == mem.PAGE_SIZE == 16384
        assert keeper.execute("PRAGMA journal_mode").fetchone()[0] == "off"
    finally:
        keeper.close()


def test_an_index_larger_than_the_cache_is_built_without_a_temporary_file(monkeypatch):
    """With SQLite's default temp_store, an index over more than cache_size (2 MB) of keys is sorted in
    runs written to a temporary file; a statement that holds its sorter open shows that file among the
    connection's descriptors while it runs. Here the rows are read back in an order only a sort gives,
    with the sorter open: no temporary file is open."""
    uri, keeper, _indexes = mem.new_memory_db("t")
    try:
        op_sql, _att = mem.insert_statements(())
        rows = [(i, "s", f"key-{(i * 7919) % 60000:06d}-" + "x" * 60, None, "ok", None) for i in range(1, 60001)]
        keeper.executemany(op_sql, rows)
        keeper.commit()
        cur = keeper.execute("SELECT idempotency_key FROM operations ORDER BY idempotency_key || ''")
        first = cur.fetchone()[0]  # the sort is done and its output open
        assert first.startswith("key-000000-")
        assert _temp_files() == set()
        cur.close()
        # the same on a connection with SQLite's defaults does spill (so the check above can fail)
        plain = sqlite3.connect(uri, uri=True)
        cur2 = plain.execute("SELECT idempotency_key FROM operations ORDER BY idempotency_key || ''")
        cur2.fetchone()
        spilled = _temp_files()
        cur2.close()
        plain.close()
        assert spilled, "SQLite's default temp_store should have written sort runs to a file"
    finally:
        keeper.close()


def _spills_on(engine, tune) -> set[str]:
    """The temporary files open while a sort over the snapshot's keys is open on a connection of
    ``engine`` that ``tune(connection)`` prepared (and undoes when it is a context manager)."""
    from contextlib import nullcontext

    with engine.connect() as c:
        ctx = tune(c) or nullcontext()
        with ctx:
            res = c.exec_driver_sql("SELECT idempotency_key FROM operations ORDER BY idempotency_key || ''")
            assert res.fetchone()[0].startswith("key-000000-")
            files = _temp_files()
            res.close()
    return files


def test_a_snapshot_engine_keeps_sorting_in_memory_under_the_windows_and_a_passs_settings(monkeypatch):
    """The window bounds every SQLite engine it opens (services.leanengine.bound_sqlite_memory) and an
    effects pass tunes its connection (ledger.effects.sequential_pass): both set temp_store = FILE, which
    on a snapshot's memory database wrote the keys of a large sort to a temporary file (etilqs_* in
    TMPDIR). A memory database keeps sorting in memory; a file ledger still spills (below)."""
    from idemview.ledger import effects
    from idemview.services.leanengine import bound_sqlite_memory

    uri, keeper, _indexes = mem.new_memory_db("t")
    try:
        op_sql, _att = mem.insert_statements(())
        rows = [(i, "s", f"key-{(i * 7919) % 60000:06d}-" + "x" * 60, None, "ok", None) for i in range(1, 60001)]
        keeper.executemany(op_sql, rows)
        keeper.commit()
        engine = mem.memory_engine(uri, keeper)
        monkeypatch.setattr(effects, "SEQUENTIAL_CACHE_KB", 256)  # the sort is larger than the cache
        assert _spills_on(engine, lambda c: effects.sequential_pass(c)) == set()
        bound_sqlite_memory(engine, cache_kb=256)
        assert _spills_on(engine, lambda c: None) == set()
        engine.dispose()
    finally:
        keeper.close()


def test_a_file_ledger_still_sorts_in_a_file_under_the_windows_settings(tmp_path):
    # the lean settings' purpose on a file ledger (a bounded memory) is kept: there the sort spills
    from sqlalchemy import create_engine

    from idemview.services.leanengine import bound_sqlite_memory

    db = sqlite3.connect(tmp_path / "l.db")
    db.execute("CREATE TABLE operations (idempotency_key TEXT)")
    db.executemany(
        "INSERT INTO operations VALUES (?)", [(f"key-{(i * 7919) % 60000:06d}-" + "x" * 60,) for i in range(60000)]
    )
    db.commit()
    db.close()
    engine = create_engine(f"sqlite:///{tmp_path / 'l.db'}")
    bound_sqlite_memory(engine, cache_kb=256)
    assert _spills_on(engine, lambda c: None)
    engine.dispose()


def test_a_spilled_database_keeps_its_cache_bound_and_its_file_unlinked(monkeypatch):
    """``spill=True``: the cache size survives the page size change (SQLite forgets one set before it),
    the pages beyond it go to SQLite's temporary file, which is unlinked (a descriptor on a deleted
    file, no name), and the engine over it is read-only; closing the engine's pool closes the file."""
    monkeypatch.setattr(mem, "SPILL_CACHE_KB", 256)
    uri, keeper, indexes = mem.new_memory_db("t", spill=True)
    assert uri == ""
    assert keeper.execute("PRAGMA cache_size").fetchone()[0] == -256
    assert keeper.execute("PRAGMA page_size").fetchone()[0] == mem.PAGE_SIZE
    op_sql, _att = mem.insert_statements(["request_body"])
    rows = [(i, "", f"k{i}", "t", "SUCCESS", None, "x" * 400) for i in range(1, 5001)]
    assert mem.load_rows(keeper, op_sql, mem.ATTEMPT_INSERT, rows, []) == 0
    assert mem.finish(keeper, indexes) == 0
    files = _temp_files()
    assert files and all(f.endswith(" (deleted)") for f in files)
    pages = keeper.execute("PRAGMA page_count").fetchone()[0]
    assert pages * mem.PAGE_SIZE > 2_000_000  # far more than the 256 KiB cache
    eng = mem.memory_engine(uri, keeper)
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    with eng.connect() as c:
        assert c.execute(text("SELECT count(*), max(idempotency_key) FROM operations")).one() == (5000, "k999")
        with pytest.raises(DBAPIError, match="readonly"):
            c.execute(text("UPDATE operations SET status = 'x'"))
    eng.dispose()
    assert not _temp_files()
