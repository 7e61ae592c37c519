"""Opening a Redis ledger: connect read-only, choose the layout, snapshot, and a Ledger on it.

What a key-value store cannot show
    An expired Redis key is gone: ``expired_key`` and ``replay_after_expiry`` cannot be seen; a key
    holds one value, so ``duplicate_effect`` and ``key_conflict`` (two records or fingerprints under one
    key) cannot either, except where the layout groups records by a dedup id (``[duplicates]``). Those
    kinds, and those the layout maps no field for, are declared in ``ledger.source.not_checkable`` with
    the reason (:func:`redis_not_checkable`); the findings engine skips and reports them.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlsplit

from idemview.domain.model import FindingKind
from idemview.layouts.kv import NOT_CHECKABLE, KvLayout
from idemview.layouts.layout import AttemptsSpec, Layout, LayoutError, StatusSource, load_preset
from idemview.ledger.reader import Ledger
from idemview.ledger.redis_kv.client import (
    LOCAL_CLOCK_NOTE,
    SCAN_COUNT,
    connect_redis,
    redis_url_from_sqlalchemy,
    refused_line,
    snapshot_permissions,
    write_rights,
)
from idemview.ledger.redis_kv.detect import choice_name, detect_kv, load_kv_choice, other_prefixes
from idemview.ledger.redis_kv.snapshot import SnapshotInfo, snapshot
from idemview.ledger.source import LedgerSource


def snapshot_layout(kv: KvLayout) -> Layout:
    """The reference ``idemview`` layout narrowed to what ``kv`` maps, with its raw-status map, name,
    source text and tunables: the layout the snapshot's :class:`Ledger` reads."""
    ref = load_preset("idemview")
    times = {
        k: v
        for k, v in ref.times.items()
        if k in kv.fields or k == "expires_at" or (k == "lock_expires_at" and kv.lock_key)
    }
    fields = {k: v for k, v in ref.fields.items() if k in kv.fields}
    kind = ref.kind if ("kind" in kv.fields or "kind" in kv.key_regex.groupindex) else None
    # the attempts table: the one attempt a record proves ([attempt]), the completions an events stream
    # gives of deleted jobs ([events])
    counter = AttemptsSpec(source="counter" if "attempt_count" in fields else "none")
    att = ref.attempts if kv.attempt or kv.events_key else counter
    return replace(
        ref,
        name=kv.name,
        title=kv.title,
        description=kv.description,
        source=kv.source,
        # a record without a status (the snapshot stores "" for it) is unknown, not a value to map
        status=StatusSource(column="status", map={"": "unknown", **kv.status_map}, default=kv.status_default),
        times=times,
        fields=fields,
        kind=kind,
        attempts=att,
        retention_seconds=None,
        lock_timeout_seconds=kv.lock_timeout_seconds,
        dedup_window_seconds=kv.dedup_window_seconds,
        retry_threshold=kv.retry_threshold,
        text=kv.text,
        origin=kv.origin,
    )


def not_checkable(kv: KvLayout) -> dict[FindingKind, str]:
    """Finding kinds this key-value layout cannot show, with the reason in plain words."""
    out = dict(NOT_CHECKABLE)
    K = FindingKind
    if kv.group_field:  # records sharing a dedup id are one key: two of them can both be completed
        out.pop(K.DUPLICATE_EFFECT, None)
    if "intent_ref" not in kv.fields:
        out[K.DUPLICATE_INTENT] = "the layout maps no intent reference"
    if (
        "lock_expires_at" not in kv.fields
        and not kv.lock_key
        and not ("locked_at" in kv.fields and kv.lock_timeout_seconds)
    ):
        out[K.STUCK_IN_PROGRESS] = "the records keep no lock time (and the layout sets no lock timeout)"
    if "attempt_count" not in kv.fields:
        out[K.RETRY_STORM] = "the records keep no attempt count"
    if "failed" not in kv.status_map.values() and kv.status_default != "failed":
        out[K.UNRESOLVED_FAILURE] = "the store keeps no failed records (a failure deletes the key)"
    return out


def open_redis_ledger(
    url: str,
    *,
    layout: str | KvLayout | None = None,
    password: str | None = None,
    name: str | None = None,
    progress=None,
    token=None,
    batch: int = SCAN_COUNT,
    lock_timeout_s=None,
    retry_threshold=None,
    retention_s=None,
    worker: bool | None = None,
    write_ttl_s: float | None = None,
    spill: bool | None = None,
):
    """Connect read-only, choose the key-value layout (given, else detected from a key sample), take a
    snapshot and return a :class:`RedisLedger` on it, its source declared
    (:class:`~idemview.ledger.source.LedgerSource`: backend and dialect ``redis``, the snapshot's
    :class:`SnapshotInfo`, the kinds it cannot show with the reasons (:func:`redis_not_checkable`), how
    the layout was chosen, the manifest's identity, the :class:`KvLayout`).

    ``worker``, ``spill``: see :func:`snapshot`. ``write_ttl_s``: the TTL (seconds) the store sets at every write
    (Celery's ``result_expires``), in place of the layout's ``[expiry] write_ttl_seconds``. Raises
    :class:`ConnectError` (cannot connect),
    :class:`LayoutError` (no layout fits, bad layout)."""

    client = connect_redis(url, password)
    unread: list[str] = []  # the detected preset under other key prefixes in use (said in the notes)
    try:
        kv, detection, unread = _choose_kv_layout(client, layout)
        if write_ttl_s is not None and kv.write_time_fields:
            kv = replace(kv, write_ttl_seconds=float(write_ttl_s))
        missing, _no_time = snapshot_permissions(client, kv)  # refused in one line before any read
        # only what the snapshot sends: TYPE never; PTTL where write times ask PEXPIRETIME first; GET
        # only for dedup window keys (values are read with MGET)
        unsent = {"TYPE"} | ({"PTTL"} if kv.write_time_fields else set()) | (set() if kv.window_key else {"GET"})
        missing = [c for c in missing if c not in unsent]
        if missing:
            import redis

            raise redis.exceptions.NoPermissionError(refused_line(missing))
        engine, info = snapshot(
            client, kv, url=url, batch=batch, progress=progress, token=token, worker=worker, spill=spill
        )
    finally:
        client.connection_pool.disconnect()
    ledger = RedisLedger(
        engine,
        snapshot_layout(kv),
        name=name or f"redis {info.url.split('://', 1)[-1]}",
        lock_timeout_s=lock_timeout_s,
        retry_threshold=retry_threshold,
        retention_s=retention_s,
    )
    _removed_note(info)
    _lease_note(info)
    _write_time_notes(kv, info)
    info.notes.extend(unread)
    unused = unused_write_ttl(kv, write_ttl_s)
    if unused:
        info.notes.append(unused)
    ledger.source = LedgerSource(
        "redis",
        info,
        redis_not_checkable(kv, info, ledger.lock_timeout_override),
        dialect="redis",
        detection=detection,
        identity=describe_snapshot(info),
        store_layout=kv,
    )
    return ledger


def _choose_kv_layout(client, layout: str | KvLayout | None) -> tuple[KvLayout, str, list[str]]:
    """``(layout, how it was chosen in words, notes)``: ``layout`` as given (a name may be ``NAME@PREFIX``:
    the preset read under another key prefix, :func:`load_kv_choice`), else the best detected preset;
    ``notes`` name the detected preset under other key prefixes in use, which this snapshot does not read.
    Raises :class:`LayoutError` when none fits."""
    if isinstance(layout, KvLayout):
        return layout, f"layout {layout.name} (chosen)", []
    if layout:
        kv = load_kv_choice(layout)
        return kv, f"layout {choice_name(kv)} (chosen)", []
    matches = detect_kv(client)
    if not matches:
        raise LayoutError(
            "no key-value preset fits the sampled keys of this Redis database; pass "
            "--layout NAME|FILE (bullmq, celery-redis, celery-redis-extended, "
            "powertools-redis, idem-generic or your own)",
            ["keys"],
        )
    kv = matches[0].layout
    detection = f"detected {choice_name(kv)} ({matches[0].confidence:.0%}): {matches[0].reason}"
    unread = [f"{o}, under another key prefix, is not read: open it with --layout {o}" for o in other_prefixes(matches)]
    return kv, "; ".join([detection, *unread]), unread


def redis_not_checkable(kv: KvLayout, info: SnapshotInfo, lock_timeout_s: float | None) -> dict[FindingKind, str]:
    """The finding kinds a Redis ledger read with ``kv`` cannot show, with the reasons: the layout's
    (:func:`not_checkable`); ``stuck_in_progress`` is checkable after all when the caller gave a lock
    timeout (``lock_timeout_s``, seconds; ``None``: none given) for a ``locked_at`` field; and
    ``duplicate_effect`` as this snapshot allows (:func:`_duplicates_reason`). What
    :meth:`idemview.backends.redis.RedisBackend.not_checkable` declares."""
    out = not_checkable(kv)
    if lock_timeout_s is not None and "locked_at" in kv.fields:
        out.pop(FindingKind.STUCK_IN_PROGRESS, None)
    why = _duplicates_reason(kv, info)
    if why is not None:
        out[FindingKind.DUPLICATE_EFFECT] = why
    return out


#: Where a write TTL is given, in the notes that ask for it: the option overrides the layout's entry.
_GIVE_TTL = "--write-ttl SECONDS, a connection's Write TTL, or the layout's [expiry] write_ttl_seconds"


def _write_time_notes(kv: KvLayout, info: SnapshotInfo) -> None:
    """Say in ``info.notes`` where times were read from TTLs (``[expiry] write_ttl_seconds``)."""
    ttl = kv.write_ttl_seconds
    names = ", ".join(kv.write_time_fields)
    if info.write_times:
        info.notes.append(
            f"{info.write_times} records hold no {names} of their own: their write time is read from their "
            f"TTL (read time - ({ttl:g} s, the TTL the store sets at every write - the remaining TTL)); if the "
            f"store was configured with another TTL, give it ({_GIVE_TTL})"
        )
    if info.write_ttl_above:
        info.notes.append(
            f"{info.write_ttl_above} records have more TTL left than {ttl:g} s: the store was configured with a "
            f"longer TTL, so no write time was read from their TTL (give it: {_GIVE_TTL})"
        )


def unused_write_ttl(kv: KvLayout, write_ttl_s: float | None) -> str | None:
    """What to say when a write TTL was given (``write_ttl_s`` seconds: ``--write-ttl``, a connection's,
    the API's) for a layout that reads no time from a record's TTL (no ``[expiry] write_time_fields``):
    it changes nothing, and a user who gave it must not believe otherwise. ``None`` otherwise."""
    if write_ttl_s is None or kv.write_time_fields:
        return None
    return (
        f"the write TTL given ({float(write_ttl_s):g} s) is not used: layout {kv.name} reads no time from a "
        "record's TTL (it sets no [expiry] write_time_fields)"
    )


def _removed_note(info: SnapshotInfo) -> None:
    """Say in ``info.notes`` that jobs deleted on completion were read from the events stream (whether or
    not ``duplicate_effect`` is checkable: the deleted jobs' dedup ids are unknown)."""
    j = info.joined or {}
    removed, reruns = j.get("completed_removed", 0), j.get("rerun_ids", 0)
    if removed:
        info.notes.append(
            f"{removed} completed jobs were deleted on completion (removeOnComplete; their completions were "
            f"read from the events stream): a job id completed twice shows ({reruns} did), a dedup id among "
            "them does not (the events do not name it)"
        )


def _lease_note(info: SnapshotInfo) -> None:
    """Say in ``info.notes`` how many lease scores were no time (:func:`~idemview.ledger.redis_joins.join_keys`)."""
    j = info.joined or {}
    if j.get("leases_unreadable"):
        info.notes.append(
            f"{j['leases_unreadable']} lease ends in {', '.join(j['lease_keys_unreadable'])} are not readable "
            "times (inf, -inf or past year 9999): those tasks' lock ends are unknown (their own deadline holds)"
        )


def _duplicates_reason(kv: KvLayout, info: SnapshotInfo) -> str | None:
    """Why ``duplicate_effect`` cannot show on this snapshot of a layout grouping records by a dedup id
    (``None``: it can, or :func:`not_checkable` says already). Without completed records a dedup id that
    ran twice shows only through two effect references (the job ids one sidekiq-unique-jobs digest let
    through) or two completions read from an events stream (a BullMQ job id re-added after
    ``removeOnComplete`` deleted it)."""
    j = info.joined or {}
    removed, reruns = j.get("completed_removed", 0), j.get("rerun_ids", 0)
    if not kv.group_field or "effect_ref" in kv.fields or not j or j.get("completed") or reruns:
        return None
    why = kv.absent_reason or "no completed record is present: a dedup id that ran twice leaves no second record"
    if removed:
        why += (
            f" ({removed} completions of deleted jobs read from the events stream: no job id among them "
            "completed twice; the events do not name a job's dedup id)"
        )
    return why


class RedisLedger(Ledger):
    """A :class:`~idemview.ledger.reader.Ledger` over a Redis snapshot. What it carries beside is its
    declared :attr:`source` (snapshot, not checkable, detection, identity, key-value layout);
    :attr:`detection` is ``source.detection`` under the name callers read."""

    @property
    def detection(self) -> str:
        """How the layout was chosen, in words (``source.detection``)."""
        return self.source.detection


def describe_snapshot(info: SnapshotInfo) -> dict:
    """Manifest identity of a Redis ledger read in the snapshot ``info``: dialect, host, database and
    the snapshot's facts (never a credential)."""
    p = urlsplit(info.url) if info.url else None
    return {
        "dialect": "redis",
        "host": (p.hostname or "") if p else "",
        "database": str(info.db),
        "snapshot": info.to_json(),
    }


def test_redis(url, layout: str = "") -> str:
    """The connection dialog's Test for a Redis connection: reachable, write rights, layout detected or
    checked against a key sample. One line of plain words (run on a worker thread)."""
    s = url if isinstance(url, str) else redis_url_from_sqlalchemy(url)
    client = connect_redis(s)
    try:
        warn = write_rights(client)
        parts = ["✓ reachable", "read commands only (allowlist)" + (f" · ⚠ {warn}" if warn else "")]
        presets = [load_kv_choice(layout)] if layout else None
        m = detect_kv(client, presets)
        # Test runs every command Connect's snapshot will run: Test passing means Connect can read
        missing, no_time = snapshot_permissions(client, m[0].layout if m else None)
        if missing:
            grant = " ".join("+" + c.lower() for c in missing)
            return (
                f"✗ reachable, but this Redis user may not run {', '.join(missing)}, which reading a "
                f"snapshot needs: grant {grant} (ACL SETUSER <user> {grant})"
            )
        if no_time:
            parts.append("⚠ " + LOCAL_CLOCK_NOTE)
        if m:
            parts.append(
                f"{'layout' if layout else 'detected'} {choice_name(m[0].layout)} — confidence "
                f"{m[0].confidence:.0%}: {m[0].reason}"
            )
        else:
            parts.append("⚠ no key-value preset fits the sampled keys: choose or write a layout")
        return " · ".join(parts)
    finally:
        client.connection_pool.disconnect()
