"""“Export report…” in the window (issue 24 item 1): the current filter, written on a worker (never on
the GUI thread), the session's masking key (tags in the report are the tags on screen), the number of
operations in full from the dialog, and a manifest that verifies."""

from __future__ import annotations

import sqlite3
import threading

import pytest

import idemview
from idemview.masking.masker import TAG_RE, Masker
from idemview.qt import report as qt_report
from tests.gui.conftest import open_and_wait, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def test_export_report_from_the_window(qtbot, window, demo_db, tmp_path, monkeypatch):
    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    assert window.act_report.isEnabled()
    threads = []
    real = qt_report.write_report

    def spy(*a, **kw):
        threads.append(threading.current_thread() is threading.main_thread())
        return real(*a, **kw)

    monkeypatch.setattr(qt_report, "write_report", spy)
    window.report_done_box = None
    window.act_report.trigger()
    dlg = window.report_dialog
    out = tmp_path / "r.html"
    dlg.path.setText(str(out))
    dlg.full.setValue(3)
    dlg.export_btn.click()
    qtbot.waitUntil(lambda: getattr(window, "report_done_box", None) is not None, timeout=120000)
    assert threads == [False]  # written on a worker thread
    m = idemview.read_report(out)
    assert m["masking_key"]["scope"] == "session"
    assert m["filter"]["sentence"] == tab.flt.sentence() == "All operations"
    assert m["now"].startswith(tab.now.strftime("%Y-%m-%dT%H:%M:%S"))
    assert m["report"]["in_full"] == 3 and m["report"]["operations"] > 3
    in_report = set(TAG_RE.findall(out.read_text(encoding="utf-8")))
    # the same key as the screen: the ledger's raw error texts masked with the session's key give
    # tags found in the report; a fresh key (the CLI's) gives none of them
    with sqlite3.connect(path) as c:
        raw = [r[0] for r in c.execute("SELECT error FROM attempts WHERE error IS NOT NULL")]

    def tags(m):
        return {t for e in raw for t in TAG_RE.findall(m.mask_text(e))}

    assert tags(window.masker.export_masker()) & in_report
    assert not tags(Masker()) & in_report
    assert "Report:" in window.report_done_box.text() and str(out) in window.report_done_box.text()


def test_a_refused_target_is_explained_in_the_dialog(qtbot, window, demo_db):
    path, _ = demo_db
    open_and_wait(qtbot, window, spec_for(path))
    window.act_report.trigger()
    dlg = window.report_dialog
    dlg.path.setText(str(path))  # the ledger itself
    dlg.export_btn.click()
    assert dlg.isVisible() and "ledger being read" in dlg.problem.text()
    dlg.reject()
