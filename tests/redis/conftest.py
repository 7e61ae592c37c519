"""Redis fixtures: the real server on 127.0.0.1:6379 (``IDEMVIEW_REDIS_URL`` overrides), in a database
number of the tests' own (13, ``IDEMVIEW_REDIS_TEST_DB`` overrides) that only :func:`redis_db`
clears. Unreachable: skipped on a developer's machine, failed with ``CI=true``.

The helpers write values in the shapes the real projects write (read from their source):
Celery's ``_get_result_meta`` JSON under ``celery-task-meta-<task_id>``, Powertools'
RedisCachePersistenceLayer JSON under ``<function>#<md5>``, and the generic ``idem:<scope>:<key>`` hash.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import ON_CI

UTC = UTC
REDIS = os.environ.get("IDEMVIEW_REDIS_URL", "redis://127.0.0.1:6379")
TEST_DB = int(os.environ.get("IDEMVIEW_REDIS_TEST_DB", "13"))


@pytest.fixture
def redis_db():
    """(url of the test database, a plain writing client on it). The database is emptied before and
    after each test (FLUSHDB on this database number only). Test processes on one machine (parallel
    worktrees, CI) take turns: an exclusive file lock is held for the test's duration."""
    import fcntl
    import tempfile

    lock = open(os.path.join(tempfile.gettempdir(), f"idemview-redis-test-db{TEST_DB}.lock"), "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        yield from _redis_db()
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _redis_db():
    import redis

    client = redis.Redis.from_url(f"{REDIS}/{TEST_DB}")
    try:
        client.ping()
    except Exception as e:  # noqa: BLE001 - any failure means "no server"
        msg = f"Redis is not reachable at {REDIS}: {type(e).__name__}: {e}"
        if ON_CI:
            pytest.fail(msg + " (CI=true: server tests must run)")
        pytest.skip(msg)
    client.flushdb()
    yield f"{REDIS}/{TEST_DB}", client
    client.flushdb()
    client.close()


def celery_meta(
    task_id: str, status: str, *, done: datetime | None, result=None, traceback=None, extended: dict | None = None
) -> str:
    """The JSON Celery's KeyValueStoreBackend stores (celery/backends/base.py: _get_result_meta plus
    task_id from _store_result); date_done is ISO-8601 and only set for ready states."""
    meta = {
        "status": status,
        "result": result,
        "traceback": traceback,
        "children": [],
        "date_done": done.isoformat() if done is not None else None,
        "task_id": task_id,
    }
    if extended is not None:
        meta.update(
            {
                "name": extended["name"],
                "args": extended.get("args", []),
                "kwargs": extended.get("kwargs", {}),
                "worker": extended.get("worker", "celery@host1"),
                "retries": extended.get("retries", 0),
                "queue": extended.get("queue", "celery"),
            }
        )
    return json.dumps(meta)


def put_celery(client, task_id: str, status: str, *, done, ttl_s: int | None = 86400, **kw) -> None:
    key = f"celery-task-meta-{task_id}"
    client.set(key, celery_meta(task_id, status, done=done, **kw), ex=ttl_s)


def powertools_key(function: str, payload: dict) -> str:
    """``<function name>#<md5 of the payload>`` (BasePersistenceLayer._get_hashed_idempotency_key)."""
    h = hashlib.md5(json.dumps(payload, sort_keys=True).encode()).hexdigest()  # noqa: S324 - Powertools' default
    return f"{function}#{h}"


def put_powertools(
    client,
    key: str,
    status: str,
    *,
    expiration: datetime,
    in_progress_until: datetime | None = None,
    data=None,
    validation: str | None = None,
    ttl_s: int = 3600,
) -> None:
    """The JSON RedisCachePersistenceLayer writes: status, expiration (epoch s), in_progress_expiration
    (epoch ms, in progress), validation, data (completed: the response as a JSON string)."""
    item = {"status": status, "expiration": int(expiration.timestamp())}
    if in_progress_until is not None:
        item["in_progress_expiration"] = int(in_progress_until.timestamp() * 1000)
    if validation is not None:
        item["validation"] = validation
    if data is not None:
        item = {"data": json.dumps(data), "status": status, "expiration": int(expiration.timestamp())}
    client.set(key, json.dumps(item), ex=ttl_s)


def put_generic(client, scope: str, key: str, ttl_s: int | None = 86400, **fields) -> None:
    name = f"idem:{scope}:{key}"
    client.hset(name, mapping={k: (v.isoformat() if isinstance(v, datetime) else str(v)) for k, v in fields.items()})
    if ttl_s:
        client.expire(name, ttl_s)


def server_now(client) -> datetime:
    s, us = client.time()
    return datetime.fromtimestamp(s + us / 1e6, UTC)


__all__ = [
    "celery_meta",
    "put_celery",
    "powertools_key",
    "put_powertools",
    "put_generic",
    "server_now",
    "timedelta",
    "UTC",
]
