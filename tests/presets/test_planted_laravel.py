"""Laravel's database queue (``jobs``) and failed jobs (``failed_jobs``) on every engine Laravel supports
(SQLite, PostgreSQL, MySQL/MariaDB under both dialect names): planted incidents are found with the
right kind and key, clean look-alikes report nothing, and detection picks each preset.

DDL written from laravel/laravel database/migrations/0001_01_01_000002_create_jobs_table.php with the
types Laravel's schema grammars give each engine (``id()`` a big auto-increment, ``longText`` LONGTEXT
on MySQL and TEXT elsewhere, ``unsignedTinyInteger``/``unsignedInteger`` unsigned on MySQL, epoch
seconds; ``failed_at`` a TIMESTAMP defaulting to the current time). Row shapes follow
src/Illuminate/Queue/DatabaseQueue.php (reserve: reserved_at and attempts + 1) and Queue::createPayload
(uuid, displayName, job, maxTries, timeout, data)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import BigInteger, Column, DateTime, Integer, MetaData, SmallInteger, String, Table, Text, text
from sqlalchemy.dialects.mysql import INTEGER as MY_INT
from sqlalchemy.dialects.mysql import LONGTEXT, TINYINT

from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.detect import detect
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load, scan

NOW = ANCHOR
S = timedelta(seconds=1)
M = timedelta(minutes=1)
H = timedelta(hours=1)

_LONG = Text().with_variant(LONGTEXT(), "mysql", "mariadb")
_UTINY = SmallInteger().with_variant(TINYINT(unsigned=True), "mysql", "mariadb")
_UINT = Integer().with_variant(MY_INT(unsigned=True), "mysql", "mariadb")
_ID = BigInteger().with_variant(Integer(), "sqlite")  # SQLite: INTEGER PRIMARY KEY AUTOINCREMENT


@pytest.fixture
def db(dialect_db):
    return dialect_db


def laravel_md() -> MetaData:
    md = MetaData()
    Table(
        "jobs",
        md,
        Column("id", _ID, primary_key=True, autoincrement=True),
        Column("queue", String(255), nullable=False, index=True),
        Column("payload", _LONG, nullable=False),
        Column("attempts", _UTINY, nullable=False),
        Column("reserved_at", _UINT),
        Column("available_at", _UINT, nullable=False),
        Column("created_at", _UINT, nullable=False),
    )
    Table(
        "job_batches",
        md,
        Column("id", String(255), primary_key=True),
        Column("name", String(255), nullable=False),
        Column("total_jobs", Integer, nullable=False),
        Column("pending_jobs", Integer, nullable=False),
        Column("failed_jobs", Integer, nullable=False),
        Column("failed_job_ids", _LONG, nullable=False),
        Column("options", Text),
        Column("cancelled_at", Integer),
        Column("created_at", Integer, nullable=False),
        Column("finished_at", Integer),
    )
    Table(  # laravel/laravel create_cache_table: the database cache store's locks
        "cache_locks",
        md,
        Column("key", String(255), primary_key=True),
        Column("owner", String(255), nullable=False),
        Column("expiration", Integer, nullable=False, index=True),
    )
    Table(
        "failed_jobs",
        md,
        Column("id", _ID, primary_key=True, autoincrement=True),
        Column("uuid", String(255), nullable=False, unique=True),
        Column("connection", Text, nullable=False),
        Column("queue", Text, nullable=False),
        Column("payload", _LONG, nullable=False),
        Column("exception", _LONG, nullable=False),
        Column("failed_at", DateTime, nullable=False, server_default=text("CURRENT_TIMESTAMP")),
    )
    return md


def payload(n, job="App\\Jobs\\ChargeOrder", tries=None):
    """Queue::createPayloadArray for a queued job (the command is PHP-serialized text)."""
    return json.dumps(
        {
            "uuid": f"9a1b2c3d-0000-4000-8000-{n:012d}",
            "displayName": job,
            "job": "Illuminate\\Queue\\CallQueuedHandler@call",
            "maxTries": tries,
            "maxExceptions": None,
            "failOnTimeout": False,
            "backoff": None,
            "timeout": None,
            "retryUntil": None,
            "data": {"commandName": job, "command": f'O:20:"App\\Jobs\\ChargeOrder":1:{{s:5:"order";i:{n};}}'},
        }
    )


def job(n, created, *, queue="default", attempts=0, reserved=None, job_class="App\\Jobs\\ChargeOrder"):
    e = lambda t: int(t.timestamp())  # noqa: E731 - Laravel's epoch seconds
    return {
        "id": n,
        "queue": queue,
        "payload": payload(n, job_class),
        "attempts": attempts,
        "reserved_at": e(reserved) if reserved else None,
        "available_at": e(created),
        "created_at": e(created),
    }


def failed(n, at, *, queue="default", job_class="App\\Jobs\\ChargeOrder"):
    return {
        "id": n,
        "uuid": f"9a1b2c3d-0000-4000-8000-{n:012d}",
        "connection": "database",
        "queue": queue,
        "payload": payload(n, job_class),
        "exception": "Stripe\\Exception\\CardException: Your card was declined. in /app/Jobs/ChargeOrder.php:41",
        "failed_at": at.replace(tzinfo=None),
    }


def jobs_clean():
    return [
        job(1, NOW - M),  # waiting
        job(2, NOW - 2 * M, attempts=1, reserved=NOW - 30 * S),  # running, within retry_after
        job(3, NOW - H, attempts=3),  # released for a retry: waiting, 3 attempts so far
        job(4, NOW - 5 * M, queue="mail", attempts=5, reserved=NOW - 10 * S, job_class="App\\Mail\\Receipt"),
    ]


def test_laravel_queue_planted(db):
    writable, url = db
    rows = jobs_clean() + [
        job(10, NOW - 10 * M, attempts=1, reserved=NOW - 5 * M),  # reserved 5 min > retry_after 90 s
        job(11, NOW - 3 * H, queue="mail", attempts=6, job_class="App\\Mail\\Receipt"),  # 6 attempts: a storm
    ]
    load(writable, laravel_md(), {"jobs": rows})
    got, fs = scan(url, "laravel-queue", NOW)
    assert got == {("stuck_in_progress", "default", "10"), ("retry_storm", "mail", "11")}
    stuck = next(f for f in fs if f.kind.value == "stuck_in_progress")
    assert stuck.evidence[0]["lock_expired_at"] == "2026-11-30T11:56:30Z"  # reserved_at + 90 s
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("laravel-queue"))
        ops = {op.key: op for op in led.iter_operations(now=NOW)}
        unsupported = {k.value for k in FindingEngine(led, NOW).unsupported()}
    finally:
        eng.dispose()
    assert ops["4"].kind == "App\\Mail\\Receipt" and ops["4"].status.value == "in_progress"
    assert ops["3"].status.value == "new" and ops["3"].attempt_count == 3
    assert ops["10"].created_at.isoformat() == "2026-11-30T11:50:00+00:00"
    # completed jobs are deleted: one row per job, no success recorded, nothing to call a duplicate
    assert "duplicate_effect" in unsupported


def test_laravel_queue_clean(db):
    writable, url = db
    load(writable, laravel_md(), {"jobs": jobs_clean()})
    assert scan(url, "laravel-queue", NOW)[0] == set()


def test_laravel_failed_jobs(db):
    writable, url = db
    rows = [failed(20, NOW - 2 * H), failed(21, NOW - H, queue="mail", job_class="App\\Mail\\Receipt")]
    load(writable, laravel_md(), {"failed_jobs": rows})
    got, fs = scan(url, "laravel-failed-jobs", NOW)
    assert got == {
        ("unresolved_failure", "default", "9a1b2c3d-0000-4000-8000-000000000020"),
        ("unresolved_failure", "mail", "9a1b2c3d-0000-4000-8000-000000000021"),
    }
    eng = open_engine(url)
    try:
        op = Ledger(eng, load_preset("laravel-failed-jobs")).records("mail", "9a1b2c3d-0000-4000-8000-000000000021")[0]
    finally:
        eng.dispose()
    assert op.kind == "App\\Mail\\Receipt" and op.completed_at.isoformat() == "2026-11-30T11:00:00+00:00"
    assert "CardException" in str(op.error.value)


def test_laravel_failed_jobs_clean(db):
    """queue:retry deleted the rows it pushed back: an empty failed_jobs reports nothing."""
    writable, url = db
    load(writable, laravel_md(), {"jobs": jobs_clean()})
    assert scan(url, "laravel-failed-jobs", NOW)[0] == set()


def batch(n, created, *, name="Import orders", total=3, pending=0, failed=0, ids=(), finished=None, cancelled=None):
    """A job_batches row as DatabaseBatchRepository writes it (epoch seconds, failed_job_ids JSON)."""
    e = lambda t: int(t.timestamp()) if t else None  # noqa: E731
    return {
        "id": f"9d4e1f2a-0000-4000-8000-{n:012d}",
        "name": name,
        "total_jobs": total,
        "pending_jobs": pending,
        "failed_jobs": failed,
        "failed_job_ids": json.dumps(list(ids)),
        "options": "a:0:{}",
        "cancelled_at": e(cancelled),
        "created_at": e(created),
        "finished_at": e(finished),
    }


def batches_clean():
    return [
        batch(1, NOW - H, finished=NOW - 50 * M),  # every job succeeded
        batch(2, NOW - 5 * M, total=10, pending=7),  # running
        batch(3, NOW - 20 * M, total=4, pending=3, failed=1, ids=["j-31"]),  # allowFailures, 2 jobs still to run
        # a failed job retried (queue:retry-batch) and then succeeded: failed_jobs stays 1, ids emptied
        batch(4, NOW - 2 * H, total=2, pending=0, failed=1, finished=NOW - H),
    ]


def test_laravel_job_batches_planted(db):
    writable, url = db
    rows = batches_clean() + [
        # the first failure cancelled a batch without allowFailures (cancel(): cancelled_at, finished_at)
        batch(10, NOW - 3 * H, pending=2, failed=1, ids=["j-101"], cancelled=NOW - 2 * H, finished=NOW - 2 * H),
        # allowFailures: every pending job is a failed one - it never finishes until retried
        batch(11, NOW - 4 * H, name="Send receipts", total=5, pending=2, failed=2, ids=["j-111", "j-112"]),
    ]
    load(writable, laravel_md(), {"job_batches": rows})
    got, fs = scan(url, "laravel-job-batches", NOW)
    assert got == {
        ("unresolved_failure", "", "9d4e1f2a-0000-4000-8000-000000000010"),
        ("unresolved_failure", "", "9d4e1f2a-0000-4000-8000-000000000011"),
    }
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("laravel-job-batches"))
        ops = {op.key[-2:]: op for op in led.iter_operations(now=NOW)}
        unsupported = {k.value for k in FindingEngine(led, NOW).unsupported()}
    finally:
        eng.dispose()
    assert {k: o.status.value for k, o in ops.items()} == {
        "01": "completed",
        "02": "in_progress",
        "03": "in_progress",
        "04": "completed",
        "10": "failed",
        "11": "failed",
    }
    assert ops["11"].kind == "Send receipts" and ops["11"].created_at.isoformat() == "2026-11-30T08:00:00+00:00"
    assert ops["01"].completed_at.isoformat() == "2026-11-30T11:10:00+00:00"
    assert ops["11"].error.value == ["j-111", "j-112"]
    # a batch is one row with no lock or attempts: nothing to call stuck, a storm or a duplicate
    assert {"stuck_in_progress", "retry_storm", "duplicate_effect"} <= unsupported


def test_laravel_job_batches_clean(db):
    writable, url = db
    load(writable, laravel_md(), {"job_batches": batches_clean()})
    assert scan(url, "laravel-job-batches", NOW)[0] == set()


def lock(name, expiration, owner="4fQ2kZ8sLx1T0aBc"):
    """A cache_locks row as DatabaseLock::acquire writes it (prefix from config/cache.php)."""
    return {"key": f"laravel-cache-{name}", "owner": owner, "expiration": int(expiration.timestamp())}


UNIQUE = "laravel_unique_job:App\\Jobs\\ChargeOrder:"


def locks_clean():
    return [
        lock(UNIQUE + "1001", NOW + 50 * M),  # uniqueFor 3600, taken 10 min ago: held
        lock(UNIQUE + "1002", NOW + 23 * H),  # uniqueFor 0: the 86400 s default lock timeout
        lock("laravel-queue-overlap:App\\Jobs\\SyncStock:42", NOW + 30 * S),  # WithoutOverlapping
    ]


def test_laravel_cache_locks_planted(db):
    writable, url = db
    rows = locks_clean() + [lock(UNIQUE + "1003", NOW - 10 * M)]  # never released, past its expiration
    load(writable, laravel_md(), {"cache_locks": rows})
    got, fs = scan(url, "laravel-cache-locks", NOW)
    assert got == {("stuck_in_progress", "", "laravel-cache-" + UNIQUE + "1003")}
    assert fs[0].evidence[0]["lock_expired_at"] == "2026-11-30T11:50:00Z"
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("laravel-cache-locks"))
        ops = {op.key: op for op in led.iter_operations(now=NOW)}
    finally:
        eng.dispose()
    assert len(ops) == 4 and {o.status.value for o in ops.values()} == {"in_progress"}
    held = ops["laravel-cache-" + UNIQUE + "1002"]
    assert held.lock_expires_at.isoformat() == "2026-12-01T11:00:00+00:00"


def test_laravel_cache_locks_clean(db):
    writable, url = db
    load(writable, laravel_md(), {"cache_locks": locks_clean()})
    assert scan(url, "laravel-cache-locks", NOW)[0] == set()


def test_detect_picks_laravel(db):
    writable, url = db
    load(writable, laravel_md(), {})
    eng = open_engine(url)
    try:
        names = [m.layout.name for m in detect(eng) if m.confidence > 0.9]
    finally:
        eng.dispose()
    # one database holds every table: each preset fits its own table
    laravel = {"laravel-queue", "laravel-failed-jobs", "laravel-job-batches", "laravel-cache-locks"}
    assert set(names[:4]) == laravel, names
