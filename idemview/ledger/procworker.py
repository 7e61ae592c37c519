"""A child process idemview runs work in, and the pipes to it: the one process mechanism (issue 25, item 5).

Two kinds of work run in a second process so that a second core works and the owner's thread (the GUI
thread in the app) never waits on it: the findings scan (:class:`idemview.services.scanproc.ScanProcess`,
a *stream* of :class:`idemview.services.work.Worker`) and the Redis snapshot's decoding and mapping
(:func:`idemview.ledger.redis_kv.mapping.rows_in_worker`). Both start a :class:`ChildProcess`:

- ``spawn``, never ``fork`` (fork copies Qt's threads and locks mid-state), with the parent's
  ``__main__`` hidden while it starts (:func:`main_hidden`): a script without an
  ``if __name__ == "__main__"`` guard (a benchmark, a notebook helper) is not run again in the child;
- ``target(conn, *args)`` runs there; ``conn`` sends to the parent (:meth:`ChildProcess.recv`) and,
  with ``duplex=True``, receives what the parent sends (:meth:`ChildProcess.send`). Messages are
  pickled one by one (multiprocessing's framing): the pipes hold a few messages at most, so a fast
  producer waits for a slow consumer and the memory stays bounded;
- an exception escaping ``target`` is sent to the parent, which :meth:`~ChildProcess.recv` raises (the
  child's own exception when it pickles, else a :class:`ChildFailed` with its type and words); a child
  that dies without a word (killed, a crash in C, ``os._exit``) makes ``recv`` raise :class:`ChildDied`
  with its exit code, never a hang;
- :meth:`~ChildProcess.cancel` terminates it (a stopped scan, a cancelled snapshot, a closed tab).

This module sits in ``ledger`` (below ``services`` in the import layers) so that the snapshot, which
``ledger`` owns, and the services both use it; the services' :class:`~idemview.services.work.Worker`
carries it as its process streams (:func:`idemview.services.work.process_stream`).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_START_LOCK = threading.Lock()


class ChildDied(RuntimeError):
    """The child process ended without sending its result: killed, crashed, or exited early.
    ``exitcode`` is the process's exit code (negative: the signal that killed it; ``None``: unknown)."""

    def __init__(self, what: str, exitcode: int | None):
        super().__init__(f"{what} ended unexpectedly (exit code {exitcode})")
        self.exitcode = exitcode


class ChildFailed(RuntimeError):
    """An exception raised in the child that could not be sent as itself (it does not pickle): its
    type name and message."""


class _Failure:
    """What the child sends when ``target`` raises: the exception, or its words when it won't pickle."""

    def __init__(self, error: BaseException | None, words: str):
        self.error, self.words = error, words


@contextmanager
def main_hidden() -> Iterator[None]:
    """Start a child without re-running the parent's ``__main__``: its target is importable on its own,
    and a script that opens the window without an ``if __name__ == "__main__"`` guard would otherwise
    open a second window inside the child (multiprocessing's spawn runs ``__main__`` again by path)."""
    main = sys.modules.get("__main__")
    saved = {}
    if main is not None:
        for attr in ("__file__", "__spec__"):
            if hasattr(main, attr):
                saved[attr] = getattr(main, attr)
        if "__file__" in saved:
            del main.__file__
        if "__spec__" in saved:
            main.__spec__ = None
    try:
        yield
    finally:
        for attr, v in saved.items():
            setattr(main, attr, v)


def _exit_with_parent(sentinel) -> None:
    """Wait for the parent's end, then end this process at once: a parent that dies without
    terminating its children (SIGKILL, a crash, ``os._exit``) leaves no child running on (multiprocessing
    terminates daemonic children only from a normal exit's atexit hook)."""
    from multiprocessing.connection import wait

    wait([sentinel])
    os._exit(1)


def _child_main(target: Callable[..., Any], conn, inbox, args: tuple) -> None:
    """The child's entry point: ``target(conn[, inbox], *args)``; an exception is sent, not printed.
    ``SystemExit`` is not sent: it ends the child with its code (:class:`ChildDied` in the parent)."""
    parent = multiprocessing.parent_process()
    if parent is not None and parent.sentinel is not None:
        threading.Thread(target=_exit_with_parent, args=(parent.sentinel,), daemon=True).start()
    try:
        if inbox is not None:
            target(conn, inbox, *args)
        else:
            target(conn, *args)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - handed to the parent, raised there
        import pickle

        # sent as itself only when it is an Exception that loads again (an __init__ wanting other
        # arguments pickles but fails in the parent's recv); a KeyboardInterrupt is not raised there
        try:
            if not isinstance(e, Exception):
                raise TypeError("not an Exception")
            pickle.loads(pickle.dumps(e))  # noqa: S301 - our own bytes, just made
            failure = _Failure(e, "")
        except Exception:  # noqa: BLE001 - an exception that does not (un)pickle: its words
            failure = _Failure(None, f"{type(e).__name__}: {e}")
        try:
            conn.send(failure)
        except OSError:
            pass  # the parent has gone: nobody to tell
    finally:
        try:
            conn.close()
        except OSError:
            pass


class ChildProcess:
    """``target(conn, *args)`` (or ``target(conn, inbox, *args)`` with ``duplex``) in a fresh
    interpreter (see the module docstring). ``target`` and ``args`` must pickle (a top-level function).

    ``what`` names the process in errors ("the findings process"). ``method``: the multiprocessing start
    method (``spawn``; tests may pass another). Raises what ``Process.start`` raises (an argument that
    does not pickle: ``TypeError``/``PicklingError``; nothing is left running then)."""

    def __init__(
        self,
        target: Callable[..., Any],
        args: tuple = (),
        *,
        what: str = "the worker process",
        name: str = "idemview-worker",
        duplex: bool = False,
        method: str = "spawn",
    ):
        ctx: Any = multiprocessing.get_context(method)  # stubs type it BaseContext, without Process
        self.what = what
        self._conn, child_send = ctx.Pipe(duplex=False)
        child_inbox = self._out = None
        if duplex:
            child_inbox, self._out = ctx.Pipe(duplex=False)
        #: the multiprocessing process (pid, exitcode, is_alive())
        self.proc = ctx.Process(
            target=_child_main, name=name, args=(target, child_send, child_inbox, args), daemon=True
        )
        try:
            # one start at a time: main_hidden changes the process-wide __main__ (a snapshot's worker
            # and the findings process may start at once, from two threads)
            with _START_LOCK, main_hidden():
                self.proc.start()
        finally:
            child_send.close()  # the child holds the only writing end: EOF when it exits
            if child_inbox is not None:
                child_inbox.close()
        self._lock = threading.Lock()
        self._closed = False

    # -- the parent's side -----------------------------------------------------------------------
    def send(self, obj: Any) -> None:
        """Send ``obj`` to the child's inbox (``duplex`` only); blocks while the pipe is full. Raises
        ``OSError`` (``BrokenPipeError``) once the child has gone."""
        if self._out is None:
            raise RuntimeError("this child process has no inbox (duplex=False)")
        self._out.send(obj)

    def end_input(self) -> None:
        """Close the child's inbox: its next ``inbox.recv()`` raises ``EOFError``."""
        if self._out is not None:
            try:
                self._out.close()
            except OSError:
                pass

    def poll(self, timeout: float = 0.0) -> bool:
        """Whether a message (or the end) can be read within ``timeout`` seconds."""
        return self._conn.poll(timeout)

    def recv(self) -> Any:
        """The child's next message. Raises the child's exception (or :class:`ChildFailed`) when
        ``target`` raised, and :class:`ChildDied` when it ended without one."""
        try:
            msg = self._conn.recv()
        except (EOFError, OSError):
            self.proc.join(timeout=5)
            raise ChildDied(self.what, self.proc.exitcode) from None
        if isinstance(msg, _Failure):
            self.proc.join(timeout=5)
            if msg.error is not None:
                raise msg.error
            raise ChildFailed(msg.words)
        return msg

    def messages(self, stop: threading.Event | None = None, tick: float = 0.1) -> Iterator[Any]:
        """The child's messages until it ends (as :meth:`recv`: its exception or :class:`ChildDied`
        raised), or until ``stop`` is set (then it returns; checked every ``tick`` seconds)."""
        while stop is None or not stop.is_set():
            if stop is not None and not self._conn.poll(tick):
                continue
            yield self.recv()

    @property
    def alive(self) -> bool:
        return self.proc.is_alive()

    def cancel(self) -> None:
        """Terminate the child (SIGTERM); what it was computing is lost. Idempotent."""
        if self.proc.is_alive():
            self.proc.terminate()

    def close(self, timeout: float = 10.0) -> None:
        """Wait up to ``timeout`` seconds for the child to exit, then kill it; close the pipes."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.end_input()
        self.proc.join(timeout=timeout)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        try:
            self._conn.close()
        except OSError:
            pass


__all__ = ["ChildDied", "ChildFailed", "ChildProcess", "main_hidden"]
