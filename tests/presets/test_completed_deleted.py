"""Systems that delete a job's row when it succeeds (issue 26, "each system's own meaning"): Graphile Worker
(complete_jobs / complete_job), Laravel's database queue (DatabaseQueue::deleteReserved; failed_jobs never
sees a success) and Que (default_resolve_action destroys the row). A key's absence is not evidence of
success, and two successes of one key, or of one intent, leave nothing to compare: the scan says so
(``not_checkable``, preset entry ``deletes_completed``), and still finds what the rows do show."""

from __future__ import annotations

import pytest

from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset, parse_layout
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load, scan
from tests.presets.test_planted_graphile_worker import PLANTED, gw_load, pg, planted  # noqa: F401 - fixture
from tests.presets.test_planted_job_queues import que_clean, que_md, que_row
from tests.presets.test_planted_laravel import failed, jobs_clean, laravel_md

NOW = ANCHOR


def _unsupported(url, layout):
    eng = open_engine(url)
    try:
        lay = load_preset(layout) if isinstance(layout, str) else layout
        return {k.value: why for k, why in FindingEngine(Ledger(eng, lay), NOW).unsupported().items()}
    finally:
        eng.dispose()


def _says_deleted(why: str, what: str) -> None:
    assert why.startswith(f"completed records are deleted ({what}"), why
    assert "a key's absence is not evidence of success" in why


@pytest.mark.parametrize("legacy", [False, True], ids=["private_jobs", "jobs"])
def test_graphile_says_completed_jobs_are_deleted(pg, legacy):  # noqa: F811 - the fixture
    writable, url = pg
    gw_load(writable, planted(legacy), legacy)
    name = "graphile-worker-jobs" if legacy else "graphile-worker"
    why = _unsupported(url, name)
    _says_deleted(why["duplicate_effect"], "complete_job")
    _says_deleted(why["duplicate_intent"], "complete_job")
    assert "succeeded twice leaves no row" in why["duplicate_effect"]
    # what the rows do show is still found: stuck locks, an exhausted job, a storm
    assert scan(url, name, NOW)[0] == PLANTED


def test_laravel_queue_and_failed_jobs_say_successes_are_deleted(dialect_db):
    writable, url = dialect_db
    load(writable, laravel_md(), {"jobs": jobs_clean(), "failed_jobs": [failed(20, NOW)]})
    why = _unsupported(url, "laravel-queue")
    _says_deleted(why["duplicate_effect"], "DatabaseQueue::deleteReserved")
    _says_deleted(why["duplicate_intent"], "DatabaseQueue::deleteReserved")
    why = _unsupported(url, "laravel-failed-jobs")
    _says_deleted(why["duplicate_effect"], "a successful job is deleted from jobs")
    # each row left in failed_jobs is still a failure nobody retried
    got, _ = scan(url, "laravel-failed-jobs", NOW)
    assert got == {("unresolved_failure", "default", "9a1b2c3d-0000-4000-8000-000000000020")}


def test_que_says_successful_jobs_are_destroyed(pg):  # noqa: F811 - the fixture
    writable, url = pg
    load(writable, que_md(), {"que_jobs": que_clean() + [que_row(10, NOW, errors=16, expired=NOW)]})
    why = _unsupported(url, "que")
    _says_deleted(why["duplicate_effect"], "default_resolve_action destroys")
    assert scan(url, "que", NOW)[0] == {("unresolved_failure", "", "10"), ("retry_storm", "", "10")}


def test_effect_records_still_show_a_second_success(tmp_path):
    """A variant: with an ``[effects]`` section (charges recorded downstream), two effects of one job are
    visible even though the job's row is gone, so duplicate_effect stays checkable; duplicate_intent
    does not."""
    from sqlalchemy import Column, Integer, MetaData, Table, Text, create_engine

    path = tmp_path / "ledger.db"
    w = create_engine(f"sqlite:///{path}")
    md = MetaData()
    Table("jobs", md, Column("id", Integer, primary_key=True), Column("state", Text), Column("order_id", Text))
    Table("charges", md, Column("id", Integer, primary_key=True), Column("job_id", Integer))
    load(w, md, {"jobs": [{"id": 1, "state": "queued", "order_id": "o-1"}], "charges": []})
    w.dispose()
    toml = """
[layout]
name = "deleting"
[operations]
table = "jobs"
row_id = "id"
key = "id"
deletes_completed = "the worker deletes a job's row when it succeeds"
status = { column = "state", map = { queued = "new" } }
[operations.fields]
intent_ref = "order_id"
EFFECTS
"""
    why = _unsupported(str(path), parse_layout(toml.replace("EFFECTS", "")))
    _says_deleted(why["duplicate_effect"], "the worker deletes")
    _says_deleted(why["duplicate_intent"], "the worker deletes")
    fx = '[effects]\ntable = "charges"\nlink = { effect = "job_id", operation = "id" }\nid = "id"\n'
    why = _unsupported(str(path), parse_layout(toml.replace("EFFECTS", fx)))
    assert "duplicate_effect" not in why
    _says_deleted(why["duplicate_intent"], "the worker deletes")


def test_layout_editor_keeps_deletes_completed():
    from idemview.layouts.draft import LayoutDraft

    for name in ("graphile-worker", "laravel-queue", "que"):
        lay = load_preset(name)
        assert lay.deletes_completed
        assert LayoutDraft.from_layout(lay).to_layout().deletes_completed == lay.deletes_completed, name
