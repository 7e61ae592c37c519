#!/usr/bin/env python3
"""idemview benchmark: findings scan, grid latency, evidence export and memory on large ledgers.

    python benchmarks/run.py [--sizes 100k,1m,3m] [--engines sqlite,postgresql] [--quick] [--reuse]

(``make bench`` runs ``benchmarks/run.py --reuse``.) Not part of the unit tests.

For each engine and size a ledger in the reference layout is generated in bulk (benchmarks/gen.py) and
cached (SQLite files in ``benchmarks/.cache``, PostgreSQL databases ``idemview_bench_<size>``); with
``--reuse`` a cached ledger of the same generator version is used as is. Each (engine, size) is
measured in a child process of its own, so its peak memory (VmHWM, reset through
``/proc/self/clear_refs`` before each measurement) is its own. Every figure is also given as a ratio
against a baseline run in the same process:

- ``scan``: ``FindingEngine(ledger, now).run()`` against the **floor** (the findings hand-written as
  plain SQL for this schema, benchmarks/floor.py) and against the **naive way** (pandas over whole
  tables). The engine's finding keys must equal the floor's (and the planted counts): a mismatch is
  printed loudly and marked in BENCHMARKS.md;
- grid: connecting (``open_engine`` + ``Ledger``) plus the first page of 200 rows, then the first page
  after a filter or sort change;
- export: ``export_evidence(..., rows="attempts")`` with masking on against ``pandas.read_sql`` +
  ``DataFrame.to_csv`` of the same rows unmasked (rows/s and peak memory).

Results go to BENCHMARKS.md (``--out``) with the machine, engine versions and date.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import gen  # noqa: E402

UTC = timezone.utc
SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000, "3m": 3_000_000}
PG_ADMIN = os.environ.get("IDEMVIEW_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
CACHE = Path(os.environ.get("IDEMVIEW_BENCH_CACHE", HERE / ".cache"))
NOW = gen.ANCHOR

# Targets (issue 6), on 2 cores at 1M operations / ~3M attempts.
TARGET_FLOOR_RATIO = 1.5
TARGET_NAIVE_SPEEDUP = 10.0
TARGET_GRID_S = 0.5
TARGET_EXPORT_RATE = 150_000
TARGET_EXPORT_VS_CSV = 2.0


# ------------------------------------------------------------------------------------ memory


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak() -> int:
    """Reset VmHWM to the current RSS (Linux >= 4.0); returns the current RSS in bytes."""
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return _status("VmRSS")


def peak() -> int:
    return _status("VmHWM")


class Measure:
    """Wall time and peak RSS of a block."""

    def __enter__(self):
        self.rss0 = reset_peak()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.s = time.perf_counter() - self.t0
        self.peak = peak()
        self.delta = max(0, self.peak - self.rss0)


def mb(b: int) -> float:
    return round(b / 2**20, 1)


# ------------------------------------------------------------------------------------ ledgers


def ledger_url(engine: str, size: str) -> str:
    if engine == "sqlite":
        return f"sqlite:///{CACHE / f'ledger_{size}.db'}"
    from sqlalchemy.engine import make_url

    return make_url(PG_ADMIN).set(database=f"idemview_bench_{size}").render_as_string(hide_password=False)


def ensure_ledger(engine: str, size: str, reuse: bool) -> float:
    n = SIZES[size]
    CACHE.mkdir(parents=True, exist_ok=True)
    log = lambda m: print(m, flush=True)  # noqa: E731
    if engine == "sqlite":
        return gen.generate_sqlite(str(CACHE / f"ledger_{size}.db"), n, reuse, log)
    return gen.generate_postgresql(PG_ADMIN, f"idemview_bench_{size}", n, reuse, log)


# ------------------------------------------------------------------------------------ child

GRID_CHANGES = [
    # label, filter kwargs, sort, descending
    ("sort created_at desc", {}, "created_at", True),
    ("filter status=failed", {"statuses": ["failed"]}, "created_at", False),
    ("filter 1 h window", {"since": NOW - timedelta(hours=3), "until": NOW - timedelta(hours=2)}, "created_at", False),
    ("filter kind=email.send", {"kinds": ["email.send"]}, "created_at", True),
    ("sort expires_at", {}, "expires_at", False),
    ("sort key", {}, "key", False),
    ("filter finding=stuck", {"findings": ["stuck_in_progress"]}, "created_at", False),
]


def child(engine_name: str, size: str, opts: dict) -> dict:
    from idemview.ledger.connect import open_engine
    from idemview.domain.filters import Filter
    from idemview.findings.engine import FindingEngine
    from idemview.layouts.layout import load_preset
    from idemview.domain.model import FindingKind, Status
    from idemview.ledger.reader import Ledger
    import floor

    url = ledger_url(engine_name, size)
    n = SIZES[size]
    res: dict = {"engine": engine_name, "size": size, "operations": n, "load_start": _load()}
    layout = load_preset("idemview")

    # --- grid: connect + first page (a fresh engine: nothing pooled, nothing reflected yet)
    with Measure() as m:
        eng = open_engine(url)
        ledger = Ledger(eng, layout)
        page = ledger.page(limit=200)
    res["grid_connect_s"] = m.s
    res["grid_first_rows"] = len(page.rows)
    res["ledger_counts"] = ledger.counts()
    res["attempts"] = res["ledger_counts"][1]
    grid = []
    for label, kw, sort, desc in GRID_CHANGES:
        kw = dict(kw)
        if "statuses" in kw:
            kw["statuses"] = [Status(s) for s in kw["statuses"]]
        if "findings" in kw:
            kw["findings"] = [FindingKind(s) for s in kw["findings"]]
        t0 = time.perf_counter()
        p = ledger.page(Filter(**kw), sort=sort, descending=desc, limit=200, now=NOW)
        grid.append({"change": label, "s": time.perf_counter() - t0, "rows": len(p.rows)})
    res["grid"] = grid
    try:
        from idemview.ledger.reader import index_warnings

        res["index_warnings"] = index_warnings(ledger)
    except ImportError:
        res["index_warnings"] = None

    # --- export (streamed, masked) first: before pandas has grown the heap. Up to 100k operations every
    # attempt is exported; above, the attempts of the operations created in one hour (~1/6 of them), so
    # the run fits in minutes; the row count still grows with the ledger (memory must not).
    res["export"] = None
    window = None if n <= 100_000 else (NOW - timedelta(hours=3), NOW - timedelta(hours=2))
    flt = Filter(since=window[0], until=window[1]) if window else Filter()
    res["export_filter"] = flt.sentence()
    try:
        from idemview.evidence.plan import export_evidence
    except ImportError as e:
        res["export_error"] = f"export not available on this branch ({e})"
    else:
        with tempfile.TemporaryDirectory() as d:
            with Measure() as m:
                r = export_evidence(ledger, flt, Path(d) / "ev.csv", rows="attempts", now=NOW)
            res["export"] = {"rows": r.rows, "s": m.s, "rate": r.rows / m.s, "peak": m.peak, "delta": m.delta}

    # --- scan: floor (hand-written SQL) vs engine, alternating, best of `repeat`
    expected = gen.expected_counts(n)
    floor_s, engine_s = [], []
    floor_keys = engine_keys = None
    scan_mem = None
    for _ in range(opts["repeat"] if n < 3_000_000 else opts["repeat_large"]):
        with Measure() as m:
            with eng.connect() as c:
                floor_keys = floor.run_floor(c, eng.dialect.name, NOW)
        floor_s.append(m.s)
        with Measure() as m:
            fs = FindingEngine(ledger, NOW).run()
        engine_s.append(m.s)
        scan_mem = (m.peak, m.delta)
        engine_keys = {k.value: set() for k in FindingKind}
        for f in fs:
            engine_keys[f.kind.value].add((f.scope, f.key))
    res["scan_engine_s"] = min(engine_s)
    res["scan_floor_s"] = min(floor_s)
    res["scan_engine_all"] = engine_s
    res["scan_floor_all"] = floor_s
    res["scan_peak"], res["scan_delta"] = scan_mem
    mism = {}
    for k in engine_keys:
        if engine_keys[k] != floor_keys[k] or len(engine_keys[k]) != expected[k]:
            mism[k] = {
                "engine": len(engine_keys[k]),
                "floor": len(floor_keys[k]),
                "planted": expected[k],
                "engine_only": sorted(engine_keys[k] - floor_keys[k])[:3],
                "floor_only": sorted(floor_keys[k] - engine_keys[k])[:3],
            }
    res["counts"] = {k: len(v) for k, v in engine_keys.items()}
    res["mismatch"] = mism
    for k, v in mism.items():
        print(f"!!!!! MISMATCH {engine_name} {size} {k}: {v}", file=sys.stderr, flush=True)

    # --- unmasked pandas to_csv of the same attempt rows
    if opts["csv"]:
        import pandas as pd

        q = (
            "SELECT a.scope, a.idempotency_key, a.attempt_no, a.started_at, a.finished_at, a.outcome, "
            "a.effect_ref, a.worker, a.error FROM attempts a"
        )
        if window:
            fmt = "%Y-%m-%d %H:%M:%S"
            lo, hi = (w.replace(tzinfo=None).strftime(fmt) for w in window)
            cast = (lambda x: f"'{x}'") if eng.dialect.name == "sqlite" else (lambda x: f"TIMESTAMP '{x}'")
            q += (
                " JOIN operations o ON o.scope = a.scope AND o.idempotency_key = a.idempotency_key "
                f"WHERE o.created_at >= {cast(lo)} AND o.created_at < {cast(hi)}"
            )
        with tempfile.TemporaryDirectory() as d:
            with Measure() as m:
                df = pd.read_sql(q, eng)
                t_read = time.perf_counter() - m.t0
                df.to_csv(Path(d) / "plain.csv", index=False)
            rows = len(df)
            del df
        res["to_csv"] = {
            "rows": rows,
            "s": m.s,
            "read_s": t_read,
            "write_s": m.s - t_read,
            "rate": rows / m.s,
            "peak": m.peak,
            "delta": m.delta,
        }

    # --- naive pandas scan
    res["naive"] = None
    if opts["naive"]:
        try:
            with Measure() as m:
                naive_keys = floor.run_naive(eng, NOW)
            res["naive"] = {"s": m.s, "peak": m.peak, "delta": m.delta}
            bad = [k for k in naive_keys if naive_keys[k] != floor_keys[k]]
            if bad:
                res["naive"]["mismatch"] = bad
                print(f"!!!!! naive pandas disagrees with the floor on {bad}", file=sys.stderr, flush=True)
        except MemoryError:
            res["naive_error"] = "out of memory"
    else:
        res["naive_error"] = opts.get("naive_skip_reason", "skipped")
    eng.dispose()
    res["load_end"] = _load()
    return res


def _load() -> float | None:
    """1-minute load average (the machine may be shared: other jobs show up here)."""
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------------------------ report


def machine() -> dict:
    cpu = platform.processor() or ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = 0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                ram = int(line.split()[1]) * 1024
    except OSError:
        pass
    out = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gb": round(ram / 2**30, 1),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "os": platform.platform(),
    }
    try:
        from sqlalchemy import create_engine, text

        e = create_engine(PG_ADMIN)
        with e.connect() as c:
            out["postgresql"] = c.execute(text("SHOW server_version")).scalar()
        e.dispose()
    except Exception as ex:  # noqa: BLE001
        out["postgresql"] = f"unreachable ({type(ex).__name__})"
    import pandas
    import sqlalchemy

    out["pandas"], out["sqlalchemy"] = pandas.__version__, sqlalchemy.__version__
    return out


def _f(x, nd=2):
    return "–" if x is None else f"{x:.{nd}f}"


def _ok(cond: bool | None) -> str:
    return "" if cond is None else (" ✓" if cond else " ✗")


def render(results: list[dict], mach: dict, args, started: datetime, elapsed: float) -> str:
    L = []
    L.append("# idemview benchmarks\n")
    L.append(
        f"Generated by `{args.command_line}` on {started:%Y-%m-%d %H:%M} UTC "
        f"(took {elapsed / 60:.1f} min)."
        + (
            f" The GUI stall column was added afterwards by `{args.gui_command}` (the GUI landed on main "
            "during the run)."
            if getattr(args, "gui_command", None)
            else ""
        )
        + "\n"
    )
    L.append(f"Machine: {mach['cores']} cores, {mach['ram_gb']} GB RAM, {mach['cpu']}; {mach['os']}.  ")
    L.append(
        f"Engines: SQLite {mach['sqlite']}, PostgreSQL {mach.get('postgresql')} (stock server settings; idemview sessions set work_mem 64MB, SQLite batch cache 64 MiB, no mmap, temp b-trees in a file), "
        f"TCP on localhost); Python {mach['python']}, SQLAlchemy {mach['sqlalchemy']}, "
        f"pandas {mach['pandas']}.\n"
    )
    L.append(
        "Ledgers: reference layout (`idemview` preset), ~3 attempts per operation, incidents planted "
        "at a known rate (benchmarks/gen.py); findings computed for now = "
        f"{NOW.isoformat()}. Times are wall seconds; scan times are the best of "
        f"{args.repeat} alternating floor/engine runs (one run at 3M operations); ✓/✗ mark the issue's targets "
        "(at 1M operations on 2 cores; shown at every size).\n"
    )
    L.append("## Findings scan\n")
    L.append(
        "| engine | operations | attempts | engine scan s | floor SQL s | engine/floor | naive pandas s | "
        "naive/engine | scan peak RSS MB | keys = floor & planted |"
    )
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        if "error" in r:
            L.append(f"| {r['engine']} | {r['size']} | | error: {r['error']} | | | | | | |")
            continue
        ratio = r["scan_engine_s"] / r["scan_floor_s"]
        nv = r.get("naive")
        nv_s = nv["s"] if nv else None
        sp = nv_s / r["scan_engine_s"] if nv_s else None
        naive_txt = _f(nv_s) if nv else f"skipped ({r.get('naive_error', '')})"
        match = "yes" if not r["mismatch"] else "**MISMATCH: " + ", ".join(r["mismatch"]) + "**"
        L.append(
            f"| {r['engine']} | {r['operations']:,} | {r['attempts']:,} | {_f(r['scan_engine_s'])} | "
            f"{_f(r['scan_floor_s'])} | {_f(ratio)}×{_ok(ratio <= TARGET_FLOOR_RATIO)} | {naive_txt} | "
            f"{_f(sp, 1) + '×' if sp else '–'}{_ok(sp >= TARGET_NAIVE_SPEEDUP) if sp else ''} | "
            f"{mb(r['scan_peak'])} | {match} |"
        )
    L.append("")
    L.append(
        "Load average (1 min) at the start/end of each measurement, on 2 cores: "
        + "; ".join(
            f"{r['engine']} {r['size']}: {r.get('load_start')}/{r.get('load_end')}" for r in results if "error" not in r
        )
        + ". Anything above ~1 is another process competing for the cores (this machine is shared "
        "with other sessions' builds and tests), so absolute seconds are noisy; the ratios compare runs "
        "made alternately in the same process.\n"
    )
    L.append(
        "Findings per kind (engine): "
        + "; ".join(
            f"{r['engine']} {r['size']}: " + ", ".join(f"{k} {v}" for k, v in r["counts"].items())
            for r in results
            if "counts" in r
        )
        + ".\n"
    )
    L.append("## Grid: time to first 200 rows\n")
    changes = [g[0] for g in GRID_CHANGES]
    L.append("| engine | operations | connect + first page s | " + " | ".join(changes) + " | GUI stall |")
    L.append("|---|---:|---:|" + "---:|" * len(changes) + "---|")
    for r in results:
        if "error" in r:
            continue
        cells = [f"{_f(g['s'], 3)}{_ok(g['s'] <= TARGET_GRID_S)}" for g in r["grid"]]
        g = r.get("gui")
        if g and "max_stall_s" in g:
            gui = f"{g['max_stall_s'] * 1000:.0f} ms ({g['worst_phase']}; first rows {g['first_rows_s']:.2f} s)"
            if g.get("unfinished"):
                gui += f"; {g['unfinished']}"
        elif g:
            gui = f"error: {g.get('error', '')}"
        else:
            gui = "not measured"
        L.append(
            f"| {r['engine']} | {r['operations']:,} | {_f(r['grid_connect_s'], 3)}"
            f"{_ok(r['grid_connect_s'] <= TARGET_GRID_S)} | " + " | ".join(cells) + f" | {gui} |"
        )
    L.append("")
    if any(r.get("gui") for r in results):
        L.append(
            "GUI stall: the longest gap between ticks of a 10 ms QTimer while the main window (headless, "
            "QT_QPA_PLATFORM=offscreen) opens the ledger, scrolls 20,000 rows page by page, then filters by "
            "status and by a finding (benchmarks/gui_stall.py, the method of tests/test_gui_perf.py).\n"
        )
    L.append("## Evidence export of attempts\n")
    L.append(
        "Every attempt up to 100k operations; above, the attempts of the operations created in one "
        "hour ("
        + next((r.get("export_filter", "") for r in results if r.get("operations", 0) > 100_000), "")
        + "), the same rows for both.\n"
    )
    L.append(
        "| engine | rows | export (masked) s | rows/s | to_csv (unmasked) s (read + write) | rows/s | "
        "export/to_csv | export peak RSS MB (Δ) | to_csv peak RSS MB (Δ) |"
    )
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        if "error" in r:
            continue
        ex, tc = r.get("export"), r.get("to_csv")
        if ex is None:
            ex_txt = f"n/a: {r.get('export_error', '')} | – "
        else:
            ex_txt = f"{_f(ex['s'])} | {ex['rate']:,.0f}{_ok(ex['rate'] >= TARGET_EXPORT_RATE)} "
        tc_txt = f"{_f(tc['s'])} ({_f(tc['read_s'])} + {_f(tc['write_s'])}) | {tc['rate']:,.0f}" if tc else "– | –"
        ratio = ex["s"] / tc["s"] if ex and tc else None
        nrows = ex["rows"] if ex else (tc["rows"] if tc else 0)
        L.append(
            f"| {r['engine']} | {nrows:,} | {ex_txt}| {tc_txt} | "
            f"{(_f(ratio) + '×' + _ok(ratio <= TARGET_EXPORT_VS_CSV)) if ratio else '–'} | "
            f"{(str(mb(ex['peak'])) + ' (' + str(mb(ex['delta'])) + ')') if ex else '–'} | "
            f"{(str(mb(tc['peak'])) + ' (' + str(mb(tc['delta'])) + ')') if tc else '–'} |"
        )
    L.append("")
    warn = [(r["engine"], r["size"], r.get("index_warnings")) for r in results if r.get("index_warnings")]
    if warn:
        L.append("Index warnings: " + "; ".join(f"{e} {s}: {w}" for e, s, w in warn) + "\n")
    gens = [(r["engine"], r["size"], r.get("gen_s")) for r in results if r.get("gen_s")]
    if gens:
        L.append("Generation (not cached): " + ", ".join(f"{e} {s} {g:.0f} s" for e, s, g in gens) + ".\n")
    notes = HERE / "NOTES.md"
    if notes.exists():
        L.append(notes.read_text())
    return "\n".join(L) + "\n"


def gui_stall(engine: str, size: str) -> dict | None:
    """The GUI's longest event-loop stall on this ledger (child process), or None without the GUI."""
    try:
        import importlib.util

        if importlib.util.find_spec("idemview.qt.mainwindow") is None:
            return None
    except ImportError:
        return None
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, str(HERE / "gui_stall.py"), ledger_url(engine, size)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    line = next((x for x in p.stdout.splitlines() if x.startswith("@@GUI@@")), None)
    if line is None:
        return {"error": f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}"}
    return json.loads(line[len("@@GUI@@") :])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100k,1m", help="comma list of " + ", ".join(SIZES))
    ap.add_argument("--engines", default="sqlite,postgresql")
    ap.add_argument("--quick", action="store_true", help="100k only, one scan run")
    ap.add_argument("--reuse", action="store_true", help="reuse cached ledgers of the same generator version")
    ap.add_argument("--repeat", type=int, default=2, help="alternating floor/engine scan runs (best kept)")
    ap.add_argument("--repeat-large", type=int, default=1, help="the same at 3m operations")
    ap.add_argument("--naive-max", default="1m", help="largest size the naive pandas scan runs at")
    ap.add_argument("--no-export-baseline", action="store_true", help="skip pandas to_csv")
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--gui", default="1m", help="sizes (comma list) at which to measure the GUI stall; 'none' to skip")
    ap.add_argument(
        "--gui-only", action="store_true", help="measure only the GUI stall and add it to the last run's results"
    )
    ap.add_argument(
        "--render-only",
        action="store_true",
        help="rewrite --out from the last run's results (benchmarks/.cache/last_results.json)",
    )
    ap.add_argument("--child", nargs=2, metavar=("ENGINE", "SIZE"), help=argparse.SUPPRESS)
    ap.add_argument("--child-opts", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        try:
            res = child(*args.child, json.loads(args.child_opts))
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            res = {"engine": args.child[0], "size": args.child[1], "error": f"{type(e).__name__}: {e}"}
        print("@@RESULT@@" + json.dumps(res, default=str))
        return 0
    if args.gui_only:
        saved = json.loads((CACHE / "last_results.json").read_text())
        for r in saved["results"]:
            if r["size"] in args.gui.split(",") and "error" not in r:
                print(f"== {r['engine']} {r['size']}: GUI", flush=True)
                r["gui"] = gui_stall(r["engine"], r["size"])
                print(f"   {r['gui']}", flush=True)
        saved["args"]["gui_command"] = "python benchmarks/run.py " + " ".join(
            argv if argv is not None else sys.argv[1:]
        )
        (CACHE / "last_results.json").write_text(json.dumps(saved, indent=1, default=str))
        args.render_only = True
    if args.render_only:
        saved = json.loads((CACHE / "last_results.json").read_text())
        ns = argparse.Namespace(**saved["args"])
        Path(args.out).write_text(
            render(saved["results"], saved["machine"], ns, datetime.fromisoformat(saved["started"]), saved["elapsed"])
        )
        print(f"wrote {args.out}")
        return 0
    if args.quick:
        args.sizes, args.repeat = "100k", 1
    sizes = [s.strip().lower() for s in args.sizes.split(",") if s.strip()]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for s in sizes:
        if s not in SIZES:
            ap.error(f"unknown size {s}; choose from {', '.join(SIZES)}")
    args.command_line = "python benchmarks/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    results = []
    for size in sizes:
        for engine in engines:
            print(f"== {engine} {size}: ledger", flush=True)
            g = ensure_ledger(engine, size, args.reuse)
            opts = {
                "repeat": args.repeat,
                "repeat_large": args.repeat_large,
                "csv": not args.no_export_baseline,
                "naive": SIZES[size] <= SIZES[args.naive_max.lower()],
                "naive_skip_reason": f"above --naive-max {args.naive_max}: pandas would need the whole "
                f"ledger in memory and minutes",
            }
            print(f"== {engine} {size}: measuring", flush=True)
            p = subprocess.run(
                [sys.executable, __file__, "--child", engine, size, "--child-opts", json.dumps(opts)],
                capture_output=True,
                text=True,
            )
            sys.stderr.write(p.stderr)
            line = next((x for x in p.stdout.splitlines() if x.startswith("@@RESULT@@")), None)
            r = (
                json.loads(line[len("@@RESULT@@") :])
                if line
                else {"engine": engine, "size": size, "error": f"child exited {p.returncode}"}
            )
            r["gen_s"] = g
            if "error" not in r and size in args.gui.split(","):
                print(f"== {engine} {size}: GUI", flush=True)
                r["gui"] = gui_stall(engine, size)
            results.append(r)
            if "error" not in r:
                nv = r.get("naive")
                print(
                    f"   scan engine {r['scan_engine_s']:.2f} s, floor {r['scan_floor_s']:.2f} s "
                    f"(×{r['scan_engine_s'] / r['scan_floor_s']:.2f}), naive "
                    f"{nv['s'] if nv else '-'}; connect+page {r['grid_connect_s']:.3f} s; grid "
                    + ", ".join(f"{g['change']} {g['s']:.3f}" for g in r["grid"])
                    + (f"; export {r['export']['rate']:,.0f} rows/s" if r.get("export") else "")
                    + (f"; to_csv {r['to_csv']['rate']:,.0f} rows/s" if r.get("to_csv") else "")
                    + (f"; MISMATCH {list(r['mismatch'])}" if r["mismatch"] else ""),
                    flush=True,
                )
            else:
                print(f"   ERROR {r['error']}", flush=True)
    mach, elapsed = machine(), time.perf_counter() - t0
    Path(args.out).write_text(render(results, mach, args, started, elapsed))
    (CACHE / "last_results.json").write_text(
        json.dumps(
            {
                "results": results,
                "machine": mach,
                "started": started.isoformat(),
                "elapsed": elapsed,
                "args": {"command_line": args.command_line, "repeat": args.repeat},
            },
            indent=1,
            default=str,
        )
    )
    print(f"wrote {args.out}")
    bad = [r for r in results if "error" in r or r.get("mismatch")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
