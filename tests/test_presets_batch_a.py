"""Batch-A presets on fixtures built from each system's own table definitions (real table and column
names, types mapped to SQLAlchemy Core), on SQLite, PostgreSQL and MariaDB where the system supports
that engine: every planted incident is found with the right kind, scope and key, a clean fixture
reports nothing, and detection picks the preset."""

from datetime import timedelta

import pytest
from sqlalchemy import (
    CHAR, JSON, BigInteger, Boolean, Column, DateTime, Enum, Float, ForeignKeyConstraint, Index, Integer,
    LargeBinary, MetaData, SmallInteger, String, Table, Text, UniqueConstraint, Uuid, text,
)
from sqlalchemy.dialects import mysql, postgresql

from idemview.connect import open_engine
from idemview.detect import detect
from idemview.findings import FindingEngine
from idemview.query import Ledger

from .conftest import ANCHOR
from .ledgers import load, scan

NOW = ANCHOR
M = timedelta(minutes=1)
H = timedelta(hours=1)
D = timedelta(days=1)
naive = lambda t: t.replace(tzinfo=None) if t is not None else None  # noqa: E731 - systems write naive UTC

TZ = DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), "mysql")   # aware where the engine can
NAIVE = DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")             # naive UTC
GUID = Uuid(as_uuid=False).with_variant(CHAR(36), "sqlite", "mysql")       # uuid / char(36) / text
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
    Table("django_celery_results_taskresult", md,
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
          Index("django_cele_date_do_f59aad_idx", "date_done"))
    return md


def dcr_row(i, task_id, status, created, done, started=None):
    return {"id": i, "task_id": task_id, "periodic_task_name": None, "task_name": "shop.tasks.capture_payment",
            "task_args": '"()"', "task_kwargs": "\"{'order_id': %d}\"" % i, "status": status,
            "worker": "celery@w1", "content_type": "application/json", "content_encoding": "utf-8",
            "result": '{"charge": "ch_%d"}' % i if status == "SUCCESS" else None,
            "date_created": created, "date_started": started, "date_done": done,
            "traceback": "Traceback ...\nCardError: declined" if status == "FAILURE" else None,
            "meta": '{"children": []}'}


def dcr_clean():
    return [dcr_row(1, "3b0d1c4e-0000-4000-8000-000000000001", "SUCCESS", NOW - 12 * M, NOW - 11 * M),
            dcr_row(2, "3b0d1c4e-0000-4000-8000-000000000002", "STARTED", NOW - 6 * M, NOW - 5 * M, NOW - 5 * M),
            dcr_row(3, "3b0d1c4e-0000-4000-8000-000000000003", "RETRY", NOW - 30 * M, NOW - 20 * M, NOW - 29 * M),
            dcr_row(4, "3b0d1c4e-0000-4000-8000-000000000004", "PENDING", NOW - 1 * M, NOW - 1 * M)]


def test_django_celery_results_planted(db):
    writable, url = db
    rows = dcr_clean() + [
        dcr_row(10, "stuck-0c4e-0000-4000-8000-000000000010", "STARTED", NOW - 3 * H, NOW - 3 * H, NOW - 3 * H),
        dcr_row(11, "failed-c4e-0000-4000-8000-000000000011", "FAILURE", NOW - 2 * H, NOW - 2 * H),
        dcr_row(12, "old-d1c4e-0000-4000-8000-000000000012", "SUCCESS", NOW - 31 * H, NOW - 30 * H),
    ]
    load(writable, dcr_md(), {"django_celery_results_taskresult": rows})
    got, fs = scan(url, "django-celery-results", NOW)
    assert got == {("stuck_in_progress", "", "stuck-0c4e-0000-4000-8000-000000000010"),
                   ("unresolved_failure", "", "failed-c4e-0000-4000-8000-000000000011"),
                   ("expired_key", "", "old-d1c4e-0000-4000-8000-000000000012")}
    exp = next(f for f in fs if f.kind.value == "expired_key")
    assert exp.evidence[0]["expires_at"] == "2026-11-30T06:00:00Z"   # date_done + result_expires (1 day)
    stuck = next(f for f in fs if f.kind.value == "stuck_in_progress")
    assert stuck.evidence[0]["lock_expired_at"] == "2026-11-30T10:00:00Z"


def test_django_celery_results_clean(db):
    writable, url = db
    load(writable, dcr_md(), {"django_celery_results_taskresult": dcr_clean()})
    assert scan(url, "django-celery-results", NOW)[0] == set()
