"""Database errors classified by their code, never by their words (issue 25, item 4).

One place turns a driver's exception into idemview's typed errors (:mod:`idemview.errors`):

* :class:`~idemview.errors.QueryCancelled`: a running statement was stopped on request;
* :class:`~idemview.errors.QueryTimedOut`: a statement ran past its time limit;
* :class:`~idemview.errors.ConnectionLost`: the session went away (reconnecting may help).

The decision goes by the dialect family's own codes, the way SQLAlchemy's ``Dialect.is_disconnect``
goes by them (a server's message text is translated by ``lc_messages`` and changes between versions;
its codes do not):

=============  ===========================================================================
family         codes
=============  ===========================================================================
PostgreSQL     SQLSTATE (``psycopg.Error.sqlstate``, ``pgcode`` for psycopg2): ``57014``
               query_canceled; class ``08`` connection exception, ``57P01``-``57P03``,
               ``57P05`` (admin/crash shutdown, cannot connect now, idle session timeout),
               ``25P03`` (idle-in-transaction timeout: the server ends the session).
               A psycopg ``OperationalError`` without SQLSTATE is libpq's own failure (the
               link: refused, reset, "server closed the connection unexpectedly").
MySQL/MariaDB  the server/client errno (``args[0]`` of a PyMySQL / mysqlclient error):
               ``1317`` ER_QUERY_INTERRUPTED (``KILL QUERY``); ``3024`` ER_QUERY_TIMEOUT
               (MySQL ``max_execution_time``), ``1969`` ER_STATEMENT_TIMEOUT (MariaDB
               ``max_statement_time``); ``2002``/``2003``/``2006``/``2013``/``2055`` (client:
               cannot connect, gone away, lost), ``1053`` shutdown, ``1152`` aborted,
               ``1158``-``1161`` network, ``1927`` ER_CONNECTION_KILLED, ``4031`` idle timeout.
SQLite         the result code (``sqlite3.Error.sqlite_errorcode``, Python 3.11; the primary
               code is its low byte): ``SQLITE_INTERRUPT`` (9), from ``interrupt()`` or from
               idemview's progress-handler deadline (told apart by
               :func:`idemview.ledger.connect.statement_timed_out`); ``SQLITE_CANTOPEN`` (14)
               and ``SQLITE_IOERR`` (10): the file cannot be read any more.
=============  ===========================================================================

PostgreSQL reports a statement timeout and a cancel with the same SQLSTATE (57014); who asked is
what tells them apart: ``cancel_requested=True`` (idemview's Cancel, Ctrl-C) makes it a
:class:`QueryCancelled`, otherwise it was the server's limit (or an administrator's
``pg_cancel_backend``) and it is a :class:`QueryTimedOut`.

Sources: PostgreSQL Appendix A "Error Codes"; MariaDB/MySQL server and client error references
(``mysqld_error.h``, ``errmsg.h``); SQLite "Result and Error Codes".
"""

from __future__ import annotations

import sqlite3

from idemview.errors import ConnectionLost, IdemviewError, QueryCancelled, QueryTimedOut
from idemview.ledger.dialects import MYSQL, OTHER, POSTGRESQL, SQLITE

#: PostgreSQL SQLSTATEs of a session that is gone (besides the whole class ``08``).
PG_LOST = frozenset({"57P01", "57P02", "57P03", "57P05", "25P03"})
PG_QUERY_CANCELED = "57014"

MYSQL_INTERRUPTED = 1317
MYSQL_TIMEOUTS = frozenset({3024, 1969})
MYSQL_LOST = frozenset({2002, 2003, 2006, 2013, 2055, 1053, 1152, 1158, 1159, 1160, 1161, 1927, 4031})

SQLITE_LOST = frozenset({sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR})

#: Top-level module of a DBAPI driver -> dialect family.
_DRIVERS = {
    "sqlite3": SQLITE,
    "pysqlite2": SQLITE,
    "psycopg": POSTGRESQL,
    "psycopg2": POSTGRESQL,
    "pg8000": POSTGRESQL,
    "asyncpg": POSTGRESQL,
    "pymysql": MYSQL,
    "MySQLdb": MYSQL,
    "mysql": MYSQL,
    "mariadb": MYSQL,
}


def driver_error(e: BaseException) -> BaseException:
    """The DBAPI driver's own exception under a SQLAlchemy ``DBAPIError`` (``.orig``), else ``e``."""
    orig = getattr(e, "orig", None)
    return orig if isinstance(orig, BaseException) else e


def driver_family(e: BaseException) -> str:
    """The dialect family (:mod:`idemview.ledger.dialects`) whose driver raised ``e`` (or the
    exception under it), by the driver's module: ``"sqlite"``, ``"postgresql"``, ``"mysql"`` or
    ``"other"``."""
    d = driver_error(e)
    for cls in type(d).__mro__:
        fam = _DRIVERS.get(cls.__module__.split(".")[0])
        if fam is not None:
            return fam
    return OTHER


def error_code(e: BaseException) -> str | int | None:
    """The code the driver gives ``e``: a SQLSTATE string (PostgreSQL), an errno int (MySQL/MariaDB),
    a SQLite extended result code int; ``None`` when the driver gave none."""
    d = driver_error(e)
    fam = driver_family(d)
    if fam == POSTGRESQL:
        return getattr(d, "sqlstate", None) or getattr(d, "pgcode", None)
    if fam == MYSQL:
        args = getattr(d, "args", ())
        return args[0] if args and isinstance(args[0], int) else None
    if fam == SQLITE:
        return getattr(d, "sqlite_errorcode", None)
    return None


def _pg(d: BaseException, code: object, cancel_requested: bool) -> type[IdemviewError] | None:
    if code == PG_QUERY_CANCELED:
        return QueryCancelled if cancel_requested else QueryTimedOut
    if isinstance(code, str) and (code.startswith("08") or code in PG_LOST):
        return ConnectionLost
    if code is None and type(d).__name__ == "OperationalError":
        return ConnectionLost  # libpq's own failure: the link, not a statement
    return None


def _mysql(code: object) -> type[IdemviewError] | None:
    if code == MYSQL_INTERRUPTED:
        return QueryCancelled
    if code in MYSQL_TIMEOUTS:
        return QueryTimedOut
    if code in MYSQL_LOST:
        return ConnectionLost
    return None


def _sqlite(code: object, cancel_requested: bool) -> type[IdemviewError] | None:
    if not isinstance(code, int):
        return None
    primary = code & 0xFF
    if primary == sqlite3.SQLITE_INTERRUPT:
        from idemview.ledger.connect import statement_timed_out

        timed_out = statement_timed_out()  # read (and clear) this thread's deadline flag either way
        return QueryTimedOut if timed_out and not cancel_requested else QueryCancelled
    if primary in SQLITE_LOST:
        return ConnectionLost
    return None


def classify(e: BaseException, *, cancel_requested: bool = False) -> IdemviewError | None:
    """The typed error ``e`` (a SQLAlchemy ``DBAPIError`` or a driver's own exception) stands for, or
    ``None`` when its code means none of them (a syntax error, a refused write, a missing table).

    The result's message is the driver's first line, made safe (:func:`idemview.ledger.connect.short_error`),
    its ``code`` the driver's code, its ``__cause__`` ``e``. ``cancel_requested``: idemview asked for
    the statement to stop (a cancelled job token, Ctrl-C); it decides PostgreSQL's shared 57014 and a
    SQLite interrupt. A SQLAlchemy error whose ``connection_invalidated`` is set (SQLAlchemy's own
    ``is_disconnect``) is a :class:`ConnectionLost` even when its code is unknown here. Never raises."""
    d = driver_error(e)
    fam = driver_family(d)
    code = error_code(d)
    kind: type[IdemviewError] | None = None
    if fam == POSTGRESQL:
        kind = _pg(d, code, cancel_requested)
    elif fam == MYSQL:
        kind = _mysql(code)
    elif fam == SQLITE:
        kind = _sqlite(code, cancel_requested)
    if kind is None and getattr(e, "connection_invalidated", False):
        kind = ConnectionLost
    if kind is None:
        return None
    from idemview.ledger.connect import short_error

    out = kind(short_error(e))
    out.code = code  # type: ignore[attr-defined]
    out.__cause__ = e
    return out


__all__ = ["classify", "driver_error", "driver_family", "error_code"]
