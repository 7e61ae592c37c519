"""Records that are members of other keys (``[members]``, :mod:`idemview.layouts.kv`): read in pages.

Sidekiq keeps a job as a JSON member of a queue list (``queue:<name>``) or of the ``schedule``,
``retry`` and ``dead`` sorted sets, and sidekiq-unique-jobs a lock as a field of the hash
``uniquejobs:<digest>:LOCKED`` (job id -> lock time). :func:`member_batches` reads the containers a
layout's ``[[members.source]]`` tables name (a literal name directly, a glob with SCAN MATCH) and yields
the records in the read batches the snapshot's mapper takes (:class:`~idemview.ledger.redis_kv.mapping._Mapper`),
so the rest of the snapshot is the same as for one record per key:

- a list is read with ``LRANGE`` and a sorted set with ``ZRANGE … WITHSCORES`` in pages of ``batch``
  members (bounded memory on any length); a hash (one per container key) with ``HGETALL``;
- each record is keyed by its ``key_field`` (a list/zset member; read twice when the list moved under
  the paging, the twin is dropped as SCAN's are) or by ``<container>#<field>`` (a hash field: a job and
  its lock entry share the job id); a grouped record is keyed by its dedup id afterwards;
- each record is the member's JSON object (a member that is not one counts as undecodable) plus
  ``_state`` (the source's raw status), ``_container`` (the key) and ``_score`` (a sorted set's score:
  Sidekiq's retry/run/death time), and the named captures of the source's ``key_regex``; a hash field
  is ``{field_as: field}`` with its value merged in when it is a JSON object, else under ``value_as``;
- the container's TTL is each of its records' (``PTTL``, on the server's clock at the read).

Only read commands are sent (SCAN, LRANGE, ZRANGE, HGETALL, PTTL, TIME), through the allowlisted client.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from idemview.layouts.kv import KvLayout, MemberSource
from idemview.ledger.redis_kv.client import _scan_batches, raise_refused
from idemview.ledger.redis_kv.decode import _loads


def _at(client, res0, local_at: float) -> float:
    """The read time (epoch s) from a pipeline's leading ``TIME`` answer (see ``snapshot._read_batches``)."""
    if getattr(client, "_idem_local_clock", False) or res0 is None:
        return local_at
    if isinstance(res0, Exception):  # a user refused TIME: the local clock from now on
        client._idem_local_clock = True
        return local_at
    s, us = res0
    return int(s) + int(us) / 1e6


def _pipeline(client, commands: list[tuple]) -> tuple[float, list]:
    """(read time, answers) of ``commands`` run in one pipeline after ``TIME`` (when the user may)."""
    pipe = client.pipeline(transaction=False)
    server_clock = not getattr(client, "_idem_local_clock", False)
    if server_clock:
        pipe.time()
    for cmd in commands:
        pipe.execute_command(*cmd)
    local_at = time.time()
    res = pipe.execute(raise_on_error=False)
    if not server_clock:
        raise_refused(res)
        return local_at, res
    raise_refused(res[1:])  # a read the user may not run stops the snapshot (TIME's refusal: local clock)
    return _at(client, res[0], local_at), res[1:]


def _text(b) -> str:
    return bytes(b).decode("utf-8", "backslashreplace") if isinstance(b, (bytes, bytearray)) else str(b)


def _containers(client, src: MemberSource, count: int, token) -> Iterator[list[tuple[Any, str]]]:
    """The container keys of ``src`` in SCAN batches, as (the key's own bytes, its text for display and
    matching); a literal name: itself, read without SCAN. Commands are sent with the bytes: a key name
    need not be UTF-8, and its text (undecodable bytes as ``\\xff``) names another key."""
    if src.literal:
        yield [(src.match, src.match)]
        return
    for keys in _scan_batches(client, src.match, count, token):
        yield [(k, _text(k)) for k in keys]


def _record(raw, src: MemberSource, container: str, caps: dict, score=None) -> dict | None:
    """A list/zset member as a record (``None`` when it is not a JSON object)."""
    try:
        obj = _loads(_text(raw))
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    for k, v in caps.items():
        obj.setdefault(k, v)
    _rename(obj, src)
    obj["_state"] = src.state
    obj["_container"] = container
    if score is not None:
        obj["_score"] = score
    return obj


def _hash_records(fields: dict, src: MemberSource, container: str, caps: dict) -> list[dict]:
    """Each field of a hash as a record: ``{field_as: field}`` and its value (merged when a JSON object:
    sidekiq-unique-jobs v9's lock metadata; else under ``value_as``: v8's bare lock time)."""
    out = []
    for f, v in fields.items():
        rec: dict[str, Any] = dict(caps)
        text = _text(v)
        try:
            val: Any = _loads(text)
        except ValueError:
            val = text
        if isinstance(val, dict):
            rec.update(val)
        else:
            rec[src.value_as] = val
        rec[src.field_as] = _text(f)
        _rename(rec, src)
        rec["_state"] = src.state
        rec["_container"] = container
        out.append(rec)
    return out


def _rename(rec: dict, src: MemberSource) -> None:
    """Give ``rec`` the other names of ``src.rename`` where it lacks them."""
    for old, new in src.rename:
        if old in rec and new not in rec:
            rec[new] = rec[old]


class _Batcher:
    """Records gathered into read batches of at most ``size``: ``(scanned, skipped, parts, at, values,
    PTTLs)``, the PTTLs made relative to the batch's first read time (containers are read at different
    times; the mapper computes ``expires_at`` = batch time + PTTL)."""

    def __init__(self, kv: KvLayout, size: int):
        self.kv, self.size = kv, size
        self.key_get = kv.members_key
        self.scanned = self.skipped = 0
        self.parts: list = []
        self.values: list = []
        self.pttls: list = []
        self.at: float | None = None

    def add(self, rec: Any, container: str, n: int, at: float, pttl: int, key: str | None = None) -> None:
        """One record (``key``: its key before grouping, else the layout's key field; a hash field's is
        ``<container>#<field>``, so a job and its lock entry, which share the job id, are not twins)."""
        self.scanned += 1
        if self.at is None:
            self.at = at
        if pttl >= 0:
            pttl = max(0, pttl + int(round((at - self.at) * 1000)))
        if key is None and isinstance(rec, dict):
            key = self.kv.get(rec, self.key_get)
        if isinstance(rec, dict) and (key is None or key == ""):
            self.skipped += 1  # a record without a key (a job JSON without jid): not one of the layout's
            return
        self.parts.append((self.kv.scope, _text(key) if key is not None else f"{container}#{n}", None))
        self.values.append(rec if rec is not None else b"\xff")  # not a JSON object: undecodable
        self.pttls.append(pttl if pttl != -2 else -1)

    def gone(self, container: str, at: float) -> None:
        """A container SCAN named that was deleted before its read (a released lock, a drained queue):
        counted as gone, as the mapper counts a key read as nil with PTTL -2."""
        self.scanned += 1
        if self.at is None:
            self.at = at
        self.parts.append((self.kv.scope, f"{container}#gone", None))
        self.values.append(None)
        self.pttls.append(-2)

    def full(self) -> bool:
        return len(self.parts) >= self.size

    def take(self) -> tuple:
        out = (self.scanned, self.skipped, self.parts, self.at or 0.0, self.values, self.pttls)
        self.scanned = self.skipped = 0
        self.parts, self.values, self.pttls, self.at = [], [], [], None
        return out


def member_batches(client, kv: KvLayout, batch: int, token) -> Iterator[tuple]:
    """The read batches of a ``[members]`` layout (the shape of ``snapshot._reads``). A container of
    another type than its source says counts as one wrong-type value; Redis errors propagate."""
    import redis

    out = _Batcher(kv, batch)
    for src in kv.members:
        for names in _containers(client, src, batch, token):
            wanted = []
            for key, name in names:
                m = src.key_regex.match(name) if src.key_regex is not None else None
                if src.key_regex is not None and m is None:
                    continue
                wanted.append((key, name, {k: v for k, v in (m.groupdict() if m else {}).items() if v is not None}))
            if not wanted:
                continue
            if src.type == "hash":  # one HGETALL per container, pipelined per SCAN batch
                at, res = _pipeline(client, [c for key, _, _ in wanted for c in (("HGETALL", key), ("PTTL", key))])
                for (_key, name, caps), fields, pttl in zip(wanted, res[0::2], res[1::2], strict=True):
                    if isinstance(fields, redis.exceptions.ResponseError):
                        out.add(fields, name, 0, at, -1)
                        continue
                    if not fields and pttl == -2:  # deleted since SCAN named it
                        out.gone(name, at)
                        continue
                    for i, rec in enumerate(_hash_records(fields or {}, src, name, caps)):
                        out.add(rec, name, i, at, int(pttl), f"{name}#{rec[src.field_as]}")
                    if out.full():
                        yield out.take()
                continue
            for key, name, caps in wanted:
                yield from _paged(client, src, key, name, caps, batch, token, out)
    if out.parts or out.scanned:
        yield out.take()


def _paged(client, src: MemberSource, key, name: str, caps: dict, page: int, token, out: _Batcher) -> Iterator[tuple]:
    """The members of the list or sorted set ``key`` (its bytes; ``name``: its text), ``page`` at a time,
    into ``out`` (full batches yielded)."""
    import redis

    start = 0
    at, (pttl,) = _pipeline(client, [("PTTL", key)])
    pttl = int(pttl) if not isinstance(pttl, Exception) else -1
    if pttl == -2:  # deleted since SCAN named it (a literal name: absent)
        if not src.literal:
            out.gone(name, at)
        return
    while True:
        if token is not None:
            token.check()
        if src.type == "list":
            cmd: tuple = ("LRANGE", key, start, start + page - 1)
        else:
            cmd = ("ZRANGE", key, start, start + page - 1, "WITHSCORES")
        try:
            got = client.execute_command(*cmd)
        except redis.exceptions.NoPermissionError:
            raise  # the user may not run LRANGE/ZRANGE: not a value (client.raise_refused)
        except redis.exceptions.ResponseError as e:  # WRONGTYPE: counted, the snapshot goes on
            out.add(e, name, start, at, -1)
            return
        if not got:
            return
        items: list[tuple[Any, float | None]]
        if src.type == "list":
            items = [(m, None) for m in got]
        elif got and isinstance(got[0], (list, tuple)):  # RESP3-style pairs
            items = [(m, float(s)) for m, s in got]
        else:
            items = [(got[i], float(got[i + 1])) for i in range(0, len(got), 2)]
        for i, (m, score) in enumerate(items):
            out.add(_record(m, src, name, caps, score), name, start + i, at, pttl)
            if out.full():
                yield out.take()
        if len(items) < page:
            return
        start += page
