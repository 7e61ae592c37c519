"""Dialect families: the one place idemview decides which engine's SQL to speak (issue #9, item 1).

SQLAlchemy names a dialect by its backend (``engine.dialect.name``): ``sqlite``, ``postgresql``,
``mysql``, and ``mariadb`` for the same MySQL server protocol spoken through ``mariadb+pymysql://``
(also what the connection dialog's "MariaDB" choice builds). Every SQL decision in idemview goes by the
*family* instead, so a MariaDB URL gets MySQL SQL, never PostgreSQL's:

======================  ==============
dialect                 family
======================  ==============
``sqlite``              ``sqlite``
``postgresql`` (and     ``postgresql``
subclasses)
``mysql``, ``mariadb``  ``mysql``
``duckdb``              ``duckdb`` (dump files, :mod:`idemview.ledger.dumps`)
anything else           ``other``
======================  ==============

An ``other`` dialect gets portable (ANSI) SQL where one exists, and :class:`DialectNotSupported`
(a clear one-line message) where it does not, never another engine's SQL.

Where a family keeps its tables (:func:`schemas_are_databases`): on MySQL/MariaDB a "schema" is
another database on the same server, so reflection and detection look only at the database the URL
names (``SELECT DATABASE()``), never at their neighbours.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.exc import CompileError

SQLITE, POSTGRESQL, MYSQL, DUCKDB, OTHER = "sqlite", "postgresql", "mysql", "duckdb", "other"

#: Backend names SQLAlchemy gives each family (``URL.get_backend_name()``, ``dialect.name``).
_BY_NAME = {
    "sqlite": SQLITE,
    "postgresql": POSTGRESQL,
    "postgres": POSTGRESQL,
    "mysql": MYSQL,
    "mariadb": MYSQL,
    "duckdb": DUCKDB,
}

#: Human names for messages.
TITLES = {SQLITE: "SQLite", POSTGRESQL: "PostgreSQL", MYSQL: "MySQL/MariaDB", DUCKDB: "DuckDB"}


class DialectNotSupported(CompileError):
    """idemview has no SQL for this construct on this dialect; the message names the dialect and the
    engines that are supported (no SQL, no value)."""


def _dialect_family(d: Dialect) -> str:
    # By class first: third-party dialects built on a family's dialect class (e.g. a PostgreSQL
    # fork's dialect subclassing PGDialect) speak that family's SQL; then by name. DuckDB first:
    # duckdb-engine's dialect subclasses PGDialect, but DuckDB's SQL and catalog are its own.
    if getattr(d, "name", "") == "duckdb":
        return DUCKDB
    try:
        from sqlalchemy.dialects.mysql.base import MySQLDialect
        from sqlalchemy.dialects.postgresql.base import PGDialect
        from sqlalchemy.dialects.sqlite.base import SQLiteDialect
    except ImportError:  # pragma: no cover - SQLAlchemy always ships these three
        return _BY_NAME.get(getattr(d, "name", ""), OTHER)
    if isinstance(d, MySQLDialect):
        return MYSQL
    if isinstance(d, PGDialect):
        return POSTGRESQL
    if isinstance(d, SQLiteDialect):
        return SQLITE
    return _BY_NAME.get(getattr(d, "name", ""), OTHER)


def family(x: Any) -> str:
    """The dialect family of ``x``: ``"sqlite"``, ``"postgresql"``, ``"mysql"`` (MySQL and MariaDB
    under either SQLAlchemy name), ``"duckdb"`` or ``"other"``.

    ``x`` may be an :class:`~sqlalchemy.engine.Engine`, a :class:`~sqlalchemy.engine.Connection`, a
    :class:`~sqlalchemy.engine.interfaces.Dialect`, a SQL compiler (anything with ``.dialect``), a
    :class:`~sqlalchemy.engine.URL`, a URL string (``"mariadb+pymysql://..."``) or a bare backend
    name (``"mariadb"``). An unparsable string is ``"other"``."""
    if isinstance(x, (Engine, Connection)):
        return _dialect_family(x.dialect)
    if isinstance(x, Dialect):
        return _dialect_family(x)
    if isinstance(x, URL):
        return _BY_NAME.get(x.get_backend_name(), OTHER)
    if isinstance(x, str):
        if "://" in x or ":" in x.split("/")[0]:
            try:
                return _BY_NAME.get(make_url(x).get_backend_name(), OTHER)
            except Exception:  # noqa: BLE001 - not a URL: not a known family
                return OTHER
        return _BY_NAME.get(x.split("+")[0].lower(), OTHER)
    d = getattr(x, "dialect", None)
    if d is not None:
        return _dialect_family(d)
    return OTHER


def is_mysql(x: Any) -> bool:
    """MySQL or MariaDB, whichever SQLAlchemy name the dialect goes by."""
    return family(x) == MYSQL


def schemas_are_databases(x: Any) -> bool:
    """True where a "schema" is another database on the server (MySQL/MariaDB): reflection must then
    stay in the connected database."""
    return family(x) == MYSQL


def dialect_name(x: Any) -> str:
    """The dialect's own name (``mariadb``, ``mysql``, ...) for messages and manifests."""
    if isinstance(x, (Engine, Connection)):
        return x.dialect.name
    d = x if isinstance(x, Dialect) else getattr(x, "dialect", None)
    return getattr(d, "name", None) or str(x)


def not_supported(x: Any, what: str) -> DialectNotSupported:
    """The error for a construct (``what``, plain words) idemview cannot express on ``x``'s dialect."""
    return DialectNotSupported(
        f"{what} is not supported on the {dialect_name(x)!r} dialect "
        f"(idemview speaks SQLite, PostgreSQL and MySQL/MariaDB)"
    )
