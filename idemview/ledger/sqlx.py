"""Dialect-aware SQL building blocks (SQLAlchemy Core), so findings run inside the database.

- :func:`epoch_seconds` turns a time column of any encoding into seconds since 1970-01-01 UTC (a float
  expression), so two columns of different encodings can be compared in SQL;
- :func:`time_before` compiles "``column`` <= instant" into the column's *own* encoding, so the
  comparison can use the column's index (DESIGN §3);
- :func:`json_text` extracts a scalar at a JSON path as text, NULL when the cell is not valid JSON
  (where the engine can tell: SQLite ``json_valid``, MySQL/MariaDB ``JSON_VALID``).

Engines handled natively: SQLite, PostgreSQL, MySQL/MariaDB. Other dialects get a generic form (ANSI
``EXTRACT(EPOCH ...)``) that most engines accept.
"""

from __future__ import annotations

import operator

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from sqlalchemy import DateTime, Float, LargeBinary, String, cast, literal, literal_column, type_coerce
from sqlalchemy.types import TypeDecorator
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement

from idemview.layouts.layout import TimeColumn

UTC = timezone.utc


class _EpochOf(FunctionElement):
    """Seconds since the epoch of a datetime / naive / ISO-text expression (see :func:`epoch_seconds`)."""

    type = Float()
    inherit_cache = True
    name = "epoch_of"


class _EpochOfText(_EpochOf):
    inherit_cache = True
    name = "epoch_of_text"


@compiles(_EpochOf)
def _epoch_default(el, compiler, **kw):
    (arg,) = list(el.clauses)
    return f"EXTRACT(EPOCH FROM {compiler.process(arg, **kw)})"


@compiles(_EpochOf, "sqlite")
@compiles(_EpochOfText, "sqlite")
def _epoch_sqlite(el, compiler, **kw):
    # julianday() accepts 'YYYY-MM-DD HH:MM:SS.fff', the 'T' form and a trailing offset or 'Z', and gives
    # NULL for text it cannot parse: exactly "missing stays missing".
    (arg,) = list(el.clauses)
    return f"((julianday({compiler.process(arg, **kw)}) - 2440587.5) * 86400.0)"


@compiles(_EpochOf, "postgresql")
def _epoch_pg(el, compiler, **kw):
    # timestamptz: absolute; timestamp without time zone: EXTRACT treats it as UTC (PostgreSQL >= 9.2).
    (arg,) = list(el.clauses)
    return f"CAST(EXTRACT(EPOCH FROM {compiler.process(arg, **kw)}) AS DOUBLE PRECISION)"


@compiles(_EpochOfText, "postgresql")
def _epoch_pg_text(el, compiler, **kw):
    # A cast of malformed text would abort the whole query; only text shaped like ISO-8601 is cast.
    (arg,) = list(el.clauses)
    a = compiler.process(arg, **kw)
    pattern = r"^\d{4}-\d\d-\d\d([ T]\d\d:\d\d(:\d\d(\.\d+)?)?)?\s*(Z|[+-]\d\d(:?\d\d)?)?$"
    return (f"CASE WHEN CAST({a} AS TEXT) ~ '{pattern}' THEN "
            f"CAST(EXTRACT(EPOCH FROM CAST(CAST({a} AS TEXT) AS TIMESTAMPTZ)) AS DOUBLE PRECISION) END")


@compiles(_EpochOf, "mysql")
@compiles(_EpochOf, "mariadb")
def _epoch_mysql(el, compiler, **kw):
    # TIMESTAMPDIFF is independent of the session zone and of UNIX_TIMESTAMP's 2038 limit.
    (arg,) = list(el.clauses)
    return f"(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {compiler.process(arg, **kw)}) / 1000000.0)"


@compiles(_EpochOfText, "mysql")
@compiles(_EpochOfText, "mariadb")
def _epoch_mysql_text(el, compiler, **kw):
    # ISO text: drop the 'T' and a 'Z'; CAST gives NULL (a warning) for text it cannot parse. Explicit
    # numeric offsets are not applied on MySQL/MariaDB (documented limitation).
    (arg,) = list(el.clauses)
    a = compiler.process(arg, **kw)
    return (f"(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
            f"CAST(REPLACE(REPLACE({a}, 'T', ' '), 'Z', '') AS DATETIME(6))) / 1000000.0)")


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
    # Arithmetic, not CAST(... AS FLOAT): MySQL's FLOAT is single precision (epoch ms would lose seconds).
    if enc == "epoch_s":
        return col * literal_column("1.0")
    if enc == "epoch_ms":
        return col / literal_column("1000.0")
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
    if dialect == "postgresql" and getattr(getattr(col, "type", None), "timezone", None) is False:
        return literal(inst.astimezone(UTC).replace(tzinfo=None), DateTime())
    return literal(inst, DateTime(timezone=True))


def _time_cmp(col: ColumnElement, tc: TimeColumn, instant: datetime, dialect: str, cmp) -> ColumnElement:
    """``cmp(col, instant)`` with ``instant`` expressed in the column's own encoding."""
    inst = instant.astimezone(UTC)
    enc = tc.encoding
    if enc == "epoch_s":
        return cmp(col, inst.timestamp())
    if enc == "epoch_ms":
        return cmp(col, inst.timestamp() * 1000.0)
    if enc == "iso_text" or dialect == "sqlite":
        # Text times: their lexical order is not time order across formats; compare as instants.
        return cmp(epoch_seconds(col, tc, dialect), inst.timestamp())
    if enc == "naive":
        local = inst.astimezone(ZoneInfo(tc.zone)).replace(tzinfo=None)
        return cmp(col, literal(local, DateTime()))
    return cmp(col, _instant_for(col, inst, dialect))


def time_before(col: ColumnElement, tc: TimeColumn, instant: datetime, dialect: str,
                inclusive: bool = True) -> ColumnElement:
    """SQL predicate ``col <= instant`` (``<`` when not inclusive), compiled into the column's encoding
    so that an index on ``col`` can serve it. ``instant`` must be aware."""
    return _time_cmp(col, tc, instant, dialect, operator.le if inclusive else operator.lt)


def time_after(col: ColumnElement, tc: TimeColumn, instant: datetime, dialect: str,
               inclusive: bool = True) -> ColumnElement:
    """SQL predicate ``col >= instant`` (``>`` when not inclusive), in the column's encoding."""
    return _time_cmp(col, tc, instant, dialect, operator.ge if inclusive else operator.gt)


class _JsonText(FunctionElement):
    type = String()
    inherit_cache = True
    name = "json_text"


@compiles(_JsonText)
def _json_generic(el, compiler, **kw):
    col, path = list(el.clauses)
    return f"JSON_VALUE({compiler.process(col, **kw)}, {compiler.process(path, **kw)})"


@compiles(_JsonText, "sqlite")
def _json_sqlite(el, compiler, **kw):
    col, path = list(el.clauses)
    c, p = compiler.process(col, **kw), compiler.process(path, **kw)
    # json_extract raises "malformed JSON" on bad text: guard with json_valid; CAST keeps numbers textual.
    return f"(CASE WHEN json_valid({c}) THEN CAST(json_extract({c}, {p}) AS TEXT) END)"


@compiles(_JsonText, "mysql")
@compiles(_JsonText, "mariadb")
def _json_mysql(el, compiler, **kw):
    col, path = list(el.clauses)
    c, p = compiler.process(col, **kw), compiler.process(path, **kw)
    return f"(CASE WHEN JSON_VALID({c}) THEN JSON_UNQUOTE(JSON_EXTRACT({c}, {p})) END)"


@compiles(_JsonText, "postgresql")
def _json_pg(el, compiler, **kw):
    col, path = list(el.clauses)
    c = compiler.process(col, **kw)
    # path arrives as '$.a.b' -> '{a,b}' for #>>; malformed text JSON aborts the query on PostgreSQL
    # (there is no json_valid before 16), which the caller reports as a clear error.
    p = path.value if hasattr(path, "value") else "$"
    parts = [x for x in p.lstrip("$").split(".") if x]
    arr = "{" + ",".join(parts) + "}"
    return f"(CAST({c} AS JSON) #>> '{arr}')"


def json_text(col: ColumnElement, path: str) -> ColumnElement:
    """Text of the JSON scalar at ``path`` (``$.a.b``) in ``col``; NULL when absent."""
    return _JsonText(col, literal(path, String()))


class _HexText(FunctionElement):
    type = String()
    inherit_cache = True
    name = "hex_text"


@compiles(_HexText)
def _hex_generic(el, compiler, **kw):
    (col,) = list(el.clauses)
    return f"LOWER(HEX({compiler.process(col, **kw)}))"


@compiles(_HexText, "postgresql")
def _hex_pg(el, compiler, **kw):
    (col,) = list(el.clauses)
    return f"encode({compiler.process(col, **kw)}, 'hex')"


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
        return value.encode("utf-8") if isinstance(value, str) else value

    def process_result_value(self, value, dialect):
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value).decode("utf-8", "replace")
        return value


class _ExactText(FunctionElement):
    type = _Utf8Bytes()
    inherit_cache = True
    name = "exact_text"


@compiles(_ExactText)
def _exact_default(el, compiler, **kw):
    (arg,) = list(el.clauses)
    return compiler.process(arg, **kw)


@compiles(_ExactText, "mysql")
@compiles(_ExactText, "mariadb")
def _exact_mysql(el, compiler, **kw):
    # A binary string compares byte for byte, trailing spaces included (NO PAD), whatever the column's
    # charset and collation; CONVERT first so every charset lands on the same UTF-8 bytes.
    (arg,) = list(el.clauses)
    return f"CAST(CONVERT({compiler.process(arg, **kw)} USING utf8mb4) AS BINARY)"


def exact_text(expr: ColumnElement) -> ColumnElement:
    """``expr`` compared exactly (byte for byte) on MySQL/MariaDB, whose default collations are case-,
    accent- and trailing-space-insensitive; unchanged elsewhere. Values still arrive as ``str``."""
    return _ExactText(expr)
