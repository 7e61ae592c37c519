"""Presets of the core issue on fixtures built from each system's own table definitions, on SQLite,
PostgreSQL and MariaDB: every planted incident is found with the right kind and key, and a clean
fixture reports nothing."""

from datetime import timedelta

import pytest
from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.detect import detect
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load, scan

NOW = ANCHOR
naive = lambda t: t.replace(tzinfo=None)  # noqa: E731 - the fixture writes naive UTC like the systems do


@pytest.fixture
def db(dialect_db):
    """The preset contract runs under every dialect name SQLAlchemy gives the three engines, with each
    installed driver (``mariadb+pymysql`` as well as ``mysql+pymysql``: issue #9)."""
    return dialect_db


# ------------------------------------------------------------------------------ stripe-style


def stripe_md() -> MetaData:
    """rocket-rides-atomic schema.sql: idempotency_keys (PostgreSQL types mapped to each engine)."""
    md = MetaData()
    Table(
        "idempotency_keys",
        md,
        Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("idempotency_key", String(100), nullable=False),
        Column("last_run_at", DateTime(timezone=True), nullable=False),
        Column("locked_at", DateTime(timezone=True)),
        Column("request_method", String(10), nullable=False),
        Column("request_params", JSON, nullable=False),
        Column("request_path", String(100), nullable=False),
        Column("response_code", Integer),
        Column("response_body", JSON),
        Column("recovery_point", String(50), nullable=False),
        Column("user_id", BigInteger, nullable=False),
        Index("idempotency_keys_user_id_idempotency_key", "user_id", "idempotency_key", unique=True),
    )
    return md


def stripe_row(i, key, user, *, created, last_run=None, locked=None, point="finished", code=201):
    return {
        "id": i,
        "created_at": naive(created),
        "idempotency_key": key,
        "last_run_at": naive(last_run or created),
        "locked_at": naive(locked) if locked else None,
        "request_method": "POST",
        "request_params": {"origin_lat": 0.0, "target_lat": 1.0},
        "request_path": "/rides",
        "response_code": code if point == "finished" else None,
        "response_body": {"message": "ok"} if point == "finished" else None,
        "recovery_point": point,
        "user_id": user,
    }


def stripe_clean():
    h = timedelta(hours=1)
    return [
        stripe_row(1, "key-aaaaaaaaaaaaaaaaaaaa-1", 1, created=NOW - 2 * h),
        stripe_row(2, "key-aaaaaaaaaaaaaaaaaaaa-2", 1, created=NOW - 30 * h),
        stripe_row(3, "key-aaaaaaaaaaaaaaaaaaaa-1", 2, created=NOW - 5 * h),  # same key, other user
        stripe_row(
            4,
            "key-bbbbbbbbbbbbbbbbbbbb-1",
            3,
            created=NOW - timedelta(seconds=20),
            locked=NOW - timedelta(seconds=20),
            point="ride_created",
        ),
    ]


def test_stripe_style_planted(db):
    writable, url = db
    h = timedelta(hours=1)
    rows = stripe_clean() + [
        stripe_row(10, "stuck-key-0000000000001", 7, created=NOW - h, locked=NOW - h, point="charge_created"),
        stripe_row(11, "expired-key-00000000001", 8, created=NOW - 80 * h),
        stripe_row(12, "replayed-key-0000000001", 9, created=NOW - 100 * h, last_run=NOW - 2 * h),
        stripe_row(13, "declined-key-0000000001", 7, created=NOW - 3 * h, code=402),
    ]
    load(writable, stripe_md(), {"idempotency_keys": rows})
    got, fs = scan(url, "stripe-style", NOW)
    assert got == {
        ("stuck_in_progress", "7", "stuck-key-0000000000001"),
        ("expired_key", "8", "expired-key-00000000001"),
        ("expired_key", "9", "replayed-key-0000000001"),
        ("replay_after_expiry", "9", "replayed-key-0000000001"),
        ("unresolved_failure", "7", "declined-key-0000000001"),
    }
    replay = next(f for f in fs if f.kind.value == "replay_after_expiry")
    assert replay.evidence[0]["key_expired_at"] == "2026-11-29T08:00:00Z"  # created + 72 h


def test_stripe_style_clean(db):
    writable, url = db
    load(writable, stripe_md(), {"idempotency_keys": stripe_clean()})
    got, _ = scan(url, "stripe-style", NOW)
    assert got == set()


# ----------------------------------------------------------------------------- powertools-sql


def powertools_md() -> MetaData:
    """Powertools DynamoDB persistence attributes as SQL columns (default attribute names)."""
    md = MetaData()
    Table(
        "idempotency",
        md,
        Column("id", String(255), primary_key=True),
        Column("expiration", BigInteger),
        Column("in_progress_expiration", BigInteger),
        Column("status", String(20), nullable=False),
        Column("data", Text),
        Column("validation", String(64)),
    )
    return md


def pt_row(key, status, expires, lease=None):
    return {
        "id": f"checkout-fn.handler#{key}",
        "expiration": int(expires.timestamp()),
        "in_progress_expiration": int(lease.timestamp() * 1000) if lease else None,
        "status": status,
        "data": '{"statusCode": 200}' if status == "COMPLETED" else None,
        "validation": None,
    }


def pt_clean():
    return [
        pt_row("a1b2c3", "COMPLETED", NOW + timedelta(minutes=30)),
        pt_row("d4e5f6", "INPROGRESS", NOW + timedelta(minutes=55), lease=NOW + timedelta(seconds=40)),
    ]


def test_powertools_planted(db):
    writable, url = db
    rows = pt_clean() + [
        pt_row("deadbeef01", "INPROGRESS", NOW + timedelta(minutes=50), lease=NOW - timedelta(minutes=3)),
        pt_row("cafef00d02", "COMPLETED", NOW - timedelta(minutes=10)),
    ]
    load(writable, powertools_md(), {"idempotency": rows})
    got, fs = scan(url, "powertools-sql", NOW)
    assert got == {
        ("stuck_in_progress", "", "checkout-fn.handler#deadbeef01"),
        ("expired_key", "", "checkout-fn.handler#cafef00d02"),
    }
    stuck = next(f for f in fs if f.kind.value == "stuck_in_progress")
    assert stuck.evidence[0]["lock_expired_at"] == "2026-11-30T11:57:00Z"  # epoch ms decoded


def test_powertools_clean(db):
    writable, url = db
    load(writable, powertools_md(), {"idempotency": pt_clean()})
    assert scan(url, "powertools-sql", NOW)[0] == set()


# ------------------------------------------------------------------------------------- celery


def celery_md(extended=True) -> MetaData:
    """celery/backends/database/models.py: Task (+ TaskExtended columns)."""
    md = MetaData()
    cols = [
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("task_id", String(155), unique=True),
        Column("status", String(50)),
        Column("result", LargeBinary),
        Column("date_done", DateTime),
        Column("traceback", Text),
    ]
    if extended:
        cols += [
            Column("name", String(155)),
            Column("args", LargeBinary),
            Column("kwargs", LargeBinary),
            Column("worker", String(155)),
            Column("retries", Integer),
            Column("queue", String(155)),
        ]
    Table("celery_taskmeta", md, *cols)
    return md


def cel_row(i, task_id, status, done, retries=0, extended=True):
    import pickle

    r = {
        "id": i,
        "task_id": task_id,
        "status": status,
        "result": pickle.dumps({"ok": True}),
        "date_done": naive(done),
        "traceback": "Traceback...\nValueError: boom" if status == "FAILURE" else None,
    }
    if extended:
        r.update(
            {
                "name": "billing.tasks.charge",
                "args": b"[]",
                "kwargs": b'{"order": %d}' % i,
                "worker": "celery@w1",
                "retries": retries,
                "queue": "billing",
            }
        )
    return r


def cel_clean(extended=True):
    m = timedelta(minutes=1)
    return [
        cel_row(1, "6f1c0b52-0000-4000-8000-000000000001", "SUCCESS", NOW - 10 * m, extended=extended),
        cel_row(2, "6f1c0b52-0000-4000-8000-000000000002", "STARTED", NOW - 5 * m, extended=extended),
        cel_row(3, "6f1c0b52-0000-4000-8000-000000000003", "SUCCESS", NOW - 600 * m, retries=2, extended=extended),
    ]


def test_celery_planted(db):
    writable, url = db
    h = timedelta(hours=1)
    rows = cel_clean() + [
        cel_row(10, "stuck-0000-4000-8000-000000000010", "STARTED", NOW - 3 * h),
        cel_row(11, "failed-000-4000-8000-000000000011", "FAILURE", NOW - 2 * h, retries=3),
        cel_row(12, "storm-0000-4000-8000-000000000012", "SUCCESS", NOW - 1 * h, retries=9),
        cel_row(13, "old-00000-4000-8000-000000000013", "SUCCESS", NOW - 30 * h),
    ]
    load(writable, celery_md(), {"celery_taskmeta": rows})
    got, fs = scan(url, "celery", NOW)
    assert got == {
        ("stuck_in_progress", "", "stuck-0000-4000-8000-000000000010"),
        ("unresolved_failure", "", "failed-000-4000-8000-000000000011"),
        ("retry_storm", "", "storm-0000-4000-8000-000000000012"),
        ("expired_key", "", "old-00000-4000-8000-000000000013"),
    }


def test_celery_clean(db):
    writable, url = db
    load(writable, celery_md(), {"celery_taskmeta": cel_clean()})
    assert scan(url, "celery", NOW)[0] == set()


def test_celery_without_extended_columns(db):
    writable, url = db
    rows = cel_clean(False) + [cel_row(10, "stuck-0000", "STARTED", NOW - timedelta(hours=3), extended=False)]
    load(writable, celery_md(extended=False), {"celery_taskmeta": rows})
    eng = open_engine(url)
    led = Ledger(eng, load_preset("celery"))
    fe = FindingEngine(led, NOW)
    assert "retry_storm" in {k.value for k in fe.unsupported()}
    assert {(f.kind.value, f.key) for f in fe.run()} == {("stuck_in_progress", "stuck-0000")}
    op = led.records("", "stuck-0000")[0]
    assert op.response.encoding == "pickle" and op.response.value is None and op.response.size > 0
    eng.dispose()


@pytest.mark.parametrize(
    "md,preset", [(stripe_md, "stripe-style"), (powertools_md, "powertools-sql"), (celery_md, "celery")]
)
def test_detect_picks_the_preset(db, md, preset):
    writable, url = db
    load(writable, md(), {})
    eng = open_engine(url)
    matches = detect(eng)
    eng.dispose()
    assert matches and matches[0].layout.name == preset
    assert matches[0].confidence > 0.9


def test_naive_zone_of_the_connection_shifts_naive_times(sqlite_db):
    """Celery >= 5.5 writes date_done in the app's zone: the connection's zone corrects it."""
    writable, url = sqlite_db
    # 13:00 wall time in Berlin (UTC+1 in winter) is 12:00 UTC = NOW: the task is fresh, not stuck.
    rows = [cel_row(1, "t-1", "STARTED", NOW + timedelta(hours=1))]
    load(writable, celery_md(), {"celery_taskmeta": rows})
    eng = open_engine(url)
    utc = Ledger(eng, load_preset("celery"))
    berlin = Ledger(eng, load_preset("celery"), naive_zone="Europe/Berlin")
    assert utc.records("", "t-1")[0].updated_at == NOW + timedelta(hours=1)
    assert berlin.records("", "t-1")[0].updated_at == NOW
    later = NOW + timedelta(hours=1, minutes=30)
    assert [f.key for f in FindingEngine(berlin, later).run()] == ["t-1"]  # locked 1.5 h: stuck
    assert FindingEngine(utc, later).run() == []  # read as UTC: 30 min only
    eng.dispose()


@pytest.mark.parametrize(
    "preset,md,rows",
    [
        (
            "stripe-style",
            stripe_md,
            lambda: {
                "idempotency_keys": stripe_clean()
                + [
                    stripe_row(
                        10,
                        "stuck-key-0000000000001",
                        7,
                        created=NOW - timedelta(hours=1),
                        locked=NOW - timedelta(hours=1),
                        point="charge_created",
                    ),
                    stripe_row(
                        12,
                        "replayed-key-0000000001",
                        9,
                        created=NOW - timedelta(hours=100),
                        last_run=NOW - timedelta(hours=2),
                    ),
                    stripe_row(13, "declined-key-0000000001", 7, created=NOW - timedelta(hours=3), code=402),
                ]
            },
        ),
        (
            "powertools-sql",
            powertools_md,
            lambda: {
                "idempotency": pt_clean()
                + [
                    pt_row("deadbeef01", "INPROGRESS", NOW + timedelta(minutes=50), lease=NOW - timedelta(minutes=3)),
                    pt_row("cafef00d02", "COMPLETED", NOW - timedelta(minutes=10)),
                ]
            },
        ),
        (
            "celery",
            celery_md,
            lambda: {
                "celery_taskmeta": cel_clean()
                + [
                    cel_row(10, "stuck-0000-4000-8000-000000000010", "STARTED", NOW - timedelta(hours=3)),
                    cel_row(11, "failed-000-4000-8000-000000000011", "FAILURE", NOW - timedelta(hours=2), retries=3),
                    cel_row(12, "storm-0000-4000-8000-000000000012", "SUCCESS", NOW - timedelta(hours=1), retries=9),
                    cel_row(13, "old-00000-4000-8000-000000000013", "SUCCESS", NOW - timedelta(hours=30)),
                ]
            },
        ),
    ],
)
def test_scan_json_is_identical_on_every_engine(preset, md, rows, tmp_path, pg_url, mysql_url, capsys):
    """The same content in SQLite, PostgreSQL and MariaDB: byte-identical `scan --format json`
    findings. (Nothing in these findings is sensitive, so no mask tag, whose key is random per run,
    appears in them; the demo's cross-engine test covers masked content through the core API.)"""
    import json as _json

    from sqlalchemy import create_engine

    from idemview.cli import main
    from tests.conftest import _clear

    outs = {}
    from sqlalchemy.engine import make_url

    maria = make_url(mysql_url).set(drivername="mariadb+pymysql").render_as_string(hide_password=False)
    for name, url in (
        ("sqlite", str(tmp_path / "l.db")),
        ("postgresql", pg_url),
        ("mysql", mysql_url),
        ("mariadb", maria),
    ):
        w = create_engine(f"sqlite:///{url}" if name == "sqlite" else url)
        if name != "sqlite":
            _clear(w)
        load(w, md(), rows())
        w.dispose()
        assert main(["scan", url, "--layout", preset, "--now", "2026-11-30T12:00:00Z", "--format", "json"]) == 0
        doc = _json.loads(capsys.readouterr().out)
        outs[name] = doc
    for d in outs.values():
        assert d["findings"], "the fixture has planted incidents"
    norm = {k: _json.dumps(v, sort_keys=True) for k, v in outs.items()}
    assert norm["sqlite"] == norm["postgresql"] == norm["mysql"] == norm["mariadb"]
