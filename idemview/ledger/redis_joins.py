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


def _when(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


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
    """Apply ``kv``'s ``[states]``, ``[lock]`` and ``[duplicates]`` to the loaded ``operations`` rows of
    ``db`` (the snapshot's keeper connection; the unique (scope, key) index ``unique_index`` built).
    Returns counts: ``{"stated": records given a state, "locks_missing": in-progress records whose lock
    key was gone, "grouped": records keyed by their dedup id, "completed": completed records}``.
    ``clock(client)`` is the read time (aware UTC; the snapshot's ``server_time``: the server's clock,
    the local one for a user refused TIME). Redis errors propagate (``redis.RedisError``)."""
    import redis

    out = {"stated": 0, "locks_missing": 0, "grouped": 0, "completed": 0}
    scopes = [r[0] for r in db.execute("SELECT DISTINCT scope FROM operations")]
    if kv.states:
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
                except redis.exceptions.ResponseError:
                    continue  # a key of another type (WRONGTYPE): this state lists nothing here
    if kv.lock_key:
        active = [s for s in kv.states if kv.status(s) == Status.IN_PROGRESS] or [
            k for k, v in kv.status_map.items() if v == Status.IN_PROGRESS.value
        ]
        if active:
            marks = ",".join("?" * len(active))
            rows = db.execute(
                f"SELECT id, scope, idempotency_key FROM operations WHERE status IN ({marks})", active
            ).fetchall()
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
    if kv.group_field:
        db.execute(f"DROP INDEX {unique_index_name(unique_index)}")
        cur = db.execute(
            f"UPDATE operations SET idempotency_key = {GROUP_COLUMN} "
            f"WHERE {GROUP_COLUMN} IS NOT NULL AND {GROUP_COLUMN} <> ''"
        )
        out["grouped"] = max(cur.rowcount, 0)
        db.execute(
            "UPDATE attempts SET idempotency_key = (SELECT o.idempotency_key FROM operations o "
            "WHERE o.id = attempts.id) WHERE id IN (SELECT id FROM operations)"
        )
        # a plain index in place of the unique one: a dedup id may hold several job records
        db.execute("CREATE INDEX ix_operations_scope_key ON operations (scope, idempotency_key)")
    done = [s for s in kv.states if kv.status(s) == Status.COMPLETED] or [
        k for k, v in kv.status_map.items() if v == Status.COMPLETED.value
    ]
    if done:
        marks = ",".join("?" * len(done))
        out["completed"] = db.execute(f"SELECT count(*) FROM operations WHERE status IN ({marks})", done).fetchone()[0]
    return out


def unique_index_name(create_stmt: str) -> str:
    """The index name of a ``CREATE UNIQUE INDEX name ON …`` statement."""
    words = create_stmt.split()
    return words[words.index("INDEX") + 1]
