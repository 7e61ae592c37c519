"""Temporal's SQL visibility store on PostgreSQL and MySQL/MariaDB (under both dialect names): the
``executions_visibility`` table as schema/postgresql/v12/visibility/versioned/v1.0/schema.sql and
schema/mysql/v8/visibility/versioned/v1.0/schema.sql create it (CHAR(64) ids, TIMESTAMP / DATETIME(6)
holding UTC, the integer WorkflowExecutionStatus), with planted incidents and clean look-alikes."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import BigInteger, Column, DateTime, Integer, LargeBinary, MetaData, String, Table
from sqlalchemy.dialects.mysql import BINARY as MY_BINARY
from sqlalchemy.dialects.mysql import DATETIME as MY_DATETIME
from sqlalchemy.dialects.mysql import MEDIUMBLOB

from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.detect import detect
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load, scan

NOW = ANCHOR
M = timedelta(minutes=1)
H = timedelta(hours=1)
NS = "3b5a2c1e-6f7d-4e8a-9b0c-1d2e3f405162"
RUNNING, COMPLETED, FAILED, CANCELED, TERMINATED, CONTINUED_AS_NEW, TIMED_OUT = 1, 2, 3, 4, 5, 6, 7


@pytest.fixture
def db(dialect_db):
    writable, url = dialect_db
    if writable.dialect.name == "sqlite":
        pytest.skip("Temporal's SQL persistence runs on PostgreSQL and MySQL (SQLite only in its dev server)")
    return writable, url


_TS = DateTime().with_variant(MY_DATETIME(fsp=6), "mysql", "mariadb")


def visibility_md() -> MetaData:
    md = MetaData()
    Table(
        "executions_visibility",
        md,
        Column("namespace_id", String(64), primary_key=True),
        Column("run_id", String(64), primary_key=True),
        Column("start_time", _TS, nullable=False),
        Column("execution_time", _TS, nullable=False),
        Column("workflow_id", String(255), nullable=False),
        Column("workflow_type_name", String(255), nullable=False),
        Column("status", Integer, nullable=False),
        Column("close_time", _TS),
        Column("history_length", BigInteger),
        Column("memo", LargeBinary),
        Column("encoding", String(64), nullable=False),
        Column("task_queue", String(255), nullable=False, server_default=""),
    )
    return md


def run(n, wid, status, start, close=None, wtype="ChargeOrderWorkflow"):
    naive = lambda t: t.replace(tzinfo=None) if t else None  # noqa: E731
    return {
        "namespace_id": NS,
        "run_id": f"0190a1b2-0000-7000-8000-{n:012d}",
        "start_time": naive(start),
        "execution_time": naive(start),
        "workflow_id": wid,
        "workflow_type_name": wtype,
        "status": status,
        "close_time": naive(close),
        "history_length": 11,
        "encoding": "proto3",
        "task_queue": "payments",
    }


def clean():
    return [
        run(1, "charge-order-1", COMPLETED, NOW - 2 * H, NOW - 2 * H + M),
        run(2, "charge-order-2", RUNNING, NOW - 10 * M),
        # a continue-as-new chain: one workflow id, the earlier run closed as CONTINUED_AS_NEW
        run(3, "subscription-9", CONTINUED_AS_NEW, NOW - 5 * H, NOW - 4 * H, wtype="SubscriptionWorkflow"),
        run(4, "subscription-9", COMPLETED, NOW - 4 * H, NOW - 3 * H, wtype="SubscriptionWorkflow"),
        # failed, then started again under its id and completed: resolved
        run(5, "refund-3", FAILED, NOW - 6 * H, NOW - 6 * H + M),
        run(6, "refund-3", COMPLETED, NOW - 5 * H, NOW - 5 * H + M),
    ]


def test_temporal_planted(db):
    writable, url = db
    rows = clean() + [
        # started twice under one workflow id after the first run closed (ALLOW_DUPLICATE): ran twice
        run(10, "charge-order-77", COMPLETED, NOW - 8 * H, NOW - 8 * H + M),
        run(11, "charge-order-77", COMPLETED, NOW - 7 * H, NOW - 7 * H + M),
        run(12, "payout-5", TIMED_OUT, NOW - 3 * H, NOW - 2 * H),  # nobody started it again
        run(13, "payout-6", TERMINATED, NOW - 3 * H, NOW - 2 * H),
    ]
    load(writable, visibility_md(), {"executions_visibility": rows})
    got, fs = scan(url, "temporal-visibility", NOW)
    assert got == {
        ("duplicate_effect", NS, "charge-order-77"),
        ("unresolved_failure", NS, "payout-5"),
        ("unresolved_failure", NS, "payout-6"),
    }


def test_temporal_clean(db):
    writable, url = db
    load(writable, visibility_md(), {"executions_visibility": clean()})
    assert scan(url, "temporal-visibility", NOW)[0] == set()


def test_detect_picks_temporal(db):
    writable, url = db
    load(writable, visibility_md(), {})
    eng = open_engine(url)
    try:
        matches = detect(eng)
    finally:
        eng.dispose()
    assert matches and matches[0].layout.name == "temporal-visibility", [(m.layout.name, m.confidence) for m in matches]
    assert matches[0].confidence > 0.9


# current_executions, in the persistence database: schema/postgresql/v12/temporal/schema.sql and
# schema/mysql/v8/temporal/schema.sql (BYTEA / BINARY(16) ids, one row per workflow id).
_UUID = LargeBinary().with_variant(MY_BINARY(16), "mysql", "mariadb")
_BLOB = LargeBinary().with_variant(MEDIUMBLOB(), "mysql", "mariadb")
NS_BYTES = uuid.UUID(NS).bytes
STATE_RUNNING, STATE_COMPLETED = 2, 3  # WorkflowExecutionState (server/api/enums/v1/workflow.proto)


def current_md() -> MetaData:
    md = MetaData()
    Table(
        "current_executions",
        md,
        Column("shard_id", Integer, primary_key=True, autoincrement=False),
        Column("namespace_id", _UUID, primary_key=True),
        Column("workflow_id", String(255), primary_key=True),
        Column("run_id", _UUID, nullable=False),
        Column("create_request_id", String(255), nullable=False),
        Column("state", Integer, nullable=False),
        Column("status", Integer, nullable=False),
        Column("start_version", BigInteger, nullable=False, server_default="0"),
        Column("start_time", _TS),
        Column("last_write_version", BigInteger, nullable=False),
        Column("data", _BLOB),
        Column("data_encoding", String(16), nullable=False, server_default=""),
    )
    return md


def current(n, wid, status, start, shard=1, ns=NS_BYTES):
    closed = status != RUNNING
    return {
        "shard_id": shard,
        "namespace_id": ns,
        "workflow_id": wid,
        "run_id": uuid.UUID(f"0190a1b2-0000-7000-8000-{n:012d}").bytes,
        "create_request_id": f"5f0c7e9a-1111-4222-8333-{n:012d}",
        "state": STATE_COMPLETED if closed else STATE_RUNNING,
        "status": status,
        "start_time": start.replace(tzinfo=None) if start else None,
        "last_write_version": 0,
        "data": b"\x0a\x10",
        "data_encoding": "Proto3",
    }


def current_clean():
    return [
        current(1, "charge-order-1", COMPLETED, NOW - 2 * H),
        current(2, "charge-order-2", RUNNING, NOW - 10 * M, shard=3),
        current(4, "subscription-9", RUNNING, None),  # continued as new: the newest run; no start_time (< v1.22)
        current(6, "refund-3", COMPLETED, NOW - 5 * H),  # failed once, started again, completed: the row was rewritten
        # the same workflow id completed in another namespace: another scope, not a duplicate
        current(7, "charge-order-1", COMPLETED, NOW - H, ns=uuid.UUID(int=7).bytes),
    ]


def test_temporal_current_executions_planted(db):
    writable, url = db
    rows = current_clean() + [
        current(12, "payout-5", TIMED_OUT, NOW - 3 * H),  # the last run of the id timed out: nobody started it again
        current(13, "payout-6", TERMINATED, NOW - 3 * H, shard=2),
    ]
    load(writable, current_md(), {"current_executions": rows})
    got, fs = scan(url, "temporal-current-executions", NOW)
    ns = NS_BYTES.hex()
    assert {(k, key) for k, _, key in got} == {("unresolved_failure", "payout-5"), ("unresolved_failure", "payout-6")}
    # one namespace (its 16 bytes, as the engine spells them in text: '\\x3b5a...' on PostgreSQL)
    scopes = {scope for _, scope, _ in got}
    assert len(scopes) == 1, scopes
    if writable.dialect.name == "postgresql":
        assert scopes == {"\\x" + ns}
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("temporal-current-executions"))
        ops = {op.key: op for op in led.iter_operations(now=NOW)}
    finally:
        eng.dispose()
    assert ops["payout-5"].effect_ref == "0190a1b2000070008000000000000012"
    assert str(ops["payout-5"].request.value) == "5f0c7e9a-1111-4222-8333-000000000012"
    assert ops["charge-order-2"].status.value == "in_progress" and ops["subscription-9"].created_at is None
    assert ops["refund-3"].created_at.isoformat() == "2026-11-30T07:00:00+00:00"


def test_temporal_current_executions_clean(db):
    writable, url = db
    load(writable, current_md(), {"current_executions": current_clean()})
    assert scan(url, "temporal-current-executions", NOW)[0] == set()


def test_detect_picks_temporal_current_executions(db):
    writable, url = db
    load(writable, current_md(), {})
    eng = open_engine(url)
    try:
        matches = detect(eng)
    finally:
        eng.dispose()
    assert matches and matches[0].layout.name == "temporal-current-executions", [
        (m.layout.name, m.confidence) for m in matches
    ]
