"""Asynq's TaskMessage (the ``msg`` of each task hash) read with idemview's own protobuf wire-format reader
(issue 26): each task's own deadline, retry counter and last error, written by ``proto.Marshal`` as asynq
writes them (tests/redis/asynq_proto.py builds the message from asynq.proto's field list with the
``protobuf`` package, test-only). Malformed and truncated messages are "unreadable", never a crash.

Planted: an active task past its own deadline (stuck, though its lease is live), an active task whose lease
expired a minute ago (its worker died: recoverer.go's ErrLeaseExpired), a task archived after its own 3
retries (unresolved failure, 4 attempts, its error), a task completed after 9 retries (a retry storm).
Look-alikes: an active task whose deadline and lease are ahead, an active task with a timeout only and a
live lease, a task completed after 2 retries, a task whose ``msg`` is truncated or not protobuf at all
(read, shown unreadable)."""

from __future__ import annotations

import time

import pytest

from idemview.domain.model import FindingKind as K
from idemview.findings.engine import FindingEngine
from idemview.layouts.kv import load_kv_preset, parse_kv_layout
from idemview.layouts.layout import LayoutError
from idemview.ledger.redis_kv.protobuf import decode_message
from tests.redis.conftest import server_now

pytest.importorskip("google.protobuf", reason="the protobuf package writes the TaskMessage fixtures")

from tests.redis.asynq_proto import encode_task  # noqa: E402 - after the import check

Q = "default"
FIELDS = load_kv_preset("asynq").protobuf_fields


def _put(raw, tid, state, lease=None, **msg):
    """The hash rdb.go's scripts leave (msg, state; pending_since while pending) and the state's list/set;
    ``lease``: the active task's lease end (unix s) in asynq:{q}:lease (Dequeue's ZADD, ExtendLease)."""
    m = dict(type="payment:charge", payload=b'{"order":1}', id=tid, queue=Q, retry=25)
    m.update(msg)
    body = msg.pop("raw_msg", None) if "raw_msg" in msg else encode_task(**m)
    key = f"asynq:{{{Q}}}:t:{tid}"
    raw.hset(key, mapping={"msg": body, "state": state})
    if lease is not None:
        raw.zadd(f"asynq:{{{Q}}}:lease", {tid: lease})
    if state in ("pending", "active"):
        raw.lpush(f"asynq:{{{Q}}}:{state}", tid)
    else:
        raw.zadd(f"asynq:{{{Q}}}:{state}", {tid: int(time.time())})


def test_reader_reads_what_protobuf_writes():
    b = encode_task(
        type="email:send",
        payload=b"\xff\x00raw",
        id="t-1",
        queue=Q,
        retry=3,
        retried=2,
        error_msg="smtp 421",
        timeout=1800,
        deadline=1_900_000_000,
        unique_key="asynq:{default}:unique:email:send:abc",
        last_failed_at=1_800_000_000,
        retention=0,
        completed_at=0,
        headers={"trace": "x"},
    )
    got = decode_message(b, FIELDS)
    assert got == {
        "type": "email:send",
        "payload": "hex:ff00726177",
        "id": "t-1",
        "queue": Q,
        "retry": 3,
        "retried": 2,
        "error_msg": "smtp 421",
        "timeout": 1800,
        "deadline": 1_900_000_000,
        "unique_key": "asynq:{default}:unique:email:send:abc",
        "last_failed_at": 1_800_000_000,
        "retention": None,
        "completed_at": None,
        "group_key": None,
    }
    # a negative int32/int64 is ten bytes on the wire, read back signed
    assert decode_message(encode_task(retried=-1, timeout=-5), FIELDS)["retried"] == -1
    assert decode_message(b"", FIELDS)["retried"] == 0  # proto3: absent = 0


def test_reader_never_raises_on_bad_bytes():
    b = encode_task(type="t", payload=b"{}", id="x", queue=Q, retried=1, error_msg="e", deadline=5)
    for i in range(len(b)):
        got = decode_message(b[:i], FIELDS)
        assert set(got) == set(FIELDS) or set(got) == {"unreadable"}
    assert decode_message(b[:4], FIELDS) == {
        "unreadable": "not a readable protobuf message: truncated varint at byte 4"
    }
    assert decode_message(b[:5], FIELDS) == {
        "unreadable": "not a readable protobuf message: field 2 declares 2 bytes at byte 3, 0 left"
    }
    bad = {
        b"\x0b": "group 1 opened at byte 0 never ends",  # a group start, no end
        b"\x0b\x14": "ends as group 2",  # group 1 closed as group 2
        b"\x0c": "end of group 1 without its start",
        b"\x0e": "wire type 6",
        b"\x00\x01": "field number 0",
        b"\x08" + b"\xff" * 11: "longer than 10 bytes",
        b"\x0a\x05ab": "declares 5 bytes",
        b"\x0b\x0a\x05ab\x0c": "declares 5 bytes",  # truncated inside a group
        b'{"type": "json, not protobuf"}': None,
    }
    for raw, why in bad.items():
        got = decode_message(raw, FIELDS)
        assert list(got) == ["unreadable"], raw
        if why:
            assert why in got["unreadable"], (raw, got)
    assert "as text" in decode_message("text", FIELDS)["unreadable"]
    assert "missing" in decode_message(None, FIELDS)["unreadable"]
    # an unknown field of every wire type is skipped
    assert (
        decode_message(b"\x78\x01" + b"\x79" + b"\x00" * 8 + b"\x7d" + b"\x00" * 4 + b"\x0a\x01a", FIELDS)["type"]
        == "a"
    )


def test_unexpected_wire_types_and_groups_are_skipped_as_go_does():
    """Go's protobuf runtime (asynq's reader) keeps a field of an unexpected wire type, and a group, as an
    unknown field and reads the others (internal/impl/decode.go errUnknown, protowire.ConsumeFieldValue):
    so does this reader, field by field."""
    b = encode_task(type="email:send", payload=b"{}", id="t-9", queue=Q, retry=3, retried=2, deadline=1_900_000_000)
    odd = (
        b"\x32\x02ab"  # field 6 (retried, int32) as bytes
        + b"\x08\x07"  # field 1 (type, string) as a varint
        + b"\x1d\x01\x02\x03\x04"  # field 3 (id, string) as a fixed32
        + b"\x49\x00\x00\x00\x00\x00\x00\x00\x00"  # field 9 (deadline, int64) as a fixed64
        + b"\xa3\x01"  # group 20 ...
        + b"\x08\x05\x0a\x01x\x2b\x30\x01\x2c"  # ... holding a varint, bytes and a nested group 5
        + b"\xa4\x01"  # ... its end
        + b"\x2b\x2c"  # an empty group 5 (the number of retry, declared)
    )
    got = decode_message(b + odd, FIELDS)
    assert got["type"] == "email:send"
    assert got["id"] == "t-9"
    assert got["retried"] == 2
    assert got["deadline"] == 1_900_000_000
    assert got["retry"] == 3 and got["queue"] == Q and got["payload"] == "{}"
    assert decode_message(b"\x32\x02ab", FIELDS)["retried"] == 0  # skipped: proto3's absent
    assert decode_message(b"\x0d\x00\x00\x00\x00\x0a\x01a", FIELDS)["type"] == "a"


def test_asynq_per_task_limits_planted_and_look_alikes(redis_db):
    url, raw = redis_db
    now = time.time()
    _put(raw, "stuck", "active", lease=now + 25, deadline=int(now) - 120, timeout=60)  # deadline 2 min ago
    _put(raw, "crashed", "active", lease=now - 60, timeout=1800)  # its worker stopped extending the lease
    _put(raw, "running", "active", lease=now + 25, deadline=int(now) + 3600)
    _put(raw, "timeout-only", "active", lease=now + 20, timeout=1800)
    _put(raw, "no-lease", "active", timeout=1800)  # asynq before the lease (v0.23): no end kept
    _put(raw, "exhausted", "archived", retry=3, retried=3, error_msg="card declined", last_failed_at=int(now) - 30)
    _put(raw, "stormy", "completed", retried=9, completed_at=int(now) - 10)
    _put(raw, "calm", "completed", retried=2, completed_at=int(now) - 10)
    _put(raw, "retrying", "retry", retry=25, retried=1, error_msg="gateway timeout")
    _put(raw, "pending", "pending", type="email:send")
    from idemview.ledger.redis_snapshot import open_redis_ledger

    ledger = open_redis_ledger(url)
    assert ledger.layout.name == "asynq", ledger.detection
    at = server_now(raw)
    got = {(f.kind.value, f.key) for f in FindingEngine(ledger, at).run()}
    assert got == {
        ("stuck_in_progress", "stuck"),
        ("stuck_in_progress", "crashed"),
        ("unresolved_failure", "exhausted"),
        ("retry_storm", "stormy"),
    }
    stuck = ledger.records(Q, "stuck")[0]
    assert stuck.lock_expires_at is not None and round(stuck.lock_expires_at.timestamp()) == int(now) - 120
    crashed = ledger.records(Q, "crashed")[0].lock_expires_at
    assert crashed is not None and abs(crashed.timestamp() - (now - 60)) < 0.01
    alive = ledger.records(Q, "timeout-only")[0].lock_expires_at
    assert alive is not None and abs(alive.timestamp() - (now + 20)) < 0.01
    assert ledger.records(Q, "no-lease")[0].lock_expires_at is None
    assert ledger.snapshot.joined["leases"] == 4
    ex = ledger.records(Q, "exhausted")[0]
    assert ex.attempt_count == 4 and ex.kind == "payment:charge" and ex.status.value == "failed"
    assert ex.updated_at is not None and round(ex.updated_at.timestamp()) == int(now) - 30
    assert ledger.records(Q, "calm")[0].attempt_count == 3
    assert ledger.records(Q, "stormy")[0].completed_at is not None
    assert ledger.records(Q, "pending")[0].kind == "email:send"
    assert K.STUCK_IN_PROGRESS not in FindingEngine(ledger, at).unsupported()


def test_asynq_unreadable_msg_is_shown_not_fatal(redis_db):
    url, raw = redis_db
    good = encode_task(type="payment:charge", payload=b"{}", id="t", queue=Q, retried=1, deadline=int(time.time()) - 60)
    _put(raw, "cut", "active", raw_msg=good[:-3])  # truncated mid-field
    _put(raw, "json", "pending", raw_msg=b'{"not": "protobuf"}')
    _put(raw, "ok", "pending")
    from idemview.ledger.redis_snapshot import open_redis_ledger

    ledger = open_redis_ledger(url, layout="asynq")
    cut = ledger.records(Q, "cut")[0]
    assert cut.status.value == "in_progress" and cut.kind is None and cut.lock_expires_at is None
    assert cut.request.value["unreadable"].startswith("not a readable protobuf message: ")
    assert list(ledger.records(Q, "json")[0].request.value) == ["unreadable"]
    assert ledger.records(Q, "ok")[0].kind == "payment:charge"
    # the unreadable active task has no deadline to judge: not called stuck
    assert FindingEngine(ledger, server_now(raw)).run() == []


def test_protobuf_section_is_validated():
    base = '[layout]\nname = "x"\n[kv]\nmatch = "a:*"\nencoding = "hash"\n[status]\nfield = "s"\n'
    ok = parse_kv_layout(base + '[protobuf]\nfield = "m"\nfields = { a = [1, "string"] }\n')
    assert ok.protobuf_field == "m" and ok.protobuf_fields == {"a": (1, "string")}
    for bad, msg in [
        ('field = "m"\nfields = { a = [1, "float"] }', "must be \\[field number"),
        ('field = "m"\nfields = { a = [0, "int"] }', "must be \\[field number"),
        ('field = "m"\nfields = { a = [1, "int"], b = [1, "int"] }', "one field number twice"),
        ('field = "m"\nfields = { a = [1, "int"] }\nextra = 1', "knows only field and fields"),
        ('field = "m"', "fields maps names"),
    ]:
        with pytest.raises(LayoutError, match=msg):
            parse_kv_layout(base + "[protobuf]\n" + bad + "\n")
    dup = '[duplicates]\ngroup_field = "u"\n'
    lease = '[lock]\nzset = "l:{scope}"\n'
    ok = parse_kv_layout(base + lease + dup + '[fields]\nlock_expires_at = { field = "d", encoding = "epoch_s" }\n')
    assert ok.lock_zset == "l:{scope}" and ok.lock_key == ""
    with pytest.raises(LayoutError, match="zset narrows a lock_expires_at field"):
        parse_kv_layout(base + lease + dup)
    with pytest.raises(LayoutError, match="takes key .* or zset"):
        parse_kv_layout(base + '[lock]\nzset = "l:{scope}"\nkey = "k:{scope}:{key}"\n')
    with pytest.raises(LayoutError, match="encoding must be hash"):
        parse_kv_layout(base.replace('"hash"', '"json"') + '[protobuf]\nfield = "m"\nfields = { a = [1, "int"] }\n')


def test_unreadable_lease_scores_are_unknown_lock_ends_not_a_crash(redis_db):
    """A lease score Redis accepts but that is no time (ZADD takes ``inf``/``-inf``; 1e300 is past year
    9999): that task's lock end is unknown (its own deadline holds), counted and said in the notes; the
    other tasks and the snapshot are read as ever."""
    url, raw = redis_db
    now = time.time()
    _put(raw, "forever", "active", timeout=1800)
    _put(raw, "never", "active", timeout=1800)
    _put(raw, "far", "active", deadline=int(now) + 3600)
    _put(raw, "ok", "active", timeout=1800, lease=now + 25)
    raw.execute_command("ZADD", f"asynq:{{{Q}}}:lease", "inf", "forever", "-inf", "never", "1e300", "far")
    from idemview.ledger.redis_snapshot import open_redis_ledger

    ledger = open_redis_ledger(url, layout="asynq")
    assert ledger.records(Q, "forever")[0].lock_expires_at is None
    assert ledger.records(Q, "never")[0].lock_expires_at is None
    far = ledger.records(Q, "far")[0].lock_expires_at  # its own deadline holds
    assert far is not None and round(far.timestamp()) == int(now) + 3600
    ok = ledger.records(Q, "ok")[0].lock_expires_at
    assert ok is not None and abs(ok.timestamp() - (now + 25)) < 0.01
    info = ledger.snapshot
    assert info.joined["leases"] == 1 and info.joined["leases_unreadable"] == 3
    assert (
        f"3 lease ends in asynq:{{{Q}}}:lease are not readable times (inf, -inf or past year 9999): "
        "those tasks' lock ends are unknown" in info.server_line()
    )
