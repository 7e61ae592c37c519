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

This module holds the rules that compare records by intent (``duplicate_intent``,
``unresolved_failure``) with that comparison (:class:`IntentKey`; the switches :data:`INTENT_BY_PARTS`,
``_parts_hash`` and ``_intent_indexed`` are read from this module's globals, where tests replace them),
and the built-in rules in report order (:data:`BUILTIN_RULES`). The other rules live beside it, by what
they judge: :mod:`~idemview.findings.rules_effects`, :mod:`~idemview.findings.rules_expiry`,
:mod:`~idemview.findings.rules_stuck`; the contract in :mod:`~idemview.findings.rule_base`. Every public
name of them is importable from here (``__all__``).
"""

from __future__ import annotations

from sqlalchemy import and_, case, distinct, func, literal_column, null, or_, select, tuple_
from sqlalchemy.sql.expression import ColumnElement, Select

from idemview.domain.model import Finding, FindingKind
from idemview.findings import explain, intent_pass
from idemview.findings.common import dedupe, jsonable, nonempty, two_distinct
from idemview.findings.rule_base import FindingRule, RowFilter, fetch_all, status_cols
from idemview.findings.rules_effects import DuplicateEffect, HiddenSuccess, OrphanEffect
from idemview.findings.rules_expiry import ExpiredKey, KeyConflict, ReplayAfterExpiry
from idemview.findings.rules_stuck import RetryStorm, StuckInProgress
from idemview.ledger.dialects import MYSQL, POSTGRESQL, family
from idemview.ledger.intent_sql import intent_blank
from idemview.ledger.reader import Ledger
from idemview.ledger.sqlx import intent_parts
from idemview.ledger.times import from_epoch, iso

K = FindingKind

__all__ = [
    "BUILTIN_RULES",
    "DEFAULT_DEDUP_WINDOW_S",
    "INTENT_BY_PARTS",
    "DuplicateEffect",
    "DuplicateIntent",
    "ExpiredKey",
    "FindingRule",
    "HiddenSuccess",
    "IntentKey",
    "KeyConflict",
    "OrphanEffect",
    "ReplayAfterExpiry",
    "RetryStorm",
    "RowFilter",
    "StuckInProgress",
    "UnresolvedFailure",
    "fetch_all",
    "indexed_leading",
    "intent_key",
    "status_cols",
]

DEFAULT_DEDUP_WINDOW_S = 86400.0


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


def packed_intent_key(l: Ledger) -> IntentKey | None:
    """The :class:`IntentKey` the shared intent pass (:mod:`~idemview.findings.intent_pass`) may group
    by: an intent no index serves (each kind would otherwise group the whole table); ``None`` otherwise.
    The pass itself decides whether the engine suits it (:func:`intent_pass.usable`)."""
    ik = intent_key(l)
    return ik if ik is not None and not _intent_indexed(l) else None


#: Compare records by the intent's columns (True) or by the joined reference (False: the comparison
#: before issue 27, kept for the tests that compare both on planted ledgers).
INTENT_BY_PARTS = True


# ----------------------------------------------------------------------------------------- kinds


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
        cands = getattr(e, "intent_cands", None)
        if cands is not None:
            # the packed pass (intent_pass) found the hashes seen on two completed records: none, no
            # duplicate; else the groups are looked for among those hashes' records only
            if not cands.dup:
                return []
            grouped = grouped.where(intent_pass.restrict(ik, o, cands.dup))
        elif ik.hashed is not None:
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
        for r in fetch_all(c, e.restrict(self.selects(e))):
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
            q = self._grouped(e, ik, o, failed)
            return [q.where(*unresolved)]
        cols = [o.c.scope, o.c.key, o.c.created_at_e, o.c.raw_status, o.c.kind.label("op_kind")]
        return [select(*cols).where(failed, *unresolved)]

    @staticmethod
    def _grouped(e, ik: IntentKey, o, failed) -> Select:
        """The failures of ``o`` no completed record of their intent resolves, as one grouped pass.

        An intent no index serves (Celery's name + args + kwargs, a JSON path): a correlated NOT
        EXISTS reads the whole table once per failed record (2,000 failures x 2M rows). Instead one
        grouped pass over the completed records whose intent some failure shares, joined back: a
        failure is resolved by a completed record of its intent created at or after it (or with either
        time unknown), exactly the NOT EXISTS of :meth:`selects`. With the packed pass's candidates
        (``e.intent_cands``) the completed records are those of the resolvable hashes only, and none
        are read when there are none."""
        l = e.l
        o3, f = ik.subquery("o3"), ik.subquery("f")
        q = select(o.c.scope, o.c.key, o.c.created_at_e, o.c.raw_status, o.c.kind.label("op_kind"))
        cands = getattr(e, "intent_cands", None)
        if cands is not None and not cands.resolvable:
            # the packed pass (intent_pass): no failure shares its intent with a completed record
            return q.where(failed)
        if cands is not None:
            failed_intents = intent_pass.restrict(ik, o3, cands.resolvable)
        else:
            failed_intents = tuple_(o3.c.scope, *ik.cols(o3)).in_(
                select(f.c.scope, *ik.cols(f)).where(l.status_in(["failed"], f), f.c.ik_ok == 1)
            )
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
                failed_intents,
            )
            .group_by(o3.c.scope, *ik.cols(o3))
            .subquery("g")
        )
        joined = o.outerjoin(g, and_(o.c.ik_ok == 1, g.c.scope == o.c.scope, ik.same(g, o)))
        open_intent = or_(g.c.n.is_(None), and_(g.c.nn == 0, o.c.created_at_e.is_not(None), g.c.mx < o.c.created_at_e))
        return q.select_from(joined).where(failed, open_intent)

    def row_filter(self, e):
        # A plain filter only when no anti-join is left: one record per key, and no intent reference or
        # none that a completed record shares with a failure (the packed pass said so): the failures
        # then ride along the shared pass over the table instead of a scan of their own
        l = e.l
        cands = getattr(e, "intent_cands", None)
        no_intent = "intent_ref" not in l.layout.fields or (cands is not None and not cands.resolvable)
        if not l.key_unique or not no_intent:
            return None
        return RowFilter(
            l.status_in(["failed"]),
            {"created_at_e": l.epoch.get("created_at", null()), "raw_status": l.raw_status_expr},
            status_cols(l),
        )

    def run(self, e, c):
        return self.shape(e, fetch_all(c, e.restrict(self.selects(e)), e))

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
