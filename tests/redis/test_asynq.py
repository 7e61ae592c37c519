"""Asynq (Go, so no library writes these fixtures here): task hashes written as the Lua scripts of
hibiken/asynq internal/rdb/rdb.go write them (enqueueCmd / enqueueUniqueCmd: HSET msg, state, pending_since,
unique_key; dequeue: state active; markAsComplete with Retention: state completed, ZADD completed, EXPIREAT;
retry / archive: state retry / archived), under the key names of internal/base/base.go
(asynq:{<queue>}:t:<id>, asynq:{<queue>}:unique:<type>:<md5 of payload>, the state lists and sets).
Planted: one unique task completed twice (its unique key was deleted at the first completion, so the
second enqueue went through) and an archived task; look-alikes: tasks without a unique key, a pending
retry, one completed unique task."""

from __future__ import annotations

import hashlib
import time

from idemview.domain.model import FindingKind as K
from idemview.findings.engine import FindingEngine
from tests.redis.conftest import server_now

Q = "critical"


def _unique(task_type: str, payload: bytes) -> str:
    return f"asynq:{{{Q}}}:unique:{task_type}:{hashlib.md5(payload).hexdigest()}"  # noqa: S324 - asynq's own


def _msg(task_type: str, payload: bytes, tid: str) -> bytes:
    """A TaskMessage protobuf (field 1 type, 2 payload, 3 id, 4 queue): bytes only, never decoded."""
    f = lambda n, b: bytes([n << 3 | 2, len(b)]) + b  # noqa: E731 - length-delimited fields
    return f(1, task_type.encode()) + f(2, payload) + f(3, tid.encode()) + f(4, Q.encode())


def put_task(raw, tid, state, *, task_type="payment:charge", payload=b'{"order":42}', unique=False, retain=0):
    key = f"asynq:{{{Q}}}:t:{tid}"
    fields = {"msg": _msg(task_type, payload, tid), "state": state}
    if state == "pending":
        fields["pending_since"] = str(time.time_ns())
    if unique:
        fields["unique_key"] = _unique(task_type, payload)
    raw.hset(key, mapping=fields)
    lists = {"pending": "pending", "active": "active"}
    sets = {"scheduled": "scheduled", "retry": "retry", "archived": "archived", "completed": "completed"}
    if state in lists:
        raw.lpush(f"asynq:{{{Q}}}:{lists[state]}", tid)
    else:
        raw.zadd(f"asynq:{{{Q}}}:{sets[state]}", {tid: int(time.time()) + retain})
    if state == "completed" and retain:
        raw.expireat(key, int(time.time()) + retain)


def open_ledger(url, layout=None):
    from idemview.ledger.redis_snapshot import open_redis_ledger

    return open_redis_ledger(url, layout=layout)


def test_asynq_planted(redis_db):
    url, raw = redis_db
    put_task(raw, "t-1", "completed", unique=True, retain=3600)  # first run of the unique charge
    put_task(raw, "t-2", "completed", unique=True, retain=3600)  # re-enqueued after it: ran twice
    put_task(raw, "t-3", "archived", task_type="email:send", payload=b"a")  # retries exhausted
    put_task(raw, "t-4", "pending", task_type="email:send", payload=b"b")
    put_task(raw, "t-5", "retry", task_type="email:send", payload=b"c")
    put_task(raw, "t-6", "active", task_type="report:build", payload=b"d", unique=True)
    put_task(raw, "t-7", "completed", task_type="report:build", payload=b"e", unique=True, retain=60)
    raw.set(_unique("report:build", b"d"), "t-6", ex=600)  # the held unique lock: not a task
    ledger = open_ledger(url)
    assert ledger.layout.name == "asynq", ledger.detection
    now = server_now(raw)
    fs = FindingEngine(ledger, now).run()
    got = {(f.kind.value, f.scope, f.key) for f in fs}
    assert got == {
        ("duplicate_effect", Q, _unique("payment:charge", b'{"order":42}')),
        ("unresolved_failure", Q, "t-3"),
    }
    assert ledger.records(Q, "t-4")[0].status.value == "new"
    # a task with a unique_key is keyed by it (its dedup id), one without by its task id
    assert ledger.records(Q, "t-6") == []
    held = ledger.records(Q, _unique("report:build", b"d"))[0]
    assert held.status.value == "in_progress"
    # the unique key (SET NX EX 600) names t-6: its TTL ends t-6's uniqueness window
    assert held.expires_at is not None and 0 < (held.expires_at - now).total_seconds() <= 600
    assert ledger.snapshot.joined["windows"] == 1
    assert ledger.records(Q, "t-5")[0].status.value == "new" and ledger.records(Q, "t-5")[0].raw_status == "retry"
    assert len(ledger.records(Q, _unique("payment:charge", b'{"order":42}'))) == 2
    done = ledger.records(Q, _unique("report:build", b"e"))[0]
    assert done.status.value == "completed" and done.expires_at is not None and done.expires_at > now
    nc = FindingEngine(ledger, now).unsupported()
    assert K.DUPLICATE_EFFECT not in nc


def test_asynq_without_retention_says_duplicates_cannot_be_checked(redis_db):
    url, raw = redis_db
    put_task(raw, "t-4", "pending", task_type="email:send", payload=b"b", unique=True)
    ledger = open_ledger(url, "asynq")
    now = server_now(raw)
    assert FindingEngine(ledger, now).run() == []
    assert "Retention" in FindingEngine(ledger, now).unsupported()[K.DUPLICATE_EFFECT]
