"""The snapshot's compiled per-layout mapping (``compile_layout``) gives exactly what the plain mapping
(``map_record`` + the raw status + the attempt, as the snapshot loop computed them before) gives, for
every shipped key-value preset and a layout using every kind of field, over awkward values. No server
needed."""

from __future__ import annotations

import json

import pytest

from idemview.domain.model import Status
from idemview.layouts.kv import all_kv_presets, parse_kv_layout
from idemview.ledger.redis_snapshot import _text, compile_layout, decode_value, map_record, sql_time

OUTCOME = {Status.COMPLETED: "succeeded", Status.FAILED: "failed", Status.IN_PROGRESS: "running"}
COLUMN = {"fingerprint": "request_hash", "request": "request_body", "response": "response_body"}
OP_NAMES = (
    "fingerprint",
    "intent_ref",
    "effect_ref",
    "attempt_count",
    "created_at",
    "updated_at",
    "completed_at",
    "locked_at",
    "lock_expires_at",
    "request",
    "response",
    "error",
)

EVERYTHING = """
[layout]
name = "everything"
[kv]
match = "e:*"
key_regex = '^e:(?P<kind>[^:]+):(?P<key>.+)$'
encoding = "json"
[status]
field = "meta.state"
map = { ok = "completed", bad = "failed", busy = "in_progress" }
default = "unknown"
[fields]
kind = "name"
created_at = { field = "meta.at", encoding = "iso_text" }
updated_at = { field = "ts", encoding = "epoch_s" }
completed_at = { field = "ms", encoding = "epoch_ms" }
locked_at = { field = "meta.at", encoding = "iso_text" }
lock_expires_at = { field = "ms", encoding = "epoch_ms" }
attempt_count = { field = "n", add = 2 }
fingerprint = "fp"
intent_ref = { hash_of = ["name", "args", "meta.at"] }
effect_ref = "meta.effect"
request = { fields = ["args", "meta.state"], encoding = "text" }
response = { field = "out", encoding = "json" }
error = { field = "err", encoding = "json" }
[attempt]
worker = "meta"
started_at = "begun"
finished_at = "kind"
"""

VALUES = [
    {},
    {"status": None},
    {"status": "SUCCESS", "date_done": "2026-11-30T05:36:15.123456", "retries": 0, "name": "t", "args": [1]},
    {"status": 3, "date_done": "2026-11-30T05:36:15Z", "retries": "4", "result": {"b": 1, "a": [2, "é"]}},
    {"status": "FAILURE", "date_done": "2026-11-30T05:36:15+02:00", "traceback": "Tb\nE", "retries": 2.7},
    {"status": "FAILURE", "date_done": " 2026-11-30 05:36:15-01:30 ", "retries": "x", "result": "not json {"},
    {"status": "RETRY", "date_done": "2026-11-30", "retries": "", "result": '{"a": 1}', "worker": {"w": 1}},
    {"status": "STARTED", "date_done": "2026-13-40T00:00:00", "retries": None, "worker": 7, "kwargs": {}},
    {"status": "PENDING", "date_done": 1764480975, "retries": True, "args": None, "kwargs": None, "queue": "q"},
    {"status": "SUCCESS", "date_done": "2026-11-30T05:36:15.5z", "name": None, "args": [2**70], "kwargs": {"k": 1}},
    {"status": "INPROGRESS", "expiration": 1764480975, "in_progress_expiration": 1764480975123},
    {"status": "COMPLETED", "expiration": "1764480975.5", "data": '{"x": 1}', "validation": "v"},
    {"status": "COMPLETED", "expiration": "soon", "in_progress_expiration": -1e30, "data": {"y": None}},
    {"status": "succeeded", "created_at": "2026-11-30T05:36:15", "attempts": "3", "error": "boom", "request": "{}"},
    {"status": "failed", "locked_at": "2026-11-30T05:36:15.000001+00:00", "lock_expires_at": "", "attempts": "0"},
    {"meta": {"state": "ok", "at": "2026-11-30T05:36:15Z", "effect": ["e", 1]}, "ts": 1.5, "ms": 1764480975123},
    {"meta": {"state": "bad", "at": None}, "ts": "1e3", "ms": "x", "out": "text", "err": {"z": 1}, "begun": "2026"},
    {"meta": "flat", "name": "", "n": 1, "fp": 12, "out": [1, {"b": 2, "a": 1}], "begun": "2026-11-30T01:02:03"},
    {"meta": {"state": {"nested": 1}, "at": "2026-11-30T05:36:15.123456789"}, "n": -3, "name": "job"},
    {"name": "charge", "deid": "charge-42", "timestamp": "1764480975123", "atm": "3", "finishedOn": "x"},
]


def reference(kv, value, key_kind):
    """What the snapshot loop computed per key before the mapping was compiled."""
    rec = map_record(kv, value)
    raw_status = kv.raw_status(value)
    op = {"kind": rec.get("kind") or key_kind, "status": raw_status if raw_status is not None else ""}
    op.update({COLUMN.get(n, n): rec.get(n) for n in OP_NAMES if n in kv.fields})
    if kv.group_field:  # the dedup id ([duplicates] group_field), as text
        from idemview.ledger.redis_joins import GROUP_COLUMN

        op[GROUP_COLUMN] = _text(kv.get(value, kv.group_field))
    if kv.limit_field:  # the dedup id's holder limit ([duplicates] limit_field): a positive whole number
        from idemview.ledger.redis_joins import LIMIT_COLUMN

        lim = kv.get(value, kv.limit_field) if isinstance(value, dict) else None
        lim = int(lim) if isinstance(lim, str) and lim.strip().isdigit() else lim
        lim = int(lim) if isinstance(lim, float) and lim.is_integer() else lim
        op[LIMIT_COLUMN] = lim if type(lim) is int and 0 < lim < 2**31 else None
    att = None
    if kv.attempt:
        st = kv.status(raw_status)
        when = {
            k: (rec.get(v) if v in rec else sql_time(kv.get(value, v), "iso_text"))
            for k, v in kv.attempt.items()
            if k in ("started_at", "finished_at")
        }
        worker = kv.get(value, kv.attempt["worker"]) if "worker" in kv.attempt else None
        att = (
            rec.get("attempt_count") or 1,
            when.get("started_at"),
            when.get("finished_at"),
            OUTCOME.get(st, "unknown"),
            rec.get("fingerprint"),
            rec.get("effect_ref"),
            _text(worker),
            rec.get("error") if st == Status.FAILED else None,
        )
    return op, att


def compiled(kv, value, key_kind):
    c = compile_layout(kv)
    d = value if isinstance(value, dict) else {}
    vals = c.values(d)
    raw_status = c.status(value)
    vkind = c.kind(d) if c.kind is not None else None
    op = {"kind": vkind or key_kind, "status": raw_status if raw_status is not None else ""}
    op.update(zip(c.columns, vals, strict=True))
    att = c.attempt(raw_status, d, vkind, vals) if c.attempt is not None else None
    return op, att


LAYOUTS = [*all_kv_presets(), parse_kv_layout(EVERYTHING)]


@pytest.mark.parametrize("kv", LAYOUTS, ids=lambda kv: kv.name)
def test_compiled_mapping_equals_the_plain_mapping(kv):
    for v in VALUES:
        for key_kind in (None, "from-key"):
            if kv.encoding == "hash":  # a hash holds text only
                v = {k: x if isinstance(x, str) else json.dumps(x) for k, x in v.items()}
            assert compiled(kv, v, key_kind) == reference(kv, v, key_kind), (kv.name, v)


def test_compiled_mapping_of_plain_values():
    kv = parse_kv_layout(
        '[layout]\nname = "p"\n[kv]\nmatch = "*"\nencoding = "plain"\n[status]\nmap = { done = "completed" }\n'
    )
    for raw in (b"done", b"failed", b"\xff"):
        value = decode_value(kv, raw)
        assert compiled(kv, value, None) == reference(kv, value, None)


def test_compiled_layout_is_built_once_per_layout():
    kv = parse_kv_layout(EVERYTHING)
    assert compile_layout(kv) is compile_layout(kv)
    assert compile_layout(parse_kv_layout(EVERYTHING)) is not compile_layout(kv)
