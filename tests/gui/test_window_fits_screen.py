"""Issue #13 §1: the main window fits the screen's available geometry, remembers its geometry and
splitters (QSettings in an isolated config folder), and no message can widen it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect

from tests.gui.conftest import close_window, make_window, open_and_wait, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


@pytest.mark.parametrize("w,h", [(1280, 800), (1600, 1000)])
def test_window_sizes_itself_to_the_available_geometry(qtbot, w, h):
    win = make_window(qtbot)
    avail = QRect(0, 0, w, h - 40)  # a panel takes 40 px
    win.fit_to(avail)
    win.show()
    assert win.width() <= w and win.height() <= h - 40
    assert win.width() >= int(w * 0.9)
    assert avail.contains(win.frameGeometry().topLeft())
    close_window(win)


def test_first_open_fits_the_real_screen(qtbot):
    win = make_window(qtbot)
    win.show()
    avail = win.available()
    assert win.width() <= avail.width() and win.height() <= avail.height()
    close_window(win)


@pytest.mark.parametrize("w,h", [(1280, 800), (1600, 1000)])
def test_no_message_can_widen_the_window(qtbot, demo_db, w, h):
    path, _ = demo_db
    win = make_window(qtbot)
    win.fit_to(QRect(0, 0, w, h))
    win.show()
    tab = open_and_wait(qtbot, win, spec_for(path, name="a ledger with a rather long connection name " * 3))
    before = win.width()
    long = "working: " + ", ".join(f"findings:kind_{i}" for i in range(60))
    tab.footer.setText(long)
    tab.detection.setText("detected idemview (97%): " + "because of many reasons " * 20)
    win.show_status(long)
    tab.message.emit(long)
    qtbot.wait(50)
    assert win.width() == before
    assert win.minimumSizeHint().width() <= w
    # the whole text is still there, in the tooltip
    assert tab.footer.full_text() == long and tab.footer.toolTip() == long
    assert tab.footer.shown_text().endswith("…")
    assert win.statusBar().currentMessage() != long and "…" in win.statusBar().currentMessage()
    assert win.statusBar().toolTip() == long
    # and the window can go back to the screen size whatever the messages say
    win.resize(w, h)
    assert win.width() == w
    close_window(win)


def test_geometry_and_splitters_are_remembered(qtbot, demo_db, tmp_path):
    path, _ = demo_db
    win = make_window(qtbot)
    win.fit_to(QRect(0, 0, 1280, 800))
    win.show()
    tab = open_and_wait(qtbot, win, spec_for(path))
    avail = win.available()
    win.resize(avail.width() - 100, avail.height() - 50)
    size = (win.width(), win.height())
    tab.splitters["main"].setSizes([600, 480])
    sizes = tab.splitters["main"].sizes()
    win.close()
    close_window(win)
    assert (tmp_path / "config" / "gui.ini").exists()

    again = make_window(qtbot)
    again.show()
    # the offscreen test screen (800 px) is narrower than the window's minimum: the height says the
    # geometry came back, the width that it stays inside the screen
    assert again.height() == size[1]
    assert again.width() <= again.available().width()
    t2 = open_and_wait(qtbot, again, spec_for(path))
    assert t2.splitters["main"].sizes() == sizes
    close_window(again)


def test_remembered_geometry_larger_than_the_screen_is_clamped(qtbot):
    win = make_window(qtbot)
    win.show()
    avail = win.available()
    win.resize(avail.width() + 600, avail.height() + 300)
    win.clamp_to()
    assert win.width() <= avail.width() and win.height() <= avail.height()
    close_window(win)
