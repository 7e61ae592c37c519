#!/usr/bin/env python3
"""What the SSH tunnel costs (issue 23 target: open + scan overhead through the tunnel on loopback <= 1 s).

    python benchmarks/ssh_bench.py [--operations 2000] [--repeat 3]

Starts a real sshd on loopback (tests/sshd.py, its own config and keys in a temporary folder), writes a
reference ledger (services.demo.generate) into a fresh PostgreSQL database, then times, in this process,
``idemview scan URL --format json`` direct and with ``--ssh USER@127.0.0.1:PORT --ssh-key KEY``, alternating,
best of ``--repeat``; prints both, the difference (the overhead, target <= 1 s) and the ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

PG_ADMIN = os.environ.get("IDEMVIEW_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--operations", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", metavar="PATH", help="also write the result dict here (benchmarks/bench_all.py)")
    a = ap.parse_args()
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from idemview.cli import main as cli
    from idemview.services.demo import generate
    from tests.sshd import start_sshd

    os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    tmp = Path(tempfile.mkdtemp(prefix="idemview-ssh-bench-"))
    sshd = start_sshd(tmp / "sshd")
    os.environ["HOME"] = str(sshd.write_home(tmp / "home"))
    os.environ.pop("SSH_AUTH_SOCK", None)
    db = f"idemview_ssh_bench_{os.getpid()}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{db}"'))
    url = make_url(PG_ADMIN).set(database=db).render_as_string(hide_password=False)
    try:
        w = create_engine(url)
        generate(w, operations=a.operations)
        w.dispose()
        argv = ["scan", url, "--format", "json", "--now", "2026-11-30T12:00:00Z"]
        via = [*argv, "--ssh", sshd.spec, "--ssh-key", str(sshd.key)]
        best = {"direct": float("inf"), "tunnel": float("inf")}
        outs = {}
        for _ in range(a.repeat):
            for name, args in (("direct", argv), ("tunnel", via)):
                buf = io.StringIO()
                t0 = time.perf_counter()
                with contextlib.redirect_stdout(buf):
                    code = cli(args)
                best[name] = min(best[name], time.perf_counter() - t0)
                assert code == 0, f"{name} scan failed ({code})"
                outs[name] = buf.getvalue()
        assert outs["direct"] == outs["tunnel"], "the tunnel changed the scan JSON"
        d, t = best["direct"], best["tunnel"]
        print("| ledger | direct s | through SSH s | overhead s (target <= 1) | ratio |")
        print("|---|---:|---:|---:|---:|")
        print(f"| PostgreSQL, {a.operations} ops + planted | {d:.2f} | {t:.2f} | {t - d:.2f} | {t / d:.2f} |")
        if a.json:
            out = {"operations": a.operations, "repeat": a.repeat, "direct_s": d, "tunnel_s": t}
            Path(a.json).write_text(json.dumps({**out, "overhead_s": t - d, "ratio": t / d}, indent=1))
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
        sshd.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
