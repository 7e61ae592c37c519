"""A spilled Redis snapshot (issue 27: memory bounded by construction): the database's pages beyond a
bounded cache in SQLite's private temporary file, unlinked at creation. Same rows, counts and findings
as the memory database; read-only; one connection shared by the GUI's threads; no file anyone can open
by name."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest

from tests.redis.conftest import put_celery, server_now


def _plant(raw, now, n: int) -> None:
    for i in range(n):
        status = ("SUCCESS", "FAILURE", "STARTED", "RETRY")[i % 4]
        put_celery(
            raw,
            f"s{i}",
            status,
            done=now - timedelta(minutes=i) if i % 7 else None,
            result={"charge": f"ch_{i}"} if status == "SUCCESS" else None,
            traceback="Traceback\nCardError" if status == "FAILURE" else None,
            ttl_s=None if i % 11 == 0 else 3600,
            extended={
                "name": "shop.charge",
                "args": [i // 2],
                "kwargs": {"email": "jane@example.com"} if i % 13 == 0 else {},
                "retries": i % 9,
                "worker": f"celery@w{i % 3}",
            },
        )


def _deleted_fds() -> set[str]:
    """The targets of this process's descriptors on deleted files (Linux)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.endswith(" (deleted)"):
            out.add(target)
    return out


@pytest.mark.parametrize("worker", [False, True])
def test_spilled_snapshot_has_the_same_rows_counts_and_findings(redis_db, worker, monkeypatch):
    """The same keys, snapshotted in memory and spilled (in this process or with the mapping worker),
    with a cache of 1 MiB so that most pages are in the file: the same rows, attempts, counts and
    findings (the planted failures, the e-mail address at rest)."""
    from idemview.findings.engine import FindingEngine
    from idemview.layouts.kv import load_kv_preset
    from idemview.ledger import memory_snapshot as mem
    from idemview.ledger.redis_kv import snapshot as rs
    from idemview.ledger.redis_snapshot import connect_redis, open_redis_ledger
    from tests.redis.test_redis_ledgers import _rows_of

    url, raw = redis_db
    now = server_now(raw)
    _plant(raw, now, 3000)
    raw.set("celery-task-meta-broken", b"\xff{not json")
    raw.hset("celery-task-meta-hash", mapping={"status": "SUCCESS"})
    monkeypatch.setattr(mem, "SPILL_CACHE_KB", 1024)
    kv = load_kv_preset("celery-redis-extended")
    got = {}
    for spill in (False, True):
        c = connect_redis(url)
        engine, info = rs.snapshot(c, kv, url=url, batch=100, worker=worker, spill=spill)
        c.connection_pool.disconnect()
        counts = {k: getattr(info, k) for k in ("scanned", "loaded", "wrong_type", "undecodable", "without_ttl")}
        with engine.connect() as conn:
            dbs = [tuple(r) for r in conn.exec_driver_sql("PRAGMA database_list")]
        got[spill] = (_rows_of(engine), counts, dbs)
        engine.dispose()
    assert (
        got[True][1]
        == got[False][1]
        == {
            "scanned": 3002,
            "loaded": 3000,
            "wrong_type": 1,
            "undecodable": 1,
            "without_ttl": 273,
        }
    )
    # SCAN's order is the server's: the rows by key, the ids aside
    for table in (0, 1):
        rows = {s: sorted(r[1:] for r in got[s][0][table]) for s in (False, True)}
        assert rows[True] == rows[False] and len(rows[True]) == 3000
    assert got[True][2][0][2] == ""  # the private temporary database: no file name
    assert got[False][2][0][2] == ""  # the memory database has none either

    kinds = {}
    for spill in (False, True):
        led = open_redis_ledger(url, layout="celery-redis-extended", worker=worker, spill=spill)
        fs = FindingEngine(led, now).run()
        kinds[spill] = sorted((f.kind.value, f.key) for f in fs)
        assert all("jane@example.com" not in repr(f.evidence) for f in fs)
        led.engine.dispose()
    assert kinds[True] == kinds[False]
    assert sum(k == "unresolved_failure" for k, _ in kinds[True]) > 0
    assert sum(k == "secret_at_rest" for k, _ in kinds[True]) == 1


def test_spilled_snapshot_is_read_only_unnamed_and_serves_many_threads(redis_db, monkeypatch):
    """Spilled: the file SQLite writes the pages to is unlinked while the snapshot is open (a descriptor
    on a deleted file, no new file in the temporary directory); a write through the engine is refused;
    twelve threads read it at once through the one shared connection and all see the same answers."""
    from concurrent.futures import ThreadPoolExecutor

    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from idemview.findings.engine import FindingEngine
    from idemview.ledger import memory_snapshot as mem
    from idemview.ledger.redis_snapshot import open_redis_ledger

    url, raw = redis_db
    now = server_now(raw)
    _plant(raw, now, 2000)
    monkeypatch.setattr(mem, "SPILL_CACHE_KB", 512)
    import tempfile

    tmp = tempfile.gettempdir()
    before_files, before_fds = set(os.listdir(tmp)), _deleted_fds()
    led = open_redis_ledger(url, layout="celery-redis-extended", spill=True)
    assert _deleted_fds() - before_fds, "the spilled pages are in an unlinked file"
    assert not {f for f in set(os.listdir(tmp)) - before_files if "sqlite" in f.lower() or "etilqs" in f}
    with led.engine.connect() as conn:
        with pytest.raises(DBAPIError, match="readonly"):
            conn.execute(text("DELETE FROM operations"))
        with pytest.raises(DBAPIError, match="not authorized|too many attached"):
            conn.execute(text("ATTACH DATABASE 'x.db' AS x"))
        assert conn.execute(text("SELECT count(*) FROM operations")).scalar() == 2000

    def work(_i):
        fs = FindingEngine(led, now).run()
        return led.counts()[0], len(fs)

    with ThreadPoolExecutor(12) as ex:
        got = set(ex.map(work, range(36)))
    assert len(got) == 1 and next(iter(got))[0] == 2000
    led.engine.dispose()
    assert _deleted_fds() <= before_fds, "disposing of the engine closes the file"
