"""Longest event-loop stall while the GUI opens a ledger, scrolls and filters (headless, offscreen).

Run by benchmarks/run.py in a child process (``--gui``): prints one JSON line ``@@GUI@@{...}``. The
method follows tests/test_gui_perf.py: a 10 ms QTimer records the gaps between its ticks; the largest
gap is the longest stall a user would feel. The grid is lazy (keyset pages of 200), so "scrolling to
the end" means scrolling until ``ROWS_TO_SCROLL`` rows have been fetched page by page, then jumping to
the last row of the ledger by sorting descending (what a person does to see the end of 1M rows).

Standalone (issue 11 §3)::

    python benchmarks/gui_stall.py URL --layout celery [--finding stuck_in_progress] [--timeout 120]

prints the JSON line too, with ``first_rows_s`` (open → first rows painted), ``max_stall_s`` and
``by_phase`` (open, scroll, filter status, filter finding), ``finding_rows_s`` (a finding chip clicked →
its first rows shown; ``finding_count`` its exact count), ``scan_done_s`` (open → every finding kind
in) and the peak RSS of the GUI process and of the findings process (``ru_maxrss``, the process
reaped first). ``--profile FILE`` writes a cProfile of the GUI thread (the event loop) for finding
what stalls it. ``--refresh`` presses F5 once the scan is done and times the second scan (phase
``refresh``: the first scan's findings are dropped then).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROWS_TO_SCROLL = 20_000


def _pin_clock(iso: str) -> None:
    """The GUI's clock starts at ``iso`` (and runs on): a generated ledger is read as of the moment it
    was generated for (benchmarks/gen.py ``ANCHOR``), not as of a wall clock that has aged it — a day
    later every row of a Celery ledger with a 1-day ``result_expires`` would be an expired key."""
    from datetime import datetime, timedelta

    import idemview.qt.ledgertab as lt

    start, pinned = time.time(), datetime.fromisoformat(iso)

    class _Clock(datetime):
        @classmethod
        def now(cls, tz=None):
            t = pinned + timedelta(seconds=time.time() - start)
            return t if tz is None else t.astimezone(tz)

    lt.datetime = _Clock  # type: ignore[misc]


def measure(
    url: str,
    timeout_s: float = 90.0,
    layout: str = "idemview",
    finding: str = "stuck_in_progress",
    status: str = "failed",
    profile: str | None = None,
    now: str | None = None,
    refresh: bool = False,
) -> dict:
    os.environ["IDEMVIEW_CONFIG_DIR"] = tempfile.mkdtemp(prefix="idemview-bench-gui-")
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from idemview.domain.model import FindingKind, Status
    from idemview.qt import theme
    from idemview.qt.mainwindow import MainWindow
    from idemview.qt.workers import pool
    from idemview.services.session import OpenSpec

    if now:
        _pin_clock(now)
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
        gaps.append((now - last[0], phase[0], now))
        last[0] = now

    phase = ["open"]
    timer.timeout.connect(tick)
    import gc

    gc_pauses: list[tuple[float, int, int]] = []  # (seconds, generation, objects collected) of each collection
    gc_start = [0.0]

    def on_gc(ev, info):
        if ev == "start":
            gc_start[0] = time.monotonic()
        else:
            gc_pauses.append((time.monotonic() - gc_start[0], info["generation"], info["collected"]))

    gc.callbacks.append(on_gc)
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()  # the GUI thread only: workers run on other threads
        prof.enable()
    timer.start()
    t0 = time.monotonic()
    unfinished = None
    kind, st = FindingKind(finding), Status(status)
    tab = None
    try:
        tab = w.open_spec(OpenSpec(url=url, name="bench", layout=layout))
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
        t1 = time.monotonic()
        tab.filterbar.status_actions[st].setChecked(True)
        wait_until(
            lambda: tab.flt.statuses == [st] and tab.model.rowCount() > 0 and not tab.model.is_loading(),
            "status filter",
        )
        phases["status_rows_s"] = time.monotonic() - t1
        phase[0] = "filter finding"
        tab.filterbar.clear()
        t2 = time.monotonic()
        phases["scan_done_at_chip_s"] = None if not tab.scan_complete() else t2 - t0
        tab.filter_by_finding(kind)
        try:
            wait_until(
                lambda: tab.flt.findings == [kind] and tab.model.rowCount() > 0 and not tab.model.is_loading(),
                "finding filter",
            )
            phases["finding_rows_s"] = time.monotonic() - t2
        except TimeoutError as e:
            unfinished = str(e) + f" after {timeout_s:.0f} s (stalls until then are counted)"
        try:
            wait_until(tab.scan_complete, "scan")
            phases["scan_done_s"] = time.monotonic() - t0
        except TimeoutError:
            pass
        if refresh and tab.scan_complete():  # F5: a second scan replaces the first (phase "refresh")
            phase[0] = "refresh"
            t3, first = time.monotonic(), tab.findings
            tab.refresh()
            wait_until(lambda: tab.findings is not first and tab.scan_complete(), "second scan")
            phases["refresh_done_s"] = time.monotonic() - t3
            spin(1.0)  # the first scan's key sets are released meanwhile
        spin(0.2)
        phases["ledger_rows"] = tab.opened.n_ops if tab.opened else None  # counted after the first page
        if tab.findings is not None:  # the chosen kind's exact count, and whether it crossed as keys
            phases["finding_count"] = tab.findings.counts.get(kind)
            phases["finding_sent_as_keys"] = kind in (getattr(tab.findings, "compact", None) or {})
    finally:
        timer.stop()
        gc.callbacks.remove(on_gc)
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)
        # wait for the findings process to exit and be reaped (a finished scan's process may still be
        # freeing its findings; one terminated by close_tab below would be left out of RUSAGE_CHILDREN)
        sp = tab._scan.proc if tab is not None else None
        if sp is not None and tab.scan_complete():
            sp.proc.join(60)
        for t in w.ledger_tabs():
            t.close_tab()
        pool().waitForDone(120_000)
    worst = max(gaps, key=lambda g: g[0]) if gaps else (0.0, "", 0.0)
    worst_at = round(worst[2] - t0, 3) if gaps else None
    by_phase: dict[str, float] = {}
    for g, p, _at in gaps:
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
        "worst_at_s": worst_at,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        # the findings process (a child, waited for when the tab closed)
        "peak_rss_scan_process_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "load_avg": os.getloadavg(),
        # the longest garbage collection (any thread: it holds the GIL, so the event loop waits too)
        "max_gc_pause_s": max((g[0] for g in gc_pauses), default=0.0),
        "gc_gen2_runs": sum(1 for g in gc_pauses if g[1] == 2),
        "now": now or "wall clock",
        "finding": finding,
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url", help="the ledger (URL or SQLite file)")
    ap.add_argument("--layout", default="idemview", help="layout preset or file (default idemview)")
    ap.add_argument("--finding", default="stuck_in_progress", help="the finding kind to filter by")
    ap.add_argument("--status", default="failed", help="the status to filter by")
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for each step")
    ap.add_argument("--profile", help="write a cProfile of the GUI thread here")
    ap.add_argument("--refresh", action="store_true", help="press F5 once the scan is done (phase refresh)")
    ap.add_argument("--now", help="the GUI's clock starts here (ISO 8601; e.g. the generator's anchor)")
    a = ap.parse_args()
    try:
        res = measure(a.url, a.timeout, a.layout, a.finding, a.status, a.profile, a.now, a.refresh)
    except Exception as e:  # noqa: BLE001
        res = {"error": f"{type(e).__name__}: {e}"}
    print("@@GUI@@" + json.dumps(res))
    sys.stdout.flush()
    os._exit(0)
