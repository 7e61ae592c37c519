"""Dialect-aware SQL building blocks (SQLAlchemy Core), so findings run inside the database.

- :func:`epoch_seconds` turns a time column of any encoding into seconds since 1970-01-01 UTC (a float
  expression), so two columns of different encodings can be compared in SQL;
- :func:`time_before` compiles "``column`` <= instant" into the column's *own* encoding, so the
  comparison can use the column's index (DESIGN §3);
- :func:`json_text` extracts a scalar at a JSON path as text, NULL when the cell is not valid JSON
  (where the engine can tell: SQLite ``json_valid``, MySQL/MariaDB ``JSON_VALID``).

Engines handled natively: SQLite, PostgreSQL, MySQL/MariaDB, DuckDB (dumps, whose time columns may be
typed ``TIMESTAMP`` or hold text, as a CSV of a SQLite table does). Each construct has one compile handler that
dispatches by dialect *family* (:mod:`idemview.ledger.dialects`), so the ``mariadb`` dialect name gets
MySQL's SQL; an unknown dialect gets the portable (ANSI / SQL:2016) form where there is one and
:class:`~idemview.ledger.dialects.DialectNotSupported` where there is none (turning a timestamp into
seconds), never another engine's SQL.
"""

from __future__ import annotations

import operator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from sqlalchemy import (
    BigInteger,
    DateTime,
    Float,
    Integer,
    LargeBinary,
    Numeric,
    String,
    and_,
    case,
    cast,
    func,
    literal,
    literal_column,
    type_coerce,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement
from sqlalchemy.types import TypeDecorator

from idemview.layouts.layout import TimeColumn
from idemview.ledger.dialects import DUCKDB, MYSQL, POSTGRESQL, SQLITE, family, not_supported
from idemview.ledger.rawtext import RawText, decode_text
from idemview.ledger.times import EPOCH_S_MAX, EPOCH_S_MIN

UTC = UTC


class _EpochOf(FunctionElement):
    """Seconds since the epoch of a datetime / naive / ISO-text expression (see :func:`epoch_seconds`)."""

    type = Float()
    inherit_cache = True
    name = "epoch_of"


class _EpochOfText(_EpochOf):
    inherit_cache = True
    name = "epoch_of_text"


def _epoch_sqlite(arg: str) -> str:
    # julianday() accepts 'YYYY-MM-DD HH:MM:SS.fff', the 'T' form and a trailing offset or 'Z', and gives
    # NULL for text it cannot parse: exactly "missing stays missing".
    return f"((julianday({arg}) - 2440587.5) * 86400.0)"


def _epoch_pg(arg: str) -> str:
    # timestamptz: absolute; timestamp without time zone: EXTRACT treats it as UTC (PostgreSQL >= 9.2).
    return f"CAST(EXTRACT(EPOCH FROM {arg}) AS DOUBLE PRECISION)"


def _epoch_pg_text(a: str) -> str:
    # A cast of malformed text would abort the whole query; only text shaped like ISO-8601 is cast.
    pattern = r"^\d{4}-\d\d-\d\d([ T]\d\d:\d\d(:\d\d(\.\d+)?)?)?\s*(Z|[+-]\d\d(:?\d\d)?)?$"
    return (
        f"CASE WHEN CAST({a} AS TEXT) ~ '{pattern}' THEN "
        f"CAST(EXTRACT(EPOCH FROM CAST(CAST({a} AS TEXT) AS TIMESTAMPTZ)) AS DOUBLE PRECISION) END"
    )


def _epoch_mysql(arg: str) -> str:
    # TIMESTAMPDIFF is independent of the session zone and of UNIX_TIMESTAMP's 2038 limit. A zero date
    # ('0000-00-00 00:00:00', or a zero month/day, kept by MariaDB/MySQL when sql_mode allows it) is
    # an unknown time, exactly like NULL (issue #9, item 6): TIMESTAMPDIFF already gives NULL for it.
    return f"(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {arg}) / 1000000.0)"


def _epoch_mysql_text(a: str) -> str:
    # ISO text: drop the 'T' and a 'Z'; CAST gives NULL (a warning) for text it cannot parse. Explicit
    # numeric offsets are not applied on MySQL/MariaDB (documented limitation).
    return (
        f"(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        f"CAST(REPLACE(REPLACE({a}, 'T', ' '), 'Z', '') AS DATETIME(6))) / 1000000.0)"
    )


def _epoch_duck(a: str) -> str:
    # a TIMESTAMP (naive: UTC) or TIMESTAMPTZ column; epoch() gives seconds with the fraction
    return f"CAST(epoch({a}) AS DOUBLE)"


def _epoch_duck_text(a: str) -> str:
    # TRY_CAST: text that is not a time is NULL (an unknown time), never an aborted query; the session
    # zone is UTC, so text without an offset is UTC (as on every engine).
    return f"CAST(epoch(TRY_CAST(CAST({a} AS VARCHAR) AS TIMESTAMPTZ)) AS DOUBLE)"


def _is_time_type(col) -> bool:
    t = getattr(col, "type", None)
    if isinstance(t, TypeDecorator):
        t = t.impl_instance
    return isinstance(t, DateTime)


class _EpochNumberOfText(FunctionElement):
    """The number an epoch column of a text type (or SQLite's any-type cell) holds, NULL when the cell is
    not numeric text of the shape :data:`idemview.ledger.times.EPOCH_TEXT` (see :func:`_epoch_number`)."""

    type = Float()
    inherit_cache = True
    name = "epoch_number_of_text"


# The shape of times.EPOCH_TEXT in each engine's SQL: unsigned digits, at most one point, no exponent
# (a cast of '1e400' would abort the statement on PostgreSQL), spaces around.
_NUM_RE = "^ *([0-9]{1,20}([.][0-9]*)?|[.][0-9]{1,20}) *$"


@compiles(_EpochNumberOfText)
def _epoch_number_of_text(el, compiler, **kw):
    (arg,) = list(el.clauses)
    a = compiler.process(arg, **kw)
    fam = family(compiler.dialect)
    if fam == SQLITE:
        # Any cell may hold any type. Numbers are numbers; text is taken only when it is digits with at
        # most one point (GLOB, as SQLite has no regular expressions): CAST('yesterday' AS REAL) is 0.0.
        t = f"trim({a})"
        return (
            f"(CASE WHEN typeof({a}) IN ('integer', 'real') THEN {a} "
            f"WHEN typeof({a}) = 'text' AND {t} GLOB '*[0-9]*' AND {t} NOT GLOB '*[^0-9.]*' "
            f"AND {t} NOT GLOB '*.*.*' THEN CAST({t} AS REAL) END)"
        )
    if fam == POSTGRESQL:
        # A failed cast aborts the whole query on PostgreSQL: cast only text of the shape.
        return f"(CASE WHEN CAST({a} AS TEXT) ~ '{_NUM_RE}' THEN CAST(CAST({a} AS TEXT) AS DOUBLE PRECISION) END)"
    if fam == MYSQL:
        # MySQL reads 'yesterday' as 0 in arithmetic (a warning only): only text of the shape is a number.
        return f"(CASE WHEN CAST({a} AS CHAR) REGEXP '{_NUM_RE}' THEN (TRIM(CAST({a} AS CHAR)) + 0e0) END)"
    if fam == DUCKDB:
        t = f"CAST({a} AS VARCHAR)"
        return f"(CASE WHEN regexp_matches({t}, '{_NUM_RE}') THEN CAST(trim({t}) AS DOUBLE) END)"
    return f"CAST({a} AS DOUBLE PRECISION)"


def _is_numeric_type(col: ColumnElement) -> bool:
    t = getattr(col, "type", None)
    if isinstance(t, TypeDecorator):
        t = t.impl_instance
    return isinstance(t, (Integer, Numeric))  # Float is a Numeric


def _epoch_bounds(enc: str) -> tuple[ColumnElement, ColumnElement]:
    scale = 1000.0 if enc == "epoch_ms" else 1.0
    return literal_column(repr(EPOCH_S_MIN * scale)), literal_column(repr(EPOCH_S_MAX * scale))


def _epoch_number(col: ColumnElement, enc: str) -> ColumnElement:
    """An epoch column (``epoch_s``/``epoch_ms``) as its stored number when it is a time, else NULL:
    text that is not a number ('yesterday'), NaN (PostgreSQL's real and numeric hold it), infinities,
    zero, negative numbers and values beyond year 9999 are unknown times, as in
    :func:`idemview.ledger.times.epoch_instant` (issue 19, item 14). In the column's unit."""
    lo, hi = _epoch_bounds(enc)
    v = col if _is_numeric_type(col) else _EpochNumberOfText(col)
    # PostgreSQL sorts NaN above every number: "< hi" excludes it, as it does +Infinity.
    return case((and_(v > lo, v < hi), v))


_EPOCH = {SQLITE: _epoch_sqlite, POSTGRESQL: _epoch_pg, MYSQL: _epoch_mysql, DUCKDB: _epoch_duck}
_EPOCH_TEXT = {SQLITE: _epoch_sqlite, POSTGRESQL: _epoch_pg_text, MYSQL: _epoch_mysql_text, DUCKDB: _epoch_duck_text}


@compiles(_EpochOf)
def _epoch_of(el, compiler, **kw):
    # One handler for every dialect, dispatched by family: SQLAlchemy's @compiles keys on the dialect
    # *name*, and "mariadb" is not "mysql" (it used to get the PostgreSQL-style default here).
    (arg,) = list(el.clauses)
    fam = family(compiler.dialect)
    fn = _EPOCH.get(fam)
    if fam == DUCKDB and not _is_time_type(arg):  # a dump's time column read as text (CSV of SQLite)
        fn = _epoch_duck_text
    if fn is None:
        # No portable SQL turns a timestamp into seconds (EXTRACT(EPOCH ...) is PostgreSQL's).
        raise not_supported(compiler.dialect, "computing times in SQL")
    return fn(compiler.process(arg, **kw))


@compiles(_EpochOfText)
def _epoch_of_text(el, compiler, **kw):
    (arg,) = list(el.clauses)
    fn = _EPOCH_TEXT.get(family(compiler.dialect))
    if fn is None:
        raise not_supported(compiler.dialect, "reading ISO-8601 text times in SQL")
    return fn(compiler.process(arg, **kw))


def _zone_offset_seconds(zone: str, at: datetime | None = None) -> float:
    at = at or datetime.now(UTC)
    off = at.astimezone(ZoneInfo(zone)).utcoffset()
    return off.total_seconds() if off else 0.0


def epoch_seconds(col: ColumnElement, tc: TimeColumn, dialect: str) -> ColumnElement:
    """See :func:`_epoch_seconds`; the result is typed Float so every driver hands back a ``float``
    (PostgreSQL numeric and MySQL decimal would otherwise arrive as ``Decimal``)."""
    return type_coerce(_epoch_seconds(col, tc, dialect), Float())


def _epoch_seconds(col: ColumnElement, tc: TimeColumn, dialect: str) -> ColumnElement:
    """``col`` as seconds since 1970-01-01T00:00:00Z (float SQL expression; NULL when missing or
    unparsable).

    ``naive`` columns written in a zone other than UTC are converted exactly on PostgreSQL (``AT TIME
    ZONE``); on other engines the zone's current UTC offset is applied (no tz database in SQLite)."""
    enc = tc.encoding
    dialect = family(dialect)
    # Arithmetic, not CAST(... AS FLOAT): MySQL's FLOAT is single precision (epoch ms would lose seconds).
    if enc == "epoch_s":
        return _epoch_number(col, enc) * literal_column("1.0")
    if enc == "epoch_ms":
        return _epoch_number(col, enc) / literal_column("1000.0")
    if enc == "iso_text":
        return _EpochOfText(col)
    if enc == "naive" and tc.zone != "UTC":
        if dialect == "postgresql":
            return _EpochOf(col.op("AT TIME ZONE")(literal(tc.zone)))
        return _EpochOf(col) - _zone_offset_seconds(tc.zone)
    return _EpochOf(col)


def _instant_for(col: ColumnElement, inst: datetime, dialect: str) -> ColumnElement:
    """The bound instant for comparing with a ``datetime`` column. A PostgreSQL ``timestamp without
    time zone`` column holding UTC is compared with a naive UTC value: comparing it with a
    ``timestamptz`` would cast the column on every row (the session zone is UTC, so the meaning is the
    same) and no index on it could serve the comparison."""
    if family(dialect) in (POSTGRESQL, DUCKDB) and getattr(getattr(col, "type", None), "timezone", None) is False:
        return literal(inst.astimezone(UTC).replace(tzinfo=None), DateTime())
    return literal(inst, DateTime(timezone=True))


def _time_cmp(col: ColumnElement, tc: TimeColumn, instant: datetime, dialect: str, cmp) -> ColumnElement:
    """``cmp(col, instant)`` with ``instant`` expressed in the column's own encoding.

    On MySQL/MariaDB a zero date (``0000-00-00 00:00:00``, or a zero month or day, stored when
    ``sql_mode`` allows it) sorts before every real date, so ``col <= instant`` would hold for it: it is
    an unknown time, exactly like NULL, and matches no comparison (issue #9, item 6). The range on
    ``col`` still comes first, so an index on it serves the comparison."""
    inst = instant.astimezone(UTC)
    enc = tc.encoding
    dialect = family(dialect)
    if enc in ("epoch_s", "epoch_ms"):
        v = inst.timestamp() * (1000.0 if enc == "epoch_ms" else 1.0)
        if not _is_numeric_type(col):  # text: compared as the number it holds, if it holds one
            return cmp(_epoch_number(col, enc), v)
        # A number: the comparison and the bounds are ranges on the column itself (an index serves
        # them). On SQLite a text cell in a numeric column sorts above every number: "< hi" drops it.
        lo, hi = _epoch_bounds(enc)
        return and_(cmp(col, v), col > lo, col < hi)
    if enc == "iso_text" or dialect == SQLITE or (dialect == DUCKDB and not _is_time_type(col)):
        # Text times: their lexical order is not time order across formats; compare as instants.
        return cmp(epoch_seconds(col, tc, dialect), inst.timestamp())
    if enc == "naive":
        local = inst.astimezone(ZoneInfo(tc.zone)).replace(tzinfo=None)
        out = cmp(col, literal(local, DateTime()))
    else:
        out = cmp(col, _instant_for(col, inst, dialect))
    if dialect == MYSQL:
        out = and_(out, _EpochOf(col).is_not(None))
    return out


def time_before(
    col: ColumnElement, tc: TimeColumn, instant: datetime, dialect: str, inclusive: bool = True
) -> ColumnElement:
    """SQL predicate ``col <= instant`` (``<`` when not inclusive), compiled into the column's encoding
    so that an index on ``col`` can serve it. ``instant`` must be aware."""
    return _time_cmp(col, tc, instant, dialect, operator.le if inclusive else operator.lt)


def time_after(
    col: ColumnElement, tc: TimeColumn, instant: datetime, dialect: str, inclusive: bool = True
) -> ColumnElement:
    """SQL predicate ``col >= instant`` (``>`` when not inclusive), in the column's encoding."""
    return _time_cmp(col, tc, instant, dialect, operator.ge if inclusive else operator.gt)


class _JsonText(FunctionElement):
    type = String()
    inherit_cache = True
    name = "json_text"


@compiles(_JsonText)
def _json_text(el, compiler, **kw):
    col, path = list(el.clauses)
    fam = family(compiler.dialect)
    c = compiler.process(col, **kw)
    if fam == SQLITE:
        p = compiler.process(path, **kw)
        # json_extract raises "malformed JSON" on bad text: guard with json_valid; CAST keeps numbers
        # textual.
        return f"(CASE WHEN json_valid({c}) THEN CAST(json_extract({c}, {p}) AS TEXT) END)"
    if fam == MYSQL:
        p = compiler.process(path, **kw)
        return f"(CASE WHEN JSON_VALID({c}) THEN JSON_UNQUOTE(JSON_EXTRACT({c}, {p})) END)"
    if fam == POSTGRESQL:
        # path arrives as '$.a.b' -> '{a,b}' for #>>; malformed text JSON aborts the query on PostgreSQL
        # (there is no json_valid before 16), which the caller reports as a clear error.
        pv = path.value if hasattr(path, "value") else "$"
        parts = [x for x in pv.lstrip("$").split(".") if x]
        arr = "{" + ",".join(parts) + "}"
        return f"(CAST({c} AS JSON) #>> '{arr}')"
    if fam == DUCKDB:
        # json_valid first: a cell that is not JSON is NULL, not an aborted query (a JSON Lines dump's
        # nested values are typed JSON, a CSV's are text)
        t = f"CAST({c} AS VARCHAR)"
        pv = path.value if hasattr(path, "value") else "$"
        return f"(CASE WHEN json_valid({t}) THEN json_extract_string({t}, {_quote_literal(pv)}) END)"
    # SQL:2016 JSON_VALUE: the portable form.
    return f"JSON_VALUE({c}, {compiler.process(path, **kw)})"


def _quote_literal(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


def json_text(col: ColumnElement, path: str) -> ColumnElement:
    """Text of the JSON scalar at ``path`` (``$.a.b``) in ``col``; NULL when absent."""
    return _JsonText(col, literal(path, String()))


class _HexText(FunctionElement):
    type = String()
    inherit_cache = True
    name = "hex_text"


@compiles(_HexText)
def _hex_text(el, compiler, **kw):
    (col,) = list(el.clauses)
    if family(compiler.dialect) == POSTGRESQL:
        return f"encode({compiler.process(col, **kw)}, 'hex')"
    return f"LOWER(HEX({compiler.process(col, **kw)}))"


def hex_text(col: ColumnElement) -> ColumnElement:
    """A binary column as lowercase hex text (e.g. River's ``unique_key`` hash); NULL stays NULL."""
    return _HexText(col)


def as_text(col: ColumnElement) -> ColumnElement:
    """``col`` cast to text (for keys and references held in integer or UUID columns)."""
    return cast(col, String())


class _Utf8Bytes(TypeDecorator):
    """Text carried as UTF-8 bytes (MySQL binary strings): str in, str out."""

    impl = LargeBinary
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if isinstance(value, RawText):
            return value.raw
        return value.encode("utf-8") if isinstance(value, str) else value

    def process_result_value(self, value, dialect):
        # Bytes that are not UTF-8 (a VARBINARY key) stay exact: RawText, bound back as those bytes.
        if isinstance(value, (bytes, bytearray, memoryview)):
            return decode_text(bytes(value))
        return value


class _ExactText(FunctionElement):
    type = _Utf8Bytes()
    inherit_cache = True
    name = "exact_text"


@compiles(_ExactText)
def _exact_text(el, compiler, **kw):
    (arg,) = list(el.clauses)
    a = compiler.process(arg, **kw)
    if family(compiler.dialect) == MYSQL:
        # A binary string compares byte for byte, trailing spaces included (NO PAD), whatever the
        # column's charset and collation; CONVERT first so every charset lands on the same UTF-8 bytes.
        return f"CAST(CONVERT({a} USING utf8mb4) AS BINARY)"
    return a


class _ExactBinary(_ExactText):
    inherit_cache = True
    name = "exact_binary"


@compiles(_ExactBinary)
def _exact_binary(el, compiler, **kw):
    (arg,) = list(el.clauses)
    a = compiler.process(arg, **kw)
    # Already bytes (VARBINARY, BLOB): no CONVERT, which would turn bytes that are not UTF-8 into '?'.
    return f"CAST({a} AS BINARY)" if family(compiler.dialect) == MYSQL else a


def is_binary(expr: ColumnElement) -> bool:
    """``expr`` is typed as bytes (BINARY, VARBINARY, BLOB, bytea)."""
    t = getattr(expr, "type", None)
    if isinstance(t, TypeDecorator):
        t = t.impl_instance
    if isinstance(t, LargeBinary):
        return True
    try:
        return t is not None and t.python_type is bytes
    except NotImplementedError:
        return False


def exact_text(expr: ColumnElement) -> ColumnElement:
    """``expr`` compared exactly (byte for byte) on MySQL/MariaDB, whose default collations are case-,
    accent- and trailing-space-insensitive; unchanged elsewhere. Values still arrive as ``str`` (a
    :class:`~idemview.ledger.rawtext.RawText` for bytes that are not UTF-8)."""
    return _ExactBinary(expr) if is_binary(expr) else _ExactText(expr)


class _StoredInt(FunctionElement):
    type = BigInteger()
    inherit_cache = True
    name = "stored_int"


@compiles(_StoredInt)
def _stored_int(el, compiler, **kw):
    (arg,) = list(el.clauses)
    a = compiler.process(arg, **kw)
    fam = family(compiler.dialect)
    if fam == SQLITE:
        # SQLite keeps any value in any column, and CAST invents numbers: CAST('many' AS INTEGER) is 0,
        # CAST(1e20 AS INTEGER) is 9223372036854775807. Only a value that reads back unchanged as an
        # integer is one.
        return f"(CASE WHEN CAST(CAST({a} AS INTEGER) AS TEXT) = CAST({a} AS TEXT) THEN CAST({a} AS INTEGER) END)"
    if fam == POSTGRESQL:
        # A failed cast aborts the whole statement on PostgreSQL: cast only integer-shaped text.
        return (
            f"(CASE WHEN CAST({a} AS TEXT) ~ '^\\s*[-+]?[0-9]{{1,18}}\\s*$' THEN CAST(CAST({a} AS TEXT) AS BIGINT) END)"
        )
    if fam == MYSQL:
        # MySQL's CAST gives 0 for 'many' and clamps 1e20 (with a warning only).
        return (
            f"(CASE WHEN CAST({a} AS CHAR) REGEXP '^[[:space:]]*[-+]?[0-9]{{1,18}}[[:space:]]*$' "
            f"THEN CAST({a} AS SIGNED) END)"
        )
    if fam == DUCKDB:
        t = f"CAST({a} AS VARCHAR)"
        return f"(CASE WHEN regexp_matches({t}, '^\\s*[-+]?[0-9]{{1,18}}\\s*$') THEN CAST(trim({t}) AS BIGINT) END)"
    return f"CAST({a} AS BIGINT)"


def stored_int(expr: ColumnElement, dialect: str) -> ColumnElement:
    """``expr`` as an integer where the stored value is one, else NULL (an unknown count, like a
    missing one): for SQL comparisons and sums (retry storms, attempt numbers). A column the database
    types as an integer on PostgreSQL or MySQL/MariaDB holds only integers and is used as it is (its
    index stays usable); SQLite's declared types are not enforced. Display and export read the value
    as stored instead (issue #9, item 8)."""
    t = getattr(expr, "type", None)
    if family(dialect) in (POSTGRESQL, MYSQL, DUCKDB) and isinstance(t, Integer):
        return expr
    return _StoredInt(expr)


def limit_seconds(expr: ColumnElement, dialect: str) -> ColumnElement:
    """A per-row limit (a lock or active-time limit) as seconds: a PostgreSQL ``interval`` column
    through ``EXTRACT(EPOCH FROM ...)`` (pg-boss v10's ``expire_in``, src/plans.js createTableJob),
    anything else as :func:`stored_int` (NULL where the value is not an integer). Only PostgreSQL
    reflects an interval type; MySQL/MariaDB and SQLite have none."""
    from sqlalchemy import extract
    from sqlalchemy.dialects.postgresql import INTERVAL
    from sqlalchemy.sql.sqltypes import Interval

    if family(dialect) == POSTGRESQL and isinstance(getattr(expr, "type", None), (INTERVAL, Interval)):
        return extract("epoch", expr)
    return stored_int(expr, dialect)


def intent_parts(cols: list[ColumnElement], dialect: str) -> list[ColumnElement]:
    """The columns of a computed intent reference (``intent_ref = {hash = [...]}``,
    :func:`idemview.ledger.intent_sql.intent_hash`) as values to compare one by one, in the dialect
    family's terms: two records whose parts are all equal have the same reference, so a grouping or a
    join can compare the columns themselves instead of building (and hashing) their concatenation for
    every row (issue 27 item 4: 3x less CPU for the grouping at 1M Celery rows on SQLite).

    A NULL column counts as '' (as in the reference). Compared byte for byte: SQLite ``COLLATE
    BINARY``; PostgreSQL ``bytea`` as bytes (equal bytes, equal hex) and text ``COLLATE "C"``;
    MySQL/MariaDB as binary strings (:func:`exact_text`). Unlike the joined reference, the parts never
    merge two different splits of one text: ``('a\\x1fb', 'c')`` and ``('a', 'b\\x1fc')`` concatenate
    alike, and PostgreSQL's ``concat_ws`` skipped a NULL column, so ``(a, b, NULL)`` and
    ``(a, NULL, b)`` had one md5."""
    fam = family(dialect)
    out: list[ColumnElement] = []
    for c in cols:
        if fam == POSTGRESQL and is_binary(c):
            out.append(func.coalesce(c, literal_column("'\\x'::bytea")))
        elif fam == POSTGRESQL:
            out.append(func.coalesce(cast(c, String()), literal_column("''")).collate("C"))
        elif fam == MYSQL:
            blank = func.coalesce(c, literal_column("''"), type_=c.type)
            out.append(_ExactBinary(blank) if is_binary(c) else _ExactText(blank))
        elif fam == SQLITE:
            out.append(type_coerce(func.coalesce(cast(c, String()), literal_column("''")), String()).collate("BINARY"))
        else:
            out.append(func.coalesce(cast(c, String()), literal_column("''")))
    return out
