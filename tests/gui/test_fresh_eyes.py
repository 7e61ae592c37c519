"""Fresh-eyes probes of the lean grid (issue 27): sorted by a column with ties and NULLs, every page that
fell out of the cache comes back with the same rows; a row clicked while its page is being read again
opens when the page lands; a finding filter scrolled while the scan is held keeps its rows when the scan
lands."""

from __future__ import annotations

import multiprocessing

import pytest

from idemview.domain.model import FindingKind
from tests.gui.conftest import assert_off_gui_thread, open_and_wait, settle, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def _ref(r):
    return (r.scope_raw, r.key_raw)


def _scroll_to_end(qtbot, tab, seen):
    m = tab.model

    def step():
        for i, r in m.cached():
            seen.setdefault(i, _ref(r))
        tab.grid.scrollToBottom()
        if m.canFetchMore():
            m.fetchMore()
        return m.is_exhausted() and not tab.runner.is_pending("page")

    qtbot.waitUntil(step, timeout=60000)
    for i, r in m.cached():
        seen.setdefault(i, _ref(r))


def _row_when_held(qtbot, m, i):
    from idemview.qt.models import RowRole

    m.data(m.index(i, 0), RowRole)  # asks for the page again when it fell out
    qtbot.waitUntil(lambda: m.data(m.index(i, 0), RowRole) is not None, timeout=30000)
    return _ref(m.data(m.index(i, 0), RowRole))


@pytest.mark.parametrize("column", ["attempts", "status", "expires"])
def test_sorted_by_a_column_with_ties_every_evicted_page_comes_back_the_same(
    qtbot, window, demo_db, monkeypatch, column, query_threads
):
    from PySide6.QtCore import Qt

    from idemview.qt import models

    monkeypatch.setattr(models, "CACHE_PAGES", 2)
    path, planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    m = tab.model
    m.page_size = 211
    col = {"attempts": models.COL_ATTEMPTS, "status": models.COL_STATUS, "expires": models.COL_EXPIRES}[column]
    m.sort(col, Qt.SortOrder.AscendingOrder)
    settle(qtbot, tab)
    seen: dict[int, tuple] = {}
    _scroll_to_end(qtbot, tab, seen)
    n = m.rowCount()
    assert len(seen) == n and len(set(seen.values())) == n, "every operation once"
    assert m.held_rows() <= 2 * 211
    for i in (0, 1, 210, 211, 500, n // 2, n - 1):
        assert _row_when_held(qtbot, m, i) == seen[i], f"row {i} came back different"
    assert_off_gui_thread(query_threads)


def test_a_row_selected_while_its_page_is_read_again_opens_when_it_lands(qtbot, window, demo_db, monkeypatch):
    from idemview.qt import models

    monkeypatch.setattr(models, "CACHE_PAGES", 2)
    path, _planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    m = tab.model
    m.page_size = 100
    tab._requery()
    settle(qtbot, tab)
    seen: dict[int, tuple] = {}
    _scroll_to_end(qtbot, tab, seen)
    assert 0 not in dict(m.cached())
    # the page is read again only after the click's debounce has fired (a slow database): the click
    # must not be lost because the row was "…" when it was handled
    held: list = []
    refetch = m._refetch
    monkeypatch.setattr(m, "_refetch", held.append)
    tab.grid.scrollToTop()
    tab.grid.selectRow(3)  # its page fell out: "…" until it is read again
    qtbot.waitUntil(lambda: not tab._current_timer.isActive() and bool(held), timeout=10000)
    qtbot.wait(50)
    monkeypatch.setattr(m, "_refetch", refetch)
    m._refetch(held[0])
    qtbot.waitUntil(lambda: getattr(tab, "_shown_ref", None) == seen[3], timeout=20000)
    qtbot.waitUntil(lambda: tab.detail.detail is not None and _ref(tab.detail.detail) == seen[3], timeout=20000)


def test_a_finding_filter_scrolled_while_the_scan_is_held_keeps_its_rows(qtbot, window, demo_db, monkeypatch):
    from idemview.qt import models
    from idemview.qt.ledgertab import LedgerTab

    monkeypatch.setattr(models, "CACHE_PAGES", 2)
    path, planted = demo_db
    gate = multiprocessing.get_context("spawn").Event()
    monkeypatch.setattr(LedgerTab, "scan_gate", gate)
    tab = window.open_spec(spec_for(path))
    qtbot.waitUntil(lambda: tab.ledger is not None and tab._scan.proc is not None, timeout=30000)
    tab.model.page_size = 3
    tab.filter_by_finding(FindingKind.DUPLICATE_EFFECT)
    seen: dict[int, tuple] = {}
    qtbot.waitUntil(lambda: tab.flt.findings == [FindingKind.DUPLICATE_EFFECT], timeout=30000)
    _scroll_to_end(qtbot, tab, seen)
    assert tab._scan.pending and tab.findings is None
    want = set(planted.incidents["duplicate_effect"])
    assert set(seen.values()) == want and len(seen) == len(want)
    gate.set()
    qtbot.waitUntil(lambda: tab.scan_complete(), timeout=60000)
    for i in range(len(seen)):
        assert _row_when_held(qtbot, tab.model, i) == seen[i]
    assert tab.model.rowCount() == len(want)


def test_a_cancelled_scan_shows_no_severity_and_no_bare_zero(qtbot, window, demo_db, monkeypatch):
    """Cancelled before any kind landed: no kind was checked, so no chip shows a severity glyph (a
    guess) and the findings header does not read as "0 findings" without saying the kinds were not
    checked."""
    from idemview.qt.filterbar import FilterBar
    from idemview.qt.ledgertab import LedgerTab

    path, _planted = demo_db
    gate = multiprocessing.get_context("spawn").Event()
    monkeypatch.setattr(LedgerTab, "scan_gate", gate)
    tab = window.open_spec(spec_for(path))
    qtbot.waitUntil(lambda: tab.ledger is not None and tab._scan.proc is not None, timeout=30000)
    qtbot.waitUntil(lambda: tab.model.rowCount() > 0 and not tab.model.is_loading(), timeout=30000)
    tab.cancel_all()
    qtbot.waitUntil(lambda: tab.findings is not None and tab.findings_settled(), timeout=30000)
    gate.set()
    assert tab.board.failed and set(tab.board.failed.values()) == {"cancelled"}, tab.board.failed
    for k, chip in tab.filterbar.chips.items():
        if k in tab.board.failed:
            assert chip.text().startswith(FilterBar.PENDING_GLYPH), f"{k}: {chip.text()!r} guesses a severity"
            assert "not checked" in chip.toolTip() or "cancelled" in chip.toolTip()
    head = tab.findings_title.text()
    assert "not checked" in head, head
    # a variant: a filter chosen after the cancel keeps saying so (the header is rebuilt per filter)
    tab.filterbar.status_actions[next(iter(tab.filterbar.status_actions))].setChecked(True)
    settle(qtbot, tab)
    assert "not checked" in tab.findings_title.text()


def test_rows_written_after_scrolling_do_not_shift_an_evicted_page(qtbot, window, demo_db, monkeypatch, tmp_path):
    import shutil
    import sqlite3

    from idemview.qt import models

    path, _planted = demo_db
    live = tmp_path / "live.db"
    shutil.copy(path, live)
    monkeypatch.setattr(models, "CACHE_PAGES", 2)
    tab = open_and_wait(qtbot, window, spec_for(live, "live"))
    m = tab.model
    m.page_size = 100
    tab._requery()
    settle(qtbot, tab)
    seen: dict[int, tuple] = {}
    _scroll_to_end(qtbot, tab, seen)
    assert 0 not in dict(m.cached())
    with sqlite3.connect(live) as c:  # the service writes on: five operations newer than any shown
        cols = [r[1] for r in c.execute("PRAGMA table_info(operations)")]
        newest = dict(
            zip(cols, c.execute("SELECT * FROM operations ORDER BY created_at DESC LIMIT 1").fetchone(), strict=True)
        )
        for j in range(5):
            row = dict(newest, id=None, idempotency_key=f"written-later-{j}", created_at="2099-01-01 00:00:00")
            c.execute(
                f"INSERT INTO operations ({','.join(row)}) VALUES ({','.join('?' * len(row))})", list(row.values())
            )
    tab.grid.scrollToTop()
    got = [_row_when_held(qtbot, m, i) for i in range(100)]
    assert got == [seen[i] for i in range(100)], "the rows shown before are where they were"


def test_copying_a_row_whose_page_is_being_read_again_copies_no_placeholder(qtbot, window, demo_db, monkeypatch):
    from PySide6.QtGui import QGuiApplication

    from idemview.qt import models

    monkeypatch.setattr(models, "CACHE_PAGES", 2)
    path, _planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    m = tab.model
    m.page_size = 100
    tab._requery()
    settle(qtbot, tab)
    _scroll_to_end(qtbot, tab, {})
    monkeypatch.setattr(m, "_refetch", lambda page: None)  # a slow database: the page is still "…"
    tab.grid.scrollToTop()
    tab.grid.setCurrentIndex(m.index(3, 0))
    QGuiApplication.clipboard().setText("before")
    said: list[str] = []
    tab.message.connect(said.append)
    tab.copy_selection()
    assert QGuiApplication.clipboard().text() == "before", "a placeholder row went to the clipboard"
    assert said and "loading" in said[-1]


def test_a_revealed_value_goes_with_its_evicted_page(qtbot, window, demo_db, monkeypatch):
    """OperationsModel._keep promises that what was kept per row of a dropped page goes with it: a value
    revealed on request is never kept beyond its page (and never lands on another operation's row)."""
    from idemview.qt import models

    monkeypatch.setattr(models, "CACHE_PAGES", 2)
    path, _planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    m = tab.model
    m.page_size = 100
    tab._requery()
    settle(qtbot, tab)
    m.set_revealed(3, models.COL_SCOPE, "revealed-scope")
    assert m.data(m.index(3, models.COL_SCOPE)) == "revealed-scope"
    seen: dict[int, tuple] = {}
    _scroll_to_end(qtbot, tab, seen)
    assert 0 not in dict(m.cached())
    assert not m.is_revealed(3, models.COL_SCOPE)
    assert _row_when_held(qtbot, m, 3) == seen[3]
    assert m.data(m.index(3, models.COL_SCOPE)) != "revealed-scope"
    # a variant: the last row, whose page is held, keeps what was revealed on it
    last = m.rowCount() - 1
    m.set_revealed(last, models.COL_KEY, "revealed-key")
    assert m.data(m.index(last, models.COL_KEY)) == "revealed-key"
