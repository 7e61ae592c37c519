"""DynamoDB ledger benchmark (issue 23 item 2): N Powertools items, snapshot + findings scan, time and RSS.

Target: 100,000 items of AWS Powertools' DynamoDBPersistenceLayer (its default attribute names and
encodings: ``id`` = ``<function>#<md5>``, ``expiration`` epoch s, ``in_progress_expiration`` epoch ms,
``status``, ``data``) snapshotted and scanned in <= 30 s with peak RSS <= 500 MB, against dynalite (the
npm DynamoDB-API server the tests use, ``tests/dynalite``). The items are written with BatchWriteItem in
Powertools' exact shape (one in 50 expired, one in 500 in progress with an expired lease; the tests let
Powertools itself write a ledger of every kind, this only multiplies the shape). A fresh child process
measures, so the peak RSS is idemview's alone: first the floor, a plain boto3 paginated Scan of the same
table (what any reader must pay: dynalite's answer and botocore's parsing), then idemview's
``open_dynamodb_ledger`` + ``FindingEngine.run``; the ratio of the two is printed beside the times.

    .venv/bin/python benchmarks/dynamodb_bench.py [--items 100000]

Prints one JSON line and a Markdown table row for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TABLE = "idempotency_bench"
FUNCTION = "checkout-prod.app.handlers.charge_card"


def item(i: int, now: int) -> dict:
    """Item ``i`` as DynamoDBPersistenceLayer writes it (``_put_record`` + ``_update_record``)."""
    h = hashlib.md5(json.dumps({"order_id": f"o-{i}"}, sort_keys=True).encode()).hexdigest()  # noqa: S324
    it = {"id": {"S": f"{FUNCTION}#{h}"}}
    if i % 500 == 7:  # an invocation that never finished: INPROGRESS with a lapsed lease
        it["status"] = {"S": "INPROGRESS"}
        it["expiration"] = {"N": str(now + 3000)}
        it["in_progress_expiration"] = {"N": str((now - 600) * 1000)}
        return it
    exp = now - 3600 if i % 50 == 3 else now + 3600 - (i % 3600)  # 1 in 50 expired, TTL not yet swept
    it["status"] = {"S": "COMPLETED"}
    it["expiration"] = {"N": str(exp)}
    it["data"] = {"S": json.dumps({"statusCode": 200, "body": json.dumps({"charge_id": f"ch_{i:08d}"})})}
    return it


def populate(endpoint: str, n: int) -> float:
    from tests.dynalite_server import create_table, writer_client

    w = writer_client(endpoint)
    create_table(w, TABLE)
    now = int(time.time())
    t0 = time.perf_counter()

    def write(lo: int) -> None:
        c = writer_client(endpoint)
        for s in range(lo, min(lo + 2500, n), 25):
            reqs = [{"PutRequest": {"Item": item(i, now)}} for i in range(s, min(s + 25, n))]
            while reqs:
                r = c.batch_write_item(RequestItems={TABLE: reqs})
                reqs = r.get("UnprocessedItems", {}).get(TABLE, [])

    with ThreadPoolExecutor(4) as ex:
        list(ex.map(write, range(0, n, 2500)))
    return time.perf_counter() - t0


def measure(endpoint: str) -> dict:
    """In the child: the floor (a plain paginated Scan), then idemview's snapshot + findings."""
    from datetime import UTC, datetime

    from idemview.findings.engine import FindingEngine
    from idemview.ledger.dynamodb_snapshot import open_dynamodb_ledger
    from tests.dynalite_server import writer_client

    t0 = time.perf_counter()
    plain = 0
    for page in writer_client(endpoint).get_paginator("scan").paginate(TableName=TABLE, ConsistentRead=True):
        plain += len(page["Items"])
    floor_s = time.perf_counter() - t0
    rss_floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    ledger = open_dynamodb_ledger(f"dynamodb://{TABLE}?region=us-east-1&endpoint_url={endpoint}")
    t1 = time.perf_counter()
    fs = FindingEngine(ledger, datetime.now(UTC)).run()
    t2 = time.perf_counter()
    counts: dict[str, int] = {}
    for f in fs:
        counts[f.kind.value] = counts.get(f.kind.value, 0) + 1
    return {
        "items": plain,
        "loaded": ledger.snapshot.loaded,
        "pages": ledger.snapshot.pages,
        "floor_scan_s": round(floor_s, 2),
        "snapshot_s": round(t1 - t0, 2),
        "findings_s": round(t2 - t1, 2),
        "total_s": round(t2 - t0, 2),
        "ratio_to_floor": round((t2 - t0) / floor_s, 2),
        "findings": counts,
        "peak_rss_mb_after_floor": round(rss_floor),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    from tests.dynalite_server import AWS_ENV, start_dynalite

    os.environ.update(AWS_ENV)
    if a.child:
        print(json.dumps(measure(a.child)))
        return 0
    proc, endpoint = start_dynalite()
    try:
        seed_s = populate(endpoint, a.items)
        r = subprocess.run(
            [sys.executable, __file__, "--child", endpoint], capture_output=True, text=True, check=True, env=os.environ
        )
        out = json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        proc.kill()
    out["seed_s"] = round(seed_s, 1)
    ok = out["total_s"] <= 30 and out["peak_rss_mb"] <= 500
    out["target"] = "met" if ok else "MISSED"
    print(json.dumps(out))
    print(
        f"| DynamoDB (dynalite) | {a.items:,} Powertools items | floor scan {out['floor_scan_s']} s | snapshot "
        f"{out['snapshot_s']} s + findings {out['findings_s']} s = {out['total_s']} s ({out['ratio_to_floor']}x floor) "
        f"| {out['peak_rss_mb']} MB | <= 30 s, <= 500 MB: {out['target']} |"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
