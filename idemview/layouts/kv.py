"""Key-value layouts: how a Redis keyspace maps onto the normalized model (issue #15), as data.

A key-value layout is TOML like the SQL layouts (never code): a ``[kv]`` table with

- ``match``: the SCAN ``MATCH`` glob that selects candidate keys (``celery-task-meta-*``);
- ``key_regex``: a Python regular expression over the whole key with named captures ``key``
  (required), ``scope`` and ``kind`` (optional); keys it does not match are skipped and counted;
- ``exclude_regex`` (optional): keys to skip although they match (Powertools' ``<key>:lock``);
- ``encoding``: ``json`` (a JSON string, read with GET), ``hash`` (a Redis hash, HGETALL) or
  ``plain`` (a string whose whole value is the raw status);
- ``scope`` (optional): a literal scope when the key carries none.

``[status]`` maps a value field (``field``; omitted for ``plain``) through ``map`` onto idemview's
statuses, unmapped raw values becoming ``default``. ``[fields]`` maps normalized names
(DESIGN §3) onto value fields: a field name (a dotted path into JSON: ``meta.status``), or a table with
``field``/``fields`` (several fields gathered into one JSON object, e.g. Celery's args + kwargs as the
request), ``first_of`` (alternatives: the first present one), ``encoding`` (times: ``iso_text``,
``epoch_s``, ``epoch_ms``, ``epoch_s_or_ms``; payloads: ``json``/``text``),
``add`` (a number added to an integer: Celery's ``retries`` + 1 = attempts) or ``hash_of`` (a SHA-256
over the named fields' canonical JSON: Celery's task name + arguments as the intent reference, so one
intent under two task ids shows; with ``unless_empty = [fields]`` no hash where all of those are empty:
a task with no arguments names no intent). ``[attempt]`` optionally derives the one attempt a record proves
(``worker``, ``finished_at``, ``started_at``: names of normalized fields or value fields).

Keys beside the record (a job queue such as BullMQ keeps a job's state and lock in other keys):

- ``[states]``: ``key`` a template (``bull:{scope}:{state}``) and, per raw state, the Redis type of
  the key listing the record ids in it (``list``, ``zset``): a record's raw status is the state whose
  key lists its id (read with LRANGE / ZRANGE in bounded pages); ``[status] field`` is then optional;
- ``[lock]``: ``key`` a template (``bull:{scope}:{key}:lock``) of the key a worker holds while the
  record is ``in_progress``: its TTL is the record's ``lock_expires_at``; an in-progress record whose
  lock key is gone was left by a dead worker, its lock expired at the latest when it was read; or
  ``zset``, a template (``asynq:{{{scope}}}:lease``) of a sorted set whose member is the record's id and
  whose score the lock's end (unix seconds): Asynq's lease, extended by a live worker (the earlier of it
  and a ``lock_expires_at`` field holds; an in-progress record not in the set keeps that field's end);
- ``[duplicates]``: ``group_field`` a value field naming the dedup id (BullMQ's ``deid``): records
  sharing one are one idempotency key, so two completed records of one dedup id show as
  ``duplicate_effect``; ``absent_reason`` says why no completed record may be present (the store
  deletes them) when none is, and ``duplicate_effect`` is then not checkable.

Records that are members of other keys, not keys of their own (Sidekiq keeps each job as a JSON member
of a queue list or of the ``schedule``/``retry``/``dead`` sorted sets):

- ``[members]``: ``key_field``, the value field naming the record (Sidekiq's ``jid``), and
  ``[[members.source]]`` tables, each with ``match`` (a key name, or a SCAN MATCH glob), ``type``
  (``list``, ``zset``, ``hash``: each member or hash field is one record), ``state`` (the raw status
  of its records), optionally ``key_regex`` (named captures of the container key added to each record:
  the digest of ``uniquejobs:<digest>:LOCKED``), and for a hash ``field_as``/``value_as`` (the names a
  field and its value take in the record; a value that is a JSON object is merged into it), and
  ``rename`` (record field -> another name it is given where the record lacks that one). A record
  is the member's JSON object (or the hash field's) plus ``_container`` and ``_score`` (a sorted set's);
  the container's TTL is each record's ``expires_at``;
- ``[duplicates] window_key``: the template (``bull:{scope}:de:{group}``; Asynq's unique key is the dedup
  id itself: ``{group}``) of the key that holds a dedup id
  while its window lasts (its value the holding record's key): its TTL is that record's ``expires_at``;
- ``[events]``: ``key`` the template of a scope's events stream (``bull:{scope}:events``, read with
  XRANGE in pages): a ``completed`` event of a job whose record is gone (deleted on completion) becomes a
  succeeded attempt of that job id, so a job id that completed twice shows (``duplicate_effect``);
- ``[duplicates] lock_type_field`` + ``[duplicates.holds]``: which records hold their dedup id's lock,
  by lock type (sidekiq-unique-jobs: an ``until_executed`` job holds it while queued, a
  ``while_executing`` one never on the client), ``"*"`` for any type: only holders are grouped, so a
  look-alike the system allows (a second ``while_executing`` job queued) is no duplicate.
- ``[duplicates] limit_field``: the field holding how many holders a dedup id admits at once
  (sidekiq-unique-jobs' ``lock_limit``, 1 when absent): a dedup id held by no more job ids than its
  limit is what the user configured, and its records are not grouped (no duplicate).

A hash field holding a protobuf message (Asynq's ``msg``, a ``TaskMessage``) is decoded, never executed,
by ``[protobuf]``: ``field`` (the hash field) and ``fields`` (name -> [field number, type], types of
:data:`idemview.ledger.redis_kv.protobuf.FIELD_TYPES`): the hash field becomes ``{name: value}``, read with
dotted paths (``msg.retried``), or ``{"unreadable": why}`` for bytes that are not a readable message.

A store that sets the same TTL at every write (Celery's ``result_expires``) tells when a record was last
written: ``[expiry] write_ttl_seconds`` (the TTL the store was configured with) and ``write_time_fields``
(the time fields that take read time - (TTL - remaining TTL) when the record holds none: a Celery
``STARTED`` record has ``date_done: null``). A remaining TTL above the configured one means the
configuration differs: no time is derived, and the snapshot says so.

The key's TTL is the record's ``expires_at`` (Redis keeps the dedup window as the TTL: Celery's
``result_expires``, Powertools' ``expires_after_seconds``); a key without a TTL has none. The layout
cannot name another expiry: an expired Redis key is gone, so what a SQL ledger shows as an expired
key or a replay after expiry cannot be seen here (see :data:`NOT_CHECKABLE`).

Shipped key-value presets live in ``idemview/layouts/kv_presets/*.toml``, found as package data like
the SQL presets, in a folder of their own so SQL detection never sees them.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from idemview.domain.model import FindingKind, Status
from idemview.layouts.layout import LayoutError, shipped_names, shipped_text

ENCODINGS = ("json", "hash", "plain")
KV_TIME_FIELDS = ("created_at", "updated_at", "completed_at", "locked_at", "lock_expires_at")
KV_VALUE_FIELDS = ("kind", "attempt_count", "fingerprint", "intent_ref", "effect_ref")
KV_PAYLOAD_FIELDS = ("request", "response", "error")
#: ``epoch_s_or_ms``: a number read as milliseconds from 1e11 on (1e11 s is the year 5138, 1e11 ms 1973),
#: else seconds: Sidekiq 8 writes times as epoch ms, Sidekiq 7 as epoch float seconds, side by side.
KV_TIME_ENCODINGS = ("iso_text", "epoch_s", "epoch_ms", "epoch_s_or_ms")
MEMBER_TYPES = ("list", "zset", "hash")
SOURCE_ENTRIES = frozenset(("match", "type", "state", "key_regex", "field_as", "value_as", "rename"))
ATTEMPT_FIELDS = ("worker", "started_at", "finished_at")

#: Finding kinds a key-value store cannot show, whatever the layout, and why (DESIGN §5 kinds).
NOT_CHECKABLE: dict[FindingKind, str] = {
    FindingKind.EXPIRED_KEY: "an expired Redis key is gone (Redis deletes it at its TTL), so no expired "
    "record can be present",
    FindingKind.REPLAY_AFTER_EXPIRY: "an expired Redis key is gone: the record a replay after expiry "
    "would follow no longer exists, and the new one overwrote nothing "
    "visible",
    FindingKind.DUPLICATE_EFFECT: "a Redis key holds one value: a retry overwrites the record, so two "
    "successes of one key leave one record",
    FindingKind.KEY_CONFLICT: "a Redis key holds one value, hence one fingerprint per key",
}


@dataclass(frozen=True, slots=True)
class KvField:
    """Where one normalized field comes from in a value: ``fields`` (one name, or several gathered into
    a JSON object), ``encoding`` (time or payload), ``add`` (integer offset), ``hash_of`` (SHA-256 of
    the named fields' canonical JSON)."""

    fields: tuple[str, ...] = ()
    encoding: str | None = None
    add: int = 0
    hash_of: tuple[str, ...] = ()
    gather: bool = False
    #: ``hash_of`` only: no value (no intent) when every one of these fields is empty (missing, null,
    #: "", [] or {}): a Celery task called with no arguments, a periodic one, names no business intent
    unless_empty: tuple[str, ...] = ()
    #: ``first_of``: ``fields`` are alternatives, the first present (not null) one is the value
    #: (Sidekiq's last failure: ``retried_at``, else ``failed_at``)
    first_of: bool = False


@dataclass(frozen=True, slots=True)
class MemberSource:
    """One ``[[members.source]]``: container keys (``match``: a name, or a glob read with SCAN MATCH) of
    ``type`` whose members are records in raw state ``state``; ``key_regex`` captures of the container
    key are added to each record; a hash field and its value are named ``field_as``/``value_as``."""

    match: str
    type: str
    state: str
    key_regex: re.Pattern | None = None
    field_as: str = "field"
    value_as: str = "value"
    #: record field -> the name it is also given (sidekiq-unique-jobs v9 lock metadata's ``worker`` is
    #: the job's ``class``), where the record has no field of that name
    rename: tuple[tuple[str, str], ...] = ()

    @property
    def literal(self) -> bool:
        """True when ``match`` names one key (no glob character): read directly, no SCAN."""
        return not any(c in self.match for c in "*?[\\")


@dataclass(slots=True)
class KvLayout:
    """A parsed key-value layout (see the module docstring for the TOML). ``text`` is its source."""

    name: str
    title: str
    description: str
    source: str
    match: str
    key_regex: re.Pattern
    encoding: str
    exclude_regex: re.Pattern | None = None
    scope: str = ""
    status_field: str | None = None
    status_map: dict[str, str] = field(default_factory=dict)
    status_default: str = "unknown"
    fields: dict[str, KvField] = field(default_factory=dict)
    attempt: dict[str, str] = field(default_factory=dict)
    lock_timeout_seconds: float | None = None
    dedup_window_seconds: float | None = None
    #: [expiry] write_ttl_seconds: the TTL the store sets at every write (Celery's result_expires); a
    #: record's write time = read time - (this - remaining TTL), used for write_time_fields it lacks
    write_ttl_seconds: float | None = None
    write_time_fields: tuple[str, ...] = ()
    retry_threshold: int = 5
    detect_fields: tuple[str, ...] = ()
    #: [states]: the key template listing a state's record ids, and raw state -> Redis type
    states_key: str = ""
    states: dict[str, str] = field(default_factory=dict)
    #: [lock]: the template of the key held while a record is in progress
    lock_key: str = ""
    #: [lock] zset: the template of a sorted set member = record id, score = the lock's end (unix s)
    lock_zset: str = ""
    #: [duplicates]: the value field naming the dedup id that groups records under one key
    group_field: str | None = None
    absent_reason: str = ""
    #: [members]: records are members of container keys (see the module docstring)
    members: tuple[MemberSource, ...] = ()
    members_key: str = ""
    #: [duplicates] lock_type_field and holds: lock type -> raw states whose records hold the lock
    lock_type_field: str | None = None
    #: [duplicates] limit_field: the record field holding how many holders its dedup id admits at once
    #: (sidekiq-unique-jobs' lock_limit: lock.lua admits a job id while HLEN < limit); absent: 1
    limit_field: str | None = None
    #: [duplicates] window_key: the template of the key that holds a dedup id while its window lasts
    window_key: str = ""
    #: [events]: the template of a scope's events stream (BullMQ's bull:<queue>:events)
    events_key: str = ""
    #: [protobuf]: the hash field holding a protobuf message, and its declared fields
    #: (name -> (field number, type)), decoded by idemview.ledger.redis_kv.protobuf
    protobuf_field: str | None = None
    protobuf_fields: dict[str, tuple[int, str]] = field(default_factory=dict)
    holds: dict[str, frozenset[str]] = field(default_factory=dict)
    detect_keys: tuple[str, ...] = ()
    text: str = ""
    origin: str = ""

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    # ------------------------------------------------------------------------------ value access

    def split_key(self, key: str) -> tuple[str, str, str | None] | None:
        """(scope, idempotency key, kind or None) captured from a Redis key, or None when the key is
        not one of this layout's (no match, or excluded)."""
        if self.exclude_regex is not None and self.exclude_regex.search(key):
            return None
        m = self.key_regex.match(key)
        if m is None:
            return None
        g = m.groupdict()
        return (g.get("scope") or self.scope or "", g["key"], g.get("kind"))

    def get(self, value: dict, name: str) -> Any:
        """A value field by dotted path (``a.b``); ``None`` when absent."""
        if "." not in name:  # the common case, once per field per key
            return value.get(name) if isinstance(value, dict) else None
        cur: Any = value
        for part in name.split("."):
            if not isinstance(cur, dict) or part not in cur:
                return None
            cur = cur[part]
        return cur

    def raw_status(self, value: Any) -> str | None:
        """The stored status text of a decoded value (the whole value for ``plain``), or ``None``."""
        if self.encoding == "plain":
            return value if isinstance(value, str) else None
        if self.status_field is None or not isinstance(value, dict):
            return None
        v = self.get(value, self.status_field)
        return None if v is None else str(v)

    def status(self, raw: str | None) -> Status:
        """The normalized status of a raw status (``default`` when unmapped or missing)."""
        return Status(self.status_map.get(raw, self.status_default)) if raw is not None else Status(self.status_default)

    def required_fields(self) -> set[str]:
        """Value fields whose presence identifies this layout in a sample (detection)."""
        out = set(self.detect_fields)
        if self.status_field:
            out.add(self.status_field.split(".")[0])
        return out


def _err(where: str, msg: str) -> LayoutError:
    return LayoutError(f"key-value layout {where}: {msg}")


def _names(where: str, v: Any) -> tuple[str, ...]:
    if isinstance(v, str) and v:
        return (v,)
    if isinstance(v, list) and v and all(isinstance(x, str) and x for x in v):
        return tuple(v)
    raise _err(where, f"expected a field name or a list of names, not {v!r}")


def _field(where: str, name: str, v: Any) -> KvField:
    if isinstance(v, str):
        return KvField(fields=(v,))
    if not isinstance(v, dict):
        raise _err(where, f"fields.{name} must be a field name or a table")
    extra = set(v) - {"field", "fields", "first_of", "encoding", "add", "hash_of", "unless_empty"}
    if extra:
        raise _err(where, f"fields.{name} has unknown entries: {', '.join(sorted(extra))}")
    enc = v.get("encoding")
    if name in KV_TIME_FIELDS:
        enc = enc or "iso_text"
        if enc not in KV_TIME_ENCODINGS:
            raise _err(where, f"fields.{name}: encoding {enc!r} is not one of {', '.join(KV_TIME_ENCODINGS)}")
    elif name in KV_PAYLOAD_FIELDS:
        enc = enc or "text"
        if enc not in ("json", "text"):
            raise _err(where, f"fields.{name}: encoding {enc!r} is not json or text")
    elif enc is not None:
        raise _err(where, f"fields.{name} takes no encoding")
    add = v.get("add", 0)
    if isinstance(add, bool) or not isinstance(add, int):
        raise _err(where, f"fields.{name}: add must be a whole number")
    if "unless_empty" in v and "hash_of" not in v:
        raise _err(where, f"fields.{name}: unless_empty goes with hash_of")
    if "hash_of" in v:
        empty = _names(where, v["unless_empty"]) if "unless_empty" in v else ()
        return KvField(hash_of=_names(where, v["hash_of"]), encoding=enc, unless_empty=empty)
    if "fields" in v:
        return KvField(fields=_names(where, v["fields"]), encoding=enc, add=add, gather=True)
    if "first_of" in v:
        return KvField(fields=_names(where, v["first_of"]), encoding=enc, add=add, first_of=True)
    if "field" not in v:
        raise _err(where, f"fields.{name} needs field, fields, first_of or hash_of")
    return KvField(fields=_names(where, v["field"]), encoding=enc, add=add)


#: the sections a key-value layout may have
SECTIONS = frozenset(
    ("layout", "kv", "status", "fields", "attempt", "expiry", "tunables", "detect")
    + ("states", "lock", "duplicates", "members", "events", "protobuf")
)


def _kv_keys(where: str, kv: dict) -> tuple[str, re.Pattern, re.Pattern | None]:
    """([kv] match, key_regex, exclude_regex), validated."""
    extra = set(kv) - {"match", "key_regex", "exclude_regex", "encoding", "scope"}
    if extra:
        raise _err(where, f"[kv] has unknown entries: {', '.join(sorted(extra))}")
    match = kv.get("match")
    if not isinstance(match, str) or not match:
        raise _err(where, "[kv] match (a SCAN MATCH pattern) is required")
    try:
        key_re = re.compile(kv.get("key_regex") or "^(?P<key>.+)$")
        excl = re.compile(kv["exclude_regex"]) if kv.get("exclude_regex") else None
    except (re.error, TypeError) as e:
        raise _err(where, f"[kv] key_regex/exclude_regex is not a valid regular expression: {e}") from None
    if "key" not in key_re.groupindex:
        raise _err(where, "[kv] key_regex needs a named capture (?P<key>...)")
    if set(key_re.groupindex) - {"key", "scope", "kind"}:
        raise _err(where, "[kv] key_regex captures only key, scope and kind")
    return match, key_re, excl


def parse_kv_layout(text: str, origin: str = "<string>") -> KvLayout:
    """Parse and validate key-value layout TOML. Raises :class:`LayoutError` with one clear line."""
    # The KvLayout call names each of its ~30 fields; every section's own validation is a helper
    # (_kv_toml, _kv_keys, _kv_status, _fields, _expiry, _joined, _members, _holds, ...).
    d, meta, name, where = _kv_toml(text, origin)
    kv = d.get("kv")
    if not isinstance(kv, dict):
        raise _err(where, "[kv] is required")
    match, key_re, excl = _kv_keys(where, kv)
    enc = kv.get("encoding", "json")
    if enc not in ENCODINGS:
        raise _err(where, f"[kv] encoding {enc!r} is not one of {', '.join(ENCODINGS)}")
    st, smap = _kv_status(where, d)
    states_key, states, lock_key, group, absent = _joined(where, d)
    lk = d.get("lock") or {}
    lock_zset = _template(where, "lock", lk["zset"], ("scope",)) if "zset" in lk else ""
    members, members_key = _members(where, d)
    dup = d.get("duplicates") or {}
    window_key = _template(where, "duplicates", dup["window_key"], ("group",)) if "window_key" in dup else ""
    events_key = _events_key(where, d)
    lock_type_field, holds = _holds(where, d)
    pb_field, pb_fields = _protobuf(where, d, enc)
    limit_field = dup.get("limit_field")
    if members and enc != "json":
        raise _err(where, "[members] records are JSON objects: [kv] encoding must be json")
    if enc != "plain" and not states and not isinstance(st.get("field"), str):
        raise _err(where, "[status] field is required (the value field holding the status)")
    fields = _fields(where, d)
    if lock_zset and ("lock_expires_at" not in fields or not (group or states or events_key)):
        # the snapshot reads the keys beside the records for layouts with [states], [duplicates] or
        # [events]; a lease narrows the records' own lock end
        raise _err(where, "[lock] zset narrows a lock_expires_at field and goes with [states] or [duplicates]")
    att = d.get("attempt") or {}
    if set(att) - set(ATTEMPT_FIELDS):
        raise _err(where, f"[attempt] knows only {', '.join(ATTEMPT_FIELDS)}")
    exp, wt_fields = _expiry(where, d)
    thr = _retry_threshold(where, d)
    det = d.get("detect") or {}
    return KvLayout(
        name=name,
        title=meta.get("title", name),
        description=meta.get("description", ""),
        source=meta.get("source", ""),
        match=match,
        key_regex=key_re,
        encoding=enc,
        exclude_regex=excl,
        scope=str(kv.get("scope", "")),
        status_field=st.get("field"),
        status_map={str(k): str(v) for k, v in smap.items()},
        status_default=st.get("default", "unknown"),
        fields=fields,
        attempt={str(k): str(v) for k, v in att.items()},
        lock_timeout_seconds=exp.get("lock_timeout_seconds"),
        dedup_window_seconds=exp.get("dedup_window_seconds"),
        write_ttl_seconds=exp.get("write_ttl_seconds"),
        write_time_fields=tuple(wt_fields),
        retry_threshold=thr,
        detect_fields=tuple(det.get("fields") or ()),
        states_key=states_key,
        states=states,
        lock_key=lock_key,
        lock_zset=lock_zset,
        group_field=group,
        absent_reason=absent,
        members=members,
        members_key=members_key,
        lock_type_field=lock_type_field,
        limit_field=limit_field,
        window_key=window_key,
        events_key=events_key,
        holds=holds,
        protobuf_field=pb_field,
        protobuf_fields=pb_fields,
        detect_keys=tuple(det.get("keys") or ()),
        text=text,
        origin=origin,
    )


def _kv_toml(text: str, origin: str) -> tuple[dict, dict, str, str]:
    """The TOML of a key-value layout with its [layout] name checked and no unknown section:
    ``(document, [layout] table, name, where)``, ``where`` naming the layout in error messages."""
    try:
        d = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _err(origin, f"not valid TOML: {e}") from None
    meta = d.get("layout") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name or not name.isprintable() or len(name) > 100:
        raise _err(origin, "[layout] name is required (printable, at most 100 characters)")
    unknown = set(d) - SECTIONS
    if unknown:
        raise _err(origin, f"unknown sections: {', '.join(sorted(unknown))}")
    return d, meta, name, f"{name!r} ({origin})"


def _kv_status(where: str, d: dict) -> tuple[dict, dict]:
    """[status], validated: ``(the section, its map)``; every value mapped to is a known status."""
    st = d.get("status") or {}
    smap = st.get("map") or {}
    statuses = {s.value for s in Status}
    bad = {v for v in list(smap.values()) + [st.get("default", "unknown")] if v not in statuses}
    if bad:
        raise _err(where, f"[status] maps to unknown statuses {sorted(bad)} (known: {', '.join(sorted(statuses))})")
    return st, smap


def _events_key(where: str, d: dict) -> str:
    """[events] key, validated (a template over ``{scope}``); ``""`` without the section."""
    ev = d.get("events") or {}
    if set(ev) - {"key"}:
        raise _err(where, "[events] knows only key")
    return _template(where, "events", ev["key"], ("scope",)) if ev else ""


def _retry_threshold(where: str, d: dict) -> int:
    """tunables.retry_threshold, validated: a whole number >= 0 (default 5)."""
    thr = (d.get("tunables") or {}).get("retry_threshold", 5)
    if isinstance(thr, bool) or not isinstance(thr, int) or thr < 0:
        raise _err(where, "tunables.retry_threshold must be a whole number >= 0")
    return thr


def _fields(where: str, d: dict) -> dict[str, KvField]:
    """[fields], validated: normalized name -> :class:`KvField`."""
    known = KV_TIME_FIELDS + KV_VALUE_FIELDS + KV_PAYLOAD_FIELDS
    fields = {}
    for k, v in (d.get("fields") or {}).items():
        if k not in known:
            raise _err(where, f"[fields] {k!r} is not one of {', '.join(known)}")
        fields[k] = _field(where, k, v)
    return fields


def _expiry(where: str, d: dict) -> tuple[dict[str, float], list[str]]:
    """([expiry] numbers by name, write_time_fields), validated."""
    exp = dict(d.get("expiry") or {})
    wt_fields = exp.pop("write_time_fields", [])
    if set(exp) - {"lock_timeout_seconds", "dedup_window_seconds", "write_ttl_seconds"}:
        raise _err(
            where,
            "[expiry] knows only lock_timeout_seconds, dedup_window_seconds, write_ttl_seconds and "
            "write_time_fields (the TTL is the expiry)",
        )
    if not isinstance(wt_fields, list) or not all(f in KV_TIME_FIELDS for f in wt_fields):
        raise _err(where, f"expiry.write_time_fields must list time fields ({', '.join(KV_TIME_FIELDS)})")
    if wt_fields and "write_ttl_seconds" not in exp:
        raise _err(where, "expiry.write_time_fields needs write_ttl_seconds (the TTL of every write)")
    for k, v in exp.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise _err(where, f"expiry.{k} must be a non-negative number of seconds")
    if exp.get("write_ttl_seconds") == 0:  # the words of --write-ttl 0 (idemview.ledger.inputs.write_ttl_value)
        v = exp["write_ttl_seconds"]
        raise _err(
            where, f"expiry.write_ttl_seconds: {v!r} must be above 0 seconds (the TTL the store sets at every write)"
        )
    return exp, wt_fields


STATE_TYPES = ("list", "zset")


def _template(where: str, section: str, v: Any, needs: tuple[str, ...]) -> str:
    if not isinstance(v, str) or not all("{" + n + "}" in v for n in needs):
        raise _err(where, f"[{section}] key must be a key template with {', '.join('{' + n + '}' for n in needs)}")
    try:
        v.format(scope="s", key="k", state="x", group="g")
    except (KeyError, IndexError, ValueError) as e:
        hint = ""
        if isinstance(e, KeyError):  # e.g. BullMQ's Redis Cluster prefix "{myapp}" (a hash tag), taken literally
            name = str(e.args[0])
            hint = f" (a literal brace is written twice: {{{{{name}}}}} for the text {{{name}}}, e.g. "
            hint += v.replace("{" + name + "}", "{{" + name + "}}") + ")"
        msg = f"[{section}] key may name only {{scope}}, {{key}}, {{state}} and {{group}}{hint}"
        raise _err(where, msg) from None
    return v


def _joined(where: str, d: dict) -> tuple[str, dict[str, str], str, str | None, str]:
    """([states] key template, raw state -> Redis type, [lock] key template, [duplicates] group
    field, absent reason), validated; empty where the layout has none."""
    st = dict(d.get("states") or {})
    states_key = ""
    states: dict[str, str] = {}
    if st:
        states_key = _template(where, "states", st.pop("key", None), ("scope", "state"))
        for k, v in st.items():
            if v not in STATE_TYPES:
                raise _err(where, f"states.{k} must be one of {', '.join(STATE_TYPES)}, not {v!r}")
            states[str(k)] = v
        if not states:
            raise _err(where, "[states] names no state")
    lk = d.get("lock") or {}
    if set(lk) - {"key", "zset"} or len(lk) > 1:
        raise _err(where, "[lock] takes key (a lock key per record) or zset (a sorted set of lock ends)")
    lock_key = _template(where, "lock", lk["key"], ("scope", "key")) if "key" in lk else ""
    dup = d.get("duplicates") or {}
    if set(dup) - {"group_field", "absent_reason", "lock_type_field", "holds", "window_key", "limit_field"}:
        raise _err(
            where,
            "[duplicates] knows only group_field, absent_reason, lock_type_field, holds, window_key and limit_field",
        )
    if "limit_field" in dup and (not isinstance(dup["limit_field"], str) or not dup["limit_field"]):
        raise _err(where, "duplicates.limit_field must name a value field")
    group = dup.get("group_field")
    if dup and (not isinstance(group, str) or not group):
        raise _err(where, "[duplicates] group_field (the value field naming the dedup id) is required")
    absent = dup.get("absent_reason", "")
    if not isinstance(absent, str):
        raise _err(where, "duplicates.absent_reason must be text")
    return states_key, states, lock_key, group, absent


def _members(where: str, d: dict) -> tuple[tuple[MemberSource, ...], str]:
    """([[members.source]] tables, the key field), validated; empty where the layout has none."""
    m = d.get("members")
    if not m:
        return (), ""
    if not isinstance(m, dict) or set(m) - {"key_field", "source"}:
        raise _err(where, "[members] knows only key_field and [[members.source]]")
    key = m.get("key_field")
    if not isinstance(key, str) or not key:
        raise _err(where, "[members] key_field (the value field naming a record) is required")
    out = []
    for i, src in enumerate(m.get("source") or ()):
        at = f"members.source[{i}]"
        if not isinstance(src, dict) or set(src) - SOURCE_ENTRIES:
            raise _err(where, f"{at} knows only match, type, state, key_regex, field_as, value_as and rename")
        ren = src.get("rename") or {}
        if not isinstance(ren, dict) or not all(isinstance(v, str) and v for v in ren.values()):
            raise _err(where, f"{at} rename must map field names to field names")
        if not isinstance(src.get("match"), str) or not src["match"]:
            raise _err(where, f"{at} match (a key name or a SCAN MATCH glob) is required")
        if src.get("type") not in MEMBER_TYPES:
            raise _err(where, f"{at} type must be one of {', '.join(MEMBER_TYPES)}")
        if not isinstance(src.get("state"), str) or not src["state"]:
            raise _err(where, f"{at} state (the raw status of its records) is required")
        try:
            rx = re.compile(src["key_regex"]) if src.get("key_regex") else None
        except (re.error, TypeError) as e:
            raise _err(where, f"{at} key_regex is not a valid regular expression: {e}") from None
        names = {k: src.get(k, k.split("_")[0]) for k in ("field_as", "value_as")}
        if not all(isinstance(v, str) and v for v in names.values()):
            raise _err(where, f"{at} field_as/value_as must be field names")
        out.append(
            MemberSource(
                src["match"], src["type"], src["state"], rx, names["field_as"], names["value_as"], tuple(ren.items())
            )
        )
    if not out:
        raise _err(where, "[members] names no [[members.source]]")
    return tuple(out), key


#: protobuf field types (idemview.ledger.redis_kv.protobuf.FIELD_TYPES, repeated: the layouts never import
#: the ledger)
PROTOBUF_TYPES = ("string", "bytes", "int", "int_nonzero")


def _protobuf(where: str, d: dict, enc: str) -> tuple[str | None, dict[str, tuple[int, str]]]:
    """([protobuf] field, name -> (field number, type)), validated; (None, {}) without the section."""
    pb = d.get("protobuf")
    if pb is None:
        return None, {}
    if not isinstance(pb, dict) or set(pb) - {"field", "fields"}:
        raise _err(where, "[protobuf] knows only field and fields")
    if enc != "hash":
        raise _err(where, "[protobuf] decodes a hash field: [kv] encoding must be hash")
    name = pb.get("field")
    if not isinstance(name, str) or not name:
        raise _err(where, "[protobuf] field (the hash field holding the message) is required")
    fields = pb.get("fields")
    if not isinstance(fields, dict) or not fields:
        raise _err(where, "[protobuf] fields maps names to [field number, type]")
    out: dict[str, tuple[int, str]] = {}
    for k, v in fields.items():
        ok = isinstance(v, list) and len(v) == 2 and isinstance(v[0], int) and not isinstance(v[0], bool)
        if not ok or not 0 < v[0] < 2**29 or v[1] not in PROTOBUF_TYPES:
            raise _err(
                where,
                f"protobuf.fields.{k} must be [field number (1..2^29-1), type ({', '.join(PROTOBUF_TYPES)})]",
            )
        out[str(k)] = (v[0], v[1])
    if len({n for n, _t in out.values()}) != len(out):
        raise _err(where, "protobuf.fields names one field number twice")
    return name, out


def _holds(where: str, d: dict) -> tuple[str | None, dict[str, frozenset[str]]]:
    """([duplicates] lock_type_field, lock type -> raw states whose records hold the lock), validated."""
    dup = d.get("duplicates") or {}
    holds = dup.get("holds")
    field_name = dup.get("lock_type_field")
    if holds is None and field_name is None:
        return None, {}
    if not isinstance(field_name, str) or not field_name or not isinstance(holds, dict):
        raise _err(where, "[duplicates] lock_type_field and holds (lock type -> states) go together")
    out = {}
    for k, v in holds.items():
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise _err(where, f"duplicates.holds.{k} must be a list of raw states")
        out[str(k)] = frozenset(v)
    return field_name, out


def kv_preset_names() -> list[str]:
    """Names of the shipped key-value layouts, sorted."""
    return shipped_names("idemview.layouts.kv_presets")


def load_kv_preset(name: str) -> KvLayout:
    """A shipped key-value layout by name. Raises :class:`LayoutError` naming the known ones."""
    text = shipped_text("idemview.layouts.kv_presets", name)
    if text is None:
        raise LayoutError(f"no key-value preset named {name!r}; known: {', '.join(kv_preset_names())}")
    return parse_kv_layout(text, origin=f"preset {name}")


def load_kv_layout(spec: str) -> KvLayout:
    """A key-value preset name or a path to a key-value layout TOML file. Raises :class:`LayoutError`."""
    p = Path(spec)
    if spec.endswith(".toml") or p.is_file():
        try:
            return parse_kv_layout(p.read_text("utf-8"), origin=str(p))
        except OSError as e:
            raise LayoutError(f"cannot read layout file {spec}: {e.strerror}") from None
    return load_kv_preset(spec)


def all_kv_presets() -> list[KvLayout]:
    """Every shipped key-value layout, by name."""
    return [load_kv_preset(n) for n in kv_preset_names()]
