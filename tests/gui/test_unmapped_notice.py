"""The ledger tab's notice for raw status values the layout does not map, and its filter (issue 12)."""

from __future__ import annotations

import sqlite3

import pytest

from tests.conftest import ANCHOR

MS = int(ANCHOR.timestamp() * 1000)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("IDEMVIEW_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("IDEMVIEW_DATA_DIR", str(tmp_path / "data"))


def dbos_file(path, statuses):
    """A DBOS SQLite system database (no schemas) with one workflow per status."""
    c = sqlite3.connect(path)
    c.execute(
        "CREATE TABLE workflow_status (workflow_uuid TEXT PRIMARY KEY, status TEXT, name TEXT, "
        "created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, recovery_attempts BIGINT DEFAULT 0, "
        "inputs TEXT, output TEXT, error TEXT, completed_at BIGINT, workflow_deadline_epoch_ms BIGINT)"
    )
    c.executemany(
        "INSERT INTO workflow_status (workflow_uuid, status, name, created_at, updated_at) "
        "VALUES (?, ?, 'checkout', ?, ?)",
        [(f"wf-{i}", s, MS - i * 1000, MS - i * 1000) for i, s in enumerate(statuses)],
    )
    c.commit()
    c.close()


def test_notice_lists_unmapped_values_and_filters_to_them(qtbot, tmp_path):
    from PySide6.QtWidgets import QApplication

    from idemview.qt import theme
    from idemview.qt.mainwindow import MainWindow
    from idemview.services.session import OpenSpec

    path = tmp_path / "dbos.db"
    dbos_file(path, ["SUCCESS", "PAUSED", "PAUSED", "ERROR", "RETRIES_EXCEEDED"])
    theme.apply_scheme(QApplication.instance())
    w = MainWindow()
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    tab = w.open_spec(OpenSpec(url=str(path), name="dbos", layout="dbos"))  # preset schema 'dbos' absent
    qtbot.waitUntil(
        lambda: tab.opened is not None and tab.model.rowCount() == 5 and not tab.model.is_loading(), timeout=30000
    )
    # the whole-table counts (and the unmapped values) come after the first page
    qtbot.waitUntil(lambda: tab.opened.n_ops >= 0 and not tab.runner.is_pending("basics"), timeout=30000)
    assert "5 operations" in tab.where.text()
    assert tab.unmapped.isVisible()
    assert "PAUSED (2)" in tab.unmapped.label.text()
    assert "RETRIES_EXCEEDED" not in tab.unmapped.label.text()  # a legacy spelling the preset maps
    w.grab().save(str(tmp_path / "unmapped.png"))
    tab.unmapped.button.setChecked(True)
    qtbot.waitUntil(lambda: tab.model.rowCount() == 2 and not tab.model.is_loading(), timeout=30000)
    assert tab.flt.unmapped_status
    tab.unmapped.button.setChecked(False)
    qtbot.waitUntil(lambda: tab.model.rowCount() == 5 and not tab.model.is_loading(), timeout=30000)
    for t in w.ledger_tabs():
        t.close_tab()
    from idemview.qt.workers import pool

    pool().waitForDone(10000)
