"""A Redis snapshot's rows: read batches decoded and mapped into ``operations``/``attempts`` rows.

:class:`_Mapper` does it per batch, in this process or, from :data:`WORKER_MIN_KEYS` keys, in a second
process (:func:`rows_in_worker`, which never talks to Redis) while this one reads Redis and loads
SQLite, so both cores work; the rows are the same.
"""

from __future__ import annotations

import gc
import pickle
import sys
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
        import redis

        self.kv = kv
        self.comp = compile_layout(kv)
        self.rid = 0
        self.ttl_above = 0
        self.error_type = redis.exceptions.ResponseError

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


def _send(out, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(len(data).to_bytes(8, "little"))
    out.write(data)
    out.flush()


def _recv(inp):
    head = inp.read(8)
    if len(head) < 8:
        raise EOFError
    n = int.from_bytes(head, "little")
    data = inp.read(n)
    if len(data) < n:
        raise EOFError
    return pickle.loads(data)  # noqa: S301 - between idemview and its own worker process


def _worker_main() -> None:
    """The second process of a snapshot (``python -c``, see :func:`rows_in_worker`): reads the layout,
    then read batches from stdin and writes :meth:`_Mapper.batch` of each to stdout, until ``None``
    (answered with ``None``); an error is written instead and ends it. It never talks to Redis."""
    gc.disable()  # as in the parent's load: no reference cycles are made
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the pipe
    try:
        m = _Mapper(_recv(inp))
        while (item := _recv(inp)) is not None:
            _send(out, m.batch(*item))
        _send(out, None)
    except BaseException as e:  # noqa: BLE001 - handed to the parent, raised there
        try:
            _send(out, e)
        except Exception:  # noqa: BLE001 - an exception that does not pickle: its words
            _send(out, RuntimeError(f"{type(e).__name__}: {e}"))


def rows_in_worker(reads: Iterator[tuple], kv: KvLayout, token):
    """:class:`_Mapper` rows of the read batches ``reads`` (an iterator that reads Redis, see
    :func:`~idemview.ledger.redis_kv.snapshot.snapshot`), the decoding and mapping in a second process:
    a thread here reads the batches from Redis and hands them to the process through its stdin, the
    rows come back through its stdout while this thread loads them (pipes: at most a few batches in
    flight, the memory stays bounded). The process is a fresh interpreter running :func:`_worker_main`,
    not multiprocessing (which would import the caller's ``__main__`` again; fork is unsafe beside Qt's
    threads). The token is checked between batches; leaving early (cancel, an error) kills the process."""
    import os
    import subprocess

    import idemview

    root = os.path.dirname(os.path.dirname(os.path.abspath(idemview.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen(
        [sys.executable, "-c", "from idemview.ledger.redis_kv.mapping import _worker_main; _worker_main()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    to_worker, from_worker = proc.stdin, proc.stdout
    failed: list[BaseException] = []
    stop = threading.Event()

    def feed():
        try:
            _send(to_worker, kv)
            for item in reads:
                if stop.is_set():
                    return
                _send(to_worker, item)
            _send(to_worker, None)
        except BaseException as e:  # noqa: BLE001 - a Redis error: raised by the consumer
            failed.append(e)
        finally:
            try:
                to_worker.close()  # the worker sees the end: it answers None, or stops
            except OSError:
                pass

    feeder = threading.Thread(target=feed, name="idemview-redis-read", daemon=True)
    feeder.start()
    done = False
    try:
        while True:
            if token is not None:
                token.check()
            try:
                item = _recv(from_worker)
            except EOFError:
                done = True
                if failed:
                    raise failed[0] from None
                raise RuntimeError(
                    f"the Redis snapshot's worker process ended unexpectedly (exit code {proc.poll()})"
                ) from None
            if item is None or isinstance(item, BaseException):
                done = True
                feeder.join()
                if failed:  # the reading failed (the worker saw a truncated stream)
                    raise failed[0]
                if item is None:
                    return
                raise item
            yield item
    finally:
        stop.set()
        if not done:
            proc.kill()  # left early: stopped (a blocked feeder write fails and ends it)
        from_worker.close()
        feeder.join(timeout=30)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
