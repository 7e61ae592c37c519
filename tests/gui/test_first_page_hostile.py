"""Hostile sequences around the first-page wait (issue 27 item 3, fresh-eyes tester): F5 and Esc pressed
while the first page is held, two ledgers opened at once, a first page that fails, an empty ledger, a
ledger with NULL times and broken JSON, a filter set and an operation opened before the scan lands.
Nothing may crash, nothing may stay "scanning…" or "counting rows…" with nothing running, and nothing
may say "none" about a state not known yet."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import create_engine, insert

from idemview.services.findstate import FindingState
from idemview.services.session import OpenSpec
from tests.gui.conftest import spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def _held_open(qtbot, window, path, monkeypatch, wait_ms=60_000, name="demo ledger"):
    from idemview.qt import ledgertab

    monkeypatch.setattr(ledgertab, "FIRST_PAGE_WAIT_MS", wait_ms)
    tab = window.open_spec(spec_for(path, name=name))
    qtbot.waitUntil(lambda: tab.ledger is not None and tab.runner.is_pending("page"), timeout=30000)
    return tab


def _idle(tab) -> bool:
    return not tab.runner.pending() and not tab.scans.running and not tab.model.is_loading()


def test_f5_during_the_first_page_wait_still_counts_the_ledger(qtbot, window, demo_db, monkeypatch, held_page):
    """F5 before the first page landed replaced the opening's waiting work, and with it the whole-ledger
    count: the line under the banner said "counting rows…" forever with nothing counting."""
    path, planted = demo_db
    tab = _held_open(qtbot, window, path, monkeypatch)
    assert "counting rows…" in tab.where.text()
    for _ in range(3):
        tab.refresh()
    held_page.set()
    qtbot.waitUntil(lambda: tab.scan_complete() and _idle(tab), timeout=60000)
    assert tab.opened.n_ops == planted.operations > 0
    assert "counting rows…" not in tab.where.text(), tab.where.text()
    assert f"{planted.operations:,} operations" in tab.where.text(), tab.where.text()
    assert tab._count == planted.operations
    assert not tab.board.pending and "scanning" not in tab.findings_title.text()


def test_esc_during_the_first_page_wait_then_f5_counts_and_scans(qtbot, window, demo_db, monkeypatch, held_page):
    """Esc (several times) while the first page is held: every kind says cancelled, and the rows count says
    it was not counted (never "counting rows…" with nothing counting); F5 then counts and scans it all."""
    path, planted = demo_db
    tab = _held_open(qtbot, window, path, monkeypatch)
    for _ in range(4):
        tab.cancel_all()
    held_page.set()
    qtbot.waitUntil(lambda: tab.findings is not None and tab.findings_settled() and _idle(tab), timeout=30000)
    assert not tab.board.pending and set(tab.board.failed.values()) == {"cancelled"}
    assert "counting rows…" not in tab.where.text(), "nothing is counting after Esc: " + tab.where.text()
    title = tab.findings_title.text()
    assert "not checked" in title and "0 findings" not in title and "scanning" not in title, title
    tab.refresh()
    qtbot.waitUntil(lambda: tab.scan_complete() and _idle(tab), timeout=60000)
    assert not tab.board.failed and not tab.board.pending
    assert f"{planted.operations:,} operations" in tab.where.text(), tab.where.text()


def test_two_ledgers_opened_at_once_each_scan_once(qtbot, window, demo_db, monkeypatch, tmp_path):
    from idemview.services.demo import write_demo
    from idemview.services.scanservice import ScanService
    from tests.gui.conftest import HOUR

    other = tmp_path / "other.db"
    planted2 = write_demo(other, anchor=HOUR, operations=500, seed=11)
    starts: list[int] = []
    real = ScanService.start

    def start(self, *a, **k):
        starts.append(id(self))
        return real(self, *a, **k)

    monkeypatch.setattr(ScanService, "start", start)
    path, planted = demo_db
    a = window.open_spec(spec_for(path, name="a"))
    b = window.open_spec(spec_for(other, name="b"))
    for t in (a, b):
        qtbot.waitUntil(lambda t=t: t.scan_complete() and _idle(t) and t.model.rowCount() > 0, timeout=90000)
    assert sorted(starts) == sorted([id(a.scans), id(b.scans)]), "one scan per tab, none twice"
    assert a.opened.n_ops == planted.operations and b.opened.n_ops == planted2.operations


def test_a_first_page_that_fails_on_a_file_gone_bad_leaves_nothing_scanning(
    qtbot, window, tmp_path, monkeypatch, held_page
):
    """The SQLite file is overwritten with garbage after the open, before its first page: a banner says so,
    and neither the panel nor a kind stays "scanning…" forever."""
    from idemview.services.demo import write_demo
    from tests.gui.conftest import HOUR

    p = tmp_path / "gone-bad.db"
    write_demo(p, anchor=HOUR)
    tab = _held_open(qtbot, window, p, monkeypatch)
    tab.scan_process = False  # the threads transport: the failure reaches the kinds in this process
    tab.opened.engine.dispose()
    p.write_bytes(b"this is not a database" * 4096)
    held_page.set()
    qtbot.wait(8000)
    print(
        "DBG",
        tab.banner.isVisible(),
        tab.model.rowCount(),
        tab.runner.pending(),
        tab.scans.running,
        tab.model.is_loading(),
        len(tab.board.pending),
        tab.findings_title.text(),
        tab.where.text(),
        tab._count,
    )
    qtbot.waitUntil(lambda: tab.banner.isVisible(), timeout=30000)
    qtbot.waitUntil(lambda: _idle(tab) and not tab.board.pending, timeout=60000)
    assert "scanning" not in tab.findings_title.text(), tab.findings_title.text()
    assert "counting rows…" not in tab.where.text(), tab.where.text()


def test_an_empty_ledger_settles_after_the_wait(qtbot, window, tmp_path, monkeypatch):
    from idemview.qt import ledgertab
    from idemview.services.demo import reference_metadata

    monkeypatch.setattr(ledgertab, "FIRST_PAGE_WAIT_MS", 400)
    p = tmp_path / "empty.db"
    eng = create_engine(f"sqlite:///{p}")
    reference_metadata().create_all(eng)
    eng.dispose()
    tab = window.open_spec(OpenSpec(url=str(p), name="empty", layout="idemview"))
    qtbot.waitUntil(lambda: tab.scan_complete() and _idle(tab), timeout=30000)
    assert tab.model.rowCount() == 0 and tab._count == 0
    assert "scanning" not in tab.findings_title.text() and "scanning" not in tab.as_of.text()
    assert "counting rows…" not in tab.where.text() and "0 operations" in tab.where.text()


def test_null_times_and_broken_json_open_and_scan(qtbot, window, tmp_path):
    from idemview.services.demo import reference_metadata
    from tests.gui.conftest import HOUR

    p = tmp_path / "odd.db"
    eng = create_engine(f"sqlite:///{p}")
    md = reference_metadata()
    md.create_all(eng)
    t = HOUR.replace(tzinfo=None)
    rows = [
        {
            "id": 1,
            "scope": "s",
            "idempotency_key": "k-null",
            "status": "in_progress",
            "attempt_count": 1,
            "created_at": None,
            "request_body": "null",
            "response_body": None,
        },
        {
            "id": 2,
            "scope": "s",
            "idempotency_key": "k-json",
            "status": "succeeded",
            "attempt_count": 1,
            "created_at": t,
            "request_body": '{"amount": 12, "card": "4111',
            "response_body": "\x00\xff not json",
        },
    ]
    with eng.begin() as c:
        c.execute(insert(md.tables["operations"]), rows)
    eng.dispose()
    tab = window.open_spec(OpenSpec(url=str(p), name="odd", layout="idemview"))
    qtbot.waitUntil(lambda: tab.scan_complete() and _idle(tab) and tab.model.rowCount() == 2, timeout=60000)
    for key in ("k-null", "k-json"):
        tab.open_operation("s", key)
        qtbot.waitUntil(lambda key=key: getattr(tab.detail.detail, "key_raw", None) == key, timeout=20000)
    rec = tab.detail.detail.records[0]
    assert rec.created_at == HOUR and rec.request is not None, rec
    assert not tab.banner.isVisible()


def test_a_filter_and_an_operation_opened_before_the_scan_lands_say_pending(
    qtbot, window, demo_db, monkeypatch, held_page
):
    """An operation opened and a filter set while the first page is held, before the scan: its detail
    says the findings are being scanned, not "none"; once the scan lands, counts follow the filter."""
    path, planted = demo_db
    tab = _held_open(qtbot, window, path, monkeypatch)
    scope, key = next(iter(planted.incidents.values()))[0]
    tab.open_operation(scope, key)
    qtbot.waitUntil(lambda: tab.detail.detail is not None, timeout=20000)
    tab.filterbar.set_key(key)  # after: a held page holds a pool thread (a real one is interrupted)
    assert tab._scan.proc is None and tab.findings is None, "the scan waits for the first page"
    assert tab.board.state_of((scope, key)).state is FindingState.PENDING
    text = tab.detail.findings_box.text()
    assert "pending" in text.lower() and "none" not in text.lower(), text
    held_page.set()
    qtbot.waitUntil(lambda: tab.scan_complete() and _idle(tab), timeout=60000)
    assert tab.board.state_of((scope, key)).state is FindingState.THESE
    assert tab._count == 1 and tab.model.rowCount() == 1
    qtbot.waitUntil(lambda: "pending" not in tab.detail.findings_box.text().lower(), timeout=20000)


def test_esc_twice_while_the_findings_process_runs_marks_the_kinds_cancelled(qtbot, window, demo_db, monkeypatch):
    """The variant away from the first page: Esc, Esc while the scan runs. The second cancelled the first
    one's merge (the one carrying "cancelled"), and every kind stayed "scanning…" with nothing running."""
    import multiprocessing

    from idemview.qt.ledgertab import LedgerTab

    gate = multiprocessing.get_context("spawn").Event()
    monkeypatch.setattr(LedgerTab, "scan_gate", gate)
    path, _planted = demo_db
    tab = window.open_spec(spec_for(path))
    qtbot.waitUntil(lambda: tab._scan.proc is not None and tab.model.rowCount() > 0, timeout=30000)
    tab.cancel_all()
    tab.cancel_all()
    qtbot.waitUntil(lambda: tab.findings is not None and tab.findings_settled() and _idle(tab), timeout=30000)
    assert not tab.board.pending and set(tab.board.failed.values()) == {"cancelled"}
    assert "scanning" not in tab.findings_title.text() and "scanning" not in tab.as_of.text()
    gate.set()


@pytest.fixture
def pg_own_db(pg_url):
    """(URL, planted) of a PostgreSQL database of this test's own (the test may drop it), dropped after."""
    import os

    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from idemview.services.demo import generate
    from tests.gui.conftest import HOUR

    name = f"idemview_tg_first_page_{os.getpid()}"
    admin = create_engine(make_url(pg_url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    eng = create_engine(url)
    planted = generate(eng, operations=300, anchor=HOUR)
    eng.dispose()
    yield url, planted, admin, name
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _pg_held_open(qtbot, window, url, monkeypatch):
    from idemview.qt import ledgertab

    monkeypatch.setattr(ledgertab, "FIRST_PAGE_WAIT_MS", 60_000)
    tab = window.open_spec(OpenSpec(url=url, name="pg", layout="idemview"))
    qtbot.waitUntil(lambda: tab.ledger is not None and tab.runner.is_pending("page"), timeout=30000)
    tab.scan_process = False  # the threads transport: its kinds use the tab's own (dropped) pool
    return tab


def test_postgresql_sessions_terminated_before_the_first_page_recover(qtbot, window, pg_own_db, monkeypatch, held_page):
    """pg_terminate_backend on the tab's sessions (from another connection) while its first page is held:
    rows, counts and findings all arrive; a query that met a dead session says so, Reconnect clears it."""
    from sqlalchemy import text

    url, planted, admin, name = pg_own_db
    tab = _pg_held_open(qtbot, window, url, monkeypatch)
    with admin.connect() as c:
        killed = c.execute(
            text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = :d"), {"d": name}
        ).scalar()
    assert killed >= 1
    held_page.set()
    qtbot.waitUntil(lambda: tab.scan_complete() and _idle(tab) and tab.model.rowCount() > 0, timeout=60000)
    assert tab._count == planted.operations and not tab.board.failed
    assert f"{planted.operations:,} operations" in tab.where.text(), tab.where.text()
    # a query that met a killed session says "connection lost" (the chart's, here): Reconnect clears it
    tab.reconnect()
    qtbot.waitUntil(lambda: tab.scan_complete() and _idle(tab), timeout=60000)
    assert not tab.banner.isVisible()


def test_a_postgresql_database_gone_before_the_first_page(qtbot, window, pg_own_db, monkeypatch, held_page):
    """The database is dropped (WITH FORCE: its sessions ended) while the first page is held: a banner,
    and nothing stays "scanning…" or "counting rows…" with nothing running."""
    from sqlalchemy import text

    url, _planted, admin, name = pg_own_db
    tab = _pg_held_open(qtbot, window, url, monkeypatch)
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    held_page.set()
    qtbot.waitUntil(lambda: tab.banner.isVisible(), timeout=30000)
    qtbot.waitUntil(lambda: _idle(tab) and not tab.board.pending, timeout=60000)
    assert "scanning" not in tab.findings_title.text(), tab.findings_title.text()
    assert "scanning" not in tab.as_of.text(), tab.as_of.text()
    assert "counting rows…" not in tab.where.text(), tab.where.text()


def test_finding_markers_give_times_but_no_counts_axis_before_a_histogram(qtbot):
    """The 2M-row Celery ledger, late in its scan: findings had drawn markers, the chart's query still ran,
    and the counts axis read "0 … 0.5 … 1.0" beside no bars, as if no operations were created. Markers
    give the time axis its numbers; the counts axis waits for a histogram with counts (or a real span)."""
    from datetime import UTC, datetime, timedelta

    from idemview.domain.model import Finding, FindingKind, Severity
    from idemview.ledger.queries import Histogram
    from idemview.qt.overview import IncidentOverview

    ov = IncidentOverview()
    qtbot.addWidget(ov)
    t = datetime(2026, 11, 30, 12, tzinfo=UTC)
    ov.set_span(None, None)
    f = Finding(FindingKind.STUCK_IN_PROGRESS, Severity.MEDIUM, "s", "k", "stuck", at=t)
    ov.set_findings([f], {})
    assert ov.axes_show_values("bottom") and not ov.axes_show_values("left")
    ov.set_histogram(Histogram([t - timedelta(minutes=1), t], {}, "operations"))
    assert ov.axes_show_values("bottom") and not ov.axes_show_values("left"), "no counts: still no 0..1"
    ov.set_histogram(Histogram([t - timedelta(minutes=1), t], {"failed": [2]}, "operations"))
    assert ov.axes_show_values("bottom") and ov.axes_show_values("left")


def test_the_footer_names_only_the_work_still_running(qtbot, window, demo_db, monkeypatch):
    """The 2M-row Celery ledger's footer said "working: findings, overview, basics" long after the rows
    were counted (the line under the banner already had them): the list was written only when the tab
    became busy or idle, so a finished job stayed named while another ran."""
    import multiprocessing

    from idemview.qt.ledgertab import LedgerTab

    gate = multiprocessing.get_context("spawn").Event()
    monkeypatch.setattr(LedgerTab, "scan_gate", gate)
    path, planted = demo_db
    tab = window.open_spec(spec_for(path))
    qtbot.waitUntil(lambda: tab.opened is not None and tab.opened.n_ops >= 0 and tab._count is not None, timeout=30000)
    qtbot.waitUntil(lambda: not tab.runner.is_pending("overview"), timeout=30000)
    assert tab.runner.pending() == ["findings"], tab.runner.pending()
    footer = tab.footer.text()
    assert "working: findings" in footer and "basics" not in footer and "overview" not in footer, footer
    # a job named by a footer update while it ran (as the count's answer named "basics" there)
    hold = threading.Event()
    tab.runner.submit("basics", lambda tok: hold.wait(30), lambda _v: None)
    tab._update_footer()
    assert "basics" in tab.footer.text()
    hold.set()
    qtbot.waitUntil(lambda: not tab.runner.is_pending("basics"), timeout=30000)
    qtbot.wait(50)
    assert "basics" not in tab.footer.text(), tab.footer.text()
    gate.set()
    qtbot.waitUntil(lambda: tab.scan_complete() and _idle(tab), timeout=60000)
    assert "working" not in tab.footer.text(), tab.footer.text()


def test_a_locked_sqlite_file_at_the_first_page_then_f5(qtbot, window, tmp_path, monkeypatch, held_page):
    """Another process holds an exclusive lock on the file while the first page is asked: whatever fails
    says so, nothing stays "scanning…" or "counting rows…" with nothing running, the window answers, and
    F5 once the lock is gone shows rows, counts and findings."""
    import sqlite3

    from idemview.services.demo import write_demo
    from tests.gui.conftest import HOUR

    p = tmp_path / "locked.db"
    planted = write_demo(p, anchor=HOUR, operations=300)
    tab = _held_open(qtbot, window, p, monkeypatch, wait_ms=300)
    tab.scan_process = False
    locker = sqlite3.connect(p, timeout=0.1)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        held_page.set()
        qtbot.waitUntil(lambda: _idle(tab) and not tab.board.pending, timeout=90000)
        assert "scanning" not in tab.findings_title.text(), tab.findings_title.text()
        assert "counting rows…" not in tab.where.text(), tab.where.text()
    finally:
        locker.rollback()
        locker.close()
    tab.refresh()
    qtbot.waitUntil(lambda: tab.scan_complete() and _idle(tab) and tab.model.rowCount() > 0, timeout=60000)
    assert tab._count == planted.operations and not tab.board.failed
    assert f"{planted.operations:,} operations" in tab.where.text(), tab.where.text()


def test_a_finding_chip_chosen_before_the_scan_lands(qtbot, window, demo_db, monkeypatch, held_page):
    """A finding filter chosen during the first-page wait (the scan not started): once the scan lands the
    grid, its count and the chips agree with the planted incidents of that kind."""
    from idemview.domain.model import FindingKind
    from tests.gui.conftest import load_all

    path, planted = demo_db
    tab = _held_open(qtbot, window, path, monkeypatch)
    held_page.set()  # the chip's own page must not queue behind a held one (a real one is interrupted)
    tab.filterbar.set_findings([FindingKind.STUCK_IN_PROGRESS])
    qtbot.waitUntil(lambda: tab.scan_complete() and _idle(tab), timeout=60000)
    load_all(qtbot, tab)
    want = {tuple(r) for r in planted.incidents["stuck_in_progress"]}
    shown = {(tab.model.row(i).scope_raw, tab.model.row(i).key_raw) for i in range(tab.model.rowCount())}
    assert want <= shown and tab._count == len(shown), (len(want), len(shown), tab._count)


def test_an_operation_opened_before_the_scan_then_esc_does_not_say_no_findings(
    qtbot, window, demo_db, monkeypatch, held_page
):
    """An operation with planted findings opened during the first-page wait, then Esc: no kind was checked,
    so its detail must not say "✓ No findings for this operation" (nor call a cancel a failed check)."""
    path, planted = demo_db
    tab = _held_open(qtbot, window, path, monkeypatch)
    scope, key = planted.incidents["stuck_in_progress"][0]
    tab.open_operation(scope, key)
    qtbot.waitUntil(lambda: tab.detail.detail is not None, timeout=20000)
    assert "pending" in tab.detail.findings_box.text().lower()
    tab.cancel_all()
    held_page.set()
    qtbot.waitUntil(lambda: tab.findings is not None and tab.findings_settled() and _idle(tab), timeout=30000)
    qtbot.waitUntil(lambda: "pending" not in tab.detail.findings_box.text().lower(), timeout=20000)
    text = tab.detail.findings_box.text()
    assert "No findings for this operation" not in text, text
    assert "not checked" in text.lower() and "cancelled" in text.lower() and "failed" not in text.lower(), text


def test_the_panel_says_cancelled_not_failed_for_kinds_esc_stopped(qtbot, window, demo_db, monkeypatch, held_page):
    from idemview.qt.models import FindingsModel

    path, _planted = demo_db
    tab = _held_open(qtbot, window, path, monkeypatch)
    tab.cancel_all()
    held_page.set()
    qtbot.waitUntil(lambda: tab.findings is not None and tab.findings_settled() and _idle(tab), timeout=30000)
    m: FindingsModel = tab.findings_model
    words = {m.data(m.index(r, 2)) for r in range(m.rowCount())}
    assert "cancelled" in words and "failed" not in words, words
