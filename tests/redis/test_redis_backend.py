"""Issue 25 item 1 on a real Redis: the Redis backend opened through the one opener declares its source
(backend, snapshot, the finding kinds a key-value store cannot show, with the reasons), as the findings
engine reports them; a saved Redis connection with a user name asks for its password; `idemview detect`
names the preset through the same backend."""

from __future__ import annotations

from idemview.backends import backend_named
from idemview.cli import main
from idemview.config import Connection
from idemview.domain.model import FindingKind
from idemview.findings.engine import FindingEngine
from idemview.services.cancel import CancelToken
from idemview.services.opener import OpenSpec, open_source, password_needed, spec_for_connection
from idemview.services.session import open_ledger
from tests.redis.conftest import put_celery, server_now


def test_the_redis_backend_declares_its_snapshot_and_what_it_cannot_check(redis_db, capsys):
    url, raw = redis_db
    t = server_now(raw)
    for i in range(3):
        put_celery(raw, f"t{i}", "FAILURE" if i == 0 else "SUCCESS", done=t)
    o = open_source(OpenSpec(url=url, name=""))
    try:
        src = o.ledger.source
        assert o.backend is backend_named("redis") and src.backend == "redis"
        assert src.snapshot is o.ledger.snapshot and src.snapshot.loaded == 3
        assert src.not_checkable == backend_named("redis").not_checkable(o.ledger)
        assert FindingKind.DUPLICATE_EFFECT in src.not_checkable and src.not_checkable[FindingKind.DUPLICATE_EFFECT]
        unsupported = FindingEngine(o.ledger, t).unsupported()
        assert {k: unsupported[k] for k in src.not_checkable} == src.not_checkable  # the scan says the same
    finally:
        o.close()
    g = open_ledger(OpenSpec(url=url, name="cache"), CancelToken())
    try:
        assert g.n_ops == 3 and "snapshot of 3 records" in g.detection and g.ledger.source.is_snapshot
    finally:
        g.close()
    assert main(["detect", url]) == 0
    assert capsys.readouterr().out.startswith("celery-redis")


def test_a_live_sql_ledger_declares_no_snapshot(tmp_path):
    db = tmp_path / "demo.db"
    assert main(["demo", str(db), "--operations", "50", "--seed", "1"]) == 0
    o = open_source(OpenSpec(url=str(db), name=""))
    try:
        assert (o.ledger.source.backend, o.ledger.source.snapshot, o.ledger.source.not_checkable) == ("sql", None, {})
        assert o.ledger.snapshot is None and not o.ledger.source.is_snapshot
    finally:
        o.close()


def test_a_saved_redis_connection_with_a_user_asks_for_its_password():
    c = Connection("cache", "redis", host="cache.internal", port=6379, database="0", user="reader")
    assert password_needed(spec_for_connection(c)) is True
    assert password_needed(spec_for_connection(c, "pw")) is False
    assert password_needed(spec_for_connection(Connection("anon", "redis", host="cache.internal"))) is False
    ddb = Connection("ddb", "dynamodb", database="idempotency", tls={"region": "eu-west-1"})
    assert password_needed(spec_for_connection(ddb)) is False  # the AWS chain: nothing to ask
