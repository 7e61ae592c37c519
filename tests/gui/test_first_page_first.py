"""First rows first (issue 27 item 3): when a ledger opens, its first page is asked alone; the findings
process, the counts and the chart start once the page is in. Meanwhile nothing says "none" (issue 20 §1),
a cancel leaves no kind "scanning…" forever, a closed tab starts nothing, and the findings process runs
nicer than the window."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from idemview.services.findstate import FindingState
from tests.gui.conftest import spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def _record_order(monkeypatch) -> list[str]:
    from idemview.qt.models import OperationsModel
    from idemview.services.scanservice import ScanService

    order: list[str] = []
    real_start, real_page = ScanService.start, OperationsModel._on_page

    def start(self, *a, **k):
        order.append("scan")
        return real_start(self, *a, **k)

    def on_page(self, result):
        order.append(f"page:{len(result.rows)}")
        return real_page(self, result)

    monkeypatch.setattr(ScanService, "start", start)
    monkeypatch.setattr(OperationsModel, "_on_page", on_page)
    return order


def test_the_scan_starts_after_the_first_page_and_the_grid_says_scanning_meanwhile(
    qtbot, window, demo_db, monkeypatch, held_page
):
    from idemview.qt import ledgertab
    from idemview.qt.models import COL_FINDINGS, FindingStateRole

    monkeypatch.setattr(ledgertab, "FIRST_PAGE_WAIT_MS", 60_000)  # only the page may let it go
    order = _record_order(monkeypatch)
    path, _planted = demo_db
    tab = window.open_spec(spec_for(path))
    qtbot.waitUntil(lambda: tab.ledger is not None and tab.runner.is_pending("page"), timeout=30000)
    qtbot.wait(300)
    assert order == [], "nothing but the first page runs while it is asked"
    assert not tab.runner.is_pending("count") and not tab.runner.is_pending("basics")
    assert tab._scan.proc is None and tab.findings is None
    assert "scanning" in tab.findings_title.text()
    held_page.set()
    qtbot.waitUntil(lambda: tab.model.rowCount() > 0, timeout=30000)
    st = tab.model.data(tab.model.index(0, COL_FINDINGS), FindingStateRole)
    assert st.state is FindingState.PENDING, "rows shown before the scan started say scanning, not none"
    qtbot.waitUntil(lambda: "scan" in order, timeout=10000)
    assert order[0].startswith("page:") and order[1] == "scan"
    qtbot.waitUntil(tab.scan_complete, timeout=60000)
    qtbot.waitUntil(lambda: tab._count is not None, timeout=30000)
    assert tab._count == tab.opened.n_ops > 0, "the count and the ledger's counts followed the page"


def test_a_slow_first_page_does_not_hold_the_scan_back_past_the_wait(qtbot, window, demo_db, monkeypatch, held_page):
    from idemview.qt import ledgertab

    monkeypatch.setattr(ledgertab, "FIRST_PAGE_WAIT_MS", 200)
    order = _record_order(monkeypatch)
    path, _planted = demo_db
    tab = window.open_spec(spec_for(path))
    qtbot.waitUntil(lambda: "scan" in order, timeout=30000)
    assert order == ["scan"] and tab.model.rowCount() == 0, "the scan went ahead while the page was held"
    held_page.set()
    qtbot.waitUntil(lambda: tab.model.rowCount() > 0 and tab.scan_complete(), timeout=60000)
    assert order.count("scan") == 1


def test_cancel_before_the_first_page_marks_the_kinds_cancelled_not_none(
    qtbot, window, demo_db, monkeypatch, held_page
):
    from idemview.qt import ledgertab

    monkeypatch.setattr(ledgertab, "FIRST_PAGE_WAIT_MS", 60_000)
    path, _planted = demo_db
    tab = window.open_spec(spec_for(path))
    qtbot.waitUntil(lambda: tab.ledger is not None and tab.runner.is_pending("page"), timeout=30000)
    tab.cancel_all()
    held_page.set()
    qtbot.waitUntil(lambda: tab.findings is not None and tab.findings_settled(), timeout=30000)
    assert not tab.scans.running
    assert tab.board.failed and set(tab.board.failed.values()) == {"cancelled"}, tab.board.failed
    assert not tab.board.pending, "no kind is left 'scanning…' with nothing scanning"
    st = tab.board.state_of(("no-such-scope", "no-such-key"))
    assert st.state is FindingState.NONE and st.failed, st
    assert st.words() == "none (some kinds not checked)", "never a bare 'none' about unchecked kinds"


def test_a_tab_closed_before_its_first_page_starts_no_scan(qtbot, window, demo_db, monkeypatch, held_page):
    from idemview.qt import ledgertab

    monkeypatch.setattr(ledgertab, "FIRST_PAGE_WAIT_MS", 300)
    order = _record_order(monkeypatch)
    path, _planted = demo_db
    tab = window.open_spec(spec_for(path))
    qtbot.waitUntil(lambda: tab.ledger is not None and tab.runner.is_pending("page"), timeout=30000)
    window.close_tab(window.tabs.indexOf(tab))
    held_page.set()
    qtbot.wait(800)  # past the wait: the timer must have been disarmed with the tab
    assert order == []


def test_the_findings_process_runs_nicer_than_the_window(qtbot, window, demo_db, monkeypatch):
    from idemview.qt.ledgertab import LedgerTab
    from idemview.services import scanproc

    if not hasattr(os, "nice"):
        pytest.skip("no POSIX nice here")
    gate = multiprocessing.get_context("spawn").Event()
    monkeypatch.setattr(LedgerTab, "scan_gate", gate)
    path, _planted = demo_db
    tab = window.open_spec(spec_for(path))
    qtbot.waitUntil(lambda: tab._scan.proc is not None, timeout=30000)
    pid, mine = tab._scan.proc.proc.pid, os.getpriority(os.PRIO_PROCESS, 0)
    want = min(mine + scanproc.SCAN_NICE, 19)
    qtbot.waitUntil(lambda: os.getpriority(os.PRIO_PROCESS, pid) == want, timeout=20000)
    gate.set()
    qtbot.waitUntil(tab.scan_complete, timeout=60000)
    assert os.getpriority(os.PRIO_PROCESS, 0) == mine, "the window's own priority is untouched"


@pytest.mark.parametrize(
    "counts,span,shown",
    [({}, False, False), ({"failed": [0, 0]}, False, False), ({"failed": [0, 3]}, False, True), ({}, True, True)],
)
def test_the_chart_shows_times_only_over_a_real_range(qtbot, counts, span, shown):
    """A ledger without creation times (Celery) has no span and an empty histogram: its chart's 0..1 range
    read as times "00.100 … 00.900" on the 2M-row Celery ledger's screenshot."""
    from datetime import UTC, datetime, timedelta

    from idemview.ledger.queries import Histogram
    from idemview.qt.overview import IncidentOverview

    ov = IncidentOverview()
    qtbot.addWidget(ov)
    t = datetime(2026, 11, 30, 12, tzinfo=UTC)
    ov.set_span(t - timedelta(hours=1) if span else None, t if span else None)
    ov.set_histogram(Histogram([t - timedelta(minutes=2), t - timedelta(minutes=1), t], counts, "operations"))
    assert ov.axes_show_values() is shown


def test_the_panel_title_gives_no_total_while_kinds_are_pending(qtbot, window, demo_db):
    """A partial count read as the answer ("0 findings on 0 operations · scanning…" on the 2M-row Celery
    ledger's screenshot, while seven kinds were still running): while scanning, it is "so far"."""
    from tests.gui.conftest import open_and_wait, settle

    path, _planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    settle(qtbot, tab)
    ff = tab.filtered_findings
    assert ff is not None and ff.n_total > 0
    tab._scanning = True  # as while a merge of some kinds is shown and others are pending
    tab._on_narrowed(tab.findings, ff)
    title = tab.findings_title.text()
    assert title == f"<b>Findings</b> — scanning… ({ff.n_total:,} findings so far)", title
    tab._scanning = False
    tab._on_narrowed(tab.findings, ff)
    assert " findings on " in tab.findings_title.text() and "scanning" not in tab.findings_title.text()
