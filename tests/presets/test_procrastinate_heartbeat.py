"""procrastinate: a job left ``doing`` by a killed worker is stuck once its worker's heartbeat is older
than procrastinate's stalled threshold (issue #26): procrastinate/sql/queries.sql
``select_stalled_jobs_by_heartbeat`` (30 s ``stalled_worker_timeout``). The lock time is read from the
joined ``procrastinate_workers`` table (``[expiry] lock_time_from``). PostgreSQL only, as procrastinate."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import BigInteger, Column, DateTime, ForeignKey, Table, text

from idemview.domain.model import FindingKind
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import LayoutError, load_preset, parse_layout
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.ledgers import load, scan
from tests.presets.test_planted_workflows_webhooks import NOW, Proc, _engine, proc_md

S = timedelta(seconds=1)


@pytest.fixture
def pg(request, tmp_path):
    """A PostgreSQL database of this test's own (procrastinate runs on PostgreSQL only)."""
    eng, url = _engine(request, tmp_path, "postgresql")
    yield eng, url
    eng.dispose()


def proc3_md():
    """procrastinate 3 schema.sql: procrastinate_workers (id identity, last_heartbeat timestamptz NOT
    NULL DEFAULT NOW()) and procrastinate_jobs.worker_id REFERENCES it ON DELETE SET NULL."""
    md = proc_md()
    Table(
        "procrastinate_workers",
        md,
        Column("id", BigInteger, primary_key=True),
        Column("last_heartbeat", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    )
    jobs = md.tables["procrastinate_jobs"]
    jobs.c.worker_id.append_foreign_key(ForeignKey("procrastinate_workers.id", ondelete="SET NULL"))
    return md


def _plant():
    p = Proc()
    p.job(1, "shop.tasks.charge", "doing", NOW - 20 * 60 * S, [])  # worker 1 died 10 min ago: stuck
    p.job(2, "shop.tasks.charge", "doing", NOW - 20 * 60 * S, [])  # worker 2 beats: a long job
    p.job(3, "shop.tasks.sync", "doing", NOW - 20 * 60 * S, [])  # worker row pruned: no lock time here
    p.job(4, "shop.tasks.sync", "succeeded", NOW - 60 * 60 * S, ["succeeded"])  # finished, dead worker
    for j, w in zip(p.jobs, (1, 2, None, 1), strict=True):
        j["worker_id"] = w
    workers = [{"id": 1, "last_heartbeat": NOW - 600 * S}, {"id": 2, "last_heartbeat": NOW - 5 * S}]
    return p, workers


def test_a_doing_job_of_a_dead_worker_is_stuck(pg):
    writable, url = pg
    p, workers = _plant()
    load(
        writable,
        proc3_md(),
        {"procrastinate_workers": workers, "procrastinate_jobs": p.jobs, "procrastinate_events": p.events},
    )
    got, fs = scan(url, "procrastinate", NOW)
    assert got == {("stuck_in_progress", "", "1")}
    ev = fs[0].evidence[0]
    assert ev["locked_at"] == "2026-11-30T11:50:00Z" and ev["lock_expired_at"] == "2026-11-30T11:50:30Z"
    # a stricter threshold (a worker configured with a 3 s stalled_worker_timeout) catches worker 2 too
    got, _ = scan(url, "procrastinate", NOW, lock_timeout_s=3)
    assert got == {("stuck_in_progress", "", "1"), ("stuck_in_progress", "", "2")}


def test_before_procrastinate_3_there_is_no_lock_time(pg):
    writable, url = pg
    p, _ = _plant()
    for j in p.jobs:
        j["worker_id"] = None
    load(writable, proc_md(), {"procrastinate_jobs": p.jobs, "procrastinate_events": p.events})
    eng = open_engine(url)
    try:
        fe = FindingEngine(Ledger(eng, load_preset("procrastinate")), NOW)
        assert FindingKind.STUCK_IN_PROGRESS in fe.unsupported()
        assert not [f for f in fe.run() if f.kind == FindingKind.STUCK_IN_PROGRESS]
    finally:
        eng.dispose()


def test_lock_time_from_is_checked_when_parsed():
    base = '[layout]\nname = "x"\n[operations]\ntable = "t"\nkey = ["id"]\n[operations.status]\ncolumn = "s"\n'
    for bad, words in (
        ('[expiry]\nlock_time_from = { table = "w", column = "hb" }\n', "on maps"),
        ('[expiry]\nlock_time_from = { on = { a = "b" }, column = "hb" }\n', "needs table"),
        ('[expiry]\nlock_time_from = { table = "w", on = { a = "b" }, column = "hb", encoding = "x" }\n', "encoding"),
        (
            '[operations.times]\nlocked_at = "l"\n[expiry]\n'
            'lock_time_from = { table = "w", on = { a = "b" }, column = "h" }\n',
            "one or the other",
        ),
    ):
        try:
            parse_layout(base + bad)
        except LayoutError as e:
            assert words in str(e) and "\n" not in str(e)
        else:
            raise AssertionError(bad)
