"""The one process mechanism (:mod:`idemview.ledger.procworker`): a child's messages, its exception and
its death reach the parent as clear errors, and a cancel stops it."""

from __future__ import annotations

import os
import sys

import pytest

from idemview.ledger.procworker import ChildDied, ChildFailed, ChildProcess


class _Exit:
    """Unpickled in the child, it ends the process at once (``os._exit``): a crash without a word."""

    def __init__(self, code: int):
        self.code = code

    def __reduce__(self):
        return (os._exit, (self.code,))


def test_messages_in_order_then_end_of_input():
    # a duplex child (str.upper in a loop, via operator): what is sent comes back, in order
    child = ChildProcess(_echo_upper, what="the echo process", duplex=True)
    try:
        for w in ("a", "bb", "ccc"):
            child.send(w)
        child.end_input()
        assert [child.recv() for _ in range(3)] == ["A", "BB", "CCC"]
        with pytest.raises(ChildDied, match=r"the echo process ended unexpectedly \(exit code 0\)"):
            child.recv()  # it returned without a last word: the caller sees the end, not a hang
    finally:
        child.close()
    assert child.proc.exitcode == 0


def test_an_exception_in_the_child_is_raised_in_the_parent():
    child = ChildProcess(_raise, ("no such column: bogus",), what="the test process")
    try:
        with pytest.raises(LookupError, match="no such column: bogus"):
            child.recv()
    finally:
        child.close()


def test_an_exception_that_does_not_pickle_arrives_as_its_words():
    child = ChildProcess(_raise_unpicklable, what="the test process")
    try:
        with pytest.raises(ChildFailed, match="_Unpicklable: a lock inside"):
            child.recv()
    finally:
        child.close()


def test_a_crash_is_a_clear_error_with_the_exit_code():
    child = ChildProcess(_echo_upper, what="the echo process", duplex=True)
    try:
        child.send(_Exit(7))
        with pytest.raises(ChildDied, match=r"the echo process ended unexpectedly \(exit code 7\)") as e:
            child.recv()
        assert e.value.exitcode == 7
    finally:
        child.close()


def test_cancel_terminates_a_busy_child():
    child = ChildProcess(_echo_upper, what="the echo process", duplex=True)
    try:
        child.send("x")
        assert child.recv() == "X"  # running and answering
        child.cancel()  # it now waits for input that never comes: only the cancel ends it
        with pytest.raises(ChildDied) as e:
            child.recv()
        assert e.value.exitcode == -15  # SIGTERM
        assert not child.alive
    finally:
        child.close()


def _echo_upper(out, inbox) -> None:
    while True:
        try:
            w = inbox.recv()
        except EOFError:
            return
        out.send(w.upper())


def _raise(out, words: str) -> None:
    raise LookupError(words)


class _Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("cannot pickle")


def _raise_unpicklable(out) -> None:
    raise _Unpicklable("a lock inside")


# -- the services' Worker carries it: process_stream --------------------------------------------


def _wait_for(cond, seconds: float = 60.0) -> None:
    import time

    end = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < end, "the child process did not answer in time"
        time.sleep(0.02)


def _count(out, n: int, code: int | None) -> None:
    for i in range(n):
        out.send(i)
    if code is not None:
        os._exit(code)


def _stream(target, args, **kw):
    from idemview.services.work import InlineWorker, process_stream

    w = InlineWorker()
    got: list = []
    done: list = []
    w.stream("proc", process_stream(target, args, what="the counting process", **kw), got.append, done.append)
    return w, got, done


def test_a_process_stream_delivers_its_messages_then_done():
    w, got, done = _stream(_count, (4, None))
    _wait_for(lambda: w.queued() == 5)  # four messages and the end, queued for the owner's thread
    w.run_all()
    assert got == [0, 1, 2, 3] and done == [None]
    assert not w.is_pending("proc")


def test_a_process_stream_that_dies_is_done_with_its_exit_code():
    w, got, done = _stream(_count, (2, 3))
    _wait_for(lambda: w.queued() == 3)
    w.run_all()
    assert got == [0, 1]
    assert done == ["the counting process ended unexpectedly (exit code 3)"]


def test_a_process_stream_ends_at_its_last_message():
    w, got, done = _stream(_count, (5, None), is_end=lambda m: m == 2)
    _wait_for(lambda: w.queued() == 4)
    w.run_all()
    assert got == [0, 1, 2] and done == [None]


def test_cancelling_a_process_stream_terminates_its_process():
    from idemview.services.work import InlineWorker, process_stream

    w = InlineWorker()
    got: list = []
    w.stream("proc", process_stream(_echo_forever, (), what="the idle process"), got.append)
    handle = w._pending["proc"][1]
    _wait_for(lambda: handle.proc.is_alive())
    w.cancel("proc")
    _wait_for(lambda: handle.proc.exitcode is not None)
    assert handle.proc.exitcode == -15
    w.run_all()
    assert got == [] and not w.is_pending("proc")


def _echo_forever(out) -> None:
    import time

    while True:
        time.sleep(0.05)


# -- hostile children (branch redis-perf-test) ------------------------------------------------


class _NeedsTwo(Exception):
    """Pickles (its args are ``("x/y",)``) but does not unpickle: ``__init__`` wants two arguments."""

    def __init__(self, a: str, b: str):
        super().__init__(f"{a}/{b}")


def _raise_needs_two(out) -> None:
    raise _NeedsTwo("scope", "key")


def test_an_exception_that_pickles_but_does_not_unpickle_arrives_as_its_words():
    # pickle.dumps succeeds; loading it in the parent raised TypeError ("missing 1 required positional
    # argument") instead of the child's own error
    child = ChildProcess(_raise_needs_two, what="the test process")
    try:
        with pytest.raises(ChildFailed, match="_NeedsTwo: scope/key"):
            child.recv()
    finally:
        child.close()


def _exit_3(out) -> None:
    import sys

    sys.exit(3)


def _interrupted(out) -> None:
    raise KeyboardInterrupt


def test_sys_exit_in_the_child_is_its_exit_code_not_a_systemexit_in_the_parent():
    # SystemExit was sent and raised in the parent: a reader thread died silently (threads swallow it)
    child = ChildProcess(_exit_3, what="the test process")
    try:
        with pytest.raises(ChildDied, match=r"exit code 3\)") as e:
            child.recv()
        assert e.value.exitcode == 3
    finally:
        child.close()


def test_a_keyboard_interrupt_in_the_child_is_not_raised_as_one_in_the_parent():
    child = ChildProcess(_interrupted, what="the test process")
    try:
        with pytest.raises(ChildFailed, match="^KeyboardInterrupt: $"):
            child.recv()
    finally:
        child.close()


def _report_pid_then_sleep(out) -> None:
    import time

    out.send(os.getpid())
    while True:
        time.sleep(0.05)


_PARENT = """
import os, sys
sys.path[:0] = [{root!r}, {tests!r}]
from idemview.ledger.procworker import ChildProcess
from test_procworker import _report_pid_then_sleep
c = ChildProcess(_report_pid_then_sleep, what="the sleeping process")
print(c.recv(), flush=True)
os._exit(0)  # the parent ends abruptly (as a crash or SIGKILL would): no atexit terminates the child
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="watches the orphan with os.kill(pid, 0) and /proc")
def test_a_child_does_not_outlive_a_parent_that_dies(tmp_path):
    import subprocess
    import time

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = tmp_path / "parent.py"
    script.write_text(_PARENT.format(root=root, tests=os.path.dirname(os.path.abspath(__file__))))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())  # not read to the end: an orphan would hold the pipe open
    parent.stdout.close()
    assert parent.wait(timeout=60) == 0
    end = time.monotonic() + 60
    alive = True
    while alive and time.monotonic() < end:
        try:
            os.kill(pid, 0)
            if os.path.exists(f"/proc/{pid}/stat"):  # Linux: a zombie (not reaped by init) has ended
                with open(f"/proc/{pid}/stat") as f:
                    alive = f.read().split(") ")[1][0] != "Z"
        except (ProcessLookupError, FileNotFoundError):
            alive = False
        if alive:
            time.sleep(0.05)
    if alive:
        os.kill(pid, 9)
    assert not alive, "the child kept running after its parent died"
