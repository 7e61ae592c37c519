"""The dedup windows view on a 1280×800 screen (gui-polish): the table's last column, "Suggested" (the
window that would have covered every retry: the answer), was behind a horizontal scroll bar; the window
now grows within the screen and the chart gives up the rest, so every column shows whole."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect

from tests.gui.conftest import open_and_wait, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise"),
]

SCREEN = QRect(0, 0, 1280, 800)


def test_every_column_of_the_windows_table_shows_at_1280(qtbot, window, demo_db):
    from idemview.qt.fit import fit_dialog
    from idemview.qt.windowsview import CHART_MIN

    path, _planted = demo_db
    window.fit_to(SCREEN)
    tab = open_and_wait(qtbot, window, spec_for(path))
    tab.windows_button.click()
    dlg = tab.windows_dialog
    fit_dialog(dlg, SCREEN)
    view = dlg.view
    qtbot.waitUntil(lambda: view.report is not None and not tab.runner.is_pending("windows"), timeout=60000)
    view.fit_table(SCREEN)  # as on the screen the dialog opened on (the offscreen screen is 800 px wide)
    qtbot.wait(50)
    t = view.table
    assert t.rowCount() >= 5
    assert t.horizontalScrollBar().maximum() == 0
    last = t.columnCount() - 1
    assert t.horizontalHeaderItem(last).text().startswith("Suggest")
    right = t.horizontalHeader().sectionViewportPosition(last) + t.horizontalHeader().sectionSize(last)
    assert right <= t.viewport().width()
    assert dlg.frameGeometry().width() <= SCREEN.width()
    assert view.plot.width() >= CHART_MIN - 10
    dlg.close()
