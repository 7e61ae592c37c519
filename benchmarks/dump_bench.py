#!/usr/bin/env python3
"""A Celery ledger as a Parquet dump against the same ledger in SQLite (issue 23 target: ``scan`` of the
dump <= 2x the SQLite file's, at 2M rows).

    python benchmarks/dump_bench.py [--rows 2000000] [--repeat 3]

The SQLite ledger is benchmarks/presets_gen.py's Celery table (its own schema and index, cached in
``IDEMVIEW_BENCH_CACHE``, default ``~/.cache/idemview-bench``, shared with ``make bench``). The dump is
that table as ``celery_<rows>-parquet/celery_taskmeta.parquet`` beside it, written once by DuckDB from the
rows as SQLite returns them (times as text, blobs as bytes: what a DBA's export of this ledger holds, as in
tests/unit/test_dumps.py) and reused while the SQLite file is unchanged.

Each figure is a fresh ``idemview scan PATH --layout celery --format json --now …`` process timed as a
whole (wall seconds, interpreter start included) with its peak RSS; the two alternate ``--repeat`` times
and the best of each is kept. The two scans must report the same findings (kinds and keys), else the run
fails: a fast wrong answer is not a result.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import presets_gen as pg  # noqa: E402
from presets_bench import IDEMVIEW, run_child  # noqa: E402

TARGET_RATIO = 2.0  # scan of the Parquet dump <= 2x scan of the SQLite file
CHUNK = 200_000  # rows per batch from SQLite to DuckDB (bounds this script's memory)


def write_parquet(db: str, out: Path, log=print) -> float:
    """Write every row of ``celery_taskmeta`` in the SQLite file ``db`` to ``out`` (Parquet), through a
    DuckDB database file in a temporary folder (rows spill to disk, not to memory). Returns seconds."""
    import duckdb
    import pandas as pd

    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="dump-bench-"))
    part = out.with_suffix(".parquet.part")
    src = sqlite3.connect(db)
    con = duckdb.connect(str(tmp / "stage.duckdb"))
    con.execute("SET enable_progress_bar = false")
    try:
        first = True
        for frame in pd.read_sql("SELECT * FROM celery_taskmeta ORDER BY id", src, chunksize=CHUNK):
            con.register("frame", frame)
            con.execute("CREATE TABLE t AS SELECT * FROM frame" if first else "INSERT INTO t SELECT * FROM frame")
            con.unregister("frame")
            first = False
        con.execute(f"COPY t TO '{part}' (FORMAT parquet)")
    finally:
        con.close()
        src.close()
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
    part.rename(out)
    s = time.perf_counter() - t0
    log(f"  wrote {out} ({out.stat().st_size / 1e6:.0f} MB) in {s:.1f} s")
    return s


def ensure_dump(rows: int, log=print) -> tuple[str, Path]:
    """(SQLite file, dump folder) of the Celery ledger with ``rows`` rows, generated or reused."""
    db, _s = pg.ensure("sqlite", "celery", rows, "", log=log)
    folder = Path(pg.cache_dir()) / f"celery_{rows}-parquet"
    out = folder / "celery_taskmeta.parquet"
    stamp = folder / "source.json"
    want = {"sqlite": db, "bytes": os.path.getsize(db), "mtime_ns": os.stat(db).st_mtime_ns}
    if out.exists() and stamp.exists() and json.loads(stamp.read_text()) == want:
        return db, folder
    folder.mkdir(parents=True, exist_ok=True)
    for f in folder.iterdir():
        f.unlink()
    write_parquet(db, out, log=log)
    stamp.write_text(json.dumps(want))
    return db, folder


def _findings(path: str) -> set[tuple[str, str, str]]:
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    return {(x["kind"], x["scope"], x["key"]) for x in doc["findings"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", metavar="PATH", help="also write the result dict here (benchmarks/bench_all.py)")
    a = ap.parse_args()

    print(f"dump bench: Celery, {a.rows:,} rows; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    db, folder = ensure_dump(a.rows)
    targets = {"sqlite": db, "parquet": str(folder)}
    now = pg.now_iso()
    best: dict[str, dict] = {}
    outs = {k: tempfile.NamedTemporaryFile(delete=False, suffix=f".{k}.json").name for k in targets}
    try:
        for i in range(a.repeat):
            for k, target in targets.items():
                r = run_child(
                    [IDEMVIEW, "scan", target, "--layout", "celery", "--format", "json", "--now", now], outs[k]
                )
                if r["rc"] != 0:
                    print(f"scan of {k} failed (exit {r['rc']}): {r['err']}")
                    return 1
                print(f"  run {i + 1}: {k:8} {r['s']:6.2f} s  {r['rss_mb']:5.0f} MB")
                if k not in best or r["s"] < best[k]["s"]:
                    best[k] = r
            if i == 0:
                same = _findings(outs["sqlite"]) == _findings(outs["parquet"])
                n = len(_findings(outs["sqlite"]))
                if not same:
                    print("the dump's findings differ from the SQLite file's: not a valid comparison")
                    return 1
                print(f"  same findings on both ({n:,})")
    finally:
        for p in outs.values():
            os.unlink(p)
    ratio = best["parquet"]["s"] / best["sqlite"]["s"]
    if a.json:
        doc = {"rows": a.rows, "repeat": a.repeat, "sqlite": best["sqlite"], "parquet": best["parquet"]}
        Path(a.json).write_text(json.dumps({**doc, "ratio": ratio, "findings": n, "same_findings": True}, indent=1))
    ok = "ok" if ratio <= TARGET_RATIO else "OVER TARGET"
    print(
        f"| {a.rows:,} | {best['sqlite']['s']:.2f} s ({best['sqlite']['rss_mb']:.0f} MB) | "
        f"{best['parquet']['s']:.2f} s ({best['parquet']['rss_mb']:.0f} MB) | {ratio:.2f}x ({ok}, target <= "
        f"{TARGET_RATIO:g}x) |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
