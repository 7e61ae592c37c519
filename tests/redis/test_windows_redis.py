"""Dedup windows on a Redis ledger (issue #22): the key's TTL is the window."""

from __future__ import annotations

from datetime import timedelta

from idemview.findings.windows import measure_windows
from tests.redis.conftest import put_generic, server_now


def test_ttl_is_the_window_and_one_record_per_key_shows_no_retry(redis_db):
    from idemview.ledger.redis_snapshot import open_redis_ledger

    url, raw = redis_db
    t = server_now(raw).replace(microsecond=0)
    put_generic(raw, "acme", "k-1", ttl_s=3600, status="succeeded", kind="payments.capture", created_at=t, attempts=2)
    put_generic(raw, "acme", "k-2", ttl_s=1800, status="succeeded", kind="payments.capture", created_at=t, attempts=1)
    put_generic(raw, "acme", "k-3", ttl_s=None, status="succeeded", kind="email.send", created_at=t, attempts=1)
    ledger = open_redis_ledger(url, layout="idem-generic")
    rep = measure_windows(ledger, t + timedelta(minutes=1))
    by = {g.kind: g for g in rep.groups}
    cap = by["payments.capture"]
    assert cap.window_source == "ttl" and cap.operations == 2
    # the window is each key's absolute expiry (PEXPIRETIME) minus its creation: 1800 s and 3600 s
    longest = raw.execute_command("PEXPIRETIME", "idem:acme:k-1") / 1000 - t.timestamp()
    shortest = raw.execute_command("PEXPIRETIME", "idem:acme:k-2") / 1000 - t.timestamp()
    assert abs(cap.window_s - longest) < 0.5 and abs(cap.window_min_s - shortest) < 0.5
    assert round(cap.window_min_s / 60) == 30 and round(cap.window_s / 60) == 60
    assert cap.sentence.startswith("payments.capture: window 30 min to 1 h;")
    # a key holds one record and no attempt times: nothing to measure a retry span from
    assert cap.verdict == "unknown" and cap.max is None and cap.suggested_window_s is None
    assert cap.reason.startswith("no attempt times")
    em = by["email.send"]  # no TTL: the key is kept until deleted, no window
    assert em.window_s is None and em.verdict == "unknown"
