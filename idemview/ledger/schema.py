"""The schema half of a :class:`~idemview.ledger.reader.Ledger`: reflecting the layout's tables (proving
the layout fits) and compiling the layout into the normalized SQLAlchemy expressions (DESIGN §3, §4):
the key, status, time and payload expressions of operations and attempts. :class:`LedgerSchema` is a
base class of ``Ledger``; it keeps no state of its own beyond what ``Ledger.__init__`` sets.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC

from sqlalchemy import (
    MetaData,
    String,
    Table,
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
    type_coerce,
)
from sqlalchemy import column as sa_column
from sqlalchemy import table as sa_table
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, NoSuchTableError
from sqlalchemy.sql import sqltypes
from sqlalchemy.sql.expression import ColumnElement
from sqlalchemy.types import TypeDecorator

from idemview.layouts.layout import Layout, LayoutError, Predicate, StatusSource, TimeColumn
from idemview.ledger.dialects import MYSQL, POSTGRESQL, SQLITE, family
from idemview.ledger.rawtext import LedgerText
from idemview.ledger.sqlx import (
    as_text,
    epoch_seconds,
    exact_text,
    hex_text,
    is_binary,
    json_text,
    limit_seconds,
    stored_int,
)

UTC = UTC


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


class LedgerSchema:
    """Reflection and expression building for :class:`~idemview.ledger.reader.Ledger` (its base class).

    Public for the modules beside the ledger (``ledger/effects.py`` binds the effect records with them):
    :meth:`reflect` (a table, checked against the columns the layout names) and :meth:`predicate` (a
    layout ``where`` predicate as SQL)."""

    # set by Ledger.__init__ (declared for the type checker)
    engine: Engine
    layout: Layout
    dialect: str
    md: MetaData
    ops: Table
    att: Table | None
    retention_s: float | None
    lock_timeout_s: float | None
    _lock_timeout_given: bool

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

    def reflect(
        self,
        schema,
        table,
        columns: set[str],
        role: str,
        optional: set[str] | frozenset[str] = frozenset(),
        engine: Engine | None = None,
    ) -> Table:
        """The table ``schema.table`` reflected from ``engine`` (default: the ledger's), matched
        case-insensitively, with ``columns`` (names the layout gives; ``optional`` ones may be absent)
        checked for ``role`` (``"operations"``, ``"attempts"``, ``"effects"``: named in the error).
        Raises :class:`LayoutError` naming what is missing."""
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
            from idemview.ledger.dumps import headerless_csv

            has = f" (it has: {', '.join(sorted(have))})"
            if headerless_csv(engine, real, have):  # its "names" are a row of values: never printed
                has = (
                    " (this CSV seems to have no header row: its first row was read as the column names; "
                    "a dump CSV starts with a header row naming its columns)"
                )
            raise LayoutError(
                f"layout {self.layout.name!r}: table {real} has no column " + ", ".join(missing) + has,
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
            # as text for SQLAlchemy (an INTEGER column has no COLLATE operator: deprecated); the SQL is
            # the same "a COLLATE BINARY = b", and SQLite compares integers as integers under any collation
            return type_coerce(a, LedgerText()).collate("BINARY") == b
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

    def predicate(self, t: Table, p: Predicate) -> ColumnElement:
        """A layout ``where`` predicate (``any``/``all`` nest) as a SQL condition over table ``t``."""
        if p.op == "any":
            return or_(*[self.predicate(t, q) for q in p.value])
        if p.op == "all":
            return and_(*[self.predicate(t, q) for q in p.value])
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
                (and_(*[self.predicate(t, p) for p in r.when]) if r.when else true(), literal_column(f"'{r.status}'"))
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
        return case((or_(*[self.predicate(t, p) for p in unless]), null()), else_=expr)

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

    def _kind_expr(self, t: Table, vs) -> ColumnElement:
        """The kind; with a ``lookup`` (:class:`idemview.layouts.layout.Lookup`) the looked-up name as a
        scalar subquery on that table, the operations column's own value where that table (reflected
        once), its columns or the row are missing."""
        own = self._value_expr(t, vs)
        lk = vs.lookup
        if lk is None:
            return own
        from sqlalchemy import MetaData

        try:
            other = Table(lk.table, MetaData(), schema=lk.schema or t.schema, autoload_with=self.engine)
        except (NoSuchTableError, DBAPIError):
            return own
        if lk.column not in other.c or lk.value not in other.c:
            return own
        q = select(self._text(other.c[lk.value])).where(other.c[lk.column] == t.c[vs.column]).limit(1)
        return func.coalesce(self._exact(q.scalar_subquery()), own)

    def _joined_lock_time(self, t: Table, spec) -> tuple[ColumnElement, TimeColumn] | None:
        """``[expiry] lock_time_from`` / ``lock_expires_from`` (:class:`idemview.layouts.joins.LockTimeFrom`):
        the time as a scalar subquery on the joined table (its row matching ``spec.on``, through
        ``spec.via`` when given, where ``spec.where`` holds; none: NULL), or ``None`` when the database
        lacks a table or column it names (an older schema: no such time, stuck_in_progress then judged
        without it). Reflects the joined tables once."""
        from sqlalchemy import MetaData

        def reflect(name: str, schema: str | None) -> Table | None:
            try:
                return Table(
                    name, MetaData(), schema=schema if schema is not None else t.schema, autoload_with=self.engine
                )
            except (NoSuchTableError, DBAPIError):
                return None

        other = reflect(spec.table, spec.schema)
        if other is None or spec.column not in other.c or not all(oc in other.c for _c, oc in spec.on):
            return None
        if not spec.operations_columns() <= set(t.c.keys()):
            return None
        # a column the joined table lacks is NULL on every row: "is NULL" holds (Hatchet before
        # v1.0.86 has no evicted_at: nothing is evicted); any other test of it cannot be read
        where = [
            p for p in spec.where if not (p.op == "is_null" and p.value is True and p.columns() - set(other.c.keys()))
        ]
        if not all(c in other.c for p in where for c in p.columns()):
            return None
        q = select(other.c[spec.column])
        if spec.via is None:
            q = q.where(*[other.c[oc] == t.c[c] for c, oc in spec.on])
        else:  # two steps: operations row -> via rows -> the joined row (Solid Queue's claim -> process)
            via = reflect(spec.via.table, spec.via.schema)
            if (
                via is None
                or not all(c in via.c for c, _oc in spec.on)
                or not all(vc in via.c for _c, vc in spec.via.on)
            ):
                return None
            joined_on = and_(*[other.c[oc] == via.c[c] for c, oc in spec.on])
            own = spec.via.column if spec.via.column in via.c else None
            if own is not None:  # the via row's own time where the joined row is missing (an orphaned claim)
                q = select(func.coalesce(other.c[spec.column], via.c[own])).select_from(via.outerjoin(other, joined_on))
                if where:  # on a joined row that is there; a missing one has nothing to test
                    missing = other.c[spec.on[0][1]].is_(None)
                    q = q.where(or_(missing, and_(*[self.predicate(other, p) for p in where])))
                    where = []
            else:
                q = q.select_from(other.join(via, joined_on))
            q = q.where(*[via.c[vc] == t.c[c] for c, vc in spec.via.on])
        q = q.where(*[self.predicate(other, p) for p in where]).limit(1)
        return q.scalar_subquery(), TimeColumn(spec.column, spec.encoding)

    def _joined_times(self, t: Table) -> None:
        """The lock times a layout reads from joined tables, as time columns: ``lock_time_from`` (the lock
        time: a worker's heartbeat) and ``lock_expires_from`` without ``seconds`` (the lock's end kept per
        row in another table: Hatchet's v1_task_runtime.timeout_at, the task's own timeout)."""
        lay = self.layout
        if lay.lock_time_from is not None and "locked_at" not in self.time_cols:
            joined = self._joined_lock_time(t, lay.lock_time_from)
            if joined is not None:
                self.time_cols["locked_at"] = joined
        lef = lay.lock_expires_from
        if lef is not None and lef.seconds is None and "lock_expires_at" not in self.time_cols:
            joined = self._joined_lock_time(t, lef)
            if joined is not None:
                self.time_cols["lock_expires_at"] = joined

    def _heartbeat_end(self, t: Table, spec) -> None:
        """``lock_expires_from`` with ``seconds``: the lock ends ``seconds`` after the joined heartbeat
        (GoodJob: the locking process's ``updated_at`` + 5 min, app/models/good_job/process.rb), and where
        the record names no such row, at ``locked_at`` + the row's limit or the lock timeout (a heuristic
        the layout declares). An explicit lock timeout from the user is their word for every row: the
        heartbeat is then not read."""
        if "lock_expires_at" in self.time_cols or self._lock_timeout_given:
            return
        joined = self._joined_lock_time(t, spec)
        if joined is None:
            return
        hb_end = epoch_seconds(joined[0], joined[1], self.dialect) + spec.seconds
        base = self.epoch.get("lock_expires_at")
        if base is None and "locked_at" in self.epoch and self.lock_timeout_s is not None:
            base = self.epoch["locked_at"] + self.lock_timeout_s
        self.epoch["lock_expires_at"] = hb_end if base is None else func.coalesce(hb_end, base)

    def _build(self):
        lay, t = self.layout, self.ops
        self._build_key(lay, t)
        self.scope_expr = self._joined([t.c[c] for c in lay.scope])
        self.kind_expr = self._kind_expr(t, lay.kind) if lay.kind else null()
        self.status_expr, self.raw_status_expr = self._status_expr(t, lay.status)
        self.rid = t.c[lay.row_id] if lay.row_id else None
        self._build_times(lay, t)
        self._build_values(lay, t)
        if self.att is not None:
            self._build_attempts()

    def _build_key(self, lay: Layout, t: Table) -> None:
        """``key_expr``: the key columns joined, or ``"#<row id>"`` for a record without a key."""
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

    def _build_times(self, lay: Layout, t: Table) -> None:
        """``time_cols`` (the layout's times, a joined lock time) and ``epoch`` (each as epoch seconds,
        plus the derived ``expires_at`` and ``lock_expires_at``)."""
        self.time_cols: dict[str, tuple[ColumnElement, TimeColumn]] = {
            k: (self._guarded(t, t.c[tc.column], tc.unless), tc) for k, tc in lay.times.items()
        }
        self._joined_times(t)
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
        self._build_lock_expiry(lay, t)

    def _build_lock_expiry(self, lay: Layout, t: Table) -> None:
        """``epoch["lock_expires_at"]`` from the row's own limit and its heartbeat lease, where the
        layout has no such column and no lock timeout was given for this ledger."""
        if (
            lay.lock_timeout_column
            and "locked_at" in self.epoch
            and "lock_expires_at" not in self.time_cols
            and not self._lock_timeout_given
        ):
            # The row's own limit (pg-boss expire_seconds), the layout's default where it is NULL: the
            # lock's end is a derived time, as a retention's expiry is (DESIGN §4 "per-row limits").
            ltc = lay.lock_timeout_column
            # a list names one column per version, the first the table has (pg-boss v11+ expire_seconds,
            # v10 expire_in): Layout.without_columns has dropped those the database lacks
            col = next(c for c in ([ltc] if isinstance(ltc, str) else ltc) if c in t.c)
            per_row = limit_seconds(t.c[col], self.dialect)
            fallback = self.lock_timeout_s
            limit = func.coalesce(per_row, literal(fallback)) if fallback is not None else per_row
            self.epoch["lock_expires_at"] = self.epoch["locked_at"] + limit
        hb = lay.lock_heartbeat
        if hb is not None and "locked_at" in self.epoch and "lock_expires_at" not in self.time_cols:
            if not self._lock_timeout_given:
                # a heartbeat lease (pg-boss 12 heartbeat_on + heartbeat_seconds): NULL where either is
                # NULL; otherwise the lock ends at the earlier of the two ends
                hb_end = epoch_seconds(t.c[hb.time.column], hb.time, self.dialect) + limit_seconds(
                    t.c[hb.seconds_column], self.dialect
                )
                base = self.epoch.get("lock_expires_at")
                if base is None and self.lock_timeout_s is not None:
                    base = self.epoch["locked_at"] + self.lock_timeout_s
                self.epoch["lock_expires_at"] = hb_end if base is None else case((hb_end < base, hb_end), else_=base)
        if lay.lock_expires_from is not None and lay.lock_expires_from.seconds is not None:
            self._heartbeat_end(t, lay.lock_expires_from)

    def _build_values(self, lay: Layout, t: Table) -> None:
        """The references (fingerprint, intent, effect) and the attempt count."""
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

    def _build_attempts(self):
        a, t = self.layout.attempts, self._attempts_table()
        # The attempt's (scope, key) are read through the operations columns it joins on. Joined
        # exactly (issue #9, item 7): on a case- or trailing-space-insensitive collation (MariaDB's
        # default) 'Order-77' = 'order-77' and 'ord-88' = 'ord-88 ', and every attempt would join two
        # operations. The plain equality stays first so the column's index still serves the join.
        self.att_join = and_(*[self._same(t.c[ac], self.ops.c[oc]) for ac, oc in a.join.items()])
        self.att_where = and_(*[self.predicate(t, p) for p in a.where]) if a.where else true()
        #: Attempt number as stored (display) and as an integer (sorting, comparisons).
        self.att_number_raw = t.c[a.number] if a.number else null()
        self.att_number = stored_int(t.c[a.number], self.dialect) if a.number else null()
        assert a.outcome is not None  # parse_layout gives every attempts table one (default "unknown")
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

    def _attempts_table(self) -> Table:
        """The attempts table of a layout whose attempts come from a table (``LayoutError`` otherwise)."""
        if self.att is None:
            raise LayoutError(f"layout {self.layout.name!r} has no attempts table")
        return self.att
