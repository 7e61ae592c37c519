"""A ledger: a read-only engine plus a layout, compiled to SQLAlchemy Core (DESIGN §3, §4, §10).

:class:`Ledger` reflects the layout's tables (proving the layout fits), builds the normalized operations
expression set, and answers the questions every view asks: pages of operations (keyset paging, sorted
and filtered by the database), the records and attempts of one operation, counts, and the distinct
values of a column. Findings are computed by :mod:`idemview.findings.engine` on the same expressions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import (
    MetaData,
    Text,
    and_,
    cast,
    false,
    func,
    literal,
    null,
    or_,
    select,
    true,
    tuple_,
)
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import Null
from sqlalchemy.sql.expression import ColumnElement, CompoundSelect, Select

from idemview.domain import jsontext
from idemview.domain.actions import Classifier
from idemview.domain.filters import Filter
from idemview.domain.kinds import FindingKind
from idemview.domain.model import Attempt, Operation, Outcome, Payload, Status
from idemview.layouts.layout import Layout, LayoutError
from idemview.ledger.dialects import MYSQL, POSTGRESQL, family
from idemview.ledger.filtering import finding_clause

# The schema half (reflection, expressions) and the whole-ledger questions live beside the reader;
# their public names are re-exported here, where callers have always imported them from.
from idemview.ledger.queries import (
    Histogram,
    IndexWarning,
    _is_int,
    _json_list,
    _raw_key,
    _short_text,
    _unmapped,
    find_operations,
    histogram,
    index_warnings,
    json_array_attempts,
    stored_number,
    time_span,
)
from idemview.ledger.schema import LedgerSchema
from idemview.ledger.source import LIVE, LedgerSource, layout_not_checkable
from idemview.ledger.sqlx import (
    time_after,
    time_before,
)
from idemview.ledger.times import decode_time, from_epoch

__all__ = [
    "SORTABLE",
    "Histogram",
    "IndexWarning",
    "Ledger",
    "LedgerSchema",
    "Page",
    "_json_list",
    "_stay_in_database",
    "decode_payload",
    "find_operations",
    "histogram",
    "index_warnings",
    "json_array_attempts",
    "stored_number",
    "time_span",
    "with_naive_zone",
]

UTC = UTC

#: Sort keys the grid offers, each a normalized column name.
SORTABLE = ("created_at", "key", "scope", "kind", "status", "expires_at", "attempt_count", "updated_at")


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
    for the next page with, ``None`` when this was the last. ``first`` and ``last`` are the cursors of
    its first and last row (``None`` when the page is empty), for :meth:`Ledger.page`'s ``start`` and
    ``end``: read the same stretch of the sort again, bounded at both ends."""

    rows: list[Operation]
    cursor: tuple | None
    first: tuple | None = None
    last: tuple | None = None


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


class Ledger(LedgerSchema):
    """A layout bound to a read-only engine.

    ``lock_timeout_s``, ``retry_threshold`` and ``retention_s`` override the layout's tunables;
    ``naive_zone`` (IANA) says which zone the ledger's naive timestamps were written in.
    Raises :class:`LayoutError` (``missing`` set) when a table or column the layout names is absent."""

    #: The declared source before :attr:`source` is first set (a ledger built without ``__init__``).
    _source: LedgerSource = LIVE
    #: The kinds the layout itself rules out (:func:`~idemview.ledger.source.layout_not_checkable`),
    #: merged into every source set on this ledger.
    _layout_not_checkable: dict[FindingKind, str] = {}

    @property
    def source(self) -> LedgerSource:
        """What the ledger is read from (:mod:`idemview.ledger.source`): live SQL unless its backend
        declared otherwise. Setting it (the backends do, once, when they open) merges the layout's own
        "not checkable" reasons into the declared ones: ``source.not_checkable`` is the one list."""
        return self._source

    @source.setter
    def source(self, src: LedgerSource) -> None:
        self._source = src.declaring(self._layout_not_checkable)

    @property
    def snapshot(self) -> Any:
        """``source.snapshot``: the snapshot's facts (:class:`~idemview.ledger.source.SnapshotFacts`),
        ``None`` for a live database."""
        return self._source.snapshot

    @property
    def lock_timeout_override(self) -> float | None:
        """The lock timeout the caller gave (``--lock-timeout``, seconds), ``None`` when the layout's
        applies."""
        return self.lock_timeout_s if self._lock_timeout_given else None

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
        layout = self._adapted(engine, layout, naive_zone)
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
        self._reflect_tables()
        self._check_in_tables()
        self._build()
        from idemview.ledger.constraints import key_is_unique

        #: Why the schema allows at most one record per (scope, key), e.g. ``"UNIQUE (task_id)"``
        #: (read once here, so that the scan's "not checkable" list costs no query later), or None.
        self.key_unique: str | None = key_is_unique(self)
        self._bind_effects(effects_engine)
        # What the layout rules out (deletes_completed), kept in every source declared later.
        self._layout_not_checkable = layout_not_checkable(self.layout.deletes_completed, self.effects is not None)
        self.source = LIVE

    def _adapted(self, engine: Engine, layout: Layout, naive_zone: str | None) -> Layout:
        """``layout`` as it applies on ``engine``: its naive times read in ``naive_zone``, a shipped
        preset's foreign schema dropped on MySQL, PostgreSQL's one schema resolved (said in
        :attr:`schema_note`)."""
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
        return layout

    def _reflect_tables(self) -> None:
        """Reflect the operations table (dropping the optional columns it lacks from :attr:`layout`) and
        the attempts table if the layout has one (:attr:`att`, else ``None``). Raises
        :class:`LayoutError` (``missing`` set) for an absent table or column."""
        layout = self.layout
        self.ops = self.reflect(
            layout.schema, layout.table, layout.operations_columns(), "operations", optional=set(layout.optional)
        )
        absent = set(layout.optional) - {c.key for c in self.ops.c}
        if absent:
            layout = layout.without_columns(absent)
            self.layout = layout
        self.att = None
        if layout.attempts.source != "table":
            return
        a = layout.attempts
        schema = a.schema if a.schema is not None else layout.schema
        try:
            self.att = self.reflect(schema, a.table, layout.attempts_columns(), "attempts")
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

    def action_classifier(self) -> Classifier:
        """The ledger's action classifier (its layout's ``[actions]`` rules, DESIGN §5.1), made once per
        ledger object so its memo lasts as long as the ledger (the findings weigh with it too)."""
        cl = getattr(self, "_action_classifier", None)
        if cl is None:
            cl = self._action_classifier = Classifier(getattr(self.layout, "actions", None))
        return cl

    def action_clause(self, actions) -> ColumnElement:
        """Operations whose kind has one of the action classes ``actions`` (``unknown``: no kind too).
        Classification runs per distinct kind in Python (the vocabulary is no SQL), then is one
        ``kind IN (...)``."""
        cl = self.action_classifier()
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

    def op_columns(self, payloads: bool = True) -> list:
        """Columns of the operations page select: normalized expressions plus raw time columns (and the
        payload columns unless ``payloads`` is False: a grid page does not show them). The evidence
        export selects them too (:mod:`idemview.evidence.plan`); :meth:`row_to_operation` reads a row."""
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

    _op_columns = op_columns  # the old private name, kept for callers outside the package

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
        start: tuple | None = None,
        end: tuple | None = None,
    ) -> Page:
        """One page of normalized operations, filtered and sorted by the database (keyset paging).

        ``after`` is the previous page's ``cursor`` (rows strictly after that row). ``start`` and
        ``end`` are row cursors (a page's ``first`` / ``last``), both inclusive: the page holds no row
        sorting before ``start`` nor after ``end``. A cursor is ``(sort value is NULL, sort value,
        tie-breaker)``. The sort is made total with the row identity (or the key) as a tie-breaker.
        NULL sort values come last (in either direction), ordered by the tie-breaker."""
        sort_e = self._sort_expr(sort)
        tie = self.rid if self.rid is not None else self.key_expr
        # The cursor holds the sort value as the database has it. A PostgreSQL time may be one Python
        # cannot hold (infinity, BC, after 9999: read as None, ledger.pg_times): there the cursor is
        # the value's text, cast back in SQL, so such a row neither repeats nor hides the rest.
        as_text = family(self.engine) == POSTGRESQL and (sort in self.time_cols or sort == "expires_at")
        cur_e = cast(sort_e, Text) if as_text else sort_e
        cols = self.op_columns(payloads) + [cur_e.label("_s"), tie.label("_t")]
        where = self.filter_clause(flt, now)
        # Each bound restricts the two sections of the order (rows with a sort value, then the NULL
        # section): a condition each, or False where the section lies wholly beyond it.
        valued: list = []
        nulls: list = []
        for cur, lower, inclusive in ((after, True, False), (start, True, True), (end, False, True)):
            if cur is not None:
                v, n = self._bound(cur, sort_e, tie, as_text, descending, lower, inclusive)
                valued += [v] if v is not None else []
                nulls += [n] if n is not None else []
        # Two range queries instead of ORDER BY (sort IS NULL), sort, tie: each is a plain ordered range
        # an index on the sort column can serve (top-N from the index, not a sort of the whole table).
        # First the rows with a sort value, then (when they run out) those without, by the tie-breaker.
        fetched: list = []
        with self.engine.connect() as c:
            if all(v is not False for v in valued):
                q = select(*cols).select_from(self.ops).where(where, sort_e.is_not(None), *valued)
                order = (sort_e.desc(), tie.desc()) if descending else (sort_e.asc(), tie.asc())
                fetched = list(c.execute(q.order_by(*order).limit(limit + 1)).fetchall())
            if len(fetched) <= limit and all(n is not False for n in nulls):
                q = select(*cols).select_from(self.ops).where(where, sort_e.is_(None), *nulls)
                q = q.order_by(tie.desc() if descending else tie.asc()).limit(limit + 1 - len(fetched))
                fetched += c.execute(q).fetchall()
        more = len(fetched) > limit
        rows = fetched[:limit]
        ops = [self.row_to_operation(r) for r in rows]

        def cursor_of(r) -> tuple:
            m = r._mapping
            return (m["_s"] is None, m["_s"], m["_t"])

        first = cursor_of(rows[0]) if rows else None
        last = cursor_of(rows[-1]) if rows else None
        return Page(ops, last if more else None, first, last)

    @staticmethod
    def _bound(cur: tuple, sort_e, tie, as_text: bool, descending: bool, lower: bool, inclusive: bool):
        """The conditions a cursor ``cur`` puts on the two sections of :meth:`page`'s order, as
        ``(valued, nulls)``: each ``None`` (no restriction), ``False`` (the section lies wholly beyond
        the bound) or a SQL condition. ``lower``: the rows at/after the cursor, else at/before it;
        ``inclusive``: the cursor's own row is one of them."""
        s_null, s_val, t_val = cur
        # the rows wanted sort later than the cursor in the page's order: ascending >, descending <
        later = lower != descending
        if later:
            t_cond = tie >= t_val if inclusive else tie > t_val
        else:
            t_cond = tie <= t_val if inclusive else tie < t_val
        if s_null:  # the cursor is in the NULL section, which comes after every row with a sort value
            return (False if lower else None), t_cond
        if as_text:
            s_val = cast(literal(s_val, Text), sort_e.type)
        if later:
            valued = and_(sort_e >= s_val, or_(sort_e > s_val, t_cond))
        else:
            valued = and_(sort_e <= s_val, or_(sort_e < s_val, t_cond))
        return valued, (None if lower else False)

    def iter_operations(
        self, flt: Filter | None = None, *, now: datetime | None = None, batch: int = 5000
    ) -> Iterator[Operation]:
        """Every operation matching ``flt``, streamed (server-side cursor where the driver has one)."""
        q = select(*self.op_columns()).select_from(self.ops).where(self.filter_clause(flt, now))
        tie = self.rid if self.rid is not None else self.key_expr
        q = q.order_by(tie)
        with self.engine.connect() as c:
            res = c.execution_options(stream_results=True, yield_per=batch).execute(q)
            for r in res:
                yield self.row_to_operation(r)

    def records(self, scope: str, key: str) -> list[Operation]:
        """Every record of one operation (a ledger without a unique key may hold several)."""
        q = select(*self.op_columns()).select_from(self.ops).where(self.scope_expr == scope, self.key_expr == key)
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
