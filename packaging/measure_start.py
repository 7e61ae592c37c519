"""Measure the bundle's start to first window: seconds from launching dist/idemview/idemview to the main
window's first event-loop pass (IDEMVIEW_SHOWN_FILE hook in idemview.qt.app), offscreen.

    python packaging/measure_start.py [--runs 5] [--cold]

--cold first drops the kernel's page cache (root only; `echo 3 > /proc/sys/vm/drop_caches`), so the
first run reads every file from disk. Not a test: timings depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU: list[float] = []


def first_window_s(bundle: Path, extra: list[str]) -> float:
    """One run: seconds to first window (the process then quits by itself). Adds the run's CPU time
    (user + system, seconds, the whole run) to ``CPU`` — on a loaded machine it is the fairer figure."""
    with tempfile.TemporaryDirectory() as tmp:
        shown = Path(tmp) / "shown"
        env = {
            **os.environ,
            "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen"),
            "IDEMVIEW_QUIT_AFTER_MS": "0",
            "IDEMVIEW_SHOWN_FILE": str(shown),
            "XDG_CONFIG_HOME": tmp,
            "XDG_DATA_HOME": tmp,
        }
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        subprocess.run([bundle, *extra], env=env, check=True, capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        CPU.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        return json.loads(shown.read_text())["shown"] - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", type=Path, default=ROOT / "dist" / "idemview" / "idemview")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cold", action="store_true", help="drop the page cache before the first run (root)")
    args = ap.parse_args()
    if args.cold:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    first = first_window_s(args.bundle, [])
    warm = [first_window_s(args.bundle, []) for _ in range(args.runs)]
    print(f"{'cold' if args.cold else 'first'} run: {first:.2f} s to first window")
    print(
        f"warm: median {statistics.median(warm):.2f} s, min {min(warm):.2f} s over {args.runs} runs; "
        f"CPU per warm run (user+sys, to exit) median {statistics.median(CPU[1:]):.2f} s; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
