"""Integration, workflow, webhook and billing presets (issue 5) on fixtures built from each system's own table
definitions (its real
table and column names, types mapped to SQLAlchemy Core): every planted incident is found with the
right kind and key, a clean fixture reports nothing, and detection picks the preset.

Engines: Camel, Spring Integration and Solid Queue run on SQLite, PostgreSQL and MariaDB (all three
systems support them). Medusa v1 ran on PostgreSQL (SQLite for development): both. DBOS keeps its system
database on PostgreSQL (schema dbos) or SQLite: both. pg-boss, Procrastinate, Convoy and Lago are
PostgreSQL-only systems: PostgreSQL only (their schemas pgboss / convoy are created in the test
database)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Enum,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Numeric,
    String,
    Table,
    Text,
    create_engine,
    text,
)
from sqlalchemy.dialects.postgresql import BYTEA, JSONB, UUID

from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset, parse_layout
from idemview.ledger.connect import open_engine
from idemview.ledger.detect import detect
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR, _clear
from tests.ledgers import load, scan

NOW = ANCHOR
H = timedelta(hours=1)
M = timedelta(minutes=1)
naive = lambda t: t.replace(tzinfo=None)  # noqa: E731 - naive UTC, as Rails / Camel (UTC JVM) write
ms = lambda t: int(t.timestamp() * 1000)  # noqa: E731 - DBOS epoch milliseconds


def _engine(request, tmp_path, name):
    if name == "sqlite":
        path = tmp_path / "ledger.db"
        return create_engine(f"sqlite:///{path}"), str(path)
    url = request.getfixturevalue("pg_url" if name == "postgresql" else "mysql_url")
    eng = create_engine(url)
    if name == "postgresql":
        with eng.begin() as c:
            for s in ("pgboss", "convoy", "dbos"):
                c.execute(text(f"DROP SCHEMA IF EXISTS {s} CASCADE"))
    _clear(eng)
    return eng, url


@pytest.fixture
def pg(request, tmp_path):
    eng, url = _engine(request, tmp_path, "postgresql")
    yield eng, url
    eng.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def pg_or_sqlite(request, tmp_path):
    eng, url = _engine(request, tmp_path, request.param)
    yield eng, url
    eng.dispose()


def scan_layout(url, layout, now=NOW):
    eng = open_engine(url)
    try:
        fs = FindingEngine(Ledger(eng, layout), now).run()
    finally:
        eng.dispose()
    return {(f.kind.value, f.scope, f.key) for f in fs}, fs


def detected(url):
    eng = open_engine(url)
    try:
        return detect(eng)
    finally:
        eng.dispose()


def unsupported(url, layout):
    eng = open_engine(url)
    try:
        return {k.value for k in FindingEngine(Ledger(eng, layout), NOW).unsupported()}
    finally:
        eng.dispose()


# ------------------------------------------------------------------------------------- camel

CAMEL_DDL = (
    "CREATE TABLE CAMEL_MESSAGEPROCESSED (processorName VARCHAR(255), messageId VARCHAR(100), "
    "createdAt TIMESTAMP NULL)"
)  # Camel's default create string (NULL added for MariaDB)


def camel_load(writable, rows):
    with writable.begin() as c:
        c.execute(text("DROP TABLE IF EXISTS CAMEL_MESSAGEPROCESSED"))
        c.execute(text(CAMEL_DDL))  # unquoted, as Camel runs it: lower case on PostgreSQL
        for p, m, at in rows:
            c.execute(
                text("INSERT INTO CAMEL_MESSAGEPROCESSED (processorName, messageId, createdAt) VALUES (:p, :m, :t)"),
                {"p": p, "m": m, "t": naive(at)},
            )


def camel_clean():
    return [
        ("orderConsumer", "ID:broker-1-40213-1700000000000-1:1:1:1:1", NOW - 3 * H),
        ("orderConsumer", "ID:broker-1-40213-1700000000000-1:1:1:1:2", NOW - 2 * H),
        ("invoiceConsumer", "ID:broker-1-40213-1700000000000-1:1:1:1:1", NOW - 2 * H),
    ]  # other scope


def test_camel_planted(db):
    writable, url = db
    dup = "ID:broker-1-40213-1700000000000-1:1:1:1:9"
    camel_load(
        writable,
        camel_clean()
        + [("orderConsumer", dup, NOW - 10 * M), ("orderConsumer", dup, NOW - 10 * M + timedelta(seconds=2))],
    )
    got, fs = scan(url, "camel", NOW)
    assert got == {("duplicate_effect", "orderConsumer", dup)}
    assert sorted(e["created_at"] for e in fs[0].evidence) == ["2026-11-30T11:50:00Z", "2026-11-30T11:50:02Z"]
    # the JVM zone: the same naive wall times read as Europe/Berlin (UTC+1 in November)
    lay = parse_layout(load_preset("camel").text.replace('zone = "UTC"', 'zone = "Europe/Berlin"'))
    _, fs = scan_layout(url, lay)
    assert sorted(e["created_at"] for e in fs[0].evidence) == ["2026-11-30T10:50:00Z", "2026-11-30T10:50:02Z"]


def test_camel_clean(db):
    writable, url = db
    camel_load(writable, camel_clean())
    assert scan(url, "camel", NOW)[0] == set()


# ------------------------------------------------------------------------ spring-integration

SPRING_DDL = (
    "CREATE TABLE INT_METADATA_STORE (METADATA_KEY VARCHAR(255) NOT NULL, "
    "METADATA_VALUE VARCHAR(4000), REGION VARCHAR(100) NOT NULL, "
    "constraint INT_METADATA_STORE_PK primary key (METADATA_KEY, REGION))"
)


def test_spring_integration_nothing_to_report(db):
    """The primary key rules out duplicates and there is no time, state or expiry: the preset reads
    keys and values, and no finding kind can fire."""
    writable, url = db
    with writable.begin() as c:
        c.execute(text("DROP TABLE IF EXISTS INT_METADATA_STORE"))
        c.execute(text(SPRING_DDL))
        c.execute(
            text(
                "INSERT INTO INT_METADATA_STORE (METADATA_KEY, METADATA_VALUE, REGION) VALUES "
                "('order-1001', '19ad1b6c400', 'DEFAULT'), ('order-1002', '19ad1b70280', 'DEFAULT'), "
                "('order-1001', '19ad1b6c401', 'billing')"
            )
        )
    assert scan(url, "spring-integration", NOW)[0] == set()
    eng = open_engine(url)
    led = Ledger(eng, load_preset("spring-integration"))
    (op,) = led.records("billing", "order-1001")
    eng.dispose()
    assert op.status.value == "completed" and op.response.value == "19ad1b6c401"
    assert {
        "replay_after_expiry",
        "expired_key",
        "key_conflict",
        "duplicate_intent",
        "stuck_in_progress",
        "retry_storm",
    } <= unsupported(url, load_preset("spring-integration"))


# ------------------------------------------------------------------------------------ medusa


def medusa_md() -> MetaData:
    """packages/medusa/src/models/idempotency-key.ts (TypeORM; jsonb/timestamptz on PostgreSQL,
    text/datetime on SQLite through DbAwareColumn)."""
    md = MetaData()
    Table(
        "idempotency_key",
        md,
        Column("id", String, primary_key=True),
        Column("idempotency_key", String, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("locked_at", DateTime(timezone=True)),
        Column("request_method", String),
        Column("request_params", JSON().with_variant(JSONB, "postgresql")),
        Column("request_path", String),
        Column("response_code", Integer),
        Column("response_body", JSON().with_variant(JSONB, "postgresql")),
        Column("recovery_point", String, nullable=False, server_default="started"),
        Index("IDX_idempotency_key_unique", "idempotency_key", unique=True),
    )
    return md


def med_row(n, key, created, point="finished", code=200, locked=None):
    return {
        "id": f"ikey_01HF{n:022d}",
        "idempotency_key": key,
        "created_at": created,
        "locked_at": locked,
        "request_method": "POST",
        "request_params": {"cart_id": f"cart_{n}"},
        "request_path": "/store/carts/cart_x/complete",
        "response_code": code if point == "finished" else None,
        "response_body": {"type": "order"} if point == "finished" else None,
        "recovery_point": point,
    }


def medusa_clean():
    return [
        med_row(1, "5c1a1f9e-0b8e-4c9a-9a3e-000000000001", NOW - 3 * H),
        med_row(2, "5c1a1f9e-0b8e-4c9a-9a3e-000000000002", NOW - H),
        med_row(
            3,
            "5c1a1f9e-0b8e-4c9a-9a3e-000000000003",
            NOW - timedelta(milliseconds=500),
            point="started",
            locked=NOW - timedelta(milliseconds=500),
        ),  # lock still fresh (< 1 s)
        med_row(4, "5c1a1f9e-0b8e-4c9a-9a3e-000000000004", NOW - 5 * M, point="payment_authorized"),
    ]  # released


def test_medusa_planted(pg_or_sqlite):
    writable, url = pg_or_sqlite
    rows = medusa_clean() + [
        med_row(10, "stuck-5c1a-4c9a-9a3e-000000000010", NOW - 20 * M, point="payment_authorized", locked=NOW - 20 * M),
        med_row(11, "declined-5c1a-4c9a-9a3e-00000000011", NOW - 2 * H, code=402),
    ]
    load(writable, medusa_md(), {"idempotency_key": rows})
    got, fs = scan(url, "medusa", NOW)
    assert got == {
        ("stuck_in_progress", "", "stuck-5c1a-4c9a-9a3e-000000000010"),
        ("unresolved_failure", "", "declined-5c1a-4c9a-9a3e-00000000011"),
    }
    stuck = next(f for f in fs if f.kind.value == "stuck_in_progress")
    assert stuck.evidence[0]["lock_expired_at"] == "2026-11-30T11:40:01Z"  # locked_at + 1 s
    assert stuck.evidence[0]["raw_status"] == "payment_authorized"


def test_medusa_clean(pg_or_sqlite):
    writable, url = pg_or_sqlite
    load(writable, medusa_md(), {"idempotency_key": medusa_clean()})
    assert scan(url, "medusa", NOW)[0] == set()


# -------------------------------------------------------------------------------------- lago


def lago_md() -> MetaData:
    """lago-api app/models/idempotency_record.rb (schema annotation), PostgreSQL."""
    md = MetaData()
    Table(
        "idempotency_records",
        md,
        Column("id", UUID(as_uuid=False), primary_key=True),
        Column("idempotency_key", BYTEA, nullable=False),
        Column("resource_type", String),
        Column("resource_id", UUID(as_uuid=False)),
        Column("organization_id", UUID(as_uuid=False)),
        Column("created_at", DateTime(timezone=False), nullable=False),
        Column("updated_at", DateTime(timezone=False), nullable=False),
        Index("index_idempotency_records_on_idempotency_key", "idempotency_key", unique=True),
    )
    return md


ORG = "6f0c1a7e-2d3b-4c5d-8e9f-000000000001"


def test_lago_nothing_to_report(pg):
    """A unique binary key linked to the resource it created: no finding kind can fire."""
    writable, url = pg
    rows = [
        {
            "id": f"00000000-0000-4000-8000-00000000000{i}",
            "idempotency_key": bytes([0xAB, 0xCD, i]),
            "resource_type": "Invoice",
            "resource_id": f"11111111-0000-4000-8000-00000000000{i}",
            "organization_id": ORG,
            "created_at": naive(NOW - i * H),
            "updated_at": naive(NOW - i * H),
        }
        for i in range(1, 4)
    ]
    load(writable, lago_md(), {"idempotency_records": rows})
    assert scan(url, "lago", NOW)[0] == set()
    eng = open_engine(url)
    (op,) = Ledger(eng, load_preset("lago")).records(ORG, "\\xabcd02")
    eng.dispose()
    assert op.kind == "Invoice" and op.effect_ref == "11111111-0000-4000-8000-000000000002"
    assert op.created_at.isoformat() == "2026-11-30T10:00:00+00:00"


# ----------------------------------------------------------------------------------- pg-boss

JOB_STATES = ("created", "retry", "active", "completed", "cancelled", "failed")


def pgboss_md() -> MetaData:
    """pg-boss src/plans.ts createTableJob (v10+; the LIST partitioning by name is left out)."""
    md = MetaData()
    Table(
        "job",
        md,
        Column("id", UUID(as_uuid=False), primary_key=True),
        Column("name", Text, primary_key=True),
        Column("priority", Integer, nullable=False, server_default="0"),
        Column("data", JSONB),
        Column("state", Enum(*JOB_STATES, name="job_state", schema="pgboss"), nullable=False, server_default="created"),
        Column("retry_limit", Integer, nullable=False, server_default="2"),
        Column("retry_count", Integer, nullable=False, server_default="0"),
        Column("retry_delay", Integer, nullable=False, server_default="0"),
        Column("retry_backoff", Boolean, nullable=False, server_default="false"),
        Column("retry_delay_max", Integer),
        Column("expire_seconds", Integer, nullable=False, server_default="900"),
        Column("deletion_seconds", Integer, nullable=False, server_default="604800"),
        Column("singleton_key", Text),
        Column("singleton_on", DateTime(timezone=False)),
        Column("group_id", Text),
        Column("group_tier", Text),
        Column("start_after", DateTime(timezone=True), nullable=False, server_default=text("now()")),
        Column("created_on", DateTime(timezone=True), nullable=False, server_default=text("now()")),
        Column("started_on", DateTime(timezone=True)),
        Column("completed_on", DateTime(timezone=True)),
        Column(
            "keep_until", DateTime(timezone=True), nullable=False, server_default=text("now() + interval '14 days'")
        ),
        Column("output", JSONB),
        Column("dead_letter", Text),
        Column("policy", Text),
        Column("heartbeat_on", DateTime(timezone=True)),
        Column("heartbeat_seconds", Integer),
        schema="pgboss",
    )
    return md


def boss_row(n, queue, state, created, *, key=None, started=None, completed=None, retries=0, output=None, slot=None):
    return {
        "id": f"0b8e4c9a-9a3e-4000-8000-{n:012d}",
        "name": queue,
        "data": {"orderId": n},
        "state": state,
        "retry_count": retries,
        "singleton_key": key,
        "created_on": created,
        "singleton_on": slot.replace(tzinfo=None) if slot else None,
        "start_after": created,
        "started_on": started,
        "completed_on": completed,
        "keep_until": created + timedelta(days=14),
        "output": output,
        "policy": "standard",
    }


def boss_load(writable, rows):
    with writable.begin() as c:
        c.execute(text("CREATE SCHEMA IF NOT EXISTS pgboss"))
    load(writable, pgboss_md(), {"job": rows})


def boss_clean():
    ok = {"sent": True}
    return [
        boss_row(
            1,
            "send-receipt",
            "completed",
            NOW - 3 * H,
            key="order-1",
            started=NOW - 3 * H,
            completed=NOW - 3 * H + M,
            output=ok,
        ),
        boss_row(
            2,
            "charge-card",
            "completed",
            NOW - 3 * H,
            key="order-1",
            started=NOW - 3 * H,
            completed=NOW - 3 * H + M,
            output=ok,
        ),  # same key, other queue
        boss_row(3, "send-receipt", "active", NOW - 5 * M, started=NOW - 5 * M),
        boss_row(4, "send-receipt", "created", NOW - M),
        boss_row(
            5,
            "charge-card",
            "completed",
            NOW - 4 * H,
            key="order-2",
            started=NOW - 4 * H,
            completed=NOW - 4 * H + 15 * M,
            retries=2,
            output=ok,
        ),
        boss_row(
            6,
            "charge-card",
            "completed",
            NOW - 2 * H,
            key="order-2",
            started=NOW - 2 * H,
            completed=NOW - 2 * H + M,
            output=ok,
        ),
    ]  # one singleton_key, no slot: intended repeats


def test_pgboss_planted(pg):
    writable, url = pg
    rows = boss_clean() + [
        boss_row(
            10,
            "send-receipt",
            "completed",
            NOW - 6 * H,
            key="order-77",
            started=NOW - 6 * H,
            completed=NOW - 6 * H + M,
            output={"sent": True},
            slot=NOW - 6 * H,
        ),
        boss_row(
            11,
            "send-receipt",
            "completed",
            NOW - 6 * H,
            key="order-77",
            started=NOW - 5 * H,
            completed=NOW - 5 * H + M,
            output={"sent": True},
            slot=NOW - 6 * H,
        ),  # same slot
        boss_row(12, "charge-card", "active", NOW - H, started=NOW - H),
        boss_row(
            13,
            "charge-card",
            "failed",
            NOW - 2 * H,
            started=NOW - 2 * H,
            completed=NOW - 2 * H + 15 * M,
            retries=2,
            output={"value": {"message": "job timed out"}},
        ),
        boss_row(
            14,
            "send-receipt",
            "completed",
            NOW - 8 * H,
            started=NOW - 8 * H,
            completed=NOW - 7 * H,
            retries=7,
            output={"sent": True},
        ),
    ]
    boss_load(writable, rows)
    got, fs = scan(url, "pg-boss", NOW)
    assert got == {
        ("duplicate_effect", "send-receipt", "order-77/2026-11-30 06:00:00"),
        ("stuck_in_progress", "charge-card", "#0b8e4c9a-9a3e-4000-8000-000000000012"),
        ("unresolved_failure", "charge-card", "#0b8e4c9a-9a3e-4000-8000-000000000013"),
        ("retry_storm", "send-receipt", "#0b8e4c9a-9a3e-4000-8000-000000000014"),
    }
    stuck = next(f for f in fs if f.kind.value == "stuck_in_progress")
    assert stuck.evidence[0]["lock_expired_at"] == "2026-11-30T11:15:00Z"  # started_on + 900 s
    assert "expired_key" in unsupported(url, load_preset("pg-boss"))  # keep_until is a purge time


def test_pgboss_attempts_are_retries_plus_one(pg):
    """retry_count counts retries: a job that ran once has 0, so attempts = retry_count + 1; a job still
    'created' has made none (found by a tester: every count was one short, and a storm was flagged late)."""
    from idemview.layouts.layout import load_preset as _lp
    from idemview.ledger.connect import open_engine, parse_url
    from idemview.ledger.reader import Ledger

    writable, url = pg
    rows = [
        boss_row(1, "send-receipt", "completed", NOW - H, started=NOW - H, completed=NOW - H + M),
        boss_row(2, "send-receipt", "completed", NOW - H, started=NOW - H, completed=NOW - H + M, retries=5),
        boss_row(3, "send-receipt", "created", NOW - M),
    ]
    boss_load(writable, rows)
    eng = open_engine(parse_url(url))
    try:
        led = Ledger(eng, _lp("pg-boss"))
        got = {op.key[-2:]: op.attempt_count for op in led.iter_operations(now=NOW)}
        assert got == {"01": 1, "02": 6, "03": None}
        assert led.counts() == (3, 7)
    finally:
        eng.dispose()
    # 6 attempts > the threshold of 5: a retry storm now, where retry_count 5 alone was not
    got, _ = scan(url, "pg-boss", NOW)
    assert ("retry_storm", "send-receipt", "#0b8e4c9a-9a3e-4000-8000-000000000002") in got


def test_pgboss_clean(pg):
    writable, url = pg
    boss_load(writable, boss_clean())
    assert scan(url, "pg-boss", NOW)[0] == set()


# ------------------------------------------------------------------------------ procrastinate

PROC_STATUS = ("todo", "doing", "succeeded", "failed", "cancelled", "aborting", "aborted")
PROC_EVENTS = (
    "deferred",
    "started",
    "deferred_for_retry",
    "failed",
    "succeeded",
    "cancelled",
    "abort_requested",
    "aborted",
    "scheduled",
    "retried",
)


def proc_md() -> MetaData:
    """procrastinate/sql/schema.sql: procrastinate_jobs and procrastinate_events (workers left out)."""
    md = MetaData()
    Table(
        "procrastinate_jobs",
        md,
        Column("id", BigInteger, primary_key=True),
        Column("queue_name", String(128), nullable=False),
        Column("task_name", String(128), nullable=False),
        Column("priority", Integer, nullable=False, server_default="0"),
        Column("lock", Text),
        Column("queueing_lock", Text),
        Column("args", JSONB, nullable=False, server_default="{}"),
        Column("status", Enum(*PROC_STATUS, name="procrastinate_job_status"), nullable=False, server_default="todo"),
        Column("scheduled_at", DateTime(timezone=True)),
        Column("attempts", Integer, nullable=False, server_default="0"),
        Column("abort_requested", Boolean, nullable=False, server_default="false"),
        Column("worker_id", BigInteger),
    )
    Table(
        "procrastinate_events",
        md,
        Column("id", BigInteger, primary_key=True),
        Column("job_id", BigInteger, ForeignKey("procrastinate_jobs.id", ondelete="CASCADE"), nullable=False),
        Column("type", Enum(*PROC_EVENTS, name="procrastinate_job_event_type")),
        Column("at", DateTime(timezone=True), server_default=text("now()")),
    )
    return md


class Proc:
    def __init__(self):
        self.jobs, self.events = [], []

    def job(self, jid, task, status, at, ends, *, qlock=None):
        """``ends``: the events ending each attempt, in order (a 'started' precedes each)."""
        self.jobs.append(
            {
                "id": jid,
                "queue_name": "default",
                "task_name": task,
                "queueing_lock": qlock,
                "args": {"order_id": jid},
                "status": status,
                "attempts": len(ends),
            }
        )
        t = at
        self.events.append({"id": len(self.events) + 1, "job_id": jid, "type": "deferred", "at": t})
        for e in ends:
            self.events.append({"id": len(self.events) + 1, "job_id": jid, "type": "started", "at": t + M})
            self.events.append({"id": len(self.events) + 1, "job_id": jid, "type": e, "at": t + 2 * M})
            t += 5 * M
        if status == "doing":
            self.events.append({"id": len(self.events) + 1, "job_id": jid, "type": "started", "at": t + M})
        return self

    def load(self, writable):
        load(writable, proc_md(), {"procrastinate_jobs": self.jobs, "procrastinate_events": self.events})


def proc_clean():
    p = Proc()
    p.job(1, "shop.tasks.send_invoice", "succeeded", NOW - 3 * H, ["succeeded"], qlock="invoice-1")
    p.job(2, "shop.tasks.send_invoice", "succeeded", NOW - 2 * H, ["deferred_for_retry", "succeeded"])
    p.job(3, "shop.tasks.send_invoice", "todo", NOW - M, [], qlock="invoice-1")  # queued again: fine
    p.job(4, "shop.tasks.sync_stock", "doing", NOW - 10 * M, [])
    p.job(5, "shop.tasks.sync_stock", "succeeded", NOW - 4 * H, ["succeeded"])
    return p


def test_procrastinate_planted(pg):
    writable, url = pg
    p = proc_clean()
    # one job whose attempt succeeded twice (its 'succeeded' event written for two runs)
    p.job(10, "shop.tasks.charge", "succeeded", NOW - 6 * H, ["succeeded", "succeeded"], qlock="charge-order-77")
    # a later job of the same queueing_lock is an intended repeat (the lock only holds while 'todo')
    p.job(
        11, "shop.tasks.charge", "succeeded", NOW - 5 * H, ["deferred_for_retry", "succeeded"], qlock="charge-order-77"
    )
    p.job(12, "shop.tasks.charge", "failed", NOW - 2 * H, ["deferred_for_retry", "deferred_for_retry", "failed"])
    p.job(13, "shop.tasks.sync_stock", "succeeded", NOW - 8 * H, ["deferred_for_retry"] * 6 + ["succeeded"])
    p.load(writable)
    got, fs = scan(url, "procrastinate", NOW)
    assert got == {("duplicate_effect", "", "10"), ("unresolved_failure", "", "12"), ("retry_storm", "", "13")}
    dup = next(f for f in fs if f.kind.value == "duplicate_effect")
    assert [e.get("outcome") or e.get("status") for e in dup.evidence].count("succeeded") == 2
    eng = open_engine(url)
    led = Ledger(eng, load_preset("procrastinate"))
    atts = led.attempts("", "12")
    assert sorted((a.finished_at.isoformat(), a.raw_outcome) for a in atts) == [
        ("2026-11-30T10:02:00+00:00", "deferred_for_retry"),
        ("2026-11-30T10:07:00+00:00", "deferred_for_retry"),
        ("2026-11-30T10:12:00+00:00", "failed"),
    ]
    assert {a.outcome.value for a in atts} == {"failed"}
    assert led.counts() == (9, 18)  # end-of-attempt events only; 'deferred'/'started' rows are not attempts
    eng.dispose()


def test_procrastinate_clean(pg):
    writable, url = pg
    proc_clean().load(writable)
    assert scan(url, "procrastinate", NOW)[0] == set()


# -------------------------------------------------------------------------------------- dbos

DBOS_STATUS = ("PENDING", "ENQUEUED", "DELAYED", "SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


def dbos_md(schema) -> MetaData:
    """dbos/_schemas/system_database.py: workflow_status and operation_outputs."""
    md = MetaData(schema=schema)
    J = JSON().with_variant(JSONB, "postgresql")
    Table(
        "workflow_status",
        md,
        Column("workflow_uuid", Text, primary_key=True),
        Column("status", Text),
        Column("name", Text),
        Column("authenticated_user", Text),
        Column("assumed_role", Text),
        Column("authenticated_roles", Text),
        Column("output", Text),
        Column("error", Text),
        Column("executor_id", Text),
        Column("created_at", BigInteger, nullable=False),
        Column("updated_at", BigInteger, nullable=False),
        Column("application_version", Text),
        Column("application_id", Text),
        Column("class_name", String(255)),
        Column("config_name", String(255)),
        Column("recovery_attempts", BigInteger, server_default="0"),
        Column("queue_name", Text),
        Column("workflow_timeout_ms", BigInteger),
        Column("workflow_deadline_epoch_ms", BigInteger),
        Column("started_at_epoch_ms", BigInteger),
        Column("deduplication_id", Text),
        Column("inputs", Text),
        Column("priority", Integer, nullable=False, server_default="0"),
        Column("queue_partition_key", Text),
        Column("forked_from", Text),
        Column("parent_workflow_id", Text),
        Column("serialization", Text),
        Column("completed_at", BigInteger),
        Column("attributes", J),
        Index("workflow_status_created_at_index", "created_at"),
        Index("uq_workflow_status_dedup_id", "queue_name", "deduplication_id", unique=True),
    )
    Table(
        "operation_outputs",
        md,
        Column(
            "workflow_uuid", Text, ForeignKey("workflow_status.workflow_uuid", ondelete="CASCADE"), primary_key=True
        ),
        Column("function_id", Integer, primary_key=True),
        Column("function_name", Text),
        Column("output", Text),
        Column("error", Text),
        Column("child_workflow_id", Text),
        Column("started_at_epoch_ms", BigInteger),
        Column("completed_at_epoch_ms", BigInteger),
        Column("serialization", Text),
    )
    return md


def wf(wid, status, created, *, done=None, deadline=None, recoveries=1):
    return {
        "workflow_uuid": wid,
        "status": status,
        "name": "checkout_workflow",
        "executor_id": "local",
        "created_at": ms(created),
        "updated_at": ms(done or created),
        "completed_at": ms(done) if done else None,
        "recovery_attempts": recoveries,
        "workflow_deadline_epoch_ms": ms(deadline) if deadline else None,
        "inputs": '{"args": ["order-1"], "kwargs": {}}',
        "serialization": "portable_json",
        "output": '"ok"' if status == "SUCCESS" else None,
        "error": '{"message": "card declined"}' if status == "ERROR" else None,
    }


def dbos_clean():
    return [
        wf("order-1001", "SUCCESS", NOW - 3 * H, done=NOW - 3 * H + M),
        wf("order-1002", "PENDING", NOW - 2 * M, deadline=NOW + 8 * M),
        wf("order-1003", "ENQUEUED", NOW - M),
        wf("order-1004", "PENDING", NOW - 2 * H),  # no timeout set
        wf("order-1005", "SUCCESS", NOW - 2 * H, done=NOW - H, recoveries=3),
    ]


def dbos_steps():
    return [
        {
            "workflow_uuid": "order-1001",
            "function_id": i,
            "function_name": n,
            "output": '"ok"',
            "started_at_epoch_ms": ms(NOW - 3 * H),
            "completed_at_epoch_ms": ms(NOW - 3 * H + M),
        }
        for i, n in enumerate(["reserve_stock", "charge_card", "send_receipt"], 1)
    ]


def dbos_load(writable, rows):
    schema = "dbos" if writable.dialect.name == "postgresql" else None
    if schema:
        with writable.begin() as c:
            c.execute(text("CREATE SCHEMA IF NOT EXISTS dbos"))
    load(writable, dbos_md(schema), {"workflow_status": rows, "operation_outputs": dbos_steps() if rows else []})
    return load_preset("dbos") if schema else replace(load_preset("dbos"), schema=None)


def test_dbos_planted(pg_or_sqlite):
    writable, url = pg_or_sqlite
    lay = dbos_load(
        writable,
        dbos_clean()
        + [
            wf("order-2001", "PENDING", NOW - H, deadline=NOW - 30 * M),
            wf("order-2002", "ERROR", NOW - 2 * H, done=NOW - 2 * H + M),
            wf("order-2003", "MAX_RECOVERY_ATTEMPTS_EXCEEDED", NOW - 5 * H, recoveries=101),
            wf("order-2004", "SUCCESS", NOW - 4 * H, done=NOW - 3 * H, recoveries=8),
        ],
    )
    got, fs = scan_layout(url, lay)
    assert got == {
        ("stuck_in_progress", "", "order-2001"),
        ("unresolved_failure", "", "order-2002"),
        ("unresolved_failure", "", "order-2003"),
        ("retry_storm", "", "order-2003"),
        ("retry_storm", "", "order-2004"),
    }
    stuck = next(f for f in fs if f.kind.value == "stuck_in_progress")
    assert stuck.evidence[0]["lock_expired_at"] == "2026-11-30T11:30:00Z"  # epoch ms decoded


def test_dbos_clean(pg_or_sqlite):
    writable, url = pg_or_sqlite
    lay = dbos_load(writable, dbos_clean())
    assert scan_layout(url, lay)[0] == set()


# ------------------------------------------------------------------------------------ convoy


def convoy_md() -> MetaData:
    """convoy sql/ migrations: convoy.events, convoy.event_deliveries, convoy.delivery_attempts."""
    md = MetaData(schema="convoy")
    Table(
        "events",
        md,
        Column("id", String, primary_key=True),
        Column("event_type", Text, nullable=False),
        Column("endpoints", Text),
        Column("project_id", String),
        Column("source_id", String),
        Column("headers", JSONB),
        Column("raw", Text, nullable=False),
        Column("data", BYTEA, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("updated_at", DateTime(timezone=True), nullable=False),
        Column("deleted_at", DateTime(timezone=True)),
        Column("url_query_params", String),
        Column("idempotency_key", Text),
        Column("is_duplicate_event", Boolean, server_default="false"),
        Column("acknowledged_at", DateTime(timezone=True)),
        Column("status", Text),
        Column("metadata", Text),
    )
    Table(
        "event_deliveries",
        md,
        Column("id", String, primary_key=True),
        Column("status", Text, nullable=False),
        Column("description", Text),
        Column("project_id", String),
        Column("endpoint_id", String),
        Column("event_id", String, ForeignKey("convoy.events.id")),
        Column("device_id", String),
        Column("subscription_id", String),
        Column("metadata", JSONB, nullable=False),
        Column("headers", JSONB),
        Column("attempts", JSONB),
        Column("cli_metadata", JSONB),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("updated_at", DateTime(timezone=True), nullable=False),
        Column("deleted_at", DateTime(timezone=True)),
        Column("url_query_params", String),
        Column("idempotency_key", Text),
        Column("latency", Text),
        Column("event_type", Text),
        Column("acknowledged_at", DateTime(timezone=True)),
        Column("latency_seconds", Numeric),
    )
    Table(
        "delivery_attempts",
        md,
        Column("id", String, primary_key=True),
        Column("url", Text),
        Column("method", String),
        Column("api_version", String),
        Column("project_id", String),
        Column("endpoint_id", String),
        Column("event_delivery_id", String, ForeignKey("convoy.event_deliveries.id")),
        Column("ip_address", String),
        Column("request_http_header", JSONB),
        Column("response_http_header", JSONB),
        Column("http_status", String),
        Column("response_data", BYTEA),
        Column("error", Text),
        Column("status", Boolean),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("updated_at", DateTime(timezone=True), nullable=False),
        Column("deleted_at", DateTime(timezone=True)),
    )
    return md


class Convoy:
    def __init__(self):
        self.events, self.deliveries, self.attempts = [], [], []

    def delivery(self, did, endpoint, status, at, codes, *, key=None, event=None):
        ev = event or f"evt-{did}"
        if not any(e["id"] == ev for e in self.events):
            self.events.append(
                {
                    "id": ev,
                    "event_type": "invoice.paid",
                    "project_id": "prj-1",
                    "raw": "{}",
                    "data": b"{}",
                    "created_at": at,
                    "updated_at": at,
                    "idempotency_key": key,
                    "status": "Success",
                }
            )
        self.deliveries.append(
            {
                "id": did,
                "status": status,
                "project_id": "prj-1",
                "endpoint_id": endpoint,
                "event_id": ev,
                "metadata": {"num_trials": len(codes), "retry_limit": 10},
                "created_at": at,
                "updated_at": at + len(codes) * M,
                "idempotency_key": key,
                "event_type": "invoice.paid",
            }
        )
        for i, code in enumerate(codes):
            ok = 200 <= code < 300
            self.attempts.append(
                {
                    "id": f"{did}-a{i + 1}",
                    "url": "https://hooks.example.com/in",
                    "method": "POST",
                    "project_id": "prj-1",
                    "endpoint_id": endpoint,
                    "event_delivery_id": did,
                    "http_status": str(code),
                    "status": ok,
                    "error": None if ok else f"unexpected status {code}",
                    "created_at": at + i * M,
                    "updated_at": at + i * M,
                }
            )
        return self

    def load(self, writable):
        with writable.begin() as c:
            c.execute(text("CREATE SCHEMA IF NOT EXISTS convoy"))
        load(
            writable,
            convoy_md(),
            {"events": self.events, "event_deliveries": self.deliveries, "delivery_attempts": self.attempts},
        )


def convoy_clean():
    c = Convoy()
    c.delivery("dlv-1", "ep-a", "Success", NOW - 3 * H, [200], key="inv-1", event="evt-1")
    c.delivery("dlv-2", "ep-b", "Success", NOW - 3 * H, [200], key="inv-1", event="evt-1")  # fan-out
    c.delivery("dlv-3", "ep-a", "Retry", NOW - 10 * M, [503, 503])
    c.delivery("dlv-4", "ep-a", "Failure", NOW - 5 * H, [500, 500, 500], key="inv-2", event="evt-4")
    c.delivery("dlv-5", "ep-a", "Success", NOW - 4 * H, [200], key="inv-2", event="evt-5")  # resolved it
    c.delivery("dlv-6", "ep-b", "Scheduled", NOW - M, [])
    return c


def test_convoy_planted(pg):
    writable, url = pg
    c = convoy_clean()
    c.delivery("dlv-10", "ep-a", "Success", NOW - 6 * H, [200], key="inv-77", event="evt-10")
    c.delivery("dlv-11", "ep-a", "Success", NOW - 2 * H, [502, 200], key="inv-77", event="evt-11")
    c.delivery("dlv-12", "ep-b", "Failure", NOW - 2 * H, [500, 500, 500])
    c.delivery("dlv-13", "ep-b", "Success", NOW - 8 * H, [503] * 6 + [200])
    c.load(writable)
    got, fs = scan(url, "convoy", NOW)
    assert got == {
        ("duplicate_effect", "ep-a", "inv-77"),
        ("unresolved_failure", "ep-b", "#dlv-12"),
        ("retry_storm", "ep-b", "#dlv-13"),
    }
    dup = next(f for f in fs if f.kind.value == "duplicate_effect")
    assert sum(1 for e in dup.evidence if e.get("outcome") == "succeeded") == 2
    eng = open_engine(url)
    atts = Ledger(eng, load_preset("convoy")).attempts("ep-b", "#dlv-12")
    eng.dispose()
    assert [(a.outcome.value, a.raw_outcome, a.error) for a in atts] == [("failed", "500", "unexpected status 500")] * 3


def test_convoy_clean(pg):
    writable, url = pg
    convoy_clean().load(writable)
    assert scan(url, "convoy", NOW)[0] == set()


# ------------------------------------------------------------------------------- solid-queue


def sq_md() -> MetaData:
    """solid_queue install template db/queue_schema.rb (Rails types per engine)."""
    md = MetaData()
    Id = BigInteger().with_variant(Integer, "sqlite")
    Table(
        "solid_queue_jobs",
        md,
        Column("id", Id, primary_key=True),
        Column("queue_name", String(255), nullable=False),
        Column("class_name", String(255), nullable=False),
        Column("arguments", Text),
        Column("priority", Integer, nullable=False, server_default="0"),
        Column("active_job_id", String(255)),
        Column("scheduled_at", DateTime),
        Column("finished_at", DateTime),
        Column("concurrency_key", String(255)),
        Column("created_at", DateTime, nullable=False),
        Column("updated_at", DateTime, nullable=False),
        Index("index_solid_queue_jobs_on_active_job_id", "active_job_id"),
    )
    fk = lambda: Column(
        "job_id",
        Id,
        ForeignKey("solid_queue_jobs.id", ondelete="CASCADE"),  # noqa: E731
        nullable=False,
        unique=True,
    )
    Table(
        "solid_queue_ready_executions",
        md,
        Column("id", Id, primary_key=True),
        fk(),
        Column("queue_name", String(255), nullable=False),
        Column("priority", Integer, nullable=False),
        Column("created_at", DateTime, nullable=False),
    )
    Table(
        "solid_queue_scheduled_executions",
        md,
        Column("id", Id, primary_key=True),
        fk(),
        Column("queue_name", String(255), nullable=False),
        Column("priority", Integer, nullable=False),
        Column("scheduled_at", DateTime, nullable=False),
        Column("created_at", DateTime, nullable=False),
    )
    Table(
        "solid_queue_claimed_executions",
        md,
        Column("id", Id, primary_key=True),
        fk(),
        Column("process_id", BigInteger),
        Column("created_at", DateTime, nullable=False),
    )
    Table(
        "solid_queue_blocked_executions",
        md,
        Column("id", Id, primary_key=True),
        fk(),
        Column("queue_name", String(255), nullable=False),
        Column("priority", Integer, nullable=False),
        Column("concurrency_key", String(255), nullable=False),
        Column("expires_at", DateTime, nullable=False),
        Column("created_at", DateTime, nullable=False),
    )
    Table(
        "solid_queue_failed_executions",
        md,
        Column("id", Id, primary_key=True),
        fk(),
        Column("error", Text),
        Column("created_at", DateTime, nullable=False),
    )
    return md


class SQ:
    def __init__(self):
        self.t = {
            n: []
            for n in (
                "solid_queue_jobs",
                "solid_queue_ready_executions",
                "solid_queue_claimed_executions",
                "solid_queue_failed_executions",
                "solid_queue_scheduled_executions",
                "solid_queue_blocked_executions",
            )
        }

    def job(self, jid, state, at, *, ajid=None, executions=0, klass="ChargeOrderJob"):
        import json

        ajid = ajid or f"9f1c0b52-0000-4000-8000-{jid:012d}"
        args = {
            "job_class": klass,
            "job_id": ajid,
            "queue_name": "default",
            "arguments": [jid],
            "executions": executions,
            "exception_executions": {},
        }
        self.t["solid_queue_jobs"].append(
            {
                "id": jid,
                "queue_name": "default",
                "class_name": klass,
                "arguments": json.dumps(args),
                "active_job_id": ajid,
                "finished_at": naive(at + M) if state == "finished" else None,
                "created_at": naive(at),
                "updated_at": naive(at + M),
            }
        )
        ex = {"id": jid, "job_id": jid, "created_at": naive(at)}
        if state == "ready":
            self.t["solid_queue_ready_executions"].append({**ex, "queue_name": "default", "priority": 0})
        elif state == "claimed":
            self.t["solid_queue_claimed_executions"].append({**ex, "process_id": 1})
        elif state == "failed":
            self.t["solid_queue_failed_executions"].append(
                {**ex, "error": '{"exception_class": "Stripe::CardError", "message": "declined", "backtrace": []}'}
            )
        return self

    def load(self, writable):
        load(writable, sq_md(), self.t)


def sq_clean():
    s = SQ()
    s.job(1, "finished", NOW - 3 * H)
    s.job(2, "finished", NOW - 2 * H, ajid="9f1c0b52-retried", executions=0)  # retry_on: marked finished
    s.job(3, "finished", NOW - 2 * H + 5 * M, ajid="9f1c0b52-retried", executions=1)
    s.job(4, "ready", NOW - M)
    s.job(5, "claimed", NOW - 2 * M)
    return s


def test_solid_queue_planted(db):
    writable, url = db
    s = sq_clean()
    s.job(10, "failed", NOW - H, executions=4)
    s.job(11, "finished", NOW - 30 * M, executions=7)
    s.load(writable)
    got, _ = scan(url, "solid-queue", NOW)
    assert got == {("unresolved_failure", "", "10"), ("retry_storm", "", "11")}
    eng = open_engine(url)
    ops = {o.key: o for o in Ledger(eng, load_preset("solid-queue")).iter_operations()}
    eng.dispose()
    assert {k: o.status.value for k, o in ops.items()} == {
        "1": "completed",
        "2": "completed",
        "3": "completed",
        "4": "new",
        "5": "in_progress",
        "10": "failed",
        "11": "completed",
    }
    assert ops["11"].attempt_count == 7 and ops["11"].completed_at.isoformat() == "2026-11-30T11:31:00+00:00"


def test_solid_queue_clean(db):
    writable, url = db
    sq_clean().load(writable)
    assert scan(url, "solid-queue", NOW)[0] == set()


# --------------------------------------------------------------------------------- detection


def _fill(name, writable):
    """Create ``name``'s schema (empty tables) on ``writable``."""
    if name == "camel":
        camel_load(writable, [])
    elif name == "spring-integration":
        with writable.begin() as c:
            c.execute(text("DROP TABLE IF EXISTS INT_METADATA_STORE"))
            c.execute(text(SPRING_DDL))
    elif name == "medusa":
        load(writable, medusa_md(), {})
    elif name == "lago":
        load(writable, lago_md(), {})
    elif name == "pg-boss":
        boss_load(writable, [])
    elif name == "procrastinate":
        load(writable, proc_md(), {})
    elif name == "dbos":
        dbos_load(writable, [])
    elif name == "convoy":
        Convoy().load(writable)
    elif name == "solid-queue":
        load(writable, sq_md(), {})


@pytest.mark.parametrize(
    "engine,preset",
    [
        (e, p)
        for p, engines in {
            "camel": ("sqlite", "postgresql", "mysql"),
            "spring-integration": ("sqlite", "postgresql", "mysql"),
            "solid-queue": ("sqlite", "postgresql", "mysql"),
            "medusa": ("sqlite", "postgresql"),
            "dbos": ("sqlite", "postgresql"),
            "lago": ("postgresql",),
            "pg-boss": ("postgresql",),
            "procrastinate": ("postgresql",),
            "convoy": ("postgresql",),
        }.items()
        for e in engines
    ],
)
def test_detect_picks_the_preset(request, tmp_path, engine, preset):
    writable, url = _engine(request, tmp_path, engine)
    try:
        _fill(preset, writable)
        matches = detected(url)
    finally:
        writable.dispose()
    assert matches and matches[0].layout.name == preset, [(m.layout.name, m.confidence) for m in matches]
    assert matches[0].confidence > 0.9
    if preset in ("pg-boss", "convoy") or (preset == "dbos" and engine == "postgresql"):
        assert matches[0].layout.schema == {"pg-boss": "pgboss"}.get(preset, preset)


def test_detect_tells_medusa_from_stripe_style(pg):
    from tests.presets.test_planted_stripe_powertools_celery import stripe_md

    writable, url = pg
    load(writable, stripe_md(), {})
    assert detected(url)[0].layout.name == "stripe-style"
    _clear(writable)
    load(writable, medusa_md(), {})
    assert [m.layout.name for m in detected(url)] == ["medusa"]


def test_detect_nothing_for_an_unrelated_schema(db):
    writable, url = db
    md = MetaData()
    Table(
        "customers",
        md,
        Column("id", Integer, primary_key=True),
        Column("name", String(100)),
        Column("created_at", DateTime),
    )
    Table("jobs", md, Column("id", Integer, primary_key=True), Column("title", String(100)))
    load(writable, md, {})
    assert detected(url) == []
