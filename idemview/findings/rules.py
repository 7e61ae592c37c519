"""One rule object per finding kind (DESIGN §5): what it needs from a layout, its SQL, and how its rows
become :class:`~idemview.domain.model.Finding` objects.

A rule is stateless; everything about one scan (the ledger, ``now``, the shared key profile) lives in
the :class:`~idemview.findings.engine.FindingEngine` passed to it as ``e``. Rules are listed, in report
order, by :mod:`idemview.findings.registry`; a new kind is a new :class:`FindingRule` subclass registered
there, never a new branch in the engine.

Definitions (DESIGN §5):

- ``duplicate_effect`` (critical): one (scope, key) with >= 2 succeeded attempts, or >= 2 distinct
  non-empty effect references (records and attempts together), or >= 2 completed records;
- ``replay_after_expiry`` (high; critical when the replay succeeded): an attempt, or a newer record of
  the same (scope, key), started after the key had expired (``expires_at``, or retention added to a time
  column); with a counter only, the record's ``last_attempt_at`` after its expiry;
- ``key_conflict`` (high): >= 2 distinct non-empty fingerprints under one (scope, key);
- ``duplicate_intent`` (high): one intent reference under >= 2 keys in one scope, both completed and
  created within one dedup window; reported on the later key (the freshly minted one);
- ``stuck_in_progress`` (medium): status in_progress and lock expired (``lock_expires_at <= now`` or
  ``locked_at + lock timeout <= now``);
- ``unresolved_failure`` (medium): status failed, and no completed record of the same key or intent
  created at or after it;
- ``retry_storm`` (low): attempt count above the threshold (default 5);
- ``expired_key`` (info): expiry <= now and the record still present.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from typing import TYPE_CHECKING, ClassVar

from sqlalchemy import (
    and_,
    case,
    distinct,
    func,
    literal_column,
    null,
    or_,
    select,
    true,
    tuple_,
    union,
    union_all,
)
from sqlalchemy.sql.expression import ColumnElement, Select

from idemview.domain.model import Finding, FindingKind, Severity
from idemview.findings import explain
from idemview.findings.common import (
    KeyRow,
    as_int,
    dedupe,
    ev_sort,
    in_keys,
    jsonable,
    key_batches,
    nonempty,
    parse_iso,
    two_distinct,
)
from idemview.ledger.dialects import MYSQL, POSTGRESQL, family
from idemview.ledger.intent_sql import intent_blank
from idemview.ledger.reader import Ledger
from idemview.ledger.sqlx import intent_parts, time_before
from idemview.ledger.times import from_epoch, iso

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy.engine import Connection

    from idemview.findings.engine import FindingEngine

K = FindingKind

DEFAULT_DEDUP_WINDOW_S = 86400.0


class FindingRule:
    """One finding kind.

    - ``kind``: the :class:`~idemview.domain.kinds.FindingKind` it reports (its words, labels, hints);
    - ``severity``: how bad it is by default, taken from ``kind.severity`` unless the class sets it (a
      rule may raise it per finding, as ``replay_after_expiry`` does when the replay succeeded);
    - ``profile_flag``: the flag of the shared one-pass key profile
      (:meth:`FindingEngine.q_key_profile`) that lists this kind's candidate keys, or ``None``;
    - :meth:`not_checkable`: why a ledger cannot have or show this kind (``None``: checkable);
    - :meth:`selects`: the SQL, selects of at least ``scope, key`` (used as key sets by filters);
    - :meth:`run`: executes it on a connection and shapes the rows into findings.
    """

    kind: ClassVar[FindingKind]
    severity: ClassVar[Severity]
    profile_flag: ClassVar[str | None] = None
    #: Where a finding filter gets this kind's operations: ``"sql"`` (:meth:`selects`) or ``"effects"``
    #: (only the effect reconciler knows them: :mod:`idemview.findings.keysets`).
    key_source: ClassVar[str] = "sql"

    def __init_subclass__(cls, **kw):
        # The default severity is the kind's (FindingKind.severity): one place, DEFAULT_SEVERITY agrees.
        super().__init_subclass__(**kw)
        if "kind" in cls.__dict__ and "severity" not in cls.__dict__:
            cls.severity = cls.kind.severity

    def not_checkable(self, ledger: Ledger) -> str | None:
        """Why this kind cannot be checked (or cannot occur) on ``ledger``, in plain words; ``None``
        when it can."""
        return None

    def selects(self, e: FindingEngine) -> list[Select]:
        """The selects whose ``scope, key`` rows are the operations with this kind (empty when the
        layout cannot express it)."""
        raise NotImplementedError

    def run(self, e: FindingEngine, c: Connection) -> list[Finding]:
        """The findings of this kind, read on connection ``c``."""
        raise NotImplementedError

    # A kind that is a plain row filter over the operations table can share one pass with the other
    # such kinds (FindingEngine.run folds their conditions into one scan, issue 11).

    def row_filter(self, e: FindingEngine) -> RowFilter | None:
        """This kind as a filter over the operations table (``None``: it is not one)."""
        return None

    def shape(self, e: FindingEngine, rows) -> list[Finding]:
        """Findings from the rows of :meth:`row_filter` (objects with its columns as attributes)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind.value}>"


class RowFilter:
    """A kind as "rows of the operations table where ``cond``": ``cols`` (label -> expression) are the
    columns its :meth:`FindingRule.shape` reads; ``index_cols`` the columns whose index would serve
    ``cond`` on its own (such a kind is better run alone than folded into a whole-table pass)."""

    __slots__ = ("cond", "cols", "index_cols")

    def __init__(self, cond, cols: dict, index_cols: list[str]):
        self.cond, self.cols, self.index_cols = cond, cols, index_cols

    def select(self, l: Ledger) -> Select:
        """The kind's own select (scope, key and ``cols``) over the operations table."""
        return (
            select(l.scope_expr.label("scope"), l.key_expr.label("key"), *[x.label(n) for n, x in self.cols.items()])
            .select_from(l.ops)
            .where(self.cond)
        )


def _status_cols(l: Ledger) -> list[str]:
    s = l.layout.status
    return [s.column] if s.column and not s.rules and s.literal is None else []


def _fetch(c, qs: list[Select]) -> list:
    out: list = []
    for q in qs:
        out.extend(c.execute(q).fetchall())
    return out


class IntentKey:
    """How records are compared by intent (``duplicate_intent``, ``unresolved_failure``).

    - ``parts``: expressions over the operations table whose equality, all of them, is equality of the
      intent reference: for ``intent_ref = {hash = [...]}`` the columns themselves
      (:func:`idemview.ledger.sqlx.intent_parts`), else the reference (:attr:`Ledger.intent_expr`);
    - ``flag``: 1 where the record has an intent reference (neither NULL nor ''), else 0, without
      computing the reference.

    Grouping 2M Celery rows by name, args and kwargs costs 0.97 s CPU on SQLite against 2.60 s by their
    concatenation (1M rows: 0.4 s against 1.3 s per 1M), and on PostgreSQL spares an ``md5`` of the hex
    of every row. Where the parts and the reference disagree the parts are right (DESIGN §5: one
    intent is one call): the reference merges different splits of one text (a value holding the
    separator 0x1F) and, on PostgreSQL, a NULL column moved to another position (``concat_ws`` skips
    NULLs), and keeps NULL apart from '' there (elsewhere a NULL column counts as '')."""

    def __init__(self, l: Ledger, parts: list, flag, hashed=None):
        self.l, self.parts, self.flag = l, parts, flag
        #: a 64-bit hash of the parts (``ik_h``; PostgreSQL 14+), or None: equal parts, equal hash
        self.hashed = hashed

    def subquery(self, name: str):
        """:meth:`Ledger.operations_select` plus the parts (``ik0``, ``ik1``, ...) and ``ik_ok`` (1
        where the record has an intent), as subquery ``name``. Unused columns cost nothing: the
        engines flatten the subquery."""
        extra = [p.label(f"ik{i}") for i, p in enumerate(self.parts)] + [self.flag.label("ik_ok")]
        if self.hashed is not None:
            extra.append(self.hashed.label("ik_h"))
        return self.l.operations_select().add_columns(*extra).subquery(name)

    def cols(self, sub) -> list:
        """The part columns of a :meth:`subquery` (or of a select of them)."""
        return [sub.c[f"ik{i}"] for i in range(len(self.parts))]

    def same(self, a, b):
        """Records ``a`` and ``b`` (subqueries with the part columns) have the same intent."""
        return and_(*[x == y for x, y in zip(self.cols(a), self.cols(b), strict=True)])


def intent_key(l: Ledger) -> IntentKey | None:
    """The :class:`IntentKey` of ``l``'s layout, ``None`` when it maps no intent reference."""
    f = l.layout.fields.get("intent_ref")
    if f is None:
        return None
    one: ColumnElement = literal_column("1")
    zero: ColumnElement = literal_column("0")
    if not f.hash or not INTENT_BY_PARTS:
        return IntentKey(l, [l.intent_expr], case((nonempty(l.intent_expr), one), else_=zero))
    t = l.ops
    parts = intent_parts([t.c[c] for c in f.hash], l.dialect)
    # 0 exactly where the reference is NULL: intent_hash's CASE, then the layout's `unless` guard (CASE
    # WHEN: a guard that is NULL leaves the reference, as there)
    guards = [g for g in [intent_blank([t.c[c] for c in f.unless_empty], l.dialect)] if g is not None]
    guards += [l.predicate(t, p) for p in f.unless]
    whens = [(or_(*guards), zero)] if guards else []
    if len(parts) == 1 and family(l.dialect) not in (POSTGRESQL, MYSQL):
        # one column, no separator: the reference is '' where the column is NULL or '' (an md5 never is)
        whens.append((parts[0] == "", zero))
    return IntentKey(l, parts, case(*whens, else_=one) if whens else one, _parts_hash(l, parts))


def _parts_hash(l: Ledger, parts: list):
    """PostgreSQL 14+: ``hash_record_extended(ROW(parts), 0)``, a bigint. Grouping 2M Celery rows by
    it takes 2.5 s against 4.5-5.2 s by the three columns (the parallel workers' sorted groups, all
    distinct, are merged by the leader: eight bytes a row instead of a hundred)."""
    if family(l.dialect) != POSTGRESQL or len(parts) < 2:
        return None
    version = getattr(l.engine.dialect, "server_version_info", None)
    if version is None:
        try:
            with l.engine.connect() as c:  # the dialect learns the server's version on first connect
                version = c.dialect.server_version_info
        except Exception:  # noqa: BLE001 - no hash then: the parts alone give the same findings
            return None
    version = version or (0,)
    if version < (14,):
        return None
    return func.hash_record_extended(func.row(*parts), literal_column("0"))


#: Compare records by the intent's columns (True) or by the joined reference (False: the comparison
#: before issue 27, kept for the tests that compare both on planted ledgers).
INTENT_BY_PARTS = True


# ----------------------------------------------------------------------------------------- kinds


class DuplicateEffect(FindingRule):
    kind = K.DUPLICATE_EFFECT
    profile_flag = "de"

    def not_checkable(self, ledger):
        if getattr(ledger, "effects", None) is not None:
            return None  # two effect records downstream are possible whatever the ledger's constraints
        if ledger.key_unique and ledger.att is None:
            return (
                f"the ledger keeps one record per key ({ledger.key_unique}) and no attempts table: "
                f"no key can have two completed records, two successful attempts or two effects"
            )
        return None

    def selects(self, e):
        l = e.l
        o = e.ops()
        parts = []
        # >= 2 completed records of one (scope, key)
        parts.append(
            select(o.c.scope, o.c.key)
            .where(l.status_in(["completed"], o))
            .group_by(o.c.scope, o.c.key)
            .having(func.count() >= 2)
        )
        eff = [select(o.c.scope, o.c.key, o.c.effect_ref.label("eff")).where(nonempty(o.c.effect_ref))]
        a = e.atts()
        if a is not None:
            parts.append(
                select(a.c.scope, a.c.key)
                .where(a.c.outcome == "succeeded")
                .group_by(a.c.scope, a.c.key)
                .having(func.count() >= 2)
            )
            eff.append(select(a.c.scope, a.c.key, a.c.effect_ref.label("eff")).where(nonempty(a.c.effect_ref)))
        ef = union_all(*eff).subquery("e") if len(eff) > 1 else eff[0].subquery("e")
        parts.append(select(ef.c.scope, ef.c.key).group_by(ef.c.scope, ef.c.key).having(two_distinct(ef.c.eff)))
        return [union(*parts)]

    def run(self, e, c):
        out = self._run_ledger(e, c)
        if getattr(e.l, "effects", None) is not None:
            # >= 2 effect records downstream: joined to the ledger's own finding for the same operation
            from idemview.findings.effects import Reconciler, merge_effect_findings

            rec = Reconciler(e.l, e.now)
            out = merge_effect_findings(out, _in_filter(e, c, rec.run([self.kind])), rec.dup_reasons)
        return out

    def _run_ledger(self, e, c):
        keys = None
        if not (e.l.key_unique and e.l.att is None):  # see not_checkable: the ledger alone cannot have one
            keys = e.profile_keys(self.profile_flag)
            if keys is None:
                keys = {(r.scope, r.key) for r in _fetch(c, e.restrict(self.selects(e)))}
        if not keys:
            return []
        # Evidence is read for the found keys only (through the key index), not by re-running the query.
        ev: dict = defaultdict(list)
        o = e.ops()
        a = e.atts()
        for batch in key_batches(keys):
            rows = c.execute(
                select(o.c.scope, o.c.key, o.c.rid, o.c.status, o.c.raw_status, o.c.effect_ref, o.c.created_at_e).where(
                    in_keys(o.c.scope, o.c.key, batch), or_(o.c.status == "completed", nonempty(o.c.effect_ref))
                )
            ).fetchall()
            for r in rows:
                ev[(r.scope, r.key)].append(
                    {
                        "record": jsonable(r.rid),
                        "status": r.status,
                        "effect_ref": r.effect_ref,
                        "created_at": iso(from_epoch(r.created_at_e)),
                    }
                )
            if a is None:
                continue
            rows = c.execute(
                select(a.c.scope, a.c.key, a.c.number, a.c.outcome, a.c.effect_ref, a.c.started_at_e).where(
                    in_keys(a.c.scope, a.c.key, batch), or_(a.c.outcome == "succeeded", nonempty(a.c.effect_ref))
                )
            ).fetchall()
            for r in rows:
                ev[(r.scope, r.key)].append(
                    {
                        "attempt": as_int(r.number),
                        "outcome": r.outcome,
                        "effect_ref": r.effect_ref,
                        "started_at": iso(from_epoch(r.started_at_e)),
                    }
                )
        out = []
        for scope, key in keys:
            items = sorted(ev[(scope, key)], key=ev_sort)
            expl = explain.duplicate_effect(scope, key, items)
            at = next(
                (x.get("started_at") or x.get("created_at") for x in items if x.get("outcome") == "succeeded"), None
            )
            if at is None:
                # no attempt rows (a counter ledger: pg-boss, Oban): when the second completed record
                # was created, i.e. when the work ran again (found by a tester: the time was empty)
                done = [x["created_at"] for x in items if x.get("status") == "completed" and x.get("created_at")]
                at = (
                    done[1]
                    if len(done) >= 2
                    else next((x.get("created_at") for x in items if x.get("created_at")), None)
                )
            out.append(Finding(self.kind, self.severity, scope, key, expl, items, at=parse_iso(at)))
        return out


class ReplayAfterExpiry(FindingRule):
    kind = K.REPLAY_AFTER_EXPIRY
    profile_flag = "rp"

    def not_checkable(self, ledger):
        if "expires_at" not in ledger.epoch:
            return "the ledger keeps no expiry and the layout sets no retention"
        if ledger.att is None and "last_attempt_at" not in ledger.epoch and ledger.layout.row_id is None:
            return "no attempt times and no row identity to tell records apart"
        if ledger.att is None and "last_attempt_at" not in ledger.epoch and ledger.key_unique:
            return (
                f"the ledger keeps one record per key ({ledger.key_unique}) and no attempt times: "
                f"no later request for an expired key can be seen"
            )
        return None

    def selects(self, e, keys=None) -> list[Select]:
        """The replay selects; with ``keys`` (a list of (scope, key)) restricted to those operations."""
        l, lay = e.l, e.l.layout
        if "expires_at" not in l.epoch:
            return []
        out = []
        o = e.ops()
        a = e.atts()
        if a is not None:
            # An attempt that started after a record of its key had expired.
            out.append(
                select(
                    a.c.scope,
                    a.c.key,
                    a.c.number,
                    a.c.outcome.label("outcome"),
                    a.c.started_at_e.label("at_e"),
                    func.min(o.c.expires_at_e).label("expires_e"),
                    literal_column("'attempt'").label("what"),
                )
                .select_from(a.join(o, and_(a.c.scope == o.c.scope, a.c.key == o.c.key)))
                .where(
                    a.c.started_at_e > o.c.expires_at_e,
                    in_keys(a.c.scope, a.c.key, keys) if keys is not None else true(),
                )
                .group_by(a.c.scope, a.c.key, a.c.number, a.c.outcome, a.c.started_at_e)
            )
        if lay.row_id is not None and "created_at" in l.epoch and not l.key_unique:
            # A newer record of the same key created after an older one had expired (impossible, and
            # a whole-table self-join saved, when the schema keeps one record per key).
            o2 = l.operations_select().subquery("o2")
            out.append(
                select(
                    o2.c.scope,
                    o2.c.key,
                    null().label("number"),
                    case(
                        (o2.c.status == "completed", literal_column("'succeeded'")), else_=literal_column("'unknown'")
                    ).label("outcome"),
                    o2.c.created_at_e.label("at_e"),
                    func.min(o.c.expires_at_e).label("expires_e"),
                    literal_column("'record'").label("what"),
                )
                .select_from(o2.join(o, and_(o2.c.scope == o.c.scope, o2.c.key == o.c.key, o2.c.rid != o.c.rid)))
                .where(
                    o2.c.created_at_e > o.c.expires_at_e,
                    in_keys(o2.c.scope, o2.c.key, keys) if keys is not None else true(),
                )
                .group_by(o2.c.scope, o2.c.key, o2.c.status, o2.c.created_at_e)
            )
        if a is None and "last_attempt_at" in l.epoch:
            out.append(
                select(
                    o.c.scope,
                    o.c.key,
                    o.c.attempt_count.label("number"),
                    case(
                        (o.c.status == "completed", literal_column("'succeeded'")), else_=literal_column("'unknown'")
                    ).label("outcome"),
                    o.c.last_attempt_at_e.label("at_e"),
                    o.c.expires_at_e.label("expires_e"),
                    literal_column("'last_run'").label("what"),
                ).where(
                    o.c.last_attempt_at_e > o.c.expires_at_e,
                    in_keys(o.c.scope, o.c.key, keys) if keys is not None else true(),
                )
            )
        return out

    def run(self, e, c):
        by: dict = defaultdict(list)
        cand = e.profile_keys(self.profile_flag)
        if cand is not None:
            qs = [q for batch in key_batches(cand) for q in self.selects(e, batch)]
        else:
            qs = e.restrict(self.selects(e))
        for q in qs:
            for r in c.execute(q):
                by[(r.scope, r.key)].append(r)
        out = []
        for (scope, key), rows in by.items():
            rows.sort(key=lambda r: (r.at_e or 0, r.what))
            succeeded = any(r.outcome == "succeeded" for r in rows)
            ev = [
                {
                    "replay": r.what,
                    "attempt": as_int(r.number),
                    "outcome": r.outcome,
                    "started_at": iso(from_epoch(r.at_e)),
                    "key_expired_at": iso(from_epoch(r.expires_e)),
                }
                for r in rows
            ]
            first = rows[0]
            expl = explain.replay_after_expiry(scope, key, ev)
            out.append(
                Finding(
                    self.kind,
                    Severity.CRITICAL if succeeded else self.severity,
                    scope,
                    key,
                    expl,
                    ev,
                    at=from_epoch(first.at_e),
                )
            )
        return out


class KeyConflict(FindingRule):
    kind = K.KEY_CONFLICT
    profile_flag = "kc"

    def not_checkable(self, ledger):
        fp_att = ledger.att is not None and ledger.layout.attempts.fingerprint
        if "fingerprint" not in ledger.layout.fields and not fp_att:
            return "the layout maps no fingerprint"
        if ledger.key_unique and not fp_att:
            return (
                f"the ledger keeps one record per key ({ledger.key_unique}) and no attempt "
                f"fingerprints: a key cannot carry two fingerprints"
            )
        return None

    def selects(self, e):
        lay = e.l.layout
        srcs = []
        o = e.ops()
        if "fingerprint" in lay.fields:
            srcs.append(select(o.c.scope, o.c.key, o.c.fingerprint.label("fp")).where(nonempty(o.c.fingerprint)))
        a = e.atts()
        if a is not None and lay.attempts.fingerprint:
            srcs.append(select(a.c.scope, a.c.key, a.c.fingerprint.label("fp")).where(nonempty(a.c.fingerprint)))
        if not srcs:
            return []
        f = (union_all(*srcs) if len(srcs) > 1 else srcs[0]).subquery("f")
        return [select(f.c.scope, f.c.key).group_by(f.c.scope, f.c.key).having(two_distinct(f.c.fp))]

    def run(self, e, c):
        cand = e.profile_keys(self.profile_flag)
        if cand is not None:
            rows = [KeyRow(s_, k_) for s_, k_ in cand]
        else:
            rows = _fetch(c, e.restrict(self.selects(e)))
        if not rows:
            return []
        fps: dict = defaultdict(set)
        o = e.ops()
        a = e.atts() if e.l.layout.attempts.fingerprint else None
        for batch in key_batches({(r.scope, r.key) for r in rows}):
            if "fingerprint" in e.l.layout.fields:
                for r in c.execute(
                    select(o.c.scope, o.c.key, o.c.fingerprint).where(
                        in_keys(o.c.scope, o.c.key, batch), nonempty(o.c.fingerprint)
                    )
                ):
                    fps[(r.scope, r.key)].add(r.fingerprint)
            if a is not None:
                for r in c.execute(
                    select(a.c.scope, a.c.key, a.c.fingerprint).where(
                        in_keys(a.c.scope, a.c.key, batch), nonempty(a.c.fingerprint)
                    )
                ):
                    fps[(r.scope, r.key)].add(r.fingerprint)
        out = []
        for r in rows:
            ev = [{"fingerprint": x} for x in sorted(fps[(r.scope, r.key)])]
            out.append(Finding(self.kind, self.severity, r.scope, r.key, explain.key_conflict(r.scope, r.key, ev), ev))
        return out


class DuplicateIntent(FindingRule):
    kind = K.DUPLICATE_INTENT

    def not_checkable(self, ledger):
        if "intent_ref" not in ledger.layout.fields:
            return "the layout maps no intent reference"
        return None

    def selects(self, e):
        l, lay = e.l, e.l.layout
        ik = intent_key(l)
        if ik is None:
            return []
        window = (
            l.retention_s
            if l.retention_s is not None
            else (lay.dedup_window_seconds if lay.dedup_window_seconds is not None else DEFAULT_DEDUP_WINDOW_S)
        )
        # Two steps so the pairwise part stays small: first the (scope, intent) groups holding more than
        # one completed key (one grouped pass), then the pairs within those groups only. A direct
        # self-join of the whole ledger is quadratic on engines that cannot index a derived table.
        # Records are compared by the intent's parts (IntentKey): the reference itself, a concatenation
        # or md5 of several columns, is built only for the records of a found group (evidence).
        o = ik.subquery("o")
        # With one record per key, two completed records of a group are two keys: count(*) spares the
        # sorter carrying every key (SQLite: 0.97 s against 1.33 s CPU at 1M Celery rows).
        two_keys = func.count() >= 2 if l.key_unique else two_distinct(o.c.key)
        grouped = select(o.c.scope, *ik.cols(o)).where(l.status_in(["completed"], o), o.c.ik_ok == 1)
        if ik.hashed is not None:
            # a group has two keys only if its hash has: the (few) records of such hashes are grouped
            # by their parts, the others only by a bigint
            oh = ik.subquery("oh")
            hashes = (
                select(oh.c.scope, oh.c.ik_h)
                .where(l.status_in(["completed"], oh), oh.c.ik_ok == 1)
                .group_by(oh.c.scope, oh.c.ik_h)
                .having(func.count() >= 2 if l.key_unique else two_distinct(oh.c.key))
            )
            grouped = grouped.where(tuple_(o.c.scope, o.c.ik_h).in_(hashes))
        cand = grouped.group_by(o.c.scope, *ik.cols(o)).having(two_keys).cte("intent_groups")
        ob = ik.subquery("ob")
        # a ledger without a creation time (Celery's celery_taskmeta) is timed by its last update
        when = ob.c.created_at_e if "created_at" in l.epoch or "updated_at" not in l.epoch else ob.c.updated_at_e
        records = select(ob.c.scope, ob.c.key, ob.c.intent_ref, when.label("created_at_e"), *ik.cols(ob))
        if _intent_indexed(l):
            # each group's records through the intent column's index
            records = records.join(cand, and_(cand.c.scope == ob.c.scope, ik.same(cand, ob))).where(
                l.status_in(["completed"], ob), ob.c.ik_ok == 1
            )
        else:
            # One pass over the table probing the groups (IN), not the table read once per group
            # (SQLite nests a join to an expression that way); the EXISTS is evaluated once and
            # spares that pass when no group has two keys (the usual ledger).
            records = records.where(
                select(literal_column("1")).select_from(cand).exists(),
                l.status_in(["completed"], ob),
                ob.c.ik_ok == 1,
                tuple_(ob.c.scope, *ik.cols(ob)).in_(select(cand.c.scope, *ik.cols(cand))),
            )
        base = records.cte("intent_pairs")
        o1, o2 = base.alias("o1"), base.alias("o2")
        earlier = or_(
            o1.c.created_at_e < o2.c.created_at_e, and_(o1.c.created_at_e == o2.c.created_at_e, o1.c.key < o2.c.key)
        )
        return [
            select(
                o2.c.scope,
                o2.c.key,
                o2.c.intent_ref,
                func.min(o1.c.key).label("first_key"),
                func.count(distinct(o1.c.key)).label("n_other"),
                o2.c.created_at_e,
                func.min(o1.c.created_at_e).label("first_e"),
            )
            .select_from(o2.join(o1, and_(o1.c.scope == o2.c.scope, ik.same(o1, o2), o1.c.key != o2.c.key)))
            .where(earlier, o2.c.created_at_e - o1.c.created_at_e <= window)
            .group_by(o2.c.scope, o2.c.key, o2.c.intent_ref, o2.c.created_at_e, *ik.cols(o2))
        ]

    def run(self, e, c):
        out = []
        for r in _fetch(c, e.restrict(self.selects(e))):
            ev = [
                {
                    "intent_ref": r.intent_ref,
                    "earlier_key": r.first_key,
                    "earlier_created_at": iso(from_epoch(r.first_e)),
                    "created_at": iso(from_epoch(r.created_at_e)),
                    "keys_with_intent": int(r.n_other) + 1,
                }
            ]
            expl = explain.duplicate_intent(r.scope, r.key, ev)
            out.append(Finding(self.kind, self.severity, r.scope, r.key, expl, ev, at=from_epoch(r.created_at_e)))
        return out


class StuckInProgress(FindingRule):
    kind = K.STUCK_IN_PROGRESS

    def not_checkable(self, ledger):
        tc = set(ledger.time_cols)
        if not ({"lock_expires_at", "locked_at"} & tc) or (
            "lock_expires_at" not in ledger.epoch and ledger.lock_timeout_s is None
        ):  # ledger.epoch also holds a lock end derived from the row's own limit (lock_timeout_column)
            return "the ledger keeps no lock time (or no lock timeout is set)"
        return None

    def row_filter(self, e):
        l = e.l
        expired = l.lock_expired(e.now)
        if expired is None:
            return None
        return RowFilter(
            and_(l.status_in(["in_progress"]), expired),
            {
                "locked_e": l.epoch.get("locked_at", null()),
                "lock_exp_e": l.epoch.get("lock_expires_at", null()),
                "raw_status": l.raw_status_expr,
            },
            _status_cols(l),
        )

    def selects(self, e):
        rf = self.row_filter(e)
        return [rf.select(e.l)] if rf is not None else []

    def run(self, e, c):
        return self.shape(e, _fetch(c, e.restrict(self.selects(e))))

    def shape(self, e, rows):
        out = []
        for r in rows:
            lock_end = r.lock_exp_e
            if lock_end is None and r.locked_e is not None and e.l.lock_timeout_s is not None:
                lock_end = r.locked_e + e.l.lock_timeout_s
            ev = [
                {
                    "raw_status": jsonable(r.raw_status),
                    "locked_at": iso(from_epoch(r.locked_e)),
                    "lock_expired_at": iso(from_epoch(lock_end)),
                }
            ]
            expl = explain.stuck_in_progress(r.scope, r.key, ev, e.now)
            out.append(Finding(self.kind, self.severity, r.scope, r.key, expl, ev, at=from_epoch(lock_end)))
        return dedupe(out)


class UnresolvedFailure(FindingRule):
    kind = K.UNRESOLVED_FAILURE

    def selects(self, e):
        l = e.l
        ik = intent_key(l)
        o = ik.subquery("o") if ik is not None else e.ops()
        o2 = ik.subquery("o2") if ik is not None else l.operations_select().subquery("o2")
        later = or_(o2.c.created_at_e >= o.c.created_at_e, o2.c.created_at_e.is_(None), o.c.created_at_e.is_(None))
        # With one record per key (declared unique) the only record of the key is the failed one
        # itself: the same-key anti-join cannot match, and is left out (it cost a probe per failure).
        same = [] if l.key_unique else [and_(o2.c.scope == o.c.scope, o2.c.key == o.c.key)]
        if ik is not None:
            same.append(and_(o.c.ik_ok == 1, o2.c.ik_ok == 1, o2.c.scope == o.c.scope, ik.same(o2, o)))
        # NOT EXISTS (same key) AND NOT EXISTS (same intent), not NOT EXISTS (key OR intent): each is
        # then an anti-join the key or intent index serves (PostgreSQL cannot turn an OR into one and
        # re-scans the table for every failed record).
        unresolved = [
            ~select(literal_column("1")).select_from(o2).where(l.status_in(["completed"], o2), later, cond).exists()
            for cond in same
        ]
        failed = l.status_in(["failed"], o)
        # An intent no index serves: SQLite and the MySQL family would probe the whole table per failed
        # record; PostgreSQL hashes every completed record for its anti-join (3.2-4.6 s against 2.2 s
        # for the grouped form at 2M Celery rows, comparing the intent's columns; by their md5 the
        # anti-join had been the faster, 7.8 s against 14.3 s).
        if ik is not None and not _intent_indexed(l):
            unresolved.pop()
            q = self._grouped(l, ik, o, failed)
            return [q.where(*unresolved)]
        return [select(o.c.scope, o.c.key, o.c.created_at_e, o.c.raw_status).where(failed, *unresolved)]

    @staticmethod
    def _grouped(l: Ledger, ik: IntentKey, o, failed) -> Select:
        """The failures of ``o`` no completed record of their intent resolves, as one grouped pass.

        An intent no index serves (Celery's name + args + kwargs, a JSON path): a correlated NOT
        EXISTS reads the whole table once per failed record (2,000 failures x 2M rows). Instead one
        grouped pass over the completed records whose intent some failure shares, joined back: a
        failure is resolved by a completed record of its intent created at or after it (or with either
        time unknown), exactly the NOT EXISTS of :meth:`selects`."""
        o3, f = ik.subquery("o3"), ik.subquery("f")
        failed_intents = select(f.c.scope, *ik.cols(f)).where(l.status_in(["failed"], f), f.c.ik_ok == 1)
        g = (
            select(
                o3.c.scope,
                *ik.cols(o3),
                func.max(o3.c.created_at_e).label("mx"),
                func.sum(case((o3.c.created_at_e.is_(None), 1), else_=0)).label("nn"),
                func.count().label("n"),
            )
            .where(
                l.status_in(["completed"], o3),
                o3.c.ik_ok == 1,
                tuple_(o3.c.scope, *ik.cols(o3)).in_(failed_intents),
            )
            .group_by(o3.c.scope, *ik.cols(o3))
            .subquery("g")
        )
        joined = o.outerjoin(g, and_(o.c.ik_ok == 1, g.c.scope == o.c.scope, ik.same(g, o)))
        open_intent = or_(g.c.n.is_(None), and_(g.c.nn == 0, o.c.created_at_e.is_not(None), g.c.mx < o.c.created_at_e))
        q = select(o.c.scope, o.c.key, o.c.created_at_e, o.c.raw_status).select_from(joined)
        return q.where(failed, open_intent)

    def row_filter(self, e):
        # A plain filter only when no anti-join is left: one record per key and no intent reference.
        l = e.l
        if not l.key_unique or "intent_ref" in l.layout.fields:
            return None
        return RowFilter(
            l.status_in(["failed"]),
            {"created_at_e": l.epoch.get("created_at", null()), "raw_status": l.raw_status_expr},
            _status_cols(l),
        )

    def run(self, e, c):
        return self.shape(e, _fetch(c, e.restrict(self.selects(e))))

    def shape(self, e, rows):
        out = []
        for r in rows:
            ev = [{"raw_status": jsonable(r.raw_status), "created_at": iso(from_epoch(r.created_at_e))}]
            expl = explain.unresolved_failure(r.scope, r.key, ev)
            out.append(Finding(self.kind, self.severity, r.scope, r.key, expl, ev, at=from_epoch(r.created_at_e)))
        return dedupe(out)


def indexed_leading(t) -> set[str]:
    """Lower-cased names of the columns that lead an index (or the primary key) of table ``t``."""
    out = set()
    if t.primary_key is not None and len(t.primary_key.columns):
        out.add(list(t.primary_key.columns)[0].name.lower())
    for ix in t.indexes:
        cols = list(ix.columns)
        if cols:
            out.add(cols[0].name.lower())
    for con in t.constraints:
        cols = list(getattr(con, "columns", []))
        if cols and type(con).__name__ == "UniqueConstraint":
            out.add(cols[0].name.lower())
    return out


def _intent_indexed(l: Ledger) -> bool:
    """The intent reference is a plain column of the operations table that leads an index (then a
    NOT EXISTS per failed record is an index probe)."""
    f = l.layout.fields.get("intent_ref")
    if f is None or not f.column or f.json_path or f.hash:
        return False
    return f.column.lower() in indexed_leading(l.ops)


class RetryStorm(FindingRule):
    kind = K.RETRY_STORM

    def not_checkable(self, ledger):
        if ledger.attempt_count_expr is None and ledger.att is None and ledger.layout.attempts.source != "json_array":
            return "the ledger keeps no attempt count"
        return None

    def row_filter(self, e):
        ac = e.l.layout.fields.get("attempt_count")
        if e.l.att is not None and ac is not None and ac.unless:
            return None  # records without a counter count their attempt rows: selects() reads both
        return self._counter_filter(e)

    def _counter_filter(self, e):
        l = e.l
        if l.attempt_count_expr is None:
            return None
        ac = l.layout.fields.get("attempt_count")
        return RowFilter(
            l.attempt_count_expr > l.retry_threshold,
            {"n": l.attempt_count_expr},
            [ac.column] if ac is not None and ac.column and not ac.json_path else [],
        )

    def selects(self, e):
        l = e.l
        thr = l.retry_threshold
        rf = self._counter_filter(e)
        out = [rf.select(l)] if rf is not None else []
        a = e.atts()
        if a is not None:
            q = select(a.c.scope, a.c.key, func.count().label("n"))
            if rf is not None:
                # With a counter too, the attempt rows count only where the record's own counter is
                # NULL (a Trigger.dev V1 run counts its attempts as TaskRunAttempt rows, a V2 run in
                # attemptNumber): each record by its own version's rule.
                no_counter = select(l.scope_expr, l.key_expr).where(l.attempt_count_expr.is_(None))
                q = q.where(tuple_(a.c.scope, a.c.key).in_(no_counter))
            out.append(q.group_by(a.c.scope, a.c.key).having(func.count() > thr))
        return out

    def run(self, e, c):
        out = self._shape(e, _fetch(c, e.restrict(self.selects(e))))
        if e.l.layout.attempts.source == "json_array" and e.l.attempt_count_expr is None:
            out.extend(self._json_array_storms(e))
        return dedupe(out)

    def shape(self, e, rows):
        # Only reached through row_filter, i.e. with an attempt count column (no JSON arrays to add).
        return dedupe(self._shape(e, rows))

    def _shape(self, e, rows):
        out = []
        thr = e.l.retry_threshold
        for r in rows:
            ev = [{"attempts": as_int(r.n), "threshold": thr}]
            out.append(Finding(self.kind, self.severity, r.scope, r.key, explain.retry_storm(r.scope, r.key, ev), ev))
        return out

    def _json_array_storms(self, e) -> list[Finding]:
        # JSON arrays are counted in Python, streamed (engines disagree on JSON array functions).
        from idemview.ledger.reader import _json_list

        l, thr = e.l, e.l.retry_threshold
        col = l.ops.c[l.layout.attempts.column]
        out = []
        q = select(l.scope_expr.label("scope"), l.key_expr.label("key"), col.label("arr"))
        if e.flt is not None:
            q = q.where(l.filter_clause(e.flt, e.now))
        with l.engine.connect() as c:
            res = c.execution_options(stream_results=True, yield_per=5000).execute(q)
            for r in res:
                arr = _json_list(r.arr) or []
                if len(arr) > thr:
                    ev = [{"attempts": len(arr), "threshold": thr}]
                    expl = explain.retry_storm(r.scope, r.key, ev)
                    out.append(Finding(self.kind, self.severity, r.scope or "", r.key, expl, ev))
        return out


class ExpiredKey(FindingRule):
    kind = K.EXPIRED_KEY

    def not_checkable(self, ledger):
        if "expires_at" not in ledger.epoch:
            return "the ledger keeps no expiry and the layout sets no retention"
        return None

    def row_filter(self, e):
        l, lay = e.l, e.l.layout
        if "expires_at" in l.time_cols:
            col, tc = l.time_cols["expires_at"]
            cond = time_before(col, tc, e.now, l.dialect)
        elif "expires_at" in l.epoch and l.retention_s is not None:
            col, tc = l.time_cols[lay.retention_from]
            cond = time_before(col, tc, e.now - timedelta(seconds=l.retention_s), l.dialect)
        else:
            return None
        return RowFilter(cond, {"expires_e": l.epoch["expires_at"], "status": l.status_expr}, [tc.column])

    def selects(self, e):
        rf = self.row_filter(e)
        return [rf.select(e.l)] if rf is not None else []

    def run(self, e, c):
        return self.shape(e, _fetch(c, e.restrict(self.selects(e))))

    def shape(self, e, rows):
        out = []
        for r in rows:
            ev = [{"expires_at": iso(from_epoch(r.expires_e)), "status": r.status}]
            expl = explain.expired_key(r.scope, r.key, ev, e.now)
            out.append(Finding(self.kind, self.severity, r.scope, r.key, expl, ev, at=from_epoch(r.expires_e)))
        return dedupe(out)


def _effects_problem(ledger: Ledger) -> str | None:
    return (
        None
        if getattr(ledger, "effects", None) is not None
        else (getattr(ledger, "effects_problem", None) or "the layout has no [effects] section (no effect records)")
    )


def _in_filter(e: FindingEngine, c, fs: list[Finding]) -> list[Finding]:
    """``fs`` restricted to the operations the current filter matches (orphans, which belong to no
    operation, stay only when the filter is nothing but a choice of finding kinds)."""
    flt = e.flt
    if flt is None or flt.is_empty():
        return fs
    only_kinds = not (flt.statuses or flt.kinds or flt.key or flt.intent or flt.scope or flt.since or flt.until)
    l = e.l
    keys = {(f.scope, f.key) for f in fs if f.kind != K.ORPHAN_EFFECT}
    ok: set = set()
    for batch in key_batches(keys):
        q = (
            select(l.scope_expr.label("scope"), l.key_expr.label("key"))
            .select_from(l.ops)
            .where(l.filter_clause(flt, e.now), in_keys(l.scope_expr, l.key_expr, batch))
        )
        ok |= {(r.scope, r.key) for r in c.execute(q)}
    return [f for f in fs if (f.scope, f.key) in ok or (f.kind == K.ORPHAN_EFFECT and only_kinds)]


class _EffectRule(FindingRule):
    """A kind read from the layout's ``[effects]`` section (the downstream records that prove a side
    effect happened), by :mod:`idemview.findings.effects`: SQL joins in one database, a streamed merge
    across two. Its key set is not one SQL statement over the ledger (the effects may live elsewhere),
    so a finding filter reads it through :func:`idemview.findings.keysets.effect_finding_keys`."""

    key_source = "effects"

    def not_checkable(self, ledger):
        return _effects_problem(ledger)

    def selects(self, e):
        return []

    def run(self, e, c):
        from idemview.findings.effects import Reconciler

        return _in_filter(e, c, Reconciler(e.l, e.now).run([self.kind]))


class HiddenSuccess(_EffectRule):
    kind = K.HIDDEN_SUCCESS


class OrphanEffect(_EffectRule):
    kind = K.ORPHAN_EFFECT


#: The built-in rules in report order (DESIGN §5); :mod:`idemview.findings.registry` registers them.
BUILTIN_RULES: tuple[FindingRule, ...] = (
    DuplicateEffect(),
    ReplayAfterExpiry(),
    KeyConflict(),
    DuplicateIntent(),
    StuckInProgress(),
    UnresolvedFailure(),
    RetryStorm(),
    ExpiredKey(),
    HiddenSuccess(),
    OrphanEffect(),
)
