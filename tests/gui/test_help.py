"""Issue 20 §7: each finding kind's definition and severity rule one click from the chips, the findings
panel and the detail (the words of idemview.findings.definitions); Help has About (versions, paths) and
the keyboard shortcuts."""

from __future__ import annotations

import pytest

from idemview.domain.model import FindingKind
from tests.gui.conftest import open_and_wait, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def _help_text(window) -> str:
    return window.help_dialog.browser.toPlainText()


def test_help_for_findings_is_one_click_away(qtbot, window, demo_db):
    from idemview.findings.definitions import definition

    path, planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    dup = definition(FindingKind.DUPLICATE_EFFECT)
    # the chips' "?"
    tab.filterbar.help_btn.click()
    text = _help_text(window)
    for k in FindingKind:
        d = definition(k)
        if d is not None:
            assert d.definition[:40] in text
    window.help_dialog.close()
    # the panel's "?", with the selected kind first
    row = next(
        i
        for i in range(tab.findings_model.rowCount())
        if tab.findings_model.kind_at(i) == FindingKind.STUCK_IN_PROGRESS
    )
    tab.findings_view.setCurrentIndex(tab.findings_model.index(row, 0))
    tab.findings_help.click()
    text = _help_text(window)
    assert text.index(definition(FindingKind.STUCK_IN_PROGRESS).definition[:30]) < text.index(dup.definition[:30])
    window.help_dialog.close()
    # the detail's "what is this?" link beside the double charge
    scope, key = sorted(planted.incidents["duplicate_effect"])[0]
    tab.open_operation(scope, key)
    qtbot.waitUntil(lambda: tab.detail.detail is not None and bool(tab.detail.detail.findings), timeout=20000)
    assert 'href="help:0"' in tab.detail.findings_box.text()
    i = next(i for i, f in enumerate(tab.detail.detail.findings) if f.kind == FindingKind.DUPLICATE_EFFECT)
    tab.detail.findings_box.linkActivated.emit(f"help:{i}")
    text = _help_text(window)
    assert text.startswith("Findings") and dup.definition[:40] in text and dup.severity_rule[:20] in text
    assert "This finding: critical" in text
    window.help_dialog.close()


def test_about_and_shortcuts(qtbot, window):
    import PySide6
    import sqlalchemy

    from idemview import __version__

    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    acts = {a.text(): a for a in menu.actions()}
    acts["About idemview"].trigger()
    text = _help_text(window)
    assert __version__ in text and PySide6.__version__ in text and sqlalchemy.__version__ in text
    assert "connections.toml" in text and "idemview.log" in text
    window.help_dialog.close()
    acts["Keyboard shortcuts"].trigger()
    text = _help_text(window)
    assert "F8 / Shift+F8" in text and "Ctrl+K" in text and "next / previous finding" in text
