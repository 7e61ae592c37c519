"""The ``bullmq`` key-value preset on a keyspace BullMQ itself wrote (issue #26).

A session fixture installs BullMQ from the npm registry into a temporary folder (``npm install``, Node
20+); ``tests/redis/bullmq_plant.js`` then drives real queues and workers against the test database:
a double completion under one dedup id, a job left active by a dead worker (its lock expired), a job
failed after 3 attempts, and clean look-alikes (a dedup id completed once with a second add dropped, a
job failed once then completed, an active job whose lock is held, waiting and delayed jobs). Without
Node or the registry the tests skip, and fail with ``CI=true``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from idemview.domain.model import FindingKind as K
from idemview.findings.engine import FindingEngine
from tests.conftest import ON_CI
from tests.redis.conftest import put_celery, put_generic, server_now

PLANT = Path(__file__).with_name("bullmq_plant.js")
#: the BullMQ release the fixtures are written with (its hash fields: atm, ats, deid, processedOn...)
BULLMQ = "bullmq@6.7.0"


def _unavailable(msg: str):
    if ON_CI:
        pytest.fail(msg + " (CI=true: the BullMQ tests must run)")
    pytest.skip(msg)


@pytest.fixture(scope="session")
def bullmq_modules(tmp_path_factory) -> Path:
    """A folder with ``node_modules/bullmq`` (and ioredis), installed once per test session."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        _unavailable("Node.js and npm are needed to let BullMQ write the test keyspace")
    root = tmp_path_factory.mktemp("bullmq")
    try:
        r = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--no-save", BULLMQ, "ioredis@5"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
        )
    except subprocess.TimeoutExpired:
        _unavailable("npm install bullmq did not finish in 300 s")
    if r.returncode != 0:
        _unavailable(f"npm install {BULLMQ} failed: {r.stderr.strip().splitlines()[-1:]}")
    return root


def plant(modules: Path, url: str, scenario: str) -> None:
    env = dict(os.environ, NODE_PATH=str(modules / "node_modules"))
    r = subprocess.run(
        ["node", str(PLANT), url, scenario], cwd=modules, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr


def open_ledger(url, layout=None):
    from idemview.ledger.redis_snapshot import open_redis_ledger

    return open_redis_ledger(url, layout=layout)


def found(ledger, now) -> set[tuple[str, str, str]]:
    return {(f.kind.value, f.scope, f.key) for f in FindingEngine(ledger, now).run()}


def test_bullmq_detected_and_planted_incidents_found(redis_db, bullmq_modules):
    url, raw = redis_db
    plant(bullmq_modules, url, "incidents")
    ledger = open_ledger(url)
    assert ledger.layout.name == "bullmq" and "detected bullmq" in ledger.detection
    now = server_now(raw)
    assert found(ledger, now) == {
        ("duplicate_effect", "payments", "charge-42"),
        ("stuck_in_progress", "payments", "ship-9"),
        ("unresolved_failure", "payments", "refund-7"),
        # the mail queue's job data hold e-mail addresses: personal data at rest in Redis (issue 21)
        ("secret_at_rest", "", ""),
    }
    # the state of every job comes from the list or sorted set holding its id
    states = {(o.scope, o.key, o.raw_status) for o in _all(ledger)}
    assert {
        ("payments", "charge-42", "completed"),
        ("payments", "charge-43", "completed"),
        ("payments", "refund-7", "failed"),
        ("payments", "refund-8", "completed"),
        ("payments", "ship-9", "active"),
        ("payments", "ship-10", "active"),
        ("mail", "welcome-a", "delayed"),
    } <= states
    assert [s for s in states if s[0] == "mail" and s[1] != "welcome-a"][0][2] == "wait"
    assert sum(1 for s in _all(ledger) if s.key == "charge-42") == 2
    runs = [s for s in states if s[0] == "reports" and s[1].startswith("repeat:nightly:")]
    assert len(runs) >= 3 and {s[2] for s in runs if s[2] != "delayed"} == {"completed"}
    failed = ledger.records("payments", "refund-7")[0]
    assert failed.attempt_count == 3 and failed.kind == "refund"
    assert ledger.records("payments", "refund-8")[0].attempt_count == 2
    # the held lock ends in the future (its TTL), the dead worker's is gone (ended at the read)
    live, dead = ledger.records("payments", "ship-10")[0], ledger.records("payments", "ship-9")[0]
    assert live.lock_expires_at is not None and live.lock_expires_at > now
    assert dead.lock_expires_at is not None and dead.lock_expires_at <= now
    assert ledger.snapshot.joined["locks_missing"] == 1
    # the dedup keys: charge-43's (ttl 10 min) ends its job's window; welcome-a's (no ttl) has no end
    held = ledger.records("payments", "charge-43")[0]
    assert held.expires_at is not None and now < held.expires_at <= now + timedelta(minutes=10)
    assert ledger.records("mail", "welcome-a")[0].expires_at is None
    assert ledger.snapshot.joined["windows"] == 2 and ledger.snapshot.joined["windows_gone"] == 0
    nc = FindingEngine(ledger, now).unsupported()
    assert K.DUPLICATE_EFFECT not in nc and K.STUCK_IN_PROGRESS not in nc and K.RETRY_STORM not in nc


def _all(ledger):
    from sqlalchemy import select

    t = ledger.ops
    with ledger.engine.connect() as c:
        keys = c.execute(select(t.c.scope, t.c.idempotency_key).distinct()).fetchall()
    return [o for s, k in keys for o in ledger.records(s, k)]


def test_bullmq_remove_on_complete_says_duplicates_cannot_be_checked(redis_db, bullmq_modules):
    url, raw = redis_db
    plant(bullmq_modules, url, "remove-on-complete")
    ledger = open_ledger(url, "bullmq")
    now = server_now(raw)
    assert found(ledger, now) == set()
    nc = FindingEngine(ledger, now).unsupported()
    assert "removeOnComplete" in nc[K.DUPLICATE_EFFECT]
    # the two deleted completions were read from the events stream: neither job id completed twice
    assert "2 completions of deleted jobs" in nc[K.DUPLICATE_EFFECT]
    # the deleted jobs left nothing; the delayed one (job id 3) is the only record
    assert [(o.scope, o.key, o.raw_status) for o in _all(ledger)] == [("orders", "3", "delayed")]


def test_bullmq_job_id_rerun_after_remove_on_complete_is_a_duplicate(redis_db, bullmq_modules, capsys):
    url, raw = redis_db
    plant(bullmq_modules, url, "jobid-rerun")
    ledger = open_ledger(url, "bullmq")
    now = server_now(raw)
    fs = FindingEngine(ledger, now).run()
    assert {(f.kind.value, f.scope, f.key) for f in fs} == {("duplicate_effect", "invoices", "invoice-5")}
    dup = fs[0]
    assert "2 attempts succeeded" in dup.explanation and "job removed" in dup.explanation
    assert ledger.snapshot.joined["completed_removed"] == 3 and ledger.snapshot.joined["rerun_ids"] == 1
    assert any("removeOnComplete" in n for n in ledger.snapshot.notes)
    assert K.DUPLICATE_EFFECT not in FindingEngine(ledger, now).unsupported()
    # invoice-7 was kept: one record, completed once (its re-add was refused as a duplicate)
    assert [o.raw_status for o in ledger.records("invoices", "invoice-7")] == ["completed"]
    # the scan report says it, under the server line
    from idemview.cli import main

    main(["scan", url, "--layout", "bullmq"])
    out = capsys.readouterr().out
    assert "\nnote     3 completed jobs were deleted on completion (removeOnComplete" in out


def test_bullmq_not_detected_on_other_redis_ledgers(redis_db):
    from idemview.ledger.redis_snapshot import connect_redis, detect_kv

    url, raw = redis_db
    put_celery(raw, "t-1", "SUCCESS", done=server_now(raw))
    put_generic(raw, "shop", "k-1", status="completed")
    client = connect_redis(url)
    try:
        names = [m.layout.name for m in detect_kv(client)]
    finally:
        client.connection_pool.disconnect()
    assert "bullmq" not in names and names
