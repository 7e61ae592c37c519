"""Longest event-loop stall while the GUI opens a ledger, scrolls and filters (headless, offscreen).

Run by benchmarks/run.py in a child process (``--gui``): prints one JSON line ``@@GUI@@{...}``. The
method follows tests/test_gui_perf.py: a 10 ms QTimer records the gaps between its ticks; the largest
gap is the longest stall a user would feel. The grid is lazy (keyset pages of 200), so "scrolling to
the end" means scrolling until ``ROWS_TO_SCROLL`` rows have been fetched page by page, then jumping to
the last row of the ledger by sorting descending (what a person does to see the end of 1M rows).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROWS_TO_SCROLL = 20_000


def measure(url: str, timeout_s: float = 90.0) -> dict:
    os.environ["IDEMVIEW_CONFIG_DIR"] = tempfile.mkdtemp(prefix="idemview-bench-gui-")
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from idemview.domain.model import FindingKind, Status
    from idemview.qt import theme
    from idemview.qt.mainwindow import MainWindow
    from idemview.services.session import OpenSpec
    from idemview.qt.workers import pool

    app = QApplication.instance() or QApplication([])
    theme.apply_scheme(app)
    w = MainWindow()
    w.resize(1400, 900)
    w.show()

    def spin(seconds: float):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.002)

    def wait_until(cond, what: str):
        end = time.monotonic() + timeout_s
        while not cond():
            if time.monotonic() > end:
                raise TimeoutError(f"GUI: timed out waiting for {what}")
            app.processEvents()
            time.sleep(0.002)

    spin(0.3)
    gaps, last = [], [time.monotonic()]
    phases: dict[str, float] = {}
    timer = QTimer()
    timer.setInterval(10)

    def tick():
        now = time.monotonic()
        gaps.append((now - last[0], phase[0]))
        last[0] = now

    phase = ["open"]
    timer.timeout.connect(tick)
    timer.start()
    t0 = time.monotonic()
    unfinished = None
    try:
        tab = w.open_spec(OpenSpec(url=url, name="bench", layout="idemview"))
        wait_until(lambda: tab.model.rowCount() > 0, "first rows")
        phases["first_rows_s"] = time.monotonic() - t0
        phase[0] = "scroll"
        while tab.model.rowCount() < ROWS_TO_SCROLL:
            if tab.model.canFetchMore():
                tab.grid.scrollToBottom()
                tab.model.fetchMore()
            app.processEvents()
            time.sleep(0.005)
        tab.grid.scrollToBottom()
        spin(0.05)
        phase[0] = "filter status"
        tab.filterbar.status_actions[Status.FAILED].setChecked(True)
        wait_until(
            lambda: tab.flt.statuses == [Status.FAILED] and tab.model.rowCount() > 0 and not tab.model.is_loading(),
            "status filter",
        )
        phase[0] = "filter finding"
        tab.filterbar.clear()
        tab.filter_by_finding(FindingKind.STUCK_IN_PROGRESS)
        try:
            wait_until(
                lambda: (
                    tab.flt.findings == [FindingKind.STUCK_IN_PROGRESS]
                    and tab.model.rowCount() > 0
                    and not tab.model.is_loading()
                ),
                "finding filter",
            )
        except TimeoutError as e:
            unfinished = str(e) + f" after {timeout_s:.0f} s (stalls until then are counted)"
        spin(0.2)
    finally:
        timer.stop()
        for t in w.ledger_tabs():
            t.close_tab()
        pool().waitForDone(120_000)
    worst = max(gaps, key=lambda g: g[0]) if gaps else (0.0, "")
    by_phase: dict[str, float] = {}
    for g, p in gaps:
        by_phase[p] = max(by_phase.get(p, 0.0), g)
    return {
        "max_stall_s": worst[0],
        "worst_phase": worst[1],
        "by_phase": by_phase,
        "rows_scrolled": ROWS_TO_SCROLL,
        "ticks": len(gaps),
        "unfinished": unfinished,
        **phases,
        "total_s": time.monotonic() - t0,
    }


if __name__ == "__main__":
    try:
        res = measure(sys.argv[1])
    except Exception as e:  # noqa: BLE001
        res = {"error": f"{type(e).__name__}: {e}"}
    print("@@GUI@@" + json.dumps(res))
    os._exit(0)
