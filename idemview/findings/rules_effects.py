"""The rules of the kinds about side effects (DESIGN §5): the ledger's own evidence that an operation took
effect twice, and what the layout's ``[effects]`` records (downstream, maybe in another database) show.

- ``duplicate_effect`` (critical): one (scope, key) with >= 2 succeeded attempts, or >= 2 distinct
  non-empty effect references (records and attempts together), or >= 2 completed records; with an
  ``[effects]`` section also >= 2 effect records downstream (:mod:`idemview.findings.effects`);
- ``hidden_success`` and ``orphan_effect``: read by :mod:`idemview.findings.effects` only.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from sqlalchemy import func, or_, select, union, union_all

from idemview.domain.model import Finding, FindingKind
from idemview.findings import explain
from idemview.findings.common import as_int, ev_sort, in_keys, jsonable, key_batches, nonempty, parse_iso, two_distinct
from idemview.findings.rule_base import FindingRule, fetch_all
from idemview.ledger.reader import Ledger
from idemview.ledger.times import from_epoch, iso

if TYPE_CHECKING:  # pragma: no cover
    from idemview.findings.engine import FindingEngine

K = FindingKind


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
                keys = {(r.scope, r.key) for r in fetch_all(c, e.restrict(self.selects(e)))}
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
