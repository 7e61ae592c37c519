"""A Redis ledger as a GUI tab beside a SQLite ledger (pytest-qt, offscreen): it opens on a worker,
shows its records and findings, is marked read-only, and the cross-ledger key search finds a key in it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from idemview.domain.model import FindingKind
from tests.redis.conftest import put_celery, server_now

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("IDEMVIEW_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("IDEMVIEW_DATA_DIR", str(tmp_path / "data"))
    from tests.gui.conftest import close_window, make_window

    w = make_window(qtbot)
    w.resize(1400, 900)
    w.show()
    yield w
    close_window(w)


def _wait_open(qtbot, tab):
    qtbot.waitUntil(
        lambda: tab.scan_complete() and tab.model.rowCount() > 0 and not tab.model.is_loading(), timeout=30000
    )
    return tab


def test_redis_tab_beside_sqlite_tab_with_search(qtbot, window, redis_db, tmp_path):
    from idemview.services.demo import write_demo
    from idemview.services.session import OpenSpec

    url, raw = redis_db
    t = server_now(raw) - timedelta(hours=1)
    for i in range(30):
        put_celery(
            raw,
            f"task-{i:02d}",
            "SUCCESS",
            done=t + timedelta(minutes=i),
            extended={"name": "mail.send", "args": [i], "kwargs": {"to": f"user{i}@example.com"}},
        )
    put_celery(
        raw,
        "task-failed",
        "FAILURE",
        done=t,
        traceback="SMTPError",
        extended={"name": "mail.send", "args": [99], "kwargs": {}, "retries": 1},
    )
    demo = tmp_path / "demo.db"
    write_demo(demo, operations=200)
    lite = _wait_open(qtbot, window.open_spec(OpenSpec(url=str(demo), name="demo-sqlite", layout="idemview")))
    red = _wait_open(qtbot, window.open_spec(OpenSpec(url=url, name="celery-results")))
    assert window.tabs.count() == 2 and window.tabs.indexOf(lite) >= 0 and window.tabs.indexOf(red) >= 0
    assert red.badge.text().strip() == "READ-ONLY"
    assert "detected celery-redis-extended" in red.detection.text()
    assert red.opened.n_ops == 31 and red.opened.where.startswith("redis://")
    assert red.findings.counts[FindingKind.UNRESOLVED_FAILURE] == 1
    assert FindingKind.EXPIRED_KEY in red.findings.unsupported
    shown = [
        red.model.data(red.model.index(r, c))
        for r in range(red.model.rowCount())
        for c in range(red.model.columnCount())
    ]
    assert not any("@example.com" in str(s) for s in shown)
    window.grab().save(str(tmp_path / "redis-tab.png"))
    window.search_box.setText("task-failed")
    window.search_all("task-failed")
    qtbot.waitUntil(lambda: window._search_left <= 0, timeout=15000)
    hits = window.search_model.hits()
    assert [(h.ledger_name, h.key_raw) for h in hits] == [("celery-results", "task-failed")]
    window.search_view.doubleClicked.emit(window.search_model.index(0, 1))
    qtbot.waitUntil(lambda: red.detail.detail is not None and red.detail.detail.key_raw == "task-failed", timeout=10000)
    assert window.current_tab() is red
    window.grab().save(str(tmp_path / "redis-detail.png"))


def test_refresh_of_a_redis_tab_takes_a_new_snapshot(qtbot, window, redis_db):
    from idemview.services.session import OpenSpec

    url, raw = redis_db
    t = server_now(raw)
    put_celery(raw, "a", "SUCCESS", done=t)
    tab = _wait_open(qtbot, window.open_spec(OpenSpec(url=url, name="r", layout="celery-redis")))
    first = tab.opened
    assert first.n_ops == 1
    put_celery(raw, "b", "FAILURE", done=t)
    tab.refresh(live=True)  # a live refresh re-scans the same snapshot
    assert tab.opened is first
    tab.refresh()  # F5: the keys are read again
    qtbot.waitUntil(lambda: tab.opened is not first and tab.scan_complete(), timeout=30000)
    assert tab.opened.n_ops == 2
    qtbot.waitUntil(
        lambda: tab.findings is not None and tab.findings.counts[FindingKind.UNRESOLVED_FAILURE] == 1, timeout=30000
    )
