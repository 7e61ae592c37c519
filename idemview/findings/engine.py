"""The findings engine: the eight kinds of DESIGN §5, computed in SQL for a given ``now``.

Each kind is one SQL statement over the layout's normalized expressions (grouping, joins and
comparisons run in the database, so a ledger larger than memory is fine); Python only shapes the
result rows into :class:`~idemview.domain.model.Finding` objects with a plain-words explanation and evidence.
A kind the layout cannot express (e.g. ``key_conflict`` without a fingerprint) is skipped and listed by
:meth:`FindingEngine.unsupported`.

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
from datetime import datetime, timedelta, timezone
from typing import Iterable

from sqlalchemy import (
    Integer, and_, case, distinct, false, func, literal_column, null, or_, select, true, union, union_all,
)
from sqlalchemy.sql.expression import ColumnElement, Select

from idemview.domain.model import DEFAULT_SEVERITY, Finding, FindingKind, Severity
from idemview.ledger.reader import Ledger
from idemview.ledger.sqlx import time_before
from idemview.ledger.times import from_epoch, human_duration, iso

UTC = timezone.utc
K = FindingKind

DEFAULT_DEDUP_WINDOW_S = 86400.0


def _nonempty(expr):
    return and_(expr.is_not(None), expr != "")


def _two_distinct(expr):
    """HAVING condition "at least two distinct non-NULL values of ``expr``": ``min <> max`` is one
    hash-aggregatable pass, where ``count(DISTINCT ...)`` makes PostgreSQL and MySQL sort each group."""
    return func.min(expr) != func.max(expr)


#: Keys per evidence query (an OR of (scope, key) pairs, each served by the key index).
EVIDENCE_BATCH = 200


def _key_batches(keys) -> Iterable[list]:
    keys = sorted(keys, key=lambda k: (k[0] is None, k[0] or "", k[1] is None, k[1] or ""))
    for i in range(0, len(keys), EVIDENCE_BATCH):
        yield keys[i:i + EVIDENCE_BATCH]


def _in_keys(scope_col, key_col, keys) -> ColumnElement:
    """``(scope, key)`` is one of ``keys`` (NULL scopes matched with IS NULL)."""
    return or_(*[and_(scope_col.is_(None) if s is None else scope_col == s, key_col == k) for s, k in keys])


def _dur(seconds: float | None) -> str:
    return "an unknown time" if seconds is None else human_duration(seconds)


class FindingEngine:
    """Computes findings of one :class:`Ledger` for ``now`` (aware; UTC after normalisation).

    ``use_profile`` forces (True) or disables (False) the one-pass key profile; the findings are the
    same either way, only the time differs."""

    def __init__(self, ledger: Ledger, now: datetime, *, use_profile: bool | None = None):
        if now.tzinfo is None:
            raise ValueError("now must be timezone-aware")
        self.l = ledger
        self.now = now.astimezone(UTC)
        self.now_e = self.now.timestamp()
        self._profile: dict | None = None
        #: Read duplicate_effect / key_conflict / replay candidates from one grouped pass
        #: (:meth:`q_key_profile`); ``None``: where it is faster (not on SQLite).
        self.use_profile = use_profile

    # ------------------------------------------------------------------------- availability

    def unsupported(self) -> dict[FindingKind, str]:
        """Kinds this layout cannot express, with the reason."""
        l, lay = self.l, self.l.layout
        out = {}
        if "expires_at" not in l.epoch:
            out[K.REPLAY_AFTER_EXPIRY] = "the ledger keeps no expiry and the layout sets no retention"
            out[K.EXPIRED_KEY] = out[K.REPLAY_AFTER_EXPIRY]
        elif (l.att is None and "last_attempt_at" not in l.epoch and lay.row_id is None):
            out[K.REPLAY_AFTER_EXPIRY] = "no attempt times and no row identity to tell records apart"
        fp_att = l.att is not None and lay.attempts.fingerprint
        if "fingerprint" not in lay.fields and not fp_att:
            out[K.KEY_CONFLICT] = "the layout maps no fingerprint"
        if "intent_ref" not in lay.fields:
            out[K.DUPLICATE_INTENT] = "the layout maps no intent reference"
        if not ({"lock_expires_at", "locked_at"} & set(l.time_cols)) or (
                "lock_expires_at" not in l.time_cols and l.lock_timeout_s is None):
            out[K.STUCK_IN_PROGRESS] = "the ledger keeps no lock time (or no lock timeout is set)"
        if l.attempt_count_expr is None and l.att is None and lay.attempts.source != "json_array":
            out[K.RETRY_STORM] = "the ledger keeps no attempt count"
        if l.effects is None:
            out[K.HIDDEN_SUCCESS] = out[K.ORPHAN_EFFECT] = l.effects_problem or "no effect records"
        return out

    # --------------------------------------------------------------------------- queries

    def _ops(self):
        return self.l.operations_select().subquery("o")

    def _atts(self):
        q = self.l.attempts_select()
        return q.subquery("a") if q is not None else None

    def q_duplicate_effect(self) -> Select | None:
        l = self.l
        o = self._ops()
        parts = []
        # >= 2 completed records of one (scope, key)
        parts.append(select(o.c.scope, o.c.key).where(l.status_in(["completed"], o))
                     .group_by(o.c.scope, o.c.key).having(func.count() >= 2))
        eff = [select(o.c.scope, o.c.key, o.c.effect_ref.label("eff")).where(_nonempty(o.c.effect_ref))]
        a = self._atts()
        if a is not None:
            parts.append(select(a.c.scope, a.c.key).where(a.c.outcome == "succeeded")
                         .group_by(a.c.scope, a.c.key).having(func.count() >= 2))
            eff.append(select(a.c.scope, a.c.key, a.c.effect_ref.label("eff"))
                       .where(_nonempty(a.c.effect_ref)))
        e = union_all(*eff).subquery("e") if len(eff) > 1 else eff[0].subquery("e")
        parts.append(select(e.c.scope, e.c.key).group_by(e.c.scope, e.c.key)
                     .having(_two_distinct(e.c.eff)))
        return union(*parts)

    def q_key_conflict(self) -> Select | None:
        l, lay = self.l, self.l.layout
        srcs = []
        o = self._ops()
        if "fingerprint" in lay.fields:
            srcs.append(select(o.c.scope, o.c.key, o.c.fingerprint.label("fp"))
                        .where(_nonempty(o.c.fingerprint)))
        a = self._atts()
        if a is not None and lay.attempts.fingerprint:
            srcs.append(select(a.c.scope, a.c.key, a.c.fingerprint.label("fp"))
                        .where(_nonempty(a.c.fingerprint)))
        if not srcs:
            return None
        f = (union_all(*srcs) if len(srcs) > 1 else srcs[0]).subquery("f")
        return (select(f.c.scope, f.c.key)
                .group_by(f.c.scope, f.c.key).having(_two_distinct(f.c.fp)))

    def q_stuck(self) -> Select | None:
        l = self.l
        conds = []
        if "lock_expires_at" in l.time_cols:
            c, tc = l.time_cols["lock_expires_at"]
            conds.append(time_before(c, tc, self.now, l.dialect))
        if "locked_at" in l.time_cols and l.lock_timeout_s is not None:
            c, tc = l.time_cols["locked_at"]
            conds.append(time_before(c, tc, self.now - timedelta(seconds=l.lock_timeout_s), l.dialect))
        if not conds:
            return None
        return (select(l.scope_expr.label("scope"), l.key_expr.label("key"),
                       l.epoch.get("locked_at", null()).label("locked_e"),
                       l.epoch.get("lock_expires_at", null()).label("lock_exp_e"),
                       l.raw_status_expr.label("raw_status"))
                .select_from(l.ops).where(l.status_in(["in_progress"]), or_(*conds)))

    def q_expired(self) -> Select | None:
        l, lay = self.l, self.l.layout
        if "expires_at" in l.time_cols:
            c, tc = l.time_cols["expires_at"]
            cond = time_before(c, tc, self.now, l.dialect)
        elif "expires_at" in l.epoch and l.retention_s is not None:
            c, tc = l.time_cols[lay.retention_from]
            cond = time_before(c, tc, self.now - timedelta(seconds=l.retention_s), l.dialect)
        else:
            return None
        return (select(l.scope_expr.label("scope"), l.key_expr.label("key"),
                       l.epoch["expires_at"].label("expires_e"), l.status_expr.label("status"))
                .select_from(l.ops).where(cond))

    def q_retry_storm(self) -> Select | None:
        l = self.l
        thr = l.retry_threshold
        if l.attempt_count_expr is not None:
            return (select(l.scope_expr.label("scope"), l.key_expr.label("key"),
                           l.attempt_count_expr.label("n"))
                    .select_from(l.ops).where(l.attempt_count_expr > thr))
        a = self._atts()
        if a is not None:
            return (select(a.c.scope, a.c.key, func.count().label("n"))
                    .group_by(a.c.scope, a.c.key).having(func.count() > thr))
        return None

    def q_unresolved(self) -> Select | None:
        l, lay = self.l, self.l.layout
        o = self._ops()
        o2 = l.operations_select().subquery("o2")
        later = or_(o2.c.created_at_e >= o.c.created_at_e, o2.c.created_at_e.is_(None),
                    o.c.created_at_e.is_(None))
        same = [and_(o2.c.scope == o.c.scope, o2.c.key == o.c.key)]
        if "intent_ref" in lay.fields:
            same.append(and_(_nonempty(o.c.intent_ref), o2.c.scope == o.c.scope,
                             o2.c.intent_ref == o.c.intent_ref))
        # NOT EXISTS (same key) AND NOT EXISTS (same intent), not NOT EXISTS (key OR intent): each is
        # then an anti-join the key or intent index serves (PostgreSQL cannot turn an OR into one and
        # re-scans the table for every failed record).
        unresolved = [~select(literal_column("1")).select_from(o2)
                      .where(l.status_in(["completed"], o2), later, cond).exists() for cond in same]
        return (select(o.c.scope, o.c.key, o.c.created_at_e, o.c.raw_status)
                .where(l.status_in(["failed"], o), *unresolved))

    def q_replay(self, keys=None) -> list[Select]:
        """The replay selects; with ``keys`` (a list of (scope, key)) restricted to those operations."""
        l, lay = self.l, self.l.layout
        if "expires_at" not in l.epoch:
            return []
        out = []
        o = self._ops()
        a = self._atts()
        if a is not None:
            # An attempt that started after a record of its key had expired.
            out.append(select(a.c.scope, a.c.key, a.c.number, a.c.outcome.label("outcome"),
                              a.c.started_at_e.label("at_e"), func.min(o.c.expires_at_e).label("expires_e"),
                              literal_column("'attempt'").label("what"))
                       .select_from(a.join(o, and_(a.c.scope == o.c.scope, a.c.key == o.c.key)))
                       .where(a.c.started_at_e > o.c.expires_at_e,
                              _in_keys(a.c.scope, a.c.key, keys) if keys is not None else true())
                       .group_by(a.c.scope, a.c.key, a.c.number, a.c.outcome, a.c.started_at_e))
        if lay.row_id is not None and "created_at" in l.epoch:
            # A newer record of the same key created after an older one had expired.
            o2 = l.operations_select().subquery("o2")
            out.append(select(o2.c.scope, o2.c.key, null().label("number"),
                              case((o2.c.status == "completed", literal_column("'succeeded'")),
                                   else_=literal_column("'unknown'")).label("outcome"),
                              o2.c.created_at_e.label("at_e"), func.min(o.c.expires_at_e).label("expires_e"),
                              literal_column("'record'").label("what"))
                       .select_from(o2.join(o, and_(o2.c.scope == o.c.scope, o2.c.key == o.c.key,
                                                    o2.c.rid != o.c.rid)))
                       .where(o2.c.created_at_e > o.c.expires_at_e,
                              _in_keys(o2.c.scope, o2.c.key, keys) if keys is not None else true())
                       .group_by(o2.c.scope, o2.c.key, o2.c.status, o2.c.created_at_e))
        if a is None and "last_attempt_at" in l.epoch:
            out.append(select(o.c.scope, o.c.key, o.c.attempt_count.label("number"),
                              case((o.c.status == "completed", literal_column("'succeeded'")),
                                   else_=literal_column("'unknown'")).label("outcome"),
                              o.c.last_attempt_at_e.label("at_e"), o.c.expires_at_e.label("expires_e"),
                              literal_column("'last_run'").label("what"))
                       .where(o.c.last_attempt_at_e > o.c.expires_at_e,
                              _in_keys(o.c.scope, o.c.key, keys) if keys is not None else true()))
        return out

    def q_key_profile(self) -> Select | None:
        """One pass over operations and attempts grouped by (scope, key), flagging the keys with a
        ``duplicate_effect`` (``is_de``), a ``key_conflict`` (``is_kc``) and the candidates for a
        ``replay_after_expiry`` (``is_rp``: some attempt started after some record expired, or a key
        with several records of which one was created after another expired; the exact replay query
        then runs on these keys only). It replaces about six whole-table passes (three groupings for
        duplicate_effect, one for key_conflict, two joins for the replays) by one. ``None`` without an
        attempts table (the per-kind queries are as cheap there)."""
        l, lay = self.l, self.l.layout
        a = self._atts()
        if a is None:
            return None
        o = self._ops()
        fp_o, fp_a = "fingerprint" in lay.fields, bool(lay.attempts.fingerprint)
        exp = "expires_at" in l.epoch
        rec = exp and lay.row_id is not None and "created_at" in l.epoch

        def nz(x):
            return case((_nonempty(x), x), else_=null())

        one, zero = literal_column("1"), literal_column("0")
        ops_part = select(
            o.c.scope, o.c.key, case((l.status_in(["completed"], o), one), else_=zero).label("comp"),
            zero.label("succ"), nz(o.c.effect_ref).label("eff"),
            (nz(o.c.fingerprint) if fp_o else null()).label("fp"), null().label("st"),
            (o.c.expires_at_e if exp else null()).label("ex"), (o.c.created_at_e if rec else null()).label("cr"),
            one.label("rec"))
        att_part = select(
            a.c.scope, a.c.key, zero, case((a.c.outcome == "succeeded", one), else_=zero),
            nz(a.c.effect_ref), nz(a.c.fingerprint) if fp_a else null(),
            a.c.started_at_e if exp else null(), null(), null(), zero)
        p = union_all(ops_part, att_part).subquery("p")
        de = or_(func.sum(p.c.comp) >= 2, func.sum(p.c.succ) >= 2, _two_distinct(p.c.eff))
        kc = _two_distinct(p.c.fp) if (fp_o or fp_a) else false()
        rp = [func.max(p.c.st) > func.min(p.c.ex)] if exp else []
        if rec:
            rp.append(and_(func.sum(p.c.rec) >= 2, func.max(p.c.cr) > func.min(p.c.ex)))
        rp = or_(*rp) if rp else false()
        flag = lambda c: case((c, one), else_=zero)  # noqa: E731
        return (select(p.c.scope, p.c.key, flag(de).label("is_de"), flag(kc).label("is_kc"),
                       flag(rp).label("is_rp"))
                .group_by(p.c.scope, p.c.key).having(or_(de, kc, rp)))

    def q_duplicate_intent(self) -> Select | None:
        l, lay = self.l, self.l.layout
        if "intent_ref" not in lay.fields:
            return None
        window = l.retention_s if l.retention_s is not None else (
            lay.dedup_window_seconds if lay.dedup_window_seconds is not None else DEFAULT_DEDUP_WINDOW_S)
        # Two steps so the pairwise part stays small: first the (scope, intent) groups holding more than
        # one completed key (one grouped pass), then the pairs within those groups only. A direct
        # self-join of the whole ledger is quadratic on engines that cannot index a derived table.
        o = l.operations_select().subquery("o")
        done = l.status_in(["completed"], o)
        cand = (select(o.c.scope, o.c.intent_ref)
                .where(_nonempty(o.c.intent_ref), done)
                .group_by(o.c.scope, o.c.intent_ref)
                .having(func.min(o.c.key) != func.max(o.c.key))).subquery("c")
        ob = l.operations_select().subquery("ob")
        base = (select(ob.c.scope, ob.c.key, ob.c.intent_ref, ob.c.created_at_e)
                .join(cand, and_(cand.c.scope == ob.c.scope, cand.c.intent_ref == ob.c.intent_ref))
                .where(l.status_in(["completed"], ob))).cte("intent_pairs")
        o1, o2 = base.alias("o1"), base.alias("o2")
        earlier = or_(o1.c.created_at_e < o2.c.created_at_e,
                      and_(o1.c.created_at_e == o2.c.created_at_e, o1.c.key < o2.c.key))
        return (select(o2.c.scope, o2.c.key, o2.c.intent_ref, func.min(o1.c.key).label("first_key"),
                       func.count(distinct(o1.c.key)).label("n_other"),
                       o2.c.created_at_e, func.min(o1.c.created_at_e).label("first_e"))
                .select_from(o2.join(o1, and_(o1.c.scope == o2.c.scope, o1.c.intent_ref == o2.c.intent_ref,
                                              o1.c.key != o2.c.key)))
                .where(earlier, o2.c.created_at_e - o1.c.created_at_e <= window)
                .group_by(o2.c.scope, o2.c.key, o2.c.intent_ref, o2.c.created_at_e))

    # ------------------------------------------------------------------ key sets (for filters)

    def keys_with(self, kinds: Iterable[FindingKind], distinct: bool = True) -> Select:
        """A select of distinct ``scope, key`` rows of operations carrying any of ``kinds`` (used as
        the grid's and the export's finding filter). ``distinct=False`` allows repeated rows (enough
        for ``IN``, and it spares the engine a de-duplication that can steer it to a whole-table scan)."""
        parts = []
        for k in kinds:
            if k == K.REPLAY_AFTER_EXPIRY:
                qs = self.q_replay()
            else:
                q = self._query(k)
                qs = [q] if q is not None else []
            for q in qs:
                s = q.subquery()
                parts.append(select(s.c.scope, s.c.key))
        if not parts:
            return select(literal_column("''").label("scope"), literal_column("''").label("key")).where(
                literal_column("1") == literal_column("0"))
        if len(parts) > 1:
            return union(*parts) if distinct else union_all(*parts)
        return parts[0].distinct() if distinct else parts[0]

    def _query(self, k: FindingKind):
        return {
            K.DUPLICATE_EFFECT: self.q_duplicate_effect, K.KEY_CONFLICT: self.q_key_conflict,
            K.DUPLICATE_INTENT: self.q_duplicate_intent, K.STUCK_IN_PROGRESS: self.q_stuck,
            K.UNRESOLVED_FAILURE: self.q_unresolved, K.RETRY_STORM: self.q_retry_storm,
            K.EXPIRED_KEY: self.q_expired,
        }[k]()

    # ------------------------------------------------------------------------------ running

    def run(self, kinds: Iterable[FindingKind] | None = None) -> list[Finding]:
        """All findings of ``kinds`` (default: every kind), ordered by kind, then scope and key."""
        kinds = list(kinds) if kinds is not None else list(K)
        out: list[Finding] = []
        self._profile = None
        with self.l.engine.connect() as c:
            # SQLite groups one table through its (scope, key) index without sorting, which a UNION
            # cannot: there the per-kind queries are as fast as the profile (measured at 1M operations).
            use = self.use_profile if self.use_profile is not None else self.l.dialect != "sqlite"
            # Worth it when it replaces at least two kinds' passes (the GUI runs kinds one by one).
            if use and len({K.DUPLICATE_EFFECT, K.KEY_CONFLICT, K.REPLAY_AFTER_EXPIRY} & set(kinds)) >= 2:
                q = self.q_key_profile()
                if q is not None:
                    prof = {"de": set(), "kc": set(), "rp": set()}
                    for r in c.execute(q):
                        for f in ("de", "kc", "rp"):
                            if int(getattr(r, "is_" + f)):
                                prof[f].add((r.scope, r.key))
                    self._profile = prof
            for k in K:
                if k not in kinds or k in (K.HIDDEN_SUCCESS, K.ORPHAN_EFFECT):  # see reconcile below
                    continue
                out.extend(getattr(self, f"_run_{k.value}")(c))
        if self.l.effects is not None:
            from idemview.findings.effects import Reconciler, merge_effect_findings
            rec = Reconciler(self.l, self.now)
            out = merge_effect_findings(out, rec.run(kinds), rec.dup_reasons)
        order = {k: i for i, k in enumerate(K)}
        out.sort(key=lambda f: (order[f.kind], f.scope, f.key, f.explanation))
        return out

    def _fetch(self, c, q):
        return c.execute(q).fetchall() if q is not None else []

    def _who(self, scope, key):
        return f"key {key!r}" + (f" in scope {scope!r}" if scope else "")

    def _run_duplicate_effect(self, c) -> list[Finding]:
        if self._profile is not None:
            keys = self._profile["de"]
        else:
            keys = {(r.scope, r.key) for r in self._fetch(c, self.q_duplicate_effect())}
        if not keys:
            return []
        # Evidence is read for the found keys only (through the key index), not by re-running q.
        ev: dict = defaultdict(list)
        o = self._ops()
        a = self._atts()
        for batch in _key_batches(keys):
            rows = c.execute(select(o.c.scope, o.c.key, o.c.rid, o.c.status, o.c.raw_status, o.c.effect_ref,
                                    o.c.created_at_e)
                             .where(_in_keys(o.c.scope, o.c.key, batch),
                                    or_(o.c.status == "completed", _nonempty(o.c.effect_ref)))).fetchall()
            for r in rows:
                ev[(r.scope, r.key)].append({"record": _jsonable(r.rid), "status": r.status,
                                             "effect_ref": r.effect_ref,
                                             "created_at": iso(from_epoch(r.created_at_e))})
            if a is None:
                continue
            rows = c.execute(select(a.c.scope, a.c.key, a.c.number, a.c.outcome, a.c.effect_ref,
                                    a.c.started_at_e)
                             .where(_in_keys(a.c.scope, a.c.key, batch),
                                    or_(a.c.outcome == "succeeded", _nonempty(a.c.effect_ref)))).fetchall()
            for r in rows:
                ev[(r.scope, r.key)].append({"attempt": _int(r.number), "outcome": r.outcome,
                                             "effect_ref": r.effect_ref,
                                             "started_at": iso(from_epoch(r.started_at_e))})
        out = []
        for (scope, key) in keys:
            items = sorted(ev[(scope, key)], key=_ev_sort)
            n_succ = sum(1 for e in items if e.get("outcome") == "succeeded")
            n_comp = sum(1 for e in items if e.get("status") == "completed")
            effects = sorted({e["effect_ref"] for e in items if e.get("effect_ref")})
            reasons = []
            if n_succ >= 2:
                reasons.append(f"{n_succ} attempts succeeded")
            if len(effects) >= 2:
                reasons.append(f"{len(effects)} distinct side effects were recorded ({', '.join(effects[:4])})")
            if n_comp >= 2:
                reasons.append(f"{n_comp} records are completed")
            expl = (f"The operation with {self._who(scope, key)} took effect more than once: "
                    + "; ".join(reasons or ["several effects"]) + ".")
            at = next((e.get("started_at") or e.get("created_at") for e in items
                       if e.get("outcome") == "succeeded"), None)
            out.append(Finding(K.DUPLICATE_EFFECT, Severity.CRITICAL, scope, key, expl, items,
                               at=_parse_iso(at)))
        return out

    def _run_replay_after_expiry(self, c) -> list[Finding]:
        by: dict = defaultdict(list)
        if self._profile is not None:
            qs = [q for batch in _key_batches(self._profile["rp"]) for q in self.q_replay(batch)]
        else:
            qs = self.q_replay()
        for q in qs:
            for r in c.execute(q):
                by[(r.scope, r.key)].append(r)
        out = []
        for (scope, key), rows in by.items():
            rows.sort(key=lambda r: (r.at_e or 0, r.what))
            succeeded = any(r.outcome == "succeeded" for r in rows)
            ev = [{"replay": r.what, "attempt": _int(r.number), "outcome": r.outcome,
                   "started_at": iso(from_epoch(r.at_e)), "key_expired_at": iso(from_epoch(r.expires_e))}
                  for r in rows]
            first = rows[0]
            late = (first.at_e - first.expires_e) if first.at_e is not None and first.expires_e is not None else None
            what = {"attempt": f"attempt {_int(first.number)}" if first.number is not None else "an attempt",
                    "record": "a new record", "last_run": "the last run"}[first.what]
            expl = (f"For {self._who(scope, key)}, {what} started {_dur(late)} after the key had expired "
                    f"({iso(from_epoch(first.expires_e))})"
                    + (" and succeeded: the dedup window no longer protected it." if succeeded else "."))
            out.append(Finding(K.REPLAY_AFTER_EXPIRY, Severity.CRITICAL if succeeded else Severity.HIGH,
                               scope, key, expl, ev, at=from_epoch(first.at_e)))
        return out

    def _run_key_conflict(self, c) -> list[Finding]:
        if self._profile is not None:
            rows = [_Key(s_, k_) for s_, k_ in self._profile["kc"]]
        else:
            rows = self._fetch(c, self.q_key_conflict())
        if not rows:
            return []
        fps: dict = defaultdict(set)
        o = self._ops()
        a = self._atts() if self.l.layout.attempts.fingerprint else None
        for batch in _key_batches({(r.scope, r.key) for r in rows}):
            if "fingerprint" in self.l.layout.fields:
                for r in c.execute(select(o.c.scope, o.c.key, o.c.fingerprint)
                                   .where(_in_keys(o.c.scope, o.c.key, batch), _nonempty(o.c.fingerprint))):
                    fps[(r.scope, r.key)].add(r.fingerprint)
            if a is not None:
                for r in c.execute(select(a.c.scope, a.c.key, a.c.fingerprint)
                                   .where(_in_keys(a.c.scope, a.c.key, batch), _nonempty(a.c.fingerprint))):
                    fps[(r.scope, r.key)].add(r.fingerprint)
        out = []
        for r in rows:
            f = sorted(fps[(r.scope, r.key)])
            expl = (f"The {self._who(r.scope, r.key)} was reused with {len(f)} different request "
                    f"fingerprints: the same key was sent for different requests.")
            out.append(Finding(K.KEY_CONFLICT, Severity.HIGH, r.scope, r.key, expl,
                               [{"fingerprint": x} for x in f]))
        return out

    def _run_duplicate_intent(self, c) -> list[Finding]:
        out = []
        for r in self._fetch(c, self.q_duplicate_intent()):
            gap = (r.created_at_e - r.first_e) if r.created_at_e is not None and r.first_e is not None else None
            expl = (f"Intent {r.intent_ref!r} completed under {int(r.n_other) + 1} keys: "
                    f"{self._who(r.scope, r.key)} was created {_dur(gap)} after key {r.first_key!r} "
                    f"completed the same intent — a fresh key was minted for a retry.")
            out.append(Finding(K.DUPLICATE_INTENT, Severity.HIGH, r.scope, r.key, expl,
                               [{"intent_ref": r.intent_ref, "earlier_key": r.first_key,
                                 "earlier_created_at": iso(from_epoch(r.first_e)),
                                 "created_at": iso(from_epoch(r.created_at_e))}],
                               at=from_epoch(r.created_at_e)))
        return out

    def _run_stuck_in_progress(self, c) -> list[Finding]:
        out = []
        for r in self._fetch(c, self.q_stuck()):
            lock_end = r.lock_exp_e
            if lock_end is None and r.locked_e is not None and self.l.lock_timeout_s is not None:
                lock_end = r.locked_e + self.l.lock_timeout_s
            overdue = (self.now_e - lock_end) if lock_end is not None else None
            expl = (f"The operation with {self._who(r.scope, r.key)} is still in progress but its lock "
                    f"expired {_dur(overdue)} ago: the worker that held it probably died.")
            out.append(Finding(K.STUCK_IN_PROGRESS, Severity.MEDIUM, r.scope, r.key, expl,
                               [{"raw_status": _jsonable(r.raw_status), "locked_at": iso(from_epoch(r.locked_e)),
                                 "lock_expired_at": iso(from_epoch(lock_end))}],
                               at=from_epoch(lock_end)))
        return _dedupe(out)

    def _run_unresolved_failure(self, c) -> list[Finding]:
        out = []
        for r in self._fetch(c, self.q_unresolved()):
            expl = (f"The operation with {self._who(r.scope, r.key)} failed"
                    + (f" ({r.raw_status})" if r.raw_status not in (None, "", "failed") else "")
                    + " and nothing completed it afterwards, under this key or its intent.")
            out.append(Finding(K.UNRESOLVED_FAILURE, Severity.MEDIUM, r.scope, r.key, expl,
                               [{"raw_status": _jsonable(r.raw_status),
                                 "created_at": iso(from_epoch(r.created_at_e))}],
                               at=from_epoch(r.created_at_e)))
        return _dedupe(out)

    def _run_retry_storm(self, c) -> list[Finding]:
        out = []
        thr = self.l.retry_threshold
        for r in self._fetch(c, self.q_retry_storm()):
            expl = (f"The operation with {self._who(r.scope, r.key)} was attempted {_int(r.n)} times "
                    f"(threshold {thr}).")
            out.append(Finding(K.RETRY_STORM, Severity.LOW, r.scope, r.key, expl,
                               [{"attempts": _int(r.n), "threshold": thr}]))
        if self.l.layout.attempts.source == "json_array" and self.l.attempt_count_expr is None:
            out.extend(self._json_array_storms())
        return _dedupe(out)

    def _json_array_storms(self) -> list[Finding]:
        # JSON arrays are counted in Python, streamed (engines disagree on JSON array functions).
        from idemview.ledger.reader import _json_list
        l, thr = self.l, self.l.retry_threshold
        col = l.ops.c[l.layout.attempts.column]
        out = []
        with l.engine.connect() as c:
            res = c.execution_options(stream_results=True, yield_per=5000).execute(
                select(l.scope_expr.label("scope"), l.key_expr.label("key"), col.label("arr")))
            for r in res:
                arr = _json_list(r.arr) or []
                if len(arr) > thr:
                    out.append(Finding(K.RETRY_STORM, Severity.LOW, r.scope or "", r.key,
                                       f"The operation with {self._who(r.scope, r.key)} was attempted "
                                       f"{len(arr)} times (threshold {thr}).",
                                       [{"attempts": len(arr), "threshold": thr}]))
        return out

    def _run_expired_key(self, c) -> list[Finding]:
        out = []
        for r in self._fetch(c, self.q_expired()):
            ago = self.now_e - r.expires_e if r.expires_e is not None else None
            expl = (f"The {self._who(r.scope, r.key)} expired {_dur(ago)} ago "
                    f"({iso(from_epoch(r.expires_e))}) and its record is still kept; a new request with "
                    f"this key would no longer be deduplicated.")
            out.append(Finding(K.EXPIRED_KEY, Severity.INFO, r.scope, r.key, expl,
                               [{"expires_at": iso(from_epoch(r.expires_e)), "status": r.status}],
                               at=from_epoch(r.expires_e)))
        return _dedupe(out)


class _Key:
    __slots__ = ("scope", "key")

    def __init__(self, scope, key):
        self.scope, self.key = scope, key


def _dedupe(fs: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in fs:
        if (f.scope, f.key) in seen:
            continue
        seen.add((f.scope, f.key))
        out.append(f)
    return out


def _int(v):
    return int(v) if v is not None else None


def _jsonable(v):
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)


def _ev_sort(e: dict):
    return ("attempt" in e, e.get("attempt") or 0, e.get("started_at") or e.get("created_at") or "",
            str(e.get("record")))


def _parse_iso(s):
    if not s:
        return None
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def scan(ledger: Ledger, now: datetime | None = None, kinds=None) -> list[Finding]:
    """Convenience: all findings of ``ledger`` at ``now`` (default: the current time, UTC)."""
    return FindingEngine(ledger, now or datetime.now(UTC)).run(kinds)
