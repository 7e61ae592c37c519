"""Issue 25 item 2 in the GUI: a finding kind registered from outside the package (tests/toykind.py,
through the ``idemview.finding_kinds`` entry point, so the findings process finds it too) gets a chip
with its own short label, glyph hint and count, and its chip filters the grid to its operations."""

from __future__ import annotations

import sqlite3

import pytest

from idemview.findings import registry
from tests.gui.conftest import load_all, open_and_wait, settle, spec_for
from tests.toykind import TOY, install_entry_point

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


@pytest.fixture
def toy(tmp_path, monkeypatch):
    install_entry_point(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert registry.load_plugins() == [TOY]
    try:
        yield TOY
    finally:
        registry.unregister(TOY)


def test_a_plugin_kind_has_a_chip_with_its_count_and_filters_the_grid(qtbot, window, demo_db, toy):
    path, _planted = demo_db
    with sqlite3.connect(path) as c:
        want = set(c.execute("SELECT scope, idempotency_key FROM operations WHERE status = 'failed'"))
    assert want
    tab = open_and_wait(qtbot, window, spec_for(path))
    assert tab.findings.counts[TOY] == len(want)  # counted in the findings process
    chip = tab.filterbar.chips[TOY]
    assert chip.text().startswith("✱ toy") and chip.text().endswith(f"{len(want)}"), chip.text()
    assert "toy failed record" in chip.toolTip()
    tab.filter_by_finding(TOY)
    qtbot.waitUntil(lambda: tab.flt.findings == [TOY], timeout=5000)
    settle(qtbot, tab)
    assert "with a toy failed record" in tab.flt.sentence()
    load_all(qtbot, tab)
    shown = {(r.scope_raw, r.key_raw) for r in tab.model.rows()}
    assert shown == want
