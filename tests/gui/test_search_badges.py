"""Issue #13 §5 and §7: Ctrl+K results carry status and finding badges, say which ledgers were not
searched, and leave the detail pane most of the height; chips and panel use the same severity glyph; the
UTC/local toggle says which zone is active."""

from __future__ import annotations

import pytest

from idemview.domain.model import FindingKind, Severity
from tests.gui.conftest import open_and_wait, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def test_search_results_badges_not_searched_and_room_for_the_detail(qtbot, window, demo_db, tmp_path):
    from idemview.qt import theme
    from idemview.services.session import OpenSpec

    path, planted = demo_db
    window.resize(1280, 800)
    tab = open_and_wait(qtbot, window, spec_for(path))
    broken = window.open_spec(
        OpenSpec(url=str(tmp_path / "missing" / "nope.db"), name="broken ledger", layout="idemview")
    )
    qtbot.waitUntil(lambda: not broken.runner.is_pending("open"), timeout=30000)
    assert broken.ledger is None
    window.tabs.setCurrentWidget(tab)
    scope, key = sorted(planted.incidents["duplicate_effect"])[0]
    window.search_all(key)
    qtbot.waitUntil(lambda: window._search_left <= 0 and window.search_model.rowCount() > 0, timeout=10000)
    text = window.search_status.full_text()
    assert text.startswith("1 operation in 1 ledger") and "not searched: broken ledger" in text
    m = window.search_model
    h = m.hit(0)
    assert (h.scope_raw, h.key_raw) == (scope, key)
    want = f"{theme.SEVERITY_GLYPHS[Severity.CRITICAL]} {theme.KIND_SHORT[FindingKind.DUPLICATE_EFFECT]}"
    assert m.data(m.index(0, m.COL_FINDINGS)).startswith(want)
    assert "completed" in m.data(m.index(0, 3))
    qtbot.waitUntil(lambda: window.search_dock.isVisible(), timeout=2000)
    qtbot.wait(50)
    assert window.search_dock.height() <= window.height() // 4 + 20
    window._open_hit(m.index(0, 0))
    qtbot.waitUntil(lambda: tab.detail.detail is not None and tab.detail.detail.key_raw == key, timeout=10000)
    # the dock takes a quarter at most: the detail keeps most of the tab (it was squeezed to two lines)
    assert tab.detail.height() >= window.height() * 0.45
    assert tab.detail.height() >= 2 * window.search_dock.height()


def test_replay_chip_uses_the_panel_glyph_and_zone_toggle_says_local(qtbot, window, demo_db):
    from idemview.qt import theme

    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    k = FindingKind.REPLAY_AFTER_EXPIRY
    row = next(i for i in range(tab.findings_model.rowCount()) if tab.findings_model.kind_at(i) == k)
    panel = tab.findings_model.data(tab.findings_model.index(row, 0))
    assert panel == f"{theme.SEVERITY_GLYPHS[Severity.CRITICAL]} critical"  # a replay that charged again
    assert tab.filterbar.chips[k].text().startswith(theme.SEVERITY_GLYPHS[Severity.CRITICAL] + " ")
    assert window.zone_btn.text() == "Times: UTC"
    window.zone_btn.setChecked(True)
    assert window.zone_btn.text().startswith("Times: local")
    assert "local" in tab.model.headerData(4, __import__("PySide6.QtCore").QtCore.Qt.Orientation.Horizontal)
    window.zone_btn.setChecked(False)
    assert window.zone_btn.text() == "Times: UTC"
