"""The rules of the kinds about work that does not finish (DESIGN §5).

- ``stuck_in_progress`` (medium): status in_progress and lock expired (``lock_expires_at <= now`` or
  ``locked_at + lock timeout <= now``);
- ``retry_storm`` (low): attempt count above the threshold (default 5).
"""

from __future__ import annotations

from sqlalchemy import and_, func, null, select, tuple_

from idemview.domain.model import Finding, FindingKind
from idemview.findings import explain
from idemview.findings.common import as_int, dedupe, jsonable
from idemview.findings.rule_base import FindingRule, RowFilter, RowFilterRule, fetch_all, status_cols
from idemview.ledger.times import from_epoch, iso

K = FindingKind


class StuckInProgress(RowFilterRule):
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
            status_cols(l),
        )

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
        out = self._shape(e, fetch_all(c, e.restrict(self.selects(e)), e))
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
