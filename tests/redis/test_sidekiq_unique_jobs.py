"""Sidekiq + sidekiq-unique-jobs (Ruby: no Ruby from the registries here, so no library writes these
fixtures): keys written as the source writes them.

- Sidekiq (sidekiq/sidekiq lib/sidekiq/client.rb): a job JSON (jid, class, args, queue, created_at,
  enqueued_at, the unique options lock / lock_digest / lock_ttl) LPUSHed onto ``queue:<queue>``, or ZADDed
  to ``schedule`` (score = run time); job_retry.rb: error_message, error_class, failed_at/retried_at and
  retry_count (0 after the first failure) and ZADD ``retry`` (score = next retry) or ``dead``. Sidekiq 8
  writes the times as epoch ms, Sidekiq 7 as epoch float seconds (Changes.md 8.0).
- sidekiq-unique-jobs v8 (v8.0.13 lua/lock.lua): HSET ``<digest>:LOCKED`` job_id -> the lock time (epoch
  float s), ZADD ``uniquejobs:digests`` lock time -> digest, PEXPIRE by the lock's TTL; queue.lua's
  ``SET <digest> job_id`` and ``:QUEUED``/``:INFO`` beside it. v9 (lua/lock.lua, locksmith.rb
  lock_metadata): HSET ``<digest>:LOCKED`` job_id -> JSON {worker, queue, limit, timeout, ttl, type,
  lock_args, time, at}; only that key and ``uniquejobs:digests``.

Planted: two queued until_executed jobs of one v8 digest (the lock let the second through), a v9 LOCKED hash
holding two job ids, a v9 until_executed job failed into ``retry`` still holding its lock (v9 unlocks on
success only) with a second job of its digest queued, a dead job, a job retried 6 times. Look-alikes: two
queued while_executing jobs (allowed: no client lock), a failed until_executed job in ``retry`` beside the
next one (v8 released its lock), two queued until_expired jobs (only its LOCKED hash is compared), one job per
digest."""

from __future__ import annotations

import hashlib
import json
import time
from datetime import UTC, datetime

from idemview.domain.model import FindingKind as K
from idemview.findings.engine import FindingEngine
from tests.redis.conftest import server_now

SCOPE = "sidekiq"


def digest(name: str) -> str:
    """A lock digest as lock_digest.rb builds it: ``<lock_prefix>:<hex>``."""
    return "uniquejobs:" + hashlib.md5(name.encode()).hexdigest()  # noqa: S324 - the gem's own (v8)


def job(jid, cls="ChargeJob", args=(1,), *, queue="default", lock=None, dig=None, **extra):
    """A Sidekiq job JSON created a minute ago: Sidekiq 8 times (epoch ms), or Sidekiq 7's (epoch float
    seconds) with ``sidekiq7=True``; ``extra`` adds fields (retry_count, error_message…)."""
    now = time.time()
    created = now - 60
    j = {
        "class": cls,
        "args": list(args),
        "queue": queue,
        "jid": jid,
        "retry": True,
        "created_at": round(created, 6) if extra.pop("sidekiq7", False) else int(created * 1000),
        "enqueued_at": int(now * 1000),
    }
    if lock:
        j.update(lock=lock, lock_digest=dig, lock_ttl=extra.pop("lock_ttl", None), lock_timeout=0)
    j.update(extra)
    return json.dumps(j)


def push(raw, payload: str, queue="default"):
    raw.lpush(f"queue:{queue}", payload)


def lock_v8(raw, dig: str, jid: str, ttl_ms: int | None = None):
    t = time.time()
    raw.hset(f"{dig}:LOCKED", jid, repr(t))  # the bare lock time (current_time, epoch float s)
    raw.zadd("uniquejobs:digests", {dig: t})
    raw.set(dig, jid)  # queue.lua
    raw.set(f"{dig}:INFO", json.dumps({"worker": "ChargeJob", "type": "until_executed"}))
    if ttl_ms:
        for k in (dig, f"{dig}:LOCKED", f"{dig}:INFO"):
            raw.pexpire(k, ttl_ms)


def lock_v9(raw, dig: str, jid: str, lock_type="until_executed", limit=1):
    t = time.time()
    meta = {"worker": "RefundJob", "queue": "default", "limit": limit, "timeout": 0, "ttl": None}
    meta.update(type=lock_type, lock_args=[7], time=t, at=None)
    raw.hset(f"{dig}:LOCKED", jid, json.dumps(meta))
    raw.zadd("uniquejobs:digests", {dig: t})


def open_ledger(url, layout=None):
    from idemview.ledger.redis_snapshot import open_redis_ledger

    return open_redis_ledger(url, layout=layout)


def test_sidekiq_unique_jobs_planted_and_look_alikes(redis_db):
    url, raw = redis_db
    d1, d2, d3, d4, d5, d6 = (digest(n) for n in ("charge-1", "refund-7", "sync", "mail-3", "report", "ping"))
    # 1. v8 until_executed: the first job holds the lock, a second one of the same digest got queued too
    push(raw, job("a1", lock="until_executed", dig=d1))
    push(raw, job("a2", lock="until_executed", dig=d1))
    lock_v8(raw, d1, "a1", ttl_ms=600_000)
    # 2. v9: two job ids in one LOCKED hash (limit 1)
    lock_v9(raw, d2, "b1")
    lock_v9(raw, d2, "b2")
    # look-alikes: while_executing allows queued twins; v8 until_executed released on failure (retry)
    push(raw, job("c1", "SyncJob", lock="while_executing", dig=d3), "low")
    push(raw, job("c2", "SyncJob", lock="while_executing", dig=d3), "low")
    failed = job("e1", "MailJob", lock="until_executed", dig=d4, retry_count=0, error_message="SMTP 421")
    raw.zadd("retry", {failed: time.time() + 30})
    push(raw, job("e2", "MailJob", lock="until_executed", dig=d4))
    lock_v8(raw, d4, "e2")
    raw.zadd("schedule", {job("f1", "ReportJob", lock="until_executing", dig=d5): time.time() + 3600})
    lock_v9(raw, d5, "f1", "until_executing")
    push(raw, job("g1", "PingJob", lock="until_expired", dig=d6))
    push(raw, job("g2", "PingJob", lock="until_expired", dig=d6))
    lock_v8(raw, d6, "g2", ttl_ms=5_000)
    # 3. v9 until_executed keeps a failed job's lock: r1 in retry still holds it, r2 got queued beside it
    d7 = digest("payout-9")
    raw.zadd("retry", {job("r1", "PayoutJob", lock="until_executed", dig=d7, retry_count=0): time.time() + 30})
    lock_v9(raw, d7, "r1")
    push(raw, job("r2", "PayoutJob", lock="until_executed", dig=d7))
    # a dead job (Sidekiq 7 float-seconds times) and a job retried 6 times (Sidekiq 8 ms times)
    raw.zadd(
        "dead",
        {
            job(
                "h1", "ExportJob", sidekiq7=True, retry_count=2, error_message="boom", failed_at=1767323045.0
            ): time.time()
        },
    )
    raw.zadd(
        "retry",
        {
            job(
                "i1",
                "WebhookJob",
                retry_count=6,
                error_message="HTTP 502",
                failed_at=1767225600000,
                retried_at=1767398400000,
            ): time.time() + 60
        },
    )
    ledger = open_ledger(url)
    assert ledger.layout.name == "sidekiq-unique-jobs", ledger.detection
    now = server_now(raw)
    fs = FindingEngine(ledger, now).run()
    got = {(f.kind.value, f.key) for f in fs}
    assert got == {
        ("duplicate_effect", d1),
        ("duplicate_effect", d2),
        ("duplicate_effect", d7),
        ("unresolved_failure", "h1"),
        ("retry_storm", "i1"),
    }
    dup = next(f for f in fs if f.key == d1)
    assert sorted({x["effect_ref"] for x in dup.evidence}) == ["a1", "a2"]
    # grouped by digest: a1's lock entry and both queued jobs; the look-alikes keyed by their job id
    assert sorted(r.raw_status for r in ledger.records(SCOPE, d1)) == ["locked", "queued", "queued"]
    assert len(ledger.records(SCOPE, "c1")) == 1 and len(ledger.records(SCOPE, "c2")) == 1
    assert [r.raw_status for r in ledger.records(SCOPE, "e1")] == ["retry"]
    assert len(ledger.records(SCOPE, d6)) == 1  # g2's lock entry only
    # Sidekiq 7 seconds and Sidekiq 8 milliseconds read as the same kind of time
    h1, i1 = ledger.records(SCOPE, "h1")[0], ledger.records(SCOPE, "i1")[0]
    for r in (h1, i1):
        assert r.created_at is not None and abs((now - r.created_at).total_seconds() - 60) < 30
    assert h1.status.value == "failed" and h1.attempt_count == 3
    # the last failure: failed_at (a first failure; Sidekiq 7 seconds) or retried_at (Sidekiq 8 ms)
    assert h1.updated_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert i1.updated_at == datetime(2026, 1, 3, 0, 0, tzinfo=UTC)
    # a v8 lock entry's TTL is its expiry; v9's time (JSON metadata) and v8's (bare value) both read
    lk = next(r for r in ledger.records(SCOPE, d1) if r.raw_status == "locked")
    assert lk.expires_at is not None and lk.expires_at > now and lk.locked_at is not None
    assert all(r.locked_at is not None for r in ledger.records(SCOPE, d2))
    assert {r.kind for r in ledger.records(SCOPE, d2)} == {"RefundJob"}  # v9 metadata's worker
    assert ledger.snapshot.pattern == "queue:*, schedule, retry, dead, uniquejobs:*:LOCKED"
    assert K.DUPLICATE_EFFECT not in FindingEngine(ledger, now).unsupported()
    assert ledger.snapshot.loaded == 20


def test_sidekiq_bad_members_are_counted_not_fatal(redis_db):
    url, raw = redis_db
    lock_v9(raw, digest("x"), "x1")
    raw.zadd("retry", {b"\xff{not json": 1.0, job("ok", retry_count=1): 2.0})
    raw.set("queue:broken", "a string, not a list")
    raw.lpush("queue:default", json.dumps({"class": "NoJid"}))  # no jid: not a record
    ledger = open_ledger(url, "sidekiq-unique-jobs")
    info = ledger.snapshot
    assert (info.loaded, info.undecodable, info.wrong_type, info.not_matching) == (2, 1, 1, 1)


def test_sidekiq_snapshot_in_a_worker_process_is_the_same(redis_db):
    from idemview.layouts.kv import load_kv_preset
    from idemview.ledger.redis_snapshot import connect_redis, snapshot

    url, raw = redis_db
    for i in range(30):
        push(raw, job(f"j{i}", lock="until_executed", dig=digest(f"d{i // 2}")))
        lock_v8(raw, digest(f"d{i // 2}"), f"j{i - i % 2}")
    kv = load_kv_preset("sidekiq-unique-jobs")
    got = []
    for worker in (False, True):
        c = connect_redis(url)
        engine, info = snapshot(c, kv, url=url, batch=7, worker=worker)
        c.connection_pool.disconnect()
        with engine.connect() as conn:
            from sqlalchemy import text

            rows = sorted(
                tuple(r) for r in conn.execute(text("SELECT idempotency_key, status, effect_ref FROM operations"))
            )
        engine.dispose()
        got.append((rows, info.loaded, info.joined))
    assert got[0] == got[1] and got[0][1] == 45 and got[0][2]["grouped"] == 45


def test_sidekiq_containers_with_non_utf8_names_are_read(redis_db):
    """A queue or LOCKED hash whose key name is not UTF-8 (a Redis key is bytes: ``queue:\\xff`` is a valid
    Sidekiq queue name for Redis) is read by its own bytes: its records are loaded, not silently lost
    because the name was decoded for display and sent back as different bytes."""
    url, raw = redis_db
    raw.lpush(b"queue:\xffbin", job("q1", lock="until_executed", dig=digest("bin")))
    raw.lpush(b"queue:caf\xe9", job("q2", lock="until_executed", dig=digest("bin")))  # latin-1 é
    raw.hset(b"uniquejobs:\xfe\xff:LOCKED", "q3", repr(time.time()))
    push(raw, job("q4"))
    ledger = open_ledger(url, "sidekiq-unique-jobs")
    info = ledger.snapshot
    assert (info.scanned, info.loaded, info.undecodable, info.wrong_type) == (4, 4, 0, 0)
    dig = digest("bin")
    assert sorted(r.effect_ref for r in ledger.records(SCOPE, dig)) == ["q1", "q2"]
    locked = ledger.records(SCOPE, "uniquejobs:\\xfe\\xff")
    assert [(r.raw_status, r.effect_ref) for r in locked] == [("locked", "q3")]
    assert K.DUPLICATE_EFFECT in {f.kind for f in FindingEngine(ledger, server_now(raw)).run()}


def test_sidekiq_containers_deleted_after_scan_count_as_gone(redis_db, monkeypatch):
    """A LOCKED hash released (DEL by unlock.lua) or a queue drained between SCAN and the read is gone
    while reading, as a key of a one-record-per-key layout is: counted in ``gone``, not silently nothing.
    The deletion is made right after SCAN returns the names (the real SCAN, wrapped)."""
    from idemview.ledger.redis_kv import members

    url, raw = redis_db
    d1, d2 = digest("gone-1"), digest("stays")
    lock_v8(raw, d1, "x1")
    lock_v9(raw, d2, "x2")
    push(raw, job("q1"), "drained")
    push(raw, job("q2"))
    real = members._containers

    def then_deleted(client, src, count, token):
        for names in real(client, src, count, token):
            for _key, name in names:
                if name in (f"{d1}:LOCKED", "queue:drained"):
                    raw.delete(name)
            yield names

    monkeypatch.setattr(members, "_containers", then_deleted)
    info = open_ledger(url, "sidekiq-unique-jobs").snapshot
    assert (info.loaded, info.gone, info.wrong_type, info.undecodable) == (2, 2, 0, 0)


def test_sidekiq_lock_limit_allows_that_many_holders(redis_db):
    """lua/lock.lua (v8 and v9) lets a job id in while HLEN <LOCKED> < limit (the worker's ``lock_limit``,
    1 by default; v9's metadata records it as ``limit``): a digest of limit 2 held by two job ids is what
    the user configured, not a duplicate; held by three, the lock let one through too many. The job JSON
    carries ``lock_limit`` too, so two queued jobs of a limit-2 digest are no duplicate either."""
    url, raw = redis_db
    ok, over, queued = digest("limit-2"), digest("limit-2-over"), digest("queued-limit-2")
    for j in ("l1", "l2"):
        lock_v9(raw, ok, j, limit=2)
    for j in ("m1", "m2", "m3"):
        lock_v9(raw, over, j, limit=2)
    push(raw, job("n1", lock="until_executed", dig=queued, lock_limit=2))
    push(raw, job("n2", lock="until_executed", dig=queued, lock_limit=2))
    ledger = open_ledger(url, "sidekiq-unique-jobs")
    got = {(f.kind.value, f.key) for f in FindingEngine(ledger, server_now(raw)).run()}
    assert got == {("duplicate_effect", over)}
    assert sorted(r.effect_ref for r in ledger.records(SCOPE, over)) == ["m1", "m2", "m3"]
