"""GUI tests: a thread-pool leak guard after each test.

Every background job of the GUI runs on ``idemview.qt.workers.pool()`` (Qt's global thread pool). When a
test has finished and its widgets are closed, no job may still be running: a job that outlives its window
is a leak (it holds a database connection and may call back into deleted widgets). The guard waits a
bounded time for jobs that are finishing their last statement, then fails the test if any is still
active. Qt warnings fail every test here (``qt_log_level_fail`` in pyproject.toml).
"""

from __future__ import annotations

import pytest

LEAK_WAIT_MS = 15_000  # a cancelled job ends within one interrupted statement; this is far above it


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
