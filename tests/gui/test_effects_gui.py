"""The demo opened as `idemview --demo` opens it (issue #16): its layout reconciles with the charges
file, so the findings panel has hidden successes and orphans, and the detail lists effect records."""

from datetime import UTC, datetime

import pytest

from tests.gui.conftest import close_window, make_window

pytestmark = [pytest.mark.gui, pytest.mark.qt_log_ignore("propagateSizeHints")]
HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("IDEMVIEW_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("IDEMVIEW_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture
def window(qtbot):
    w = make_window(qtbot)
    w.resize(1400, 900)
    w.show()
    yield w
    close_window(w)


def test_demo_shows_hidden_success_double_charge_and_effect_records(qtbot, window, tmp_path):
    import sqlite3

    from idemview.qt.app import demo_spec
    from idemview.services.demo_effects import effects_path_for

    spec = demo_spec(tmp_path / "demo.db")
    with sqlite3.connect(effects_path_for(tmp_path / "demo.db")) as c:
        planted = {tuple(r) for r in c.execute("SELECT kind, scope, idempotency_key FROM idemview_demo_planted")}
    tab = window.open_spec(spec)
    qtbot.waitUntil(
        lambda: tab.scan_complete() and tab.model.rowCount() > 0 and not tab.model.is_loading(), timeout=60000
    )
    assert tab._scan.failed == {}, "every finding kind was checked"
    fs = tab.findings.findings
    assert {f.kind.value for f in fs} >= {"stuck_in_progress", "expired_key", "hidden_success", "orphan_effect"}
    got = {(f.kind.value, f.scope, f.key) for f in fs if f.kind.value in ("hidden_success", "orphan_effect")}
    assert got == {p for p in planted if p[0] != "duplicate_effect"}
    hidden = sorted(p for p in planted if p[0] == "hidden_success")[0]
    tab.open_operation(hidden[1], hidden[2])
    qtbot.waitUntil(lambda: tab.detail.detail is not None and tab.detail.detail.key_raw == hidden[2], timeout=20000)
    text = tab.detail.effects_box.text()
    assert "Effect records</b> — 1 in charges (sqlite" in text
    t = tab.detail.effects_table
    cells = [t.item(i, j).text() for i in range(t.rowCount()) for j in range(t.columnCount())]
    heads = [t.horizontalHeaderItem(j).text() for j in range(t.columnCount())]
    assert t.isVisible() and t.rowCount() == 1 and heads[:2] == ["record", "reference"]
    assert cells[1].startswith("ch_") and "customer_email" in heads
    assert not any("@example.com" in c for c in cells)  # the customer's e-mail is masked
    double = sorted(p for p in planted if p[0] == "duplicate_effect")[0]
    tab.open_operation(double[1], double[2])
    qtbot.waitUntil(lambda: tab.detail.detail is not None and tab.detail.detail.key_raw == double[2], timeout=20000)
    assert "— 2 in charges" in tab.detail.effects_box.text() and "more than one" in tab.detail.effects_box.text()
    assert tab.detail.effects_table.rowCount() == 2
    import os

    window.grab().save(os.environ.get("IDEMVIEW_SHOT", str(tmp_path / "effects.png")))
