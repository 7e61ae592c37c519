"""A running job's lock is its PROCESS's heartbeat (issue 26, "per-row limits"): Solid Queue (two joins:
job -> solid_queue_claimed_executions.process_id -> solid_queue_processes.last_heartbeat_at, pruned after
process_alive_threshold = 5 min: rails/solid_queue lib/solid_queue.rb, app/models/solid_queue/process/
prunable.rb) on SQLite, PostgreSQL and MariaDB, and GoodJob (good_jobs.locked_by_id ->
good_job_processes.updated_at, inactive after EXPIRED_INTERVAL = 5 min: bensheldon/good_job
app/models/good_job/process.rb) on PostgreSQL; tables as each system's install template creates them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import BigInteger, Column, DateTime, Integer, MetaData, SmallInteger, String, Table, Text, Uuid

from idemview.domain.model import FindingKind
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import LayoutError, load_preset, parse_layout
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.ledgers import load, scan
from tests.presets.test_planted_job_queues import gj_id, gj_job, gj_rows, good_job_md, naive, pg_only
from tests.presets.test_planted_workflows_webhooks import NOW, SQ, sq_md

S = timedelta(seconds=1)
M = timedelta(minutes=1)
H = timedelta(hours=1)


def sq_processes(md: MetaData) -> MetaData:
    """queue_schema.rb solid_queue_processes."""
    Table(
        "solid_queue_processes",
        md,
        Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
        Column("kind", String(255), nullable=False),
        Column("last_heartbeat_at", DateTime, nullable=False),
        Column("supervisor_id", BigInteger),
        Column("pid", Integer, nullable=False),
        Column("hostname", String(255)),
        Column("metadata", Text),
        Column("created_at", DateTime, nullable=False),
        Column("name", String(255), nullable=False),
    )
    return md


def _proc(pid, beat):
    return {
        "id": pid,
        "kind": "Worker",
        "last_heartbeat_at": naive(beat),
        "pid": 4000 + pid,
        "hostname": "web-1",
        "created_at": naive(NOW - 3 * H),
        "name": f"worker-{pid}",
    }


def test_solid_queue_claimed_job_of_a_dead_process_is_stuck(db):
    """Planted: job 5 claimed by process 1, whose last heartbeat is 10 min old (past the 5 min threshold);
    job 7 claimed 20 min ago by a process whose row is gone (orphaned: ClaimedExecution.orphaned, which the
    supervisor fails with ProcessMissingError at boot, lib/solid_queue/supervisor/maintenance.rb: its
    lock time is its claim's created_at). Look-alikes: job 6 claimed by live process 2 (beat 20 s ago)
    for 2 h (a long job is not stuck), job 10 orphaned a minute ago (within the threshold), job 8 ready,
    job 9 finished (claimed once by the dead process: a finished job has no claim)."""
    writable, url = db
    s = SQ()
    s.job(5, "claimed", NOW - 20 * M)
    s.job(6, "claimed", NOW - 2 * H)
    s.job(7, "claimed", NOW - 20 * M)
    s.job(8, "ready", NOW - M)
    s.job(9, "finished", NOW - H)
    s.job(10, "claimed", NOW - M)
    claims = s.t["solid_queue_claimed_executions"]
    for c, pid in zip(claims, (1, 2, 3, 4), strict=True):
        c["process_id"] = pid
    s.t["solid_queue_processes"] = [_proc(1, NOW - 10 * M), _proc(2, NOW - 20 * S)]
    load(writable, sq_processes(sq_md()), s.t)
    got, fs = scan(url, "solid-queue", NOW)
    assert got == {("stuck_in_progress", "", "5"), ("stuck_in_progress", "", "7")}
    ev = {f.key: f.evidence[0] for f in fs}
    assert ev["5"]["locked_at"] == "2026-11-30T11:50:00Z"
    assert ev["5"]["lock_expired_at"] == "2026-11-30T11:55:00Z"
    assert ev["7"]["locked_at"] == "2026-11-30T11:40:00Z"
    eng = open_engine(url)
    try:
        ops = {o.key: o for o in Ledger(eng, load_preset("solid-queue")).iter_operations(now=NOW)}
    finally:
        eng.dispose()
    assert ops["6"].locked_at == NOW - 20 * S and ops["8"].locked_at is None
    assert ops["7"].locked_at == NOW - 20 * M and ops["10"].locked_at == NOW - M


def test_solid_queue_without_the_processes_table_keeps_no_lock_time(db):
    writable, url = db
    s = SQ()
    s.job(5, "claimed", NOW - 20 * M)
    load(writable, sq_md(), s.t)
    got, _ = scan(url, "solid-queue", NOW)
    assert got == set()
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("solid-queue"))
        assert "no lock time" in FindingEngine(led, NOW).unsupported()[FindingKind.STUCK_IN_PROGRESS]
    finally:
        eng.dispose()


def gj_processes(md: MetaData) -> MetaData:
    """create_good_jobs.rb.erb good_job_processes (t.timestamps, state jsonb, lock_type)."""
    from sqlalchemy.dialects import postgresql

    Table(
        "good_job_processes",
        md,
        Column("id", Uuid(as_uuid=False), primary_key=True),
        Column("created_at", DateTime, nullable=False),
        Column("updated_at", DateTime, nullable=False),
        Column("state", postgresql.JSONB),
        Column("lock_type", SmallInteger),
    )
    return md


def test_good_job_running_job_of_a_dead_process_is_stuck(db):
    """Planted: job 20 locked by process A, refreshed 8 min ago (past EXPIRED_INTERVAL, 5 min); job 23 names
    no process and was performed 2 h ago (the hour heuristic, kept where no process is named). Look-alikes:
    job 21 running for 3 h on live process B (refreshed 10 s ago: a long job, not stuck), job 22 performed
    10 min ago without a process (within the hour), job 24 locked by a process row that is gone (cleanup
    pending: the heuristic, 20 min in)."""
    pg_only(db, "GoodJob")
    writable, url = db
    specs = [
        gj_job(20, "ChargeJob", NOW - 30 * M, performed=NOW - 29 * M),
        gj_job(21, "ReportJob", NOW - 3 * H, performed=NOW - 3 * H),
        gj_job(22, "ChargeJob", NOW - 11 * M, performed=NOW - 10 * M),
        gj_job(23, "ChargeJob", NOW - 3 * H, performed=NOW - 2 * H),
        gj_job(24, "ChargeJob", NOW - 21 * M, performed=NOW - 20 * M),
    ]
    rows = gj_rows(specs)
    locks = {gj_id(20): gj_id(900), gj_id(21): gj_id(901), gj_id(24): gj_id(902)}
    for j in rows["good_jobs"]:
        j["locked_by_id"] = locks.get(j["id"])
        j["locked_at"] = j["performed_at"] if j["id"] in locks else None
        j["lock_type"] = 0 if j["id"] in locks else None
    rows["good_job_processes"] = [
        {"id": gj_id(900), "created_at": naive(NOW - 5 * H), "updated_at": naive(NOW - 8 * M), "lock_type": 0},
        {"id": gj_id(901), "created_at": naive(NOW - 5 * H), "updated_at": naive(NOW - 10 * S), "lock_type": 0},
    ]
    load(writable, gj_processes(good_job_md()), rows)
    got, fs = scan(url, "good_job", NOW)
    assert got == {("stuck_in_progress", "ChargeJob", gj_id(20)), ("stuck_in_progress", "ChargeJob", gj_id(23))}
    ends = {f.key: f.evidence[0]["lock_expired_at"] for f in fs}
    assert ends == {gj_id(20): "2026-11-30T11:57:00Z", gj_id(23): "2026-11-30T11:00:00Z"}
    eng = open_engine(url)
    try:
        ops = {o.key: o for o in Ledger(eng, load_preset("good_job")).iter_operations(now=NOW)}
    finally:
        eng.dispose()
    assert ops[gj_id(21)].lock_expires_at == NOW - 10 * S + 5 * M
    assert ops[gj_id(24)].lock_expires_at == NOW - 20 * M + H
    # the user's explicit lock timeout is their word for every row: the heartbeats are not read
    got, _ = scan(url, "good_job", NOW, lock_timeout_s=4 * 3600)
    assert got == set()


def test_good_job_without_processes_keeps_the_hour_heuristic(db):
    pg_only(db, "GoodJob")
    writable, url = db
    load(writable, good_job_md(), gj_rows([gj_job(23, "ChargeJob", NOW - 3 * H, performed=NOW - 2 * H)]))
    assert scan(url, "good_job", NOW)[0] == {("stuck_in_progress", "ChargeJob", gj_id(23))}


BASE = """
[layout]
name = "x"
[operations]
table = "jobs"
key = ["id"]
status = "unknown"
[expiry]
"""


def test_joined_lock_forms_are_validated():
    via = 'via = { table = "c", on = { id = "job_id" } }'
    ok = parse_layout(BASE + f'lock_time_from = {{ table = "p", on = {{ pid = "id" }}, column = "beat", {via} }}\n')
    assert ok.lock_time_from.via.table == "c" and ok.lock_time_from.operations_columns() == {"id"}
    where = 'where = [{ column = "evicted_at", is_null = true }]'
    ok = parse_layout(
        BASE + f'lock_expires_from = {{ table = "r", on = {{ id = "task_id" }}, column = "t", {where} }}\n'
    )
    assert ok.lock_expires_from.where[0].op == "is_null" and ok.lock_expires_from.seconds is None
    own = 'via = { table = "c", on = { id = "job_id" }, column = "created_at" }'
    ok = parse_layout(BASE + f'lock_time_from = {{ table = "p", on = {{ pid = "id" }}, column = "beat", {own} }}\n')
    assert ok.lock_time_from.via.column == "created_at"
    for bad, msg in [
        ('lock_time_from = { table = "p", on = { a = "b" }, column = "c", seconds = 5 }', "takes"),
        (
            'lock_time_from = { table = "p", on = { a = "b" }, column = "c", via = { table = "v", on = { a = "b" }, '
            "column = 1 } }",
            "via takes",
        ),
        ('lock_expires_from = { table = "p", on = { a = "b" }, column = "c", seconds = -1 }', "non-negative"),
        (
            'lock_expires_from = { table = "p", on = { a = "b" }, column = "c", via = { on = { a = "b" } } }',
            "via takes",
        ),
        ('lock_expires_from = { table = "p", on = { a = "b" }, column = "c", where = "x" }', "where takes"),
        ('lock_expires_from = { table = "p", on = {}, column = "c" }', "on maps"),
    ]:
        with pytest.raises(LayoutError, match=msg):
            parse_layout(BASE + bad + "\n")


@pytest.mark.parametrize("name", ["good_job", "solid-queue", "hatchet-tasks"])
def test_joined_lock_forms_survive_the_layout_editor(name):
    """The editor's draft and the layout -> model path keep via, where and seconds."""
    from idemview.layouts.draft import LayoutDraft, build_layout, model_from_layout

    lay = load_preset(name)
    for again in (LayoutDraft.from_layout(lay).to_layout(), build_layout(model_from_layout(lay))):
        assert (again.lock_time_from, again.lock_expires_from) == (lay.lock_time_from, lay.lock_expires_from)
    assert (lay.lock_time_from or lay.lock_expires_from) is not None


def test_via_own_time_with_a_where_on_the_joined_row(tmp_path):
    """``via.column`` with ``where``: a joined row that is there but fails the predicates gives no lock
    time (it is not missing); a missing one gives the via row's own time. SQLite, naive UTC texts."""
    from sqlalchemy import create_engine, text

    path = tmp_path / "l.db"
    eng = create_engine(f"sqlite:///{path}")
    with eng.begin() as c:
        c.execute(text("CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT)"))
        c.execute(text("CREATE TABLE c (id INTEGER PRIMARY KEY, job_id INTEGER, pid INTEGER, created_at TEXT)"))
        c.execute(text("CREATE TABLE p (id INTEGER PRIMARY KEY, beat TEXT, gone INTEGER)"))
        c.execute(text("INSERT INTO jobs VALUES (1, 'running'), (2, 'running'), (3, 'running')"))
        c.execute(
            text(
                "INSERT INTO c VALUES (1, 1, 10, '2026-11-30 11:00:00'), (2, 2, 20, '2026-11-30 11:01:00'), "
                "(3, 3, 99, '2026-11-30 11:02:00')"
            )
        )
        c.execute(text("INSERT INTO p VALUES (10, '2026-11-30 11:58:00', NULL), (20, '2026-11-30 11:59:00', 1)"))
    eng.dispose()
    lay = parse_layout(
        BASE.replace('status = "unknown"', 'status = "in_progress"')
        + 'lock_time_from = { table = "p", on = { pid = "id" }, column = "beat", encoding = "naive", '
        'where = [{ column = "gone", is_null = true }], '
        'via = { table = "c", on = { id = "job_id" }, column = "created_at" } }\n'
    )
    ro = open_engine(str(path))
    try:
        got = {o.key: o.locked_at for o in Ledger(ro, lay).iter_operations(now=NOW)}
    finally:
        ro.dispose()
    assert NOW.hour == 12 and NOW.minute == 0
    assert got == {"1": NOW - 2 * M, "2": None, "3": NOW - 58 * M}
