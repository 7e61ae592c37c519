"""Keys beside the records (issue #26): a job's state, lock and dedup group, read after the load.

A job queue such as BullMQ keeps one hash per job, but the job's state is which list or sorted set
holds its id (``bull:<queue>:wait``, ``…:active``, ``…:completed``…; src/commands/moveToFinished-14.lua
moves an id from ``active`` to ``completed``/``failed``), and the lock of an active job is a key of its
own (``bull:<queue>:<id>:lock``, ``SET … PX lockDuration`` in includes/prepareJobForProcessing.lua,
renewed by the worker; a job in ``active`` without it was left by a dead worker: "stalled"). The layout
names those keys (``[states]``, ``[lock]``, :mod:`idemview.layouts.kv`); :func:`join_keys` reads them
once the records are in the snapshot's SQLite database and writes what they say into the records:

- states: for each scope (queue) present and each state, the state key's members are read in pages of
  :data:`PAGE` (``LRANGE`` / ``ZRANGE`` by index: bounded memory on any list length) and the records
  with those ids get the state as their raw status;
- locks: the lock key of every in-progress record is asked for its ``PTTL`` (pipelined, in pages): the
  lock's end is the read time + PTTL; a missing lock key means the lock had expired when it was read,
  so the lock's end is taken as that read time (at the latest: the true expiry is earlier);
- groups (``[duplicates] group_field``): records sharing a dedup id become one idempotency key (the
  job id stays the key of a job without one), so the unique (scope, key) index is replaced by a plain
  one after SCAN's twins were dropped.

Only read commands are sent, through the same allowlisted connection as the snapshot.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from idemview.domain.model import Status
from idemview.layouts.kv import KvLayout

PAGE = 1000  # members per LRANGE/ZRANGE call, PTTLs per pipeline

#: The column the snapshot loads a record's dedup id into (``[duplicates] group_field``) until the
#: records are grouped by it (:func:`join_keys`).
GROUP_COLUMN = "_dedup_group"
#: the holder limit of a record's dedup id ([duplicates] limit_field), loaded beside GROUP_COLUMN
LIMIT_COLUMN = "_dedup_limit"


def _when(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def _lease_end(score) -> str | None:
    """The lock end a lease score (unix seconds) says, or ``None`` when it is no time: ZADD accepts
    ``inf``/``-inf`` and any double, and a datetime holds only years 1 to 9999."""
    try:
        return _when(float(score))
    except (ValueError, OverflowError, OSError):
        return None


def _members(client, key: str, kind: str, token=None):
    """The members of a list or sorted set, page by page (lists of str)."""
    start = 0
    while True:
        if token is not None:
            token.check()
        if kind == "list":
            page = client.execute_command("LRANGE", key, start, start + PAGE - 1)
        else:
            page = client.execute_command("ZRANGE", key, start, start + PAGE - 1)
        if not page:
            return
        yield [bytes(m).decode("utf-8", "backslashreplace") for m in page]
        if len(page) < PAGE:
            return
        start += PAGE


def join_keys(
    client, db: sqlite3.Connection, kv: KvLayout, unique_index: str, clock: Callable[[Any], datetime], token=None
) -> dict:
    """Apply ``kv``'s ``[states]``, ``[lock]``, ``[events]`` and ``[duplicates]`` to the loaded
    ``operations`` rows of ``db`` (the snapshot's keeper connection; the unique (scope, key) index
    ``unique_index`` built). Returns counts: ``{"stated": records given a state, "locks_missing":
    in-progress records whose lock key was gone, "grouped": records keyed by their dedup id,
    "completed": completed records, "windows": dedup keys read (``window_key``), "windows_gone": dedup
    keys naming a record that is gone, "completed_removed": completed events of jobs whose record is
    gone, "rerun_ids": such job ids completed more than once}`` (the last four only with the sections).
    ``clock(client)`` is the read time (aware UTC; the snapshot's ``server_time``: the server's clock,
    the local one for a user refused TIME). Redis errors propagate (``redis.RedisError``)."""
    out = {"stated": 0, "locks_missing": 0, "grouped": 0, "completed": 0}
    scopes = [r[0] for r in db.execute("SELECT DISTINCT scope FROM operations")]
    if kv.states:
        _states(client, db, kv, scopes, token, out)
    if kv.lock_key:
        _locks(client, db, kv, clock, token, out)
    if kv.lock_zset:
        _lease_locks(client, db, kv, token, out)
    if kv.events_key:  # before grouping: the events name job ids, the records are still keyed by them
        _events(client, db, kv, scopes, token, out)
    if kv.window_key and kv.group_field:
        _windows(client, db, kv, clock, token, out)
    if kv.group_field:
        _group(db, unique_index, out, bool(kv.limit_field))
    done = [s for s in kv.states if kv.status(s) == Status.COMPLETED] or [
        k for k, v in kv.status_map.items() if v == Status.COMPLETED.value
    ]
    if done:
        marks = ",".join("?" * len(done))
        out["completed"] = db.execute(f"SELECT count(*) FROM operations WHERE status IN ({marks})", done).fetchone()[0]
    return out


def _states(client, db: sqlite3.Connection, kv: KvLayout, scopes: list[str], token, out: dict) -> None:
    """Each record's raw status = the state whose key lists its id (``[states]``)."""
    import redis

    for scope in scopes:
        for state, kind in kv.states.items():
            key = kv.states_key.format(scope=scope, state=state)
            try:
                for page in _members(client, key, kind, token):
                    cur = db.executemany(
                        "UPDATE operations SET status = ? WHERE scope = ? AND idempotency_key = ?",
                        [(state, scope, m) for m in page],
                    )
                    out["stated"] += max(cur.rowcount, 0)
            except redis.exceptions.NoPermissionError:
                raise  # the user may not run LRANGE/ZRANGE: not an empty state (client.raise_refused)
            except redis.exceptions.ResponseError:
                continue  # a key of another type (WRONGTYPE): this state lists nothing here


def _locks(client, db: sqlite3.Connection, kv: KvLayout, clock, token, out: dict) -> None:
    """``lock_expires_at`` of every in-progress record from its lock key's PTTL (``[lock]``)."""
    active = [s for s in kv.states if kv.status(s) == Status.IN_PROGRESS] or [
        k for k, v in kv.status_map.items() if v == Status.IN_PROGRESS.value
    ]
    if not active:
        return
    marks = ",".join("?" * len(active))
    rows = db.execute(f"SELECT id, scope, idempotency_key FROM operations WHERE status IN ({marks})", active).fetchall()
    for i in range(0, len(rows), PAGE):
        if token is not None:
            token.check()
        page = rows[i : i + PAGE]
        # the read time on the server's clock (the local one for a user refused TIME)
        at = clock(client).timestamp()
        pipe = client.pipeline(transaction=False)
        for _rid, scope, key in page:
            pipe.execute_command("PTTL", kv.lock_key.format(scope=scope, key=key))
        res = pipe.execute()
        upd = []
        for (rid, _s, _k), pttl in zip(page, res, strict=True):
            pttl = int(pttl)
            if pttl >= 0:
                upd.append((_when(at + pttl / 1000.0), rid))
            elif pttl == -2:  # gone: expired at the latest at this read
                upd.append((_when(at), rid))
                out["locks_missing"] += 1
        db.executemany("UPDATE operations SET lock_expires_at = ? WHERE id = ?", upd)


def _lease_locks(client, db: sqlite3.Connection, kv: KvLayout, token, out: dict) -> None:
    """``lock_expires_at`` of every in-progress record from a sorted set of lock ends (``[lock] zset``:
    Asynq's ``asynq:{<queue>}:lease``, member = task id, score = the lease's end in unix seconds, ZADDed
    by rdb.go Dequeue and extended by a live worker's heartbeat, ExtendLease): the earlier of that and
    the record's own end (its deadline) holds. Read with ZRANGE … WITHSCORES in pages of :data:`PAGE`;
    counts ``out["leases"]``, the records given a lease, and ``out["leases_unreadable"]``, the records
    whose score is no time (``inf``, ``-inf``, past year 9999: their lock end stays unknown, their own
    deadline holds), with ``out["lease_keys_unreadable"]`` the sorted set names holding those."""
    active = [k for k, v in kv.status_map.items() if v == Status.IN_PROGRESS.value]
    if not active:
        return
    marks = ",".join("?" * len(active))
    rows = db.execute(f"SELECT id, scope, idempotency_key FROM operations WHERE status IN ({marks})", active).fetchall()
    out["leases"] = out["leases_unreadable"] = 0
    out["lease_keys_unreadable"] = []
    by_scope: dict[str, list[tuple[int, str]]] = {}
    for rid, scope, key in rows:
        by_scope.setdefault(scope, []).append((rid, key))
    for scope, recs in by_scope.items():
        key = kv.lock_zset.format(scope=scope)
        ends: dict[str, str | None] = {}
        start = 0
        while True:
            if token is not None:
                token.check()
            page = client.execute_command("ZRANGE", key, start, start + PAGE - 1, "WITHSCORES")
            # [member, score] pairs (redis-py's WITHSCORES callback), or a flat reply
            flat = bool(page) and not isinstance(page[0], (list, tuple))
            pairs = list(zip(page[::2], page[1::2], strict=True)) if flat else list(page or ())
            for m, score in pairs:
                ends[bytes(m).decode("utf-8", "backslashreplace")] = _lease_end(score)
            if not page or len(pairs) < PAGE:
                break
            start += PAGE
        upd = [(ends[k], rid) for rid, k in recs if ends.get(k) is not None]
        bad = sum(1 for _rid, k in recs if k in ends and ends[k] is None)
        if bad:
            out["leases_unreadable"] += bad
            out["lease_keys_unreadable"].append(key)
        db.executemany(
            "UPDATE operations SET lock_expires_at = CASE WHEN lock_expires_at IS NULL OR lock_expires_at > ?1 "
            "THEN ?1 ELSE lock_expires_at END WHERE id = ?2",
            upd,
        )
        out["leases"] += len(upd)


def _windows(client, db: sqlite3.Connection, kv: KvLayout, clock, token, out: dict) -> None:
    """The dedup keys (``[duplicates] window_key``, BullMQ's ``bull:<queue>:de:<dedup id>``: ``SET … PX
    ttl`` in includes/setDeduplicationKey.lua, its value the job id holding the id): the holding record's
    ``expires_at`` = read time + PTTL (the end of its dedup window; none when the key has no TTL: held
    until the job finishes). A dedup key naming a job whose record is gone counts in ``windows_gone``."""
    import redis

    g = GROUP_COLUMN
    rows = db.execute(f"SELECT DISTINCT scope, {g} FROM operations WHERE {g} IS NOT NULL AND {g} <> ''").fetchall()
    out["windows"] = out["windows_gone"] = 0
    for i in range(0, len(rows), PAGE):
        if token is not None:
            token.check()
        page = rows[i : i + PAGE]
        at = clock(client).timestamp()
        pipe = client.pipeline(transaction=False)
        for scope, group in page:
            k = kv.window_key.format(scope=scope, group=group)
            pipe.execute_command("GET", k)
            pipe.execute_command("PTTL", k)
        res = pipe.execute(raise_on_error=False)
        for a in res:  # a read the user may not run is not an absent key (redis_kv.client.raise_refused)
            if isinstance(a, redis.exceptions.NoPermissionError):
                raise a
        upd = []
        for (scope, _g), holder, pttl in zip(page, res[0::2], res[1::2], strict=True):
            if not isinstance(holder, (bytes, bytearray)):
                continue  # no dedup key (the window passed, or the job finished): nothing to read
            out["windows"] += 1
            job = bytes(holder).decode("utf-8", "backslashreplace")
            if isinstance(pttl, int) and pttl >= 0:
                upd.append((_when(at + pttl / 1000.0), scope, job))
            hit = db.execute(
                "SELECT 1 FROM operations WHERE scope = ? AND idempotency_key = ?", (scope, job)
            ).fetchone()
            if hit is None:
                out["windows_gone"] += 1
        db.executemany("UPDATE operations SET expires_at = ? WHERE scope = ? AND idempotency_key = ?", upd)


def _stream_scopes(client, kv: KvLayout, scopes: list[str], token) -> list[str]:
    """The scopes whose events stream exists: those of the records, and those a SCAN of the stream
    template finds (a queue whose every job was deleted on completion has records no more)."""
    pattern = kv.events_key.format(scope="*")
    head, _star, tail = pattern.partition("*")
    found = set(scopes)
    cursor = 0
    while True:
        if token is not None:
            token.check()
        cursor, keys = client.scan(cursor=cursor, match=pattern, count=PAGE)
        for k in keys:
            name = bytes(k).decode("utf-8", "backslashreplace")
            if name.startswith(head) and name.endswith(tail) and ":" not in name[len(head) : len(name) - len(tail)]:
                found.add(name[len(head) : len(name) - len(tail)])
        if int(cursor) == 0:
            return sorted(found)


def _events(client, db: sqlite3.Connection, kv: KvLayout, scopes: list[str], token, out: dict) -> None:
    """Succeeded attempts from the events stream (``[events]``) for jobs whose record is gone.

    BullMQ's moveToFinished-14.lua writes ``XADD <events> * event completed jobId <id> returnvalue …``
    when a job completes, and with ``removeOnComplete`` deletes the job's hash in the same script
    (removeJobsByMaxCount / keepJobs): the event is all that is left. A custom ``jobId`` is BullMQ's
    own deduplication (handleDuplicatedJob.lua refuses an add whose job hash exists), so a job id
    completed twice ran twice because the first hash was removed: ``removeOnComplete`` defeated the
    jobId dedup. Each such completion is loaded as a succeeded attempt of the job id (its effect_ref
    names the event), so two of them show as ``duplicate_effect``. Read with XRANGE in pages of
    :data:`PAGE` (the stream is capped by BullMQ's ``maxLenEvents``, 10,000 by default: older
    completions are gone)."""
    import redis

    out["completed_removed"] = out["rerun_ids"] = 0
    rid = (db.execute("SELECT max(id) FROM operations").fetchone()[0] or 0) + 1_000_000_000
    for scope in _stream_scopes(client, kv, scopes, token):
        key = kv.events_key.format(scope=scope)
        present = {r[0] for r in db.execute("SELECT idempotency_key FROM operations WHERE scope = ?", (scope,))}
        runs: dict[str, list[tuple[str, str]]] = {}
        try:
            for sid, job in _completions(client, key, token):
                if job not in present:
                    runs.setdefault(job, []).append((sid, _when(int(sid.split("-")[0]) / 1000.0)))
        except redis.exceptions.NoPermissionError:
            raise  # the user may not run XRANGE: the completions are unknown, not absent
        except redis.exceptions.ResponseError:
            continue  # not a stream (WRONGTYPE)
        rows = []
        for job, done in runs.items():
            out["completed_removed"] += len(done)
            out["rerun_ids"] += len(done) >= 2
            for n, (sid, at) in enumerate(done, 1):
                rows.append((rid, scope, job, n, at, "succeeded", f"completed event {sid}, job removed"))
                rid += 1
        db.executemany(
            "INSERT INTO attempts (id, scope, idempotency_key, attempt_no, finished_at, outcome, effect_ref) "
            "VALUES (?,?,?,?,?,?,?)",
            rows,
        )


def _s(b) -> str:
    return bytes(b).decode("utf-8", "backslashreplace") if isinstance(b, (bytes, bytearray)) else str(b)


def _completions(client, key: str, token):
    """(stream id, job id) of every ``completed`` event of the stream ``key``, oldest first."""
    start = "-"
    while True:
        if token is not None:
            token.check()
        page = client.execute_command("XRANGE", key, start, "+", "COUNT", PAGE)
        if not page:
            return
        for sid, fields in page:
            sid = _s(sid)
            # redis-py parses XRANGE entries into (id, {field: value}); a flat list when it does not
            pairs = fields.items() if isinstance(fields, dict) else zip(fields[0::2], fields[1::2], strict=False)
            ev = {_s(k): _s(v) for k, v in pairs}
            if ev.get("event") == "completed" and ev.get("jobId"):
                yield sid, ev["jobId"]
        if len(page) < PAGE:
            return
        start = "(" + sid  # exclusive start (Redis >= 6.2)


def _group(db: sqlite3.Connection, unique_index: str, out: dict, limit: bool = False) -> None:
    """Records sharing a dedup id become one idempotency key (``[duplicates] group_field``); with
    ``limit`` (``[duplicates] limit_field``) not those of a dedup id held by 2 to its limit distinct
    effect refs (job ids; the largest limit its records carry, 1 when none does): as many holders as
    the lock admits are no duplicate, so each record keeps its own key."""
    db.execute(f"DROP INDEX {unique_index_name(unique_index)}")
    g = GROUP_COLUMN
    within = ""
    if limit:  # held by no more job ids than its limit admits (lock.lua: HLEN < limit): no duplicate
        within = (
            f" AND (scope, {g}) NOT IN (SELECT scope, {g} FROM operations WHERE {g} IS NOT NULL AND {g} <> '' "
            f"GROUP BY scope, {g} HAVING COUNT(DISTINCT effect_ref) BETWEEN 2 AND MAX(COALESCE({LIMIT_COLUMN}, 1)))"
        )
    cur = db.execute(f"UPDATE operations SET idempotency_key = {g} WHERE {g} IS NOT NULL AND {g} <> ''{within}")
    out["grouped"] = max(cur.rowcount, 0)
    db.execute(
        "UPDATE attempts SET idempotency_key = (SELECT o.idempotency_key FROM operations o "
        "WHERE o.id = attempts.id) WHERE id IN (SELECT id FROM operations)"
    )
    # a plain index in place of the unique one: a dedup id may hold several job records
    db.execute("CREATE INDEX ix_operations_scope_key ON operations (scope, idempotency_key)")


def unique_index_name(create_stmt: str) -> str:
    """The index name of a ``CREATE UNIQUE INDEX name ON …`` statement."""
    words = create_stmt.split()
    return words[words.index("INDEX") + 1]
