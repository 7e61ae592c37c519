"""A Redis snapshot's rows: read batches decoded and mapped into ``operations``/``attempts`` rows.

:class:`_Mapper` does it per batch, in this process or, from :data:`WORKER_MIN_KEYS` keys, in a second
process (:func:`rows_in_worker`, which never talks to Redis; started as a
:class:`~idemview.ledger.procworker.ChildProcess`, as the findings process is) while this one reads
Redis and loads SQLite, so both cores work; the rows are the same.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from datetime import UTC, datetime

from idemview.layouts.kv import KvLayout
from idemview.ledger.memory_snapshot import CONVERSION_ERRORS
from idemview.ledger.redis_kv.decode import compile_layout, decode_value

_fromtimestamp = datetime.fromtimestamp


class _Mapper:
    """Rows of the reference tables from read batches: ``batch(...)`` -> ``(counts, ops, atts)``, the
    ``operations`` and ``attempts`` rows (ids numbered from 1 in reading order, across batches) and
    ``counts`` = (scanned, not matching, gone, wrong type, undecodable, without TTL, write times derived
    from the TTL, remaining TTLs above the configured write TTL)."""

    def __init__(self, kv: KvLayout):
        self.kv = kv
        self.comp = compile_layout(kv)
        self.rid = 0
        self.ttl_above = 0
        # An error answer (redis.ResponseError: WRONGTYPE) among the values; Exception, not the redis
        # class, so that the worker process does not import redis-py for it (~12 MB of its memory)
        self.error_type = Exception

    def batch(self, n_scanned: int, n_skipped: int, parts: list, at: float, values: list, pttls: list):
        kv, ResponseError = self.kv, self.error_type
        values_of, kind_of, status_of, attempt_of = (
            self.comp.values,
            self.comp.kind,
            self.comp.status,
            self.comp.attempt,
        )
        hashed = kv.encoding == "hash"
        empty: dict = {}
        rid = self.rid
        gone = wrong_type = undecodable = without_ttl = written = 0
        slots = self.comp.write_slots
        ops: list[tuple] = []
        atts: list[tuple] = []
        for (scope, key, kind), raw, pttl in zip(parts, values, pttls, strict=True):
            if raw is None or raw == {} or pttl == -2 or isinstance(raw, ResponseError):
                if isinstance(raw, ResponseError):
                    wrong_type += 1
                elif not hashed and raw is None and isinstance(pttl, int) and pttl != -2:
                    wrong_type += 1  # MGET reads a key of another type as nil; it exists
                else:
                    gone += 1
                continue
            # One record's values, converted as a whole: a value no conversion can take (Infinity
            # retries, a time beyond year 9999 once in UTC...) makes this record unreadable, counted,
            # never the snapshot (issue 19, item 12). The try costs nothing when nothing is raised.
            try:
                value = decode_value(kv, raw)
                if value is None:
                    undecodable += 1
                    continue
                d = value if isinstance(value, dict) else empty
                vals = values_of(d)
                if slots and pttl.__class__ is int and pttl >= 0:
                    written += self._written(vals, at, pttl)
                raw_status = status_of(value)
                vkind = kind_of(d) if kind_of is not None else None
                att = attempt_of(raw_status, d, vkind, vals) if attempt_of is not None else None
            except CONVERSION_ERRORS:
                undecodable += 1
                continue
            if pttl.__class__ is int and pttl >= 0:
                expires = _fromtimestamp(at + pttl / 1000.0, UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
            else:
                expires = None
                without_ttl += 1
            rid += 1
            ops.append((rid, scope, key, vkind or kind, raw_status if raw_status is not None else "", expires, *vals))
            if att is not None:
                atts.append((rid, scope, key, *att))
        self.rid = rid
        counts = (n_scanned, n_skipped, gone, wrong_type, undecodable, without_ttl, written, self.ttl_above)
        self.ttl_above = 0
        return counts, ops, atts

    def _written(self, vals: list, at: float, pttl: int) -> int:
        """Fill the write-time columns (``comp.write_slots``) a record left empty with its write time:
        read time - (the TTL every write sets - the remaining TTL). Returns 1 when it filled any. A
        remaining TTL above the configured one means the store was configured otherwise: nothing is
        derived, counted in ``ttl_above``."""
        ttl = self.kv.write_ttl_seconds or 0.0
        if pttl > ttl * 1000.0:
            self.ttl_above += 1
            return 0
        empty = [i for i in self.comp.write_slots if vals[i] is None]
        if not empty:
            return 0
        # in whole ms from the expiry (int(at * 1000) + pttl: exact when read with PEXPIRETIME)
        w_ms = int(at * 1000) + pttl - round(ttl * 1000)
        w = _fromtimestamp(w_ms / 1000.0, UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
        for i in empty:
            vals[i] = w
        return 1


#: The database size (DBSIZE) from which the snapshot maps keys in a second process by default: measured
#: to shorten the snapshot at 1M keys, to lengthen it at 100k and 200k (the process's start, the pickling).
WORKER_MIN_KEYS = 500_000

#: The database size (DBSIZE) from which the snapshot's database spills to an unlinked temporary file
#: beyond a bounded page cache (:func:`~idemview.ledger.memory_snapshot.new_memory_db`): below it the
#: whole database is a few tens of MB and stays in memory.
SPILL_MIN_KEYS = 100_000


def _map_in_child(out, inbox) -> None:
    """The second process of a snapshot (a :class:`~idemview.ledger.procworker.ChildProcess`): reads
    the layout, then read batches from ``inbox`` and sends :meth:`_Mapper.batch` of each to ``out``,
    until ``None`` (answered with ``None``) or the end of its input (the parent stopped: nothing more is
    sent). It never talks to Redis; an exception reaches the parent through the child process."""
    gc.disable()  # as in the parent's load: no reference cycles are made
    m = _Mapper(inbox.recv())
    while True:
        try:
            item = inbox.recv()
        except EOFError:
            return
        if item is None:
            out.send(None)
            return
        out.send(m.batch(*item))


#: How the snapshot's worker process is named in errors ("… ended unexpectedly (exit code -9)").
WORKER_WHAT = "the Redis snapshot's worker process"


def rows_in_worker(reads: Iterator[tuple], kv: KvLayout, token):
    """:class:`_Mapper` rows of the read batches ``reads`` (an iterator that reads Redis, see
    :func:`~idemview.ledger.redis_kv.snapshot.snapshot`), the decoding and mapping in a second process
    (:class:`~idemview.ledger.procworker.ChildProcess`, the one process mechanism idemview has): a
    thread here reads the batches from Redis and sends them to the process, the rows come back while
    this thread loads them (pipes: at most a few batches in flight, the memory stays bounded).

    The token is checked between batches and raises ``Cancelled``; leaving early (cancel, an error)
    terminates the process. Errors: a Redis error while reading is raised as itself; an exception in
    the process (a mapping bug) is raised as itself (or as ``ChildFailed`` when it does not pickle);
    a process that dies (killed, out of memory) raises :class:`~idemview.ledger.procworker.ChildDied`
    naming it and its exit code."""
    from idemview.ledger.procworker import ChildDied, ChildProcess

    child = ChildProcess(_map_in_child, what=WORKER_WHAT, name="idemview-redis-map", duplex=True)
    failed: list[BaseException] = []
    stop = threading.Event()

    class _Gone(Exception):
        """The process's input is closed (it died, or was stopped): its end is what the consumer raises."""

    def put(obj) -> None:
        try:
            child.send(obj)
        except OSError:  # EPIPE: not a reading error; ChildDied (with the exit code) says what happened
            raise _Gone from None

    def feed():
        try:
            put(kv)
            for item in reads:
                if stop.is_set():
                    return
                put(item)
            put(None)
        except _Gone:
            pass
        except BaseException as e:  # noqa: BLE001 - a Redis error: raised by the consumer
            failed.append(e)
        finally:
            child.end_input()  # after None, or cut short: the process sees the end of its input

    feeder = threading.Thread(target=feed, name="idemview-redis-read", daemon=True)
    feeder.start()
    done = False
    try:
        while True:
            if token is not None:
                token.check()
            try:
                item = child.recv()
            except ChildDied:
                feeder.join(timeout=30)
                if failed:  # the reading failed first: the process saw its input end
                    raise failed[0] from None
                raise
            if item is None:
                done = True
                feeder.join()
                if failed:
                    raise failed[0]
                return
            yield item
    finally:
        stop.set()
        if not done:
            child.cancel()  # left early: stopped (a blocked feeder's send fails and ends it)
        child.close()
        feeder.join(timeout=30)
