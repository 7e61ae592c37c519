"""Export memory and speed on large cells (issue 27 items 1-2): documents, flat strings, secret-dense text.

A reference-layout ledger (``benchmarks/gen.py``) of ``--ops`` operations is written on each engine and
every ``response_body`` is replaced by one cell of ``--mb`` MB of a chosen shape:

``doc``     a JSON *document*: an array of small objects (~210 bytes each, 24,000 per 5 MB), the shape
            real payloads have (the issue's 5.8 GB case);
``flat``    one JSON string of that size (the shape BENCHMARKS.md measured before);
``secrets`` free text dense with secrets (an e-mail, a card, a bearer token, a DSN every ~200 bytes).

Then ``idemview export URL --rows operations`` runs in a child process under ``/usr/bin/time -v``, which
reports its peak RSS.
Usage::

    python benchmarks/export_cells_bench.py --engines sqlite,postgresql,mariadb --ops 120 --mb 5 --shapes doc
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

from sqlalchemy import create_engine, text

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import gen  # noqa: E402

from idemview.services.demo import reference_metadata  # noqa: E402

PG_ADMIN = os.environ.get("IDEMVIEW_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
MARIA_URL = os.environ.get("IDEMVIEW_BENCH_MARIADB", "mysql+pymysql://root@127.0.0.1:3306/test")
MB = 1 << 20


def cell(shape: str, size: int, seed: int) -> str:
    """One cell of ``size`` bytes (about) in ``shape`` (see the module doc); ``seed`` varies it per row."""
    if shape == "doc":
        one = (
            '{"id":"it_%07d","sku":"SKU-%05d","qty":%d,"price":{"amount":%d,"currency":"EUR"},'
            '"tags":["a","b"],"note":"ordinary text with nothing sensitive in it","ok":true}'
        )
        parts, n, i = [], 1, 0
        while n < size:
            p = one % (seed * 100000 + i, i % 99999, i % 7, i * 13 % 10000)
            parts.append(p)
            n += len(p) + 1
            i += 1
        return "[" + ",".join(parts) + "]"
    if shape == "flat":
        unit = "lorem ipsum dolor sit amet consectetur "
        return json.dumps((unit * (size // len(unit) + 1))[:size])
    if shape == "secrets":
        out, n, i = [], 0, 0
        while n < size:
            s = (
                f"user{seed}_{i}@example.com paid with 4111 1111 1111 1111 via "
                f"Authorization: Bearer tok{i:08d}AbCdEfGh123 at postgres://app:pw{i}x@db/p; "
            )
            out.append(s)
            n += len(s)
            i += 1
        return json.dumps("".join(out))
    raise ValueError(shape)


def ledger_url(engine: str, tmp: str) -> str:
    if engine == "postgresql":
        return PG_ADMIN.rsplit("/", 1)[0] + "/idemview_cells_bench"
    if engine == "mariadb":
        return MARIA_URL
    raise ValueError(engine)


def as_json_column(engine: str, url: str) -> None:
    """Declare ``response_body`` a JSON column (SQLite: type name JSON; PostgreSQL jsonb; MariaDB JSON):
    drivers then hand it over parsed unless the export reads it as text (the issue's 5.8 GB case)."""
    if engine == "sqlite":
        import sqlite3

        c = sqlite3.connect(url[len("sqlite:///") :], isolation_level=None)
        ddl = c.execute("SELECT sql FROM sqlite_master WHERE name = 'operations'").fetchone()[0]
        c.execute("PRAGMA writable_schema = ON")
        c.execute(
            "UPDATE sqlite_master SET sql = ? WHERE name = 'operations'",
            (ddl.replace("response_body TEXT", "response_body JSON"),),
        )
        c.close()
        return
    eng = create_engine(url)
    with eng.begin() as c:
        if engine == "postgresql":
            c.execute(text("ALTER TABLE operations ALTER COLUMN response_body TYPE jsonb USING response_body::jsonb"))
        else:
            c.execute(text("ALTER TABLE operations MODIFY response_body JSON"))
    eng.dispose()


def build(engine: str, tmp: str, ops: int, shape: str, size: int) -> str:
    """Write the ledger on ``engine`` and fill ``response_body`` with ``shape`` cells; returns its URL.
    The rows are made on SQLite by ``gen.py`` and copied to the server engines table by table."""
    src = f"{tmp}/src.db"
    gen.generate_sqlite(src, ops, reuse=False, log=lambda *_: None)
    url = ledger_url(engine, tmp) if engine != "sqlite" else f"sqlite:///{src}"
    if engine == "postgresql":
        admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text("DROP DATABASE IF EXISTS idemview_cells_bench"))
            c.execute(text("CREATE DATABASE idemview_cells_bench"))
        admin.dispose()
    s_eng = create_engine(f"sqlite:///{src}")
    eng = create_engine(url)
    if engine != "sqlite":
        md = reference_metadata()
        md.drop_all(eng)
        md.create_all(eng)
        with s_eng.connect() as s, eng.begin() as c:
            for t in md.sorted_tables:
                data = [dict(r._mapping) for r in s.execute(t.select())]
                if data:
                    c.execute(t.insert(), data)
    with eng.begin() as c:
        if engine == "mariadb":  # the reference DDL's TEXT holds 64 KB there
            c.execute(text("ALTER TABLE operations MODIFY response_body LONGTEXT"))
        ids = [r[0] for r in c.execute(text("SELECT id FROM operations ORDER BY id"))]
        for i in ids:
            upd = text("UPDATE operations SET response_body = :b WHERE id = :i")
            c.execute(upd, {"b": cell(shape, size, i), "i": i})
    eng.dispose()
    s_eng.dispose()
    return url


def run_export(url: str, out: str) -> dict:
    """``idemview export`` in a child under ``/usr/bin/time -v``: wall time and the child's peak RSS (MB)."""
    exe = str(Path(sys.executable).with_name("idemview"))
    t0 = time.perf_counter()
    p = subprocess.run(
        ["/usr/bin/time", "-v", exe, "export", url, "--rows", "operations", "--out", out]
        + ["--now", gen.ANCHOR.isoformat(), "--force"],
        capture_output=True,
        text=True,
    )
    s = time.perf_counter() - t0
    peak = next((int(x.split(":")[1]) for x in p.stderr.splitlines() if "Maximum resident set size" in x), 0)
    cpu = sum(
        float(x.split(":")[1]) for x in p.stderr.splitlines() if x.strip().startswith(("User time", "System time"))
    )
    if not os.path.exists(out):
        raise SystemExit(f"export failed ({p.returncode}): {p.stderr[-2000:]}")
    return {"s": s, "cpu_s": cpu, "peak_mb": peak / 1024, "bytes": os.path.getsize(out), "exit": p.returncode}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engines", default="sqlite,postgresql,mariadb")
    ap.add_argument("--shapes", default="doc,flat,secrets")
    ap.add_argument("--ops", type=int, default=120)
    ap.add_argument("--mb", type=float, default=5.0)
    ap.add_argument("--json-column", action="store_true", help="declare response_body a JSON column")
    ap.add_argument("--json", metavar="PATH", help="also write the results here (benchmarks/bench_all.py)")
    args = ap.parse_args(argv)
    rows = []
    for engine in args.engines.split(","):
        for shape in args.shapes.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                url = build(engine, tmp, args.ops, shape, int(args.mb * MB))
                if args.json_column and shape == "doc":
                    as_json_column(engine, url)
                r = run_export(url, f"{tmp}/out.csv")
                r.update(engine=engine, shape=shape, ops=args.ops, mb=args.mb)
                rows.append(r)
                print(
                    f"{engine:10} {shape:8} {args.ops} x {args.mb:g} MB: {r['s']:.1f} s, "
                    f"{args.ops / r['s']:.1f} rows/s, {args.ops * args.mb / r['s']:.1f} MB/s, "
                    f"{r['cpu_s']:.1f} s CPU, peak RSS {r['peak_mb']:.0f} MB",
                    flush=True,
                )
    print(json.dumps(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "args": vars(args)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
