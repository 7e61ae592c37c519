"""Issue 20 §9 and §10: at 1280 px the key header is not cut by the Copy buttons, a walk (F8) or a
search hit opens the detail at its top; Ctrl+K with three ledgers open shows the critical chip of the
double charge in every hit (it read "+1", no chip)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect
from PySide6.QtGui import QFontMetrics

from idemview.domain.model import FindingKind, Severity
from tests.gui.conftest import open_and_wait, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def test_key_header_whole_and_walks_start_at_the_top(qtbot, window, demo_db):
    path, planted = demo_db
    window.fit_to(QRect(0, 0, 1280, 800))
    tab = open_and_wait(qtbot, window, spec_for(path))
    scope, key = sorted(planted.incidents["duplicate_effect"])[0]
    tab.open_operation(scope, key)
    qtbot.waitUntil(lambda: tab.detail.detail is not None and tab.detail.detail.key_raw == key, timeout=20000)
    qtbot.wait(50)
    d = tab.detail
    assert d.title.full_text() == key and d.title.shown_text() == key  # whole, not cut
    assert not d.title.geometry().intersects(d.copy_btn.geometry())
    assert not d.title.geometry().intersects(d.link_btn.geometry())
    bar = tab.detail_scroll.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0, timeout=5000)
    for step in (lambda: tab.step_finding(1), lambda: window._open_hit(_hit(qtbot, window, key))):
        bar.setValue(bar.maximum())
        before = tab.detail.detail
        step()
        qtbot.waitUntil(lambda b=before: tab.detail.detail is not b, timeout=20000)
        assert bar.value() == 0


def _hit(qtbot, window, key):
    window.search_all(key)
    qtbot.waitUntil(lambda: window._search_left <= 0 and window.search_model.rowCount() > 0, timeout=10000)
    return window.search_model.index(0, 0)


def test_search_across_three_ledgers_shows_the_critical_chip(qtbot, window, demo_db):
    from idemview.qt.ledgertab import BadgeDelegate

    path, planted = demo_db
    window.fit_to(QRect(0, 0, 1280, 800))
    tabs = [open_and_wait(qtbot, window, spec_for(path, name=f"ledger {n}")) for n in "abc"]
    scope, key = sorted(planted.incidents["duplicate_effect"])[0]
    window.search_all(key)
    qtbot.waitUntil(lambda: window._search_left <= 0 and window.search_model.rowCount() == 3, timeout=20000)
    m, view = window.search_model, window.search_view
    col = m.COL_FINDINGS
    fm = QFontMetrics(view.font())
    for row in range(3):
        fs = m.data(m.index(row, col), __import__("idemview.qt.models").qt.models.FindingsRole)
        assert fs and fs[0].kind == FindingKind.DUPLICATE_EFFECT and fs[0].severity == Severity.CRITICAL
        chips, _more = BadgeDelegate.chips(fs, fm, 0, view.columnWidth(col))
        assert chips and chips[0][3] == Severity.CRITICAL and chips[0][0].startswith("‼")
    # and in a cell too narrow for its word the chip is elided, never dropped for a bare "+N"
    chips, more = BadgeDelegate.chips(fs, fm, 0, 40)
    assert len(chips) == 1 and chips[0][3] == Severity.CRITICAL
    assert len(tabs) == 3
