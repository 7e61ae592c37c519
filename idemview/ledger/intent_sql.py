"""An intent reference computed in SQL from several columns (issue #26): ``intent_ref = {hash = [...]}``.

Celery's SQL result backends keep a task's name and arguments in the row (``celery_taskmeta`` with
``result_extended``: ``name``, ``args``, ``kwargs``, celery/backends/database/__init__.py
``_update_result``; django-celery-results: ``task_name``, ``task_args``, ``task_kwargs``). The same
name and arguments under two task ids is one intent sent twice (``duplicate_intent``). The reference
is built by the database, so the findings keep grouping in SQL on ledgers larger than memory.

It is a body hash (DESIGN §2: "message type + body hash"), the same 32 lowercase hex digits on every
engine for the same rows::

    md5(<part 1> || <US> || <part 2> || <US> ... )

where a part is the column's text, a binary column (``bytea``, ``BLOB``: Celery's ``args`` and
``kwargs``) as lowercase hex of its bytes, and a NULL column ''. Per engine:

- PostgreSQL: ``md5(convert_to(concat_ws(<US>, coalesce(<part>, '')...), 'UTF8'))`` (the UTF-8
  bytes also in a LATIN1 or SQL_ASCII database, where ``md5(text)`` would hash its encoding's); a
  ``bytea`` part is ``encode(col, 'hex')`` (no UTF-8 decoding that could fail on a pickled value).
  ``concat_ws`` alone
  would skip a NULL argument (``(a, NULL, b)`` and ``(a, b, NULL)`` would share a hash), hence the
  ``coalesce``;
- MySQL/MariaDB (either dialect name):
  ``LOWER(MD5(CONVERT(CONCAT_WS(<US>, COALESCE(<part>, '')...) USING utf8mb4)))``; a binary part is
  ``LOWER(HEX(col))``; the ``CONVERT`` because ``CONCAT_WS`` keeps a ``latin1`` column's character set
  and ``MD5`` would hash those bytes;
- DuckDB (dump files): as PostgreSQL, a ``BLOB`` part ``lower(hex(col))``;
- SQLite: ``md5(CAST(<part> || <US> || ... AS BLOB))``, a ``BLOB`` part ``lower(hex(col))``;
  SQLite has no ``md5``: idemview registers one on every SQLite connection it opens
  (:mod:`idemview.ledger.sqlite_functions`, the one place), and it hashes the UTF-8 bytes of the text
  (the ``CAST`` hands it bytes, so a text cell that is not UTF-8 is hashed as stored, never an error);
- another dialect: the plain concatenation (no portable hash function).

The text of a non-binary, non-text column (a number, a time) is the engine's own cast, so only text
and binary columns are guaranteed equal across engines (Celery's are). Until issue 27 the SQLite
reference was the plain concatenation (the task's arguments themselves, masked like any value), and
PostgreSQL's skipped NULL columns.

``<US>`` is the ASCII unit separator (0x1F), which JSON text never holds unescaped (a hex part never
holds it at all). ``unless_empty`` columns: where every one of them is empty (NULL, '', ``[]``, ``()``,
``{}``, ``null``, or those as a JSON string: django-celery-results stores ``argsrepr`` encoded, e.g.
``"()"``), the expression is NULL: a task called with no arguments (a periodic one, a cleanup) names
no business intent, and its runs are intended repeats.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import LargeBinary, String, and_, case, cast, func, literal_column, null, or_
from sqlalchemy.sql.expression import ColumnElement

from idemview.ledger.dialects import DUCKDB, MYSQL, POSTGRESQL, SQLITE
from idemview.ledger.sqlx import is_binary

SEPARATOR = "\x1f"
#: The spellings of "no arguments" in Celery's and django-celery-results' rows (JSON of [] / {},
#: the repr of an empty tuple or dict, and those reprs encoded as JSON strings)
EMPTY_VALUES = ("", "[]", "()", "{}", "null", '""', '"[]"', '"()"', '"{}"')


def _sep() -> ColumnElement:
    return literal_column("'" + SEPARATOR + "'")


def _text_for_empty(col: ColumnElement, dialect: str) -> ColumnElement:
    if dialect == POSTGRESQL and is_binary(col):
        # bytea compared with bytea literals (below): no text built per row. encode(col, 'escape')
        # equals one of EMPTY_VALUES exactly when the bytes do (they hold no backslash, NUL or byte
        # above 0x7E, the only ones the escape format rewrites): 0.51 s against 0.77 s at 2M rows.
        return col
    if dialect == MYSQL:
        return col  # a BLOB compares to a string literal byte for byte
    return cast(col, String())


def _part(col: ColumnElement, dialect: str) -> ColumnElement:
    """One column's text in the reference (module docstring): '' for NULL, a binary column as hex."""
    part: ColumnElement
    if dialect == POSTGRESQL:
        part = func.encode(col, literal_column("'hex'")) if is_binary(col) else cast(col, String())
    elif dialect == MYSQL:
        part = func.lower(func.hex(col)) if is_binary(col) else col
    elif dialect in (SQLITE, DUCKDB) and is_binary(col):
        part = func.lower(func.hex(col))
    else:
        part = cast(col, String())
    return func.coalesce(part, literal_column("''"))


def intent_hash(cols: Sequence[ColumnElement], empty: Sequence[ColumnElement], dialect: str) -> ColumnElement:
    """The intent reference of ``cols`` (see the module docstring): 32 lowercase hex digits, equal on
    every engine for equal text and binary columns; NULL where every column of ``empty`` is empty.
    ``dialect`` is a family (:mod:`idemview.ledger.dialects`); on SQLite the connection must carry
    idemview's ``md5`` (:func:`idemview.ledger.sqlite_functions.connect_sqlite`)."""
    parts = [_part(c, dialect) for c in cols]
    out: ColumnElement
    if dialect == POSTGRESQL:
        # md5(text) hashes the database's encoding (LATIN1, SQL_ASCII databases exist): hash UTF-8 bytes
        utf8 = func.convert_to(func.concat_ws(_sep(), *parts), literal_column("'UTF8'"))
        out = func.md5(utf8, type_=String())
    elif dialect == DUCKDB:
        out = func.md5(func.concat_ws(_sep(), *parts), type_=String())
    elif dialect == MYSQL:
        # CONCAT_WS takes a latin1 column's character set (old servers' default): hash its UTF-8 text
        utf8 = func.convert(func.concat_ws(_sep(), *parts).op("USING")(literal_column("utf8mb4")))
        out = func.lower(func.md5(utf8), type_=String())
    else:
        joined = parts[0]
        for p in parts[1:]:
            joined = joined.op("||")(_sep()).op("||")(p)
        # SQLite 3.40 (Python 3.11's) has no concat_ws; the registered md5 takes the UTF-8 bytes
        out = func.md5(cast(joined, LargeBinary()), type_=String()) if dialect == SQLITE else joined
    blank = intent_blank(empty, dialect)
    return out if blank is None else case((blank, null()), else_=out)


def intent_blank(empty: Sequence[ColumnElement], dialect: str) -> ColumnElement | None:
    """The condition "every column of ``empty`` is empty" (NULL, or one of :data:`EMPTY_VALUES`) under
    which :func:`intent_hash` is NULL; ``None`` without ``empty`` columns. Never NULL itself."""
    if not empty:
        return None
    return and_(
        *[
            or_(c.is_(None), _text_for_empty(c, dialect).in_([_empty_literal(c, v, dialect) for v in EMPTY_VALUES]))
            for c in empty
        ]
    )


def _empty_literal(col: ColumnElement, v: str, dialect: str) -> ColumnElement:
    if dialect == POSTGRESQL and is_binary(col):
        return literal_column(_quote(v) + "::bytea")
    return literal_column(_quote(v))


def _quote(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"
