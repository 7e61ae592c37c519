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
