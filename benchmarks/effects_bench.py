#!/usr/bin/env python3
"""Reconciliation benchmark (issue #16): N operations in a SQLite ledger against N effect records in a
PostgreSQL database or in a second SQLite file — the cross-database merge — and the same pair in one
SQLite file (SQL joins).

    python benchmarks/effects_bench.py [--size 1m] [--pairs sqlite+postgresql,sqlite+sqlite,same]
        [--rounds N] [--byte-order-indexes] [--profile PREFIX] [--out BENCHMARKS-effects.md]

CPU seconds (``process_time``) of this process are given beside wall seconds: on a loaded machine wall
time is mostly the wait for a core; a PostgreSQL server's own work is not in them.

Baseline, run in the same child process: reading both link columns alone (``SELECT idempotency_key
FROM operations`` from SQLite with ``sqlite3``, ``SELECT idem_key FROM charges`` streamed from PostgreSQL
through SQLAlchemy or read from the second SQLite file with ``sqlite3``) — the
least any reconciliation must do. Target: reconcile <= 2x that, peak RSS <= 300 MB. Ledgers are cached
in benchmarks/.cache (SQLite) and the PostgreSQL database ``idemview_bench_fx_<size>``.
Planted: 0.1 % hidden successes (failed with a charge), 0.1 % double charges, 0.05 % orphans; the
findings are checked against them (a mismatch is printed loudly). Peak RSS is the child's VmHWM
(baseline and reconciliation; file pages SQLite maps count in it), in parentheses the peak of RssAnon
sampled every 50 ms during the reconciliation.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
UTC = timezone.utc
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
CACHE = Path(os.environ.get("IDEMVIEW_BENCH_CACHE", HERE / ".cache"))
PG_ADMIN = os.environ.get("IDEMVIEW_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
VERSION = 1

LAYOUT = """
[effects]
table = "charges"
connection = "{conn}"
link = {{ effect = "idem_key", operation = "key" }}
id = "id"
reference = "charge_id"
time = {{ column = "created_at", encoding = "epoch_s" }}
show = ["amount"]
"""


def _rows(n: int, seed: int = 16):
    """Yield (op rows, charge rows, planted) for ``n`` operations."""
    r = random.Random(seed)
    ops, charges, planted = [], [], {"hidden_success": 0, "duplicate_effect": 0, "orphan_effect": 0}
    base = NOW.timestamp() - 6 * 3600
    cid = 0
    for i in range(n):
        key = f"{r.getrandbits(64):016x}-{i:08d}"
        t = base + r.random() * 6 * 3600
        roll = r.random()
        status = "failed" if roll < 0.002 else "succeeded"
        ops.append((i + 1, "s", key, status, datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")))
        if status == "succeeded" or roll < 0.001:
            if status == "failed":
                planted["hidden_success"] += 1
            cid += 1
            charges.append((cid, f"ch_{cid:012d}", key, 1000, t + 5))
            if status == "succeeded" and r.random() < 0.001:
                cid += 1
                charges.append((cid, f"ch_{cid:012d}", key, 1000, t + 60))
                planted["duplicate_effect"] += 1
    for j in range(max(1, n // 2000)):
        cid += 1
        charges.append((cid, f"ch_{cid:012d}", f"lost-{j:08d}", 1000, NOW.timestamp() - 600))
        planted["orphan_effect"] += 1
    return ops, charges, planted


def build(size: str) -> tuple[Path, str, Path, dict]:
    n = SIZES[size]
    CACHE.mkdir(parents=True, exist_ok=True)
    ledger = CACHE / f"fx-ledger-{size}-v{VERSION}.db"
    same = CACHE / f"fx-same-{size}-v{VERSION}.db"
    meta = CACHE / f"fx-{size}-v{VERSION}.json"
    dbname = f"idemview_bench_fx_{size}"
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    pg_url = make_url(PG_ADMIN).set(database=dbname).render_as_string(hide_password=False)
    if meta.exists() and ledger.exists() and same.exists():
        return ledger, pg_url, same, json.loads(meta.read_text())
    ops, charges, planted = _rows(n)
    from idemview.services.demo import reference_metadata

    for path in (ledger, same):
        if path.exists():
            path.unlink()
        eng = create_engine(f"sqlite:///{path}")
        reference_metadata().create_all(eng)
        eng.dispose()
        with sqlite3.connect(path) as c:
            c.executemany(
                "INSERT INTO operations (id, scope, idempotency_key, status, created_at, attempt_count) "
                "VALUES (?, ?, ?, ?, ?, 1)",
                ops,
            )
            if path == same:
                c.execute(
                    "CREATE TABLE charges (id INTEGER PRIMARY KEY, charge_id TEXT, idem_key TEXT, "
                    "amount INTEGER, created_at REAL)"
                )
                c.executemany("INSERT INTO charges VALUES (?, ?, ?, ?, ?)", charges)
                c.execute("CREATE INDEX ix_charges_key ON charges (idem_key)")
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{dbname}"'))
        c.execute(text(f'CREATE DATABASE "{dbname}"'))
    admin.dispose()
    import psycopg

    with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={dbname}") as pc:
        pc.execute(
            "CREATE TABLE charges (id BIGINT PRIMARY KEY, charge_id TEXT, idem_key TEXT, amount INT, "
            "created_at DOUBLE PRECISION)"
        )
        with pc.cursor().copy("COPY charges FROM STDIN") as cp:
            for row in charges:
                cp.write_row(row)
        pc.execute("CREATE INDEX ix_charges_key ON charges (idem_key)")
        pc.execute("ANALYZE charges")
    meta.write_text(json.dumps(planted))
    return ledger, pg_url, same, planted


def _rss_mb() -> float:
    """This process's peak RSS in MB: VmHWM, which starts afresh at exec. (``ru_maxrss`` keeps the
    peak of the process that forked it: a child started while the parent still held the 1M rows
    :func:`build` generated reported the parent's 530 MB.)"""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _AnonPeak:
    """Peak anonymous memory (RssAnon: heap, not the SQLite file pages mapped by mmap), sampled."""

    def __init__(self):
        import threading

        self.peak, self._stop = 0.0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.wait(0.05):
            for line in open("/proc/self/status"):
                if line.startswith("RssAnon:"):
                    self.peak = max(self.peak, int(line.split()[1]) / 1024)

    def stop(self) -> float:
        self._stop.set()
        self._t.join()
        return self.peak


def child(ledger: str, fx_url: str, mode: str) -> dict:
    """One measurement in this (fresh) process: the baseline, then the reconciliation."""
    from sqlalchemy import create_engine, text

    out = {}
    t0, c0 = time.perf_counter(), time.process_time()
    n1 = n2 = 0
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as c:
        for _ in c.execute("SELECT idempotency_key FROM operations"):
            n1 += 1
    if mode == "cross" and "://" not in fx_url:  # a second SQLite file
        with sqlite3.connect(f"file:{fx_url}?mode=ro", uri=True) as c:
            for _ in c.execute("SELECT idem_key FROM charges"):
                n2 += 1
    elif mode == "cross":
        eng = create_engine(fx_url)
        with eng.connect() as c:
            for _ in c.execution_options(stream_results=True, yield_per=5000).execute(
                text("SELECT idem_key FROM charges")
            ):
                n2 += 1
        eng.dispose()
    else:
        with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as c:
            for _ in c.execute("SELECT idem_key FROM charges"):
                n2 += 1
    out["baseline_s"] = time.perf_counter() - t0
    out["baseline_cpu_s"] = time.process_time() - c0
    out["rows"] = [n1, n2]
    from idemview.findings.effects import Reconciler
    from idemview.layouts.layout import load_preset, parse_layout
    from idemview.ledger.connect import open_engine
    from idemview.ledger.reader import Ledger

    conn = fx_url if mode == "cross" else ""
    text_ = load_preset("idemview").text + LAYOUT.format(conn=conn).replace('connection = ""\n', "")
    eng = open_engine(ledger, statement_timeout_s=3600)
    fx = open_engine(fx_url, statement_timeout_s=3600) if mode == "cross" else None
    anon = _AnonPeak()
    prof = None
    if os.environ.get("IDEMVIEW_BENCH_PROFILE"):
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    t0, c0 = time.perf_counter(), time.process_time()
    led = Ledger(eng, parse_layout(text_, "bench"), effects_engine=fx)
    fs = Reconciler(led, NOW).run()
    out["reconcile_s"] = time.perf_counter() - t0
    out["reconcile_cpu_s"] = time.process_time() - c0
    if prof is not None:
        import pstats

        prof.disable()
        with open(os.environ["IDEMVIEW_BENCH_PROFILE"], "w") as f:
            pstats.Stats(prof, stream=f).sort_stats("cumulative").print_stats(45)
    counts: dict = {}
    for f in fs:
        counts[f.kind.value] = counts.get(f.kind.value, 0) + 1
    out["counts"] = counts
    out["peak_anon_mb"] = anon.stop()
    out["peak_rss_mb"] = _rss_mb()
    out["same_database"] = led.effects.same_database
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1m", choices=list(SIZES))
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", nargs=3, metavar=("LEDGER", "FX_URL", "MODE"))
    ap.add_argument(
        "--byte-order-indexes",
        action="store_true",
        help="also measure with an index in byte order on each link column (what a DBA who "
        'reconciles often would add): PostgreSQL COLLATE "C", SQLite on the key alone',
    )
    ap.add_argument(
        "--pairs",
        default="sqlite+postgresql,sqlite+sqlite,same",
        help="comma list of the pairs to measure: sqlite+postgresql (SQLite ledger, PostgreSQL effects: "
        "merge), sqlite+sqlite (two SQLite files: merge), same (one SQLite file: SQL joins)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure every pair this many times, the pairs alternating round by round (each child "
        "process runs its baseline and then the reconciliation, in the same minutes)",
    )
    ap.add_argument(
        "--profile",
        metavar="PREFIX",
        default=None,
        help="write a cProfile of each reconciliation (cumulative, top 45) to PREFIX-<pair>.txt",
    )
    ap.add_argument("--json", metavar="PATH", help="also write every run's dict here (benchmarks/bench_all.py)")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(*a.child)))
        return 0
    ledger, pg_url, same, planted = build(a.size)
    lines = [
        f"### Reconciliation with effect records ({a.size} operations, {sys.platform}, "
        f"{os.cpu_count()} cores, {datetime.now(UTC):%Y-%m-%d})",
        "",
        "| pair | baseline: read both link columns (CPU) | reconcile (CPU) | ratio | peak RSS (anonymous) "
        "| load (1 min) | findings = planted |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    every = {
        "sqlite+postgresql": ("cross", ledger, pg_url),
        "sqlite+sqlite": ("cross", ledger, str(same)),  # the charges of the one-file pair, read as a 2nd file
        "same": ("same", same, f"sqlite:///{same}"),
    }
    runs = [(k, *every[k]) for k in a.pairs.split(",")]
    if a.byte_order_indexes:
        import psycopg

        db = pg_url.rsplit("/", 1)[1]
        with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={db}", autocommit=True) as pc:
            pc.execute('CREATE INDEX IF NOT EXISTS ix_charges_key_c ON charges (idem_key COLLATE "C")')
        with sqlite3.connect(ledger) as c:
            c.execute("CREATE INDEX IF NOT EXISTS ix_operations_key ON operations (idempotency_key)")
        runs = [r for r in runs if r[1] == "cross"]
    labels = {
        "sqlite+postgresql": "SQLite ledger + PostgreSQL effects (merge)",
        "sqlite+sqlite": "SQLite ledger + SQLite effects, two files (merge)",
        "same": "one SQLite file (SQL joins)",
    }
    runs_out: list[dict] = []
    for _round in range(a.rounds):
        for pair, mode, lp, url in runs:
            env = dict(os.environ)
            if a.profile:
                env["IDEMVIEW_BENCH_PROFILE"] = f"{a.profile}-{pair}.txt"
            res = json.loads(
                subprocess.run(
                    [sys.executable, __file__, "--child", str(lp), url, mode],
                    check=True,
                    capture_output=True,
                    text=True,
                    env=env,
                ).stdout
            )
            ok = res["counts"] == {k: v for k, v in planted.items() if v}
            label = labels[pair]
            if a.byte_order_indexes:
                label += ", byte-order indexes on both link columns"
            lines.append(
                f"| {label} | {res['baseline_s']:.2f} s ({res['baseline_cpu_s']:.2f} s) | "
                f"{res['reconcile_s']:.2f} s ({res['reconcile_cpu_s']:.2f} s) | "
                f"{res['reconcile_s'] / res['baseline_s']:.2f}x | {res['peak_rss_mb']:.0f} MB "
                f"({res['peak_anon_mb']:.0f} MB) | {os.getloadavg()[0]:.1f} | "
                f"{'yes' if ok else 'NO: ' + json.dumps(res['counts'])} |"
            )
            print(lines[-1], flush=True)
            runs_out.append({"pair": pair, "label": label, "load": os.getloadavg()[0], "planted_ok": ok, **res})
    if a.byte_order_indexes:  # the cached ledgers stay as the systems' own schema
        with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={db}", autocommit=True) as pc:
            pc.execute("DROP INDEX IF EXISTS ix_charges_key_c")
        with sqlite3.connect(ledger) as c:
            c.execute("DROP INDEX IF EXISTS ix_operations_key")
    text = "\n".join(lines) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    if a.json:
        Path(a.json).write_text(json.dumps({"size": a.size, "planted": planted, "runs": runs_out}, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
