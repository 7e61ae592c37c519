"""Hatchet v1 (PostgreSQL only): ``v1_idempotency_key``, ``v1_task`` and ``v1_task_runtime`` as
sql/schema/v1-core.sql creates them (v1_task partitioned by inserted_at: one partition here, as Hatchet
creates one per day), with planted incidents and clean look-alikes; detection picks each preset. A running
task is judged by its own ``timeout_at`` (pkg/repository/sqlcv1/tasks.sql ListTasksToTimeout)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import create_engine, text

from idemview.ledger.connect import open_engine
from idemview.ledger.detect import detect
from tests.conftest import ANCHOR, _clear
from tests.ledgers import scan
from tests.presets.systems import SYSTEM_SCHEMAS

NOW = ANCHOR
M = timedelta(minutes=1)
H = timedelta(hours=1)
TENANT = "707d0855-80ab-4e1f-a156-f1c4546cbf52"

DDL = [
    """CREATE TABLE v1_idempotency_key (
        tenant_id UUID NOT NULL,
        key TEXT NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL,
        claimed_by_external_id UUID,
        inserted_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
        updated_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
        PRIMARY KEY (tenant_id, key))""",
    "CREATE INDEX v1_idempotency_key_expires_at_idx ON v1_idempotency_key (tenant_id, expires_at)",
    """CREATE TABLE v1_task (
        id bigint GENERATED ALWAYS AS IDENTITY,
        inserted_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
        tenant_id UUID NOT NULL,
        queue TEXT NOT NULL,
        action_id TEXT NOT NULL,
        step_id UUID NOT NULL,
        step_readable_id TEXT NOT NULL,
        workflow_id UUID NOT NULL,
        workflow_version_id UUID NOT NULL,
        workflow_run_id UUID NOT NULL,
        schedule_timeout TEXT NOT NULL,
        step_timeout TEXT,
        priority INTEGER DEFAULT 1,
        external_id UUID NOT NULL,
        display_name TEXT NOT NULL,
        input JSONB NOT NULL,
        retry_count INTEGER NOT NULL DEFAULT 0,
        internal_retry_count INTEGER NOT NULL DEFAULT 0,
        app_retry_count INTEGER NOT NULL DEFAULT 0,
        step_index BIGINT NOT NULL,
        additional_metadata JSONB,
        idempotency_key TEXT,
        is_dag_orchestrator BOOLEAN NOT NULL DEFAULT false,
        CONSTRAINT v1_task_pkey PRIMARY KEY (id, inserted_at)
    ) PARTITION BY RANGE(inserted_at)""",
    "CREATE TABLE v1_task_20261130 PARTITION OF v1_task FOR VALUES FROM ('2026-11-01') TO ('2026-12-01')",
    """CREATE TABLE v1_task_runtime (
        task_id bigint NOT NULL,
        task_inserted_at TIMESTAMPTZ NOT NULL,
        retry_count INTEGER NOT NULL,
        worker_id UUID,
        batch_id UUID,
        batch_size INTEGER,
        batch_index INTEGER,
        batch_key TEXT,
        tenant_id UUID NOT NULL,
        timeout_at TIMESTAMP(3) NOT NULL,
        evicted_at TIMESTAMPTZ DEFAULT NULL,
        CONSTRAINT v1_task_runtime_pkey PRIMARY KEY (task_id, task_inserted_at, retry_count))""",
    "CREATE INDEX v1_task_runtime_tenantId_timeoutAt_idx ON v1_task_runtime (tenant_id ASC, timeout_at ASC)",
]


@pytest.fixture
def pg(request):
    url = request.getfixturevalue("pg_url")
    eng = create_engine(url)
    with eng.begin() as c:
        for other in SYSTEM_SCHEMAS:
            c.execute(text(f'DROP SCHEMA IF EXISTS "{other}" CASCADE'))
        c.execute(text("DROP TABLE IF EXISTS v1_task CASCADE"))
        c.execute(text("DROP TABLE IF EXISTS v1_task_runtime CASCADE"))
    _clear(eng)
    with eng.begin() as c:
        for stmt in DDL:
            c.execute(text(stmt))
    yield eng, url
    with eng.begin() as c:
        c.execute(text("DROP TABLE IF EXISTS v1_task CASCADE"))
        c.execute(text("DROP TABLE IF EXISTS v1_task_runtime CASCADE"))
    _clear(eng)
    eng.dispose()


def uid(n):
    return f"00000000-0000-4000-8000-{n:012d}"


def put_keys(eng, rows):
    with eng.begin() as c:
        for key, inserted, expires, run in rows:
            c.execute(
                text(
                    "INSERT INTO v1_idempotency_key (tenant_id, key, expires_at, claimed_by_external_id, "
                    "inserted_at, updated_at) VALUES (:t, :k, :e, :r, :i, :i)"
                ),
                {"t": TENANT, "k": key, "e": expires, "r": run, "i": inserted},
            )


def put_tasks(eng, rows):
    with eng.begin() as c:
        for n, retries in rows:
            c.execute(
                text(
                    "INSERT INTO v1_task (inserted_at, tenant_id, queue, action_id, step_id, step_readable_id, "
                    "workflow_id, workflow_version_id, workflow_run_id, schedule_timeout, external_id, "
                    "display_name, input, retry_count, app_retry_count, step_index) VALUES (:at, :t, 'default', "
                    "'charge:charge', :s, 'charge', :w, :w, :r, '5m', :x, 'charge-1', '{}'::jsonb, :n, :n, 0)"
                ),
                {
                    "at": NOW - n * M,
                    "t": TENANT,
                    "s": uid(900),
                    "w": uid(901),
                    "r": uid(n),
                    "x": uid(100 + n),
                    "n": retries,
                },
            )


def test_hatchet_keys(pg):
    writable, url = pg
    put_keys(
        writable,
        [
            ("order-1", NOW - H, NOW + 23 * H, uid(1)),  # a claim in its window
            ("order-2", NOW - 2 * H, NOW - M, uid(2)),  # past its window, still kept: the cleanup is behind
        ],
    )
    got, fs = scan(url, "hatchet", NOW)
    assert got == {("expired_key", TENANT, "order-2")}
    assert fs[0].evidence[0]["expires_at"] == "2026-11-30T11:59:00Z"


def test_hatchet_keys_clean(pg):
    writable, url = pg
    put_keys(writable, [("order-1", NOW - H, NOW + 23 * H, uid(1)), ("order-3", NOW - M, NOW + H, uid(3))])
    assert scan(url, "hatchet", NOW)[0] == set()


def test_hatchet_tasks_attempts_are_retries_plus_one(pg):
    writable, url = pg
    put_tasks(writable, [(1, 0), (2, 4), (3, 5)])  # 1, 5 and 6 attempts
    got, fs = scan(url, "hatchet-tasks", NOW)
    assert got == {("retry_storm", TENANT, uid(103))}
    assert fs[0].evidence[0]["attempts"] == 6


def test_detect_picks_hatchet(pg):
    _writable, url = pg
    eng = open_engine(url)
    try:
        names = [m.layout.name for m in detect(eng) if m.confidence > 0.9]
    finally:
        eng.dispose()
    assert set(names[:2]) == {"hatchet", "hatchet-tasks"}, names


def put_runtime(eng, n, retry_count, timeout_at, evicted_at=None):
    """The runtime row queue.sql writes when task ``n``'s attempt ``retry_count`` is assigned to a worker:
    timeout_at = CURRENT_TIMESTAMP + the task's step_timeout (naive UTC, TIMESTAMP(3))."""
    with eng.begin() as c:
        c.execute(
            text(
                "INSERT INTO v1_task_runtime (task_id, task_inserted_at, retry_count, worker_id, tenant_id, "
                "timeout_at, evicted_at) SELECT id, inserted_at, :rc, :w, tenant_id, :to, :ev FROM v1_task "
                "WHERE external_id = :x"
            ),
            {
                "rc": retry_count,
                "w": uid(500),
                "to": timeout_at.replace(tzinfo=None),
                "ev": evicted_at,
                "x": uid(100 + n),
            },
        )


def test_hatchet_running_task_past_its_own_timeout_is_stuck(pg):
    """Planted: task 1 running 2 min past its own timeout_at; task 4 (second attempt) past its own. Look-alikes:
    task 2 with a 2 h step_timeout an hour in (60 s, Hatchet's default, would call it stuck), task 3 evicted
    (a durable task waiting: ListTasksToTimeout skips it), task 4's first attempt's left-over runtime row is
    not its running attempt, task 5 not running (no runtime row): status unknown, never stuck."""
    writable, url = pg
    put_tasks(writable, [(1, 0), (2, 0), (3, 0), (4, 1), (5, 0), (6, 1)])
    put_runtime(writable, 1, 0, NOW - 2 * M)
    put_runtime(writable, 2, 0, NOW + H)
    put_runtime(writable, 3, 0, NOW - H, evicted_at=NOW - 2 * H)
    put_runtime(writable, 4, 1, NOW - 30 * timedelta(seconds=1))
    put_runtime(writable, 6, 0, NOW - H)  # attempt 0 of task 6, which now runs attempt 1
    put_runtime(writable, 6, 1, NOW + 5 * M)
    got, fs = scan(url, "hatchet-tasks", NOW)
    assert got == {("stuck_in_progress", TENANT, uid(101)), ("stuck_in_progress", TENANT, uid(104))}
    ends = {f.key: f.evidence[0]["lock_expired_at"] for f in fs}
    assert ends == {uid(101): "2026-11-30T11:58:00Z", uid(104): "2026-11-30T11:59:30Z"}
    from idemview.layouts.layout import load_preset
    from idemview.ledger.reader import Ledger

    eng = open_engine(url)
    try:
        ops = {op.key: op for op in Ledger(eng, load_preset("hatchet-tasks")).iter_operations(now=NOW)}
    finally:
        eng.dispose()
    assert {k for k, o in ops.items() if o.status.value == "in_progress"} == {uid(100 + n) for n in (1, 2, 3, 4, 6)}
    assert ops[uid(105)].status.value == "unknown" and ops[uid(105)].lock_expires_at is None
    assert ops[uid(102)].lock_expires_at == NOW + H and ops[uid(103)].lock_expires_at is None
    assert ops[uid(106)].lock_expires_at == NOW + 5 * M


def test_hatchet_tasks_explicit_lock_timeout_is_not_the_tasks_own(pg):
    """--lock-timeout replaces the layout's default, never a stored per-task end: timeout_at still decides."""
    writable, url = pg
    put_tasks(writable, [(1, 0)])
    put_runtime(writable, 1, 0, NOW + H)
    assert scan(url, "hatchet-tasks", NOW, lock_timeout_s=1)[0] == set()


def test_hatchet_before_eviction_reads_timeout_at_all_the_same(pg):
    """Hatchet before v1.0.86 has no v1_task_runtime.evicted_at (migration 20260313020632 adds it): nothing
    is evicted then, and each running task is still judged by its own timeout_at."""
    writable, url = pg
    with writable.begin() as c:
        c.execute(text("ALTER TABLE v1_task_runtime DROP COLUMN evicted_at"))
    put_tasks(writable, [(1, 0), (2, 0)])
    with writable.begin() as c:
        for n, to in ((1, NOW - M), (2, NOW + M)):
            c.execute(
                text(
                    "INSERT INTO v1_task_runtime (task_id, task_inserted_at, retry_count, tenant_id, timeout_at) "
                    "SELECT id, inserted_at, 0, tenant_id, :to FROM v1_task WHERE external_id = :x"
                ),
                {"to": to.replace(tzinfo=None), "x": uid(100 + n)},
            )
    assert scan(url, "hatchet-tasks", NOW)[0] == {("stuck_in_progress", TENANT, uid(101))}
