"""A scan does only necessary work (issue 11): kinds the schema makes impossible are skipped with the
reason, row-filter kinds over one table share one pass, and nothing groups a key declared unique."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Column, DateTime, Index, Integer, LargeBinary, MetaData, String, Table, Text, event, text

from idemview.domain.model import FindingKind as K
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load

NOW = ANCHOR
H = timedelta(hours=1)


def celery_md(unique=True, not_null=False) -> MetaData:
    """celery_taskmeta as Celery's SQLAlchemy backend creates it (UNIQUE task_id), date_done indexed."""
    md = MetaData()
    Table(
        "celery_taskmeta",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("task_id", String(155), unique=unique, nullable=not not_null),
        Column("status", String(50)),
        Column("result", LargeBinary),
        Column("date_done", DateTime),
        Column("traceback", Text),
        Column("kwargs", LargeBinary),
        Column("name", String(155)),
        Column("retries", Integer),
        Index("ix_celery_taskmeta_date_done", "date_done"),
    )
    return md


def rows(extra=()):
    def r(i, tid, status, done, retries=0):
        return {
            "id": i,
            "task_id": tid,
            "status": status,
            "date_done": (NOW - done).replace(tzinfo=None),
            "traceback": None,
            "name": "t",
            "retries": retries,
        }

    base = [
        r(1, "ok-1", "SUCCESS", H / 6),
        r(2, "stuck-2", "STARTED", 3 * H),
        r(3, "failed-3", "FAILURE", 2 * H),
        r(4, "storm-4", "SUCCESS", H, retries=9),
        r(5, "old-5", "SUCCESS", 30 * H),
    ]
    return base + [r(*x) for x in extra]


WANT = {
    ("stuck_in_progress", "stuck-2"),
    ("unresolved_failure", "failed-3"),
    ("retry_storm", "storm-4"),
    ("expired_key", "old-5"),
}


def scan_logged(url):
    """(findings, unsupported, statements the scan ran)."""
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("celery"))
        stmts: list[str] = []
        event.listen(eng, "before_cursor_execute", lambda c, cur, s, *a: stmts.append(s))
        fe = FindingEngine(led, NOW)
        fs = fe.run()
        return fs, fe.unsupported(), stmts, led
    finally:
        eng.dispose()


def test_unique_key_skips_impossible_kinds_and_shares_one_pass(db):
    writable, url = db
    load(writable, celery_md(), {"celery_taskmeta": rows()})
    fs, unsupported, stmts, led = scan_logged(url)
    assert {(f.kind.value, f.key) for f in fs} == WANT
    assert led.key_unique == "UNIQUE (task_id)"
    assert "UNIQUE (task_id)" in unsupported[K.DUPLICATE_EFFECT]
    assert "UNIQUE (task_id)" in unsupported[K.REPLAY_AFTER_EXPIRY]
    assert not any("GROUP BY" in s.upper() for s in stmts), stmts  # no grouping over a unique key
    assert not any("EXISTS" in s.upper() for s in stmts), stmts  # no anti-join for failures
    # expired_key runs alone through the date_done index; stuck, unresolved and retry_storm share a pass
    # (which also reads each operation's kind for its action class); expired_key's own select brings
    # its record's kind too (one record per key: no look-up by key, issue 27 item 4); the ledger audit
    # (secret_at_rest) reads one bounded sample
    audit = [s for s in stmts if "LIMIT" in s.upper()]
    kind_lookups = [s for s in stmts if " AS kind" in s and s not in audit]
    finding_passes = [s for s in stmts if s not in audit and s not in kind_lookups]
    assert len(finding_passes) == 2, stmts
    assert len(kind_lookups) == 0 and len(audit) == 1, stmts
    from idemview.findings.actions import classifier_for

    # weighed by the kind its own row brought ("t"), as a look-up by key would have
    expired = next(f for f in fs if f.kind == K.EXPIRED_KEY)
    assert expired.action == classifier_for(led).classify("t")
    assert "op_kind" in " ".join(finding_passes)  # the shared pass brought its operations' kinds along


def test_nullable_unique_key_with_null_rows_is_not_trusted(sqlite_db):
    writable, url = sqlite_db
    nulls = [(6, None, "SUCCESS", H), (7, None, "SUCCESS", H)]
    load(writable, celery_md(), {"celery_taskmeta": rows(nulls)})
    fs, unsupported, stmts, led = scan_logged(url)
    assert led.key_unique is None
    assert K.DUPLICATE_EFFECT not in unsupported
    # two completed records under the NULL key group together, as before the uniqueness check
    assert ("duplicate_effect", None) in {(f.kind.value, f.key) for f in fs}


def test_not_null_unique_needs_no_probe(db):
    writable, url = db
    load(writable, celery_md(not_null=True), {"celery_taskmeta": rows()})
    eng = open_engine(url)
    try:
        stmts: list[str] = []
        event.listen(eng, "before_cursor_execute", lambda c, cur, s, *a: stmts.append(s))
        led = Ledger(eng, load_preset("celery"))
        assert led.key_unique == "UNIQUE (task_id)"
        assert not any("IS NULL" in s.upper() and "celery_taskmeta" in s for s in stmts)
    finally:
        eng.dispose()


@pytest.mark.parametrize(
    "ddl",
    [
        "CREATE UNIQUE INDEX ux_done ON celery_taskmeta (task_id) WHERE status = 'SUCCESS'",  # partial
        "CREATE UNIQUE INDEX ux_lower ON celery_taskmeta (lower(task_id))",  # expression
    ],
)
def test_partial_or_expression_unique_index_is_not_a_unique_key(sqlite_db, ddl):
    writable, url = sqlite_db
    load(writable, celery_md(unique=False), {"celery_taskmeta": rows()})
    with writable.begin() as c:
        c.execute(text(ddl))
    fs, unsupported, stmts, led = scan_logged(url)
    assert led.key_unique is None
    assert K.DUPLICATE_EFFECT not in unsupported
    assert {(f.kind.value, f.key) for f in fs} == WANT


def test_primary_key_on_the_key_counts(db):
    writable, url = db
    md = MetaData()
    Table("oban_jobs", md, Column("id", Integer, primary_key=True))
    from idemview.ledger.constraints import unique_column_sets

    md.create_all(writable)
    ro = open_engine(url)
    try:
        t = Table("oban_jobs", MetaData(), autoload_with=ro)
        assert [[c.name for c in cols] for cols in unique_column_sets(t)][0] == ["id"]
    finally:
        ro.dispose()
        md.drop_all(writable)


@pytest.mark.parametrize("command", ["scan", "export"])
def test_cli_imports_neither_qt_nor_pandas(tmp_path, command):
    """The CLI's scan and export import neither Qt nor pandas (checked in a fresh interpreter)."""
    import subprocess
    import sys as _sys

    from sqlalchemy import create_engine

    from idemview.services.demo import generate

    path = tmp_path / "demo.db"
    w = create_engine(f"sqlite:///{path}")
    generate(w, operations=100, seed=1)
    w.dispose()
    args = [command, str(path), "--layout", "idemview", "--now", "2026-11-30T12:00:00Z"]
    if command == "export":
        args += ["--out", str(tmp_path / "x.csv")]
    code = (
        f"import sys; from idemview.cli import main; rc = main({args!r}); "
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'PySide6', 'shiboken6', 'numpy'}); "
        "print('HEAVY', heavy, rc, file=sys.stderr)"
    )
    p = subprocess.run([_sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "HEAVY [] 0" in p.stderr, p.stderr[-2000:]


def test_sqlite_column_level_unique_is_read(sqlite_db):
    """``task_id VARCHAR(155) UNIQUE`` (column level) is an automatic index SQLAlchemy does not reflect."""
    writable, url = sqlite_db
    with writable.begin() as c:
        c.execute(
            text(
                "CREATE TABLE celery_taskmeta (id INTEGER PRIMARY KEY, task_id VARCHAR(155) UNIQUE, "
                "status VARCHAR(50), result BLOB, date_done DATETIME, traceback TEXT, name VARCHAR(155), "
                "kwargs BLOB, retries INTEGER)"
            )
        )
        c.execute(
            text(
                "INSERT INTO celery_taskmeta (id, task_id, status, date_done, retries) "
                "VALUES (1, 'a', 'SUCCESS', '2026-11-30 11:00:00', 0)"
            )
        )
    fs, unsupported, stmts, led = scan_logged(url)
    assert led.key_unique == "UNIQUE (task_id)"
    assert K.DUPLICATE_EFFECT in unsupported
