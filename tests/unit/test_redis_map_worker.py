"""The Redis snapshot's mapping worker runs on the one process mechanism (:mod:`idemview.ledger.procworker`):
its rows equal the in-process mapper's, a crash or an exception in it comes back as a clear error, and a
cancel stops it. No Redis server needed: the read batches are given."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from idemview.layouts.kv import load_kv_preset
from idemview.ledger.procworker import ChildDied
from idemview.ledger.redis_kv.mapping import WORKER_WHAT, _Mapper, rows_in_worker
from idemview.services.cancel import Cancelled, CancelToken


class _Exit:
    def __reduce__(self):  # unpickled in the worker: it ends there and then, without a word
        return (os._exit, (9,))


def _batch(i: int) -> tuple:
    """A read batch as ``snapshot._read_batches`` yields it: two Celery values, one with a TTL."""
    at = 1_764_000_000.0 + i
    parts = [("", f"t{i}-a", None), ("", f"t{i}-b", None)]
    values = [
        b'{"status": "SUCCESS", "date_done": "2025-11-24T10:00:00", "task_id": "a", "result": {"ok": 1}}',
        b'{"status": "FAILURE", "date_done": "2025-11-24T10:00:01", "traceback": "CardError"}',
    ]
    return (2, 0, parts, at, values, [3_600_000, -1])


def _no_workers_left() -> bool:
    return not [p for p in multiprocessing.active_children() if p.name == "idemview-redis-map"]


def test_the_worker_maps_as_this_process_does():
    kv = load_kv_preset("celery-redis")
    m = _Mapper(kv)
    here = [m.batch(*_batch(i)) for i in range(3)]
    there = list(rows_in_worker(iter([_batch(i) for i in range(3)]), kv, None))
    assert there == here
    assert [len(ops) for _c, ops, _a in there] == [2, 2, 2]
    assert there[2][1][0][0] == 5  # ids run on across batches, as in this process
    assert _no_workers_left()


def test_a_crash_in_the_worker_names_it_and_its_exit_code():
    kv = load_kv_preset("celery-redis")
    rows = rows_in_worker(iter([_batch(0), _Exit()]), kv, None)
    assert next(rows)[0][0] == 2
    with pytest.raises(ChildDied, match=rf"{WORKER_WHAT} ended unexpectedly \(exit code 9\)"):
        next(rows)
    assert _no_workers_left()


def test_an_exception_in_the_worker_is_raised_here_as_itself():
    kv = load_kv_preset("celery-redis")
    with pytest.raises(TypeError, match="batch"):
        list(rows_in_worker(iter([_batch(0), ("not", "a batch")]), kv, None))
    assert _no_workers_left()


def test_a_reading_error_wins_over_the_end_it_causes_in_the_worker():
    kv = load_kv_preset("celery-redis")

    def reads():
        yield _batch(0)
        raise ConnectionError("connection lost while reading")

    with pytest.raises(ConnectionError, match="connection lost while reading"):
        list(rows_in_worker(reads(), kv, None))
    assert _no_workers_left()


def test_cancel_stops_the_worker():
    kv = load_kv_preset("celery-redis")
    tok = CancelToken()

    def endless():  # a keyspace that never ends: only the cancel stops the snapshot
        i = 0
        while True:
            yield _batch(i)
            i += 1

    got = 0
    with pytest.raises(Cancelled):
        for _rows in rows_in_worker(endless(), kv, tok):
            got += 1
            if got == 3:
                tok.cancel()
    assert got == 3
    assert _no_workers_left()


def test_a_worker_killed_while_batches_are_still_being_sent_names_it_not_a_broken_pipe():
    # The worker dies (as the OOM killer's SIGKILL would) while the reading thread still has batches to
    # send: its send fails with EPIPE. That BrokenPipeError was raised as if the reading had failed;
    # the error is the worker's death, with its exit code.
    kv = load_kv_preset("celery-redis")

    def reads():
        yield _batch(0)
        yield _Exit()
        for i in range(1, 2000):  # more than the pipe holds: the sender is writing when the worker dies
            yield _batch(i)

    rows = rows_in_worker(reads(), kv, None)
    assert next(rows)[0][0] == 2
    with pytest.raises(ChildDied, match=rf"{WORKER_WHAT} ended unexpectedly \(exit code 9\)"):
        next(rows)
    assert _no_workers_left()
