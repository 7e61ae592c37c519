"""Where an export's time goes (issue 27 item 2): the driver alone, the plan's conversion, the masker
and formatter per column, the CSV writer alone, the whole ``export_evidence``, and pandas ``read_sql`` +
``to_csv`` of the same table, in one process, one after the other.

Stages, each timed on its own over the whole table:

``driver``   the export's select streamed by ``plan.stream_batches`` (rows fetched, nothing else);
``convert``  ``plan._operation_columns`` alone (times decoded, statuses mapped, payload cells);
``mask``     per export column: the writer's column formatter (mask + format + formula guard) over the
             converted batches, so the table says which column costs what;
``csv``      the writer's CSV text of the already formatted cells (``writer._csv_text``, column by
             column), encoded to UTF-8 and discarded;
``pipeline`` the pass that timed ``convert``, ``mask`` and ``csv`` (driver included; no file, no hash);
``export``   ``export_evidence`` end to end (findings column included, timed apart as ``findings``);
``pandas``   ``pandas.read_sql`` + ``DataFrame.to_csv`` of ``SELECT *`` (nothing masked);
``ab``       with ``--ab N``: N rounds of the export with the previous paths (``--ab-base export4``:
             branch export4's, ``_export4_paths``; ``main``: before branches export-speed and export4,
             ``_previous_paths``), the export now, and pandas, interleaved in this process
             (on a shared machine the load moves by 2-3x between separate runs; within a round it
             hits all three alike).

Usage::

    python benchmarks/export_profile_bench.py --engine sqlite --rows 200000 [--skip-findings]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import presets_gen as pg  # noqa: E402

PG_ADMIN = os.environ.get("IDEMVIEW_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def _ledger(engine: str, n: int):
    from idemview.layouts.layout import load_layout
    from idemview.ledger.batch import for_batch
    from idemview.ledger.connect import open_engine
    from idemview.ledger.reader import Ledger

    url, _s = pg.ensure(engine, "celery", n, PG_ADMIN, log=lambda *_: None)
    sa = f"sqlite:///{url}" if engine == "sqlite" else url
    # batch work, as export_evidence reads: no interactive statement timeout
    return for_batch(Ledger(open_engine(sa), load_layout("celery")), None), sa


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", default="sqlite")
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--skip-findings", action="store_true", help="no findings index (export column left empty)")
    ap.add_argument("--no-pandas", action="store_true")
    ap.add_argument("--no-export", action="store_true", help="stages only, no export_evidence run")
    ap.add_argument("--ab-now-first", action="store_true", help="--ab rounds start with the current export")
    ap.add_argument("--no-stages", action="store_true", help="no stage-by-stage pass (driver ... csv)")
    ap.add_argument(
        "--ab",
        type=int,
        default=0,
        metavar="N",
        help="then N rounds of: export with the previous paths, export with the current ones, pandas "
        "(interleaved in this process, so the load hits all three alike)",
    )
    ap.add_argument(
        "--ab-base",
        choices=("export4", "main"),
        default="export4",
        help="what --ab's previous export is: branch export4's paths (default) or those before export-speed",
    )
    ap.add_argument("--json", metavar="PATH", help="also write the printed dict here (benchmarks/bench_all.py)")
    args = ap.parse_args(argv)

    from sqlalchemy import select

    from idemview.config import new_masker
    from idemview.domain.filters import Filter
    from idemview.evidence import plan, writer
    from idemview.evidence.formatting import _make_column_cells

    ledger, sa_url = _ledger(args.engine, args.rows)
    now = datetime.fromisoformat(pg.now_iso().replace("Z", "+00:00")).astimezone(UTC)
    out: dict = {"engine": args.engine, "rows": args.rows, "load": os.getloadavg()[0]}

    findings: dict = {}
    if not args.skip_findings:
        t0 = time.perf_counter()
        findings = plan._finding_index(ledger, now)
        out["findings_s"] = time.perf_counter() - t0
    real_index = plan._finding_index
    plan._finding_index = lambda *_a, **_k: findings  # type: ignore[assignment] - the stages below reuse it

    try:
        if not args.no_stages:
            p = plan._operations(ledger, Filter(), now)
            cols = p.columns
            times = [c.name for c in cols if c.name in plan.OP_TIMES]
            payloads = [c.name for c in cols if c.name in ("request", "response", "error")]
            sel = [plan._as_text(c, ledger.engine.dialect.name) for c in ledger.op_columns()]
            q = select(*sel).select_from(ledger.ops).order_by(ledger.rid)
            big = [i for i, c in enumerate(sel) if c.name.startswith(("p_", "j_"))]

            t0, c0 = time.perf_counter(), time.process_time()
            n = 0
            with ledger.engine.connect() as c:
                for batch in plan.stream_batches(c, q, big):
                    n += len(batch)
            out["driver_s"] = time.perf_counter() - t0
            out["driver_cpu_s"] = time.process_time() - c0

            # One streamed pass timing each stage per fetched batch (nothing held across batches): the
            # conversion, each column's formatter (mask + format + guard, in the writer's chunks of at
            # most 1000 rows: the same memo scope), and the csv module writing the formatted rows.
            convert = plan._operation_columns(ledger, [c.name for c in sel], times, payloads, findings)
            masker = new_masker()
            # the writer's own per-column function (formatting._make_column_cells: mask, format, mark bare)
            fns = [_make_column_cells(col, masker, "") for col in cols]
            per_col = [0.0] * len(cols)
            per_col_cpu = [0.0] * len(cols)
            conv_s = csv_s = conv_cpu = csv_cpu = 0.0
            clock = time.process_time
            sink = writer._Lines()
            w = csv.writer(sink, lineterminator="\r\n", quoting=csv.QUOTE_NONNUMERIC)
            t_all, c_all = time.perf_counter(), clock()
            with ledger.engine.connect() as c:
                for batch in plan.stream_batches(c, q, big):
                    t0, c0 = time.perf_counter(), clock()
                    colsv = convert(batch)
                    conv_s += time.perf_counter() - t0
                    conv_cpu += clock() - c0
                    del batch
                    for k in range(0, len(colsv[0]), 1000):
                        formatted = []
                        for j in range(len(cols)):
                            t0, c0 = time.perf_counter(), clock()
                            formatted.append(fns[j](colsv[j][k : k + 1000]))
                            per_col[j] += time.perf_counter() - t0
                            per_col_cpu[j] += clock() - c0
                        t0, c0 = time.perf_counter(), clock()
                        # the writer's own path: a column at a time (writer._csv_text), else the csv module
                        if hasattr(writer, "_csv_text"):
                            sink.write(writer._csv_text(formatted))
                        else:
                            w.writerows(zip(*formatted, strict=True))
                        "".join(sink.take()).encode("utf-8")
                        csv_s += time.perf_counter() - t0
                        csv_cpu += clock() - c0
            out["pipeline_s"] = time.perf_counter() - t_all
            out["pipeline_cpu_s"] = clock() - c_all
            out["convert_s"] = conv_s
            out["convert_cpu_s"] = conv_cpu
            out["mask_s"] = sum(per_col)
            out["mask_cpu_s"] = sum(per_col_cpu)
            out["mask_per_column_cpu_s"] = {
                col.name: round(v, 3) for col, v in sorted(zip(cols, per_col_cpu, strict=True), key=lambda cv: -cv[1])
            }
            out["mask_per_column_s"] = {
                col.name: round(v, 3) for col, v in sorted(zip(cols, per_col, strict=True), key=lambda cv: -cv[1])
            }
            out["csv_s"] = csv_s
            out["csv_cpu_s"] = csv_cpu

        if not args.no_export:
            with tempfile.TemporaryDirectory() as tmp:
                t0, c0 = time.perf_counter(), time.process_time()
                res = plan.export_evidence(ledger, Filter(), f"{tmp}/e.csv", now=now)
                out["export_s"] = time.perf_counter() - t0
                out["export_cpu_s"] = time.process_time() - c0
                out["export_rows"] = res.rows
                out["csv_mb"] = res.size / 1e6
                out["export_rows_per_s"] = res.rows / out["export_s"]
    finally:
        plan._finding_index = real_index  # type: ignore[assignment]

    if not args.no_pandas:
        import pandas as pd
        from sqlalchemy import create_engine

        eng = create_engine(sa_url)
        with tempfile.TemporaryDirectory() as tmp:
            t0, c0 = time.perf_counter(), time.process_time()
            with eng.connect() as c:
                df = pd.read_sql("SELECT * FROM celery_taskmeta", c)
            out["pandas_read_s"] = time.perf_counter() - t0
            df.to_csv(f"{tmp}/p.csv", index=False)
            out["pandas_s"] = time.perf_counter() - t0
            out["pandas_cpu_s"] = time.process_time() - c0
            del df
        if "export_s" in out:
            out["export_over_pandas"] = out["export_s"] / out["pandas_s"]
            out["export_over_pandas_cpu"] = out["export_cpu_s"] / out["pandas_cpu_s"]
    if args.ab:
        base = _export4_paths if args.ab_base == "export4" else _previous_paths
        out["ab"] = _ab_rounds(ledger, now, sa_url, findings, args.ab, args.ab_now_first, base)
        out["ab"]["base"] = args.ab_base
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


def _export4_paths():
    """A context that puts back the export paths of branch export4: integer and instant columns with
    one ``_Bare`` object per cell instead of a mark on the whole column (``_BareColumn``), and a stored
    column read under two labels (Celery's ``date_done``) fetched twice (no ``plan._fetched_once``).
    Same output (tests/evidence/test_export_fast_paths.py); only the time differs."""
    from contextlib import contextmanager

    from idemview.evidence import formatting, plan, writer

    def per_cell(make):
        def made(col, masker, null):
            fn = make(col, masker, null)

            def cells(values):
                out = fn(values)
                return list(map(formatting._Bare, out)) if type(out) is formatting._BareColumn else out

            return cells

        return made

    @contextmanager
    def ctx():
        saved, saved_once = writer._make_column_cells, plan._fetched_once
        writer._make_column_cells = per_cell(saved)
        plan._fetched_once = lambda sel: (sel, {})
        try:
            yield
        finally:
            writer._make_column_cells, plan._fetched_once = saved, saved_once

    return ctx()


def _previous_paths():
    """A context that puts back the export paths as they were before branch export-speed: every
    column formatted by ``_make_column_formatter`` then marked by ``_bare_cells`` (a regex per typed
    cell), UUID ids proven plain one call per text (no ``unchanged_chunk_check``), and the auth
    detector without its scheme-word gate; and without branch export4's whole-column paths (time and
    payload columns decoded per value, the CSV text by the csv module). Same output (tests/evidence/
    test_column_cells_exact.py, test_export_fast_paths.py); only the time differs. Not undone: the
    md5 ``intent_ref`` on SQLite (SQL, not a code path; the figures of main are in NOTES.md "export4")."""
    import io
    from contextlib import contextmanager

    from idemview.evidence import formatting, timecols, writer
    from idemview.masking.detectors import Detectors
    from idemview.masking.engine import Masker

    def old_cells(col, masker, null):
        vec, bare = formatting._make_column_formatter(col, masker, null), formatting._bare_cells(col, null)
        return lambda values: bare(vec(values))

    def csv_module_text(cols):
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_NONNUMERIC).writerows(zip(*cols, strict=True))
        return buf.getvalue()

    names = ("naive_utc_texts", "epoch_floats", "payload_bulk")

    @contextmanager
    def ctx():
        saved = writer._make_column_cells, Detectors._d_auth, Masker.unchanged_chunk_check, writer._csv_text
        saved_tc = [getattr(timecols, n) for n in names]
        writer._make_column_cells, Detectors._d_auth = old_cells, Detectors._d_auth_scan
        Masker.unchanged_chunk_check = lambda self: None  # type: ignore[method-assign,assignment]
        writer._csv_text = csv_module_text
        timecols.naive_utc_texts = timecols.epoch_floats = lambda col: None
        timecols.payload_bulk = lambda enc: lambda col: None
        try:
            yield
        finally:
            writer._make_column_cells, Detectors._d_auth, Masker.unchanged_chunk_check, writer._csv_text = saved
            for n, f in zip(names, saved_tc, strict=True):
                setattr(timecols, n, f)

    return ctx()


def _ab_rounds(ledger, now, sa_url, findings, n: int, now_first: bool = False, base=None) -> dict:
    """``n`` rounds of (export with the previous paths, export now, pandas), seconds, and the medians."""
    import statistics

    import pandas as pd
    from sqlalchemy import create_engine

    from idemview.domain.filters import Filter
    from idemview.evidence import plan

    real_index = plan._finding_index
    plan._finding_index = lambda *_a, **_k: findings  # type: ignore[assignment]
    eng = create_engine(sa_url)
    rounds = []
    try:
        for _ in range(n):
            r = {"load": os.getloadavg()[0]}
            with tempfile.TemporaryDirectory() as tmp:
                sizes = {}
                # the order alternates between rounds: the second export of a round ran slower in
                # every round when it was always the current one (page cache, heap, load drift)
                for which in ("previous", "now") if (len(rounds) + now_first) % 2 == 0 else ("now", "previous"):
                    with (base or _previous_paths)() if which == "previous" else contextlib.nullcontext():
                        t0, c0 = time.perf_counter(), time.process_time()
                        res = plan.export_evidence(ledger, Filter(), f"{tmp}/{which}.csv", now=now)
                        r[f"{which}_s"] = time.perf_counter() - t0
                        r[f"{which}_cpu_s"] = time.process_time() - c0
                    sizes[which] = res.size
                r["order"] = "previous first" if (len(rounds) + now_first) % 2 == 0 else "now first"
                # tags differ (a key per export), not their length
                r["same_csv_size"] = sizes["previous"] == sizes["now"]
                t0, c0 = time.perf_counter(), time.process_time()
                with eng.connect() as c:
                    df = pd.read_sql("SELECT * FROM celery_taskmeta", c)
                df.to_csv(f"{tmp}/p.csv", index=False)
                r["pandas_s"] = time.perf_counter() - t0
                r["pandas_cpu_s"] = time.process_time() - c0
                del df
            rounds.append({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()})
    finally:
        plan._finding_index = real_index  # type: ignore[assignment]
    keys = ("previous_s", "now_s", "pandas_s", "previous_cpu_s", "now_cpu_s", "pandas_cpu_s")
    med = {k: statistics.median(r[k] for r in rounds) for k in keys}
    return {
        "rounds": rounds,
        "median": med,
        "previous_over_pandas": med["previous_s"] / med["pandas_s"],
        "now_over_pandas": med["now_s"] / med["pandas_s"],
        "previous_over_pandas_cpu": med["previous_cpu_s"] / med["pandas_cpu_s"],
        "now_over_pandas_cpu": med["now_cpu_s"] / med["pandas_cpu_s"],
        "now_rows_per_s": ledger_rows(ledger) / med["now_s"],
    }


def ledger_rows(ledger) -> int:
    from sqlalchemy import func, select

    with ledger.engine.connect() as c:
        return int(c.execute(select(func.count()).select_from(ledger.ops)).scalar_one())


if __name__ == "__main__":
    raise SystemExit(main())
