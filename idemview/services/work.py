"""One worker abstraction for background work, threads and processes alike (issue 25, item 5).

A :class:`Worker` runs work away from its owner's thread (the GUI thread in the app) and brings the
answers back to it. Two shapes of work go through the same object:

- a **job** (:meth:`Worker.submit`): ``fn(token)`` runs once on a thread and returns a value;
- a **stream** (:meth:`Worker.stream`): ``start(emit, done, token)`` launches work elsewhere (the findings
  process, :class:`idemview.services.scanproc.ScanProcess`) and returns a handle with ``cancel()``; the
  work calls ``emit(message)`` any number of times and ``done(error or None)`` once, from any thread.

Both belong to a *channel*; each submission takes the channel's next generation, and an answer or a
message is delivered (on the owner's thread) only while its generation is the channel's newest and the
channel was not cancelled: a stale answer is dropped silently. :meth:`Worker.cancel` stops a channel
(the token is cancelled, which interrupts a running statement; a stream's handle is cancelled, which
terminates its process). :meth:`Worker.call_later` runs a function on the owner's thread after a delay
(a merge debounced over a burst of kinds).

A stream's work in a child process starts with :func:`process_stream` (or, for the findings scan,
:class:`~idemview.services.scanproc.ScanProcess`), both on :class:`~idemview.ledger.procworker.ChildProcess`:
the one process mechanism, which the Redis snapshot's mapping worker (in ``ledger``, below this
layer) uses too.

Implementations: :class:`idemview.qt.workers.Runner` (a QThreadPool, queued signals) in the app, and
:class:`InlineWorker` here (no threads at all: the caller decides when queued work runs) for tests of
the services without a display. Failures arrive as :class:`JobError` (:func:`describe_error`: words fit
for a user, masked, never the driver's message matched as text).

Idea from napari's ``thread_worker`` (``napari/_qt/qthreading.py``): a worker object that yields
results to the owner's thread; nothing of its code is used.
"""

from __future__ import annotations

import errno
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.exc import DBAPIError

from idemview.errors import ConnectionLost, QueryCancelled, QueryTimedOut
from idemview.services.cancel import Cancelled, CancelToken, current_token


@dataclass
class JobError:
    """A failed job, already in words fit for the UI (no SQL, no password). ``connection_lost`` means
    the database went away (show Reconnect); ``cancelled`` means the user stopped it."""

    message: str
    connection_lost: bool = False
    cancelled: bool = False
    detail: str = ""


_WRITE_ERRNOS = frozenset(
    getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "EFBIG", "EIO") if hasattr(errno, n)
)


def describe_error(e: BaseException) -> JobError:
    """The UI's words for a failed job. Every message and detail goes through the masker first
    (:func:`idemview.masking.masker.mask_message`): a driver's error can quote ledger data (an e-mail,
    a card number) or a connection string, and a banner is a message like any other (DESIGN §6)."""
    from idemview.masking.masker import mask_message

    err = _describe_error(e)
    err.message = mask_message(err.message)
    if err.detail:
        err.detail = mask_message(err.detail)
    return err


def _describe_error(e: BaseException) -> JobError:
    from idemview.ledger.connect import short_error
    from idemview.ledger.errors import classify

    if isinstance(e, Cancelled):
        return JobError("cancelled", cancelled=True)
    if isinstance(e, DBAPIError):
        # by the driver's code (SQLSTATE, errno, SQLite result code), never its words: idemview.ledger.errors
        msg = short_error(e)
        token = current_token()
        kind = classify(e, cancel_requested=bool(token is not None and token.cancelled))
        if isinstance(kind, QueryCancelled):
            return JobError("the query was cancelled", cancelled=True)
        if isinstance(kind, QueryTimedOut):
            return JobError(f"the query ran past its time limit: {msg}")
        lost = isinstance(kind, ConnectionLost)
        return JobError(("connection lost: " if lost else "the database refused a query: ") + msg, connection_lost=lost)
    from idemview.errors import CannotConnect, InputError

    if isinstance(e, CannotConnect):  # ledger.connect.ConnectError, ledger.tunnel.TunnelError: words to show
        return JobError(str(e), connection_lost=True)
    if isinstance(e, InputError):  # what the user typed (a dump path, a table name, a layout): words to show
        from idemview.ledger.connect import redact

        return JobError(redact(str(e))[:300])
    from idemview.evidence.writer import FinalNameTaken

    if isinstance(e, FinalNameTaken):
        return JobError(str(e))
    if isinstance(e, OSError) and not isinstance(e, ConnectionError) and e.errno in _WRITE_ERRNOS:
        # disk full, read-only or forbidden folder: words, not "[Errno 28]"
        where = f" {e.filename}" if e.filename else ""
        return JobError(f"cannot write{where}: {e.strerror}")
    from idemview.ledger.connect import redact

    return JobError(
        f"{type(e).__name__}: {redact(str(e))[:300]}", detail="".join(traceback.format_exception(e))[-4000:]
    )


class Handle(Protocol):
    """What a stream's ``start`` returns: something that stops the work (terminates a process)."""

    def cancel(self) -> None: ...


class Timer(Protocol):
    def cancel(self) -> None: ...


#: ``start(emit, done, token)`` of a stream: ``emit(message)`` and ``done(error message or None)`` may be
#: called from any thread; returns the :class:`Handle`.
StreamStart = Callable[[Callable[[Any], None], Callable[[str | None], None], CancelToken], Handle]


class Worker(Protocol):
    """The one interface for background work (module docstring). Callbacks run on the owner's thread."""

    def submit(
        self,
        channel: str,
        fn: Callable[[CancelToken], Any],
        on_ok: Callable[[Any], None] | None = None,
        on_error: Callable[[JobError], None] | None = None,
    ) -> int: ...

    def stream(
        self,
        channel: str,
        start: StreamStart,
        on_message: Callable[[Any], None],
        on_done: Callable[[str | None], None] | None = None,
    ) -> int: ...

    def cancel(self, channel: str | None = None) -> None: ...

    def is_pending(self, channel: str) -> bool: ...

    def pending(self) -> list[str]: ...

    def call_later(self, seconds: float, fn: Callable[[], None]) -> Timer: ...


class _ProcessHandle:
    """The :class:`Handle` of a :func:`process_stream`: stops its reader and terminates its process."""

    def __init__(self, child, stop):
        self.child, self._stop = child, stop

    @property
    def proc(self):
        """The multiprocessing process (pid, exitcode, ``is_alive()``)."""
        return self.child.proc

    def cancel(self) -> None:
        self._stop.set()
        self.child.cancel()


def process_stream(
    target: Callable[..., Any],
    args: tuple = (),
    *,
    what: str = "the worker process",
    name: str = "idemview-worker",
    is_end: Callable[[Any], bool] | None = None,
) -> StreamStart:
    """A :class:`Worker` stream whose work runs in a child process: ``target(conn, *args)`` in a
    :class:`~idemview.ledger.procworker.ChildProcess` (the one process mechanism, shared with the Redis
    snapshot's mapping worker), each message it sends (``conn.send``) emitted on the owner's thread.
    The stream is done (``None``) after a message for which ``is_end(message)`` holds, or when the
    child returns; done with words when it raises (its exception, masked by the Worker's callers as
    any message) or dies (":class:`~idemview.ledger.procworker.ChildDied`: … exit code"). Cancelling
    the channel terminates the process. ``target`` and ``args`` must pickle (a top-level function)."""

    def start(emit: Callable[[Any], None], done: Callable[[str | None], None], _token: CancelToken) -> Handle:
        import threading

        from idemview.ledger.procworker import ChildDied, ChildProcess

        child = ChildProcess(target, args, what=what, name=name)
        stop = threading.Event()

        def read() -> None:
            err: str | None = None
            try:
                for msg in child.messages(stop):
                    emit(msg)
                    if is_end is not None and is_end(msg):
                        break
            except ChildDied as e:
                err = None if e.exitcode == 0 and is_end is None else str(e)
            except Exception as e:  # noqa: BLE001 - the child's own exception: its words
                err = f"{type(e).__name__}: {e}"
            finally:
                child.close()
            if not stop.is_set():
                done(err)

        threading.Thread(target=read, name=f"{name}-reader", daemon=True).start()
        return _ProcessHandle(child, stop)

    return start


class _InlineTimer:
    def __init__(self, fn: Callable[[], None]):
        self.fn, self.cancelled = fn, False

    def cancel(self) -> None:
        self.cancelled = True


class InlineWorker:
    """A :class:`Worker` without threads: work is queued and runs when the caller says
    (:meth:`run_next`, :meth:`run_all`), so a test decides the order in which answers arrive (a stale
    one after a newer one, a failure, a cancel in between). A stream's ``start`` runs at once; its
    ``emit``/``done`` queue deliveries like a job's answer. Timers fire in :meth:`run_all` (delays are
    not waited for: order is what a test checks, never time)."""

    def __init__(self) -> None:
        self._gen: dict[str, int] = {}
        self._pending: dict[str, tuple[CancelToken, Any]] = {}
        self._queue: list[Callable[[], None]] = []
        self.timers: list[_InlineTimer] = []

    def submit(self, channel, fn, on_ok=None, on_error=None) -> int:
        gen, token = self._new(channel)
        self._pending[channel] = (token, None)

        def run() -> None:
            try:
                if token.cancelled:
                    raise Cancelled()
                ok, value = True, fn(token)
            except BaseException as e:  # noqa: BLE001 - every failure is reported, as the Runner does
                ok, value = False, describe_error(e)
            if not self._current(channel, gen):
                return
            self._pending.pop(channel, None)
            cb = on_ok if ok else on_error
            if cb is not None:
                cb(value)

        self._queue.append(run)
        return gen

    def stream(self, channel, start, on_message, on_done=None) -> int:
        gen, token = self._new(channel)

        def emit(msg) -> None:
            self._queue.append(lambda: on_message(msg) if self._current(channel, gen) else None)

        def done(err) -> None:
            def fire() -> None:
                if self._current(channel, gen):
                    self._pending.pop(channel, None)
                    if on_done is not None:
                        on_done(err)

            self._queue.append(fire)

        self._pending[channel] = (token, None)
        handle = start(emit, done, token)
        self._pending[channel] = (token, handle)
        return gen

    def _new(self, channel: str) -> tuple[int, CancelToken]:
        gen = self._gen.get(channel, 0) + 1
        self._gen[channel] = gen
        prev = self._pending.pop(channel, None)
        if prev is not None:
            self._stop(prev)
        return gen, CancelToken()

    @staticmethod
    def _stop(p: tuple[CancelToken, Any]) -> None:
        p[0].cancel()
        if p[1] is not None:
            p[1].cancel()

    def _current(self, channel: str, gen: int) -> bool:
        return self._gen.get(channel) == gen and channel in self._pending

    def cancel(self, channel=None) -> None:
        for ch in [channel] if channel is not None else list(self._pending):
            self._gen[ch] = self._gen.get(ch, 0) + 1
            p = self._pending.pop(ch, None)
            if p is not None:
                self._stop(p)

    def is_pending(self, channel: str) -> bool:
        return channel in self._pending

    def pending(self) -> list[str]:
        return list(self._pending)

    def call_later(self, seconds: float, fn: Callable[[], None]) -> Timer:
        t = _InlineTimer(fn)
        self.timers.append(t)
        return t

    # -- the test's side --------------------------------------------------------------------------
    def queued(self) -> int:
        return len(self._queue)

    def run_next(self, index: int = 0) -> None:
        """Run the queued delivery at ``index`` (0: the oldest) — out of order when a test wants it."""
        self._queue.pop(index)()

    def run_all(self) -> None:
        """Run every queued job and due timer until nothing is left."""
        while self._queue or self.timers:
            while self._queue:
                self._queue.pop(0)()
            timers, self.timers = self.timers, []
            for t in timers:
                if not t.cancelled:
                    t.fn()


__all__ = ["Handle", "InlineWorker", "JobError", "StreamStart", "Timer", "Worker", "describe_error", "process_stream"]
