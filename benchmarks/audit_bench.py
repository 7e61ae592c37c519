#!/usr/bin/env python3
"""What the ledger audit (``secret_at_rest``, issue 21) and the action classes cost.

    python benchmarks/audit_bench.py [--sizes 2m] [--engines sqlite,postgresql] [--presets idemview,celery]
        [--repeat 2]

For each ledger (generated and cached by benchmarks/presets_gen.py, as ``make bench`` does) it times
``idemview scan URL --layout P --format json`` as a whole process with ``--audit-rows 0`` (no audit) and
with the default sample (10,000 rows per table), best of ``--repeat``, alternating; target: the audit adds
at most 20 %. It also times classifying 1,000,000 kind values (target: at most 1 s), memoised per
distinct kind. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import presets_gen as pg  # noqa: E402

PY = sys.executable
IDEMVIEW = str(Path(PY).with_name("idemview"))
PG_ADMIN = os.environ.get("IDEMVIEW_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
SIZES = {"100k": 100_000, "1m": 1_000_000, "2m": 2_000_000}


def _scan(url: str, preset: str, audit: int | None) -> float:
    argv = [IDEMVIEW, "scan", url, "--layout", preset, "--format", "json", "--now", pg.ANCHOR.isoformat()]
    if audit is not None:
        argv += ["--audit-rows", str(audit)]
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def classify_million() -> float:
    from idemview.domain.actions import Classifier
    from idemview.services.demo import KINDS

    kinds = [*KINDS, "billing.tasks.refund_order", "POST /v1/charges", "GET /v1/charges", "MyApp.Workers.Sync"]
    values = [kinds[i % len(kinds)] for i in range(1_000_000)]
    c = Classifier()
    t0 = time.perf_counter()
    c.classify_many(values)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2m")
    ap.add_argument("--engines", default="sqlite,postgresql")
    ap.add_argument("--presets", default="idemview,celery")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    print(f"classify 1,000,000 kind values: {classify_million():.3f} s (target <= 1 s)\n")
    print("| engine | preset | rows | scan, no audit (s) | scan with audit (s) | added |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for size in a.sizes.split(","):
        n = SIZES[size]
        for engine in a.engines.split(","):
            for preset in a.presets.split(","):
                url, _gen_s = pg.ensure(engine, preset, n, PG_ADMIN, log=lambda *x: print(*x, file=sys.stderr))
                off, on = [], []
                for _ in range(a.repeat):
                    off.append(_scan(url, preset, 0))
                    on.append(_scan(url, preset, None))
                b, w = min(off), min(on)
                print(f"| {engine} | {preset} | {n:,} | {b:.2f} | {w:.2f} | {100 * (w - b) / b:+.1f} % |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
