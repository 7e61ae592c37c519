"""The one way idemview opens a SQLite connection, and the SQL functions it registers on each.

SQLite has no ``md5`` function; PostgreSQL, MySQL/MariaDB and DuckDB do. idemview's SQL uses one
(the intent reference of a layout's ``intent_ref = {hash = [...]}``, :mod:`idemview.ledger.intent_sql`),
so every SQLite connection idemview makes gets it here: the read-only ledger engines
(:func:`idemview.ledger.connect.open_engine`), the in-memory snapshots of Redis and DynamoDB
(:mod:`idemview.ledger.memory_snapshot`), the demo ledgers. A connection made any other way would
fail on the first such query ("no such function: md5") — ``tests/unit/test_sqlite_functions.py``
fails if a module calls ``sqlite3.connect`` or builds a SQLite engine without :func:`connect_sqlite`.

Functions (all deterministic: SQLite may use them in an index or fold repeated calls):

``md5(x)``  the lowercase hex MD5 of ``x`` (32 characters): a BLOB as its bytes, a TEXT as its UTF-8
            bytes, a number as its decimal text; NULL for NULL. Equal to PostgreSQL's ``md5(text)``,
            MySQL's ``LOWER(MD5(...))`` and DuckDB's ``md5`` for the same text.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from typing import Any


def _md5(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str):
        # a str from SQLite is valid UTF-8; surrogatepass only so that no value can raise here
        data = value.encode("utf-8", "surrogatepass")
    else:
        data = str(value).encode("ascii")
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


#: name -> (number of arguments, function)
FUNCTIONS = {"md5": (1, _md5)}


def register_functions(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Register :data:`FUNCTIONS` on ``conn`` (deterministic) and return it. Idempotent."""
    for name, (nargs, fn) in FUNCTIONS.items():
        conn.create_function(name, nargs, fn, deterministic=True)
    return conn


def connect_sqlite(database: str | os.PathLike[str], **kwargs: Any) -> Any:
    """``sqlite3.connect(database, **kwargs)`` with :data:`FUNCTIONS` registered: the only place
    idemview calls ``sqlite3.connect`` (module docstring). Returns the connection (a
    ``sqlite3.Connection``, or an instance of ``kwargs["factory"]``); raises what ``sqlite3.connect``
    raises (``sqlite3.Error``)."""
    return register_functions(sqlite3.connect(database, **kwargs))


__all__ = ["FUNCTIONS", "connect_sqlite", "register_functions"]
