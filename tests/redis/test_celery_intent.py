"""celery-redis-extended's intent reference (issue 26): the task name and its arguments identify an
intent, so a charge re-sent under a new task id is a duplicate_intent; a task with no arguments (a
celery beat entry such as ``celery.backend_cleanup``, run every few minutes) names no intent, and its
scheduled runs are intended repeats, never a duplicate."""

from __future__ import annotations

from datetime import timedelta

from idemview.findings.engine import FindingEngine
from tests.redis.conftest import put_celery, server_now
from tests.redis.test_redis_ledgers import open_ledger


def _ext(name, args, kwargs):
    return {"name": name, "args": args, "kwargs": kwargs}


def test_no_argument_tasks_carry_no_intent(redis_db):
    url, raw = redis_db
    t = server_now(raw) - timedelta(hours=1)
    # beat every 5 minutes, no arguments: three runs under three task ids, one each time
    for i in range(3):
        put_celery(
            raw, f"beat-{i}", "SUCCESS", done=t + i * timedelta(minutes=5), extended=_ext("shop.tasks.sweep", [], {})
        )
    # the same periodic task with arguments given as null/empty by another client: still none
    put_celery(
        raw, "beat-null", "SUCCESS", done=t + timedelta(minutes=20), extended=_ext("shop.tasks.sweep", None, None)
    )
    # a charge re-sent under a new task id: one intent, two keys
    for i, tid in enumerate(("charge-a", "charge-b")):
        put_celery(
            raw,
            tid,
            "SUCCESS",
            done=t + i * timedelta(minutes=2),
            extended=_ext("shop.tasks.charge", [12], {"cents": 500}),
        )
    ledger = open_ledger(url, "celery-redis-extended")
    ops = {op.key: op for op in ledger.iter_operations()}
    assert {k: o.intent_ref is None for k, o in ops.items()} == {
        "beat-0": True,
        "beat-1": True,
        "beat-2": True,
        "beat-null": True,
        "charge-a": False,
        "charge-b": False,
    }
    fs = FindingEngine(ledger, server_now(raw)).run()
    assert {(f.kind.value, f.key) for f in fs} == {("duplicate_intent", "charge-b")}


def test_celery_write_time_from_the_ttl_when_the_record_holds_none(redis_db):
    """celery/backends/redis.py sets every store with SETEX result_expires: a STARTED record (date_done
    null) was written at read time - (result_expires - remaining TTL). Written here as Celery would have
    10 minutes ago (its TTL already 600 s down); a SUCCESS record keeps its own date_done."""
    from datetime import timedelta

    from idemview.ledger.redis_snapshot import open_redis_ledger

    url, raw = redis_db
    now = server_now(raw)
    put_celery(raw, "started-1", "STARTED", done=None, ttl_s=86400 - 600)
    put_celery(raw, "done-1", "SUCCESS", done=now - timedelta(hours=2), ttl_s=86400 - 7200)
    put_celery(raw, "started-2", "STARTED", done=None, ttl_s=None)  # no TTL: no write time
    ledger = open_redis_ledger(url, layout="celery-redis")
    r = ledger.records("", "started-1")[0]
    assert r.created_at is not None and abs((now - r.created_at).total_seconds() - 600) < 5
    assert r.updated_at == r.created_at and r.completed_at is None
    d = ledger.records("", "done-1")[0]
    assert abs((now - d.created_at).total_seconds() - 7200) < 5
    assert ledger.records("", "started-2")[0].created_at is None
    assert ledger.snapshot.write_times == 1
    assert any("write time is read from their TTL" in n and "86400 s" in n for n in ledger.snapshot.notes)


def test_celery_write_ttl_set_by_the_user_and_a_longer_one_seen(redis_db):
    """A store configured with result_expires = 1 h: the user says so (write_ttl_s); with the shipped 1-day
    fallback the same record would read 23 h too old. A TTL above the configured one derives nothing."""
    from idemview.ledger.redis_snapshot import open_redis_ledger

    url, raw = redis_db
    now = server_now(raw)
    put_celery(raw, "s-1", "STARTED", done=None, ttl_s=3600 - 900)
    ledger = open_redis_ledger(url, layout="celery-redis-extended", write_ttl_s=3600)
    r = ledger.records("", "s-1")[0]
    assert abs((now - r.created_at).total_seconds() - 900) < 5
    fallback = open_redis_ledger(url, layout="celery-redis-extended").records("", "s-1")[0]
    assert abs((now - fallback.created_at).total_seconds() - (86400 - 3600 + 900)) < 5
    put_celery(raw, "s-2", "STARTED", done=None, ttl_s=7200)
    short = open_redis_ledger(url, layout="celery-redis", write_ttl_s=3600)
    assert short.records("", "s-2")[0].created_at is None and short.snapshot.write_ttl_above == 1
    assert any("more TTL left than 3600 s" in n for n in short.snapshot.notes)


def test_celery_write_time_without_pexpiretime_reads_pttl(redis_db):
    """Redis < 7 (or a user refused PEXPIRETIME): the write time comes from PTTL, to the millisecond."""
    from idemview.layouts.kv import load_kv_preset
    from idemview.ledger.redis_snapshot import connect_redis, snapshot

    url, raw = redis_db
    now = server_now(raw)
    put_celery(raw, "s-1", "STARTED", done=None, ttl_s=86400 - 300)
    c = connect_redis(url)
    c._idem_no_pexpiretime = True
    engine, info = snapshot(c, load_kv_preset("celery-redis"), url=url)
    c.connection_pool.disconnect()
    from sqlalchemy import text

    with engine.connect() as conn:
        got = conn.execute(text("SELECT created_at FROM operations")).scalar()
    engine.dispose()
    assert info.write_times == 1
    from datetime import datetime

    age = (now.replace(tzinfo=None) - datetime.fromisoformat(got)).total_seconds()
    assert abs(age - 300) < 5
