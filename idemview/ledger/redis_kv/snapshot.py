"""A Redis snapshot: every key a key-value layout selects, read once into in-memory SQLite.

A consistent snapshot, bounded
    ``SCAN`` with ``MATCH`` in batches (``COUNT``; never ``KEYS``, which blocks the server), and for each
    batch one pipeline of ``GET``/``HGETALL`` + ``PTTL`` per key. SCAN guarantees every key present for
    the whole scan is returned (possibly twice: the twin is dropped when the unique (scope, key) index
    is built, after the load); a key that expires between SCAN and GET is counted as gone. The next
    batch is read on a thread while this one is decoded and loaded (the socket wait releases the
    GIL); from :data:`~idemview.ledger.redis_kv.mapping.WORKER_MIN_KEYS` keys the decoding and mapping
    run in a second process. Progress is reported per batch and a
    :class:`~idemview.services.cancel.CancelToken` stops it between batches. The server's own clock
    (``TIME``) is read before and after; ``expires_at`` = server time at the read + PTTL, so the TTL is
    exact whatever the local clock says, and the server time is shown beside ``now``. The database
    set-up is the one every snapshot shares (:mod:`idemview.ledger.memory_snapshot`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from idemview.layouts.kv import KvLayout
from idemview.ledger import memory_snapshot as mem
from idemview.ledger.redis_kv import mapping
from idemview.ledger.redis_kv.client import (
    SCAN_COUNT,
    _scan_batches,
    per_key_reads,
    raise_refused,
    safe_redis_url,
    server_time,
    write_rights,
)
from idemview.ledger.redis_kv.decode import compile_layout
from idemview.ledger.redis_kv.mapping import _Mapper


@dataclass(kw_only=True)
class SnapshotInfo(mem.MemorySnapshotInfo):
    """What a snapshot read: where (``url`` without credentials, ``db``), the ``pattern`` (SCAN MATCH)
    and layout, when (``started_at``/``finished_at`` on idemview's clock, ``server_time`` = the
    server's ``TIME`` at the start, all UTC; ``clock_skew_s`` = server - local in seconds), and counts:
    ``scanned`` keys SCAN returned, ``loaded`` records, ``not_matching`` keys the key regex rejected,
    ``gone`` keys deleted or expired between SCAN and read, ``wrong_type``/``undecodable`` values.
    ``clock`` is "local" when the Redis user may not run TIME (LOCAL_CLOCK_NOTE). The shared fields
    and :meth:`to_json` are :class:`~idemview.ledger.memory_snapshot.MemorySnapshotInfo`'s."""

    db: int
    pattern: str
    gone: int = 0
    wrong_type: int = 0
    without_ttl: int = 0
    #: records whose empty time fields took their write time from the TTL ([expiry] write_ttl_seconds),
    #: and records whose remaining TTL exceeded that configured TTL (nothing derived for those)
    write_times: int = 0
    write_ttl_above: int = 0
    redis_version: str = ""
    write_warning: str | None = None
    #: counts of :func:`idemview.ledger.redis_joins.join_keys` (states, locks, dedup groups), if any
    joined: dict | None = None
    #: what the reader should know about this snapshot's limits, in plain words (e.g. removeOnComplete)
    notes: list[str] = field(default_factory=list)

    def server_line(self) -> str:
        """The scan report's ``server`` line (the "as of" and what was read), then one ``note`` line per
        entry of :attr:`notes` (what this snapshot could not read, or read from TTLs)."""
        from idemview.ledger.times import iso

        line = (
            f"server   {iso(self.server_time)} (Redis TIME at the snapshot; {self.scanned} keys scanned "
            f"matching {self.pattern!r}, {self.loaded} records, {self.without_ttl} without TTL, "
            f"{self.gone} gone while reading, {self.undecodable + self.wrong_type} unreadable)"
        )
        return "\n".join([line, *(f"note     {n}" for n in self.notes)])


def _read_batches(client, kv: KvLayout, read: str, batch: int, token):
    """(keys scanned, keys skipped, [(key, (scope, key, kind))], server time at the read (epoch s),
    values, PTTLs) per SCAN batch: one pipeline of MGET (or HGETALL per key) + PTTL per key."""
    for keys in _scan_batches(client, kv.match, batch, token):
        wanted = []
        for k in keys:
            parts = kv.split_key(bytes(k).decode("utf-8", "backslashreplace"))
            if parts is not None:
                wanted.append((k, parts))
        if not wanted:
            yield len(keys), len(keys), [], 0.0, [], []
            continue
        # Read time of this batch on the server's clock: PTTL is relative to it. A layout that reads
        # write times from TTLs asks PEXPIRETIME (Redis >= 7: the expiry itself, in ms), so that a write
        # time is the same whenever it is read; PTTL where the server or the user cannot.
        exact = bool(kv.write_time_fields) and not getattr(client, "_idem_no_pexpiretime", False)
        at, values, pttls = _pipeline_read(client, read, wanted, "PEXPIRETIME" if exact else "PTTL")
        if exact and any(isinstance(x, Exception) for x in pttls):
            client._idem_no_pexpiretime = True
            at, values, pttls = _pipeline_read(client, read, wanted, "PTTL")
        elif exact:  # as PTTLs from the read time's whole ms: int(at * 1000) + pttl is the expiry
            base = int(at * 1000)
            pttls = [x - base if isinstance(x, int) and x >= 0 else x for x in pttls]
        raise_refused([values] if read == "GET" else values)  # MGET: one answer; else one per key
        raise_refused(pttls)
        yield len(keys), len(keys) - len(wanted), wanted, at, values, pttls


def _pipeline_read(client, read: str, wanted: list, ttl_cmd: str) -> tuple[float, list, list]:
    """(read time, values, TTL answers) of one pipeline (:func:`~idemview.ledger.redis_kv.client.per_key_reads`):
    TIME (when the user may), then MGET (or ``read`` per key) and ``ttl_cmd`` (PTTL or PEXPIRETIME) per
    key of ``wanted``."""
    server_clock = not getattr(client, "_idem_local_clock", False)
    before: list[tuple] = [("TIME",)] if server_clock else []
    keys = [k for k, _p in wanted]
    if read == "GET":  # one MGET per batch (a wrong-type key reads as nil there)
        before.append(("MGET", *keys))
        per_key: tuple[str, ...] = (ttl_cmd,)
    else:
        per_key = (read, ttl_cmd)
    local_at = time.time()
    res = per_key_reads(client, before, per_key, keys)
    if not server_clock:  # a user refused TIME (see server_time): the local clock at the read
        res = [None, *res]
    if server_clock and isinstance(res[0], Exception):
        client._idem_local_clock = True
        at = local_at
    elif server_clock:
        now_s, now_us = res[0]
        at = int(now_s) + int(now_us) / 1e6
    else:
        at = local_at
    if read == "GET":
        return at, res[1], res[2:]
    return at, res[1::2], res[2::2]


def _reads(client, kv: KvLayout, batch: int, token):
    """``(keys scanned, keys skipped, [(scope, key, kind)], read time, values, PTTLs)`` per SCAN batch."""
    if kv.members:  # records are members of other keys (Sidekiq's queues and sets)
        from idemview.ledger.redis_kv.members import member_batches

        yield from member_batches(client, kv, batch, token)
        return
    read = "HGETALL" if kv.encoding == "hash" else "GET"
    for n_scanned, n_skipped, wanted, at, values, pttls in _read_batches(client, kv, read, batch, token):
        yield n_scanned, n_skipped, [p for _k, p in wanted], at, values, pttls


def _rows(client, kv: KvLayout, batch: int, token):
    """:meth:`_Mapper.batch` of every batch, in this process; the next batch read on a thread
    (:func:`~idemview.ledger.memory_snapshot.prefetched`) while this one is mapped and loaded."""
    m = _Mapper(kv)
    for item in mem.prefetched(_reads(client, kv, batch, token), token):
        yield m.batch(*item)


def _dbsize(client) -> int:
    import redis

    try:
        return int(client.dbsize())
    except redis.exceptions.RedisError:
        return 0


def snapshot(
    client,
    kv: KvLayout,
    *,
    url: str = "",
    batch: int = SCAN_COUNT,
    progress: Callable[[int, int], Any] | None = None,
    token=None,
    check_rights: bool = True,
    worker: bool | None = None,
    spill: bool | None = None,
):
    """Read every key of ``kv`` into a fresh in-memory SQLite database in the reference layout.

    Returns ``(engine, info)``: a read-only SQLAlchemy engine and a :class:`SnapshotInfo`.
    ``progress(scanned, loaded)`` is called after each batch; ``token`` (a
    :class:`~idemview.services.cancel.CancelToken`) is checked between batches and raises
    :class:`~idemview.services.cancel.Cancelled`. Redis errors propagate as ``redis.RedisError``.

    ``worker``: decode and map the values in a second process while this one reads Redis and loads
    SQLite, so two cores work; ``None`` (default) does so when the database holds at least
    :data:`~idemview.ledger.redis_kv.mapping.WORKER_MIN_KEYS` keys. The rows are the same either way.

    ``spill``: the snapshot's pages beyond a bounded cache in an unlinked temporary file
    (:func:`~idemview.ledger.memory_snapshot.new_memory_db`, where the exposure judgment is), so that
    the memory does not grow with the keyspace; ``None`` (default) does so from
    :data:`~idemview.ledger.redis_kv.mapping.SPILL_MIN_KEYS` keys (DBSIZE). The rows are the same."""
    info = _start_info(client, kv, url, check_rights)
    size = _dbsize(client) if worker is None or spill is None else 0
    if spill is None:
        spill = size >= mapping.SPILL_MIN_KEYS
    uri, keeper, indexes = mem.new_memory_db("redis", spill=spill)
    if kv.group_field:
        from idemview.ledger.redis_joins import GROUP_COLUMN

        keeper.execute(f"ALTER TABLE operations ADD COLUMN {GROUP_COLUMN} TEXT")
        if kv.limit_field:
            from idemview.ledger.redis_joins import LIMIT_COLUMN

            keeper.execute(f"ALTER TABLE operations ADD COLUMN {LIMIT_COLUMN} INTEGER")
    info.set_server_time(server_time(client))
    op_sql, att_sql = mem.insert_statements(compile_layout(kv).columns)
    if worker is None:  # a second process pays off on a large keyspace only (it starts in ~1 s)
        worker = not getattr(sys, "frozen", False) and size >= mapping.WORKER_MIN_KEYS
    if worker:
        rows = mapping.rows_in_worker(_reads(client, kv, batch, None), kv, token)
    else:
        rows = _rows(client, kv, batch, token)
    with mem.loading(keeper):
        for counts, ops, atts in rows:
            info.scanned += counts[0]
            info.not_matching += counts[1]
            info.gone += counts[2]
            info.wrong_type += counts[3]
            info.undecodable += counts[4]
            info.without_ttl += counts[5]
            info.write_times += counts[6]
            info.write_ttl_above += counts[7]
            info.load(keeper, op_sql, att_sql, ops, atts)
            if progress:
                progress(info.scanned, info.loaded)

        def joins() -> None:  # the keys beside the records, once the unique (scope, key) index exists
            if kv.states or kv.lock_key or kv.group_field or kv.events_key:
                from idemview.ledger.redis_joins import join_keys

                info.joined = join_keys(client, keeper, kv, indexes[0], server_time, token)

        info.loaded -= mem.finish(keeper, indexes, joins)
        info.server_time_end = server_time(client)
        info.finished_at = datetime.now(UTC)
        if getattr(client, "_idem_local_clock", False):
            info.clock, info.clock_skew_s = "local", None
    return mem.memory_engine(uri, keeper), info


def _start_info(client, kv: KvLayout, url: str, check_rights: bool) -> SnapshotInfo:
    """The :class:`SnapshotInfo` of a snapshot about to start: where, the server's version and (when
    ``check_rights``) the warning of :func:`~idemview.ledger.redis_kv.client.write_rights`."""
    import redis

    info = SnapshotInfo(
        url=safe_redis_url(url) if url else "",
        db=int(client.connection_pool.connection_kwargs.get("db") or 0),
        pattern=", ".join(m.match for m in kv.members) if kv.members else kv.match,
        layout=kv.name,
        started_at=datetime.now(UTC),
    )
    try:
        info.redis_version = str((client.info("server") or {}).get("redis_version", ""))
    except redis.exceptions.RedisError:
        pass  # INFO may be denied to a restricted user: the version is only informative
    if check_rights:
        info.write_warning = write_rights(client)
    return info
