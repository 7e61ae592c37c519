"""Dedup windows measured from data (DESIGN §5.2, issue #22): is the window long enough for the
retries that really happen?

Per operation kind, :func:`measure_windows` compares the window the ledger keeps with how late retries
and replays really came:

- the **window** of an operation: its ``expires_at`` minus its creation (``window_source`` ``expires_at``;
  ``ttl`` on a Redis snapshot, where ``expires_at`` is the key's TTL), else the layout's retention
  (``retention``: expiry = retention time + retention), else the layout's declared dedup window
  (``dedup_window``, e.g. Oban's unique period); none when the ledger keeps no window;
- the **retry span** of an operation (one (scope, idempotency key)): the start of its last attempt, or
  of its last record for the same scope + key, minus the start of its first (attempt starts and record
  creation times together; a ``last_attempt_at`` column counts as an attempt start). Only *retried*
  operations (>= 2 attempts, >= 2 records, or an attempt count >= 2) have a span;
- a **late** operation: one whose last request started after its key had expired (the earliest expiry
  of its records); ``late_max_s`` is how long after;
- verdict: ``too_short`` when any retry span reaches past its window or any request came late,
  ``enough`` when the largest span is under the window, ``unknown`` when the ledger keeps no window, no
  attempt times, or nothing was retried (``reason`` says which);
- ``suggested_window_s``: the smallest of :data:`LADDER` that is at least 1.5 × the largest span.

Everything runs in the ledger's own engine (SQLAlchemy Core over the :class:`~idemview.ledger.reader.Ledger`'s
compiled, encoding-aware expressions): one GROUP BY (scope, key) over the operations and attempts, then one
GROUP BY kind. PostgreSQL gives exact percentiles (``percentile_cont``); SQLite and MySQL/MariaDB, which
have no such aggregate, group the spans into :data:`BUCKETS` log-spaced buckets (32 per decade, computed
in SQL with a nested CASE) keeping each bucket's count, minimum and maximum, and the percentile is
interpolated within its bucket (exact when a bucket holds one distinct value; otherwise within 7.5 %).
The rows coming back are at most kinds × buckets, so memory stays bounded on any ledger size.

Times that are missing or undecodable (the compiled expressions give NULL) are left out: an operation is
judged on the times that can be read, and the counts say how many could not be.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import case, func, literal, literal_column, null, select, union_all
from sqlalchemy.sql.expression import ColumnElement

from idemview.ledger.dialects import POSTGRESQL
from idemview.ledger.rawtext import decode_text
from idemview.ledger.reader import Ledger
from idemview.ledger.times import iso
from idemview.masking.visible import visible

UTC = UTC

#: The suggestion ladder of DESIGN §5.2, in seconds: 5 min, 15 min, 1 h, 6 h, 24 h, 7 d, 30 d, 90 d.
LADDER: tuple[float, ...] = (300.0, 900.0, 3600.0, 21600.0, 86400.0, 604800.0, 2592000.0, 7776000.0)

#: Buckets per decade of the histogram (engines without percentile_cont); 10 ** (1/32) ≈ 1.075.
PER_DECADE = 32
#: Bucket edges in seconds: bucket 0 is [0, 1 s), bucket i is [10**((i-1)/32), 10**(i/32)), the last
#: one everything from 10**9 s (31 years) on.
EDGES: tuple[float, ...] = tuple(10 ** (i / PER_DECADE) for i in range(0, 9 * PER_DECADE + 1))
BUCKETS = len(EDGES) + 1

TOO_SHORT, ENOUGH, UNKNOWN = "too_short", "enough", "unknown"


def suggest(largest_span_s: float | None) -> float | None:
    """The smallest window of :data:`LADDER` that is at least 1.5 × ``largest_span_s`` (seconds), or
    ``None`` when there is no span or even 90 days is too short (DESIGN §5.2)."""
    if largest_span_s is None:
        return None
    need = 1.5 * float(largest_span_s)
    return next((w for w in LADDER if w >= need), None)


def duration_words(seconds: float | None) -> str:
    """A duration as people write a window: ``45 s``, ``12 min``, ``3 h 10 min``, ``24 h``, ``7 d``,
    ``2 d 5 h`` (seconds; under 48 h in hours, from 48 h on in days). A negative duration (a window
    whose expiry precedes its creation) keeps its sign: ``-1 h``."""
    if seconds is None:
        return "unknown"
    if float(seconds) < 0:
        return "-" + duration_words(-float(seconds))
    s = int(round(float(seconds)))
    if s < 120:
        return f"{s} s"
    if s < 3600 and round(s / 60) < 60:  # 3570 s is "1 h", not "60 min"
        return f"{round(s / 60)} min"
    if s < 48 * 3600:
        h, m = divmod(round(s / 60), 60)
        return f"{h} h" + (f" {m} min" if m else "")
    d, h = divmod(round(s / 3600), 24)
    return f"{d} d" + (f" {h} h" if h else "")


@dataclass
class WindowGroup:
    """The measurement of one operation kind. Seconds throughout; ``None`` where unknown.

    ``operations``: operations (scope + key) of the kind; ``retried``: those with a retry span;
    ``over``: retried operations whose span reached past their own window, or that came late;
    ``over_retried``: those of ``over`` that were retried (what "N % of retries came later" counts: a
    late operation with a single request is no retry);
    ``late``: operations whose last request started after the key had expired (``late_max_s``: the
    most any came after it); ``unreadable``: operations none of whose times could be read (missing or
    undecodable; not judged); ``partly_unreadable``: judged on the times that could be read;
    ``longest_attempt_s``: the longest attempt (finish − start) seen; ``notes``: what the layout adds
    (a lock shorter than the work, a purge shorter than the window)."""

    kind: str | None
    operations: int = 0
    retried: int = 0
    window_s: float | None = None
    window_min_s: float | None = None
    window_source: str | None = None
    lock_timeout_s: float | None = None
    p50: float | None = None
    p99: float | None = None
    max: float | None = None
    late: int = 0
    late_max_s: float | None = None
    over: int = 0
    over_retried: int = 0
    verdict: str = UNKNOWN
    reason: str | None = None
    suggested_window_s: float | None = None
    sentence: str = ""
    unreadable: int = 0
    partly_unreadable: int = 0
    longest_attempt_s: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The kind as shown: ``(no kind)`` when the layout maps none or the value is NULL, ``(empty
        kind)`` for an empty text (a group of its own: NULL and '' are different values). Characters
        that are not printable (control characters, newlines, bidi overrides such as U+202E) are shown
        escaped by the display sink's rule (:func:`idemview.masking.visible.visible`: ``\\u001b``,
        ``\\u202e``), newlines included: a kind is one line of ledger data and must not forge another."""
        if self.kind is None:
            return "(no kind)"
        k = _kind_text(self.kind)
        k = k if isinstance(k, str) else str(k)  # a kind column may be numeric
        if k == "":
            return "(empty kind)"
        return visible(k)  # line breaks too: the stdout sink keeps them, and a kind is one line

    @property
    def sentence_rest(self) -> str:
        """The sentence after its leading ``kind: `` (what an export's own kind column does not repeat)."""
        head = self.label + ": "
        return self.sentence[len(head) :] if self.sentence.startswith(head) else self.sentence

    def masked_sentence(self, mask) -> str:
        """The sentence with ``mask(text)`` applied to the kind and to the rest separately: masked as one
        text, ``email.send: window 24 h`` reads as a field named e-mail with a value, and the masker
        would hide "window"."""
        return f"{mask(self.label)}: {mask(self.sentence_rest)}"

    def to_json(self, mask=None) -> dict[str, Any]:
        """The group of DESIGN §5.2's JSON (plus ``reason``, ``over``, ``unreadable``,
        ``partly_unreadable``, ``longest_attempt_s`` and ``notes``). ``mask(text)``: applied to every
        text from the ledger (the kind, the sentence, the reason and the notes); ``None``: unmasked."""
        m = mask or (lambda x: x)
        return {
            "kind": m(_kind_text(self.kind)) if self.kind is not None else None,
            "operations": self.operations,
            "retried": self.retried,
            "window_s": _num(self.window_s),
            "window_source": self.window_source,
            "lock_timeout_s": _num(self.lock_timeout_s),
            "retry_span_s": {"p50": _num(self.p50), "p99": _num(self.p99), "max": _num(self.max)},
            "late": self.late,
            "late_max_s": _num(self.late_max_s),
            "verdict": self.verdict,
            "reason": m(self.reason) if self.reason is not None else None,
            "suggested_window_s": _num(self.suggested_window_s),
            "sentence": self.masked_sentence(m),
            "over": self.over,
            "unreadable": self.unreadable,
            "partly_unreadable": self.partly_unreadable,
            "longest_attempt_s": _num(self.longest_attempt_s),
            "notes": [m(n) for n in self.notes],
        }


@dataclass
class WindowsReport:
    """Every kind's :class:`WindowGroup`, ``too_short`` first (then ``unknown``, then ``enough``; by
    kind within each). ``method``: ``percentile_cont`` or ``histogram`` (how the percentiles were
    computed); ``source``: where the retry spans come from (``attempts``, ``last_attempt_at``,
    ``records``) or ``None`` when the ledger keeps no attempt times."""

    now: datetime
    layout: str
    groups: list[WindowGroup]
    method: str
    source: str | None

    def to_json(self, mask=None) -> dict[str, Any]:
        """``{"now", "layout", "groups": [...]}`` of DESIGN §5.2 (plus ``method`` and ``source``);
        ``mask``: see :meth:`WindowGroup.to_json`."""
        return {
            "now": iso(self.now),
            "layout": mask(self.layout) if mask else self.layout,
            "method": self.method,
            "source": self.source,
            "groups": [g.to_json(mask) for g in self.groups],
        }


def _num(v: float | None) -> float | int | None:
    if v is None:
        return None
    r = round(float(v), 3)
    return int(r) if r.is_integer() else r


# --------------------------------------------------------------------------------------- SQL


def _nnull() -> ColumnElement:
    """A NULL typed as a number: a bare NULL in a derived table is text on PostgreSQL, and ``text >= 2``
    or ``double precision - text`` is an error there."""
    return null() * literal_column("1.0")


def _least(a: ColumnElement, b: ColumnElement) -> ColumnElement:
    # NULL-ignoring LEAST: engines disagree (PostgreSQL ignores NULLs, MySQL and SQLite's min() do not).
    return case((a.is_(None), b), (b.is_(None), a), (a <= b, a), else_=b)


def _greatest(a: ColumnElement, b: ColumnElement) -> ColumnElement:
    return case((a.is_(None), b), (b.is_(None), a), (a >= b, a), else_=b)


def _bucket(x: ColumnElement, lo: int = 0, hi: int = len(EDGES)) -> ColumnElement:
    """The histogram bucket of ``x`` (>= 0) as a nested CASE: a binary search over :data:`EDGES`, so each
    row is compared about nine times, not three hundred. Bucket ``i`` holds ``EDGES[i-1] <= x < EDGES[i]``
    (bucket 0: below 1 s; the last: from the last edge on)."""
    if lo == hi:
        return literal_column(str(lo))
    mid = (lo + hi) // 2
    return case(
        (x < literal_column(repr(EDGES[mid])), _bucket(x, lo, mid)),
        else_=_bucket(x, mid + 1, hi),
    )


def span_source(ledger: Ledger) -> tuple[str | None, str | None]:
    """Where the retry spans of ``ledger`` come from, and why none when they cannot be measured:
    ``("attempts", None)`` (an attempts table with start times), ``("last_attempt_at", None)`` (the
    record keeps its latest attempt's start), ``("records", None)`` (several records per key, each with
    its creation time), or ``(None, reason)``."""
    lay = ledger.layout
    if ledger.att is not None and "started_at" in ledger.att_epoch:
        return "attempts", None
    if "last_attempt_at" in ledger.epoch:
        return "last_attempt_at", None
    if lay.row_id is not None and "created_at" in ledger.epoch and not ledger.key_unique:
        return "records", None
    src = lay.attempts.source
    one = f" and one record per key ({ledger.key_unique})" if ledger.key_unique else ""
    if src == "counter":
        why = f"no attempt times: the ledger keeps only an attempt counter{one}"
    elif src == "json_array":
        why = f"no attempt times in SQL: the attempts are a JSON array inside each record{one}"
    elif ledger.att is not None:
        why = "no attempt times: the attempts table keeps no start time"
    else:
        why = f"no attempt times: the ledger keeps no attempts{one}"
    return None, why


def window_source(ledger: Ledger) -> str | None:
    """Which window the ledger keeps: ``ttl`` (a Redis snapshot's key TTL), ``expires_at`` (a column),
    ``retention`` (the layout's retention added to a time), ``dedup_window`` (the layout's declared
    window), or ``None``."""
    lay = ledger.layout
    mode = lay.expiry_mode()
    if "expires_at" in ledger.epoch and mode == "column":
        return "ttl" if ledger.source.dialect == "redis" else "expires_at"
    if "expires_at" in ledger.epoch:
        return "retention"
    if lay.dedup_window_seconds is not None:
        return "dedup_window"
    return None


def _per_operation(ledger: Ledger, source: str, wsrc: str | None):
    """One row per operation (scope, key): ``kind``, ``first``/``last`` request (epoch s), ``nrec``,
    ``natt``, ``nmiss`` (times that could not be read), ``nt`` (times read), ``ex`` (earliest expiry),
    ``created`` (earliest creation), ``dur`` (longest attempt), ``lockwin`` (longest lock), ``ac``
    (largest attempt count)."""
    # Long because: one grouped SQL statement (the operations' part and the attempts'
    # part, a UNION grouped by scope and key); its column expressions line up branch by branch, by
    # the names the caller reads them by, which splitting would scatter.
    # Straight from the tables through the ledger's compiled expressions (not operations_select()):
    # only the columns needed are computed (a derived table in a UNION branch computes them all).
    one: ColumnElement = literal_column("1")
    zero: ColumnElement = literal_column("0")
    nul = _nnull()

    def ep(name: str) -> ColumnElement:  # a time the layout lacks is a numeric NULL
        return ledger.epoch[name] if name in ledger.epoch else nul

    ac = ledger.attempt_count_expr if ledger.attempt_count_expr is not None else nul
    scope, key, kind = ledger.scope_expr, ledger.key_expr, ledger.kind_expr
    has_lock = "lock_expires_at" in ledger.epoch and "locked_at" in ledger.epoch
    lockwin = (ledger.epoch["lock_expires_at"] - ledger.epoch["locked_at"]) if has_lock else nul

    last_at = ep("last_attempt_at") if source == "last_attempt_at" else nul
    ops_t = ep("created_at")
    ops_part = select(
        scope.label("scope"),
        key.label("key"),
        kind.label("kind"),
        ops_t.label("t"),
        last_at.label("t2"),
        ep("expires_at").label("ex"),
        ops_t.label("cr"),
        one.label("rec"),
        zero.label("att"),
        case((ops_t.is_(None), one), else_=zero).label("miss"),
        nul.label("dur"),
        lockwin.label("lockwin"),
        ac.label("ac"),
    ).select_from(ledger.ops)
    att = ledger.att if source == "attempts" else None
    if att is None and ledger.key_unique:
        # One record per key (the schema says so): each record is its operation, no grouping needed.
        # OFFSET 0 keeps the record's times a derived table of their own: flattened into the grouped
        # query, every use of first/last would repeat each time's conversion (PostgreSQL took 25 s on
        # 100k records instead of 1 s); a subquery with LIMIT/OFFSET is not flattened on any engine.
        r = ops_part.offset(0).subquery("r")
        return select(
            r.c.scope,
            r.c.key,
            r.c.kind,
            _least(r.c.t, r.c.t2).label("first"),
            _greatest(r.c.t, r.c.t2).label("last"),
            r.c.rec.label("nrec"),
            r.c.att.label("natt"),
            r.c.miss.label("nmiss"),
            (case((r.c.t.is_(None), zero), else_=one) + case((r.c.t2.is_(None), zero), else_=one)).label("nt"),
            r.c.ex,
            r.c.cr.label("created"),
            r.c.dur,
            r.c.lockwin,
            r.c.ac,
        ).subquery("per")
    if att is not None:
        return _per_operation_with_attempts(ledger, att, ops_t, ep("expires_at"), lockwin, ac)
    parts = [ops_part]
    p = (union_all(*parts) if len(parts) > 1 else parts[0]).subquery("p")
    return (
        select(
            p.c.scope,
            p.c.key,
            func.max(p.c.kind).label("kind"),
            _least(func.min(p.c.t), func.min(p.c.t2)).label("first"),
            _greatest(func.max(p.c.t), func.max(p.c.t2)).label("last"),
            func.sum(p.c.rec).label("nrec"),
            func.sum(p.c.att).label("natt"),
            func.sum(p.c.miss).label("nmiss"),
            (func.count(p.c.t) + func.count(p.c.t2)).label("nt"),
            func.min(p.c.ex).label("ex"),
            func.min(p.c.cr).label("created"),
            func.max(p.c.dur).label("dur"),
            func.max(p.c.lockwin).label("lockwin"),
            func.max(p.c.ac).label("ac"),
        )
        .group_by(p.c.scope, p.c.key)
        .subquery("per")
    )


def _per_operation_with_attempts(ledger: Ledger, att, created, expires, lockwin, ac):
    """:func:`_per_operation` for a ledger with an attempts table: the records grouped by (scope, key)
    and the attempts grouped by (scope, key) each on their own, then joined. Each grouping can walk
    its table's (scope, key) index in order (SQLite then needs no sort at all); a UNION of both tables
    grouped at once had to sort every attempt row first (1M operations, 3M attempts: ~400 MB in
    SQLite's in-memory sorter). Attempts whose operation record is gone have no kind and are left out."""
    one: ColumnElement = literal_column("1")
    zero: ColumnElement = literal_column("0")
    nul = _nnull()
    scope, key = ledger.scope_expr, ledger.key_expr
    # No scope columns: the scope is the constant '' (PostgreSQL refuses a constant in GROUP BY)
    scoped = bool(ledger.layout.scope)
    og = (
        select(
            scope.label("scope"),
            key.label("key"),
            func.max(ledger.kind_expr).label("kind"),
            func.min(created).label("o_min"),
            func.max(created).label("o_max"),
            func.count().label("nrec"),
            func.sum(case((created.is_(None), one), else_=zero)).label("o_miss"),
            func.count(created).label("o_nt"),
            func.min(expires).label("ex"),
            func.max(lockwin).label("lockwin"),
            func.max(ac).label("ac"),
        )
        .select_from(ledger.ops)
        .group_by(*([scope] if scoped else []), key)
        .subquery("og")
    )
    start = ledger.att_epoch["started_at"]
    finish = ledger.att_epoch.get("finished_at")
    src = att.join(ledger.ops, ledger.att_join) if ledger.att_needs_join else att
    a_scope, a_key = ledger.att_scope_expr, ledger.att_key_expr
    ag = (
        select(
            a_scope.label("scope"),
            a_key.label("key"),
            func.min(start).label("a_min"),
            func.max(start).label("a_max"),
            func.count().label("natt"),
            func.sum(case((start.is_(None), one), else_=zero)).label("a_miss"),
            func.count(start).label("a_nt"),
            func.max((finish if finish is not None else nul) - start).label("dur"),
        )
        .select_from(src)
        .where(ledger.att_where)
        .group_by(*([a_scope] if scoped else []), a_key)
        .subquery("ag")
    )
    z = lambda c: func.coalesce(c, zero)  # noqa: E731 - an operation without attempts
    return (
        select(
            og.c.scope,
            og.c.key,
            og.c.kind,
            _least(og.c.o_min, ag.c.a_min).label("first"),
            _greatest(og.c.o_max, ag.c.a_max).label("last"),
            og.c.nrec,
            z(ag.c.natt).label("natt"),
            (og.c.o_miss + z(ag.c.a_miss)).label("nmiss"),
            (og.c.o_nt + z(ag.c.a_nt)).label("nt"),
            og.c.ex,
            og.c.o_min.label("created"),
            ag.c.dur,
            og.c.lockwin,
            og.c.ac,
        )
        .select_from(og.outerjoin(ag, (ag.c.scope == og.c.scope) & (ag.c.key == og.c.key)))
        .subquery("per")
    )


def _judged(ledger: Ledger, source: str, wsrc: str | None):
    """The per-operation rows with ``span`` (retried operations only), ``win`` (the operation's window),
    ``late_s`` (how long after its key expired the last request came; NULL when not late) and ``over``
    (1 when the span reached past the window or the operation came late)."""
    per = _per_operation(ledger, source, wsrc)
    lay = ledger.layout
    span_all = per.c.last - per.c.first
    if source == "attempts":
        retried = (per.c.natt >= 2) | (per.c.nrec >= 2)
    elif source == "last_attempt_at":
        retried = (per.c.nrec >= 2) | (per.c.ac >= 2) | (per.c.ac.is_(None) & (per.c.last > per.c.first))
    else:
        retried = per.c.nrec >= 2
    # A span needs two readable times: with one (the others missing or undecodable) it is unknown, not 0.
    span = case((retried & per.c.last.is_not(None) & (per.c.nt >= 2), span_all), else_=_nnull())
    if wsrc in ("expires_at", "ttl"):
        base = case((per.c.created.is_(None), per.c.first), else_=per.c.created)
        win = per.c.ex - base
        ex = per.c.ex
    elif wsrc == "retention":
        win = literal(float(ledger.retention_s or 0.0))
        ex = per.c.ex
    elif wsrc == "dedup_window":
        win = literal(float(lay.dedup_window_seconds or 0.0))
        ex = per.c.first + win
    else:
        win, ex = _nnull(), _nnull()
    late_s = case((per.c.last > ex, per.c.last - ex), else_=_nnull()) if wsrc else _nnull()
    over = case((late_s.is_not(None), 1), ((span.is_not(None)) & (span > win), 1), else_=0) if wsrc else literal(0)
    return select(
        per.c.scope,
        per.c.key,
        per.c.kind,
        span.label("span"),
        win.label("win"),
        late_s.label("late_s"),
        over.label("over"),
        case((per.c.nt == 0, 1), else_=0).label("unread"),
        case(((per.c.nt > 0) & (per.c.nmiss > 0), 1), else_=0).label("partly"),
        per.c.dur,
        per.c.lockwin,
    ).subquery("j")


def _kind_query(ledger: Ledger, j, exact: bool):
    aggs = [
        j.c.kind,
        func.count().label("n"),
        func.count(j.c.span).label("retried"),
        func.sum(j.c.over).label("over"),
        func.sum(case((j.c.span.is_not(None) & (j.c.over == 1), 1), else_=0)).label("over_r"),
        func.count(j.c.late_s).label("late"),
        func.max(j.c.late_s).label("late_max"),
        func.min(j.c.span).label("span_min"),
        func.max(j.c.span).label("span_max"),
        func.min(j.c.win).label("win_min"),
        func.max(j.c.win).label("win_max"),
        func.sum(j.c.unread).label("unread"),
        func.sum(j.c.partly).label("partly"),
        func.max(j.c.dur).label("dur_max"),
        func.max(j.c.lockwin).label("lock_max"),
    ]
    if exact:
        aggs += [
            func.percentile_cont(0.5).within_group(j.c.span).label("p50"),
            func.percentile_cont(0.99).within_group(j.c.span).label("p99"),
        ]
        return select(*aggs).group_by(j.c.kind)
    b = case((j.c.span.is_(None), null()), else_=_bucket(j.c.span)).label("b")
    return select(*aggs, b).group_by(j.c.kind, b)


class _Acc:
    """Per kind: the additive counts over its histogram rows, and the buckets."""

    def __init__(self):
        self.n = self.retried = self.over = self.over_r = self.late = self.unread = self.partly = 0
        self.late_max = self.span_max = self.win_min = self.win_max = self.dur_max = self.lock_max = None
        self.p50 = self.p99 = None
        self.buckets: list[tuple[int, int, float, float]] = []  # (bucket, count, min, max)

    def add(self, r) -> None:
        self.n += int(r.n or 0)
        self.retried += int(r.retried or 0)
        self.over += int(r.over or 0)
        self.over_r += int(r.over_r or 0)
        self.late += int(r.late or 0)
        self.unread += int(r.unread or 0)
        self.partly += int(r.partly or 0)
        self.late_max = _max(self.late_max, r.late_max)
        self.span_max = _max(self.span_max, r.span_max)
        self.win_min = _min(self.win_min, r.win_min)
        self.win_max = _max(self.win_max, r.win_max)
        self.dur_max = _max(self.dur_max, r.dur_max)
        self.lock_max = _max(self.lock_max, r.lock_max)
        m = r._mapping
        if "p50" in m:
            self.p50 = _f(m["p50"])
            self.p99 = _f(m["p99"])
        elif m.get("b") is not None and int(r.retried or 0):
            self.buckets.append((int(m["b"]), int(r.retried), _f(r.span_min) or 0.0, _f(r.span_max) or 0.0))

    def percentile(self, p: float) -> float | None:
        """``percentile_cont(p)`` from the buckets: the values at the two ranks around ``p × (n − 1)``
        interpolated linearly, each read inside its bucket between the bucket's min and max."""
        if self.p50 is not None or not self.buckets:
            return {0.5: self.p50, 0.99: self.p99}.get(p)
        bs = sorted(self.buckets)
        n = sum(c for _b, c, _lo, _hi in bs)
        h = p * (n - 1)
        lo_r, hi_r = math.floor(h), math.ceil(h)

        def at(rank: int) -> float:
            start = 0
            for _b, c, lo, hi in bs:
                if rank < start + c:
                    return lo if c == 1 else lo + (hi - lo) * (rank - start) / (c - 1)
                start += c
            return bs[-1][3]

        v_lo = at(lo_r)
        return _f(v_lo + (h - lo_r) * (at(hi_r) - v_lo))


def _f(v) -> float | None:
    # Milliseconds, as from_epoch reads instants: SQLite's julianday arithmetic is not exact below that.
    return round(float(v), 3) if v is not None else None


def _max(a, b):
    b = _f(b)
    return b if a is None else (a if b is None else max(a, b))


def _min(a, b):
    b = _f(b)
    return b if a is None else (a if b is None else min(a, b))


def measure_windows(ledger: Ledger, now: datetime | None = None) -> WindowsReport:
    """Measure every kind's dedup window against its retries (see the module doc and DESIGN §5.2).

    ``now`` (aware; default the current time, UTC) is recorded in the report (every retry and expiry
    compared is already in the ledger). Runs one grouped SQL statement in the ledger's engine; database
    errors propagate (``sqlalchemy.exc``). Returns a :class:`WindowsReport`."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    source, why = span_source(ledger)
    wsrc = window_source(ledger)
    exact = ledger.dialect == POSTGRESQL
    accs: dict[Any, _Acc] = {}
    with ledger.engine.connect() as c:
        if source is None:
            o = ledger.operations_select().subquery("o")
            has_win = "expires_at" in ledger.epoch and "created_at" in ledger.epoch
            has_ac = ledger.attempt_count_expr is not None
            # No spans to measure: the kinds, their operations, how many a counter says were retried,
            # and the windows the records keep (expiry minus creation); one record per key needs no
            # grouping by key.
            if ledger.key_unique:
                win = (o.c.expires_at_e - o.c.created_at_e) if has_win else _nnull()
                per = select(
                    o.c.kind.label("kind"), (o.c.attempt_count if has_ac else _nnull()).label("ac"), win.label("win")
                ).subquery("per")
            else:
                win = (func.min(o.c.expires_at_e) - func.min(o.c.created_at_e)) if has_win else _nnull()
                per = (
                    select(
                        func.max(o.c.kind).label("kind"),
                        (func.max(o.c.attempt_count) if has_ac else _nnull()).label("ac"),
                        win.label("win"),
                    )
                    .group_by(o.c.scope, o.c.key)
                    .subquery("per")
                )
            q = select(
                per.c.kind,
                func.count().label("n"),
                func.sum(case((per.c.ac >= 2, 1), else_=0)).label("retried"),
                func.min(per.c.win).label("win_min"),
                func.max(per.c.win).label("win_max"),
            ).group_by(per.c.kind)
            for r in c.execute(q):
                acc = accs.setdefault(r.kind, _Acc())
                acc.n += int(r.n or 0)
                acc.retried += int(r.retried or 0)
                acc.win_min, acc.win_max = _min(acc.win_min, r.win_min), _max(acc.win_max, r.win_max)
        else:
            j = _judged(ledger, source, wsrc)
            for r in c.execute(_kind_query(ledger, j, exact)):
                accs.setdefault(r.kind, _Acc()).add(r)
    groups = [_group(ledger, k, acc, source, why, wsrc) for k, acc in accs.items()]
    order = {TOO_SHORT: 0, UNKNOWN: 1, ENOUGH: 2}
    # a kind is text, but SQLite's dynamic typing can hand back a BLOB or a number for one: order by text
    groups.sort(key=lambda g: (order[g.verdict], g.kind is None, "" if g.kind is None else str(_kind_text(g.kind))))
    return WindowsReport(now, ledger.layout.name, groups, "percentile_cont" if exact else "histogram", source)


def _kind_text(kind: Any) -> Any:
    """A kind as text where SQLite's dynamic typing handed back a BLOB: its UTF-8 text, or the escaped
    form the grid shows when it is not UTF-8 (:func:`~idemview.ledger.rawtext.decode_text`), so it is
    masked and ordered like any text kind (it was printed as Python's ``b'...'``, unmasked, or crashed
    the ordering). Any other value unchanged (the group keeps the value it selects by)."""
    if isinstance(kind, (bytes, bytearray, memoryview)):
        return decode_text(bytes(kind))
    return kind


def _group(ledger: Ledger, kind, acc: _Acc, source, why, wsrc) -> WindowGroup:
    lay = ledger.layout
    g = WindowGroup(kind=kind, operations=acc.n, retried=acc.retried)
    g.window_source = wsrc
    if wsrc == "retention":
        g.window_s = g.window_min_s = ledger.retention_s
    elif wsrc == "dedup_window":
        g.window_s = g.window_min_s = lay.dedup_window_seconds
    elif wsrc is not None:
        g.window_s, g.window_min_s = acc.win_max, acc.win_min
    g.lock_timeout_s = ledger.lock_timeout_s if ledger.lock_timeout_s is not None else acc.lock_max
    if source is None:
        g.verdict, g.reason = UNKNOWN, why
        g.sentence = f"{_head(g)}; {why}: the retry span cannot be measured"
        return g
    g.p50, g.p99, g.max = acc.percentile(0.5), acc.percentile(0.99), acc.span_max
    if g.p99 is not None and g.max is not None:
        g.p99 = min(g.p99, g.max)
    g.late, g.late_max_s, g.over, g.over_retried = acc.late, acc.late_max, acc.over, acc.over_r
    g.unreadable, g.partly_unreadable = acc.unread, acc.partly
    g.longest_attempt_s = acc.dur_max
    g.suggested_window_s = suggest(g.max)
    if wsrc is None:
        g.verdict, g.reason = UNKNOWN, "the ledger keeps no dedup window (no expires_at, TTL or retention)"
    elif g.window_s is None:
        # The ledger keeps a window, but no record of this kind has one that can be read.
        g.window_source = None
        g.verdict, g.reason = UNKNOWN, f"no record of this kind has a readable expiry ({wsrc})"
    elif g.over or g.late:
        g.verdict = TOO_SHORT
    elif g.retried == 0:
        g.verdict, g.reason = UNKNOWN, "no operation of this kind was retried or replayed"
    else:
        g.verdict = ENOUGH
    if g.verdict == UNKNOWN and g.retried == 0:
        g.suggested_window_s = None
    g.notes = _notes(ledger, g, wsrc)
    g.sentence = _sentence(g)
    return g


def _notes(ledger: Ledger, g: WindowGroup, wsrc) -> list[str]:
    """What the layout knows beyond the window (issue #22, item 3)."""
    out = []
    lay = ledger.layout
    if g.lock_timeout_s is not None and g.longest_attempt_s is not None and g.longest_attempt_s > g.lock_timeout_s:
        out.append(
            f"the lock timeout ({duration_words(g.lock_timeout_s)}) is shorter than the longest attempt seen "
            f"({duration_words(g.longest_attempt_s)}): work outlived its lock, and another worker could take the "
            f"key and do it again (stuck, then duplicated)"
        )
    purge = None
    if wsrc in ("expires_at", "ttl") and ledger.retention_s is not None:
        purge = ledger.retention_s  # an expires_at column beside a retention: the retention is the purge
    elif wsrc == "retention" and lay.dedup_window_seconds is not None:
        purge = ledger.retention_s
        if purge is not None and purge < lay.dedup_window_seconds:
            out.append(
                f"records are purged {duration_words(purge)} after {lay.retention_from} but the declared dedup "
                f"window is {duration_words(lay.dedup_window_seconds)}: keys are forgotten before their window ends"
            )
        purge = None
    if purge is not None and g.window_s is not None and purge < g.window_s:
        out.append(
            f"records are purged after {duration_words(purge)} (retention) but the window is "
            f"{duration_words(g.window_s)}: keys are forgotten before their window ends"
        )
    return out


def _pct(part: int, whole: int) -> str:
    if whole <= 0:
        return "0 %"
    x = 100.0 * part / whole
    return "<1 %" if 0 < x < 1 else f"{round(x)} %"


def _head(g: WindowGroup) -> str:
    """``kind: window 1 h`` (a range when the operations' windows differ), or no window kept."""
    if g.window_s is None:
        return f"{g.label}: no dedup window kept"
    w = duration_words(g.window_s)
    if g.window_min_s is not None and duration_words(g.window_min_s) != w:
        w = f"{duration_words(g.window_min_s)} to {w}"
    return f"{g.label}: window {w}"


def _sentence(g: WindowGroup) -> str:
    """The one plain sentence of a group (e.g. "payments.capture: window 1 h; 4 % of retries came later,
    the latest 3 h 10 min after the first attempt; a 6 h window would have covered every retry seen")."""
    cover = (
        f"a {duration_words(g.suggested_window_s)} window would have covered every retry seen"
        if g.suggested_window_s is not None
        else ("even 90 d would not have covered every retry seen" if g.max is not None and g.retried else "")
    )
    head = _head(g)
    if g.verdict == TOO_SHORT:
        parts = [head]
        if g.over_retried and g.retried:
            parts.append(
                f"{_pct(g.over_retried, g.retried)} of retries came later, the latest {duration_words(g.max)} "
                f"after the first attempt"
            )
        if g.late:
            parts.append(
                f"{g.late} operation{'s' if g.late != 1 else ''} got a request after the key had expired, "
                f"up to {duration_words(g.late_max_s)} after"
            )
        if cover:
            parts.append(cover)
    elif g.verdict == ENOUGH:
        parts = [
            head,
            f"every retry came within it ({g.retried} retried, the latest {duration_words(g.max)} after the first "
            f"attempt, p99 {duration_words(g.p99)})",
        ]
        if cover:
            parts.append(cover)
    elif g.retried == 0:
        parts = [head, f"no retries seen among {g.operations} operation{'s' if g.operations != 1 else ''}"]
    else:
        parts = [
            head,
            f"retries came up to {duration_words(g.max)} after the first attempt (p99 {duration_words(g.p99)})",
        ]
        if g.suggested_window_s is not None:
            parts.append(f"a {duration_words(g.suggested_window_s)} window would cover every retry seen")
    if g.unreadable:
        parts.append(
            f"{g.unreadable} operation{'s' if g.unreadable != 1 else ''} could not be read (times missing or "
            f"undecodable)"
        )
    if g.partly_unreadable:
        n = g.partly_unreadable
        parts.append(f"{n} operation{'s' if n != 1 else ''} with some times missing or undecodable judged on the rest")
    return "; ".join(parts)


# ------------------------------------------------------------------------------ late operations


def late_operations(ledger: Ledger, kind: str | None, limit: int = 200) -> list[dict[str, Any]]:
    """The operations of ``kind`` (``None``: those without a kind) whose last request came after their
    key had expired, or whose retry span reached past their window, latest first, at most ``limit``:
    ``[{"scope", "key", "span_s", "late_s"}]`` (seconds). Empty when the ledger keeps no window or no
    attempt times. One grouped SQL statement; the list is bounded by ``limit``."""
    source, _why = span_source(ledger)
    wsrc = window_source(ledger)
    if source is None or wsrc is None:
        return []
    j = _judged(ledger, source, wsrc)
    q = select(j.c.scope, j.c.key, j.c.span, j.c.late_s).where(j.c.over == 1)
    q = q.where(j.c.kind.is_(None) if kind is None else j.c.kind == kind)
    q = q.order_by(func.coalesce(j.c.late_s, j.c.span).desc(), j.c.scope, j.c.key).limit(max(1, int(limit)))
    with ledger.engine.connect() as c:
        return [{"scope": r.scope, "key": r.key, "span_s": _f(r.span), "late_s": _f(r.late_s)} for r in c.execute(q)]


# ---------------------------------------------------------------------------------------- text


def render_text(report: WindowsReport, mask=lambda s: s) -> str:
    """The report as text for a terminal: a header, then per kind its verdict, figures, sentence and
    notes. ``mask(text)`` is applied to every piece that comes from the ledger (kinds, sentences)."""
    lines = [f"now      {iso(report.now)}", f"layout   {report.layout}", ""]
    if not report.groups:
        lines.append("no operations")
    for g in report.groups:
        lines.append(f"{mask(g.label)}  [{g.verdict}]" + (f" ({mask(g.reason)})" if g.reason else ""))
        span = (
            f"p50 {duration_words(g.p50)}, p99 {duration_words(g.p99)}, max {duration_words(g.max)}"
            if g.max is not None
            else "none"
        )
        lines.append(
            f"  window {duration_words(g.window_s) if g.window_s is not None else 'none'}"
            f" ({g.window_source or 'not kept'}); lock timeout "
            f"{duration_words(g.lock_timeout_s) if g.lock_timeout_s is not None else 'none'}"
        )
        lines.append(
            f"  {g.operations} operations, {g.retried} retried; retry span {span}; late {g.late}"
            + (f" (up to {duration_words(g.late_max_s)} after expiry)" if g.late else "")
            + "; suggested "
            + (duration_words(g.suggested_window_s) if g.suggested_window_s is not None else "none")
        )
        lines.append(f"  {g.masked_sentence(mask)}")
        for n in g.notes:
            lines.append(f"  note: {mask(n)}")
    return "\n".join(lines) + "\n"
