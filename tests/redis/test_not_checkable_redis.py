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
