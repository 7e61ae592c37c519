"""Trigger.dev (PostgreSQL only) on a fixture built in its own schema: the ``TaskRun`` and
``TaskRunAttempt`` tables as Prisma creates them from internal-packages/database/prisma/schema.prisma
(quoted camelCase names, ``timestamp(3)`` without time zone holding UTC, the enums ``TaskRunStatus``,
``RunEngineVersion`` and ``TaskRunAttemptStatus``, the unique index on (runtimeEnvironmentId,
taskIdentifier, idempotencyKey)). Only the scalar columns the preset and its neighbours use are written;
relations are plain text ids. Planted incidents are found with the right kind and key, clean look-alikes
report nothing; V1 and V2 runs count attempts each by their own rule."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import (
    Column,
    DateTime,
    Enum,
    Float,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    create_engine,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.detect import detect
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR, _clear
from tests.ledgers import load, scan
from tests.presets.systems import SYSTEM_SCHEMAS

NOW = ANCHOR
S = timedelta(seconds=1)
M = timedelta(minutes=1)
H = timedelta(hours=1)
ENV = "cm_env_prod_0001"

RUN_STATUS = (
    "DELAYED",
    "PENDING",
    "PENDING_VERSION",
    "WAITING_FOR_DEPLOY",
    "DEQUEUED",
    "EXECUTING",
    "WAITING_TO_RESUME",
    "RETRYING_AFTER_FAILURE",
    "PAUSED",
    "CANCELED",
    "INTERRUPTED",
    "COMPLETED_SUCCESSFULLY",
    "COMPLETED_WITH_ERRORS",
    "SYSTEM_FAILURE",
    "CRASHED",
    "EXPIRED",
    "TIMED_OUT",
)
ATTEMPT_STATUS = ("PENDING", "EXECUTING", "PAUSED", "FAILED", "CANCELED", "COMPLETED")


@pytest.fixture
def pg(request):
    url = request.getfixturevalue("pg_url")
    eng = create_engine(url)
    with eng.begin() as c:
        for other in SYSTEM_SCHEMAS:
            c.execute(text(f'DROP SCHEMA IF EXISTS "{other}" CASCADE'))
    _clear(eng)
    with eng.begin() as c:  # Prisma's enum types outlive the tables _clear drops
        for t in ("TaskRunStatus", "RunEngineVersion", "TaskRunAttemptStatus"):
            c.execute(text(f'DROP TYPE IF EXISTS "{t}"'))
    yield eng, url
    _clear(eng)
    eng.dispose()


def ts():
    return DateTime(timezone=False)  # Prisma DateTime: timestamp(3) without time zone, UTC


def trigger_md() -> MetaData:
    md = MetaData()
    run = Table(
        "TaskRun",
        md,
        Column("id", Text, primary_key=True),
        Column("number", Integer, nullable=False, server_default="0"),
        Column("friendlyId", Text, nullable=False, unique=True),
        Column("engine", Enum("V1", "V2", name="RunEngineVersion"), nullable=False, server_default="V1"),
        Column("status", Enum(*RUN_STATUS, name="TaskRunStatus"), nullable=False, server_default="PENDING"),
        Column("statusReason", Text),
        Column("idempotencyKey", Text),
        Column("idempotencyKeyExpiresAt", ts()),
        Column("idempotencyKeyOptions", JSONB),
        Column("taskIdentifier", Text, nullable=False),
        Column("payload", Text, nullable=False),
        Column("payloadType", Text, nullable=False, server_default="application/json"),
        Column("traceId", Text, nullable=False),
        Column("spanId", Text, nullable=False),
        Column("runtimeEnvironmentId", Text, nullable=False),
        Column("projectId", Text, nullable=False),
        Column("queue", Text, nullable=False),
        Column("attemptNumber", Integer),
        Column("createdAt", ts(), nullable=False, server_default=text("CURRENT_TIMESTAMP")),
        Column("updatedAt", ts(), nullable=False),
        Column("runTags", ARRAY(Text)),
        Column("startedAt", ts()),
        Column("executedAt", ts()),
        Column("completedAt", ts()),
        Column("lockedAt", ts()),
        Column("lockedById", Text),
        Column("usageDurationMs", Integer, nullable=False, server_default="0"),
        Column("costInCents", Float, nullable=False, server_default="0"),
        Column("maxAttempts", Integer),
        Column("maxDurationInSeconds", Integer),
        Column("output", Text),
        Column("outputType", Text, nullable=False, server_default="application/json"),
        Column("error", JSONB),
    )
    Index(
        "TaskRun_runtimeEnvironmentId_taskIdentifier_idempotencyKey_key",
        run.c.runtimeEnvironmentId,
        run.c.taskIdentifier,
        run.c.idempotencyKey,
        unique=True,
    )
    att = Table(
        "TaskRunAttempt",
        md,
        Column("id", Text, primary_key=True),
        Column("number", Integer, nullable=False, server_default="0"),
        Column("friendlyId", Text, nullable=False, unique=True),
        Column("taskRunId", Text, nullable=False),
        Column("backgroundWorkerId", Text, nullable=False),
        Column("backgroundWorkerTaskId", Text, nullable=False),
        Column("runtimeEnvironmentId", Text, nullable=False),
        Column("queueId", Text, nullable=False),
        Column("status", Enum(*ATTEMPT_STATUS, name="TaskRunAttemptStatus"), nullable=False, server_default="PENDING"),
        Column("createdAt", ts(), nullable=False, server_default=text("CURRENT_TIMESTAMP")),
        Column("updatedAt", ts(), nullable=False),
        Column("startedAt", ts()),
        Column("completedAt", ts()),
        Column("usageDurationMs", Integer, nullable=False, server_default="0"),
        Column("error", JSONB),
        Column("output", Text),
        Column("outputType", Text, nullable=False, server_default="application/json"),
    )
    Index("TaskRunAttempt_taskRunId_number_key", att.c.taskRunId, att.c.number, unique=True)
    return md


class Runs:
    def __init__(self):
        self.runs, self.atts = [], []

    def run(self, n, status, created, *, key=None, task="charge-order", engine="V2", attempt=None, **kw):
        naive = lambda t: t.replace(tzinfo=None) if t else None  # noqa: E731
        self.runs.append(
            {
                "id": f"cm_run_{n:04d}",
                "friendlyId": f"run_{n:04d}",
                "engine": engine,
                "status": status,
                "idempotencyKey": key,
                "idempotencyKeyExpiresAt": naive(kw.get("key_expires")),
                "taskIdentifier": task,
                "payload": f'{{"orderId": {n}}}',
                "traceId": f"t{n}",
                "spanId": f"s{n}",
                "runtimeEnvironmentId": kw.get("env", ENV),
                "projectId": "cm_proj_1",
                "queue": f"task/{task}",
                "attemptNumber": attempt,
                "createdAt": naive(created),
                "updatedAt": naive(kw.get("completed") or created),
                "startedAt": naive(kw.get("started")),
                "completedAt": naive(kw.get("completed")),
                "maxDurationInSeconds": kw.get("max_duration"),
                "output": '{"ok": true}' if status == "COMPLETED_SUCCESSFULLY" else None,
                "error": {"type": "BUILT_IN_ERROR", "message": "boom"} if status == "COMPLETED_WITH_ERRORS" else None,
            }
        )
        return self

    def attempts(self, n, statuses, at):
        """V1 runs: one TaskRunAttempt row per attempt, numbered from 1."""
        for i, st in enumerate(statuses, start=1):
            t = (at + i * M).replace(tzinfo=None)
            self.atts.append(
                {
                    "id": f"cm_att_{n:04d}_{i}",
                    "number": i,
                    "friendlyId": f"attempt_{n:04d}_{i}",
                    "taskRunId": f"cm_run_{n:04d}",
                    "backgroundWorkerId": "bw_1",
                    "backgroundWorkerTaskId": "bwt_1",
                    "runtimeEnvironmentId": ENV,
                    "queueId": "q_1",
                    "status": st,
                    "updatedAt": t,
                    "startedAt": t,
                    "completedAt": t + timedelta(seconds=30) if st not in ("PENDING", "EXECUTING") else None,
                }
            )
        return self

    def load(self, writable):
        load(writable, trigger_md(), {"TaskRun": self.runs, "TaskRunAttempt": self.atts})


def clean():
    r = Runs()
    day = timedelta(days=1)
    # keyed, completed, key still in its window
    r.run(1, "COMPLETED_SUCCESSFULLY", NOW - H, key="order-1", attempt=1, completed=NOW - H + M, key_expires=NOW + day)
    # the same key in another task and in another environment: other scopes
    r.run(2, "COMPLETED_SUCCESSFULLY", NOW - H, key="order-1", task="send-receipt", attempt=1, completed=NOW - H + M)
    r.run(3, "COMPLETED_SUCCESSFULLY", NOW - H, key="order-1", env="cm_env_stg", attempt=1, completed=NOW - H + M)
    # a run whose key was cleared after it FAILED, and the new run under the key: #4 failed, key re-used
    r.run(4, "COMPLETED_WITH_ERRORS", NOW - 3 * H, attempt=3, completed=NOW - 3 * H + 5 * M)
    r.run(5, "COMPLETED_SUCCESSFULLY", NOW - 2 * H, key="order-4", attempt=2, completed=NOW - 2 * H + M)
    # executing within its own max duration; waiting to resume for hours (a wait.for): no lock
    r.run(6, "EXECUTING", NOW - 10 * M, attempt=1, started=NOW - 10 * M, max_duration=3600)
    r.run(7, "WAITING_TO_RESUME", NOW - 5 * H, attempt=1, started=NOW - 5 * H, max_duration=60)
    # a V1 run: attemptNumber is not its count, its attempts are rows (2: failed, then completed)
    r.run(8, "COMPLETED_SUCCESSFULLY", NOW - 4 * H, engine="V1", attempt=None, completed=NOW - 4 * H + 5 * M)
    r.attempts(8, ["FAILED", "COMPLETED"], NOW - 4 * H)
    return r


def planted():
    r = clean()
    # EXECUTING past its own 5-minute max duration: the worker is gone
    r.run(10, "EXECUTING", NOW - H, key="sync-9", attempt=1, started=NOW - H, max_duration=300)
    # a key whose dedup window lapsed, the run still holding it
    r.run(
        11,
        "COMPLETED_SUCCESSFULLY",
        NOW - 40 * H,
        key="invoice-3",
        attempt=1,
        completed=NOW - 40 * H + M,
        key_expires=NOW - 16 * H,
    )
    # V2: attempt 7 (RETRYING) - a storm by its counter
    r.run(12, "RETRYING_AFTER_FAILURE", NOW - 2 * H, attempt=7)
    # V1: 7 attempt rows - a storm by its rows
    r.run(13, "COMPLETED_SUCCESSFULLY", NOW - 6 * H, engine="V1", completed=NOW - 5 * H)
    r.attempts(13, ["FAILED"] * 6 + ["COMPLETED"], NOW - 6 * H)
    # V1: one run whose attempts COMPLETED twice (re-run after a success): a duplicate effect
    r.run(14, "COMPLETED_SUCCESSFULLY", NOW - 7 * H, key="charge-77", engine="V1", completed=NOW - 6 * H)
    r.attempts(14, ["COMPLETED", "COMPLETED"], NOW - 7 * H)
    # a failure nobody retried
    r.run(15, "CRASHED", NOW - 2 * H, key="refund-5", attempt=1, completed=NOW - 2 * H + M)
    return r


def test_trigger_dev_planted(pg):
    writable, url = pg
    planted().load(writable)
    got, fs = scan(url, "trigger-dev", NOW)
    scope = f"{ENV}/charge-order"
    assert got == {
        ("stuck_in_progress", scope, "sync-9"),
        ("expired_key", scope, "invoice-3"),
        ("retry_storm", scope, "#cm_run_0012"),
        ("retry_storm", scope, "#cm_run_0013"),
        ("duplicate_effect", scope, "charge-77"),
        ("unresolved_failure", scope, "refund-5"),
        ("unresolved_failure", scope, "#cm_run_0004"),
    }
    stuck = next(f for f in fs if f.kind.value == "stuck_in_progress")
    assert stuck.evidence[0]["lock_expired_at"] == "2026-11-30T11:05:00Z"  # startedAt + its own 300 s


def test_trigger_dev_clean(pg):
    writable, url = pg
    r = clean()
    r.runs = [x for x in r.runs if x["id"] != "cm_run_0004"]  # the failed run is a finding of its own
    r.load(writable)
    assert scan(url, "trigger-dev", NOW)[0] == set()


def test_trigger_dev_versions_count_attempts_by_their_own_rule(pg):
    writable, url = pg
    planted().load(writable)
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("trigger-dev"))
        ops = {op.key: op for op in led.iter_operations(now=NOW)}
        v1 = led.attempts(f"{ENV}/charge-order", "#cm_run_0008")
        unsupported = {k.value for k in FindingEngine(led, NOW).unsupported()}
    finally:
        eng.dispose()
    assert ops["#cm_run_0012"].attempt_count == 7  # V2: attemptNumber
    assert ops["#cm_run_0008"].attempt_count is None  # V1: its count is its attempt rows
    assert [(a.number, a.outcome.value) for a in v1] == [(1, "failed"), (2, "succeeded")]
    assert ops["invoice-3"].expires_at.isoformat() == "2026-11-29T20:00:00+00:00"
    assert "duplicate_effect" not in unsupported


def test_detect_picks_trigger_dev(pg):
    writable, url = pg
    load(writable, trigger_md(), {})
    eng = open_engine(url)
    try:
        matches = detect(eng)
    finally:
        eng.dispose()
    assert matches and matches[0].layout.name == "trigger-dev", [(m.layout.name, m.confidence) for m in matches]
    assert matches[0].confidence > 0.9
