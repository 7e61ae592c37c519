"""Issue 20 §4: Test runs every command Connect's snapshot runs. A real Redis ACL user with ``+@read``
(plus PING and SELECT, which connecting to database 13 needs, and nothing else): ``TIME`` is not in
``@read``, so Test says the local clock is used, and Connect reads the snapshot with it instead of
failing with ``NoPermissionError … 'time'``. A user without ``GET`` is told which command to grant."""

from __future__ import annotations

import os
import secrets
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from tests.redis.conftest import put_celery


def _user(admin, rules: list[str]):
    name, pw = f"idv_read_{os.getpid()}_{secrets.token_hex(3)}", secrets.token_hex(10)
    admin.execute_command("ACL", "SETUSER", name, "reset", "on", f">{pw}", "~*", *rules)
    return name, pw


def _url(base: str, user: str, pw: str) -> str:
    p = urlsplit(base)
    return f"{p.scheme}://{user}:{pw}@{p.hostname}:{p.port or 6379}{p.path}"


def test_read_only_acl_user_tests_and_connects_with_the_local_clock(redis_db):
    from idemview.ledger.redis_snapshot import LOCAL_CLOCK_NOTE, open_redis_ledger, test_redis

    base, admin = redis_db
    now = datetime.now(UTC).replace(microsecond=0)
    for i in range(5):
        put_celery(admin, f"t-{i}", "SUCCESS", done=now - timedelta(minutes=i), ttl_s=3600)
    user, pw = _user(admin, ["+@read", "+ping", "+select"])
    try:
        url = _url(base, user, pw)
        said = test_redis(url)
        assert said.startswith("✓ reachable") and LOCAL_CLOCK_NOTE in said, said
        assert "+time" in said
        before = datetime.now(UTC)
        ledger = open_redis_ledger(url)  # what Connect does: it failed on TIME
        try:
            info = ledger.snapshot
            assert info.loaded == 5 and info.clock == "local" and info.clock_skew_s is None
            assert before - timedelta(seconds=1) <= info.server_time <= datetime.now(UTC) + timedelta(seconds=1)
            assert ledger.counts()[0] == 5
            # expiry = local read time + PTTL: within the hour the keys were written with
            ops = ledger.page(limit=10).rows
            assert len(ops) == 5
            for o in ops:
                assert before + timedelta(minutes=59) <= o.expires_at <= datetime.now(UTC) + timedelta(hours=1)
        finally:
            ledger.engine.dispose()
    finally:
        admin.execute_command("ACL", "DELUSER", user)


def test_a_user_missing_a_snapshot_command_is_told_which_to_grant(redis_db):
    from idemview.ledger.redis_snapshot import test_redis

    base, admin = redis_db
    put_celery(admin, "t-1", "SUCCESS", done=datetime.now(UTC), ttl_s=3600)
    user, pw = _user(admin, ["+@read", "+ping", "+select", "+time", "-get", "-mget"])
    try:
        said = test_redis(_url(base, user, pw), "celery-redis")
        assert said.startswith("✗") and "GET" in said and "+get" in said and "+mget" in said, said
    finally:
        admin.execute_command("ACL", "DELUSER", user)


def test_a_sidekiq_reader_needs_the_member_reads_and_is_told(redis_db):
    """A [members] layout (sidekiq-unique-jobs) reads lists and sorted sets: a +@read user opens it; a
    user refused ZRANGE is told to grant it by Test, before Connect fails on it."""
    import json

    from idemview.ledger.redis_snapshot import open_redis_ledger, test_redis

    base, admin = redis_db
    admin.hset("uniquejobs:abc:LOCKED", "j1", "1796000000.5")
    admin.lpush("queue:default", json.dumps({"jid": "j1", "class": "A", "args": [], "lock_digest": "uniquejobs:abc"}))
    admin.zadd("retry", {json.dumps({"jid": "j2", "class": "A", "args": [], "retry_count": 0}): 1.0})
    user, pw = _user(admin, ["+@read", "+ping", "+select", "+time"])
    no_zrange, pw2 = _user(admin, ["+@read", "+ping", "+select", "+time", "-zrange"])
    try:
        ledger = open_redis_ledger(_url(base, user, pw), layout="sidekiq-unique-jobs")
        assert ledger.snapshot.loaded == 3
        ledger.engine.dispose()
        said = test_redis(_url(base, no_zrange, pw2), "sidekiq-unique-jobs")
        assert said.startswith("✗") and "ZRANGE" in said and "+zrange" in said, said
    finally:
        admin.execute_command("ACL", "DELUSER", user)
        admin.execute_command("ACL", "DELUSER", no_zrange)


def test_a_snapshot_refused_a_read_stops_with_the_command_named(redis_db, capsys):
    """A user refused a read the snapshot needs (MGET for JSON strings, HGETALL for hashes, LRANGE or
    ZRANGE for Sidekiq's queues and sets, PTTL) is not read as a keyspace of unreadable values (a
    TypeError on MGET's refusal; Sidekiq's refused queues counted as wrong-type keys and the scan's
    findings silently short): the snapshot stops with Redis' NOPERM naming the command, and the CLI says
    it in one line (exit 3). A user refused PEXPIRETIME only (write times) reads with PTTL instead."""
    import json

    import redis

    from idemview.cli import main
    from idemview.ledger.redis_snapshot import open_redis_ledger
    from tests.redis.conftest import put_generic

    base, admin = redis_db
    put_celery(admin, "t-1", "STARTED", done=None, ttl_s=3600)
    put_generic(admin, "pay", "k1", status="completed")
    admin.hset("uniquejobs:abc:LOCKED", "j1", "1796000000.5")
    admin.lpush("queue:default", json.dumps({"jid": "j1", "class": "A", "args": [], "lock_digest": "uniquejobs:abc"}))
    admin.zadd("retry", {json.dumps({"jid": "j2", "class": "A", "args": [], "retry_count": 0}): 1.0})
    cases = [
        ("mget", "celery-redis"),
        ("pttl", "idem-generic"),  # celery-redis reads PEXPIRETIME (write times), not PTTL, on Redis 7
        ("hgetall", "idem-generic"),
        ("lrange", "sidekiq-unique-jobs"),
        ("zrange", "sidekiq-unique-jobs"),
        ("hgetall", "sidekiq-unique-jobs"),
    ]
    users = []
    try:
        for cmd, layout in cases:
            user, pw = _user(admin, ["+@read", "+ping", "+select", "+time", f"-{cmd}"])
            users.append(user)
            url = _url(base, user, pw)
            try:
                open_redis_ledger(url, layout=layout).engine.dispose()
            except redis.exceptions.NoPermissionError as e:
                assert cmd in str(e).lower(), (cmd, layout, str(e))
            else:
                raise AssertionError(f"{layout} opened by a user refused {cmd}")
            capsys.readouterr()
            assert main(["scan", url, "--layout", layout]) == 3, (cmd, layout)
            err = capsys.readouterr().err.strip().splitlines()
            assert any(f"'{cmd}'" in line and "failed" in line for line in err), (cmd, err)
        user, pw = _user(admin, ["+@read", "+ping", "+select", "+time", "-pexpiretime"])
        users.append(user)
        ledger = open_redis_ledger(_url(base, user, pw), layout="celery-redis")
        assert ledger.snapshot.loaded == 1 and ledger.snapshot.write_times == 1
        ledger.engine.dispose()
    finally:
        for u in users:
            admin.execute_command("ACL", "DELUSER", u)


def test_bullmq_reader_refused_xrange_or_zrange_is_stopped_not_short(redis_db):
    """BullMQ's states and events stream are read beside the job hashes (redis_joins): a user refused
    ZRANGE (the completed/failed sets) or XRANGE (the events stream, where completions of jobs removed
    on completion are) got a snapshot without those states or completions, said nowhere. Now Test names
    the command to grant and the snapshot stops with the refused command named; a +@read user reads the
    rerun (a jobId completed twice after removeOnComplete, moveToFinished-14.lua's XADD … completed jobId <id>)."""
    import redis

    from idemview.ledger.redis_snapshot import open_redis_ledger, test_redis

    base, admin = redis_db
    ms = int(datetime.now(UTC).timestamp() * 1000)
    admin.hset(
        "bull:mail:1",
        mapping={"name": "send", "data": "{}", "opts": "{}", "timestamp": ms, "finishedOn": ms, "atm": 1},
    )
    admin.zadd("bull:mail:completed", {"1": ms})
    for _ in range(2):  # job id "order-7" completed twice, its hash removed each time
        admin.xadd("bull:mail:events", {"event": "completed", "jobId": "order-7", "returnvalue": "null"})
    users = []
    try:
        user, pw = _user(admin, ["+@read", "+ping", "+select", "+time"])
        users.append(user)
        ledger = open_redis_ledger(_url(base, user, pw), layout="bullmq")
        assert ledger.snapshot.joined["completed_removed"] == 2 and ledger.snapshot.joined["rerun_ids"] == 1
        ledger.engine.dispose()
        for cmd in ("xrange", "zrange"):
            user, pw = _user(admin, ["+@read", "+ping", "+select", "+time", f"-{cmd}"])
            users.append(user)
            said = test_redis(_url(base, user, pw), "bullmq")  # Test tells before Connect fails
            assert said.startswith("✗") and f"+{cmd}" in said, said
            try:
                open_redis_ledger(_url(base, user, pw), layout="bullmq").engine.dispose()
            except redis.exceptions.NoPermissionError as e:
                assert cmd in str(e).lower(), str(e)
            else:
                raise AssertionError(f"bullmq opened by a user refused {cmd}")
    finally:
        for u in users:
            admin.execute_command("ACL", "DELUSER", u)


def test_asynq_reader_refused_the_lease_set_is_told_before_reading(redis_db, capsys):
    """Asynq's layout has no [states]: its lease set (asynq:{q}:lease, [lock] zset) is its only sorted
    set read. A user refused ZRANGE, or allowed every asynq key but the lease set (a key-pattern ACL), was
    passed by Test and stopped only after the snapshot had read every task hash. Now Test names what to
    grant, and Connect refuses in one line before any task is read."""
    import redis

    from idemview.cli import main
    from idemview.ledger.redis_snapshot import open_redis_ledger, test_redis
    from tests.redis.test_asynq import Q, put_task

    base, admin = redis_db
    put_task(admin, "t-1", "active")
    admin.zadd(f"asynq:{{{Q}}}:lease", {"t-1": int(datetime.now(UTC).timestamp()) + 30})
    no_zrange, pw1 = _user(admin, ["+@read", "+ping", "+select", "+time", "-zrange"])
    # every key of the queue but its lease set (Redis 7 key selectors: read access by pattern)
    no_lease, pw2 = f"idv_nolease_{os.getpid()}", secrets.token_hex(10)
    admin.execute_command(
        "ACL", "SETUSER", no_lease, "reset", "on", f">{pw2}", "+@read", "+ping", "+select", "+time",
        "%R~asynq:{critical}:t:*", "%R~asynq:{critical}:unique:*", "%R~asynq:{critical}:pending",
    )  # fmt: skip
    try:
        for user, pw in ((no_zrange, pw1), (no_lease, pw2)):
            url = _url(base, user, pw)
            said = test_redis(url, "asynq")
            assert said.startswith("✗") and "ZRANGE" in said and "+zrange" in said, (user, said)
            seen: list[tuple[int, int]] = []
            try:
                open_redis_ledger(
                    url, layout="asynq", progress=lambda s, n, seen=seen: seen.append((s, n))
                ).engine.dispose()
            except redis.exceptions.NoPermissionError as e:
                assert "'zrange'" in str(e) and "nothing was read" in str(e), str(e)
            else:
                raise AssertionError(f"asynq opened by {user}")
            assert seen == []  # refused before the first batch of task hashes
            capsys.readouterr()
            assert main(["scan", url, "--layout", "asynq"]) == 3
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "'zrange'" in err[0] and "+zrange" in err[0], err
        # the user allowed the lease set too reads the task with its lease
        ok, pw3 = _user(admin, ["+@read", "+ping", "+select", "+time"])
        try:
            ledger = open_redis_ledger(_url(base, ok, pw3), layout="asynq")
            assert ledger.snapshot.loaded == 1 and ledger.records(Q, "t-1")[0].lock_expires_at is not None
            ledger.engine.dispose()
        finally:
            admin.execute_command("ACL", "DELUSER", ok)
    finally:
        admin.execute_command("ACL", "DELUSER", no_zrange)
        admin.execute_command("ACL", "DELUSER", no_lease)


def test_the_check_before_reading_refuses_only_what_the_snapshot_sends(redis_db):
    """Connect's check before reading names only commands the snapshot sends: TYPE is probed by Test but
    never sent, a layout reading write times from TTLs asks PEXPIRETIME (PTTL only where that is
    refused), and string values are read with MGET (GET only for dedup window keys): users without TYPE,
    PTTL or GET open celery-redis as they did before the check."""
    from idemview.ledger.redis_snapshot import open_redis_ledger

    base, admin = redis_db
    put_celery(admin, "t-1", "SUCCESS", done=datetime.now(UTC), ttl_s=3600)
    for rule in ("-type", "-pttl", "-get"):
        user, pw = _user(admin, ["+@read", "+ping", "+select", "+time", rule])
        try:
            ledger = open_redis_ledger(_url(base, user, pw), layout="celery-redis")
            assert ledger.snapshot.loaded == 1, rule
            ledger.engine.dispose()
        finally:
            admin.execute_command("ACL", "DELUSER", user)
