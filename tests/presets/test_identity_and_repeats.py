"""Identity as each system defines it (issue 12): intended repeats — throttle slots, cron runs, periodic
jobs, later jobs of a queueing lock — are never duplicate_effect nor duplicate_intent, while two
enqueues of the same work in the same slot still are. Plus the issue's three reported inputs."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import text

from idemview.cli import main
from tests.conftest import ANCHOR
from tests.ledgers import load, scan
from tests.presets.systems import CORE, FLOWS, QUEUES, drop_system_schemas

NOW = ANCHOR
M = timedelta(minutes=1)
H = timedelta(hours=1)
NOW_ISO = "2026-11-30T12:00:00Z"


@pytest.fixture(autouse=True)
def _system_schemas(request):
    """Each test starts and ends without the systems' PostgreSQL schemas (see drop_system_schemas)."""
    drop_system_schemas(request)
    yield
    drop_system_schemas(request)


def engine_of(url: str) -> str:
    return "postgresql" if url.startswith("postgresql") else "mysql" if url.startswith("mysql") else "sqlite"


def only(db, *engines, why):
    if engine_of(db[1]) not in engines:
        pytest.skip(why)


def cli_json(capsys, *argv):
    code = main(["scan", *argv, "--now", NOW_ISO, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


# ------------------------------------------------------------------ the three reported inputs


def test_dbos_retries_exceeded_is_an_unresolved_failure_and_layout_dbos_works_without_schemas(db, capsys):
    """Inputs 1 and 2: DBOS < 1.8.0 wrote RETRIES_EXCEEDED; `scan dbos.db --layout dbos` on SQLite (no
    schemas) finds workflow_status as detection does (it exited 4 before)."""
    only(db, "sqlite", "postgresql", why="DBOS system databases are PostgreSQL or SQLite")
    writable, url = db
    b = FLOWS()
    schema = "dbos" if engine_of(url) == "postgresql" else None
    if schema:
        with writable.begin() as c:
            c.execute(text("DROP SCHEMA IF EXISTS dbos CASCADE"))
            c.execute(text("CREATE SCHEMA dbos"))
    load(
        writable,
        b.dbos_md(schema),
        {
            "workflow_status": [
                b.wf("order-7", "RETRIES_EXCEEDED", NOW - 5 * H, recoveries=51),
                b.wf("order-8", "SUCCESS", NOW - 4 * H, done=NOW - 4 * H + M),
            ]
        },
    )
    doc = cli_json(capsys, url, "--layout", "dbos")
    got = {(f["kind"], f["key"]) for f in doc["findings"]}
    assert ("unresolved_failure", "order-7") in got
    assert doc["unmapped"] == {"status": {}, "outcome": {}}
    # the same file through detection gives the same answer
    assert cli_json(capsys, url)["findings"] == doc["findings"]


def boss_slot_rows(slots, *, queue="report-tick", key="tick"):
    b = FLOWS()
    rows = []
    for n, slot in enumerate(slots, 1):
        r = b.boss_row(
            n,
            queue,
            "completed",
            slot,
            key=key,
            started=slot,
            completed=slot + timedelta(seconds=5),
            output={"ok": True},
            slot=slot,
        )
        rows.append(r)
    return rows


def test_pgboss_one_job_per_throttle_slot_is_clean(db):
    """Input 3: three completed `report-tick` jobs with singleton_key `tick` in slots 11:50, 11:51 and
    11:52 — what pg-boss's own unique index (name, singleton_on, singleton_key) allows."""
    only(db, "postgresql", why="pg-boss runs on PostgreSQL only")
    writable, url = db
    FLOWS().boss_load(writable, boss_slot_rows([NOW - 10 * M, NOW - 9 * M, NOW - 8 * M]))
    assert scan(url, "pg-boss", NOW)[0] == set()


def test_pgboss_two_jobs_in_one_slot_are_a_duplicate_effect(db):
    only(db, "postgresql", why="pg-boss runs on PostgreSQL only")
    writable, url = db
    FLOWS().boss_load(writable, boss_slot_rows([NOW - 10 * M, NOW - 10 * M, NOW - 8 * M]))
    got, fs = scan(url, "pg-boss", NOW)
    assert got == {("duplicate_effect", "report-tick", "tick/2026-11-30 11:50:00")}
    # without attempt rows the finding is dated by the second completed record (it was empty)
    assert [f.at for f in fs if f.kind.value == "duplicate_effect"] == [NOW - 10 * M]


# ------------------------------------------------------------------------- intended repeats


def test_good_job_cron_runs_are_clean_but_equal_jobs_are_a_duplicate_intent(db):
    only(db, "postgresql", why="GoodJob supports PostgreSQL only")
    writable, url = db
    a = QUEUES()
    specs = []
    for i in range(1, 4):  # a */5 cron with the same (empty) arguments, one job per cron slot
        t = NOW - (20 - 5 * i) * M
        job, ex = a.gj_job(i, "DigestJob", t, performed=t, finished=t + M, args=[])
        job["cron_key"], job["cron_at"] = "digest", t.replace(tzinfo=None)
        specs.append((job, ex))
    t = NOW - 2 * H  # the same work enqueued twice, not by cron
    specs += [
        a.gj_job(10, "RefundJob", t, performed=t, finished=t + M, args=[9]),
        a.gj_job(11, "RefundJob", t + 5 * M, performed=t + 5 * M, finished=t + 6 * M, args=[9]),
    ]
    for job, _ex in specs:
        job.setdefault("cron_key", None)
        job.setdefault("cron_at", None)
    load(writable, a.good_job_md(), a.gj_rows(specs))
    got, _ = scan(url, "good_job", NOW)
    assert got == {("duplicate_intent", "RefundJob", a.gj_id(11))}


def test_oban_cron_runs_are_clean_but_equal_jobs_are_a_duplicate_intent(db):
    writable, url = db
    a = QUEUES()
    rows = []
    for i in range(1, 4):  # Oban.Plugins.Cron: "* * * * *", args %{}, meta with cron_expr
        r = a.oban_row(i, "MyApp.Workers.Tick", "completed", NOW - (10 - i) * M, args={})
        r["meta"] = {"cron": True, "cron_expr": "* * * * *", "cron_name": "MyApp.Workers.Tick"}
        r["completed_at"] = (NOW - (10 - i) * M + timedelta(seconds=3)).replace(tzinfo=None)
        rows.append(r)
    for i, t in ((10, NOW - H), (11, NOW - H + timedelta(seconds=20))):  # enqueued twice within 60 s
        r = a.oban_row(i, "MyApp.Workers.Refund", "completed", t, args={"refund_id": 9})
        r["completed_at"] = (t + timedelta(seconds=3)).replace(tzinfo=None)
        rows.append(r)
    load(writable, a.oban_md(), {"oban_jobs": rows})
    got, _ = scan(url, "oban", NOW)
    assert got == {("duplicate_intent", "MyApp.Workers.Refund", "11")}


def test_procrastinate_later_jobs_of_a_queueing_lock_are_intended(db):
    """The queueing lock is unique only among 'todo' jobs: periodic runs deferred with one lock are
    separate operations; one job that succeeded twice is still a duplicate effect."""
    only(db, "postgresql", why="Procrastinate runs on PostgreSQL only")
    writable, url = db
    p = FLOWS().Proc()
    for i in range(1, 4):
        p.job(i, "shop.tasks.sync_stock", "succeeded", NOW - (4 - i) * H, ["succeeded"], qlock="sync-stock")
    p.job(10, "shop.tasks.charge", "succeeded", NOW - 5 * H, ["succeeded", "succeeded"])
    p.load(writable)
    got, _ = scan(url, "procrastinate", NOW)
    assert got == {("duplicate_effect", "", "10")}


def test_river_periodic_and_other_period_jobs_are_clean(db):
    only(db, "sqlite", "postgresql", why="River has no MySQL/MariaDB driver")
    writable, url = db
    a = QUEUES()
    rows = [a.river_row(i, "tick", "completed", NOW - (10 - i) * M) for i in range(1, 4)]  # periodic
    rows += [
        a.river_row(4, "report", "completed", NOW - 3 * H, unique=b"\x01period-a"),  # ByPeriod
        a.river_row(5, "report", "completed", NOW - 2 * H, unique=b"\x01period-b"),
    ]
    rows += [
        a.river_row(6, "refund", "completed", NOW - 2 * H, unique=b"\x02same"),
        a.river_row(7, "refund", "completed", NOW - H, unique=b"\x02same"),
    ]  # uniqueness broke
    for r in rows:
        r["args"] = {}
    load(writable, a.river_md(), {"river_job": rows})
    got, _ = scan(url, "river", NOW)
    assert got == {("duplicate_intent", "refund", "7")}


def test_celery_periodic_tasks_and_airflow_scheduled_runs_are_clean(db):
    writable, url = db
    c = CORE()
    load(
        writable,
        c.celery_md(),
        {"celery_taskmeta": [c.cel_row(i, f"beat-{i}", "SUCCESS", NOW - i * H) for i in range(1, 4)]},
    )
    assert scan(url, "celery", NOW)[0] == set()
    a = QUEUES()
    rows = []
    for i in range(1, 4):  # one DAG run per schedule interval: distinct run_ids
        r = a.af_row("nightly", "export", "success", 1, start=NOW - i * H, end=NOW - i * H + M)
        r["run_id"] = f"scheduled__2026-11-30T0{i}:00:00+00:00"
        rows.append(r)
    load(writable, a.airflow_md(), {"task_instance": rows, "task_instance_history": []})
    assert scan(url, "airflow", NOW)[0] == set()


def test_solid_queue_recurring_runs_are_clean(db):
    writable, url = db
    s = FLOWS().SQ()
    for i in range(1, 4):  # a recurring task: one job per run_at (solid_queue_recurring_executions)
        s.job(i, "finished", NOW - i * H, klass="NightlyDigestJob")
    s.load(writable)
    assert scan(url, "solid-queue", NOW)[0] == set()


# ----------------------------------------------------------- waiting states with a deadline


def test_airflow_deferred_task_is_stuck_only_past_its_trigger_timeout(db):
    """A deferred task waits on the triggerer with its own deadline (trigger_timeout): past it, the
    scheduler should have failed it — stuck. Its heartbeat is stale by design while deferred."""
    writable, url = db
    a = QUEUES()
    rows = []
    for task, timeout in (("wait_late", NOW - 5 * M), ("wait_ok", NOW + 30 * M)):
        r = a.af_row("payouts", task, "deferred", 1, start=NOW - 2 * H, heartbeat=NOW - 2 * H)
        r["trigger_timeout"] = timeout
        rows.append(r)
    r = a.af_row("payouts", "run", "running", 1, start=NOW - 2 * H, heartbeat=NOW - H)  # its lease lapsed
    r["trigger_timeout"] = None
    rows.append(r)
    load(writable, a.airflow_md(), {"task_instance": rows, "task_instance_history": []})
    got, _ = scan(url, "airflow", NOW)
    assert got == {
        ("stuck_in_progress", "", a.af_key("payouts", "wait_late")),
        ("stuck_in_progress", "", a.af_key("payouts", "run")),
    }
