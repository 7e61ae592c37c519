"""Issue 20 §11: the GUI export offers "effect records" rows (the CLI's ``--rows effects``) when the layout
has an [effects] section; the file holds the same rows the core writes; "Open folder" without a file
manager says where the folder is."""

from __future__ import annotations

import csv

import pytest

from tests.gui.conftest import open_and_wait, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def test_gui_exports_effect_records(qtbot, window, demo_db, tmp_path, monkeypatch):
    from PySide6.QtGui import QDesktopServices

    from idemview.domain.filters import Filter
    from idemview.evidence.plan import export_evidence

    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    out = tmp_path / "effects.csv"
    window.export_done_box = None
    window.export_current()
    dlg = window.export_dialog
    i = dlg.rows.findData("effects")
    assert i >= 0 and dlg.rows.itemText(i) == "effect records"
    dlg.rows.setCurrentIndex(i)
    dlg.path.setText(str(out))
    dlg.export_btn.click()
    qtbot.waitUntil(lambda: getattr(window, "export_done_box", None) is not None, timeout=60000)
    ref = export_evidence(tab.ledger, Filter(), tmp_path / "core.csv", rows="effects", now=tab.now)
    with open(out, encoding="utf-8") as f:
        got = list(csv.reader(f))
    with open(tmp_path / "core.csv", encoding="utf-8") as f:
        want = list(csv.reader(f))
    assert ref.rows > 0 and len(got) == ref.rows + 1 and got[0] == want[0]
    assert f"Exported {ref.rows:,} effect records" in window.export_done_box.text()
    # no file manager: the path is said (and put on the clipboard), not silently dropped
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda u: False))
    assert window.open_folder(str(tmp_path)) is False
    assert str(tmp_path) in window.statusBar().currentMessage() or str(tmp_path) in window.statusBar().toolTip()
