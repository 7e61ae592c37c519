"""The rules of the kinds about keys and their expiry (DESIGN §5).

- ``replay_after_expiry`` (high; critical when the replay succeeded): an attempt, or a newer record of
  the same (scope, key), started after the key had expired (``expires_at``, or retention added to a time
  column); with a counter only, the record's ``last_attempt_at`` after its expiry;
- ``key_conflict`` (high): >= 2 distinct non-empty fingerprints under one (scope, key);
- ``expired_key`` (info): expiry <= now and the record still present.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from sqlalchemy import and_, case, func, literal_column, null, select, true, union_all
from sqlalchemy.sql.expression import Select

from idemview.domain.model import Finding, FindingKind, Severity
from idemview.findings import explain
from idemview.findings.common import KeyRow, as_int, dedupe, in_keys, key_batches, nonempty, two_distinct
from idemview.findings.rule_base import FindingRule, RowFilter, RowFilterRule, fetch_all
from idemview.ledger.sqlx import time_before
from idemview.ledger.times import from_epoch, iso

K = FindingKind


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
            rows = fetch_all(c, e.restrict(self.selects(e)))
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


class ExpiredKey(RowFilterRule):
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

    def shape(self, e, rows):
        out = []
        for r in rows:
            ev = [{"expires_at": iso(from_epoch(r.expires_e)), "status": r.status}]
            expl = explain.expired_key(r.scope, r.key, ev, e.now)
            out.append(Finding(self.kind, self.severity, r.scope, r.key, expl, ev, at=from_epoch(r.expires_e)))
        return dedupe(out)
