"""Cancellation of running work, shared by the CLI, the GUI and the services layer.

Each job carries a :class:`CancelToken`. An engine-level ``before_cursor_execute`` listener (installed
by :func:`watch_engine`) registers the DBAPI connection a job is executing on, so
:meth:`CancelToken.cancel` can interrupt the running statement with
:class:`idemview.ledger.connect.Interrupter` (``sqlite3.interrupt``, PostgreSQL cancel, MySQL
``KILL QUERY``): the statement stops in the database, not just in our bookkeeping. A job started
after cancellation raises :class:`Cancelled` before it runs anything. No Qt here.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

from sqlalchemy import event
from sqlalchemy.engine import Engine

from idemview import errors
from idemview.ledger.connect import Interrupter

_local = threading.local()


class Cancelled(errors.Cancelled):
    """Raised inside a job whose token was cancelled before a statement started."""


@dataclass(eq=False)
class CancelToken:
    """Cancel flag of one job plus the DBAPI connections it is executing on right now."""

    cancelled: bool = False
    _active: dict = field(default_factory=dict)  # id(dbapi_conn) -> (engine, dbapi_conn)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def cancel(self) -> None:
        self.cancelled = True
        with self._lock:
            active = list(self._active.values())
        for engine, dbapi_conn in active:
            Interrupter(engine).cancel(dbapi_conn)

    def check(self) -> None:
        """Raise :class:`Cancelled` if cancelled (long Python loops in jobs call this)."""
        if self.cancelled:
            raise Cancelled()


def current_token() -> CancelToken | None:
    """The token of the job running on this thread (``None`` outside jobs)."""
    return getattr(_local, "token", None)


_watched: weakref.WeakSet[Engine] = weakref.WeakSet()


def watch_engine(engine: Engine) -> None:
    """Install the listeners that let a job's statements be cancelled (idempotent per engine)."""
    if engine in _watched:
        return
    _watched.add(engine)

    @event.listens_for(engine, "before_cursor_execute")
    def _before(conn, cursor, statement, params, context, executemany):
        tok = current_token()
        if tok is None:
            return
        if tok.cancelled:
            raise Cancelled()
        raw = conn.connection.dbapi_connection
        with tok._lock:
            tok._active[id(raw)] = (engine, raw)

    @event.listens_for(engine, "after_cursor_execute")
    def _after(conn, cursor, statement, params, context, executemany):
        tok = current_token()
        if tok is None:
            return
        raw = conn.connection.dbapi_connection
        with tok._lock:
            tok._active.pop(id(raw), None)


def bind_token(token: CancelToken | None) -> None:
    """Make ``token`` the current job's token on this thread (``None`` clears it)."""
    _local.token = token
