"""A ledger without a scope (one key space: Celery task ids, job ids) reconciled with its effect records,
in the same database and across two, on every engine under every dialect name. Found by a tester: on
PostgreSQL the constant scope ('') ended up in a GROUP BY ("non-integer constant in GROUP BY")."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, create_engine, insert

from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_layout
from idemview.ledger.connect import open_engine, parse_url
from idemview.ledger.reader import Ledger

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
T = datetime(2026, 11, 30, 11, 0)

LAYOUT = """
[layout]
name = "jobs-with-charges"

[operations]
table = "jobs"
row_id = "id"
key = ["job_key"]

[operations.status]
column = "state"
map = {{ done = "completed", failed = "failed", running = "in_progress" }}

[operations.times]
created_at = {{ column = "created_at", encoding = "naive" }}

[attempts]
source = "none"

[effects]
table = "charges"
{connection}
link = {{ effect = "job_key", operation = "key" }}
id = "id"
time = {{ column = "created_at", encoding = "naive" }}
"""


def _jobs(md):
    return Table(
        "jobs",
        md,
        Column("id", Integer, primary_key=True),
        Column("job_key", String(64), nullable=False),
        Column("state", String(16), nullable=False),
        Column("created_at", DateTime),
    )


def _charges(md):
    return Table(
        "charges",
        md,
        Column("id", Integer, primary_key=True),
        Column("job_key", String(64)),
        Column("created_at", DateTime),
    )


JOBS = [
    {"id": 1, "job_key": "j-ok", "state": "done", "created_at": T},
    {"id": 2, "job_key": "j-failed-but-charged", "state": "failed", "created_at": T},
    {"id": 3, "job_key": "j-twice", "state": "done", "created_at": T},
    {"id": 4, "job_key": "j-failed", "state": "failed", "created_at": T},
]
CHARGES = [
    {"id": 1, "job_key": "j-ok", "created_at": T},
    {"id": 2, "job_key": "j-failed-but-charged", "created_at": T},
    {"id": 3, "job_key": "j-twice", "created_at": T},
    {"id": 4, "job_key": "j-twice", "created_at": T},
    {"id": 5, "job_key": "j-nobody", "created_at": T},
]
EXPECTED = {
    ("hidden_success", "", "j-failed-but-charged"),
    ("duplicate_effect", "", "j-twice"),
    ("orphan_effect", "", "j-nobody"),
}


def _load(eng, make, rows):
    md = MetaData()
    t = make(md)
    md.drop_all(eng)
    md.create_all(eng)
    with eng.begin() as c:
        c.execute(insert(t), rows)


def _findings(url, layout_text, tmp_path):
    lay = tmp_path / "layout.toml"
    lay.write_text(layout_text)
    eng = open_engine(parse_url(url))
    try:
        led = Ledger(eng, load_layout(str(lay)))
        fs = FindingEngine(led, NOW).run()
    finally:
        eng.dispose()
    return {(f.kind.value, f.scope, f.key) for f in fs if f.kind.value in {k for k, _s, _k in EXPECTED}}


def test_same_database_without_scope(dialect_db, tmp_path):
    writable, url = dialect_db
    _load(writable, _jobs, JOBS)
    _load(writable, _charges, CHARGES)
    assert _findings(url, LAYOUT.format(connection=""), tmp_path) == EXPECTED


def test_other_database_without_scope(dialect_db, tmp_path):
    """The ledger on each engine, its charges in a SQLite file beside the layout."""
    writable, url = dialect_db
    _load(writable, _jobs, JOBS)
    fx = create_engine(f"sqlite:///{tmp_path / 'charges.db'}")
    _load(fx, _charges, CHARGES)
    fx.dispose()
    assert _findings(url, LAYOUT.format(connection='connection = "charges.db"'), tmp_path) == EXPECTED
