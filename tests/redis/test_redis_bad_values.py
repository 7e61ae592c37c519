"""Issue 19, item 12: a Redis record whose values no conversion can take (``"retries": Infinity``, an
integer beyond 64 bits, a time that leaves the calendar once moved to UTC, a lone surrogate) is one
unreadable record, counted; every other record is read. In this process and in the worker process."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.redis.conftest import put_celery, put_generic, server_now

# Raw Celery result values (the JSON celery/backends/base.py _get_result_meta writes, extended) with one
# bad value each: written as text, since json.dumps cannot write some of them.
_GOOD = {"status": "SUCCESS", "result": None, "traceback": None, "children": [], "name": "shop.charge"}
_CELERY_BAD = {
    "inf-retries": '"retries": Infinity',
    "neg-inf-retries": '"retries": -Infinity',
    "huge-float-retries": '"retries": 1e30',
    "huge-int-retries": '"retries": 100000000000000000000000',
    "year-1-east": '"date_done": "0001-01-01T00:00:00+01:00"',
    "year-9999-west": '"date_done": "9999-12-31T23:59:59-05:00"',
    "lone-surrogate-worker": '"worker": "celery@\\ud800"',
}


def _celery_raw(task_id: str, extra: str) -> str:
    body = json.dumps(dict(_GOOD, task_id=task_id, date_done="2026-01-01T00:00:00", retries=0))
    return body[:-1] + ", " + extra + "}"  # a later duplicate key wins in both JSON parsers


@pytest.mark.parametrize("worker", [False, True], ids=["in-process", "worker-process"])
def test_bad_values_make_one_record_unreadable_not_the_snapshot(redis_db, worker):
    from idemview.layouts.kv import load_kv_preset
    from idemview.ledger.redis_snapshot import connect_redis, snapshot

    url, raw = redis_db
    now = server_now(raw)
    for i in range(30):
        put_celery(raw, f"ok-{i}", "SUCCESS", done=now - timedelta(minutes=i), extended={"name": "shop.charge"})
    for name, extra in _CELERY_BAD.items():
        raw.set(f"celery-task-meta-{name}", _celery_raw(name, extra))
    c = connect_redis(url)
    try:
        engine, info = snapshot(c, load_kv_preset("celery-redis-extended"), url=url, batch=7, worker=worker)
    finally:
        c.connection_pool.disconnect()
    from sqlalchemy import text

    with engine.connect() as conn:
        keys = {r[0] for r in conn.execute(text("SELECT idempotency_key FROM operations"))}
        n_att = conn.execute(text("SELECT count(*) FROM attempts")).scalar()
        orphans = conn.execute(text("SELECT count(*) FROM attempts WHERE id NOT IN (SELECT id FROM operations)"))
        n_orphans = orphans.scalar()
    engine.dispose()
    assert keys == {f"ok-{i}" for i in range(30)}
    assert (info.scanned, info.loaded, info.undecodable) == (37, 30, len(_CELERY_BAD))
    assert (n_att, n_orphans) == (30, 0)


def test_bad_values_in_hashes_and_epoch_fields(redis_db):
    """The generic hash layout (attempts as text beyond 64 bits) and Powertools' epoch fields (ms beyond
    any calendar: an unknown time, the record still read) through the public opener."""
    from idemview.ledger.redis_snapshot import open_redis_ledger

    url, raw = redis_db
    now = server_now(raw)
    put_generic(raw, "pay", "good", status="completed", created_at=now, attempts="2")
    put_generic(raw, "pay", "huge", status="failed", created_at=now, attempts="9" * 30)
    put_generic(raw, "pay", "late", status="failed", created_at="9999-12-31T23:00:00-03:00", attempts="1")
    ledger = open_redis_ledger(url, layout="idem-generic")
    assert (ledger.snapshot.loaded, ledger.snapshot.undecodable) == (1, 2)
    assert [o.key for o in ledger.iter_operations()] == ["good"]

    raw.flushdb()
    good = {"status": "COMPLETED", "expiration": int(now.timestamp()) + 60}
    raw.set("fn.handler#aaa", json.dumps(good), ex=60)
    raw.set("fn.handler#bbb", json.dumps(dict(good, status="INPROGRESS", in_progress_expiration=1e30)), ex=60)
    raw.set("fn.handler#ccc", '{"status": "INPROGRESS", "in_progress_expiration": NaN}', ex=60)
    ledger = open_redis_ledger(url, layout="powertools-redis")
    ops = {o.key: o for o in ledger.iter_operations()}
    assert (ledger.snapshot.loaded, ledger.snapshot.undecodable) == (3, 0)
    assert sorted(ops) == ["aaa", "bbb", "ccc"]
    assert ops["bbb"].lock_expires_at is None and ops["ccc"].lock_expires_at is None


def test_redis_scan_json_fits_the_schema_and_counts_the_unreadable(redis_db, capsys):
    from idemview.cli import main
    from tests.scan_json import check_scan_json

    url, raw = redis_db
    now = server_now(raw)
    put_celery(raw, "ok", "FAILURE", done=now, extended={"name": "shop.charge", "retries": 6})
    raw.set("celery-task-meta-inf", _celery_raw("inf", _CELERY_BAD["inf-retries"]))
    assert main(["scan", url, "--layout", "celery-redis-extended", "--format", "json"]) == 0
    doc = check_scan_json(capsys.readouterr().out)
    assert (doc["operations"], doc["snapshot"]["undecodable"], doc["snapshot"]["loaded"]) == (1, 1, 1)
    assert {(f["kind"], f["key"]) for f in doc["findings"]} >= {("retry_storm", "ok"), ("unresolved_failure", "ok")}


def test_a_record_without_status_is_unknown_not_an_unmapped_value(redis_db):
    """Tester's note (DynamoDB, the same snapshot tables): a missing status showed as the raw value ''
    to map. It is unknown; a status the layout does not know is still reported unmapped."""
    from idemview.ledger.redis_snapshot import open_redis_ledger

    url, raw = redis_db
    raw.hset("idem:shop:k1", mapping={"created_at": "2026-01-01T00:00:00Z"})
    raw.hset("idem:shop:k2", mapping={"status": "weird", "created_at": "2026-01-01T00:00:00Z"})
    ledger = open_redis_ledger(url, layout="idem-generic")
    assert ledger.records("shop", "k1")[0].status.value == "unknown"
    assert ledger.unmapped_counts()["status"] == {"weird": 1}
