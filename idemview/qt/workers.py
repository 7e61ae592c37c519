"""The threading foundation: every database call runs on a worker thread, never on the GUI thread.

A :class:`Runner` (one per ledger tab, one for dialogs) submits callables to a shared
:class:`QThreadPool`. Each submission belongs to a *channel* (``"page"``, ``"findings"``,
``"detail"``...) and gets the channel's next generation number; when the result comes back (by a queued
signal, so it is handled on the GUI thread) it is delivered only if no newer request was made on that
channel meanwhile. A stale result is dropped silently: the investigator only ever sees the answer to
the last question asked.

Cancellation: each job carries a :class:`CancelToken`. An engine-level ``before_cursor_execute``
listener (installed by :func:`watch_engine`) registers the DBAPI connection a job is executing on, so
:meth:`CancelToken.cancel` can interrupt the running statement with :class:`idemview.ledger.connect.Interrupter`
(``sqlite3.interrupt``, PostgreSQL cancel, MySQL ``KILL QUERY``) — the statement stops in the database,
not just in our bookkeeping. A job started after cancellation raises :class:`Cancelled` before it runs
anything.

Why QThreadPool + QRunnable and not a QThread per ledger: several questions about one ledger are often
in flight at once (a page, the overview histogram, the findings scan), and a pool lets them run in
parallel while still bounding the number of connections opened against a production database.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, QTimer, Signal

from idemview.services.cancel import Cancelled, CancelToken, bind_token, current_token, watch_engine  # noqa: F401 - re-exported for the GUI
from idemview.services.work import JobError, StreamStart, describe_error  # noqa: F401 - re-exported for the GUI

log = logging.getLogger(__name__)


class _Relay(QObject):
    """Carries a finished job, and a stream's messages, back to the GUI thread (queued connection: the
    relay lives there)."""

    finished = Signal(object)
    message = Signal(object)


_job_ids = itertools.count(1)


class _Job(QRunnable):
    def __init__(self, relay: _Relay, channel: str, gen: int, fn: Callable, token: CancelToken):
        super().__init__()
        self.setAutoDelete(True)
        self.relay, self.channel, self.gen, self.fn, self.token = relay, channel, gen, fn, token

    def run(self):
        bind_token(self.token)
        try:
            if self.token.cancelled:
                raise Cancelled()
            out = (self.channel, self.gen, True, self.fn(self.token))
        except BaseException as e:  # noqa: BLE001 - every failure is reported to the UI
            out = (self.channel, self.gen, False, describe_error(e))
        finally:
            bind_token(None)
        try:
            self.relay.finished.emit(out)
        except RuntimeError:  # the tab was closed while we ran: nobody to tell
            pass


WORKERS = 2  # as many as this kind of machine has cores: more only compete for the GIL


def pool() -> QThreadPool:
    """The shared pool (bounded, so a dozen tabs never open a hundred connections)."""
    p = QThreadPool.globalInstance()
    if p.maxThreadCount() != WORKERS:
        p.setMaxThreadCount(WORKERS)
        # Workers decode and mask rows in Python, holding the GIL; with the default 5 ms switch
        # interval several of them can keep the GUI thread waiting for the GIL for hundreds of ms.
        # A 1 ms interval hands the GIL back to the event loop far more often, at ~no cost.
        import sys

        sys.setswitchinterval(0.0005)
    return p


class _Detached(QRunnable):
    def __init__(self, fn: Callable[[], Any], what: str):
        super().__init__()
        self.setAutoDelete(True)
        self.fn, self.what = fn, what

    def run(self):
        try:
            self.fn()
        except BaseException as e:  # noqa: BLE001 - nobody waits for it: the log is told
            err = describe_error(e)
            log.warning("background %s failed: %s%s", self.what, err.message, ("\n" + err.detail) if err.detail else "")


def run_detached(fn: Callable[[], Any], what: str) -> None:
    """Run ``fn()`` on the shared pool and forget it: clean-up nobody waits for (closing a tab's pooled
    connections can block on a dead server's sockets). A failure is logged (masked), never raised;
    ``what`` names it in the log."""
    pool().start(_Detached(fn, what), 0)


class Runner(QObject):
    """Submits jobs for one owner (a ledger tab) and delivers only the latest result per channel.

    ``submit(channel, fn, on_ok, on_error)``: ``fn(token)`` runs on a worker thread; ``on_ok(result)``
    or ``on_error(JobError)`` run on the GUI thread, unless a newer job was submitted on the same
    channel or the channel was cancelled. ``stream(channel, start, on_message, on_done)``: work that
    runs elsewhere (the findings process) and sends messages, with the same generations and cancel.
    ``busy_changed(bool)`` tells a spinner when work is pending. The Qt implementation of
    :class:`idemview.services.work.Worker`.
    """

    busy_changed = Signal(bool)
    #: a channel stopped being pending (answered, failed or cancelled): a "working: …" list follows it
    pending_dropped = Signal(str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._relay = _Relay(self)
        self._relay.finished.connect(self._deliver)
        self._relay.message.connect(self._deliver_message)
        self._gen: dict[str, int] = {}
        self._pending: dict[str, tuple[CancelToken, Callable | None, Callable | None]] = {}
        self._streams: dict[str, tuple[int, Any, Callable]] = {}  # channel -> (gen, handle, on_message)

    def submit(
        self,
        channel: str,
        fn: Callable[[CancelToken], Any],
        on_ok: Callable[[Any], None] | None = None,
        on_error: Callable[[JobError], None] | None = None,
        *,
        cancel_previous: bool = True,
        run: bool = True,
    ) -> int:
        gen = self._gen.get(channel, 0) + 1
        self._gen[channel] = gen
        prev = self._pending.get(channel)
        if prev is not None and cancel_previous:
            prev[0].cancel()  # nobody will read its answer; stop it in the database too
            self._stop_stream(channel)
        token = CancelToken()
        was_busy = bool(self._pending)
        self._pending[channel] = (token, on_ok, on_error)
        # What a person waits for (grid pages, counts, the detail pane, search) goes ahead of the
        # background findings scan in the pool's queue; a whole-ledger finding kind can take a while.
        background = channel.startswith(("findings", "merge"))
        if run:  # a stream (run=False) runs elsewhere: only its generation and token are kept here
            pool().start(_Job(self._relay, channel, gen, fn, token), 0 if background else 10)
        if not was_busy:
            self.busy_changed.emit(True)
        return gen

    def stream(
        self,
        channel: str,
        start: StreamStart,
        on_message: Callable[[Any], None],
        on_done: Callable[[str | None], None] | None = None,
    ) -> int:
        """Start work that runs elsewhere and sends messages: ``start(emit, done, token)`` returns a
        handle with ``cancel()``; ``emit``/``done`` may be called from any thread, and reach
        ``on_message(msg)`` / ``on_done(error or None)`` on the GUI thread while this is the channel's
        newest submission. Cancelling the channel cancels the handle (terminates the process)."""
        relay = self._relay
        gen_box: list[int] = []

        def emit(msg: Any) -> None:
            try:
                relay.message.emit((channel, gen_box[0], msg))
            except RuntimeError:  # the owner was closed while the work ran
                pass

        def done(err: str | None) -> None:
            try:
                relay.finished.emit((channel, gen_box[0], True, err))
            except RuntimeError:
                pass

        def ok(err: str | None) -> None:
            self._streams.pop(channel, None)
            if on_done is not None:
                on_done(err)

        gen = self.submit(channel, lambda tok: None, ok, None, run=False)
        gen_box.append(gen)
        token = self._pending[channel][0]
        try:
            handle = start(emit, done, token)
        except BaseException:
            self.cancel(channel)
            raise
        self._streams[channel] = (gen, handle, on_message)
        return gen

    def _stop_stream(self, channel: str) -> None:
        s = self._streams.pop(channel, None)
        if s is not None and s[1] is not None:
            s[1].cancel()

    def _deliver_message(self, out) -> None:
        channel, gen, msg = out
        s = self._streams.get(channel)
        if s is None or s[0] != gen or self._gen.get(channel) != gen:
            return  # stale: a newer stream, or the channel was cancelled
        s[2](msg)

    def call_later(self, seconds: float, fn: Callable[[], None]) -> QTimer:
        """Run ``fn()`` on the GUI thread after ``seconds`` (a single-shot timer; ``cancel()`` stops it)."""
        t = QTimer(self)
        t.setSingleShot(True)
        t.setInterval(int(seconds * 1000))
        t.timeout.connect(fn)
        t.timeout.connect(t.deleteLater)
        t.cancel = t.stop  # type: ignore[attr-defined]  # the Worker protocol's Timer
        t.start()
        return t

    def cancel(self, channel: str | None = None) -> None:
        """Cancel one channel (or all): the running statement is interrupted, its result dropped."""
        chans = [channel] if channel is not None else list(self._pending)
        for ch in chans:
            p = self._pending.pop(ch, None)
            self._gen[ch] = self._gen.get(ch, 0) + 1
            if p is not None:
                p[0].cancel()
            self._stop_stream(ch)
            if p is not None:
                self.pending_dropped.emit(ch)
        if not self._pending:
            self.busy_changed.emit(False)

    def is_pending(self, channel: str) -> bool:
        return channel in self._pending

    def pending(self) -> list[str]:
        return list(self._pending)

    def _deliver(self, out):
        channel, gen, ok, value = out
        if self._gen.get(channel) != gen:
            return  # stale: a newer question was asked on this channel
        _tok, on_ok, on_error = self._pending.pop(channel, (None, None, None))
        if _tok is not None:
            self.pending_dropped.emit(channel)
        if not self._pending:
            self.busy_changed.emit(False)
        if not ok and not value.cancelled:  # every failure reaches the log, with its traceback (masked)
            log.warning(
                "background job %s failed: %s%s", channel, value.message, ("\n" + value.detail) if value.detail else ""
            )
        try:
            if ok:
                if on_ok is not None:
                    on_ok(value)
            elif on_error is not None:
                on_error(value)
        except RuntimeError as e:
            # a widget the callback touches was deleted (tab closed mid-flight): nothing to update
            if "already deleted" not in str(e):
                raise
