"""pg-boss itself (npm, Node.js) writes the pg-boss test ledger: ``tests/pgboss/plant.js`` through pg-boss's
public API, pinned by ``tests/pgboss/package.json`` + ``package-lock.json`` (pg-boss 10.4.2, 11.1.2 as
``pg-boss-11`` and 12.27.0 as ``pg-boss-12``), installed with ``npm ci`` by ``.ci/run`` or here when missing.

:func:`plant` runs the script as a subprocess against a PostgreSQL database, waits until a pg-boss worker
holds the doomed job ("WORKING <id>") and kills the process with SIGKILL, as an OOM killer would: that
job stays ``active`` with its own 3 s limit (issue 26).
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from sqlalchemy.engine import make_url

HERE = Path(__file__).resolve().parents[1] / "pgboss"
SCRIPT = HERE / "plant.js"
#: npm package name (as installed) of each pg-boss version the tests run
MODULES = {"10": "pg-boss", "11": "pg-boss-11", "12": "pg-boss-12"}


def install() -> None:
    """``npm ci`` in ``tests/pgboss`` unless both versions are installed (a file lock: parallel test
    processes wait). Raises ``RuntimeError`` when Node.js/npm are missing or npm fails."""
    if all((HERE / "node_modules" / m / "package.json").is_file() for m in MODULES.values()):
        return
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        raise RuntimeError("Node.js and npm are needed to run pg-boss")
    with open(Path(tempfile.gettempdir()) / "idemview-pgboss-npm.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all((HERE / "node_modules" / m / "package.json").is_file() for m in MODULES.values()):
            r = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=HERE,
                capture_output=True,
                text=True,
                timeout=300,
            )
            if r.returncode != 0:
                raise RuntimeError(f"npm ci of pg-boss failed: {(r.stderr or r.stdout).strip()[-300:]}")


def node_url(sqlalchemy_url: str) -> str:
    """The libpq URL node-postgres takes, from a SQLAlchemy PostgreSQL URL (driver suffix dropped)."""
    u = make_url(sqlalchemy_url).set(drivername="postgresql")
    return u.render_as_string(hide_password=False)


def plant(sqlalchemy_url: str, version: str = "10") -> dict[str, list[str | None]]:
    """Run plant.js with pg-boss ``version`` ("10", "11" or "12": also heartbeat leases) on the database;
    return {plant name: [job ids]} (``None`` for a send pg-boss refused). The process is SIGKILLed once
    its worker holds the doomed job ("killed"); a script that fails raises ``RuntimeError`` with its
    stderr. A guard kills a script that has not got there in 120 s (a hung server), so the test fails
    instead of hanging."""
    install()
    err = tempfile.TemporaryFile("w+")  # a file, not a pipe: a chatty stderr cannot block the script
    proc = subprocess.Popen(
        [shutil.which("node") or "node", str(SCRIPT), node_url(sqlalchemy_url), MODULES[version]]
        + (["heartbeat"] if version == "12" else []),
        cwd=HERE,
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
    )
    guard = threading.Timer(120, proc.kill)
    guard.start()
    got: dict[str, list[str | None]] = {}
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("WORKING "):
                got["working"] = [line.split()[1]]
                break
            d = json.loads(line)
            got.setdefault(d["plant"], []).append(d["id"])
    finally:
        guard.cancel()
        proc.kill()  # SIGKILL: no handler, no cleanup, no "fail" written by pg-boss
        proc.wait()
        if proc.stdout:
            proc.stdout.close()
        err.seek(0)
        text = err.read()
        err.close()
    if "working" not in got:
        raise RuntimeError(f"pg-boss plant.js ended early: {text.strip()[-500:]}")
    return got
