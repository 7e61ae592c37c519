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

Memory (issue 27 item 3: "GUI + findings process together <= 500 MB"): a sampler thread reads ``VmRSS``
and ``VmHWM`` from ``/proc/<pid>/status`` of the GUI process and of each child (found through
``/proc/self/task/*/children``) every 20 ms; ``rss_sum_peak_mb`` is the largest sum of the GUI's and the
findings process's RSS at one instant (multiprocessing's resource tracker is reported apart), besides each
process's own ``VmHWM`` (``hwm_gui_mb``, ``hwm_findings_mb``) and ``ru_maxrss``. ``db_calls_on_gui_thread``
counts the SQL statements executed on the GUI thread (an SQLAlchemy ``before_cursor_execute`` hook on every
engine; the rule is none).

The issue's scenario on both engines, each run a fresh process (``--repeat`` times, alternating)::

    python benchmarks/gui_stall.py --issue27 [--engines sqlite,postgresql] [--rows 2000000] [--json PATH]

uses the cached Celery ledgers of benchmarks/presets_gen.py (``~/.cache/idemview-bench/celery_<rows>.db``
and database ``idemview_bench_celery_<rows>``; not generated here), the generator's anchor as ``--now``,
and prints one line per run against the targets. ``--json PATH`` writes the result dict (one run, or
``{"runs": [...], "targets": {...}}`` with ``--issue27``) to PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROWS_TO_SCROLL = 20_000
#: issue 27's targets for the window (item 3)
TARGETS = {"rss_sum_peak_mb": 500.0, "first_rows_s": 0.5, "max_stall_s": 0.100}
ANCHOR = "2026-11-30T12:00:00+00:00"  # benchmarks/gen.py ANCHOR (the Makefile's GUI_NOW)


def _status_kb(pid: int | str) -> tuple[int, int] | None:
    """(VmRSS, VmHWM) in KiB of process ``pid``, None once it has gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            rss = hwm = 0
            for line in f:
                if line.startswith(b"VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith(b"VmHWM:"):
                    hwm = int(line.split()[1])
            return rss, hwm
    except (OSError, ValueError, IndexError):
        return None


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out.extend(int(x) for x in f.read().split())
            except OSError:
                pass
    except OSError:
        pass
    return out


class RssSampler:
    """RSS of this (GUI) process and its children every ``interval`` seconds on a daemon thread (Linux
    ``/proc``; module docstring). ``phase`` is a one-item list the caller updates; the peak sum is kept
    per phase. A child whose command line names ``resource_tracker`` is multiprocessing's tracker, not
    the findings process: reported apart, and not in the sum."""

    def __init__(self, phase: list, interval: float = 0.02):
        self.phase, self.interval = phase, interval
        self.me = os.getpid()
        with open(f"/proc/{self.me}/cmdline", "rb") as f:
            self._my_cmd = f.read()
        self.labels: dict[int, str] = {}
        self.hwm_kb: dict[int, int] = {}
        self.peak_kb: dict[int, int] = {}
        self.sum_peak_kb, self.sum_peak_at, self.sum_peak_phase = 0, 0.0, ""
        self.sum_all_peak_kb = 0
        self.by_phase_kb: dict[str, int] = {}
        self.samples = 0
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def start(self) -> RssSampler:
        self.t0 = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)

    def _label(self, pid: int) -> str:
        """ "findings", "tracker", or "" for a child not yet past ``exec`` (forked, still this process's
        command line: its RSS counts the parent's shared pages, and is not the child's own)."""
        if pid not in self.labels:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                return ""
            if cmd == self._my_cmd:
                return ""
            self.labels[pid] = "tracker" if b"resource_tracker" in cmd else "findings"
        return self.labels[pid]

    def sample(self) -> None:
        """One reading of every process (called by the thread; public for a last reading)."""
        total = total_all = 0
        for pid in (self.me, *_children(self.me)):
            if pid != self.me and not self._label(pid):
                continue
            st = _status_kb(pid)
            if st is None:
                continue
            rss, hwm = st
            self.hwm_kb[pid] = max(self.hwm_kb.get(pid, 0), hwm)
            self.peak_kb[pid] = max(self.peak_kb.get(pid, 0), rss)
            total_all += rss
            if pid == self.me or self._label(pid) == "findings":
                total += rss
        self.samples += 1
        if total > self.sum_peak_kb:
            self.sum_peak_kb, self.sum_peak_at, self.sum_peak_phase = total, time.monotonic() - self.t0, self.phase[0]
        self.sum_all_peak_kb = max(self.sum_all_peak_kb, total_all)
        self.by_phase_kb[self.phase[0]] = max(self.by_phase_kb.get(self.phase[0], 0), total)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def result(self) -> dict:
        """The figures in MB (1 MB = 1,024 KiB, as ``ru_maxrss / 1024``)."""
        mb = 1024.0
        kids = [p for p in self.peak_kb if p != self.me]
        finders = [p for p in kids if self.labels.get(p) == "findings"]
        return {
            "rss_sum_peak_mb": self.sum_peak_kb / mb,
            "rss_sum_peak_at_s": round(self.sum_peak_at, 3),
            "rss_sum_peak_phase": self.sum_peak_phase,
            "rss_sum_by_phase_mb": {p: v / mb for p, v in self.by_phase_kb.items()},
            "rss_all_children_sum_peak_mb": self.sum_all_peak_kb / mb,
            "rss_gui_peak_mb": self.peak_kb.get(self.me, 0) / mb,
            "hwm_gui_mb": self.hwm_kb.get(self.me, 0) / mb,
            "rss_findings_peak_mb": max((self.peak_kb[p] for p in finders), default=0) / mb,
            "hwm_findings_mb": max((self.hwm_kb[p] for p in finders), default=0) / mb,
            "findings_processes": len(finders),
            "hwm_tracker_mb": max((self.hwm_kb[p] for p in kids if p not in finders), default=0) / mb,
            "rss_samples": self.samples,
        }


class GuiThreadSql:
    """Counts SQL statements run on the GUI (main) thread, through an SQLAlchemy event on every engine."""

    def __init__(self):
        self.count, self.first = 0, []
        self._main = threading.main_thread()

    def __call__(self, conn, cursor, statement, parameters, context, executemany):
        if threading.current_thread() is self._main:
            self.count += 1
            if len(self.first) < 5:
                self.first.append(" ".join(str(statement).split())[:120])

    def install(self) -> GuiThreadSql:
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        event.listen(Engine, "before_cursor_execute", self)
        return self


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


def _mark_timeline() -> dict[str, float]:
    """Times (``time.monotonic``) of the open landing on the GUI thread and of the first page, marked by
    wrapping the two methods at class level (the tab does not exist yet)."""
    from idemview.qt.ledgertab import LedgerTab
    from idemview.qt.models import OperationsModel

    marks: dict[str, float] = {}

    def wrap(cls, name: str, label: str) -> None:
        orig = getattr(cls, name)

        def wrapped(self, *a, **k):
            marks.setdefault(label + "_in", time.monotonic())
            try:
                return orig(self, *a, **k)
            finally:
                marks.setdefault(label + "_out", time.monotonic())

        setattr(cls, name, wrapped)

    wrap(LedgerTab, "_on_open", "opened")
    wrap(OperationsModel, "_request", "page_asked")
    wrap(OperationsModel, "_on_page", "first_page")
    from idemview.services.scanservice import ScanService

    wrap(ScanService, "start", "scan_start")  # on the GUI thread: starts the findings process
    return marks


def _count_pipe() -> dict:
    """What the findings process sends, re-pickled as the GUI receives it, per message type: messages,
    bytes, and Python objects of class Finding (a diagnosis: it costs GUI-thread time)."""
    import pickle

    from idemview.services.scanservice import ScanService

    out: dict = {}
    orig = ScanService._on_message

    def counted(self, st, msg):
        what, _kind, payload = msg
        d = out.setdefault(what, {"messages": 0, "bytes": 0, "findings": 0})
        d["messages"] += 1
        try:
            d["bytes"] += len(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception:  # noqa: BLE001 - a diagnosis only
            pass
        if what == "batch":
            d["findings"] += len(payload[0])
        return orig(self, st, msg)

    ScanService._on_message = counted  # type: ignore[method-assign]
    return out


def _rss_by_mapping(pid: int | str = "self", n: int = 8) -> dict:
    """RSS (MB) of process ``pid`` by what is mapped (``/proc/<pid>/smaps``): anonymous memory (the heap,
    malloc arenas, thread stacks), and the ``n`` largest files (shared libraries, the SQLite file)."""
    by: dict[str, int] = {}
    name = "?"
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                head = line.split()
                if not head:
                    continue
                if not line[0].isupper() or "-" in head[0]:  # a mapping's first line: range perms ... [path]
                    name = head[5] if len(head) > 5 else "[anon]"
                    if name.startswith("/"):
                        name = os.path.basename(name)
                elif head[0] == "Rss:":
                    by[name] = by.get(name, 0) + int(head[1])
    except OSError:
        return {}
    top = sorted(by.items(), key=lambda kv: -kv[1])
    return {k: round(v / 1024, 1) for k, v in top[:n]} | {"(the rest)": round(sum(v for _k, v in top[n:]) / 1024, 1)}


def _traced_top(n: int = 12) -> list:
    """The ``n`` source lines holding the most Python memory now (tracemalloc), in MB."""
    import tracemalloc

    snap = tracemalloc.take_snapshot()
    cur, peak = tracemalloc.get_traced_memory()
    top = [(str(st.traceback[0]), round(st.size / 2**20, 2)) for st in snap.statistics("lineno")[:n]]
    return [("traced now / peak MB", round(cur / 2**20, 1), round(peak / 2**20, 1)), *top]


def measure(
    url: str,
    timeout_s: float = 90.0,
    layout: str = "idemview",
    finding: str = "stuck_in_progress",
    status: str = "failed",
    profile: str | None = None,
    now: str | None = None,
    refresh: bool = False,
    scan_nice: int | None = None,
    first_page_wait_ms: int | None = None,
    prewarm: bool = True,
    diagnose: bool = False,
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
    # A/B switches: the findings process's nice (0: as the window) and how long an opening holds the
    # scan, counts and chart back for its first page (0: they start at once, as before issue 27)
    if scan_nice is not None:
        import idemview.services.scanproc as sp

        sp.SCAN_NICE = scan_nice
    if first_page_wait_ms is not None:
        import idemview.qt.ledgertab as lt

        lt.FIRST_PAGE_WAIT_MS = first_page_wait_ms
    if not prewarm:  # the window does not import what an open needs before the open (as before issue 27)
        import idemview.qt.prewarm as pw

        pw._started.set()
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

    cpu_last = [time.thread_time(), time.process_time()]

    def tick():
        # the gap's wall time, and the CPU the GUI thread and the whole process used in it: a stall with
        # little GUI-thread CPU waited (for the GIL, held by a worker thread, or for a core)
        now, tc, pc = time.monotonic(), time.thread_time(), time.process_time()
        gaps.append((now - last[0], phase[0], now, tc - cpu_last[0], pc - cpu_last[1]))
        last[0], cpu_last[0], cpu_last[1] = now, tc, pc

    phase = ["open"]
    sampler = RssSampler(phase).start()
    sql_on_gui = GuiThreadSql().install()
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
    marks = _mark_timeline()
    pipe = _count_pipe() if diagnose else None
    if diagnose:
        import tracemalloc

        tracemalloc.start(1)
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
        sampler.sample()
        gc.callbacks.remove(on_gc)
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)
        # wait for the findings process to exit and be reaped (a finished scan's process may still be
        # freeing its findings; one terminated by close_tab below would be left out of RUSAGE_CHILDREN)
        sp = tab._scan.proc if tab is not None else None
        if sp is not None and tab.scan_complete():
            sp.proc.join(60)
        traced = _traced_top() if diagnose else None  # before the tab (and its findings) goes
        mapped = _rss_by_mapping() if diagnose else None
        for t in w.ledger_tabs():
            t.close_tab()
        pool().waitForDone(120_000)
        sampler.stop()
    worst = max(gaps, key=lambda g: g[0]) if gaps else (0.0, "", 0.0, 0.0, 0.0)
    worst_at = round(worst[2] - t0, 3) if gaps else None
    top = sorted(gaps, key=lambda g: -g[0])[:8]
    by_phase: dict[str, float] = {}
    for g, p, *_rest in gaps:
        by_phase[p] = max(by_phase.get(p, 0.0), g)
    return {
        # when the open ended on its worker (the GUI thread got the Opened), and when the first page
        # arrived, after the click (s)
        "timeline_s": {k: round(v - t0, 3) for k, v in marks.items()},
        "max_stall_s": worst[0],
        "worst_phase": worst[1],
        "by_phase": by_phase,
        "rows_scrolled": ROWS_TO_SCROLL,
        "ticks": len(gaps),
        "unfinished": unfinished,
        **phases,
        "total_s": time.monotonic() - t0,
        "worst_at_s": worst_at,
        # the longest gaps: (s, phase, at s, GUI-thread CPU s, process CPU s)
        "top_stalls": [(round(g[0], 3), g[1], round(g[2] - t0, 2), round(g[3], 3), round(g[4], 3)) for g in top],
        "stalls_over_100ms": sum(1 for g in gaps if g[0] > 0.1),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        # the findings process (a child, waited for when the tab closed)
        "peak_rss_scan_process_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "load_avg": os.getloadavg(),
        # the longest garbage collection (any thread: it holds the GIL, so the event loop waits too)
        "max_gc_pause_s": max((g[0] for g in gc_pauses), default=0.0),
        "gc_gen2_runs": sum(1 for g in gc_pauses if g[1] == 2),
        "now": now or "wall clock",
        "finding": finding,
        "status": status,
        "scan_nice": __import__("idemview.services.scanproc", fromlist=["x"]).SCAN_NICE,
        "first_page_wait_ms": __import__("idemview.qt.ledgertab", fromlist=["x"]).FIRST_PAGE_WAIT_MS,
        "prewarm": prewarm,
        **({"pipe": pipe, "tracemalloc_top": traced, "rss_by_mapping_mb": mapped} if diagnose else {}),
        "url": _safe_url(url),
        **sampler.result(),
        "db_calls_on_gui_thread": sql_on_gui.count,
        "db_calls_on_gui_thread_first": sql_on_gui.first,
    }


def _safe_url(url: str) -> str:
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True) if "://" in url else url
    except Exception:  # noqa: BLE001 - a label only
        return "?"


def _verdict(r: dict) -> str:
    if "error" in r:
        return "error: " + str(r["error"])
    parts = []
    for k, lim in TARGETS.items():
        v = r.get(k)
        parts.append(f"{k}={'?' if v is None else round(v, 3)} {'ok' if v is not None and v <= lim else 'MISS'}")
    return "  ".join(parts)


def issue27(engines: list[str], rows: int, repeat: int, timeout: float, extra: list[str], ab: bool = False) -> dict:
    """The issue's scenario on each engine's cached Celery ledger, ``repeat`` fresh processes each,
    alternating engines; returns ``{"runs": [...], "targets": TARGETS}``. A ledger that is missing is
    reported as an error run (generate it with benchmarks/presets_gen.py). ``ab``: each run twice, first
    as before issue 27's window changes (``--scan-nice 0 --first-page-wait-ms 0 --no-prewarm``), then as
    built."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import presets_gen as pg

    admin = os.environ.get("BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432")
    urls = {"sqlite": pg.sqlite_path("celery", rows), "postgresql": f"{admin}/{pg.pg_db('celery', rows)}"}
    runs = []
    before = ["--scan-nice", "0", "--first-page-wait-ms", "0", "--no-prewarm"]
    variants = [("before", before), ("after", [])] if ab else [("", [])]
    for i in range(repeat):
        for eng, (variant, vargs) in ((e, v) for e in engines for v in variants):
            r: dict = {"engine": eng, "rows": rows, "repeat": i, "variant": variant, "load_avg_before": os.getloadavg()}
            if eng == "sqlite" and not os.path.exists(urls[eng]):
                r["error"] = f"no ledger at {urls[eng]}"
            else:
                with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tf:
                    out = tf.name
                cmd = [sys.executable, os.path.abspath(__file__), urls[eng], "--layout", "celery", "--now", ANCHOR]
                cmd += ["--timeout", str(timeout), "--json", out, *extra, *vargs]
                t0 = time.monotonic()
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout * 6 + 120)
                r["process_wall_s"] = time.monotonic() - t0
                try:
                    with open(out) as f:
                        r.update(json.load(f))
                except (OSError, ValueError):
                    r["error"] = f"no result (exit {p.returncode}): {p.stderr[-400:]}"
                os.unlink(out)
            runs.append(r)
            load = r.get("load_avg", r["load_avg_before"])[0]
            print(f"{eng:10} {variant:6} run {i + 1}: {_verdict(r)}  load {load:.1f}")
            sys.stdout.flush()
    return {"runs": runs, "targets": TARGETS, "ledger": f"celery {rows:,} rows (result_extended)"}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url", nargs="?", help="the ledger (URL or SQLite file); not with --issue27")
    ap.add_argument("--layout", default="idemview", help="layout preset or file (default idemview)")
    ap.add_argument("--finding", default="stuck_in_progress", help="the finding kind to filter by")
    ap.add_argument("--status", default="failed", help="the status to filter by")
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for each step")
    ap.add_argument("--profile", help="write a cProfile of the GUI thread here")
    ap.add_argument("--refresh", action="store_true", help="press F5 once the scan is done (phase refresh)")
    ap.add_argument("--now", help="the GUI's clock starts here (ISO 8601; e.g. the generator's anchor)")
    ap.add_argument("--json", help="write the result dict as JSON to this file")
    ap.add_argument("--issue27", action="store_true", help="issue 27's scenario on the cached Celery ledgers")
    ap.add_argument("--engines", default="sqlite,postgresql", help="with --issue27 (default sqlite,postgresql)")
    ap.add_argument("--rows", type=int, default=2_000_000, help="with --issue27: the ledger's size")
    ap.add_argument("--repeat", type=int, default=1, help="with --issue27: runs per engine")
    ap.add_argument("--ab", action="store_true", help="with --issue27: each run before/after the window changes")
    ap.add_argument("--scan-nice", type=int, help="the findings process's nice (default scanproc.SCAN_NICE)")
    ap.add_argument("--first-page-wait-ms", type=int, help="ledgertab.FIRST_PAGE_WAIT_MS (0: no wait)")
    ap.add_argument("--no-prewarm", action="store_true", help="no import of what an open needs before it")
    ap.add_argument("--diagnose", action="store_true", help="tracemalloc and the pipe's bytes (slows the GUI)")
    a = ap.parse_args()
    if a.issue27:
        extra = (["--refresh"] if a.refresh else []) + ["--finding", a.finding, "--status", a.status]
        engines = [e.strip() for e in a.engines.split(",") if e.strip()]
        res = issue27(engines, a.rows, a.repeat, a.timeout, extra, a.ab)
    elif not a.url:
        ap.error("a ledger URL, or --issue27")
    else:
        try:
            res = measure(
                a.url,
                a.timeout,
                a.layout,
                a.finding,
                a.status,
                a.profile,
                a.now,
                a.refresh,
                a.scan_nice,
                a.first_page_wait_ms,
                not a.no_prewarm,
                a.diagnose,
            )
        except Exception as e:  # noqa: BLE001
            res = {"error": f"{type(e).__name__}: {e}"}
        print("@@GUI@@" + json.dumps(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    sys.stdout.flush()
    os._exit(0)
