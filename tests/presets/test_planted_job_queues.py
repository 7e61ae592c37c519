"""Job-queue, task-result, inbox and outbox presets on fixtures built from each system's own table definitions
(real table and column
names, types mapped to SQLAlchemy Core), on SQLite, PostgreSQL and MariaDB where the system supports
that engine: every planted incident is found with the right kind, scope and key, a clean fixture
reports nothing, and detection picks the preset."""

from datetime import timedelta

import pytest
from sqlalchemy import (
    CHAR,
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Enum,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.dialects import mysql, postgresql

from idemview.findings.engine import FindingEngine
from idemview.ledger.connect import open_engine
from idemview.ledger.detect import detect
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load, scan

NOW = ANCHOR
M = timedelta(minutes=1)
H = timedelta(hours=1)
D = timedelta(days=1)
naive = lambda t: t.replace(tzinfo=None) if t is not None else None  # noqa: E731 - systems write naive UTC

TZ = DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), "mysql")  # aware where the engine can
NAIVE = DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")  # naive UTC
GUID = Uuid(as_uuid=False).with_variant(CHAR(36), "sqlite", "mysql")  # uuid / char(36) / text
JSONB = JSON().with_variant(postgresql.JSONB, "postgresql")


def engine_of(db):
    return db[0].dialect.name


def only(db, *engines, why):
    """Skip an engine the system itself does not support (``why`` says so)."""
    if engine_of(db) not in engines:
        pytest.skip(why)


def detected(url, name):
    """The detected layout (with the real schema and table names found); asserts it is ``name``."""
    eng = open_engine(url)
    try:
        matches = detect(eng)
    finally:
        eng.dispose()
    assert matches and matches[0].layout.name == name, [(m.layout.name, m.confidence) for m in matches]
    return matches[0]


def scan_detected(url, name, now=NOW):
    lay = detected(url, name).layout
    eng = open_engine(url)
    try:
        fs = FindingEngine(Ledger(eng, lay), now).run()
    finally:
        eng.dispose()
    return {(f.kind.value, f.scope, f.key) for f in fs}, fs


# ---------------------------------------------------------------------- django-celery-results


def dcr_md() -> MetaData:
    """django_celery_results/models.py TaskResult (Django field types per engine)."""
    md = MetaData()
    Table(
        "django_celery_results_taskresult",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("task_id", String(255), nullable=False, unique=True),
        Column("periodic_task_name", String(255)),
        Column("task_name", String(255)),
        Column("task_args", Text),
        Column("task_kwargs", Text),
        Column("status", String(50), nullable=False),
        Column("worker", String(100)),
        Column("content_type", String(128), nullable=False),
        Column("content_encoding", String(64), nullable=False),
        Column("result", Text),
        Column("date_created", TZ, nullable=False),
        Column("date_started", TZ),
        Column("date_done", TZ, nullable=False),
        Column("traceback", Text),
        Column("meta", Text),
        Index("django_cele_status_9b6201_idx", "status"),
        Index("django_cele_date_do_f59aad_idx", "date_done"),
    )
    return md


def dcr_row(i, task_id, status, created, done, started=None):
    return {
        "id": i,
        "task_id": task_id,
        "periodic_task_name": None,
        "task_name": "shop.tasks.capture_payment",
        "task_args": '"()"',
        "task_kwargs": f"\"{{'order_id': {i}}}\"",
        "status": status,
        "worker": "celery@w1",
        "content_type": "application/json",
        "content_encoding": "utf-8",
        "result": f'{{"charge": "ch_{i}"}}' if status == "SUCCESS" else None,
        "date_created": created,
        "date_started": started,
        "date_done": done,
        "traceback": "Traceback ...\nCardError: declined" if status == "FAILURE" else None,
        "meta": '{"children": []}',
    }


def dcr_clean():
    return [
        dcr_row(1, "3b0d1c4e-0000-4000-8000-000000000001", "SUCCESS", NOW - 12 * M, NOW - 11 * M),
        dcr_row(2, "3b0d1c4e-0000-4000-8000-000000000002", "STARTED", NOW - 6 * M, NOW - 5 * M, NOW - 5 * M),
        dcr_row(3, "3b0d1c4e-0000-4000-8000-000000000003", "RETRY", NOW - 30 * M, NOW - 20 * M, NOW - 29 * M),
        dcr_row(4, "3b0d1c4e-0000-4000-8000-000000000004", "PENDING", NOW - 1 * M, NOW - 1 * M),
    ]


def test_django_celery_results_planted(db):
    writable, url = db
    rows = dcr_clean() + [
        dcr_row(10, "stuck-0c4e-0000-4000-8000-000000000010", "STARTED", NOW - 3 * H, NOW - 3 * H, NOW - 3 * H),
        dcr_row(11, "failed-c4e-0000-4000-8000-000000000011", "FAILURE", NOW - 2 * H, NOW - 2 * H),
        dcr_row(12, "old-d1c4e-0000-4000-8000-000000000012", "SUCCESS", NOW - 31 * H, NOW - 30 * H),
    ]
    load(writable, dcr_md(), {"django_celery_results_taskresult": rows})
    got, fs = scan(url, "django-celery-results", NOW)
    assert got == {
        ("stuck_in_progress", "", "stuck-0c4e-0000-4000-8000-000000000010"),
        ("unresolved_failure", "", "failed-c4e-0000-4000-8000-000000000011"),
        ("expired_key", "", "old-d1c4e-0000-4000-8000-000000000012"),
    }
    exp = next(f for f in fs if f.kind.value == "expired_key")
    assert exp.evidence[0]["expires_at"] == "2026-11-30T06:00:00Z"  # date_done + result_expires (1 day)
    stuck = next(f for f in fs if f.kind.value == "stuck_in_progress")
    assert stuck.evidence[0]["lock_expired_at"] == "2026-11-30T10:00:00Z"


def test_django_celery_results_clean(db):
    writable, url = db
    load(writable, dcr_md(), {"django_celery_results_taskresult": dcr_clean()})
    assert scan(url, "django-celery-results", NOW)[0] == set()


# ------------------------------------------------------------------------------------ airflow

SID = String(250).with_variant(mysql.VARCHAR(250, charset="utf8mb3", collation="utf8mb3_bin"), "mysql")
AF_KEY = ("dag_id", "task_id", "run_id", "map_index")


def _ti_columns(history: bool):
    """Columns of task_instance (Airflow 3); task_instance_history has the same minus the lease."""
    cols = [
        Column("task_instance_id" if history else "id", GUID, primary_key=True),
        Column("task_id", SID, nullable=False),
        Column("dag_id", SID, nullable=False),
        Column("run_id", SID, nullable=False),
        Column("map_index", Integer, nullable=False, server_default=text("-1")),
        Column("start_date", TZ),
        Column("end_date", TZ),
        Column("duration", Float),
        Column("state", String(20)),
        Column("try_number", Integer, server_default=text("0")),
        Column("max_tries", Integer, server_default=text("-1")),
        Column("hostname", String(1000)),
        Column("unixname", String(1000)),
        Column("pool", String(256), nullable=False),
        Column("pool_slots", Integer, nullable=False),
        Column("queue", String(256)),
        Column("priority_weight", Integer),
        Column("operator", String(1000)),
        Column("custom_operator_name", String(1000)),
        Column("queued_dttm", TZ),
        Column("scheduled_dttm", TZ),
        Column("queued_by_job_id", Integer),
        Column("pid", Integer),
        Column("executor", String(1000)),
        Column("executor_config", LargeBinary),
        Column("updated_at", TZ),
        Column("rendered_map_index", String(250)),
        Column("context_carrier", JSON),
        Column("next_kwargs", JSON),
        Column("span_status", String(250), nullable=False, server_default="not_started"),
        Column("external_executor_id", SID),
        Column("trigger_id", Integer),
        Column("trigger_timeout", TZ if not history else NAIVE),
        Column("next_method", String(1000)),
        Column("task_display_name", String(2000)),
        Column("dag_version_id", GUID),
    ]
    if not history:
        cols.append(Column("last_heartbeat_at", TZ))
    return cols


def airflow_md() -> MetaData:
    md = MetaData()
    Table(
        "task_instance",
        md,
        *_ti_columns(False),
        UniqueConstraint(*AF_KEY, name="task_instance_composite_key"),
        Index("ti_state", "state"),
        Index("ti_heartbeat", "last_heartbeat_at"),
    )
    Table(
        "task_instance_history",
        md,
        *_ti_columns(True),
        UniqueConstraint(*AF_KEY, "try_number", name="task_instance_history_dtrt_uq"),
        ForeignKeyConstraint(
            list(AF_KEY),
            [f"task_instance.{c}" for c in AF_KEY],
            ondelete="CASCADE",
            onupdate="CASCADE",
            name="task_instance_history_ti_fkey",
        ),
        Index("idx_tih_dag_run", "dag_id", "run_id"),
    )
    return md


_uid = iter(range(1, 10_000))


def af_row(dag, task, state, try_number, *, start=None, end=None, heartbeat="none", history=False):
    r = {
        "task_instance_id" if history else "id": f"0190a1b2-0000-7000-8000-{next(_uid):012d}",
        "task_id": task,
        "dag_id": dag,
        "run_id": "scheduled__2026-11-30T00:00:00+00:00",
        "map_index": -1,
        "start_date": start,
        "end_date": end,
        "state": state,
        "try_number": try_number,
        "max_tries": 3,
        "hostname": "worker-1",
        "pool": "default_pool",
        "pool_slots": 1,
        "queue": "default",
        "operator": "PythonOperator",
        "updated_at": end or start,
        "span_status": "ended",
        "dag_version_id": "0190a1b2-0000-7000-8000-ffffffffffff",
    }
    if not history:
        r["last_heartbeat_at"] = (end or start) if heartbeat == "none" else heartbeat
    return r


def af_key(dag, task):
    return f"{dag}/scheduled__2026-11-30T00:00:00+00:00/{task}/-1"


def af_clean():
    ti = [
        af_row("billing", "charge", "success", 1, start=NOW - 50 * M, end=NOW - 49 * M),
        af_row("billing", "notify", "running", 1, start=NOW - 10 * M, heartbeat=NOW - 30 * timedelta(seconds=1)),
        # waiting for its retry: the heartbeat of the failed try is old, and that is fine
        af_row("billing", "export", "up_for_retry", 1, start=NOW - 40 * M, end=NOW - 20 * M),
        af_row("billing", "report", "success", 2, start=NOW - 15 * M, end=NOW - 14 * M),
        af_row("billing", "archive", "upstream_failed", 0),
        af_row("billing", "cleanup", "skipped", 0),
    ]
    hist = [af_row("billing", "report", "failed", 1, start=NOW - 30 * M, end=NOW - 29 * M, history=True)]
    return ti, hist


def test_airflow_planted(db):
    writable, url = db
    ti, hist = af_clean()
    ti += [
        af_row("ledger", "post", "running", 1, start=NOW - 2 * H, heartbeat=NOW - 20 * M),
        af_row("ledger", "reconcile", "failed", 4, start=NOW - 3 * H, end=NOW - 3 * H + M),
        af_row("ledger", "sync", "success", 7, start=NOW - 1 * H, end=NOW - 1 * H + M),
        af_row("ledger", "payout", "success", 3, start=NOW - 4 * H, end=NOW - 4 * H + M),
    ]
    hist += [
        af_row("ledger", "sync", "failed", n, start=NOW - 9 * H + n * M, end=NOW - 9 * H + n * M, history=True)
        for n in range(1, 7)
    ]
    # payout was cleared and re-run twice after it had succeeded: it paid out three times
    hist += [
        af_row("ledger", "payout", "success", n, start=NOW - (8 - n) * H, end=NOW - (8 - n) * H + M, history=True)
        for n in (1, 2)
    ]
    load(writable, airflow_md(), {"task_instance": ti, "task_instance_history": hist})
    got, fs = scan(url, "airflow", NOW)
    assert got == {
        ("stuck_in_progress", "", af_key("ledger", "post")),
        ("unresolved_failure", "", af_key("ledger", "reconcile")),
        ("retry_storm", "", af_key("ledger", "sync")),
        ("duplicate_effect", "", af_key("ledger", "payout")),
    }
    stuck = next(f for f in fs if f.kind.value == "stuck_in_progress")
    assert stuck.evidence[0]["lock_expired_at"] == "2026-11-30T11:45:00Z"  # heartbeat + 300 s
    storm = next(f for f in fs if f.kind.value == "retry_storm")
    assert storm.evidence[0]["attempts"] == 7
    eng = open_engine(url)
    led = Ledger(eng, detected(url, "airflow").layout)
    tries = led.attempts("", af_key("ledger", "sync"))
    assert [(a.number, a.outcome.value, a.worker) for a in tries] == [(n, "failed", "worker-1") for n in range(1, 7)]
    eng.dispose()


def test_airflow_clean(db):
    writable, url = db
    ti, hist = af_clean()
    load(writable, airflow_md(), {"task_instance": ti, "task_instance_history": hist})
    assert scan(url, "airflow", NOW)[0] == set()


# -------------------------------------------------------------------------- masstransit-inbox


def masstransit_md() -> MetaData:
    """InboxState.cs + ConfigureInboxStateEntity (EF Core provider types: uuid / char(36) / TEXT)."""
    md = MetaData()
    Table(
        "InboxState",
        md,
        Column("Id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
        Column("MessageId", GUID, nullable=False),
        Column("ConsumerId", GUID, nullable=False),
        Column("LockId", GUID, nullable=False),
        Column("RowVersion", LargeBinary),
        Column("Received", TZ, nullable=False),
        Column("ReceiveCount", Integer, nullable=False),
        Column("ExpirationTime", TZ),
        Column("Consumed", TZ),
        Column("Delivered", TZ),
        Column("LastSequenceNumber", BigInteger),
        UniqueConstraint("MessageId", "ConsumerId", name="AK_InboxState_MessageId_ConsumerId"),
        Index("IX_InboxState_Delivered", "Delivered"),
    )
    return md


CONSUMER_A = "6f2b8f1e-3c1a-4b7e-9d44-0a1b2c3d4e5f"
CONSUMER_B = "a1c2e3f4-0000-4000-8000-00000000000b"


def mt_row(i, msg, received, *, consumer=CONSUMER_A, delivered=None, count=0):
    return {
        "Id": i,
        "MessageId": msg,
        "ConsumerId": consumer,
        "LockId": f"00000000-0000-4000-8000-{i:012d}",
        "RowVersion": b"\x00\x00\x00\x00\x00\x00\x07\xd1",
        "Received": received,
        "ReceiveCount": count,
        "ExpirationTime": None,
        "Consumed": delivered,
        "Delivered": delivered,
        "LastSequenceNumber": None,
    }


def mt_clean():
    return [
        mt_row(1, "0c8e6a52-1111-4c1d-9e3a-000000000001", NOW - 12 * M, delivered=NOW - 11 * M),
        mt_row(2, "0c8e6a52-1111-4c1d-9e3a-000000000002", NOW - 1 * M),
        mt_row(
            3, "0c8e6a52-1111-4c1d-9e3a-000000000001", NOW - 6 * M, delivered=NOW - 5 * M, consumer=CONSUMER_B, count=2
        ),
    ]


def test_masstransit_inbox_planted(db):
    writable, url = db
    rows = mt_clean() + [
        mt_row(10, "0c8e6a52-2222-4c1d-9e3a-000000000010", NOW - 125 * M, delivered=NOW - 2 * H),
        mt_row(11, "0c8e6a52-2222-4c1d-9e3a-000000000011", NOW - 2 * H, count=3),
        mt_row(12, "0c8e6a52-2222-4c1d-9e3a-000000000012", NOW - 20 * M, delivered=NOW - 5 * M, count=8),
    ]
    load(writable, masstransit_md(), {"InboxState": rows})
    got, fs = scan(url, "masstransit-inbox", NOW)
    assert got == {
        ("expired_key", CONSUMER_A, "0c8e6a52-2222-4c1d-9e3a-000000000010"),
        ("stuck_in_progress", CONSUMER_A, "0c8e6a52-2222-4c1d-9e3a-000000000011"),
        ("retry_storm", CONSUMER_A, "0c8e6a52-2222-4c1d-9e3a-000000000012"),
    }
    exp = next(f for f in fs if f.kind.value == "expired_key")
    assert exp.evidence[0]["expires_at"] == "2026-11-30T10:30:00Z"  # Delivered + 30 min


def test_masstransit_inbox_clean(db):
    writable, url = db
    load(writable, masstransit_md(), {"InboxState": mt_clean()})
    assert scan(url, "masstransit-inbox", NOW)[0] == set()


# ------------------------------------------------------------------------- nservicebus-outbox


def nsb_md() -> MetaData:
    """Create_*.sql outbox script for endpoint "Sales" (table prefix "Sales_")."""
    md = MetaData()
    Table(
        "Sales_OutboxData",
        md,
        Column("MessageId", String(200), primary_key=True),
        Column(
            "Dispatched", Boolean().with_variant(mysql.BIT(1), "mysql"), nullable=False, server_default=text("false")
        ),
        Column("DispatchedAt", NAIVE),
        Column("PersistenceVersion", String(23), nullable=False),
        Column("Operations", JSONB, nullable=False),
        Index("Index_DispatchedAt", "DispatchedAt"),
        Index("Index_Dispatched", "Dispatched"),
    )
    return md


def nsb_row(msg, dispatched_at):
    return {
        "MessageId": msg,
        "Dispatched": dispatched_at is not None,
        "DispatchedAt": naive(dispatched_at),
        "PersistenceVersion": "8.1.0",
        "Operations": []
        if dispatched_at
        else [{"MessageId": msg + "-out", "Options": {}, "Body": "eyJPcmRlcklkIjo0Mn0=", "Headers": {}}],
    }


def nsb_clean():
    return [
        nsb_row("8a1f0d3e-5b2c-4f7a-9e61-000000000001", NOW - 1 * D),
        nsb_row("8a1f0d3e-5b2c-4f7a-9e61-000000000002", None),
    ]


@pytest.fixture
def nsb_db(db):
    # NServiceBus SQL Persistence supports SQL Server, PostgreSQL, MySQL and Oracle, not SQLite.
    only(db, "postgresql", "mysql", why="NServiceBus SQL Persistence has no SQLite dialect")
    return db


def test_nservicebus_outbox_planted(nsb_db):
    writable, url = nsb_db
    rows = nsb_clean() + [nsb_row("8a1f0d3e-5b2c-4f7a-9e61-000000000010", NOW - 8 * D)]
    load(writable, nsb_md(), {"Sales_OutboxData": rows})
    got, fs = scan_detected(url, "nservicebus-outbox")
    assert got == {("expired_key", "", "8a1f0d3e-5b2c-4f7a-9e61-000000000010")}
    assert fs[0].evidence[0]["expires_at"] == "2026-11-29T12:00:00Z"  # DispatchedAt + 7 days
    eng = open_engine(url)
    led = Ledger(eng, detected(url, "nservicebus-outbox").layout)
    assert [(o.key[-2:], o.status.value) for o in led.iter_operations()] == [
        ("01", "completed"),
        ("02", "in_progress"),
        ("10", "completed"),
    ]
    eng.dispose()


def test_nservicebus_outbox_clean(nsb_db):
    writable, url = nsb_db
    load(writable, nsb_md(), {"Sales_OutboxData": nsb_clean()})
    assert scan_detected(url, "nservicebus-outbox")[0] == set()


# --------------------------------------------------------------------------------------- oban

OBAN_STATES = ("available", "suspended", "scheduled", "executing", "retryable", "completed", "discarded", "cancelled")


def oban_md() -> MetaData:
    """Oban migrations v14 (PostgreSQL), myxql.ex (MySQL), sqlite.ex (SQLite)."""
    md = MetaData()
    ts = DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")  # utc_datetime_usec, written in UTC
    Table(
        "oban_jobs",
        md,
        Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
        Column(
            "state",
            Enum(*OBAN_STATES, name="oban_job_state").with_variant(Text, "sqlite"),
            nullable=False,
            server_default="available",
        ),
        Column("queue", Text().with_variant(String(255), "mysql"), nullable=False),
        Column("worker", Text().with_variant(String(255), "mysql"), nullable=False),
        Column("args", JSONB, nullable=False),
        Column("meta", JSONB),
        Column("tags", JSON().with_variant(postgresql.ARRAY(Text), "postgresql")),
        Column("errors", JSON().with_variant(postgresql.ARRAY(postgresql.JSONB), "postgresql"), nullable=False),
        Column("attempt", Integer, nullable=False, server_default="0"),
        Column("max_attempts", Integer, nullable=False, server_default="20"),
        Column("priority", Integer, nullable=False, server_default="0"),
        Column("inserted_at", ts, nullable=False),
        Column("scheduled_at", ts, nullable=False),
        Column("attempted_at", ts),
        Column("attempted_by", JSON().with_variant(postgresql.ARRAY(Text), "postgresql")),
        Column("completed_at", ts),
        Column("cancelled_at", ts),
        Column("discarded_at", ts),
        Index(
            "oban_jobs_state_queue_priority_scheduled_at_id_index", "state", "queue", "priority", "scheduled_at", "id"
        ),
    )
    return md


def oban_row(i, worker, state, inserted, *, args=None, attempt=1, attempted=None, errors=0, max_attempts=20):
    attempted = attempted or (inserted + 2 * timedelta(seconds=1) if attempt else None)
    return {
        "id": i,
        "state": state,
        "queue": "default",
        "worker": worker,
        "args": args if args is not None else {"order_id": 1000 + i},
        "meta": {},
        "tags": [],
        "errors": [
            {
                "attempt": n,
                "at": (inserted + n * M).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "error": f"** (RuntimeError) gateway timeout #{n}",
            }
            for n in range(1, errors + 1)
        ],
        "attempt": attempt,
        "max_attempts": max_attempts,
        "priority": 0,
        "inserted_at": naive(inserted),
        "scheduled_at": naive(inserted),
        "attempted_at": naive(attempted),
        "attempted_by": ["worker@host", "3f1c2a9e-0000-4000-8000-000000000001"] if attempt else None,
        "completed_at": naive(attempted + M) if state == "completed" else None,
        "cancelled_at": None,
        "discarded_at": naive(attempted + M) if state == "discarded" else None,
    }


CHARGE = "MyApp.Workers.ChargeCard"


def oban_clean():
    return [
        oban_row(1, CHARGE, "completed", NOW - 30 * M),
        oban_row(2, CHARGE, "executing", NOW - 6 * M, attempted=NOW - 5 * M),
        oban_row(3, CHARGE, "retryable", NOW - 3 * H, attempt=2, errors=1),
        oban_row(4, CHARGE, "available", NOW - 1 * M, attempt=0),
        # the same args two hours apart: two intents, outside the unique period
        oban_row(5, "MyApp.Workers.Digest", "completed", NOW - 3 * H, args={"user_id": 7}),
        oban_row(6, "MyApp.Workers.Digest", "completed", NOW - 1 * H, args={"user_id": 7}),
    ]


def test_oban_planted(db):
    writable, url = db
    rows = oban_clean() + [
        oban_row(10, CHARGE, "completed", NOW - 2 * H, args={"order_id": 42}),
        oban_row(11, CHARGE, "completed", NOW - 2 * H + 20 * timedelta(seconds=1), args={"order_id": 42}),
        oban_row(12, CHARGE, "executing", NOW - 3 * H, attempted=NOW - 2 * H),
        oban_row(13, CHARGE, "discarded", NOW - 5 * H, attempt=3, errors=3, max_attempts=3),
        oban_row(14, "MyApp.Workers.Sync", "completed", NOW - 4 * H, attempt=7, errors=6),
    ]
    load(writable, oban_md(), {"oban_jobs": rows})
    got, fs = scan(url, "oban", NOW)
    assert got == {
        ("duplicate_intent", CHARGE, "11"),
        ("stuck_in_progress", CHARGE, "12"),
        ("unresolved_failure", CHARGE, "13"),
        ("retry_storm", "MyApp.Workers.Sync", "14"),
    }
    dup = next(f for f in fs if f.kind.value == "duplicate_intent")
    assert dup.evidence[0]["earlier_key"] == "10"
    eng = open_engine(url)
    led = Ledger(eng, detected(url, "oban").layout)
    tries = led.attempts("MyApp.Workers.Sync", "14")  # errors decoded: jsonb[] on PostgreSQL, JSON text elsewhere
    assert [(a.number, a.outcome.value) for a in tries] == [(n, "failed") for n in range(1, 7)]
    assert tries[0].started_at == NOW - 4 * H + M and tries[5].error == "** (RuntimeError) gateway timeout #6"
    assert led.counts() == (11, 10)
    eng.dispose()


def test_oban_clean(db):
    writable, url = db
    load(writable, oban_md(), {"oban_jobs": oban_clean()})
    assert scan(url, "oban", NOW)[0] == set()


# -------------------------------------------------------------------------------------- river

RIVER_STATES = ("available", "cancelled", "completed", "discarded", "pending", "retryable", "running", "scheduled")


def river_md() -> MetaData:
    """river_job of the pgxv5 migrations (PostgreSQL) and of the SQLite driver. The SQLite fixture uses
    the JSON-text form of its json columns (before migration 007 turned them into SQLite JSONB blobs)."""
    md = MetaData()
    arr = lambda item: JSON().with_variant(postgresql.ARRAY(item), "postgresql")  # noqa: E731
    Table(
        "river_job",
        md,
        Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
        Column("args", JSONB, nullable=False),
        Column("attempt", SmallInteger, nullable=False, server_default="0"),
        Column("attempted_at", TZ),
        Column("attempted_by", arr(Text)),
        Column("created_at", TZ, nullable=False),
        Column("errors", arr(postgresql.JSONB)),
        Column("finalized_at", TZ),
        Column("kind", Text, nullable=False),
        Column("max_attempts", SmallInteger, nullable=False, server_default="25"),
        Column("metadata", JSONB, nullable=False),
        Column("priority", SmallInteger, nullable=False, server_default="1"),
        Column("queue", Text, nullable=False, server_default="default"),
        Column(
            "state",
            Enum(*RIVER_STATES, name="river_job_state").with_variant(Text, "sqlite"),
            nullable=False,
            server_default="available",
        ),
        Column("scheduled_at", TZ, nullable=False),
        Column("tags", arr(String(255)), nullable=False),
        Column("unique_key", LargeBinary),
        Column("unique_states", Integer().with_variant(postgresql.BIT(8), "postgresql")),
        Index("river_job_kind", "kind"),
        Index("river_job_state_and_finalized_at_index", "state", "finalized_at"),
    )
    return md


def river_row(i, kind, state, created, *, attempt=1, attempted=None, errors=0, unique=None):
    attempted = attempted or (created + timedelta(seconds=1) if attempt else None)
    final = state in ("completed", "cancelled", "discarded")
    return {
        "id": i,
        "args": {"invoice_id": 500 + i},
        "attempt": attempt,
        "attempted_at": attempted,
        "attempted_by": ["client-1"] if attempt else None,
        "created_at": created,
        "errors": [
            {
                "at": (created + n * M).isoformat().replace("+00:00", "Z"),
                "attempt": n,
                "error": f"charge failed: 503 #{n}",
                "trace": "main.go:42",
            }
            for n in range(1, errors + 1)
        ]
        or None,
        "finalized_at": attempted + M if final else None,
        "kind": kind,
        "max_attempts": 25,
        "metadata": {},
        "priority": 1,
        "queue": "default",
        "state": state,
        "scheduled_at": created,
        "tags": [],
        "unique_key": unique,
        "unique_states": None,
    }


@pytest.fixture
def river_db(db):
    # River's drivers are PostgreSQL (pgx, database/sql) and SQLite; there is no MySQL driver.
    only(db, "sqlite", "postgresql", why="River has no MySQL/MariaDB driver")
    return db


def river_clean():
    return [
        river_row(1, "charge_card", "completed", NOW - 40 * M, unique=bytes.fromhex("aa01")),
        river_row(2, "charge_card", "completed", NOW - 30 * M, unique=bytes.fromhex("aa02")),
        river_row(3, "charge_card", "running", NOW - 5 * M, attempted=NOW - 4 * M),
        river_row(4, "charge_card", "retryable", NOW - 3 * H, attempt=2, errors=2),
        river_row(5, "send_email", "completed", NOW - 20 * M),
        river_row(6, "send_email", "completed", NOW - 19 * M),
        river_row(7, "send_email", "available", NOW - 1 * M, attempt=0),
    ]


def test_river_planted(river_db):
    writable, url = river_db
    key = bytes.fromhex("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
    rows = river_clean() + [
        river_row(10, "charge_card", "completed", NOW - 2 * H, unique=key),
        river_row(11, "charge_card", "completed", NOW - 2 * H + 10 * M, unique=key),
        river_row(12, "charge_card", "running", NOW - 3 * H, attempted=NOW - 2 * H),
        river_row(13, "charge_card", "discarded", NOW - 9 * H, attempt=3, errors=3),
        river_row(14, "sync_ledger", "completed", NOW - 5 * H, attempt=8, errors=7),
    ]
    load(writable, river_md(), {"river_job": rows})
    got, fs = scan(url, "river", NOW)
    assert got == {
        ("duplicate_intent", "charge_card", "11"),
        ("stuck_in_progress", "charge_card", "12"),
        ("unresolved_failure", "charge_card", "13"),
        ("retry_storm", "sync_ledger", "14"),
    }
    dup = next(f for f in fs if f.kind.value == "duplicate_intent")
    assert dup.evidence[0]["intent_ref"] == key.hex() and dup.evidence[0]["earlier_key"] == "10"
    eng = open_engine(url)
    led = Ledger(eng, detected(url, "river").layout)
    tries = led.attempts("sync_ledger", "14")
    assert [a.number for a in tries] == list(range(1, 8)) and tries[6].error == "charge failed: 503 #7"
    assert tries[0].started_at == NOW - 5 * H + M
    eng.dispose()


def test_river_clean(river_db):
    writable, url = river_db
    load(writable, river_md(), {"river_job": river_clean()})
    assert scan(url, "river", NOW)[0] == set()


# ----------------------------------------------------------------------------------- good_job


def pg_only(db, system):
    only(db, "postgresql", why=f"{system} supports PostgreSQL only")


def good_job_md() -> MetaData:
    """create_good_jobs.rb.erb (+ the v4 columns): Rails types on PostgreSQL."""
    md = MetaData()
    ts = DateTime()  # Rails t.datetime: timestamp(6) without time zone, UTC
    Table(
        "good_jobs",
        md,
        Column("id", Uuid(as_uuid=False), primary_key=True),
        Column("queue_name", Text),
        Column("priority", Integer),
        Column("serialized_params", postgresql.JSONB),
        Column("scheduled_at", ts),
        Column("performed_at", ts),
        Column("finished_at", ts),
        Column("error", Text),
        Column("created_at", ts, nullable=False),
        Column("updated_at", ts, nullable=False),
        Column("active_job_id", Uuid(as_uuid=False)),
        Column("concurrency_key", Text),
        Column("cron_key", Text),
        Column("retried_good_job_id", Uuid(as_uuid=False)),
        Column("cron_at", ts),
        Column("batch_id", Uuid(as_uuid=False)),
        Column("batch_callback_id", Uuid(as_uuid=False)),
        Column("is_discrete", Boolean),
        Column("executions_count", Integer),
        Column("job_class", Text),
        Column("error_event", SmallInteger),
        Column("labels", postgresql.ARRAY(Text)),
        Column("locked_by_id", Uuid(as_uuid=False)),
        Column("locked_at", ts),
        Column("lock_type", SmallInteger),
        Index("index_good_jobs_on_active_job_id_and_created_at", "active_job_id", "created_at"),
    )
    Table(
        "good_job_executions",
        md,
        Column("id", Uuid(as_uuid=False), primary_key=True),
        Column("created_at", ts, nullable=False),
        Column("updated_at", ts, nullable=False),
        Column("active_job_id", Uuid(as_uuid=False), nullable=False),
        Column("job_class", Text),
        Column("queue_name", Text),
        Column("serialized_params", postgresql.JSONB),
        Column("scheduled_at", ts),
        Column("finished_at", ts),
        Column("error", Text),
        Column("error_event", SmallInteger),
        Column("error_backtrace", postgresql.ARRAY(Text)),
        Column("process_id", Uuid(as_uuid=False)),
        Column("duration", postgresql.INTERVAL),
        Index("index_good_job_executions_on_active_job_id_and_created_at", "active_job_id", "created_at"),
    )
    return md


def gj_id(i):
    return f"5d3c9a10-0000-4000-8000-{i:012d}"


def gj_job(i, cls, created, *, performed=None, finished=None, error=None, args=None, execs=None):
    """A good_jobs row and its executions: ``execs`` = list of (start, finish, error) tuples."""
    execs = execs if execs is not None else ([(performed, finished, error)] if performed else [])
    job = {
        "id": gj_id(i),
        "queue_name": "default",
        "priority": 0,
        "serialized_params": {
            "job_class": cls,
            "job_id": gj_id(i),
            "executions": len(execs),
            "arguments": args if args is not None else [{"_aj_globalid": f"gid://shop/Order/{i}"}],
        },
        "scheduled_at": naive(created),
        "performed_at": naive(performed),
        "finished_at": naive(finished),
        "error": error,
        "created_at": naive(created),
        "updated_at": naive(finished or performed or created),
        "active_job_id": gj_id(i),
        "is_discrete": True,
        "executions_count": len(execs),
        "job_class": cls,
        "error_event": 5 if error and finished else None,
        "labels": None,
    }
    ex = [
        {
            "id": f"7e000000-0000-4000-8000-{i:06d}{n:06d}",
            "created_at": naive(s),
            "updated_at": naive(f or s),
            "active_job_id": gj_id(i),
            "job_class": cls,
            "queue_name": "default",
            "scheduled_at": naive(s),
            "finished_at": naive(f),
            "error": e,
            "error_event": (3 if e else None),
            "process_id": gj_id(999),
        }
        for n, (s, f, e) in enumerate(execs, 1)
    ]
    return job, ex


def gj_rows(specs):
    jobs, execs = [], []
    for j, ex in specs:
        jobs.append(j)
        execs += ex
    return {"good_jobs": jobs, "good_job_executions": execs}


def gj_clean():
    return [
        gj_job(1, "ChargeJob", NOW - 30 * M, performed=NOW - 29 * M, finished=NOW - 28 * M),
        gj_job(2, "ChargeJob", NOW - 6 * M, performed=NOW - 5 * M),
        gj_job(3, "ChargeJob", NOW - 1 * M),
        gj_job(
            4,
            "ChargeJob",
            NOW - 2 * H,
            performed=NOW - 2 * H + M,
            finished=NOW - 100 * M,
            execs=[
                (NOW - 2 * H + M, NOW - 2 * H + 2 * M, "Stripe::APIConnectionError: timeout"),
                (NOW - 101 * M, NOW - 100 * M, None),
            ],
        ),
        # the same arguments a day apart: a daily job, not a duplicate
        gj_job(5, "DigestJob", NOW - 25 * H, performed=NOW - 25 * H, finished=NOW - 25 * H + M, args=[7]),
        gj_job(6, "DigestJob", NOW - 1 * H, performed=NOW - 1 * H, finished=NOW - 1 * H + M, args=[7]),
    ]


def test_good_job_planted(db):
    pg_only(db, "GoodJob")
    writable, url = db
    t = NOW - 4 * H
    specs = gj_clean() + [
        gj_job(10, "RefundJob", t, performed=t, finished=t + M, args=[{"_aj_globalid": "gid://shop/Refund/9"}]),
        gj_job(
            11,
            "RefundJob",
            t + 5 * M,
            performed=t + 5 * M,
            finished=t + 6 * M,
            args=[{"_aj_globalid": "gid://shop/Refund/9"}],
        ),
        gj_job(12, "ChargeJob", NOW - 3 * H, performed=NOW - 2 * H),
        gj_job(
            13,
            "ChargeJob",
            NOW - 5 * H,
            performed=NOW - 5 * H,
            finished=NOW - 5 * H + M,
            error="Stripe::CardError: Your card was declined.",
        ),
        gj_job(
            14,
            "SyncJob",
            NOW - 9 * H,
            performed=NOW - 2 * H,
            finished=NOW - 2 * H + M,
            execs=[(NOW - 9 * H + n * H, NOW - 9 * H + n * H + M, "Net::ReadTimeout") for n in range(6)]
            + [(NOW - 2 * H, NOW - 2 * H + M, None)],
        ),
        # executed twice successfully (lost lock): two successful executions of one job
        gj_job(
            15,
            "ChargeJob",
            NOW - 6 * H,
            performed=NOW - 6 * H,
            finished=NOW - 6 * H + 2 * M,
            execs=[(NOW - 6 * H, NOW - 6 * H + M, None), (NOW - 6 * H + M, NOW - 6 * H + 2 * M, None)],
        ),
    ]
    load(writable, good_job_md(), gj_rows(specs))
    got, fs = scan(url, "good_job", NOW)
    assert got == {
        ("duplicate_intent", "RefundJob", gj_id(11)),
        ("stuck_in_progress", "ChargeJob", gj_id(12)),
        ("unresolved_failure", "ChargeJob", gj_id(13)),
        ("retry_storm", "SyncJob", gj_id(14)),
        ("duplicate_effect", "ChargeJob", gj_id(15)),
    }
    eng = open_engine(url)
    led = Ledger(eng, detected(url, "good_job").layout)
    tries = led.attempts("SyncJob", gj_id(14))
    assert [a.outcome.value for a in tries] == ["failed"] * 6 + ["succeeded"]
    assert tries[0].error == "Net::ReadTimeout" and tries[0].started_at == NOW - 9 * H
    assert [o.status.value for o in led.records("ChargeJob", gj_id(3))] == ["new"]
    eng.dispose()


def test_good_job_clean(db):
    pg_only(db, "GoodJob")
    writable, url = db
    load(writable, good_job_md(), gj_rows(gj_clean()))
    assert scan(url, "good_job", NOW)[0] == set()


# ---------------------------------------------------------------------------------------- que


def que_md() -> MetaData:
    """lib/que/migrations (schema version 7)."""
    md = MetaData()
    Table(
        "que_jobs",
        md,
        Column("id", BigInteger, primary_key=True, autoincrement=True),
        Column("priority", SmallInteger, nullable=False, server_default="100"),
        Column("run_at", DateTime(timezone=True), nullable=False),
        Column("job_class", Text, nullable=False),
        Column("error_count", Integer, nullable=False, server_default="0"),
        Column("last_error_message", Text),
        Column("queue", Text, nullable=False, server_default="default"),
        Column("last_error_backtrace", Text),
        Column("finished_at", DateTime(timezone=True)),
        Column("expired_at", DateTime(timezone=True)),
        Column("args", postgresql.JSONB, nullable=False),
        Column("data", postgresql.JSONB, nullable=False),
        Column("job_schema_version", Integer, nullable=False),
        Column("kwargs", postgresql.JSONB, nullable=False),
        Index(
            "que_poll_idx",
            "job_schema_version",
            "queue",
            "priority",
            "run_at",
            "id",
            postgresql_where=text("finished_at IS NULL AND expired_at IS NULL"),
        ),
    )
    return md


def que_row(i, run_at, *, errors=0, finished=None, expired=None, cls="ChargeCard"):
    return {
        "id": i,
        "priority": 100,
        "run_at": run_at,
        "job_class": cls,
        "error_count": errors,
        "last_error_message": f"Faraday::TimeoutError: timeout #{errors}" if errors else None,
        "queue": "default",
        "last_error_backtrace": "app/jobs/charge_card.rb:12" if errors else None,
        "finished_at": finished,
        "expired_at": expired,
        "args": [{"order_id": 100 + i}],
        "data": {"tags": []},
        "job_schema_version": 2,
        "kwargs": {},
    }


def que_clean():
    return [
        que_row(1, NOW - 10 * M, finished=NOW - 9 * M),
        que_row(2, NOW + 5 * M),  # scheduled
        que_row(3, NOW + 2 * M, errors=2),  # errored, retry pending
        que_row(4, NOW - 1 * M),
    ]  # ready (perhaps running: advisory lock)


def test_que_planted(db):
    pg_only(db, "Que")
    writable, url = db
    rows = que_clean() + [
        que_row(10, NOW - 2 * H, errors=16, expired=NOW - 2 * H),
        que_row(11, NOW + 10 * M, errors=7, cls="SyncLedger"),
    ]
    load(writable, que_md(), {"que_jobs": rows})
    got, fs = scan(url, "que", NOW)
    # expired_at = retries exhausted: a failure (and a retry storm), never an expired key
    assert got == {("unresolved_failure", "", "10"), ("retry_storm", "", "10"), ("retry_storm", "", "11")}
    storm = next(f for f in fs if f.kind.value == "retry_storm" and f.key == "11")
    assert storm.evidence[0]["attempts"] == 7


def test_que_clean(db):
    pg_only(db, "Que")
    writable, url = db
    load(writable, que_md(), {"que_jobs": que_clean()})
    assert scan(url, "que", NOW)[0] == set()


# ----------------------------------------------------------------------------------- hangfire


def hangfire_md(schema=None, lower=False) -> MetaData:
    """Hangfire.SqlServer Install.sql (schema 9: PascalCase, datetime = naive UTC) or, with ``lower``,
    Hangfire.PostgreSql Install.v23.sql (lower-case names, timestamptz, jsonb)."""
    n = (lambda s: s.lower()) if lower else (lambda s: s)  # noqa: E731
    ts = DateTime(timezone=True) if lower else NAIVE
    payload = postgresql.JSONB if lower else Text
    md = MetaData(schema=schema)
    Table(
        n("Job"),
        md,
        Column(n("Id"), BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
        Column(n("StateId"), BigInteger),
        Column(n("StateName"), String(20) if not lower else Text),
        Column(n("InvocationData"), payload, nullable=False),
        Column(n("Arguments"), payload, nullable=False),
        Column(n("CreatedAt"), ts, nullable=False),
        Column(n("ExpireAt"), ts),
        *([Column("updatecount", Integer, nullable=False, server_default="0")] if lower else []),
        Index(f"IX_HangFire_Job_StateName{'_pg' if lower else ''}", n("StateName")),
    )
    Table(
        n("State"),
        md,
        Column(n("Id"), BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
        Column(n("JobId"), BigInteger, nullable=False),
        Column(n("Name"), String(20) if not lower else Text, nullable=False),
        Column(n("Reason"), String(100) if not lower else Text),
        Column(n("CreatedAt"), ts, nullable=False),
        Column(n("Data"), payload),
        *([Column("updatecount", Integer, nullable=False, server_default="0")] if lower else []),
    )
    Table(
        n("JobParameter"),
        md,
        Column(n("JobId"), BigInteger, primary_key=True),
        Column(n("Name"), String(40), primary_key=True),
        Column(n("Value"), Text),
    )
    return md


def hf_rows(lower=False):
    """Jobs and their state histories: (id, [(state, reason, minutes after creation)], created)."""
    ok = [("Enqueued", None, 0), ("Processing", None, 1), ("Succeeded", None, 2)]

    def retries(k, total):
        out = [("Enqueued", None, 0)]
        for i in range(1, k + 1):
            out += [
                ("Processing", None, 3 * i - 2),
                ("Scheduled", f"Retry attempt {i} of {total}: Timeout expired.", 3 * i - 1),
                ("Enqueued", "Triggered by DelayedJobScheduler", 3 * i),
            ]
        return out

    clean = [
        (1, ok, NOW - 30 * M),
        (2, [("Enqueued", None, 0), ("Processing", None, 1)], NOW - 3 * M),
        (3, [("Scheduled", None, 0)], NOW - 10 * M),  # BackgroundJob.Schedule
        (4, retries(1, 10) + [("Processing", None, 4), ("Succeeded", None, 5)], NOW - 2 * H),
        (5, [("Enqueued", None, 0)], NOW - 1 * M),
    ]
    planted = [
        (
            10,
            ok + [("Enqueued", "Triggered via Dashboard UI", 40), ("Processing", None, 41), ("Succeeded", None, 42)],
            NOW - 5 * H,
        ),  # ran (and succeeded) twice
        (
            11,
            retries(3, 3)
            + [("Processing", None, 10), ("Failed", "An exception occurred during performance of the job.", 11)],
            NOW - 6 * H,
        ),
        (12, retries(6, 10) + [("Processing", None, 19), ("Succeeded", None, 20)], NOW - 7 * H),
    ]
    return clean, planted


def hf_load(writable, specs, schema=None, lower=False):
    n = (lambda s: s.lower()) if lower else (lambda s: s)  # noqa: E731
    jobs, states, params = [], [], []
    sid = 0
    for job_id, hist, created in specs:
        for name, reason, minute in hist:
            sid += 1
            at = created + minute * M
            states.append(
                {
                    n("Id"): sid,
                    n("JobId"): job_id,
                    n("Name"): name,
                    n("Reason"): reason,
                    n("CreatedAt"): at if lower else naive(at),
                    n("Data"): None,
                }
            )
        retry_count = sum(1 for s in hist if (s[1] or "").startswith("Retry attempt"))
        jobs.append(
            {
                n("Id"): job_id,
                n("StateId"): sid,
                n("StateName"): hist[-1][0],
                n("InvocationData"): '{"t":"Shop.Billing, Shop","m":"Charge","p":["System.Int64"]}',
                n("Arguments"): f'["{job_id * 100}"]',
                n("CreatedAt"): created if lower else naive(created),
                n("ExpireAt"): None,
            }
        )
        if retry_count:
            params.append({n("JobId"): job_id, n("Name"): "RetryCount", n("Value"): str(retry_count)})
    if lower:
        for r in jobs:
            r["invocationdata"] = {"t": "Shop.Billing, Shop", "m": "Charge"}
            r["arguments"] = [str(r["id"] * 100)]
    load(writable, hangfire_md(schema, lower), {n("Job"): jobs, n("State"): states, n("JobParameter"): params})


@pytest.fixture
def hangfire_db(db):
    """The SQL Server layout ([HangFire] schema, PascalCase) on each engine: in a "HangFire" schema on
    PostgreSQL, in the connected database on SQLite and MariaDB (neither has SQL Server schemas)."""
    writable, url = db
    schema = "HangFire" if engine_of(db) == "postgresql" else None
    if schema:
        with writable.begin() as c:
            c.execute(text('CREATE SCHEMA IF NOT EXISTS "HangFire"'))
    yield writable, url, schema
    if schema:
        with writable.begin() as c:
            c.execute(text('DROP SCHEMA "HangFire" CASCADE'))


def test_hangfire_planted(hangfire_db):
    writable, url, schema = hangfire_db
    clean, planted = hf_rows()
    hf_load(writable, clean + planted, schema)
    match = detected(url, "hangfire")
    assert match.layout.schema == schema and match.confidence == 1.0
    got, fs = scan_detected(url, "hangfire")
    assert got == {("duplicate_effect", "", "10"), ("unresolved_failure", "", "11"), ("retry_storm", "", "12")}
    eng = open_engine(url)
    led = Ledger(eng, match.layout)
    tries = led.attempts("", "11")
    assert [(a.outcome.value, a.error[:15] if a.error else None) for a in tries] == [
        ("failed", "Retry attempt 1"),
        ("failed", "Retry attempt 2"),
        ("failed", "Retry attempt 3"),
        ("failed", "An exception oc"),
    ]
    assert tries[0].finished_at == NOW - 6 * H + 2 * M
    storm = next(f for f in fs if f.kind.value == "retry_storm")
    assert storm.evidence[0]["attempts"] == 7
    eng.dispose()


def test_hangfire_clean(hangfire_db):
    writable, url, schema = hangfire_db
    hf_load(writable, hf_rows()[0], schema)
    assert scan_detected(url, "hangfire")[0] == set()


@pytest.fixture
def hangfire_pg_db(db):
    only(db, "postgresql", why="Hangfire.PostgreSql is a PostgreSQL storage")
    writable, url = db
    with writable.begin() as c:
        c.execute(text("CREATE SCHEMA IF NOT EXISTS hangfire"))
    yield writable, url
    with writable.begin() as c:
        c.execute(text("DROP SCHEMA hangfire CASCADE"))


def test_hangfire_postgresql_planted(hangfire_pg_db):
    writable, url = hangfire_pg_db
    clean, planted = hf_rows()
    hf_load(writable, clean + planted, "hangfire", lower=True)
    assert detected(url, "hangfire-postgresql").layout.schema == "hangfire"
    got, _ = scan(url, "hangfire-postgresql", NOW)
    assert got == {("duplicate_effect", "", "10"), ("unresolved_failure", "", "11"), ("retry_storm", "", "12")}


def test_hangfire_postgresql_clean(hangfire_pg_db):
    writable, url = hangfire_pg_db
    hf_load(writable, hf_rows()[0], "hangfire", lower=True)
    assert scan(url, "hangfire-postgresql", NOW)[0] == set()


# ---------------------------------------------------------------------------------- detection

DETECT = [
    (dcr_md, "django-celery-results", None),
    (airflow_md, "airflow", None),
    (masstransit_md, "masstransit-inbox", None),
    (nsb_md, "nservicebus-outbox", ("postgresql", "mysql")),
    (oban_md, "oban", None),
    (river_md, "river", ("sqlite", "postgresql")),
    (good_job_md, "good_job", ("postgresql",)),
    (que_md, "que", ("postgresql",)),
]


@pytest.mark.parametrize("md,preset,engines", DETECT, ids=[d[1] for d in DETECT])
def test_detect_picks_the_preset(db, md, preset, engines):
    if engines:
        only(db, *engines, why=f"{preset}: the system does not support this engine")
    writable, url = db
    load(writable, md(), {})
    m = detected(url, preset)
    assert m.confidence == 1.0


def test_detect_hangfire_variants(db):
    """Same table names, different case: the exact spelling decides."""
    only(db, "postgresql", why="both Hangfire storages side by side need PostgreSQL schemas")
    writable, url = db
    with writable.begin() as c:
        c.execute(text("CREATE SCHEMA hangfire"))
    try:
        hf_load(writable, [], "hangfire", lower=True)
        assert detected(url, "hangfire-postgresql").layout.schema == "hangfire"
        eng = open_engine(url)
        names = [m.layout.name for m in detect(eng)]
        eng.dispose()
        assert names[:2] == ["hangfire-postgresql", "hangfire"]
    finally:
        with writable.begin() as c:
            c.execute(text("DROP SCHEMA hangfire CASCADE"))


def test_detect_nothing_for_an_unrelated_schema(db):
    writable, url = db
    md = MetaData()
    Table(
        "customers",
        md,
        Column("id", Integer, primary_key=True),
        Column("email", String(200)),
        Column("created_at", DateTime),
    )
    Table(
        "invoices",
        md,
        Column("id", Integer, primary_key=True),
        Column("customer_id", Integer),
        Column("state", String(20)),
        Column("total_cents", BigInteger),
    )
    load(writable, md, {})
    eng = open_engine(url)
    assert detect(eng) == []
    eng.dispose()
