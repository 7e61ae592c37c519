"""Redis ledger benchmark (issues #15, #27): N Celery result keys, snapshot + findings scan, time and peak RSS.

Target (issue 27): 1M ``celery-task-meta-*`` keys (result_extended shape, TTL 1 day) snapshotted and
scanned in <= 20 s with the whole process tree's peak RSS <= 500 MB (issue 15's was 30 s and 1 GB).
The keys are written into a Redis database of the benchmark's own (default 14; never the tests' 13) by
a plain client, then a fresh child process measures, so the peak RSS is idemview's alone: the
measuring process (the in-memory SQLite snapshot lives in it) and its mapping worker process. The
tree's peak is sampled every 50 ms (``/proc``: the measuring process's RSS + its children's, at the
same moment); the worker's own peak is its ``VmHWM``. (``ru_maxrss`` of the children would count the
parent's pages the worker shares between fork and exec: not memory of its own.)

    .venv/bin/python benchmarks/redis_bench.py --keys 1000000 [--db 14] [--url redis://127.0.0.1:6379]
        [--reuse] [--drop] [--worker auto|on|off]

About 1 in 500 keys carries a planted incident (a FAILURE, a retry storm, a duplicate intent), so the
scan has findings to shape. Prints one JSON line per run and a Markdown table row for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

UTC = UTC


def populate(url: str, n: int, reuse: bool) -> float:
    import redis

    r = redis.Redis.from_url(url)
    if reuse and r.dbsize() == n:
        return 0.0
    r.flushdb()
    t0 = time.perf_counter()
    base = datetime.now(UTC) - timedelta(hours=20)
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        status, retries, args = "SUCCESS", 0, [i]
        if i % 500 == 1:
            status = "FAILURE"
        elif i % 500 == 2:
            retries = 6
        elif i % 500 == 3:
            args = [i - 1]  # the same intent as the previous key: a duplicate intent
        meta = {
            "status": status,
            "result": {"charge": f"ch_{i}"} if status == "SUCCESS" else None,
            "traceback": "Traceback...\nCardError" if status == "FAILURE" else None,
            "children": [],
            "date_done": (base + timedelta(seconds=i * 72000 / n)).isoformat(),
            "task_id": f"{i:08x}-task",
            "name": "shop.tasks.charge",
            "args": args,
            "kwargs": {"order": f"o-{args[0]}"},
            "worker": f"celery@w{i % 8}",
            "retries": retries,
            "queue": "payments",
        }
        pipe.set(f"celery-task-meta-{i:08x}-task", json.dumps(meta), ex=86400)
        if i % 10000 == 9999:
            pipe.execute()
    pipe.execute()
    return time.perf_counter() - t0


class TreeSampler:
    """Every ``every`` seconds on a thread: this process's RSS + its live children's (``/proc``), the
    maximum of that sum (``tree_peak_mb``) and of each child's ``VmHWM`` (``child_peak_mb``), in MB."""

    def __init__(self, every: float = 0.05):
        import threading

        self.every, self.tree_peak_mb, self.child_peak_mb = every, 0.0, 0.0
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._run, daemon=True)
        self._th.start()

    @staticmethod
    def _status_kb(pid: int, field: str) -> int:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith(field + ":"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def _children(self) -> list[int]:
        try:
            with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def sample(self) -> None:
        kids = self._children()
        total = self._status_kb(os.getpid(), "VmRSS") + sum(self._status_kb(k, "VmRSS") for k in kids)
        self.tree_peak_mb = max(self.tree_peak_mb, total / 1024)
        for k in kids:
            self.child_peak_mb = max(self.child_peak_mb, self._status_kb(k, "VmHWM") / 1024)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        self._th.join()
        self.sample()


def measure(url: str, worker: bool | None, spill: bool | None = None) -> dict:
    from idemview.findings.engine import FindingEngine
    from idemview.ledger.redis_snapshot import open_redis_ledger

    def cpu(who=resource.RUSAGE_SELF):
        ru = resource.getrusage(who)
        return ru.ru_utime + ru.ru_stime

    tree = TreeSampler()
    t0, c0 = time.perf_counter(), cpu()
    ledger = open_redis_ledger(url, layout="celery-redis-extended", worker=worker, spill=spill)
    t1, c1 = time.perf_counter(), cpu()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # the snapshot's worker process, if any
    fs = FindingEngine(ledger, datetime.now(UTC)).run()
    t2, c2 = time.perf_counter(), cpu()
    tree.stop()
    counts: dict[str, int] = {}
    for f in fs:
        counts[f.kind.value] = counts.get(f.kind.value, 0) + 1
    return {
        "keys": ledger.snapshot.scanned,
        "records": ledger.snapshot.loaded,
        "snapshot_s": round(t1 - t0, 2),
        "scan_s": round(t2 - t1, 2),
        "total_s": round(t2 - t0, 2),
        # CPU seconds of idemview's process: on a shared machine the wall time mostly measures
        # the neighbours (the load average is printed beside it)
        "snapshot_cpu_s": round(c1 - c0, 2),
        "worker_cpu_s": round(kids.ru_utime + kids.ru_stime, 2),
        "worker_peak_rss_mb": round(tree.child_peak_mb, 1),
        "scan_cpu_s": round(c2 - c1, 2),
        "total_cpu_s": round(c2 - c0 + kids.ru_utime + kids.ru_stime, 2),
        "load_avg_1m": round(os.getloadavg()[0], 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "tree_peak_rss_mb": round(tree.tree_peak_mb, 1),
        "findings": counts,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--db", type=int, default=14)
    ap.add_argument("--url", default="redis://127.0.0.1:6379")
    ap.add_argument("--reuse", action="store_true", help="keep the keys when the database already has N")
    ap.add_argument("--drop", action="store_true", help="empty the benchmark database afterwards")
    ap.add_argument("--json", metavar="PATH", help="also write the result dict here (benchmarks/bench_all.py)")
    ap.add_argument(
        "--worker",
        choices=("auto", "on", "off"),
        default="auto",
        help="decode and map the values in a second process: auto (from 500k keys, the default), on, off",
    )
    ap.add_argument(
        "--spill",
        choices=("auto", "on", "off"),
        default="auto",
        help="snapshot pages beyond a bounded cache in an unlinked temporary file: auto (from 100k keys), on, off",
    )
    ap.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    url = f"{a.url}/{a.db}"
    if a.measure_only:
        tri = {"auto": None, "on": True, "off": False}
        print(json.dumps(measure(url, tri[a.worker], tri[a.spill])))
        return 0
    fill_s = populate(url, a.keys, a.reuse)
    import redis

    used = redis.Redis.from_url(url).info("memory").get("used_memory_human")
    out = subprocess.run(
        [
            sys.executable,
            os.path.abspath(__file__),
            "--measure-only",
            "--db",
            str(a.db),
            "--url",
            a.url,
            "--worker",
            a.worker,
            "--spill",
            a.spill,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res.update({"populate_s": round(fill_s, 1), "redis_used_memory": used})
    print(json.dumps(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({**res, "keys_requested": a.keys, "worker": a.worker}, f, indent=1)
    ok = res["total_s"] <= 20 and res["tree_peak_rss_mb"] <= 500
    print(
        f"| {a.keys:,} | {a.worker} | {res['snapshot_s']} s ({res['snapshot_cpu_s']} + "
        f"{res['worker_cpu_s']} s CPU) | {res['scan_s']} s ({res['scan_cpu_s']} s CPU) | {res['total_s']} s "
        f"({res['total_cpu_s']} s CPU) | {res['peak_rss_mb']:.0f} + {res['worker_peak_rss_mb']:.0f} MB "
        f"(tree {res['tree_peak_rss_mb']:.0f} MB) | {res['load_avg_1m']} | {'within' if ok else 'OVER'} target |"
    )
    if a.drop:
        redis.Redis.from_url(url).flushdb()
    return 0


if __name__ == "__main__":
    sys.exit(main())
