#!/usr/bin/env python3
"""One orchestrated benchmark run (`make bench`): every bench, its results in one folder, BENCHMARKS.md.

    python benchmarks/bench_all.py [--quick] [--only scan,gui_sqlite] [--skip ssh] [--list]
        [--scan-sizes 2m] [--redis-db 14] [--timeout-scale 1.0] [--out BENCHMARKS.md] [--no-render]

Each step is one bench script run as a child process with ``--json PATH``: it writes its results as a dict
to ``PATH`` in the run's results folder, ``$IDEMVIEW_BENCH_CACHE/results/<UTC stamp>/`` (default
``~/.cache/idemview-bench``, outside the repository; ``results/latest`` points at the last one). For every
step ``run.json`` records the command, start and end (UTC), wall seconds, CPU seconds of the step's
processes (user + system, ``RUSAGE_CHILDREN``), the exit code, the 1-minute load average at start and
end, and whether the step's timeout (``Step.timeout_s`` × ``--timeout-scale``) stopped it; its stdout
and stderr are kept beside as ``<step>.out`` / ``<step>.err``. A step that fails or times out is
recorded and the run goes on. Last, ``benchmarks/render_report.py`` renders BENCHMARKS.md from the
folder (runnable alone to re-render).

The first step (``ledgers``) generates or reuses every cached ledger the others read, so ledger
generation is timed apart from the measurements (``ledgers.json``: seconds per ledger, 0 when reused).

Sizes (the issue-27 targets' ledgers) and the time budget: on this 2-core machine, ledgers cached and the
machine otherwise idle, the whole run is estimated at ~35 minutes (``--list`` prints each step's
estimate; the budget is 45 minutes). ``--quick`` runs every step on 10k-20k-row ledgers in a few minutes
to check the orchestration; its figures are not the targets' ledgers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

UTC = UTC
PY = sys.executable
PG_ADMIN = os.environ.get("IDEMVIEW_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
#: the GUI's clock starts at the generator's anchor (benchmarks/presets_gen.py ANCHOR), as `make bench-gui`
GUI_NOW = "2026-11-30T12:00:00+00:00"
JSON = "{json}"  # replaced by the step's JSON path in argv
BUDGET_MIN = 45  # the whole run on the 2-core machine, ledgers cached (issue 27's Done means)


@dataclass
class Step:
    """One bench run: ``argv`` (``{json}`` replaced by ``<results>/<id>.json``), its timeout and the
    estimated wall seconds on the idle 2-core machine (from the scripts and earlier BENCHMARKS.md figures)."""

    id: str
    title: str
    argv: list[str]
    estimate_s: float
    timeout_s: float
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Sizes:
    """Ledger sizes of one run: full (the issue-27 targets) or ``--quick``."""

    scan: list[str]  # presets_bench size names (10k, 20k, 100k, 1m, 2m)
    celery: int  # Celery rows for export, GUI, dump
    profile_rows: int
    cells_doc_ops: int
    cells_doc_mb: float
    cells_server_ops: int
    cells_big_mb: float
    redis_keys: int
    effects: str  # effects_bench size name
    gui_timeout: int


FULL = Sizes(["2m"], 2_000_000, 200_000, 120, 5.0, 5, 50.0, 1_000_000, "1m", 180)
QUICK = Sizes(["20k"], 20_000, 20_000, 3, 1.0, 2, 2.0, 10_000, "10k", 90)
SIZE_ROWS = {"10k": 10_000, "20k": 20_000, "100k": 100_000, "1m": 1_000_000, "2m": 2_000_000, "3m": 3_000_000}


def _n(name: str) -> str:
    return name.lower()


def steps(sz: Sizes, redis_db: int, scan_sizes: list[str] | None = None) -> list[Step]:
    """Every step of a run, in order."""
    b = str(HERE)
    scan = [_n(s) for s in (scan_sizes or sz.scan)]
    largest = max(scan, key=lambda s: SIZE_ROWS[s])
    celery = {v: k for k, v in SIZE_ROWS.items()}[sz.celery]
    cells = [PY, f"{b}/export_cells_bench.py"]
    gui = [PY, f"{b}/gui_stall.py"]
    # gui_stall.py gains --json on another branch; until then its dict is read from its @@GUI@@ line
    gui_json = ["--json", JSON] if '"--json"' in (HERE / "gui_stall.py").read_text() else []
    pg_celery = PG_ADMIN.rsplit("/", 1)[0] + f"/idemview_bench_celery_{sz.celery}"
    import presets_gen as pg

    # Estimates, idle 2-core machine, ledgers cached (figures from docs/benchmarks-history.md, 2026-12-04):
    # scan: Celery 2M ~10 s scan + 6-22 s floor per engine; idemview 2M SQLite ~85 s scan + ~100-150 s floor,
    #   PostgreSQL ~50 + ~40 s; one run each above 1M, no pandas above 1M rows, no `windows`.
    # export: the CLI export of 2M Celery rows ~130 CPU s (findings column included) + pandas ~25 s; SQLite only.
    # export_profile at 200k rows (stages + export + pandas, ~5.9k rows/s at load 9); 2M would be ~10 min.
    # cells_doc: 5 x 5 MB documents took 19.7 s at load 4.5, so 120 take ~5-8 min; the server engines run 5
    #   (the peak does not grow with rows once one large row is fetched at a time).
    # gui: open + scroll + filters + the findings scan (~10-20 s at 2M); redis 1M: populate ~60 s + 30-60 s;
    # effects 1M: 3 rounds x 3 pairs of ~10 s; dump 2M: 2 x (12 + 13) s.
    out = [
        Step("ledgers", "Ledgers (generated once, cached)", [PY, __file__, "--prepare", JSON]
             + (["--quick"] if sz is QUICK else []) + ["--scan-sizes", ",".join(scan)], 10, 3600),
        Step("scan", "Findings scan vs the plain-SQL floor", [
            PY, f"{b}/presets_bench.py", "--sizes", ",".join(scan), "--engines", "sqlite,postgresql",
            "--presets", "celery,idemview", "--idemview-max", largest, "--repeat", "2", "--repeat-large", "1",
            "--pandas-max", "1m", "--export-size", "none", "--no-big-cells", "--no-windows",
            "--out", "{dir}/scan.md", "--json", JSON], 480, 2400),
        Step("export", "Export of every Celery row vs pandas", [
            PY, f"{b}/presets_bench.py", "--only-export", "--engines", "sqlite", "--export-size", celery,
            "--no-big-cells", "--out", "{dir}/export.md", "--json", JSON], 250, 1200),
        Step("export_profile", "Where an export's time goes", [
            PY, f"{b}/export_profile_bench.py", "--engine", "sqlite", "--rows", str(sz.profile_rows),
            "--skip-findings", "--json", JSON], 60, 900),
        Step("cells_doc", "Export of JSON documents (SQLite, JSON column)", cells + [
            "--engines", "sqlite", "--ops", str(sz.cells_doc_ops), "--mb", f"{sz.cells_doc_mb:g}",
            "--shapes", "doc", "--json-column", "--json", JSON], 360, 1800),
        Step("cells_doc_servers", "Export of JSON documents (PostgreSQL jsonb, MariaDB JSON)", cells + [
            "--engines", "postgresql,mariadb", "--ops", str(sz.cells_server_ops), "--mb", f"{sz.cells_doc_mb:g}",
            "--shapes", "doc", "--json-column", "--json", JSON], 100, 900),
        Step("cells_big", "Export of single large cells (SQLite)", cells + [
            "--engines", "sqlite", "--ops", "1", "--mb", f"{sz.cells_big_mb:g}", "--shapes", "doc,flat,secrets",
            "--json", JSON], 200, 900),
        Step("cells_small", "Export of small cells (SQLite)", cells + [
            "--engines", "sqlite", "--ops", "50", "--mb", "0.001", "--shapes", "doc,flat,secrets",
            "--json", JSON], 30, 300),
        Step("gui_sqlite", "GUI on the Celery ledger (SQLite)", gui + [
            pg.sqlite_path("celery", sz.celery), "--layout", "celery", "--now", GUI_NOW,
            "--timeout", str(sz.gui_timeout)] + gui_json, 120, 900, {"QT_QPA_PLATFORM": "offscreen"}),
        Step("gui_postgresql", "GUI on the Celery ledger (PostgreSQL)", gui + [
            pg_celery, "--layout", "celery", "--now", GUI_NOW, "--timeout", str(sz.gui_timeout)]
            + gui_json, 90, 900, {"QT_QPA_PLATFORM": "offscreen"}),
        Step("redis", "Redis snapshot + scan", [
            PY, f"{b}/redis_bench.py", "--keys", str(sz.redis_keys), "--db", str(redis_db), "--drop",
            "--json", JSON], 200, 1200),
        Step("effects", "Effect records: reconciliation vs reading both key columns", [
            PY, f"{b}/effects_bench.py", "--size", sz.effects, "--rounds", "3", "--json", JSON], 120, 900),
        Step("ssh", "SSH tunnel overhead", [PY, f"{b}/ssh_bench.py", "--json", JSON], 40, 300),
        Step("dump", "Parquet dump vs SQLite file", [
            PY, f"{b}/dump_bench.py", "--rows", str(sz.celery), "--repeat", "2", "--json", JSON], 60, 900),
        Step("masking_corpus", "Masking: precision and recall on the corpus", [
            PY, f"{b}/bench_masking_corpus.py", "--json", JSON], 10, 300),
    ]  # fmt: skip
    if sz is QUICK:  # the estimates are the full sizes'; a quick step is mostly interpreter and set-up
        for st in out:
            st.estimate_s = max(5.0, round(st.estimate_s * 0.08))
    return out


# ------------------------------------------------------------------------------------ preparation


def prepare(out: str, sz: Sizes, scan_sizes: list[str]) -> int:
    """Generate or reuse every ledger the steps read; write ``{ledger: {"url", "generate_s"}}`` to
    ``out`` as each is done (a timeout keeps the ones finished)."""
    import presets_gen as pg

    done: dict[str, dict] = {}

    def save() -> None:
        Path(out).write_text(json.dumps({"ledgers": done}, indent=1))

    need = [(e, p, SIZE_ROWS[s]) for s in scan_sizes for p in ("celery", "idemview") for e in ("sqlite", "postgresql")]
    need += [(e, "celery", sz.celery) for e in ("sqlite", "postgresql")]
    need.append(("sqlite", "celery", sz.profile_rows))
    for engine, preset, n in dict.fromkeys(need):
        t0 = time.perf_counter()
        url, gen_s = pg.ensure(engine, preset, n, PG_ADMIN)
        done[f"{preset} {engine} {n:,}"] = {"url": url, "generate_s": round(gen_s, 1),
                                            "check_s": round(time.perf_counter() - t0 - gen_s, 1)}  # fmt: skip
        save()
    import dump_bench

    t0 = time.perf_counter()
    _db, folder = dump_bench.ensure_dump(sz.celery)
    done[f"celery parquet dump {sz.celery:,}"] = {"url": str(folder), "generate_s": round(time.perf_counter() - t0, 1)}
    save()
    import effects_bench  # build() generates the pair once, then reuses it

    t0 = time.perf_counter()
    effects_bench.build(sz.effects)
    done[f"effects {sz.effects} (SQLite + PostgreSQL)"] = {"url": "", "generate_s": round(time.perf_counter() - t0, 1)}
    save()
    return 0


# ------------------------------------------------------------------------------------------- running


def load_avg() -> list[float]:
    """The 1, 5 and 15-minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def _cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_step(step: Step, results: Path, scale: float) -> dict:
    """Run one step to its end or timeout (its whole process group is then killed); the record of it."""
    jpath = results / f"{step.id}.json"
    argv = [a.replace(JSON, str(jpath)).replace("{dir}", str(results)) for a in step.argv]
    timeout = step.timeout_s * scale
    env = {**os.environ, **step.env}
    rec = {"id": step.id, "title": step.title, "command": shlex.join(argv), "json": jpath.name,
           "estimate_s": step.estimate_s, "timeout_s": timeout, "load_start": load_avg(),
           "start": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
    cpu0, t0 = _cpu_children(), time.perf_counter()
    with open(results / f"{step.id}.out", "wb") as out, open(results / f"{step.id}.err", "wb") as err:
        # its own session: a timeout kills the step's children too (the group of the process started here)
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=ROOT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rc, timed_out = p.wait(), True
    rec.update(
        end=datetime.now(UTC).isoformat(timespec="seconds"),
        wall_s=round(time.perf_counter() - t0, 1),
        cpu_s=round(_cpu_children() - cpu0, 1),
        exit_code=rc,
        timed_out=timed_out,
        load_end=load_avg(),
        stderr_tail=(results / f"{step.id}.err").read_bytes()[-1500:].decode("utf-8", "replace"),
    )
    if not jpath.exists() and step.id.startswith("gui"):
        _gui_from_stdout(results / f"{step.id}.out", jpath)  # gui_stall.py prints its dict as @@GUI@@{...}
    rec["has_json"] = jpath.exists()
    return rec


def _gui_from_stdout(out: Path, jpath: Path) -> None:
    for line in out.read_text("utf-8", "replace").splitlines():
        if line.startswith("@@GUI@@"):
            jpath.write_text(line[len("@@GUI@@") :])


def machine() -> dict:
    """Cores, platform, versions and the commit measured (``+dirty`` when the tree has changes)."""
    import platform
    import sqlite3

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return "?"

    commit = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    info = {"cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version, "commit": commit + ("+dirty" if dirty not in ("", "?") else ""),
            "branch": git("rev-parse", "--abbrev-ref", "HEAD")}  # fmt: skip
    try:
        with open("/proc/meminfo") as f:
            info["mem_gb"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return info


def _lock(path: Path):
    """An exclusive lock on ``path`` held while the returned file stays open (it dies with the process),
    or None when another run holds it: two runs at once would share the cores and each other's ledgers."""
    import fcntl

    f = open(path, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    return f


def run_all(todo: list[Step], results: Path, quick: bool, scale: float) -> dict:
    """Run ``todo`` in order into the new folder ``results``; ``run.json`` is rewritten after every step
    (an interrupted run keeps what was done). Returns the run's record."""
    results.mkdir(parents=True)
    run = {"started": datetime.now(UTC).isoformat(timespec="seconds"), "quick": quick, "machine": machine(),
           "argv": sys.argv[1:], "root": str(ROOT), "load_start": load_avg(), "steps": [],
           "planned": [s.id for s in todo], "estimate_s": sum(s.estimate_s for s in todo),
           "budget_min": BUDGET_MIN}  # fmt: skip
    t0 = time.perf_counter()

    def save() -> None:
        run["duration_s"] = round(time.perf_counter() - t0, 1)
        (results / "run.json").write_text(json.dumps(run, indent=1))

    save()
    print(f"results: {results}", flush=True)
    for s in todo:
        print(f"[{datetime.now(UTC):%H:%M:%S}] {s.id}: {s.title} (~{s.estimate_s / 60:.1f} min) ...", flush=True)
        rec = run_step(s, results, scale)
        run["steps"].append(rec)
        save()
        state = "TIMED OUT" if rec["timed_out"] else f"exit {rec['exit_code']}"
        print(
            f"    {state}, {rec['wall_s']:.0f} s wall, {rec['cpu_s']:.0f} s CPU, load {rec['load_end'][0]}", flush=True
        )
    run["ended"] = datetime.now(UTC).isoformat(timespec="seconds")
    run["load_end"] = load_avg()
    save()
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k-20k-row ledgers: check the orchestration")
    ap.add_argument("--only", default="", help="comma list of step ids to run (default: all)")
    ap.add_argument("--skip", default="", help="comma list of step ids to leave out")
    ap.add_argument("--scan-sizes", default="", help="presets_bench sizes of the scan step (default 2m)")
    ap.add_argument("--redis-db", type=int, default=int(os.environ.get("IDEMVIEW_BENCH_REDIS_DB", "14")))
    ap.add_argument("--timeout-scale", type=float, default=1.0, help="multiply every step's timeout")
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"), help="the rendered report")
    ap.add_argument("--no-render", action="store_true")
    ap.add_argument("--list", action="store_true", help="print the steps with their estimates and stop")
    ap.add_argument("--prepare", metavar="JSON", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    sz = QUICK if a.quick else FULL
    scan_sizes = [s.strip().lower() for s in a.scan_sizes.split(",") if s.strip()] or sz.scan
    if a.prepare:
        return prepare(a.prepare, sz, scan_sizes)
    todo = steps(sz, a.redis_db, scan_sizes)
    only, skip = set(filter(None, a.only.split(","))), set(filter(None, a.skip.split(",")))
    unknown = (only | skip) - {s.id for s in todo}
    if unknown:
        ap.error(f"unknown step(s) {', '.join(sorted(unknown))}; steps: {', '.join(s.id for s in todo)}")
    todo = [s for s in todo if (not only or s.id in only) and s.id not in skip]
    if a.list:
        for s in todo:
            print(
                f"{s.id:18} ~{s.estimate_s / 60:4.1f} min (timeout {s.timeout_s * a.timeout_scale / 60:.0f})  {s.title}"
            )
        print(f"estimated total ~{sum(s.estimate_s for s in todo) / 60:.0f} min")
        return 0
    import presets_gen as pg

    lock = _lock(Path(pg.cache_dir()) / "bench_all.lock")
    if lock is None:
        print(
            "another benchmarks/bench_all.py run holds the lock in $IDEMVIEW_BENCH_CACHE: not started", file=sys.stderr
        )
        return 1
    # every step caches its ledgers in the one folder (effects_bench.py would default to benchmarks/.cache)
    os.environ["IDEMVIEW_BENCH_CACHE"] = pg.cache_dir()
    results = Path(pg.cache_dir()) / "results" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run = run_all(todo, results, a.quick, a.timeout_scale)
    latest = results.parent / "latest"
    if latest.is_symlink() or not latest.exists():
        latest.unlink(missing_ok=True)
        latest.symlink_to(results.name)
    if a.no_render:
        return 0
    import render_report

    render_report.main([str(results), "--out", a.out])
    print(f"wrote {a.out} from {results} ({run['duration_s'] / 60:.1f} min)")
    if run["duration_s"] > BUDGET_MIN * 60:
        print(f"over the {BUDGET_MIN} min budget: see the Steps table for the slow ones", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
