"""Questions asked of a whole :class:`~idemview.ledger.reader.Ledger` (not one page or one operation):
the histogram of a time column, the time span, a free-text search over keys, the index warnings, and
the row helpers the reader shares (stored numbers, raw keys, JSON-array attempts, the unmapped-status
condition). The ledger is passed in; this module never imports the reader at run time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Integer,
    Table,
    cast,
    func,
    inspect,
    literal_column,
    or_,
    select,
)
from sqlalchemy.sql.expression import ColumnElement

from idemview.domain import jsontext
from idemview.domain.filters import Filter
from idemview.domain.model import Attempt, Operation, Outcome
from idemview.layouts.layout import StatusSource, TimeColumn
from idemview.ledger.times import decode_time, from_epoch

if TYPE_CHECKING:  # pragma: no cover
    from idemview.ledger.reader import Ledger

UTC = UTC


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
    q = select(*ledger.op_columns()).select_from(ledger.ops).where(exact).limit(limit)
    with ledger.engine.connect() as c:
        out = [ledger.row_to_operation(r) for r in c.execute(q)]
        if len(out) < limit:
            like = ledger.key_expr.contains(t, autoescape=True)
            if "intent_ref" in ledger.layout.fields:
                like = or_(like, ledger.intent_expr.contains(t, autoescape=True))
            q2 = select(*ledger.op_columns()).select_from(ledger.ops).where(like, ~exact).limit(limit - len(out))
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


# ------------------------------------------------------------------------------- whole-ledger basics


@dataclass
class Basics:
    """What a scan says about the whole ledger before its findings (DESIGN §9): ``operations``
    (records), ``attempts`` (rows of the attempts table, elements of JSON arrays, or the sum of the
    counter column), ``unmapped`` (``{"status": {RAW: N}, "outcome": {RAW: N}}``, as
    :meth:`Ledger.unmapped_counts`) and ``unknown_times`` (``{time field: N}``, as
    :func:`idemview.ledger.unknown_times.unknown_time_counts`; ``None`` when not asked)."""

    operations: int
    attempts: int
    unmapped: dict[str, dict[str, int]]
    unknown_times: dict[str, int] | None


def ledger_basics(ledger: Ledger, *, unknown_times: bool = True) -> Basics:
    """Counts, unmapped raw values and (``unknown_times``) stored times that are no instant, read in
    **one aggregate pass per table** (issue 27 item 4): one ``SELECT count(*), sum(counter),
    sum(unmapped?), sum(time unknown?) …`` over the operations table and one over an attempts table,
    where the separate questions read each table up to three times. Raw values are grouped only when
    that pass saw an unmapped record, and then only the unmapped records (a GROUP BY over every row
    makes SQLite sort all of them: 3.2 s against 1.6 s for the plain aggregate at 2M Celery rows).
    The answers equal :meth:`Ledger.counts`, :meth:`Ledger.unmapped_counts` and
    :func:`~idemview.ledger.unknown_times.unknown_time_counts`; a ledger class that answers those
    itself (or JSON-array attempts, counted in Python) is asked through them. Raises what the
    database raises."""
    from idemview.ledger.unknown_times import unknown_time_counts

    a = ledger.layout.attempts
    if _answers_itself(ledger):
        n_ops, n_att = ledger.counts()
        ut = unknown_time_counts(ledger) if unknown_times else None
        return Basics(n_ops, n_att, ledger.unmapped_counts(), ut)
    tally = _Tally(unknown_times)
    n_att = 0
    with ledger.engine.connect() as c:
        extra = tally.time_sums(ledger.time_cols, ledger.epoch, ledger.dialect)
        counter = a.source == "counter" and ledger.attempt_count_expr is not None
        if counter:
            extra.append(func.sum(ledger.attempt_count_expr).label("att"))
        um_cond = _unmapped(ledger.layout.status, ledger.raw_status_expr, ledger.status_expr)
        row = tally.one_pass(c, ledger.ops, None, extra, um_cond, "status", ledger.raw_status_expr)
        n_ops = int(row["n"] or 0)
        if counter:
            n_att = int(row["att"] or 0)
        if ledger.att is not None:
            extra = tally.time_sums(ledger.att_time, ledger.att_epoch, ledger.dialect)
            um_cond = (
                _unmapped(a.outcome, ledger.att_raw_outcome, ledger.att_outcome) if a.outcome is not None else None
            )
            row = tally.one_pass(c, ledger.att, ledger.att_where, extra, um_cond, "outcome", ledger.att_raw_outcome)
            if a.source == "table":
                n_att = int(row["n"] or 0)
    return Basics(n_ops, n_att, tally.unmapped, tally.unknown if unknown_times else None)


def _answers_itself(ledger: Ledger) -> bool:
    """The ledger's class answers counts or unmapped values itself (a Redis or DynamoDB snapshot), or
    its attempts are JSON arrays (counted in Python), or it keeps no time columns: then
    :func:`ledger_basics` asks the separate questions."""
    cls = type(ledger)

    def base(name: str) -> bool:  # the reader's own method (this module is below the reader: no import)
        f = getattr(cls, name, None)
        return (
            getattr(f, "__module__", "") == "idemview.ledger.reader"
            and getattr(f, "__qualname__", "") == f"Ledger.{name}"
        )

    return (
        not base("counts")
        or not base("unmapped_counts")
        or ledger.layout.attempts.source == "json_array"
        or getattr(ledger, "time_cols", None) is None
    )


class _Tally:
    """The aggregate passes of :func:`ledger_basics` and what they found: ``unmapped``
    (``{"status": {RAW: N}, "outcome": {RAW: N}}``) and ``unknown`` (``{time field: N}``)."""

    def __init__(self, unknown_times: bool):
        self.unknown_times = unknown_times
        self.unmapped: dict[str, dict[str, int]] = {"status": {}, "outcome": {}}
        self.unknown: dict[str, int] = {}

    def time_sums(self, cols, epoch, dialect: str = "") -> list:
        """``sum(stored but no instant)`` per time field of ``cols`` (labelled ``t_<field>``). A
        PostgreSQL ``timestamp``/``timestamptz`` column is left out: every value it can store has an
        epoch (``EXTRACT`` gives ``Infinity`` for ``infinity``, never NULL), so its sum is 0, and
        computing it cost ~0.6 s CPU per time field at 2M rows (issue 27 item 4)."""
        from sqlalchemy import DateTime, and_, case
        from sqlalchemy.types import TypeDecorator

        from idemview.ledger.dialects import POSTGRESQL, family
        from idemview.ledger.unknown_times import _stored

        if not self.unknown_times or not cols:
            return []

        def always_instant(col, tc) -> bool:  # read as a datetime (EXTRACT), not as a number or text
            t = getattr(col, "type", None)
            t = t.impl_instance if isinstance(t, TypeDecorator) else t
            read = getattr(tc, "encoding", None) not in ("epoch_s", "epoch_ms", "epoch_s_or_ms", "iso_text")
            return bool(dialect) and family(dialect) == POSTGRESQL and isinstance(t, DateTime) and read

        return [
            func.sum(case((and_(_stored(cols[k][0]), epoch[k].is_(None)), _ONE), else_=_ZERO)).label(f"t_{k}")
            for k in cols
            if k in epoch and not always_instant(*cols[k])
        ]

    def one_pass(self, c, table, where, extra: list, um_cond, what: str, raw) -> dict:
        """``count(*)``, ``extra`` and the unmapped records' count over ``table`` in one statement;
        the unmapped raw values grouped (:meth:`grouped`) only when there are some."""
        from sqlalchemy import case

        cols = [func.count().label("n"), *extra]
        if um_cond is not None:
            cols.append(func.sum(case((um_cond, _ONE), else_=_ZERO)).label("um"))
        q = select(*cols).select_from(table)
        if where is not None:
            q = q.where(where)
        row = c.execute(q).one()._mapping
        for k, v in row.items():
            if k.startswith("t_") and int(v or 0):
                self.unknown[k[2:]] = self.unknown.get(k[2:], 0) + int(v)
        if um_cond is not None and int(row["um"] or 0):
            self.grouped(c, what, raw, um_cond, table, *([where] if where is not None else []))
        return dict(row)

    def grouped(self, c, what: str, raw, cond, table, *where) -> None:
        """The unmapped records' raw values of ``table`` counted into :attr:`unmapped` ``[what]``."""
        from sqlalchemy import null
        from sqlalchemy.sql.elements import Null

        if isinstance(raw, Null):  # rules without a raw column: one count, nothing to group by
            q = select(null().label("raw"), func.count().label("n")).select_from(table).where(cond, *where)
        else:
            q = select(raw.label("raw"), func.count().label("n")).select_from(table).where(cond, *where).group_by(raw)
        for r in c.execute(q):
            if int(r.n):
                k = _raw_key(r.raw)
                self.unmapped[what][k] = self.unmapped[what].get(k, 0) + int(r.n)


_ONE: ColumnElement = literal_column("1")
_ZERO: ColumnElement = literal_column("0")
