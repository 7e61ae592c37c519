"""Custom key prefixes found by detection (issue 26): BullMQ's ``prefix`` option (default ``bull``,
taskforcesh/bullmq src/classes/queue-keys.ts) and sidekiq-unique-jobs' ``lock_prefix`` (default
``uniquejobs``, lib/sidekiq_unique_jobs/config.rb, lock_digest.rb). The preset is read under the prefix
the keys use, without the user copying the layout; the same incidents and look-alikes are found as under
the default prefix. BullMQ writes its keyspace itself (tests/redis/bullmq_prefix_plant.js)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from idemview.domain.model import FindingKind as K
from idemview.findings.engine import FindingEngine
from idemview.layouts.kv import load_kv_preset
from idemview.layouts.layout import LayoutError
from idemview.ledger.redis_kv.detect import detect_kv, with_prefix
from tests.redis.conftest import server_now
from tests.redis.test_bullmq import bullmq_modules  # noqa: F401 - the session fixture
from tests.redis.test_sidekiq_unique_jobs import job, lock_v9, push

PLANT = Path(__file__).with_name("bullmq_prefix_plant.js")


def _open(url, layout=None):
    from idemview.ledger.redis_snapshot import open_redis_ledger

    return open_redis_ledger(url, layout=layout)


def _found(ledger, now) -> set[tuple[str, str, str]]:
    return {(f.kind.value, f.scope, f.key) for f in FindingEngine(ledger, now).run()}


@pytest.mark.parametrize("prefix", ["myapp", "{acme}:jobs"])
def test_bullmq_custom_prefix_is_detected_and_read(redis_db, bullmq_modules, prefix):  # noqa: F811
    """A Redis Cluster hash-tag prefix ("{acme}", with a ':' inside) is escaped in every glob, regular
    expression and key template it goes into."""
    url, raw = redis_db
    env = dict(os.environ, NODE_PATH=str(bullmq_modules / "node_modules"))
    r = subprocess.run(
        ["node", str(PLANT), url, prefix], cwd=bullmq_modules, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert not raw.keys("bull:*") and raw.exists(f"{prefix}:payments:meta")
    ledger = _open(url)
    assert ledger.layout.name == "bullmq", ledger.detection
    assert f"prefix {prefix!r}" in ledger.source.store_layout.origin
    assert ledger.source.store_layout.match == prefix + ":*"
    now = server_now(raw)
    assert _found(ledger, now) == {
        ("duplicate_effect", "payments", "charge-42"),
        ("stuck_in_progress", "payments", "ship-9"),
    }
    # the held lock and the dedup window are read under the prefix too
    live = ledger.records("payments", "ship-10")[0]
    assert live.raw_status == "active" and live.lock_expires_at is not None and live.lock_expires_at > now
    assert ledger.records("payments", "charge-43")[0].expires_at is not None
    assert ledger.snapshot.joined["windows"] == 1 and ledger.snapshot.joined["locks_missing"] == 1
    assert K.DUPLICATE_EFFECT not in FindingEngine(ledger, now).unsupported()


def test_bullmq_default_prefix_is_not_a_variant(redis_db):
    """Keys under the default prefix give no variant; keys that only look like a queue's (an app's own
    ``session:<user>:id``) give a variant whose values do not fit: nothing is detected from them."""
    url, raw = redis_db
    raw.hset("session:u1:id", mapping={"user": "u1"})
    raw.set("session:u2:meta", "x")
    assert detect_kv(raw) == []
    raw.hset("bull:q:1", mapping={"name": "n", "data": "{}", "opts": "{}", "timestamp": "1"})
    raw.set("bull:q:id", "1")
    got = detect_kv(raw)
    assert [m.layout.name for m in got] == ["bullmq"] and got[0].layout.origin == "preset bullmq"


def _digest(prefix: str, name: str) -> str:
    return f"{prefix}:" + hashlib.md5(name.encode()).hexdigest()  # noqa: S324 - the gem's legacy digest


def test_sidekiq_unique_jobs_custom_lock_prefix(redis_db):
    """lock_prefix "acme_locks": digests are acme_locks:<hex>, their LOCKED hashes acme_locks:<hex>:LOCKED;
    the digests sorted set keeps its fixed name uniquejobs:digests (constants.rb DIGESTS). Planted: a v9
    LOCKED hash holding two job ids; look-alike: one job per digest."""
    url, raw = redis_db
    d1, d2 = _digest("acme_locks", "refund-7"), _digest("acme_locks", "mail-1")
    lock_v9(raw, d1, "b1")
    lock_v9(raw, d1, "b2")
    push(raw, job("m1", "MailJob", lock="until_executed", dig=d2, lock_prefix="acme_locks"))
    lock_v9(raw, d2, "m1")
    assert raw.exists("uniquejobs:digests")
    ledger = _open(url)
    assert ledger.layout.name == "sidekiq-unique-jobs", ledger.detection
    assert "prefix 'acme_locks'" in ledger.source.store_layout.origin
    now = server_now(raw)
    assert _found(ledger, now) == {("duplicate_effect", "sidekiq", d1)}
    assert {r.raw_status for r in ledger.records("sidekiq", d2)} == {"queued", "locked"}
    # the default-prefix preset reads none of these locks: the variant is the one chosen
    default = _open(url, "sidekiq-unique-jobs")
    assert _found(default, now) == set()


def test_with_prefix_rejects_a_layout_without_a_prefix_rule():
    with pytest.raises(LayoutError, match="names no \\[detect\\] prefix"):
        with_prefix(load_kv_preset("celery-redis"), "x")


def test_with_prefix_escapes_each_place_by_its_reading():
    kv = with_prefix(load_kv_preset("bullmq"), "a*{b}.c")
    assert kv.match == "a[*]{b}.c:*"
    assert kv.split_key("a*{b}.c:q:7") == ("q", "7", None)
    assert kv.split_key("aX{b}Xc:q:7") is None  # '.' and '*' are literal in the regular expression
    assert kv.lock_key.format(scope="q", key="7") == "a*{b}.c:q:7:lock"
    assert kv.states_key.format(scope="q", state="wait") == "a*{b}.c:q:wait"
    assert kv.window_key.format(scope="q", group="g") == "a*{b}.c:q:de:g"
    assert kv.events_key.format(scope="q") == "a*{b}.c:q:events"
    assert kv.name == "bullmq" and "prefix 'a*{b}.c'" in kv.origin and kv.source in kv.text
    sk = with_prefix(load_kv_preset("sidekiq-unique-jobs"), "x.y")
    locked = [s for s in sk.members if s.state == "locked"][0]
    assert locked.match == "x.y:*:LOCKED" and locked.key_regex.match("x.y:ab:LOCKED")
    assert not locked.key_regex.match("xzy:ab:LOCKED") and sk.detect_keys == ("x.y:*",)


def _plant_acme_locks(raw) -> tuple[str, str]:
    """sidekiq-unique-jobs under lock_prefix "acme_locks": a digest locked by two job ids (planted), one
    locked by one (look-alike). Returns the two digests."""
    d1, d2 = _digest("acme_locks", "refund-7"), _digest("acme_locks", "mail-1")
    lock_v9(raw, d1, "b1")
    lock_v9(raw, d1, "b2")
    lock_v9(raw, d2, "m1")
    return d1, d2


def test_detected_prefix_travels_with_the_name_detection_gives(redis_db, capsys):
    """The name `idemview detect` (and the backend's detection) gives for a preset found under another
    prefix carries the prefix (``NAME@PREFIX``), and that name opens the preset under the prefix: the
    CLI's --layout, ``idemview.open(url, layout=NAME)`` and Test, not the default prefix again."""
    import idemview
    from idemview.backends.redis import BACKEND
    from idemview.cli import main
    from idemview.ledger.redis_snapshot import test_redis

    url, raw = redis_db
    d1, _d2 = _plant_acme_locks(raw)
    best = BACKEND.detect(url, None)[0]
    assert best.name == "sidekiq-unique-jobs@acme_locks"
    assert main(["detect", url]) == 0
    assert capsys.readouterr().out.startswith("sidekiq-unique-jobs@acme_locks\t")
    now = server_now(raw)
    ledger = _open(url, best.name)
    assert "prefix 'acme_locks'" in ledger.source.store_layout.origin and ledger.detection.startswith("layout sidekiq")
    assert _found(ledger, now) == {("duplicate_effect", "sidekiq", d1)}
    with idemview.open(url, layout=best.name, masked=False) as led:
        assert {(r.kind, r.idempotency_key) for r in led.findings(now=now).itertuples()} == {("duplicate_effect", d1)}
    # Test with the plain name chosen says which name reads these keys
    said = test_redis(url, "sidekiq-unique-jobs")
    assert "sidekiq-unique-jobs@acme_locks" in said, said
    assert "sidekiq-unique-jobs@acme_locks" in test_redis(url, best.name)
    # the default preset by its plain name still reads the default prefix only
    assert _found(_open(url, "sidekiq-unique-jobs"), now) == set()


def test_prefixed_name_of_a_saved_connection_opens_under_its_prefix(redis_db, tmp_path, monkeypatch):
    """A saved connection keeping ``NAME@PREFIX`` (the GUI's connection dialog, ``idemview open NAME``,
    ``idemview.open(NAME)``) opens the preset under that prefix; a malformed one is refused in words."""
    import idemview
    from idemview.config import Connection, ConnectionStore
    from idemview.errors import InvalidLayout, LayoutMismatch
    from idemview.services.opener import open_source, spec_for_connection

    monkeypatch.setenv("IDEMVIEW_CONFIG_DIR", str(tmp_path / "cfg"))
    url, raw = redis_db
    d1, _d2 = _plant_acme_locks(raw)
    host, _, rest = url.split("://", 1)[1].partition("/")
    conn = Connection(
        name="locks",
        dialect="redis",
        host=host.rsplit(":", 1)[0],
        port=int(host.rsplit(":", 1)[1]),
        database=rest,
        layout="sidekiq-unique-jobs@acme_locks",
    )
    ConnectionStore().upsert(conn)
    opened = open_source(spec_for_connection(conn))
    now = server_now(raw)
    assert opened.ledger.layout.name == "sidekiq-unique-jobs"
    assert _found(opened.ledger, now) == {("duplicate_effect", "sidekiq", d1)}
    with idemview.open("locks", masked=False) as led:
        assert {(r.kind, r.idempotency_key) for r in led.findings(now=now).itertuples()} == {("duplicate_effect", d1)}
    for bad, says in (("sidekiq-unique-jobs@", "empty"), ("celery-redis@x", "names no \\[detect\\] prefix")):
        with pytest.raises((InvalidLayout, LayoutMismatch, LayoutError), match=says):
            idemview.open(url, layout=bad)


def test_session_ids_beside_sidekiq_are_no_lock_prefix(redis_db):
    """A Redis a Rails app shares with Sidekiq holds session keys ``session:<32 hex digits>``
    (SecureRandom.hex(16) ids), shaped like a legacy digest. They were taken for a lock_prefix "session"
    and, being more numerous than the real digests, won detection: the snapshot read ``session:*:LOCKED``
    and missed the duplicate under ``uniquejobs``. A prefix is one the gem's own lock keys use
    (``<digest>:LOCKED``/``QUEUED``/``PRIMED``/``INFO``: lua/lock.lua KEYS), never a bare digest-shaped key."""
    url, raw = redis_db
    d1 = _digest("uniquejobs", "refund-7")
    lock_v9(raw, d1, "b1")
    lock_v9(raw, d1, "b2")
    push(raw, job("m1", "MailJob"))
    for i in range(5):
        raw.set("session:" + hashlib.md5(str(i).encode()).hexdigest(), "{}")  # noqa: S324 - a session id's shape
    ledger = _open(url)
    assert ledger.detection.startswith("detected sidekiq-unique-jobs (100%)"), ledger.detection
    assert _found(ledger, server_now(raw)) == {("duplicate_effect", "sidekiq", d1)}


def test_two_bullmq_prefixes_in_one_database_are_both_named(redis_db, capsys):
    """Two apps' BullMQ queues under "alpha" and "beta" in one database: detection reads one prefix (the
    one more sampled keys use); the snapshot's notes and the detection name the other and how to read
    it, rather than a scan that silently leaves half the jobs out."""
    from idemview.cli import main

    url, raw = redis_db
    for p, ids in (("alpha", ["1"]), ("beta", ["1", "2"])):
        for i in ids:
            raw.hset(f"{p}:q:{i}", mapping={"name": "n", "data": "{}", "opts": "{}", "timestamp": "1"})
        raw.set(f"{p}:q:id", str(len(ids)))
        raw.hset(f"{p}:q:meta", mapping={"opts.maxLenEvents": "10000"})
    ledger = _open(url)
    assert ledger.detection.startswith("detected bullmq@beta (100%)"), ledger.detection
    said = "bullmq@alpha, under another key prefix, is not read: open it with --layout bullmq@alpha"
    assert said in ledger.detection and said in ledger.snapshot.notes
    assert main(["scan", url]) == 0
    assert said in capsys.readouterr().out
    # named, the layout reads its own prefix without a word about the other
    assert _open(url, "bullmq@alpha").snapshot.notes == []


@pytest.mark.parametrize("prefix", ["jobs[prod]", "c:\\jobs", "a*b?c"])
def test_prefix_with_glob_brackets_or_a_backslash_is_read(redis_db, prefix):
    """Redis' glob (util.c stringmatchlen) ends a class at its first ']' and lets '\\' escape inside one:
    '[]]' and '[\\]' match nothing there (fnmatch reads them as the literal), so a prefix holding ']' or
    '\\' was detected from the sample and then read as an empty keyspace by SCAN MATCH."""
    url, raw = redis_db
    for i in ("1", "2"):
        raw.hset(f"{prefix}:q:{i}", mapping={"name": "n", "data": "{}", "opts": "{}", "timestamp": "1"})
    raw.zadd(f"{prefix}:q:completed", {"1": 1, "2": 2})
    raw.set(f"{prefix}:q:id", "2")
    ledger = _open(url)
    assert ledger.detection.startswith(f"detected bullmq@{prefix} "), ledger.detection
    assert ledger.snapshot.loaded == 2 and ledger.snapshot.scanned == 4
    assert {r.raw_status for r in ledger.records("q", "1") + ledger.records("q", "2")} == {"completed"}
