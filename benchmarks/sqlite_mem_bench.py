#!/usr/bin/env python3
"""SQLite session settings against scan/export memory (branch sqlite-mem, issue 27 "memory bounded").

    python benchmarks/sqlite_mem_bench.py [--presets celery,idemview] [--rows 2000000] [--repeat 2]
        [--configs current,mmap0,...] [--export] [--json OUT]

Each figure is one fresh ``idemview scan`` / ``idemview export`` process on a SQLite ledger from
benchmarks/presets_gen.py (cached in ``~/.cache/idemview-bench``), run under GNU time: peak RSS (MB) and
CPU seconds (user + system). The SQLite settings of :mod:`idemview.ledger.connect` (``SQLITE_CACHE_KB``,
``SQLITE_MMAP_BYTES``, ``SQLITE_TEMP_STORE``) are replaced in the child before the CLI runs, so every
configuration runs the same code; configurations alternate within each repeat, so their ratios are taken in
the same minutes on this loaded machine (``uptime`` is printed beside each round).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import presets_gen as pg  # noqa: E402

MIB = 1 << 20
#: name -> (cache KiB, mmap bytes, temp_store)
CONFIGS = {
    "before": (262144, 1 << 30, "MEMORY"),  # open_engine's values before this branch
    "mmap0": (262144, 0, "MEMORY"),
    "mmap0_c64_mem": (65536, 0, "MEMORY"),
    "mmap0_c64_file": (65536, 0, "FILE"),
    "mmap0_c32_file": (32768, 0, "FILE"),
    "mmap0_c16_file": (16384, 0, "FILE"),
    "mmap0_c16_mem": (16384, 0, "MEMORY"),
    "mmap64_c64_file": (65536, 64 * MIB, "FILE"),
    "mmap256_c64_file": (65536, 256 * MIB, "FILE"),
    "current": None,  # whatever connect.py sets now (no override)
}

CHILD = r"""
import sys
import idemview.ledger.connect as c
cfg = sys.argv[1]
if cfg != "-":
    kb, mm, ts = cfg.split(",")
    c.SQLITE_CACHE_KB, c.SQLITE_MMAP_BYTES, c.SQLITE_TEMP_STORE = int(kb), int(mm), ts
from idemview.cli import main
sys.argv = ["idemview"] + sys.argv[2:]
sys.exit(main())
"""


def run(cfg, argv: list[str]) -> dict:
    """Peak RSS (MB), CPU seconds (user + system), wall seconds and exit code of one child."""
    spec = "-" if cfg is None else ",".join(map(str, cfg))
    with tempfile.NamedTemporaryFile(suffix=".time", delete=False) as f:
        tfile = f.name
    t0 = time.perf_counter()
    p = subprocess.run(
        ["/usr/bin/time", "-f", "%M %U %S", "-o", tfile, sys.executable, "-c", CHILD, spec, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wall = time.perf_counter() - t0
    rss_kb, u, s = open(tfile).read().strip().splitlines()[-1].split()
    os.unlink(tfile)
    return {
        "rss_mb": int(rss_kb) / 1024,
        "cpu_s": float(u) + float(s),
        "wall_s": wall,
        "rc": p.returncode,
        "err": p.stderr.decode("utf-8", "replace")[-300:] if p.returncode not in (0, 1) else "",
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--presets", default="celery,idemview")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--configs", default="before,mmap0,mmap0_c64_mem,mmap0_c64_file,mmap0_c16_file,current")
    ap.add_argument("--export", action="store_true", help="also time `idemview export` (slow)")
    ap.add_argument("--export-configs", default="before,current")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    results: list[dict] = []
    out_csv = os.path.join(tempfile.gettempdir(), "sqlite_mem_bench.csv")
    for r in range(a.repeat):
        load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(f"round {r + 1}: {load}", flush=True)
        for preset in a.presets.split(","):
            path = pg.sqlite_path(preset, a.rows)
            if not os.path.exists(path):
                print(f"  (no ledger {path})", flush=True)
                continue
            jobs = [
                ("scan", c, ["scan", path, "--layout", preset, "--format", "json", "--now", pg.now_iso()])
                for c in a.configs.split(",")
            ]
            if a.export:
                jobs += [
                    (
                        "export",
                        c,
                        ["export", path, "--layout", preset, "--now", pg.now_iso(), "--out", out_csv, "--force"],
                    )
                    for c in a.export_configs.split(",")
                ]
            for what, name, argv in jobs:
                res = run(CONFIGS[name], argv)
                res.update(
                    preset=preset, what=what, config=name, round=r + 1, load=load.split("load average:")[-1].strip()
                )
                results.append(res)
                print(
                    f"  {preset:9s} {what:6s} {name:18s} rss {res['rss_mb']:7.0f} MB  cpu {res['cpu_s']:6.2f} s"
                    f"  wall {res['wall_s']:6.2f} s  rc {res['rc']} {res['err']}",
                    flush=True,
                )
    if os.path.exists(out_csv):
        os.unlink(out_csv)
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
