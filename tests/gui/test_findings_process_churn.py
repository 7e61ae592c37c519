"""Refreshing a ledger many times in a row, then cancelling: each refresh's findings process is stopped
and reaped; no child of the app keeps running, none is left a zombie (branch redis-perf-test)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.gui.conftest import open_and_wait, spec_for

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="procps' ps --ppid"),
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def _children() -> list[tuple[int, str, str]]:
    """(pid, state, command) of this process's children, from ps (the findings processes among them)."""
    out = subprocess.run(
        ["ps", "--ppid", str(os.getpid()), "-o", "pid=,stat=,args="], capture_output=True, text=True
    ).stdout
    rows = []
    for line in out.splitlines():
        pid, stat, args = line.strip().split(None, 2)
        if int(pid) != 0 and "ps --ppid" not in args:
            rows.append((int(pid), stat, args))
    return rows


def test_refresh_many_times_then_cancel_leaves_no_process(qtbot, window, demo_db):
    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    seen = set()
    for _ in range(6):
        tab.refresh()
        qtbot.waitUntil(lambda: tab._scan.proc is not None, timeout=30000)
        seen.add(tab._scan.proc.proc.pid)
        qtbot.wait(30)
    tab.cancel_all()
    assert len(seen) == 6  # six findings processes were started
    qtbot.waitUntil(lambda: not [c for c in _children() if "multiprocessing.spawn" in c[2]], timeout=30000)
    assert not [c for c in _children() if c[0] in seen]  # none running, none a zombie
