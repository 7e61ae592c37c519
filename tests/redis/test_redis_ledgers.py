"""Redis ledgers against the real server: presets in their projects' real value shapes, planted incidents
found exactly and clean keys clean, the TTL as expires_at, kinds a key-value store cannot show, masking,
export with the snapshot in the manifest, the read-only allowlist, and no write command ever sent."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime, timedelta

import pytest

from idemview.domain.model import FindingKind as K
from idemview.findings.engine import FindingEngine
from tests.redis.conftest import (
    TEST_DB,
    powertools_key,
    put_celery,
    put_generic,
    put_powertools,
    server_now,
)

UTC = UTC


def found(ledger, now) -> set[tuple[str, str, str]]:
    return {(f.kind.value, f.scope, f.key) for f in FindingEngine(ledger, now).run()}


def open_ledger(url, layout=None, **kw):
    from idemview.ledger.redis_snapshot import open_redis_ledger

    return open_redis_ledger(url, layout=layout, **kw)


# ------------------------------------------------------------------------------- the allowlist


@pytest.mark.parametrize(
    "cmd",
    [
        ("SET", "k", "v"),
        ("DEL", "k"),
        ("FLUSHDB",),
        ("FLUSHALL",),
        ("KEYS", "*"),
        ("EVAL", "return 1", "0"),
        ("CONFIG SET", "save", ""),
        ("ACL SETUSER", "x"),
        ("ACL", "DELUSER", "x"),
        ("HSET", "h", "f", "v"),
        ("EXPIRE", "k", "1"),
        ("CLIENT KILL", "ID", "1"),
        ("MULTI",),
        ("OBJECT", "FREQ", "k"),
        (b"set", b"k", b"v"),
    ],
)
def test_allowlist_refuses_everything_but_reads(cmd):
    from idemview.ledger.redis_snapshot import RedisWriteRefused, check_command

    with pytest.raises(RedisWriteRefused):
        check_command(cmd)


@pytest.mark.parametrize(
    "cmd",
    [
        ("GET", "k"),
        ("HGETALL", "h"),
        ("PTTL", "k"),
        ("SCAN", 0),
        ("TIME",),
        ("ACL WHOAMI",),
        ("ACL", "DRYRUN", "u", "SET", "k", "v"),
        (b"get", b"k"),
    ],
)
def test_allowlist_lets_reads_through(cmd):
    from idemview.ledger.redis_snapshot import check_command

    check_command(cmd)


def test_client_cannot_write_single_or_pipelined(redis_db):
    from idemview.ledger.redis_snapshot import RedisWriteRefused, connect_redis

    url, raw = redis_db
    c = connect_redis(url)
    with pytest.raises(RedisWriteRefused):
        c.set("idemview-should-not-exist", "x")
    p = c.pipeline(transaction=False)
    p.get("a")
    p.set("idemview-should-not-exist", "x")
    with pytest.raises(RedisWriteRefused):
        p.execute()
    with pytest.raises(RedisWriteRefused):
        c.keys("*")  # KEYS blocks the server: never sent either
    assert raw.exists("idemview-should-not-exist") == 0
    assert c.get("missing") is None  # the connection still works after a refusal
    c.connection_pool.disconnect()


# ------------------------------------------------------------------------------------- Celery


def _plant_celery(raw, extended: bool):
    t = server_now(raw) - timedelta(hours=1)
    ext = (lambda **kw: dict(name="shop.tasks.charge", **kw)) if extended else (lambda **kw: None)
    clean = []
    for i in range(20):
        put_celery(
            raw,
            f"ok-{i:02d}",
            "SUCCESS",
            done=t + timedelta(minutes=i),
            result={"charge": f"ch_{i}"},
            extended=ext(args=[1000 + i], kwargs={"order": f"o-{i}"}),
        )
        clean.append(f"ok-{i:02d}")
    # a failure nobody completed afterwards
    put_celery(
        raw,
        "failed-1",
        "FAILURE",
        done=t,
        result={"exc_type": "CardError", "exc_message": ["declined"]},
        traceback="Traceback (most recent call last):\n  ...\nCardError: declined",
        extended=ext(args=[7], kwargs={"order": "o-fail"}, retries=2),
    )
    # a pending task (no date_done) and a started one: no finding in either shape
    put_celery(raw, "pending-1", "PENDING", done=None, extended=ext(args=[8], kwargs={}))
    put_celery(raw, "started-1", "STARTED", done=None, extended=ext(args=[9], kwargs={}))
    if extended:
        # the same intent (task name + arguments) completed under two task ids within a day
        put_celery(raw, "dup-a", "SUCCESS", done=t, extended=ext(args=[55], kwargs={"order": "o-55"}))
        put_celery(
            raw, "dup-b", "SUCCESS", done=t + timedelta(minutes=3), extended=ext(args=[55], kwargs={"order": "o-55"})
        )
        # retried 6 times: 7 attempts > 5
        put_celery(raw, "storm-1", "SUCCESS", done=t, extended=ext(args=[66], kwargs={}, retries=6))
    # not a Celery result key at all
    raw.set("celery-taskset-meta-x", "{}")
    raw.set("unrelated:key", "1")
    return clean


def test_celery_redis_basic_detected_and_exact(redis_db):
    url, raw = redis_db
    _plant_celery(raw, extended=False)
    ledger = open_ledger(url)
    assert ledger.layout.name == "celery-redis"
    assert "detected celery-redis" in ledger.detection
    now = server_now(raw)
    assert found(ledger, now) == {("unresolved_failure", "", "failed-1")}
    n_ops, _ = ledger.counts()
    assert n_ops == 23
    fe = FindingEngine(ledger, now)
    nc = fe.unsupported()
    for kind in (
        K.EXPIRED_KEY,
        K.REPLAY_AFTER_EXPIRY,
        K.DUPLICATE_EFFECT,
        K.KEY_CONFLICT,
        K.DUPLICATE_INTENT,
        K.RETRY_STORM,
        K.STUCK_IN_PROGRESS,
    ):
        assert kind in nc, kind
    assert "expired Redis key is gone" in nc[K.EXPIRED_KEY]
    assert K.UNRESOLVED_FAILURE not in nc


def test_celery_redis_extended_detected_and_exact(redis_db):
    url, raw = redis_db
    _plant_celery(raw, extended=True)
    ledger = open_ledger(url)
    assert ledger.layout.name == "celery-redis-extended"
    now = server_now(raw)
    assert found(ledger, now) == {
        ("unresolved_failure", "", "failed-1"),
        ("duplicate_intent", "", "dup-b"),
        ("retry_storm", "", "storm-1"),
    }
    op = ledger.records("", "failed-1")[0]
    assert op.kind == "shop.tasks.charge" and op.raw_status == "FAILURE" and op.attempt_count == 3
    assert op.request.value == {"args": [7], "kwargs": {"order": "o-fail"}, "queue": "celery"}
    atts = ledger.attempts("", "failed-1", [op])
    assert [(a.number, a.outcome.value, a.worker) for a in atts] == [(3, "failed", "celery@host1")]


def test_ttl_is_expires_at_and_expired_kinds_are_not_reported(redis_db):
    url, raw = redis_db
    t = server_now(raw)
    put_celery(raw, "with-ttl", "SUCCESS", done=t, ttl_s=3600)
    put_celery(raw, "no-ttl", "SUCCESS", done=t, ttl_s=None)
    ledger = open_ledger(url, "celery-redis")
    info = ledger.snapshot
    assert info.loaded == 2 and info.without_ttl == 1 and info.pattern == "celery-task-meta-*"
    with_ttl = ledger.records("", "with-ttl")[0].expires_at
    # the key's own absolute expiry as Redis keeps it (PEXPIRETIME, Redis 7): not "read time + 3600 s",
    # which would depend on how long the put and the snapshot took on a loaded machine
    expiry_ms = raw.execute_command("PEXPIRETIME", "celery-task-meta-with-ttl")
    assert abs((with_ttl - datetime.fromtimestamp(expiry_ms / 1000, UTC)).total_seconds()) < 0.5
    assert ledger.records("", "no-ttl")[0].expires_at is None
    # two days later every TTL has run out: an expired Redis key is gone, so nothing is "expired" here
    later = t + timedelta(days=2)
    assert found(ledger, later) == set()


def test_key_that_vanishes_or_has_another_type_is_counted_not_loaded(redis_db):
    url, raw = redis_db
    t = server_now(raw)
    put_celery(raw, "good", "SUCCESS", done=t)
    raw.hset("celery-task-meta-a-hash", mapping={"status": "SUCCESS"})  # wrong type for GET
    raw.set("celery-task-meta-broken", "{not json")
    ledger = open_ledger(url, "celery-redis")
    info = ledger.snapshot
    assert (info.loaded, info.wrong_type, info.undecodable) == (1, 1, 1)


# --------------------------------------------------------------------------------- Powertools


def test_powertools_redis_detected_and_exact(redis_db):
    url, raw = redis_db
    now = server_now(raw)
    fn = "payments-prod.lambda_handler"
    stuck = powertools_key(fn, {"order": "o-1"})
    live = powertools_key(fn, {"order": "o-2"})
    put_powertools(
        raw,
        stuck,
        "INPROGRESS",
        expiration=now + timedelta(hours=1),
        in_progress_until=now - timedelta(minutes=5),
        validation="9f" * 16,
    )
    put_powertools(
        raw, live, "INPROGRESS", expiration=now + timedelta(hours=1), in_progress_until=now + timedelta(minutes=5)
    )
    done = []
    for i in range(10):
        k = powertools_key(fn, {"order": f"done-{i}"})
        put_powertools(raw, k, "COMPLETED", expiration=now + timedelta(hours=1), data={"statusCode": 200, "i": i})
        done.append(k)
    raw.set(f"{stuck}:lock", "True", ex=10)  # the orphan-record lock: not a record
    ledger = open_ledger(url)
    assert ledger.layout.name == "powertools-redis"
    assert ledger.snapshot.loaded == 12 and ledger.snapshot.not_matching == 1
    scope, key = stuck.split("#")
    assert found(ledger, now) == {("stuck_in_progress", scope, key)}
    rec = ledger.records(scope, key)[0]
    assert rec.fingerprint == "9f" * 16 and rec.status.value == "in_progress"
    assert abs((rec.lock_expires_at - (now - timedelta(minutes=5))).total_seconds()) < 1
    d = ledger.records(*done[0].split("#"))[0]
    assert d.response.value == {"statusCode": 200, "i": 0}
    nc = FindingEngine(ledger, now).unsupported()
    assert "failure deletes the key" in nc[K.UNRESOLVED_FAILURE]


# ------------------------------------------------------------------------------------ generic


def test_generic_hashes_exact(redis_db):
    url, raw = redis_db
    now = server_now(raw)
    t = now - timedelta(hours=2)
    for i in range(10):
        put_generic(
            raw,
            "acme",
            f"clean-{i}",
            status="succeeded",
            created_at=t,
            intent_ref=f"order-{i}",
            request_hash=f"h{i}",
            attempts=1,
            effect_ref=f"ch_{i}",
        )
    put_generic(raw, "acme", "k-dup-1", status="succeeded", created_at=t, intent_ref="order-99", attempts=1)
    put_generic(
        raw,
        "acme",
        "k-dup-2",
        status="succeeded",
        created_at=t + timedelta(minutes=2),
        intent_ref="order-99",
        attempts=1,
    )
    put_generic(
        raw,
        "globex",
        "k-stuck",
        status="running",
        created_at=t,
        locked_at=t,
        lock_expires_at=t + timedelta(minutes=5),
        attempts=1,
    )
    put_generic(
        raw, "globex", "k-fail", status="failed", created_at=t, intent_ref="inv-1", attempts=9, error="gateway timeout"
    )
    ledger = open_ledger(url)
    assert ledger.layout.name == "idem-generic"
    assert found(ledger, now) == {
        ("duplicate_intent", "acme", "k-dup-2"),
        ("stuck_in_progress", "globex", "k-stuck"),
        ("unresolved_failure", "globex", "k-fail"),
        ("retry_storm", "globex", "k-fail"),
    }


def test_layout_file_adapts_the_generic_pattern(redis_db, tmp_path):
    from idemview.layouts.kv import load_kv_preset

    url, raw = redis_db
    now = server_now(raw)
    raw.set("svc|tenant-1|abc", "done")
    raw.set("svc|tenant-1|def", "failed")
    f = tmp_path / "plain.toml"
    f.write_text("""[layout]
name = "svc-plain"
[kv]
match = "svc|*"
key_regex = '^svc\\|(?P<scope>[^|]+)\\|(?P<key>.+)$'
encoding = "plain"
[status]
map = { done = "completed", failed = "failed" }
""")
    ledger = open_ledger(url, str(f))
    assert ledger.counts()[0] == 2
    assert found(ledger, now) == {("unresolved_failure", "tenant-1", "def")}
    assert load_kv_preset("idem-generic").encoding == "hash"


def test_bad_layouts_are_one_line_errors(tmp_path):
    from idemview.layouts.kv import parse_kv_layout
    from idemview.layouts.layout import LayoutError

    for text, words in [
        ('[layout]\nname="x"\n', "[kv] is required"),
        ('[layout]\nname="x"\n[kv]\nmatch="a*"\nkey_regex="(?P<nokey>.*)"\n[status]\nfield="s"\n', "(?P<key>"),
        ('[layout]\nname="x"\n[kv]\nmatch="a*"\nencoding="xml"\n', "encoding"),
        ('[layout]\nname="x"\n[kv]\nmatch="a*"\n[status]\nfield="s"\nmap={a="done"}\n', "unknown statuses"),
    ]:
        with pytest.raises(LayoutError) as e:
            parse_kv_layout(text)
        assert words in str(e.value) and "\n" not in str(e.value)


# ----------------------------------------------------------------------------- snapshot control


def test_progress_and_cancel_between_batches(redis_db):
    from idemview.layouts.kv import load_kv_preset
    from idemview.ledger.redis_snapshot import connect_redis, snapshot
    from idemview.services.cancel import Cancelled, CancelToken

    url, raw = redis_db
    t = server_now(raw)
    p = raw.pipeline()
    for i in range(300):
        p.set(
            f"celery-task-meta-c{i}",
            json.dumps(
                {"status": "SUCCESS", "date_done": t.isoformat(), "task_id": f"c{i}", "result": None, "traceback": None}
            ),
        )
    p.execute()
    c = connect_redis(url)
    seen = []
    engine, info = snapshot(c, load_kv_preset("celery-redis"), batch=50, progress=lambda s, n: seen.append((s, n)))
    assert info.loaded == 300 and seen[-1][1] == 300 and len(seen) >= 3
    assert [s for s, _ in seen] == sorted(s for s, _ in seen)
    tok = CancelToken()

    def prog(s, n):
        if n >= 50:
            tok.cancel()

    with pytest.raises(Cancelled):
        snapshot(c, load_kv_preset("celery-redis"), batch=50, progress=prog, token=tok)
    c.connection_pool.disconnect()


def test_snapshot_database_is_read_only(redis_db):
    from sqlalchemy import text

    url, raw = redis_db
    put_celery(raw, "a", "SUCCESS", done=server_now(raw))
    ledger = open_ledger(url, "celery-redis")
    with ledger.engine.connect() as c:
        with pytest.raises(Exception, match="readonly|read-only|query_only|attempt to write"):
            c.execute(text("DELETE FROM operations"))
    assert ledger.counts()[0] == 1


# ------------------------------------------------------------------------------- masking, export


def test_masking_and_export_of_celery_kwargs(redis_db, tmp_path):
    from idemview.evidence.plan import export_evidence

    url, raw = redis_db
    t = server_now(raw)
    put_celery(
        raw,
        "pay-1",
        "FAILURE",
        done=t,
        traceback="CardError for jane.doe@example.com",
        extended={
            "name": "shop.charge",
            "args": ["4242424242424242"],
            "kwargs": {
                "card_number": "5555555555554444",
                "email": "jane.doe@example.com",
                "note": "call 4000056655665556 back",
            },
        },
    )
    ledger = open_ledger(url, "celery-redis-extended")
    out = tmp_path / "ev.csv"
    res = export_evidence(ledger, None, out, now=t)
    body = out.read_text("utf-8")
    for secret in ("4242424242424242", "5555555555554444", "4000056655665556", "jane.doe@example.com"):
        assert secret not in body, secret
    assert "[card#" in body and "[email#" in body and res.rows == 1
    man = json.loads((tmp_path / "ev.csv.manifest.json").read_text())
    assert man["ledger"]["dialect"] == "redis" and man["ledger"]["database"] == str(TEST_DB)
    snap = man["ledger"]["snapshot"]
    assert snap["pattern"] == "celery-task-meta-*" and snap["layout"] == "celery-redis-extended"
    assert snap["server_time"].endswith("Z") and snap["started_at"] and snap["loaded"] == 1
    assert man["layout"]["name"] == "celery-redis-extended"


# --------------------------------------------------------------------------- no write ever sent

READ_SEEN = {
    "GET",
    "MGET",
    "HGETALL",
    "PTTL",
    "PEXPIRETIME",  # a Celery layout's write times from TTLs (Redis >= 7), a read
    "SCAN",
    "TIME",
    "PING",
    "INFO",
    "SELECT",
    "ACL",
    "ECHO",
    "TYPE",
    "DBSIZE",
}


def test_no_write_command_is_ever_sent(redis_db, tmp_path):
    """MONITOR shows every command the server receives: while idemview snapshots, scans and exports,
    nothing but reads arrives (the planted data is written before MONITOR starts)."""
    import redis

    from idemview.cli import main

    url, raw = redis_db
    _plant_celery(raw, extended=True)
    put_generic(raw, "acme", "x", status="failed", created_at=server_now(raw))
    cmds, ready = [], threading.Event()
    mon_client = redis.Redis.from_url(url)

    def watch():
        with mon_client.monitor() as m:
            ready.set()
            while True:
                c = m.next_command()
                if "idemview-monitor-end" in c["command"]:
                    return
                cmds.append(c)

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    assert ready.wait(10)  # set once the server answered MONITOR's OK: every later command is seen
    assert main(["scan", url, "--format", "json"]) == 0
    assert main(["scan", url, "--layout", "idem-generic"]) == 0
    assert main(["export", url, "--out", str(tmp_path / "e.csv")]) == 0
    assert main(["detect", url]) == 0
    raw.echo("idemview-monitor-end")
    th.join(10)
    # MONITOR shows every client of the server, whatever its database: other processes on this machine
    # (other worktrees' tests, in other database numbers) write while this runs, which made this test
    # fail now and then. Kept: every command of each connection that worked in the test database (its
    # handshake, AUTH/SELECT/HELLO on db 0, included); the test database is this test's alone (redis_db's lock).
    ours = {(c["client_address"], c["client_port"]) for c in cmds if c["db"] == TEST_DB}
    cmds = [c for c in cmds if (c["client_address"], c["client_port"]) in ours]
    names = [c["command"].split(" ", 1)[0].upper() for c in cmds]
    assert "SCAN" in names and "MGET" in names and "HGETALL" in names and "PTTL" in names
    assert set(names) <= READ_SEEN, sorted(set(names) - READ_SEEN)
    acl = {c["command"].split(" ")[1].upper() for c in cmds if c["command"].upper().startswith("ACL")}
    assert acl <= {"WHOAMI", "DRYRUN"}
    mon_client.close()


# ----------------------------------------------------------------------- ACL user and write check


def test_readme_acl_user_is_read_only_and_default_user_is_warned(redis_db, monkeypatch, tmp_path, capsys):
    import redis

    from idemview.ledger.redis_snapshot import connect_redis, write_rights

    url, raw = redis_db
    put_celery(raw, "a", "SUCCESS", done=server_now(raw))
    # the default user of this test server may write: idemview says so
    c = connect_redis(url)
    assert "can write" in (write_rights(c) or "")
    c.connection_pool.disconnect()
    user, pw = f"idemview-test-{os.getpid()}", "t3st-pw-h15"
    # the README's ACL line, verbatim in meaning
    raw.execute_command(
        "ACL",
        "SETUSER",
        user,
        "on",
        f">{pw}",
        "resetkeys",
        "~*",
        "resetchannels",
        "-@all",
        "+@read",
        "+select",
        "+ping",
        "+time",
        "+info",
        "+acl|whoami",
    )
    try:
        ro = redis.Redis.from_url(url, username=user, password=pw)
        with pytest.raises(redis.exceptions.NoPermissionError):
            ro.set("x", "y")
        with pytest.raises(redis.exceptions.NoPermissionError):
            ro.delete("a")
        ro.close()
        # a saved connection: the password comes from the keyring (here: the credential store)
        monkeypatch.setenv("IDEMVIEW_CONFIG_DIR", str(tmp_path / "cfg"))
        from idemview.config import Connection, ConnectionStore, CredentialStore

        host = url.split("://", 1)[1].split("/", 1)[0]
        conn = Connection(
            name="celery-results",
            dialect="redis",
            host=host.rsplit(":", 1)[0],
            port=int(host.rsplit(":", 1)[1]),
            database=str(TEST_DB),
            user=user,
        )
        ConnectionStore().upsert(conn)
        monkeypatch.setattr(CredentialStore, "get", lambda self, cid: pw if cid == conn.id else None)
        from idemview.cli import main

        assert main(["scan", "celery-results", "--format", "json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["layout"] == "celery-redis" and out["operations"] == 1
        assert out["snapshot"]["write_warning"] is None or "could not verify" in out["snapshot"]["write_warning"]
        assert pw not in json.dumps(out)
    finally:
        raw.execute_command("ACL", "DELUSER", user)


# ------------------------------------------------------------------------------------------- CLI


def test_cli_scan_detect_and_errors(redis_db, capsys):
    from idemview.cli import main

    url, raw = redis_db
    _plant_celery(raw, extended=True)
    assert main(["detect", url]) == 0
    assert capsys.readouterr().out.startswith("celery-redis-extended\tconfidence 1.00")
    assert main(["scan", url, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["counts"] == {"duplicate_intent": 1, "unresolved_failure": 1, "retry_storm": 1}
    assert out["server_time"] and set(out["not_checkable"]) >= {"expired_key", "replay_after_expiry"}
    assert main(["scan", url]) == 0
    text = capsys.readouterr().out
    assert "(redis)" in text and "server   " in text and "expired Redis key is gone" in text
    # unreachable: exit 3, one line, no password
    assert main(["scan", "redis://:hunter2@127.0.0.1:1/0"]) == 3
    err = capsys.readouterr().err
    assert "hunter2" not in err and err.count("\n") == 1
    assert main(["scan", "redis://127.0.0.1:notaport/0"]) == 2
    assert main(["scan", url, "--layout", "no-such-kv"]) == 2
    raw.flushdb()
    raw.set("something:else", "1")
    assert main(["scan", url]) == 4
    assert "no key-value preset fits" in capsys.readouterr().err


def test_snapshot_engine_serves_many_worker_threads(redis_db):
    """The GUI's workers and search threads read one snapshot at once; each thread's connection must
    stay open while it reads (SQLAlchemy's default pool for a memory URL closed them past 5 threads)."""
    from concurrent.futures import ThreadPoolExecutor

    url, raw = redis_db
    t = server_now(raw)
    for i in range(200):
        put_celery(raw, f"t{i}", "SUCCESS" if i % 7 else "FAILURE", done=t - timedelta(minutes=i))
    ledger = open_ledger(url, "celery-redis")

    def work(i):
        fs = FindingEngine(ledger, t).run()
        return ledger.counts()[0], len(fs)

    with ThreadPoolExecutor(12) as ex:
        got = set(ex.map(work, range(48)))
    assert got == {(200, 29)}


def test_saved_connection_urls_keep_tls_db_and_hide_credentials():
    from idemview.config import Connection
    from idemview.ledger.redis_snapshot import is_redis_url, redis_url_from_sqlalchemy, safe_redis_url

    c = Connection(name="cache", dialect="rediss", host="cache.internal", port=6380, database="2", user="idemview")
    u = c.url("p@ss:w/rd")
    assert is_redis_url(u) and not is_redis_url(Connection(name="x", dialect="postgresql").url())
    s = redis_url_from_sqlalchemy(u)
    assert s == "rediss://idemview:p%40ss%3Aw%2Frd@cache.internal:6380/2"
    assert safe_redis_url(s) == "rediss://cache.internal:6380/2"
    pasted, pw = Connection.from_url("x", "redis://:secret@10.0.0.5:6379/7")
    assert (pasted.dialect, pasted.database, pw) == ("redis", "7", "secret")
    assert redis_url_from_sqlalchemy(pasted.url()) == "redis://10.0.0.5:6379/7"


def test_snapshot_tables_are_the_reference_tables():
    from idemview.ledger.redis_snapshot import snapshot_metadata
    from idemview.services.demo import reference_metadata

    mine, ref = snapshot_metadata(), reference_metadata()
    for t in ("operations", "attempts"):
        assert [c.name for c in mine.tables[t].columns] == [c.name for c in ref.tables[t].columns], t
    assert mine.tables["operations"].c.attempt_count.nullable


def test_prefetch_hands_over_errors_and_stops_when_left():
    import threading

    from idemview.ledger.redis_snapshot import _prefetched

    produced = []

    def failing():
        yield 1
        raise ConnectionError("the server went away")

    with pytest.raises(ConnectionError, match="went away"):
        list(_prefetched(failing(), None))

    def endless():
        i = 0
        while True:
            produced.append(i)
            yield i
            i += 1

    before = threading.active_count()
    gen = _prefetched(endless(), None)
    assert [next(gen) for _ in range(3)] == [0, 1, 2]
    gen.close()  # the consumer leaves: the reader thread ends, having read at most a few ahead
    assert threading.active_count() == before and len(produced) <= 3 + 3


def test_python_api_opens_a_redis_ledger(redis_db):
    import idemview.api as api

    url, raw = redis_db
    t = server_now(raw)
    put_celery(raw, "ok", "SUCCESS", done=t, extended={"name": "n", "args": [], "kwargs": {"email": "x@example.com"}})
    put_celery(raw, "bad", "FAILURE", done=t, extended={"name": "n", "args": [1], "kwargs": {}})
    lf = api.open(url)
    ops = lf.operations()
    assert set(ops["idempotency_key"]) == {"ok", "bad"}
    assert not ops.astype(str).apply(lambda col: col.str.contains("x@example.com")).any().any()
    fs = lf.findings(now=t)
    # the kwargs keep an e-mail address in plain text: the ledger audit says so, without the address
    assert list(fs["kind"]) == ["unresolved_failure", "secret_at_rest"]
    assert not fs.astype(str).apply(lambda col: col.str.contains("x@example.com")).any().any()
    from idemview.errors import LayoutMismatch

    raw.flushdb()
    raw.set("other", "1")
    with pytest.raises(LayoutMismatch, match="no key-value preset fits"):
        api.open(url)


def test_a_key_scan_returns_twice_is_loaded_once(redis_db, monkeypatch):
    """SCAN may return a key twice (a rehash during the scan): the first read is kept, the twin and its
    attempt dropped, the count corrected, and the unique (scope, key) index is there afterwards."""
    from sqlalchemy import text

    from idemview.layouts.kv import load_kv_preset
    from idemview.ledger.redis_kv import snapshot as rs
    from idemview.ledger.redis_snapshot import connect_redis

    url, raw = redis_db
    now = server_now(raw)
    for i in range(5):
        put_celery(raw, f"t{i}", "SUCCESS", done=now, extended={"name": "shop.charge", "args": [i]})
    scan = rs._scan_batches

    def twice(client, pattern, count, token=None):
        batches = list(scan(client, pattern, count, token))
        yield from batches
        yield from batches  # every key again, as a later batch
        yield [b"celery-task-meta-t0", b"celery-task-meta-t0"]  # and twice within one batch

    monkeypatch.setattr(rs, "_scan_batches", twice)
    c = connect_redis(url)
    engine, info = rs.snapshot(c, load_kv_preset("celery-redis-extended"))
    c.connection_pool.disconnect()
    assert info.scanned == 12 and info.loaded == 5
    with engine.connect() as conn:
        keys = [r[0] for r in conn.execute(text("SELECT idempotency_key FROM operations ORDER BY id"))]
        assert keys == sorted(keys, key=keys.index) and sorted(keys) == [f"t{i}" for i in range(5)]
        assert conn.execute(text("SELECT count(*) FROM attempts")).scalar() == 5
        assert conn.execute(text("SELECT max(id) FROM operations")).scalar() == 5  # the first reads kept
        idx = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'index'"))}
        assert "ux_operations_scope_key" in idx
    engine.dispose()


def _rows_of(engine):
    from sqlalchemy import text

    with engine.connect() as c:
        ops = [
            tuple(r)
            for r in c.execute(
                text(
                    "SELECT id, scope, idempotency_key, kind, status, request_hash, intent_ref, effect_ref, "
                    "attempt_count, created_at, updated_at, completed_at, locked_at, lock_expires_at, "
                    "expires_at IS NULL, request_body, response_body, error FROM operations ORDER BY id"
                )
            )
        ]
        atts = [tuple(r) for r in c.execute(text("SELECT * FROM attempts ORDER BY id"))]
    return ops, atts


def test_worker_process_loads_the_same_snapshot(redis_db):
    """Read, decoded and mapped in a second process or in this one: the same rows and counts."""
    from idemview.layouts.kv import load_kv_preset
    from idemview.ledger.redis_snapshot import connect_redis, snapshot

    url, raw = redis_db
    now = server_now(raw)
    for i in range(120):
        status = ("SUCCESS", "FAILURE", "STARTED", "RETRY")[i % 4]
        put_celery(
            raw,
            f"w{i}",
            status,
            done=now - timedelta(minutes=i) if i % 7 else None,
            result={"charge": f"ch_{i}"} if status == "SUCCESS" else None,
            traceback="Traceback\nCardError" if status == "FAILURE" else None,
            ttl_s=None if i % 11 == 0 else 3600,
            extended={"name": "shop.charge", "args": [i // 2], "retries": i % 9, "worker": f"celery@w{i % 3}"},
        )
    raw.set("celery-task-meta-broken", b"\xff{not json")
    raw.hset("celery-task-meta-hash", mapping={"status": "SUCCESS"})
    kv = load_kv_preset("celery-redis-extended")
    got = {}
    for worker in (False, True):
        c = connect_redis(url)
        seen: list = []
        engine, info = snapshot(
            c, kv, url=url, batch=25, worker=worker, progress=lambda s, n, seen=seen: seen.append((s, n))
        )
        c.connection_pool.disconnect()
        counts = {
            k: getattr(info, k) for k in ("scanned", "loaded", "gone", "wrong_type", "undecodable", "without_ttl")
        }
        got[worker] = (_rows_of(engine), counts)
        assert seen and seen[-1] == (info.scanned, info.loaded)
        engine.dispose()
    assert got[True][1] == {
        "scanned": 122,
        "loaded": 120,
        "gone": 0,
        "wrong_type": 1,
        "undecodable": 1,
        "without_ttl": 11,
    }
    # SCAN's order is the server's: compare the rows by key, the ids aside
    by_key = {w: sorted(r[1:] for r in rows[0][0]) for w, rows in got.items()}
    assert by_key[True] == by_key[False] and len(by_key[True]) == 120
    att = {w: sorted(r[1:] for r in rows[0][1]) for w, rows in got.items()}
    assert att[True] == att[False] and len(att[True]) == 120
    assert got[True][1] == got[False][1]


def test_worker_process_errors_and_cancel_reach_the_caller(redis_db, monkeypatch):
    import redis

    from idemview.layouts.kv import load_kv_preset
    from idemview.ledger.redis_kv import snapshot as rs
    from idemview.ledger.redis_snapshot import connect_redis
    from idemview.services.cancel import Cancelled, CancelToken

    url, raw = redis_db
    now = server_now(raw)
    for i in range(200):
        put_celery(raw, f"c{i}", "SUCCESS", done=now)
    kv = load_kv_preset("celery-redis")
    c = connect_redis(url)
    tok = CancelToken()

    def prog(s, n):
        if n >= 50:
            tok.cancel()

    with pytest.raises(Cancelled):
        rs.snapshot(c, kv, url=url, batch=50, progress=prog, token=tok, worker=True)
    read = rs._read_batches

    def fails_midway(*a, **kw):
        it = read(*a, **kw)
        yield next(it)
        raise redis.exceptions.ConnectionError("connection lost while reading")

    monkeypatch.setattr(rs, "_read_batches", fails_midway)
    with pytest.raises(redis.exceptions.ConnectionError, match="connection lost"):
        rs.snapshot(c, kv, url=url, batch=50, worker=True)
    with pytest.raises(redis.exceptions.ConnectionError, match="connection lost"):
        rs.snapshot(c, kv, url=url, batch=50, worker=False)
    c.connection_pool.disconnect()


def test_key_name_that_is_not_utf8_is_shown_escaped(redis_db):
    """A key name with bytes that are not UTF-8 reads as the SQL ledgers show such keys (``k-\\xff``),
    not with replacement characters that lose the bytes (found by a tester)."""
    url, raw = redis_db
    now = server_now(raw)
    raw.hset(
        b"idem:acme:k-\xff\xfe",
        mapping={"status": "failed", "created_at": (now - timedelta(hours=1)).isoformat(), "attempts": "1"},
    )
    raw.expire(b"idem:acme:k-\xff\xfe", 3600)
    ledger = open_ledger(url, layout="idem-generic")
    assert ("unresolved_failure", "acme", "k-\\xff\\xfe") in found(ledger, now)
