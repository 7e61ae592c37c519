"""Issue 25 round 2, the one "not checkable" list on a real Redis: the kinds the Redis backend declares it
cannot check (a key-value store: expired keys are gone, a key holds one value) are in
``ledger.source.not_checkable`` with the backend's reasons, the findings engine never queries them, and
``scan --format json`` gives those reasons; a kind it can check still runs."""

from __future__ import annotations

from idemview.backends import backend_named
from idemview.domain.model import FindingKind
from idemview.layouts.kv import NOT_CHECKABLE
from idemview.services.opener import OpenSpec, open_source
from tests.not_checkable_check import forbid, scan_json
from tests.redis.conftest import put_celery, server_now

K = FindingKind
DECLARED = [K.EXPIRED_KEY, K.REPLAY_AFTER_EXPIRY, K.DUPLICATE_EFFECT, K.KEY_CONFLICT]


def test_redis_declares_its_kinds_they_never_run_and_the_scan_says_why(redis_db, monkeypatch, capsys):
    url, raw = redis_db
    t = server_now(raw)
    put_celery(raw, "ok-1", "SUCCESS", done=t)
    put_celery(raw, "bad-1", "FAILURE", done=t)
    o = open_source(OpenSpec(url=url, name="", layout="celery-redis"))
    try:
        src = o.ledger.source
        assert (src.backend, src.dialect, src.store_layout.name) == ("redis", "redis", "celery-redis")
        assert dict(src.not_checkable) == backend_named("redis").not_checkable(o.ledger)
        assert {k: src.not_checkable[k] for k in DECLARED} == {k: NOT_CHECKABLE[k] for k in DECLARED}
        assert src.identity is not None and src.identity["dialect"] == "redis"
    finally:
        o.close()
    calls = forbid(monkeypatch, DECLARED)
    out = scan_json(capsys, url, "--layout", "celery-redis")
    assert calls == []
    for k in DECLARED:
        assert out["not_checkable"][k.value] == NOT_CHECKABLE[k]
        assert k.value not in out["counts"]
    assert out["counts"] == {"unresolved_failure": 1}  # a kind Redis can check ran


def test_a_finding_filter_on_a_kind_redis_cannot_show_selects_nothing(redis_db, monkeypatch, tmp_path, capsys):
    """An instant after every TTL: the snapshot's expires_at would make each record look expired, but Redis
    deletes a key at its TTL, so expired_key is not checkable (the scan says so) and ``export --finding
    expired_key`` selects no record instead of every one; a checkable kind still filters."""
    import csv

    from idemview.cli import main

    url, raw = redis_db
    t = server_now(raw)
    put_celery(raw, "ok-1", "SUCCESS", done=t, ttl_s=3600)
    put_celery(raw, "bad-1", "FAILURE", done=t, ttl_s=3600)
    later = "2099-01-01T00:00:00Z"
    assert "expired_key" in scan_json(capsys, url, "--layout", "celery-redis", "--now", later)["not_checkable"]

    def exported(kind: str) -> list[str]:
        out = tmp_path / f"{kind}.csv"
        args = ["export", url, "--layout", "celery-redis", "--now", later, "--finding", kind, "--out", str(out)]
        assert main(args) == 0, capsys.readouterr().err
        with open(out, newline="", encoding="utf-8") as f:
            return [r["idempotency_key"] for r in csv.DictReader(f)]

    calls = forbid(monkeypatch, [K.EXPIRED_KEY])
    assert exported("expired_key") == []
    assert calls == []
    assert exported("unresolved_failure") == ["bad-1"]
