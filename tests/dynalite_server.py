"""dynalite (the npm package: a DynamoDB-API server in Node.js, in memory) for the DynamoDB tests and the
benchmark, and a ledger written by AWS Powertools itself.

The package is pinned in ``tests/dynalite/package.json`` + ``package-lock.json`` and installed with
``npm ci`` into ``tests/dynalite/node_modules`` (by ``.ci/run``, or here when missing). :func:`start_dynalite`
runs it on a free loopback port. Unreachable (no Node.js, npm failed): skipped on a developer's machine,
failed with ``CI=true``.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).with_name("dynalite")
CLI = HERE / "node_modules" / "dynalite" / "cli.js"

#: dummy credentials: dynalite checks that requests are signed, not by whom
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIDIDEMVIEWTEST0001",
    "AWS_SECRET_ACCESS_KEY": "idemview-test-secret-DO-NOT-PRINT-9f3b",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def install_dynalite() -> Path:
    """``npm ci`` in ``tests/dynalite`` unless installed (a file lock: parallel test processes wait).
    Returns the CLI script. Raises ``RuntimeError`` when Node.js/npm are missing or npm fails."""
    if CLI.is_file():
        return CLI
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        raise RuntimeError("Node.js and npm are needed to run dynalite")
    with open(HERE / ".install.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not CLI.is_file():
            r = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=HERE,
                capture_output=True,
                text=True,
                timeout=300,
            )
            if r.returncode != 0 or not CLI.is_file():
                raise RuntimeError(f"npm ci of dynalite failed: {(r.stderr or r.stdout).strip()[-300:]}")
    return CLI


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_dynalite() -> tuple[subprocess.Popen, str]:
    """(process, endpoint URL) of a fresh in-memory dynalite on a free loopback port, ready to answer.
    Tables are ACTIVE at once (``--createTableMs 0``). Raises ``RuntimeError`` when it does not start."""
    cli = install_dynalite()
    port = _free_port()
    proc = subprocess.Popen(
        [shutil.which("node") or "node", str(cli), "--host", "127.0.0.1", "--port", str(port), "--createTableMs", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dynalite exited: {proc.stderr.read().decode()[-300:] if proc.stderr else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("dynalite did not listen within 30 s")


def writer_client(endpoint: str):
    """A plain (writing) boto3 DynamoDB client on dynalite, for creating tables: not idemview's."""
    import boto3

    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
    )


def create_table(client, name: str, keys: tuple[str, ...] = ("id",)) -> None:
    """A pay-per-request table with string keys ``keys`` (partition key first), as Powertools' docs
    create it (its persistence layer never creates the table), returned once it is ACTIVE: dynalite
    answers CreateTable with CREATING and turns the table ACTIVE a moment later even with
    ``--createTableMs 0``, and a PutItem before that fails with ResourceNotFoundException (seen
    under load)."""
    roles = ("HASH", "RANGE")
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": k, "KeyType": r} for k, r in zip(keys, roles, strict=False)],
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in keys],
        BillingMode="PAY_PER_REQUEST",
    )
    deadline = time.monotonic() + 30
    while client.describe_table(TableName=name)["Table"]["TableStatus"] != "ACTIVE":
        if time.monotonic() > deadline:
            raise RuntimeError(f"dynalite table {name} not ACTIVE within 30 s")
        time.sleep(0.01)


def env_without_aws() -> dict[str, str]:
    """The environment with every AWS variable removed and the shared files pointed nowhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_CONFIG_FILE"] = os.devnull
    env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    return env
