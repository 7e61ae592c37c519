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
    # every job ended: the footer is rewritten when one ends (Runner.pending_dropped), which would replace
    # the long text set below
    qtbot.waitUntil(lambda: not tab.runner.pending(), timeout=60000)
    qtbot.wait(50)
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


def _inside(w, child) -> bool:
    """``child`` (a button) lies wholly inside ``w``'s visible rectangle."""
    from PySide6.QtCore import QPoint

    tl = child.mapTo(w, QPoint(0, 0))
    return w.rect().contains(QRect(tl, child.size()))


def _dialogs(qtbot, win, tab):
    """Every dialog the app opens (issue 20 §5), opened the way the app opens it."""
    from PySide6.QtWidgets import QMessageBox

    from idemview.qt import helpdialog
    from idemview.qt.connections import ConnectionDialog
    from idemview.qt.password import ask_password

    win.edit_layout_current()
    ed = win.layout_editor
    qtbot.waitUntil(lambda: ed.isVisible(), timeout=10000)
    yield "layout editor", ed, [ed.save_button, ed.buttons.button(ed.buttons.StandardButton.Close)]
    ed.reject()
    dlg = ConnectionDialog(win.credentials, win.masker, win)
    qtbot.addWidget(dlg)
    dlg.show()
    yield "connections", dlg, [dlg.connect_btn, dlg.test_btn]
    dlg.reject()
    win.export_current()
    ex = win.export_dialog
    yield "export", ex, [ex.export_btn]
    ex.reject()
    pw = ask_password(win, "prod", "reader", "postgresql db/x", lambda _p: None)
    yield "password", pw, []
    pw.reject()
    for show in (helpdialog.show_findings_help, helpdialog.show_about, helpdialog.show_shortcuts):
        h = show(win)
        yield h.windowTitle(), h, []
        h.close()
    box = win._notify(QMessageBox.Icon.Information, "Evidence exported", "x\n" * 3)
    yield "message", box, []
    box.close()


def test_every_dialog_fits_the_screen_it_opens_on(qtbot, demo_db):
    """Each dialog, shown, fits (title bar included) the available geometry of its screen (the offscreen
    test screen is 800×600, smaller than a 1280×800 laptop) and its buttons are inside it."""
    from idemview.qt.fit import fits

    path, _ = demo_db
    win = make_window(qtbot)
    win.show()
    tab = open_and_wait(qtbot, win, spec_for(path))
    seen = []
    for name, dlg, buttons in _dialogs(qtbot, win, tab):
        qtbot.waitUntil(lambda d=dlg: d.isVisible(), timeout=5000)
        qtbot.wait(20)
        avail = (dlg.screen() or win.screen()).availableGeometry()
        assert fits(dlg, avail), (name, dlg.size(), avail)
        for b in buttons:
            assert _inside(dlg, b), (name, b.text())
        seen.append(name)
    assert len(seen) == 8
    close_window(win)


def test_layout_editor_fits_a_1280x800_screen_with_save_and_close(qtbot, demo_db):
    from idemview.qt.fit import fit_dialog, fits

    path, _ = demo_db
    win = make_window(qtbot)
    win.show()
    open_and_wait(qtbot, win, spec_for(path))
    win.edit_layout_current()
    ed = win.layout_editor
    qtbot.waitUntil(lambda: ed.isVisible(), timeout=10000)
    screen = QRect(0, 0, 1280, 800)
    ed.resize(1200, 800)  # what it asked for: taller than the screen with its title bar
    fit_dialog(ed, screen)
    # title bar and frame included (the offscreen platform reports a 4 px frame; a desktop's is larger)
    assert fits(ed, screen) and ed.frameGeometry().height() <= 800 and ed.height() < 800
    for b in (ed.save_button, ed.buttons.button(ed.buttons.StandardButton.Close)):
        assert _inside(ed, b)
    ed.reject()
    close_window(win)
