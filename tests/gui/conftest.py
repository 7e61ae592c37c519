"""GUI tests: a thread-pool leak guard after each test.

Every background job of the GUI runs on ``idemview.qt.workers.pool()`` (Qt's global thread pool). When a
test has finished and its widgets are closed, no job may still be running: a job that outlives its window
is a leak (it holds a database connection and may call back into deleted widgets). The guard waits a
bounded time for jobs that are finishing their last statement, then fails the test if any is still
active. Qt warnings fail every test here (``qt_log_level_fail`` in pyproject.toml).

Shared fixtures: an isolated config (QSettings, connections, logs), the main window, the demo ledger,
and the record of which thread ran each statement.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

UTC = UTC
LEAK_WAIT_MS = 15_000  # a cancelled job ends within one interrupted statement; this is far above it
HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("IDEMVIEW_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("IDEMVIEW_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("IDEMVIEW_LOG_DIR", str(tmp_path / "logs"))
    from idemview.qt import theme

    theme.TIME.set_utc(True)
    yield
    theme.TIME.set_utc(True)


@pytest.fixture
def query_threads():
    """Every statement any engine executes, with the thread that ran it."""
    seen: list[tuple[str, threading.Thread]] = []

    def rec(conn, cursor, statement, params, context, executemany):
        seen.append((statement, threading.current_thread()))

    event.listen(Engine, "before_cursor_execute", rec)
    yield seen
    event.remove(Engine, "before_cursor_execute", rec)


def assert_off_gui_thread(seen):
    main = threading.main_thread()
    on_gui = [s for s, t in seen if t is main]
    assert not on_gui, f"{len(on_gui)} statements ran on the GUI thread, e.g. {on_gui[0][:200]}"


def make_window(qtbot):
    from PySide6.QtWidgets import QApplication

    from idemview.qt import theme
    from idemview.qt.mainwindow import MainWindow

    theme.apply_scheme(QApplication.instance())
    w = MainWindow()
    qtbot.addWidget(w)
    return w


def close_window(w):
    for t in w.ledger_tabs():
        t.close_tab()
    from idemview.qt.workers import pool

    pool().waitForDone(10000)


@pytest.fixture
def window(qtbot):
    w = make_window(qtbot)
    w.show()
    yield w
    close_window(w)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    from idemview.services.demo import write_demo

    p = tmp_path_factory.mktemp("demo") / "demo.db"
    planted = write_demo(p, anchor=HOUR)
    return p, planted


def spec_for(path, name="demo ledger"):
    """The demo ledger at ``path`` opened as ``idemview --demo`` opens it: with the layout written beside
    it, which reconciles with the charges file (issue 16), else the built-in ``idemview`` preset."""
    from idemview.services.demo_effects import layout_path_for
    from idemview.services.session import OpenSpec

    lay = layout_path_for(path)
    return OpenSpec(url=str(path), name=name, layout=str(lay) if lay.exists() else "idemview")


def open_and_wait(qtbot, window, spec):
    tab = window.open_spec(spec)
    qtbot.waitUntil(
        lambda: tab.scan_complete() and tab.model.rowCount() > 0 and not tab.model.is_loading(), timeout=60000
    )
    return tab


def settle(qtbot, tab):
    """Wait until the grid and the narrowed findings follow the tab's current filter."""
    qtbot.waitUntil(
        lambda: tab.findings_settled() and not tab.model.is_loading() and not tab.runner.is_pending("page"),
        timeout=60000,
    )


def load_all(qtbot, tab):
    def done():
        if tab.model.canFetchMore():
            tab.model.fetchMore()
        return tab.model.is_exhausted() and not tab.runner.is_pending("page")

    qtbot.waitUntil(done, timeout=60000)


@pytest.fixture(autouse=True)
def _no_leaked_jobs(qapp):
    from PySide6.QtCore import QThreadPool

    from idemview.qt import workers

    yield
    for pool in {id(p): p for p in (QThreadPool.globalInstance(), workers.pool())}.values():
        if not pool.waitForDone(LEAK_WAIT_MS):
            pytest.fail(
                f"{pool.activeThreadCount()} background job(s) still running after the test: "
                "a window closed without cancelling its work"
            )
        assert pool.activeThreadCount() == 0


@pytest.fixture
def held_page(monkeypatch):
    """The grid's pages wait for the returned Event (on their worker): the first page can be held."""
    from idemview.qt import models

    release = threading.Event()
    real = models.fetch_grid_page

    def held(*a, **k):
        release.wait(30)
        return real(*a, **k)

    monkeypatch.setattr(models, "fetch_grid_page", held)
    yield release
    release.set()
