"""A ledger: a read-only engine plus a layout, compiled to SQLAlchemy Core (DESIGN §3, §4, §10).

:class:`Ledger` reflects the layout's tables (proving the layout fits), builds the normalized operations
expression set, and answers the questions every view asks: pages of operations (keyset paging, sorted
and filtered by the database), the records and attempts of one operation, counts, and the distinct
values of a column. Findings are computed by :mod:`idemview.findings.engine` on the same expressions.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    case,
    cast,
    false,
    func,
    inspect,
    literal,
    literal_column,
    null,
    or_,
    select,
    true,
    tuple_,
    type_coerce,
)
from sqlalchemy import column as sa_column
from sqlalchemy import table as sa_table
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, NoSuchTableError
from sqlalchemy.sql import sqltypes
from sqlalchemy.sql.elements import Null
from sqlalchemy.sql.expression import ColumnElement, CompoundSelect, Select
from sqlalchemy.types import TypeDecorator

from idemview.domain import jsontext
from idemview.domain.filters import Filter
from idemview.domain.model import Attempt, Operation, Outcome, Payload, Status
from idemview.layouts.layout import Layout, LayoutError, Predicate, StatusSource, TimeColumn
from idemview.ledger.dialects import MYSQL, POSTGRESQL, SQLITE, family
from idemview.ledger.filtering import finding_clause
from idemview.ledger.rawtext import LedgerText
from idemview.ledger.sqlx import (
    as_text,
    epoch_seconds,
    exact_text,
    hex_text,
    is_binary,
    json_text,
    stored_int,
    time_after,
    time_before,
)
from idemview.ledger.times import decode_time, from_epoch

UTC = UTC

#: Sort keys the grid offers, each a normalized column name.
SORTABLE = ("created_at", "key", "scope", "kind", "status", "expires_at", "attempt_count", "updated_at")


def _is_text(col) -> bool:
    if isinstance(col.type, sqltypes.Enum):
        # A PostgreSQL enum rejects a value outside its labels (a legacy spelling such as pg-boss's
        # 'expired', a value the user maps): compare it as text.
        return False
    t = col.type
    if isinstance(t, TypeDecorator):  # LedgerText (SQLite text columns) and the like
        t = t.impl_instance
    try:
        return isinstance(t, String) or t.python_type is str
    except NotImplementedError:
        return False


def decode_payload(value: Any, encoding: str | None) -> Payload | None:
    """Decode a payload cell by its declared encoding (DESIGN §4).

    ``pickle`` is never unpickled: the result carries only the size. Broken JSON keeps its raw text
    with ``problem`` set. Binary is returned as bytes (shown as hex)."""
    if value is None:
        return None
    enc = encoding or "text"
    if isinstance(value, memoryview):
        value = value.tobytes()
    if enc == "pickle":
        size = len(value) if isinstance(value, (bytes, bytearray, str)) else None
        return Payload("pickle", None, size=size, problem="pickled, not decoded")
    if enc == "binary":
        b = value if isinstance(value, (bytes, bytearray)) else str(value).encode()
        return Payload("binary", bytes(b), size=len(b))
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return Payload(
                "binary", bytes(value), size=len(value), problem=f"declared {enc} but not UTF-8 text; shown as bytes"
            )
    if enc == "json":
        if isinstance(value, (dict, list, int, float, bool)):
            return Payload("json", value, size=None)
        try:
            return Payload("json", jsontext.loads(value), size=len(value))
        except (ValueError, TypeError) as e:
            return Payload("json", str(value), size=len(str(value)), problem=f"broken JSON: {e}")
    return Payload("text", str(value), size=len(str(value)))


@dataclass
class Page:
    """One page of the operations grid: ``rows`` (normalized :class:`Operation`), and ``cursor`` to ask
    for the next page with, ``None`` when this was the last."""

    rows: list[Operation]
    cursor: tuple | None


def with_naive_zone(layout: Layout, zone: str) -> Layout:
    """A copy of ``layout`` whose ``naive`` time columns are read in ``zone`` (the connection's setting:
    the zone the application wrote its naive timestamps in, e.g. Camel's JVM zone). Raises
    :class:`LayoutError` for an unknown zone."""
    from dataclasses import replace
    from zoneinfo import ZoneInfo

    try:
        ZoneInfo(zone)
    except Exception:
        raise LayoutError(f"{zone!r} is not an IANA time zone (e.g. Europe/Berlin)") from None
    fix = lambda tc: replace(tc, zone=zone) if tc is not None and tc.encoding == "naive" else tc  # noqa: E731
    att = replace(
        layout.attempts, started_at=fix(layout.attempts.started_at), finished_at=fix(layout.attempts.finished_at)
    )
    return replace(layout, times={k: fix(v) for k, v in layout.times.items()}, attempts=att)


def _stay_in_database(layout: Layout) -> Layout:
    """On MySQL/MariaDB a schema is another database on the server: a shipped preset's schema
    (``HangFire``, ``pgboss``: a SQL Server or PostgreSQL schema) is dropped, so the tables are read
    from the database the URL names, never from a same-named neighbour (issue #9, item 1). A schema
    the user wrote into their own layout is kept: they named it."""
    from dataclasses import replace

    from idemview.layouts.layout import load_preset, preset_names

    if layout.schema is None and layout.attempts.schema is None:
        return layout
    if layout.name not in preset_names():
        return layout
    shipped = load_preset(layout.name)
    out = layout
    if layout.schema is not None and layout.schema == shipped.schema:
        out = replace(out, schema=None)
    if layout.attempts.schema is not None and layout.attempts.schema == shipped.attempts.schema:
        out = replace(out, attempts=replace(layout.attempts, schema=None))
    return out


class Ledger:
    """A layout bound to a read-only engine.

    ``lock_timeout_s``, ``retry_threshold`` and ``retention_s`` override the layout's tunables;
    ``naive_zone`` (IANA) says which zone the ledger's naive timestamps were written in.
    Raises :class:`LayoutError` (``missing`` set) when a table or column the layout names is absent."""

    def __init__(
        self,
        engine: Engine,
        layout: Layout,
        *,
        name: str | None = None,
        lock_timeout_s: float | None = None,
        retry_threshold: int | None = None,
        retention_s: float | None = None,
        naive_zone: str | None = None,
        effects_engine: Engine | None = None,
    ):
        self.engine = engine
        if naive_zone and naive_zone != "UTC":
            layout = with_naive_zone(layout, naive_zone)
        if family(engine) == MYSQL:
            layout = _stay_in_database(layout)
        #: Which schema the tables are read from when the layout named none, and other copies (a line
        #: for people, e.g. for scan's stderr), or None (idemview.ledger.schemas).
        self.schema_note: str | None = None
        if family(engine) == POSTGRESQL:  # one schema for operations, attempts and in_table tables
            from idemview.ledger.schemas import resolve_schema

            layout, self.schema_note = resolve_schema(engine, layout)
        self.layout = layout
        self.name = name or layout.name
        #: The dialect *family* (``sqlite``, ``postgresql``, ``mysql`` for MySQL and MariaDB, ``other``):
        #: every SQL decision goes by it (:mod:`idemview.ledger.dialects`).
        self.dialect = family(engine)
        #: SQLAlchemy's own name for the dialect (``mariadb``, ``mysql``, ...), for messages.
        self.dialect_name = engine.dialect.name
        self.lock_timeout_s = lock_timeout_s if lock_timeout_s is not None else layout.lock_timeout_seconds
        #: The caller set the lock timeout (``--lock-timeout``): it then holds for every row, over a
        #: per-row limit column the layout reads.
        self._lock_timeout_given = lock_timeout_s is not None
        self.retry_threshold = retry_threshold if retry_threshold is not None else layout.retry_threshold
        self.retention_s = retention_s if retention_s is not None else layout.retention_seconds
        self.md = MetaData()
        self.ops = self._reflect(
            layout.schema, layout.table, layout.operations_columns(), "operations", optional=set(layout.optional)
        )
        absent = set(layout.optional) - {c.key for c in self.ops.c}
        if absent:
            layout = layout.without_columns(absent)
            self.layout = layout
        self.att = None
        if layout.attempts.source == "table":
            a = layout.attempts
            schema = a.schema if a.schema is not None else layout.schema
            try:
                self.att = self._reflect(schema, a.table, layout.attempts_columns(), "attempts")
            except LayoutError as e:
                if not self.schema_note:
                    raise
                # the schema was chosen for the operations table: say so, and where the other copy is
                raise LayoutError(f"{e} ({self.schema_note})", e.missing) from None
            missing = [f"column {a.table}.{c}" for c in a.join.values() if c not in self.ops.c]
            if missing:
                raise LayoutError(
                    f"layout {layout.name!r} joins attempts on a missing operations column: {', '.join(missing)}",
                    missing,
                )
        self._check_in_tables()
        self._build()
        from idemview.ledger.constraints import key_is_unique

        #: Why the schema allows at most one record per (scope, key), e.g. ``"UNIQUE (task_id)"``
        #: (read once here, so that the scan's "not checkable" list costs no query later), or None.
        self.key_unique: str | None = key_is_unique(self)
        self._bind_effects(effects_engine)

    def _bind_effects(self, effects_engine: Engine | None) -> None:
        """Bind the layout's ``[effects]`` section (DESIGN §5): ``self.effects`` is an
        :class:`~idemview.ledger.effects.EffectSource`, or ``None`` with ``self.effects_problem`` saying
        why (no section; an ``optional`` section whose database or table is absent). An effects database
        that cannot be opened raises :class:`~idemview.ledger.connect.ConnectError` (exit 3) unless the
        section is ``optional``: an incident run asking "did we charge twice?" must not pass quietly
        without the charges. A table or column the section names that is missing raises
        :class:`LayoutError` like any other layout mismatch."""
        from idemview.ledger.connect import ConnectError
        from idemview.ledger.effects import EffectSource, open_effects_engine

        self.effects = None
        #: Key sets the findings compute for a finding filter, kept per ledger (idemview.findings.keysets).
        self.finding_keys_cache: dict = {}
        self.effects_problem: str | None = "the layout has no [effects] section (no effect records)"
        spec = self.layout.effects
        if spec is None:
            return
        if effects_engine is None and spec.connection:
            origin = Path(self.layout.origin) if self.layout.origin else None
            base = origin.parent if origin is not None and origin.suffix == ".toml" else None
            try:
                effects_engine = open_effects_engine(spec.connection, base)
            except ConnectError as e:
                if not spec.optional:
                    name = self.layout.name
                    raise ConnectError(f"the effects database of layout {name!r} cannot be opened: {e}") from None
                self.effects_problem = f"the effects database cannot be opened: {e}"
                return
        try:
            self.effects = EffectSource(self, effects_engine)
        except LayoutError as e:
            if not spec.optional or not any(m.startswith("table ") for m in e.missing):
                raise
            self.effects_problem = f"the effects table {spec.table} is not in the database"
            return
        self.effects_problem = None

    # ------------------------------------------------------------------------------------- schema

    def _check_in_tables(self):
        """Tables named by ``in_table`` predicates must exist (else the layout does not fit)."""
        lay = self.layout
        preds = [p for r in lay.status.rules for p in r.when]
        if lay.attempts.outcome:
            preds += [p for r in lay.attempts.outcome.rules for p in r.when]
        preds += list(lay.attempts.where)

        def flat(ps):
            for p in ps:
                if p.op in ("any", "all"):
                    yield from flat(p.value)
                else:
                    yield p

        preds = list(flat(preds))
        insp = inspect(self.engine)
        for p in preds:
            if p.op != "in_table":
                continue
            schema = p.value.get("schema", lay.schema)
            names = {n.lower() for n in insp.get_table_names(schema=schema)}
            if p.value["table"].lower() not in names:
                where = f"{schema}.{p.value['table']}" if schema else p.value["table"]
                raise LayoutError(
                    f"layout {lay.name!r}: the table {where} (in_table) is not in the database", [f"table {where}"]
                )

    def _reflect(
        self,
        schema,
        table,
        columns: set[str],
        role: str,
        optional: set[str] | frozenset[str] = frozenset(),
        engine: Engine | None = None,
    ) -> Table:
        """The table ``schema.table`` reflected from ``engine`` (default: the ledger's), matched
        case-insensitively; raises :class:`LayoutError` naming what is missing."""
        engine = engine if engine is not None else self.engine
        insp = inspect(engine)
        try:
            names = {n.lower(): n for n in insp.get_table_names(schema=schema)}
        except DBAPIError:
            # an unknown schema errors on some engines (and is merely empty on others)
            raise LayoutError(
                f"layout {self.layout.name!r}: the schema {schema!r} is not in the database", [f"schema {schema}"]
            ) from None
        real = names.get(table.lower())
        if real is None:
            where = f"{schema}.{table}" if schema else table
            raise LayoutError(
                f"layout {self.layout.name!r}: the {role} table {where} is not in the database", [f"table {where}"]
            )
        # Column names match case-insensitively when there is no exact match (DDL run unquoted folds
        # case: Camel's processorName is processorname on PostgreSQL); the column then keeps the
        # layout's spelling as its key, while SQL uses the real, quoted name.
        try:
            real_cols = {c["name"] for c in insp.get_columns(real, schema=schema)}
            fold = {c.lower(): c for c in (columns | set(optional)) if c not in real_cols}

            sqlite = family(engine) == SQLITE  # the engine reflected (the effects database may differ)

            def _rekey(_insp, _table, info):
                k = fold.get(info["name"].lower())
                if k is not None:
                    info["key"] = k
                # SQLite keeps times as text; SQLAlchemy's DATETIME processing raises on a malformed
                # value ('not a date', '0000-00-00'), which would abort a whole page or export. Read
                # the text as it is: decode_time turns what it cannot parse into "missing".
                # Text cells may hold bytes that are not UTF-8 (read as RawText): LedgerText binds
                # such a value back as its stored bytes, so lookups and keyset cursors find it.
                if sqlite and isinstance(
                    info["type"], (sqltypes.DateTime, sqltypes.Date, sqltypes.Time, sqltypes.String)
                ):
                    info["type"] = LedgerText()

            # another database gets metadata of its own (its table names may repeat the ledger's)
            md = self.md if engine is self.engine else MetaData()
            t = Table(real, md, schema=schema, autoload_with=engine, listeners=[("column_reflect", _rekey)])
        except NoSuchTableError:
            raise LayoutError(f"layout {self.layout.name!r}: cannot read table {table}", [f"table {table}"]) from None
        have = {c.key for c in t.c}
        missing = sorted(c for c in columns if c not in have and c not in optional)
        if missing:
            raise LayoutError(
                f"layout {self.layout.name!r}: table {real} has no column "
                + ", ".join(missing)
                + f" (it has: {', '.join(sorted(have))})",
                [f"column {real}.{c}" for c in missing],
            )
        return t

    # ----------------------------------------------------------------------------- expressions

    def _text(self, col) -> ColumnElement:
        return col if _is_text(col) else as_text(col)

    def _ident(self, col) -> ColumnElement:
        """An identity column (key, scope, reference) as text compared exactly. MySQL/MariaDB bytes
        (a VARBINARY key) are compared as bytes: CAST(... AS CHAR) would turn bytes that are not UTF-8
        into '?', and no lookup could find them again."""
        if self.dialect == MYSQL and is_binary(col):
            return self._exact(col)
        return self._exact(self._text(col))

    def _exact(self, expr) -> ColumnElement:
        """Identity values (keys, scopes, references, fingerprints) compared byte for byte: MySQL and
        MariaDB's default collations would merge 'Order-1' with 'order-1', 'café' with 'cafe' and
        'a ' with 'a', reporting false duplicates (and joining an attempt to both). On PostgreSQL a
        ``citext`` column is compared as ``text``; on SQLite the value is typed :class:`LedgerText`
        (undecodable keys bind back as their bytes)."""
        if self.dialect == MYSQL:
            return exact_text(expr)
        if self.dialect == POSTGRESQL and type(getattr(expr, "type", None)).__name__.upper() == "CITEXT":
            return cast(expr, sqltypes.Text())
        if self.dialect == SQLITE:
            # COLLATE BINARY: a column declared NOCASE or RTRIM would otherwise compare loosely; on the
            # usual BINARY columns it changes nothing and their indexes still serve (query plans
            # checked: lookups, joins and the (scope, key) grouping).
            return type_coerce(expr.collate("BINARY"), LedgerText())
        return expr

    def _same(self, a, b) -> ColumnElement:
        """``a`` equals ``b`` exactly (a join condition between two identity columns)."""
        plain = a == b
        if self.dialect == MYSQL and (_is_text(a) or _is_text(b)):
            return and_(plain, exact_text(a) == exact_text(b))
        if self.dialect == POSTGRESQL and "CITEXT" in (type(a.type).__name__.upper(), type(b.type).__name__.upper()):
            return and_(plain, cast(a, sqltypes.Text()) == cast(b, sqltypes.Text()))
        if self.dialect == SQLITE:
            return a.collate("BINARY") == b
        return plain

    def _joined(self, cols) -> ColumnElement:
        """Several columns as one text value, joined with '/' (composite keys and scopes)."""
        if not cols:
            return literal_column("''")
        parts = [func.coalesce(self._text(c), literal_column("''")) if len(cols) > 1 else self._text(c) for c in cols]
        if len(cols) == 1 and self.dialect == MYSQL and is_binary(cols[0]):
            return self._ident(cols[0])
        out = parts[0]
        for p in parts[1:]:
            out = (
                out.op("||")(literal_column("'/'")).op("||")(p)
                if self.dialect != MYSQL
                else func.concat(out, literal_column("'/'"), p)
            )
        return self._exact(out)

    def _pred(self, t: Table, p: Predicate) -> ColumnElement:
        if p.op == "any":
            return or_(*[self._pred(t, q) for q in p.value])
        if p.op == "all":
            return and_(*[self._pred(t, q) for q in p.value])
        c = t.c[p.column]
        v = p.value
        if p.op == "is_null":
            return c.is_(None) if v else c.is_not(None)
        if p.op == "eq":
            return c == v
        if p.op == "ne":
            return or_(c != v, c.is_(None))
        if p.op == "in":
            return c.in_(v)
        if p.op == "not_in":
            return or_(c.not_in(v), c.is_(None))
        if p.op == "gt":
            return c > v
        if p.op == "ge":
            return c >= v
        if p.op == "lt":
            return c < v
        if p.op == "le":
            return c <= v
        if p.op == "ge_column":
            return c >= t.c[v]  # a per-row limit (attempts >= max_attempts); NULL on either side: false
        if p.op == "like":
            return self._text(c).like(v)  # a JSON column (Oban meta) is matched as its text
        if p.op == "in_table":
            # Presence in another table: c IN (SELECT column FROM table); names quoted by SQLAlchemy.
            other = sa_table(v["table"], sa_column(v["column"]), schema=v.get("schema", t.schema))
            return c.in_(select(other.c[v["column"]]).where(other.c[v["column"]].is_not(None)))
        raise LayoutError(f"unknown predicate {p.op}")

    def _status_expr(self, t: Table, s: StatusSource) -> tuple[ColumnElement, ColumnElement]:
        """(normalized status, raw status) SQL expressions for a status source."""
        if s.literal is not None:
            return literal_column(f"'{s.literal}'"), null()
        whens: list[tuple[ColumnElement, ColumnElement]]
        if s.rules:
            whens = [
                (and_(*[self._pred(t, p) for p in r.when]) if r.when else true(), literal_column(f"'{r.status}'"))
                for r in s.rules
            ]
            norm = case(*whens, else_=literal_column(f"'{s.default}'"))
            raw_col = s.raw or s.column
            raw = self._text(t.c[raw_col]) if raw_col else null()
            return norm, raw
        col = t.c[str(s.column)]  # a status source has a literal, rules or a column (layout validation)
        raw = self._text(col)
        whens = [(raw.is_(None), literal_column(f"'{s.null}'"))] if s.null is not None else []
        # Normalized values are fixed enum words: inlined (not user data); raw values are bound.
        whens += [(raw == k, literal_column(f"'{v}'")) for k, v in s.map.items()]
        return (
            case(*whens, else_=literal_column(f"'{s.default}'")) if whens else literal_column(f"'{s.default}'")
        ), raw

    def status_in(self, statuses: Sequence[str], sub=None) -> ColumnElement:
        """ "Normalized status is one of ``statuses``", sargable where the layout maps a status column:
        compiled to the raw values that map there (``raw IN (...)``, which the column's index serves)
        instead of a CASE over every row. ``sub``: a subquery of :meth:`operations_select` to test
        (its ``raw_status`` / ``status`` columns) instead of the operations table."""
        wanted = set(statuses)
        s = self.layout.status
        if s.literal is not None or s.rules or not s.column:
            return (self.status_expr if sub is None else sub.c.status).in_(sorted(wanted))
        raw = self.raw_status_expr if sub is None else sub.c.raw_status
        keys = list(s.map or {})
        hit = [k for k in keys if s.map[k] in wanted]
        conds = [raw.in_(hit)] if hit else []
        if (s.null if s.null is not None else s.default) in wanted:
            conds.append(raw.is_(None))
        if s.default in wanted:
            conds.append(raw.not_in(keys) if keys else raw.is_not(None))
        return or_(*conds) if conds else false()

    def _guarded(self, t: Table, expr, unless) -> ColumnElement:
        """``expr``, or NULL on records where one of the ``unless`` predicates holds (a value or a time
        that belongs to some records only: a cron run's intent, a deferred task's deadline)."""
        if not unless:
            return expr
        return case((or_(*[self._pred(t, p) for p in unless]), null()), else_=expr)

    def _value_expr(self, t: Table, vs) -> ColumnElement:
        if vs is None:
            return null()
        if vs.literal is not None:
            return literal(str(vs.literal), String())
        if vs.hash:  # computed from several columns in the dialect's terms (issue #26)
            from idemview.ledger.intent_sql import intent_hash

            h = intent_hash([t.c[c] for c in vs.hash], [t.c[c] for c in vs.unless_empty], self.dialect)
            return self._guarded(t, self._exact(h), vs.unless)
        col = t.c[vs.column]
        if vs.encoding == "hex":
            out = hex_text(col)
        elif vs.json_path:
            out = self._exact(json_text(col, vs.json_path))
        else:
            out = self._ident(col)
        # e.g. a cron run carries no intent: intended repeats are never a duplicate intent
        return self._guarded(t, out, vs.unless)

    def _joined_lock_time(self, t: Table, spec) -> tuple[ColumnElement, TimeColumn] | None:
        """``[expiry] lock_time_from``: the lock time as a scalar subquery on the joined table (its
        row matching ``spec.on``; none: NULL), or ``None`` when the database lacks that table or column
        (an older schema: no lock time, stuck_in_progress not checkable). Reflects that table once."""
        from sqlalchemy import MetaData

        schema = spec.schema if spec.schema is not None else t.schema
        try:
            other = Table(spec.table, MetaData(), schema=schema, autoload_with=self.engine)
        except (NoSuchTableError, DBAPIError):
            return None
        if spec.column not in other.c or not all(oc in other.c for _c, oc in spec.on):
            return None
        q = select(other.c[spec.column]).where(*[other.c[oc] == t.c[c] for c, oc in spec.on]).limit(1)
        return q.scalar_subquery(), TimeColumn(spec.column, spec.encoding)

    def _build(self):
        lay, t = self.layout, self.ops
        self.key_expr = self._joined([t.c[c] for c in lay.key])
        if lay.key_fallback:
            # A record without a key is its own operation, keyed "#<row id>": one whose key columns
            # are all NULL, or one lacking a column the key only holds with (key_required: pg-boss's
            # unique index on (name, singleton_on, singleton_key) exists only where singleton_on is set).
            fb = self._text(t.c[lay.key_fallback])
            fb = func.concat(literal_column("'#'"), fb) if self.dialect == MYSQL else literal_column("'#'").op("||")(fb)
            fb = self._exact(fb)
            if len(lay.key) == 1 and not lay.key_required:
                self.key_expr = func.coalesce(self.key_expr, fb)
            else:
                no_key = or_(and_(*[t.c[c].is_(None) for c in lay.key]), *[t.c[c].is_(None) for c in lay.key_required])
                self.key_expr = case((no_key, fb), else_=self.key_expr)
        self.scope_expr = self._joined([t.c[c] for c in lay.scope])
        self.kind_expr = self._value_expr(t, lay.kind) if lay.kind else null()
        self.status_expr, self.raw_status_expr = self._status_expr(t, lay.status)
        self.rid = t.c[lay.row_id] if lay.row_id else None
        self.time_cols: dict[str, tuple[ColumnElement, TimeColumn]] = {
            k: (self._guarded(t, t.c[tc.column], tc.unless), tc) for k, tc in lay.times.items()
        }
        if lay.lock_time_from is not None and "locked_at" not in self.time_cols:
            joined = self._joined_lock_time(t, lay.lock_time_from)
            if joined is not None:
                self.time_cols["locked_at"] = joined
        self.epoch: dict[str, ColumnElement] = {
            k: epoch_seconds(c, tc, self.dialect) for k, (c, tc) in self.time_cols.items()
        }
        mode = lay.expiry_mode()
        if mode == "retention" and self.retention_s is not None:
            self.epoch["expires_at"] = self.epoch[lay.retention_from] + self.retention_s
        elif mode == "column":
            pass
        elif self.retention_s is not None and lay.retention_from in self.epoch:
            self.epoch["expires_at"] = self.epoch[lay.retention_from] + self.retention_s
        if (
            lay.lock_timeout_column
            and "locked_at" in self.epoch
            and "lock_expires_at" not in self.time_cols
            and not self._lock_timeout_given
        ):
            # The row's own limit (pg-boss expire_seconds), the layout's default where it is NULL: the
            # lock's end is a derived time, as a retention's expiry is (DESIGN §4 "per-row limits").
            per_row = stored_int(t.c[lay.lock_timeout_column], self.dialect)
            fallback = self.lock_timeout_s
            limit = func.coalesce(per_row, literal(fallback)) if fallback is not None else per_row
            self.epoch["lock_expires_at"] = self.epoch["locked_at"] + limit
        f = lay.fields
        self.fingerprint_expr = self._value_expr(t, f.get("fingerprint"))
        self.intent_expr = self._value_expr(t, f.get("intent_ref"))
        self.effect_expr = self._value_expr(t, f.get("effect_ref"))
        ac = f.get("attempt_count")
        #: The attempt count as an integer for SQL comparisons and sums: NULL (unknown) when the stored
        #: value is not an integer ('many', 1e20), never a number the engine's CAST made up.
        self.attempt_count_expr = None
        #: The attempt count as stored, for display and export (issue #9, item 8).
        self.attempt_count_raw = None
        if ac and ac.column:
            src = json_text(t.c[ac.column], ac.json_path) if ac.json_path else t.c[ac.column]
            self.attempt_count_expr = stored_int(src, self.dialect)
            self.attempt_count_raw = src
            if ac.add:  # a retry counter: attempts = retries + add (shown as the attempt count)
                self.attempt_count_expr = self.attempt_count_expr + ac.add
                self.attempt_count_raw = self.attempt_count_expr
            if ac.unless:  # e.g. a queued job has made no attempt yet, whatever its counter says
                self.attempt_count_expr = self._guarded(t, self.attempt_count_expr, ac.unless)
                self.attempt_count_raw = self._guarded(t, self.attempt_count_raw, ac.unless)
        if self.att is not None:
            self._build_attempts()

    def _build_attempts(self):
        a, t = self.layout.attempts, self.att
        # The attempt's (scope, key) are read through the operations columns it joins on. Joined
        # exactly (issue #9, item 7): on a case- or trailing-space-insensitive collation (MariaDB's
        # default) 'Order-77' = 'order-77' and 'ord-88' = 'ord-88 ', and every attempt would join two
        # operations. The plain equality stays first so the column's index still serves the join.
        self.att_join = and_(*[self._same(t.c[ac], self.ops.c[oc]) for ac, oc in a.join.items()])
        self.att_where = and_(*[self._pred(t, p) for p in a.where]) if a.where else true()
        #: Attempt number as stored (display) and as an integer (sorting, comparisons).
        self.att_number_raw = t.c[a.number] if a.number else null()
        self.att_number = stored_int(t.c[a.number], self.dialect) if a.number else null()
        self.att_outcome, self.att_raw_outcome = self._status_expr(t, a.outcome)
        self.att_time: dict[str, tuple[ColumnElement, TimeColumn]] = {}
        for k in ("started_at", "finished_at"):
            tc = getattr(a, k)
            if tc:
                self.att_time[k] = (self._guarded(t, t.c[tc.column], tc.unless), tc)
        self.att_epoch = {k: epoch_seconds(c, tc, self.dialect) for k, (c, tc) in self.att_time.items()}
        self.att_effect = self._ident(t.c[a.effect_ref]) if a.effect_ref else null()
        self.att_fingerprint = self._ident(t.c[a.fingerprint]) if a.fingerprint else null()
        self.att_error = t.c[a.error] if a.error else null()
        self.att_worker = self._text(t.c[a.worker]) if a.worker else null()
        # When attempts join on all key and scope columns, scope/key can be read from the attempts
        # table alone (no join needed): the common case, and much cheaper.
        inv = {oc: ac for ac, oc in a.join.items()}
        if all(c in inv for c in self.layout.key + self.layout.scope) and not self.layout.key_fallback:
            self.att_key_expr = self._joined([t.c[inv[c]] for c in self.layout.key])
            self.att_scope_expr = self._joined([t.c[inv[c]] for c in self.layout.scope])
            self.att_needs_join = False
        else:
            self.att_key_expr, self.att_scope_expr = self.key_expr, self.scope_expr
            self.att_needs_join = True

    # ------------------------------------------------------------------------------- selects

    def operations_select(self) -> Select:
        """Normalized operations: one row per record with labelled columns ``scope, key, kind,
        status, raw_status, rid, <time>_e`` (epoch seconds), ``attempt_count, fingerprint,
        intent_ref, effect_ref``."""
        cols = [
            self.scope_expr.label("scope"),
            self.key_expr.label("key"),
            self.kind_expr.label("kind"),
            self.status_expr.label("status"),
            self.raw_status_expr.label("raw_status"),
            (self.rid if self.rid is not None else null()).label("rid"),
        ]
        for k in (
            "created_at",
            "updated_at",
            "completed_at",
            "locked_at",
            "lock_expires_at",
            "expires_at",
            "last_attempt_at",
        ):
            cols.append((self.epoch.get(k, null())).label(f"{k}_e"))
        cols += [
            (self.attempt_count_expr if self.attempt_count_expr is not None else null()).label("attempt_count"),
            self.fingerprint_expr.label("fingerprint"),
            self.intent_expr.label("intent_ref"),
            self.effect_expr.label("effect_ref"),
        ]
        return select(*cols).select_from(self.ops)

    def attempts_select(self) -> Select | None:
        """Normalized attempts (table source only): ``scope, key, number, outcome, raw_outcome,
        started_at_e, finished_at_e, effect_ref, fingerprint``."""
        if self.att is None:
            return None
        cols = [
            self.att_scope_expr.label("scope"),
            self.att_key_expr.label("key"),
            self.att_number.label("number"),
            self.att_outcome.label("outcome"),
            self.att_raw_outcome.label("raw_outcome"),
            self.att_epoch.get("started_at", null()).label("started_at_e"),
            self.att_epoch.get("finished_at", null()).label("finished_at_e"),
            self.att_effect.label("effect_ref"),
            self.att_fingerprint.label("fingerprint"),
        ]
        q = select(*cols).select_from(self.att)
        if self.att_needs_join:
            q = select(*cols).select_from(self.att.join(self.ops, self.att_join))
        return q.where(self.att_where)

    # ------------------------------------------------------------------------------- filters

    def filter_clause(self, flt: Filter | None, now: datetime | None = None) -> ColumnElement:
        """SQL WHERE clause (over the operations table) for a :class:`Filter`."""
        if flt is None or flt.is_empty():
            return true()
        parts = []
        if flt.statuses:
            parts.append(self.status_in([s.value for s in flt.statuses]))
        if flt.kinds:
            parts.append(self.kind_expr.in_(list(flt.kinds)))
        if getattr(flt, "actions", None):
            parts.append(self.action_clause(flt.actions))
        if flt.key:
            parts.append(self.key_expr.contains(flt.key, autoescape=True))
        if flt.intent:
            parts.append(self.intent_expr.contains(flt.intent, autoescape=True))
        if flt.scope:
            parts.append(self.scope_expr.contains(flt.scope, autoescape=True))
        if flt.since or flt.until:
            if "created_at" not in self.time_cols:
                raise LayoutError(f"layout {self.layout.name!r} has no created_at time to filter on")
            c, tc = self.time_cols["created_at"]
            if flt.since:
                parts.append(time_after(c, tc, flt.since, self.dialect, inclusive=True))
            if flt.until:
                parts.append(time_before(c, tc, flt.until, self.dialect, inclusive=False))
        if getattr(flt, "unmapped_status", False):
            parts.append(self.unmapped_status_clause())
        if flt.findings:  # a key set the findings compile (idemview.ledger.filtering)
            parts.append(finding_clause(self, flt.findings, now or datetime.now(UTC)))
        return and_(*parts)

    #: At most this many distinct kinds are classified for an action filter (a ledger keeps a handful
    #: of task names; one whose kind carries an id per row is cut here, and the rest count as unknown).
    MAX_KINDS = 20_000

    def distinct_kinds(self) -> list:
        """The distinct non-NULL kinds of the operations (at most :data:`MAX_KINDS`), read once per
        ledger object: what an action-class filter compiles to (DESIGN §5.1)."""
        cached = getattr(self, "_distinct_kinds", None)
        if cached is None:
            if self.layout.kind is None:
                cached = []
            else:
                q = select(self.kind_expr.label("k")).select_from(self.ops).where(self.kind_expr.is_not(None))
                with self.engine.connect() as c:
                    cached = [r[0] for r in c.execute(q.distinct().limit(self.MAX_KINDS))]
            self._distinct_kinds = cached
        return cached

    def action_clause(self, actions) -> ColumnElement:
        """Operations whose kind has one of the action classes ``actions`` (``unknown``: no kind too).
        Classification runs per distinct kind in Python (the vocabulary is no SQL), then is one
        ``kind IN (...)``."""
        from idemview.domain.actions import Classifier

        cl = getattr(self, "_action_classifier", None) or Classifier(self.layout.actions)
        self._action_classifier = cl
        wanted = set(actions)
        ks = [k for k in self.distinct_kinds() if cl.classify(k) in wanted]
        ors = [self.kind_expr.in_(ks)] if ks else []
        if "unknown" in wanted:
            ors.append(self.kind_expr.is_(None))
        return or_(*ors) if ors else false()

    def unmapped_status_clause(self) -> ColumnElement:
        """Records whose raw status no entry of the layout maps (DESIGN §9 "unmapped"): for a value map,
        a raw value outside the map (NULL too, unless the layout maps NULL); for rules, a record that
        no rule matched and that fell to an ``unknown`` default. A literal status maps everything."""
        cond = _unmapped(self.layout.status, self.raw_status_expr, self.status_expr)
        return cond if cond is not None else false()

    def unmapped_counts(self) -> dict[str, dict[str, int]]:
        """``{"status": {RAW: N}, "outcome": {RAW: N}}``: how many operation records / attempts carry
        each raw value no entry of the layout maps, grouped in the database (DESIGN §9; empty dicts
        when none). A NULL raw value is counted under ``"(null)"``. Attempts from a JSON array or a
        counter have no raw outcome to map."""
        out: dict[str, dict[str, int]] = {"status": {}, "outcome": {}}

        def grouped(c, what, raw, cond, table, *where):
            if isinstance(raw, Null):  # rules without a raw column: one count, nothing to group by
                q = select(null().label("raw"), func.count().label("n")).select_from(table).where(cond, *where)
            else:
                q = (
                    select(raw.label("raw"), func.count().label("n"))
                    .select_from(table)
                    .where(cond, *where)
                    .group_by(raw)
                )
            for r in c.execute(q):
                if int(r.n):
                    k = _raw_key(r.raw)
                    out[what][k] = out[what].get(k, 0) + int(r.n)

        with self.engine.connect() as c:
            cond = _unmapped(self.layout.status, self.raw_status_expr, self.status_expr)
            if cond is not None:
                grouped(c, "status", self.raw_status_expr, cond, self.ops)
            a = self.layout.attempts
            if self.att is not None and a.outcome is not None:
                cond = _unmapped(a.outcome, self.att_raw_outcome, self.att_outcome)
                if cond is not None:
                    grouped(c, "outcome", self.att_raw_outcome, cond, self.att, self.att_where)
        return out

    def _attempts_table(self) -> Table:
        """The attempts table of a layout whose attempts come from a table (``LayoutError`` otherwise)."""
        if self.att is None:
            raise LayoutError(f"layout {self.layout.name!r} has no attempts table")
        return self.att

    def ops_ref_in(self, keys: Select | CompoundSelect) -> ColumnElement:
        """Operations whose (scope, key) is in a select of ``scope, key`` rows."""
        # (scope, key) IN (SELECT ...): the planner can run the key select once and look the few keys up
        # through the key index; a correlated EXISTS made SQLite probe it for every operation in sort
        # order. NULLs match in neither form.
        ks = keys.subquery()
        return tuple_(self.scope_expr, self.key_expr).in_(select(ks.c.scope, ks.c.key))

    # --------------------------------------------------------------------------- reading rows

    def lock_expired(self, now: datetime) -> ColumnElement | None:
        """SQL: the record's lock expired at ``now`` (aware): ``lock_expires_at <= now`` where the
        ledger keeps the lock's end, else ``locked_at`` + the row's own limit (``lock_timeout_column``,
        the layout's ``lock_timeout_seconds`` where it is NULL) or + the lock timeout ``<= now``.
        ``None`` when the ledger keeps no lock time. Every stuck-lock reading goes through here."""
        conds = []
        derived = "lock_expires_at" in self.epoch and "lock_expires_at" not in self.time_cols
        if "lock_expires_at" in self.time_cols:
            c, tc = self.time_cols["lock_expires_at"]
            conds.append(time_before(c, tc, now, self.dialect))
        if derived:  # locked_at + the row's own limit (its default where NULL)
            conds.append(self.epoch["lock_expires_at"] <= now.timestamp())
        elif "locked_at" in self.time_cols and self.lock_timeout_s is not None:
            c, tc = self.time_cols["locked_at"]
            conds.append(time_before(c, tc, now - timedelta(seconds=self.lock_timeout_s), self.dialect))
        return or_(*conds) if conds else None

    def _op_columns(self, payloads: bool = True):
        """Columns of the operations page select: normalized expressions plus raw time columns (and the
        payload columns unless ``payloads`` is False: a grid page does not show them)."""
        lay, t = self.layout, self.ops
        cols = [
            self.scope_expr.label("scope"),
            self.key_expr.label("key"),
            self.kind_expr.label("kind"),
            self.status_expr.label("status"),
            self.raw_status_expr.label("raw_status"),
            (self.rid if self.rid is not None else null()).label("rid"),
            (self.attempt_count_raw if self.attempt_count_raw is not None else null()).label("attempt_count"),
            self.fingerprint_expr.label("fingerprint"),
            self.intent_expr.label("intent_ref"),
            self.effect_expr.label("effect_ref"),
        ]
        for k, (c, _tc) in self.time_cols.items():
            cols.append(c.label(f"t_{k}"))
        if "expires_at" not in self.time_cols and "expires_at" in self.epoch:
            cols.append(self.epoch["expires_at"].label("e_expires_at"))
        if "lock_expires_at" not in self.time_cols and "lock_expires_at" in self.epoch:
            cols.append(self.epoch["lock_expires_at"].label("e_lock_expires_at"))
        for k in ("request", "response", "error") if payloads else ():
            vs = lay.fields.get(k)
            if vs and vs.column:
                cols.append(t.c[vs.column].label(f"p_{k}"))
        if self.layout.attempts.source == "json_array":
            cols.append(t.c[str(self.layout.attempts.column)].label("j_attempts"))  # json_array names it
        return cols

    def row_to_operation(self, r) -> Operation:
        m = r._mapping
        op = Operation(
            scope=m["scope"] or "",
            key=m["key"] if m["key"] is not None else "",
            kind=m["kind"],
            raw_status=m["raw_status"],
            row_id=m["rid"],
        )
        try:
            op.status = Status(m["status"])
        except ValueError:
            op.status = Status.UNKNOWN
        for k, (_c, tc) in self.time_cols.items():
            setattr(op, k, decode_time(m[f"t_{k}"], tc))
        if "e_expires_at" in m:
            op.expires_at = from_epoch(m["e_expires_at"])
        if "e_lock_expires_at" in m:
            op.lock_expires_at = from_epoch(m["e_lock_expires_at"])
        op.attempt_count = stored_number(m["attempt_count"])
        op.fingerprint, op.intent_ref, op.effect_ref = m["fingerprint"], m["intent_ref"], m["effect_ref"]
        for k in ("request", "response", "error"):
            if f"p_{k}" in m:
                setattr(op, k, decode_payload(m[f"p_{k}"], self.layout.fields[k].encoding))
        if op.attempt_count is None and "j_attempts" in m:
            arr = _json_list(m["j_attempts"])
            op.attempt_count = len(arr) if arr is not None else None
        return op

    def _sort_expr(self, sort: str) -> ColumnElement:
        if sort == "key":
            return self.key_expr
        if sort == "scope":
            return self.scope_expr
        if sort == "kind":
            return self.kind_expr
        if sort == "status":
            return self.status_expr
        if sort == "attempt_count" and self.attempt_count_expr is not None:
            return self.attempt_count_expr
        if sort in self.time_cols:
            return self.time_cols[sort][0]
        if sort == "expires_at" and "expires_at" in self.epoch:
            lay = self.layout
            return self.time_cols[lay.retention_from][0]
        return self.key_expr

    def page(
        self,
        flt: Filter | None = None,
        *,
        sort: str = "created_at",
        descending: bool = False,
        after: tuple | None = None,
        limit: int = 200,
        now: datetime | None = None,
        payloads: bool = True,
    ) -> Page:
        """One page of normalized operations, filtered and sorted by the database (keyset paging).

        ``after`` is the previous page's ``cursor``. The sort is made total with the row identity (or
        the key) as a tie-breaker. NULL sort values come last."""
        sort_e = self._sort_expr(sort)
        tie = self.rid if self.rid is not None else self.key_expr
        # The cursor holds the sort value as the database has it. A PostgreSQL time may be one Python
        # cannot hold (infinity, BC, after 9999: read as None, ledger.pg_times): there the cursor is
        # the value's text, cast back in SQL, so such a row neither repeats nor hides the rest.
        as_text = family(self.engine) == POSTGRESQL and (sort in self.time_cols or sort == "expires_at")
        cur_e = cast(sort_e, Text) if as_text else sort_e
        cols = self._op_columns(payloads) + [cur_e.label("_s"), tie.label("_t")]
        where = self.filter_clause(flt, now)
        # Two range queries instead of ORDER BY (sort IS NULL), sort, tie: each is a plain ordered range
        # an index on the sort column can serve (top-N from the index, not a sort of the whole table).
        # First the rows with a sort value, then (when they run out) those without, by the tie-breaker.
        fetched: list = []
        s_null = after[0] if after is not None else False
        with self.engine.connect() as c:
            if not s_null:
                q = select(*cols).select_from(self.ops).where(where, sort_e.is_not(None))
                if after is not None:
                    _, s_val, t_val = after
                    if as_text:
                        s_val = cast(literal(s_val, Text), sort_e.type)
                    if descending:
                        q = q.where(sort_e <= s_val, or_(sort_e < s_val, tie < t_val))
                    else:
                        q = q.where(sort_e >= s_val, or_(sort_e > s_val, tie > t_val))
                order = (sort_e.desc(), tie.desc()) if descending else (sort_e.asc(), tie.asc())
                fetched = list(c.execute(q.order_by(*order).limit(limit + 1)).fetchall())
            if len(fetched) <= limit:
                q = select(*cols).select_from(self.ops).where(where, sort_e.is_(None))
                if s_null and after is not None:
                    q = q.where(tie < after[2] if descending else tie > after[2])
                q = q.order_by(tie.desc() if descending else tie.asc()).limit(limit + 1 - len(fetched))
                fetched += c.execute(q).fetchall()
        more = len(fetched) > limit
        rows = fetched[:limit]
        ops = [self.row_to_operation(r) for r in rows]
        cursor = None
        if more and rows:
            last = rows[-1]._mapping
            cursor = (last["_s"] is None, last["_s"], last["_t"])
        return Page(ops, cursor)

    def iter_operations(
        self, flt: Filter | None = None, *, now: datetime | None = None, batch: int = 5000
    ) -> Iterator[Operation]:
        """Every operation matching ``flt``, streamed (server-side cursor where the driver has one)."""
        q = select(*self._op_columns()).select_from(self.ops).where(self.filter_clause(flt, now))
        tie = self.rid if self.rid is not None else self.key_expr
        q = q.order_by(tie)
        with self.engine.connect() as c:
            res = c.execution_options(stream_results=True, yield_per=batch).execute(q)
            for r in res:
                yield self.row_to_operation(r)

    def records(self, scope: str, key: str) -> list[Operation]:
        """Every record of one operation (a ledger without a unique key may hold several)."""
        q = select(*self._op_columns()).select_from(self.ops).where(self.scope_expr == scope, self.key_expr == key)
        with self.engine.connect() as c:
            return [self.row_to_operation(r) for r in c.execute(q)]

    def attempts(self, scope: str, key: str, records: list[Operation] | None = None) -> list[Attempt]:
        """The attempts of one operation, ordered by number then start. For ``json_array`` ledgers the
        array is decoded here (never in SQL); a counter-only ledger has none to list."""
        a = self.layout.attempts
        if a.source == "table":
            cols = [
                self.att_number_raw.label("number"),
                self.att_outcome.label("outcome"),
                self.att_raw_outcome.label("raw_outcome"),
                self.att_effect.label("effect_ref"),
                self.att_error.label("error"),
                self.att_worker.label("worker"),
            ]
            for k, (tcol, _tc) in self.att_time.items():
                cols.append(tcol.label(f"t_{k}"))
            att = self._attempts_table()
            src = att.join(self.ops, self.att_join) if self.att_needs_join else att
            q = (
                select(*cols)
                .select_from(src)
                .where(self.att_scope_expr == scope, self.att_key_expr == key, self.att_where)
            )
            with self.engine.connect() as c:
                rows = c.execute(q).fetchall()
            out = []
            for r in rows:
                m = r._mapping
                at = Attempt(
                    scope=scope,
                    key=key,
                    number=stored_number(m["number"]),
                    raw_outcome=m["raw_outcome"],
                    effect_ref=m["effect_ref"],
                    worker=m["worker"],
                    error=_short_text(m["error"]),
                )
                try:
                    at.outcome = Outcome(m["outcome"])
                except ValueError:
                    at.outcome = Outcome.UNKNOWN
                for k, (_c, tc) in self.att_time.items():
                    setattr(at, k, decode_time(m[f"t_{k}"], tc))
                out.append(at)
            # A number stored as something else ('many') sorts after the numbered attempts.
            out.sort(
                key=lambda x: (
                    not _is_int(x.number),
                    x.number if _is_int(x.number) else 0,
                    x.started_at or datetime.max.replace(tzinfo=UTC),
                )
            )
            return out
        if a.source == "json_array":
            q = select(self.ops.c[str(a.column)]).where(self.scope_expr == scope, self.key_expr == key)
            with self.engine.connect() as c:
                cells = [r[0] for r in c.execute(q)]
            return json_array_attempts(cells, scope, key, a)
        return []

    def attempt_effect_refs(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[str]]:
        """The distinct effect references the attempts of each operation in ``keys`` (a batch of
        (scope, key), at most a few hundred) carry: ``{(scope, key): [ref, ...]}`` in the order the
        attempts first carried them (lowest attempt number first, then the reference), operations
        whose attempts carry none left out. One grouped query for the whole batch. Only an attempts
        table with an ``effect_ref`` column records them: a JSON array's elements (Oban/River errors)
        and a counter-only ledger have none (``{}``).

        References are compared exactly (``_ident``): on MySQL/MariaDB 'CH_1' and 'ch_1' are two
        charges, not one. Why it exists: an operation charged twice keeps one ``effect_ref`` on its
        row while its attempts keep both (issue #20, item 11)."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            return {}
        a = self.layout.attempts
        out: dict[tuple[str, str], list[str]] = {}
        if a.source == "table" and a.effect_ref:
            eff = self.att_effect
            att = self._attempts_table()
            src = att.join(self.ops, self.att_join) if self.att_needs_join else att
            wanted = or_(*[and_(self.att_scope_expr == s, self.att_key_expr == k) for s, k in keys])
            first = func.min(self.att_number).label("first")
            q = (
                select(self.att_scope_expr.label("scope"), self.att_key_expr.label("key"), eff.label("eff"), first)
                .select_from(src)
                .where(wanted, self.att_where, eff.is_not(None), eff != "")
                .group_by(self.att_scope_expr, self.att_key_expr, eff)
            )
            with self.engine.connect() as c:
                rows = c.execute(q).fetchall()
            found: dict[tuple[str, str], list[tuple[Any, str]]] = {}
            for r in rows:
                ref = r.eff.decode("utf-8", "replace") if isinstance(r.eff, bytes | bytearray) else str(r.eff)
                found.setdefault((r.scope or "", r.key), []).append((r.first, ref))
            for sk, refs in found.items():
                refs.sort(key=lambda x: (x[0] is None, x[0] if x[0] is not None else 0, x[1]))
                out[sk] = list(dict.fromkeys(ref for _n, ref in refs))
            return out
        return {}

    def counts(self) -> tuple[int, int]:
        """(operations, attempts) in the ledger. Attempts: rows of the attempts table, elements of the
        JSON arrays, or the sum of the counter column."""
        with self.engine.connect() as c:
            n_ops = c.execute(select(func.count()).select_from(self.ops)).scalar() or 0
            a = self.layout.attempts
            if a.source == "table":
                q_att = select(func.count()).select_from(self._attempts_table()).where(self.att_where)
                n_att = c.execute(q_att).scalar() or 0
            elif a.source == "counter" and self.attempt_count_expr is not None:
                n_att = c.execute(select(func.sum(self.attempt_count_expr))).scalar() or 0
            elif a.source == "json_array":
                n_att = 0
                res = c.execution_options(stream_results=True, yield_per=5000).execute(
                    select(self.ops.c[str(a.column)])
                )
                for (cell,) in res:
                    arr = _json_list(cell)
                    n_att += len(arr) if arr else 0
            else:
                n_att = 0
        return int(n_ops), int(n_att)

    def distinct_values(self, column: str, limit: int = 50) -> list[tuple[Any, int]]:
        """The most frequent values of an operations column with their counts (for the layout
        editor's status mapping)."""
        c_ = self.ops.c[column]
        q = select(c_, func.count()).group_by(c_).order_by(func.count().desc()).limit(limit)
        with self.engine.connect() as c:
            return [(r[0], int(r[1])) for r in c.execute(q)]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def stored_number(v: Any) -> Any:
    """A count or number cell as stored (issue #9, item 8): an ``int`` when the value is an integer
    (``7``, ``Decimal('7')``, the text ``'7'`` of a JSON path), otherwise the stored value itself
    (``'many'``, ``1e+20``), never a number an engine's CAST made up (``0``, ``9223372036854775807``)."""
    if v is None or _is_int(v):
        return v
    if isinstance(v, float):
        return int(v) if v.is_integer() and abs(v) < 2**63 else v
    if isinstance(v, Decimal):
        return int(v) if v.is_finite() and v == v.to_integral_value() and abs(v) < 2**63 else v
    if isinstance(v, (bytes, bytearray, memoryview)):
        v = bytes(v).decode("utf-8", "backslashreplace")
    if isinstance(v, str) and _INT_TEXT.fullmatch(v):
        return int(v)
    return v


_INT_TEXT = re.compile(r"\s*[-+]?[0-9]{1,18}\s*")


def _unmapped(s: StatusSource, raw, norm) -> ColumnElement | None:
    """The records a status source does not map (see :meth:`Ledger.unmapped_status_clause`), or
    ``None`` when it maps every record (a literal status). A value outside a map is unmapped even when
    the layout's ``default`` (the system's own rule for values outside its list, e.g. Celery's "a state
    not ready is unfinished") gives it a status: the person should still see it."""
    if s.literal is not None:
        return None
    if s.maps():
        keys = list(s.map)
        outside = raw.not_in(keys) if keys else raw.is_not(None)
        return outside if s.null is not None else or_(outside, raw.is_(None))
    if s.default != "unknown":
        return None  # rules whose catch-all is a real status map every record
    return norm == literal_column("'unknown'")


def _raw_key(v: Any) -> str:
    if v is None:
        return "(null)"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def _short_text(v: Any, limit: int = 2000) -> str | None:
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        v = bytes(v).decode("utf-8", "replace")
    s = str(v)
    return s if len(s) <= limit else s[:limit] + "…"


def _json_list(cell: Any) -> list | None:
    if cell is None:
        return None
    if isinstance(cell, list):
        return cell
    if isinstance(cell, (bytes, bytearray, memoryview)):
        cell = bytes(cell).decode("utf-8", "replace")
    try:
        v = jsontext.loads(cell)
    except (ValueError, TypeError):
        return None
    return v if isinstance(v, list) else None


def json_array_attempts(cells: Sequence[Any], scope: str, key: str, spec) -> list[Attempt]:
    """Attempts decoded from JSON array cells (Oban/River ``errors``: one element per failed attempt,
    e.g. ``{"at": ISO, "attempt": 1, "error": "..."}``). Broken JSON gives no attempts, not an error."""
    el = spec.element
    tc = TimeColumn("at", spec.element_time_encoding)
    out: list[Attempt] = []
    default_outcome = spec.outcome.literal or spec.outcome.default if spec.outcome else "failed"
    for cell in cells:
        for i, e in enumerate(_json_list(cell) or []):
            if not isinstance(e, dict):
                continue
            n = e.get(el.get("number", "attempt"))
            try:
                n = int(n) if n is not None else i + 1
            except (TypeError, ValueError):
                n = i + 1
            out.append(
                Attempt(
                    scope=scope,
                    key=key,
                    number=n,
                    started_at=decode_time(e.get(el.get("at", "at")), tc),
                    outcome=Outcome(default_outcome),
                    raw_outcome="error",
                    error=_short_text(e.get(el.get("error", "error"))),
                )
            )
    out.sort(key=lambda x: x.number or 0)
    return out


# ------------------------------------------------------------------------------ overview & search


@dataclass
class Histogram:
    """Counts over time for the incident overview: ``edges`` are ``len(counts) + 1`` aware UTC bucket
    boundaries; ``counts[outcome]`` is a list with one int per bucket. ``source`` says what is counted:
    ``"attempts"`` (by outcome) or ``"operations"`` (by status, when the ledger keeps no attempt times)."""

    edges: list[datetime]
    counts: dict[str, list[int]]
    source: str


def _bucket_expr(ledger: Ledger, epoch_expr, start_e: float, width: float):
    x = (epoch_expr - start_e) / width
    if ledger.dialect == "sqlite":
        return cast(x, Integer)  # x >= 0 here, so truncation is floor (SQLite may lack floor())
    return func.floor(x)


def histogram(
    ledger: Ledger,
    start: datetime,
    end: datetime,
    buckets: int = 120,
    flt: Filter | None = None,
    now: datetime | None = None,
) -> Histogram:
    """Attempts started in [start, end) counted per bucket and outcome, computed in the database.

    Ledgers without attempt times fall back to operations created per bucket, by status. ``flt``
    narrows to the filtered operations. Raises ``ValueError`` when ``end <= start``."""
    if end <= start:
        raise ValueError("the overview's end must be after its start")
    buckets = max(1, int(buckets))
    start_e, end_e = start.timestamp(), end.timestamp()
    width = (end_e - start_e) / buckets
    edges = [datetime.fromtimestamp(start_e + i * width, UTC) for i in range(buckets + 1)]
    clause = ledger.filter_clause(flt, now) if flt is not None and not flt.is_empty() else None
    if ledger.att is not None and "started_at" in ledger.att_epoch:
        e = ledger.att_epoch["started_at"]
        b = _bucket_expr(ledger, e, start_e, width).label("b")
        q = (
            select(b, ledger.att_outcome.label("o"), func.count().label("n"))
            .select_from(ledger.att)
            .where(e >= start_e, e < end_e, ledger.att_where)
        )
        if clause is not None or ledger.att_needs_join:
            q = q.select_from(ledger.att.join(ledger.ops, ledger.att_join))
            if clause is not None:
                q = q.where(clause)
        source = "attempts"
    elif "created_at" in ledger.epoch:
        e = ledger.epoch["created_at"]
        b = _bucket_expr(ledger, e, start_e, width).label("b")
        q = (
            select(b, ledger.status_expr.label("o"), func.count().label("n"))
            .select_from(ledger.ops)
            .where(e >= start_e, e < end_e)
        )
        if clause is not None:
            q = q.where(clause)
        source = "operations"
    else:
        return Histogram(edges, {}, "none")
    q = q.group_by(b, q.selected_columns[1])
    counts: dict[str, list[int]] = {}
    with ledger.engine.connect() as c:
        for r in c.execute(q):
            i = int(r.b)
            if 0 <= i < buckets:
                counts.setdefault(r.o, [0] * buckets)[i] += int(r.n)
    return Histogram(edges, counts, source)


def time_span(ledger: Ledger) -> tuple[datetime | None, datetime | None]:
    """(earliest, latest) instant of the ledger's activity (attempt starts, else record creation)."""
    if ledger.att is not None and "started_at" in ledger.att_epoch:
        e, src = ledger.att_epoch["started_at"], ledger.att
    elif "created_at" in ledger.epoch:
        e, src = ledger.epoch["created_at"], ledger.ops
    else:
        return None, None
    with ledger.engine.connect() as c:
        lo, hi = c.execute(select(func.min(e), func.max(e)).select_from(src)).one()
    return from_epoch(lo), from_epoch(hi)


def find_operations(ledger: Ledger, text_: str, limit: int = 50) -> list[Operation]:
    """Operations whose idempotency key or intent reference equals ``text_``, then those containing it
    (exact matches first), at most ``limit``. Used by the search across all open ledgers."""
    t = text_.strip()
    if not t:
        return []
    exact = (
        or_(ledger.key_expr == t, ledger.intent_expr == t)
        if "intent_ref" in ledger.layout.fields
        else ledger.key_expr == t
    )
    q = select(*ledger._op_columns()).select_from(ledger.ops).where(exact).limit(limit)
    with ledger.engine.connect() as c:
        out = [ledger.row_to_operation(r) for r in c.execute(q)]
        if len(out) < limit:
            like = ledger.key_expr.contains(t, autoescape=True)
            if "intent_ref" in ledger.layout.fields:
                like = or_(like, ledger.intent_expr.contains(t, autoescape=True))
            q2 = select(*ledger._op_columns()).select_from(ledger.ops).where(like, ~exact).limit(limit - len(out))
            out += [ledger.row_to_operation(r) for r in c.execute(q2)]
    return out


# ------------------------------------------------------------------------------------- indexes


@dataclass
class IndexWarning:
    """A missing index that makes a view or a finding scan a whole table (shown by the GUI).

    ``ddl`` is a suggestion for the ledger's owner: idemview never runs it (connections are read-only)."""

    table: str
    columns: list[str]
    purpose: str
    ddl: str

    @property
    def message(self) -> str:
        return (
            f"{self.table} has no index on ({', '.join(self.columns)}): {self.purpose} read the whole "
            f"table. Suggested: {self.ddl}"
        )

    def __str__(self) -> str:  # pragma: no cover - convenience
        return self.message


def _leading_columns(insp, table: Table) -> list[list[str]]:
    """Column lists of every index, primary key and unique constraint of ``table`` (lower-cased)."""
    out: list[list[str]] = []
    name, schema = table.name, table.schema
    for getter in (insp.get_indexes, insp.get_unique_constraints):
        try:
            for ix in getter(name, schema=schema):
                cols = ix.get("column_names") or []
                out.append([str(c).lower() if c is not None else "" for c in cols])
        except NotImplementedError:
            pass
    try:
        pk = insp.get_pk_constraint(name, schema=schema).get("constrained_columns") or []
        out.append([c.lower() for c in pk])
    except NotImplementedError:
        pass
    return out


def _has_index(indexes: list[list[str]], wanted: list[str]) -> bool:
    """An index whose leading columns are ``wanted`` in any order (a prefix serves lookups and groups)."""
    w = {c.lower() for c in wanted}
    return any(len(cols) >= len(w) and set(cols[: len(w)]) == w for cols in indexes)


def index_warnings(ledger: Ledger) -> list[IndexWarning]:
    """Indexes the layout's queries rely on that the database lacks, found by reflection.

    Checked: the operations key (scope + key columns: findings group and look up by it), the time the
    grid sorts and filters by (``created_at``), the expiry column, the intent reference column
    (``duplicate_intent``, ``unresolved_failure``), and on an attempts table its join columns and its
    start time (the overview histogram). Returns an empty list when all are there."""
    lay = ledger.layout
    insp = inspect(ledger.engine)
    out: list[IndexWarning] = []

    def check(t: Table, cols: list[str], purpose: str, also: list[str] | None = None):
        cols = [c for c in cols if c]
        if not cols:
            return
        if _has_index(idx[t.name], cols) or (also and _has_index(idx[t.name], also)):
            return
        q = ledger.engine.dialect.identifier_preparer.quote
        qt = f"{t.schema}.{t.name}" if t.schema else t.name
        qtq = f"{q(t.schema)}.{q(t.name)}" if t.schema else q(t.name)
        ixname = ("ix_" + t.name + "_" + "_".join(cols))[:63]
        out.append(
            IndexWarning(qt, cols, purpose, f"CREATE INDEX {q(ixname)} ON {qtq} ({', '.join(q(c) for c in cols)})")
        )

    idx = {ledger.ops.name: _leading_columns(insp, ledger.ops)}
    check(ledger.ops, lay.scope + lay.key, "findings and the operation view", also=lay.key)
    if "created_at" in lay.times:
        check(ledger.ops, [lay.times["created_at"].column], "the grid's default sort and time filters")
    if "expires_at" in lay.times:
        check(ledger.ops, [lay.times["expires_at"].column], "the expired-key finding and expiry sort")
    intent = lay.fields.get("intent_ref")
    if intent is not None and intent.column and not intent.json_path:
        check(ledger.ops, [intent.column], "duplicate-intent and unresolved-failure findings")
    if ledger.att is not None:
        a = lay.attempts
        idx[ledger.att.name] = _leading_columns(insp, ledger.att)
        keys = [ac for ac, oc in a.join.items() if oc in lay.key]
        check(ledger.att, list(a.join.keys()), "findings over attempts and the timeline", also=keys)
        if a.started_at is not None:
            check(ledger.att, [a.started_at.column], "the incident overview")
    return out
