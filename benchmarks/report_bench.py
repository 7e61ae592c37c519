#!/usr/bin/env python3
"""Incident report benchmark (issue 24 item 5): ``idemview.evidence.report.write_report`` on demo
ledgers scaled up with ``idemview demo --operations N`` (SQLite; cached in $IDEMVIEW_BENCH_CACHE,
default ~/.cache/idemview-bench, outside the repository).

    python benchmarks/report_bench.py [--operations 100000,900000] [--runs 1]

Cases, each in a child process: its peak RSS (``ru_maxrss``: SQLite's memory-mapped file pages count
in it) and, in parentheses, the peak of RssAnon sampled every 50 ms (the process's own memory):

- ``full-200``: the whole demo ledger, ``--full 200``: 200 operations in full (findings, timeline,
  attempts, records), the rest of its findings (the expired keys, ~3 % of operations) as the table
  (at most 10,000 rows). Most of its time is the scan of the whole ledger (``idemview scan``).
- ``filtered-200``: the ledger filtered (as below) to 200 findings, all shown in full. Target <= 5 s,
  <= 10 MB.
- ``filtered-5000``: the ledger filtered to its expired keys created in a time window chosen so that
  about 5,000 findings match (the window is found from the ledger's own creation times), ``--full
  200``. Target on a 2M-row ledger (900k operations + ~1.1M attempts): <= 30 s, bounded memory (peak
  RSS barely above the full-200 case of the same ledger).

Wall seconds and CPU seconds (``process_time``) are both printed: on a shared machine wall time is
mostly the wait for a core.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
CACHE = Path(os.environ.get("IDEMVIEW_BENCH_CACHE", Path.home() / ".cache" / "idemview-bench"))


def ensure(n: int) -> Path:
    """The cached demo ledger of ``n`` ordinary operations (written once)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    p = CACHE / f"report-demo-{n}.db"
    if not p.exists():
        from idemview.services.demo import write_demo

        t = time.monotonic()
        part = p.with_suffix(".db.part")
        write_demo(part, operations=n)
        part.rename(p)
        print(f"generated {p} in {time.monotonic() - t:.0f} s", file=sys.stderr)
    return p


def window_for(path: Path, want: int) -> tuple[str, str] | None:
    """(since, until) ISO instants holding about ``want`` expired keys' creation times (the demo
    stores created_at as naive UTC text)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
        rows = [
            r[0]
            for r in c.execute(
                "SELECT created_at FROM operations WHERE expires_at <= ? ORDER BY created_at",
                (NOW.replace(tzinfo=None).isoformat(sep=" "),),
            )
        ]
    if len(rows) <= want:
        return None
    start = len(rows) // 2 - want // 2
    return rows[start].replace(" ", "T") + "Z", rows[start + want].replace(" ", "T") + "Z"


def _rss_anon_kb() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def child(path: str, case: str, since: str | None, until: str | None) -> None:
    from idemview.domain.filters import Filter
    from idemview.domain.model import FindingKind
    from idemview.evidence.report import write_report
    from idemview.layouts.layout import load_preset
    from idemview.ledger.connect import open_engine
    from idemview.ledger.reader import Ledger
    from idemview.ledger.times import parse_instant

    flt = None
    if case.startswith("filtered-"):
        flt = Filter(
            findings=[FindingKind.EXPIRED_KEY],
            since=parse_instant(since) if since else None,
            until=parse_instant(until) if until else None,
        )
    eng = open_engine(path)
    led = Ledger(eng, load_preset("idemview"))
    out = Path(tempfile.mkdtemp()) / "report.html"
    peak_anon = [0]
    done = threading.Event()

    def sample() -> None:  # RssAnon: the process's own memory, without the SQLite file pages it maps
        while not done.wait(0.05):
            peak_anon[0] = max(peak_anon[0], _rss_anon_kb())

    threading.Thread(target=sample, daemon=True).start()
    t, c = time.monotonic(), time.process_time()
    res = write_report(led, flt, out, now=NOW, full=200)
    wall, cpu = time.monotonic() - t, time.process_time() - c
    done.set()
    eng.dispose()
    print(
        json.dumps(
            {
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "bytes": res.size,
                "operations": res.operations,
                "in_full": res.in_full,
                "findings": res.findings,
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                "peak_anon_mb": round(peak_anon[0] / 1024),
            }
        )
    )
    out.unlink()
    Path(res.manifest_path).unlink()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--operations", default="100000,900000", help="demo sizes (ordinary operations)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        path, case, since, until = a.child
        child(path, case, since or None, until or None)
        return
    print(
        "| demo operations | rows (ops + attempts) | case | findings | operations (in full) | wall s | CPU s "
        "| HTML MB | peak RSS MB (RssAnon) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in [int(x) for x in a.operations.split(",")]:
        p = ensure(n)
        with sqlite3.connect(f"file:{p}?mode=ro", uri=True) as c:
            rows = c.execute("SELECT (SELECT count(*) FROM operations) + (SELECT count(*) FROM attempts)").fetchone()[0]
        for case in ("full-200", "filtered-200", "filtered-5000"):
            since, until = "", ""
            if case.startswith("filtered-"):
                win = window_for(p, int(case.split("-")[1]))
                if win is None:
                    continue
                since, until = win
            for _ in range(a.runs):
                proc = subprocess.run(
                    [sys.executable, __file__, "--child", str(p), case, since, until], capture_output=True, text=True
                )
                if proc.returncode:
                    sys.exit(f"{case} on {p} failed:\n{proc.stderr[-3000:]}")
                out = proc.stdout
                r = json.loads(out.strip().splitlines()[-1])
                print(
                    f"| {n:,} | {rows:,} | {case} | {r['findings']:,} | {r['operations']:,} ({r['in_full']}) | "
                    f"{r['wall_s']} | {r['cpu_s']} | {r['bytes'] / 1e6:.2f} | "
                    f"{r['peak_rss_mb']} ({r['peak_anon_mb']}) |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
