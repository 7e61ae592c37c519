"""The findings engine: runs the registered finding rules (:mod:`idemview.findings.registry`) over one
:class:`~idemview.ledger.reader.Ledger` for a given ``now``.

Each kind is one rule object (:mod:`idemview.findings.rules`: definitions, SQL and shaping); its SQL runs
over the layout's normalized expressions (grouping, joins and comparisons run in the database, so a
ledger larger than memory is fine); Python only shapes the result rows into
:class:`~idemview.domain.model.Finding` objects. A kind the layout cannot express (e.g. ``key_conflict``
without a fingerprint), or that the ledger's backend declares it cannot show, is skipped and listed, with the
reason, by :func:`not_checkable` (:meth:`FindingEngine.unsupported`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from sqlalchemy import and_, case, false, func, literal_column, null, or_, select, tuple_, union, union_all
from sqlalchemy.sql.expression import ColumnElement, CompoundSelect, Select

from idemview.domain.filters import Filter
from idemview.domain.model import Finding, FindingKind
from idemview.findings import intent_pass, keysets, registry
from idemview.findings.actions import weigh
from idemview.findings.audit import DEFAULT_AUDIT_ROWS
from idemview.findings.common import nonempty, two_distinct
from idemview.findings.intent_pass import IntentCandidates
from idemview.findings.rules import DEFAULT_DEDUP_WINDOW_S, FindingRule, packed_intent_key  # noqa: F401  (re-exported)
from idemview.findings.rules import indexed_leading as _indexed_leading
from idemview.ledger.batch import for_batch
from idemview.ledger.filtering import use_finding_clause
from idemview.ledger.reader import Ledger

UTC = UTC
K = FindingKind

#: ``timeout_s`` default of :meth:`FindingEngine.run`: keep the engine's interactive statement timeout.
INTERACTIVE = object()


class FindingEngine:
    """Computes findings of one :class:`Ledger` for ``now`` (aware; UTC after normalisation).

    ``use_profile`` forces (True) or disables (False) the one-pass key profile; the findings are the
    same either way, only the time differs. Raises ``ValueError`` for a naive ``now``."""

    def __init__(self, ledger: Ledger, now: datetime, *, use_profile: bool | None = None):
        if now.tzinfo is None:
            raise ValueError("now must be timezone-aware")
        self.l = ledger
        self.now = now.astimezone(UTC)
        self.now_e = self.now.timestamp()
        self._profile: dict | None = None
        #: The intent candidates of the packed pass (:mod:`idemview.findings.intent_pass`) of the
        #: current whole scan, or ``None``: the intent rules then group in SQL themselves.
        self.intent_cands: IntentCandidates | None = None
        #: ``(scope, key) -> operation kind`` of the current run, shared by every kind's weighing
        self.op_kinds: dict | None = None
        #: Read duplicate_effect / key_conflict / replay candidates from one grouped pass
        #: (:meth:`q_key_profile`); ``None``: where it is faster (not on SQLite).
        self.use_profile = use_profile
        #: The filter of the current :meth:`run` (findings restricted to its operations), or None.
        self.flt: Filter | None = None
        #: Rows per table the ledger audit (``secret_at_rest``) samples, newest first; 0 skips it.
        self.audit_rows = DEFAULT_AUDIT_ROWS

    # ------------------------------------------------------------------------- availability

    def unsupported(self) -> dict[FindingKind, str]:
        """Kinds this ledger cannot have or show, with the reason in plain words (report order):
        :func:`not_checkable`, the one list."""
        return not_checkable(self.l)

    # --------------------------------------------------------------------- context for rules

    def ops(self):
        """The normalized operations (:meth:`Ledger.operations_select`) as subquery ``o``."""
        return self.l.operations_select().subquery("o")

    def atts(self):
        """The normalized attempts as subquery ``a``, or ``None`` without an attempts table."""
        q = self.l.attempts_select()
        return q.subquery("a") if q is not None else None

    # Old private names, kept for callers outside the package.
    _ops, _atts = ops, atts

    def profile_keys(self, flag: str | None) -> set | None:
        """The candidate (scope, key) set of profile ``flag`` when the key profile ran, else ``None``."""
        if self._profile is None or flag is None:
            return None
        return self._profile.get(flag)

    def restrict(self, qs: list[Select]) -> list[Select]:
        """``qs`` restricted to the operations the current filter (:attr:`flt`) matches: each select
        wrapped as ``SELECT * FROM (q) WHERE (scope, key) IN (filtered operations)``. Unchanged without
        a filter."""
        if self.flt is None or self.flt.is_empty():
            return qs
        l = self.l
        keys = select(l.scope_expr, l.key_expr).select_from(l.ops).where(l.filter_clause(self.flt, self.now))
        out = []
        for q in qs:
            s = q.subquery()
            out.append(select(s).where(tuple_(s.c.scope, s.c.key).in_(keys)))
        return out

    # ------------------------------------------------------------------ shared passes

    def q_key_profile(self) -> Select | None:
        """One pass over operations and attempts grouped by (scope, key), flagging the keys with a
        ``duplicate_effect`` (``is_de``), a ``key_conflict`` (``is_kc``) and the candidates for a
        ``replay_after_expiry`` (``is_rp``: some attempt started after some record expired, or a key
        with several records of which one was created after another expired; the exact replay query
        then runs on these keys only). It replaces about six whole-table passes (three groupings for
        duplicate_effect, one for key_conflict, two joins for the replays) by one. ``None`` without an
        attempts table (the per-kind queries are as cheap there)."""
        l, lay = self.l, self.l.layout
        a = self.atts()
        if a is None:
            return None
        o = self.ops()
        fp_o, fp_a = "fingerprint" in lay.fields, bool(lay.attempts.fingerprint)
        exp = "expires_at" in l.epoch
        rec = exp and lay.row_id is not None and "created_at" in l.epoch

        def nz(x):
            return case((nonempty(x), x), else_=null())

        one: ColumnElement = literal_column("1")
        zero: ColumnElement = literal_column("0")
        ops_part = select(
            o.c.scope,
            o.c.key,
            case((l.status_in(["completed"], o), one), else_=zero).label("comp"),
            zero.label("succ"),
            nz(o.c.effect_ref).label("eff"),
            (nz(o.c.fingerprint) if fp_o else null()).label("fp"),
            null().label("st"),
            (o.c.expires_at_e if exp else null()).label("ex"),
            (o.c.created_at_e if rec else null()).label("cr"),
            one.label("rec"),
        )
        att_part = select(
            a.c.scope,
            a.c.key,
            zero,
            case((a.c.outcome == "succeeded", one), else_=zero),
            nz(a.c.effect_ref),
            nz(a.c.fingerprint) if fp_a else null(),
            a.c.started_at_e if exp else null(),
            null(),
            null(),
            zero,
        )
        p = union_all(ops_part, att_part).subquery("p")
        de = or_(func.sum(p.c.comp) >= 2, func.sum(p.c.succ) >= 2, two_distinct(p.c.eff))
        kc = two_distinct(p.c.fp) if (fp_o or fp_a) else false()
        rps: list[ColumnElement] = [func.max(p.c.st) > func.min(p.c.ex)] if exp else []
        if rec:
            rps.append(and_(func.sum(p.c.rec) >= 2, func.max(p.c.cr) > func.min(p.c.ex)))
        rp = or_(*rps) if rps else false()
        flag = lambda c: case((c, one), else_=zero)  # noqa: E731
        return (
            select(p.c.scope, p.c.key, flag(de).label("is_de"), flag(kc).label("is_kc"), flag(rp).label("is_rp"))
            .group_by(p.c.scope, p.c.key)
            .having(or_(de, kc, rp))
        )

    def _plan_passes(self, todo: list[FindingRule]) -> tuple[list[FindingRule], list]:
        """Split ``todo`` into rules run on their own and (rule, row filter) pairs sharing one pass
        over the operations table. A row-filter kind whose condition an index serves runs alone (an
        index range beats a shared whole-table scan); the others share a pass when there are two or
        more of them (one scan instead of several)."""
        t = self.l.ops
        leading = _indexed_leading(t)
        real = {c.key: c.name.lower() for c in t.c}
        alone, cand = [], []
        for r in todo:
            rf = r.row_filter(self)
            if rf is None or any(real.get(c, c.lower()) in leading for c in rf.index_cols):
                alone.append(r)
            else:
                cand.append((r, rf))
        if len(cand) < 2:
            return alone + [r for r, _ in cand], []
        return alone, cand

    def q_shared_pass(self, shared) -> Select:
        """One select over the operations table for several row-filter kinds: ``scope, key``, a flag
        ``f<i>`` per kind and each kind's columns as ``r<i>_<name>``, where any condition holds."""
        l = self.l
        one: ColumnElement = literal_column("1")
        zero: ColumnElement = literal_column("0")
        cols = [l.scope_expr.label("scope"), l.key_expr.label("key"), l.kind_expr.label("op_kind")]
        for i, (_r, rf) in enumerate(shared):
            cols.append(case((rf.cond, one), else_=zero).label(f"f{i}"))
            cols += [x.label(f"r{i}_{n}") for n, x in rf.cols.items()]
        return select(*cols).select_from(l.ops).where(or_(*[rf.cond for _r, rf in shared]))

    def _shared_pass(self, c, shared, op_kinds: dict | None = None) -> dict[FindingKind, list[Finding]]:
        per: list[list] = [[] for _ in shared]
        names = [list(rf.cols) for _r, rf in shared]
        for q in self.restrict([self.q_shared_pass(shared)]):
            for row in c.execute(q):
                m = row._mapping
                if op_kinds is not None:  # the operation's kind, for weighing (no look-up later)
                    op_kinds[(m["scope"], m["key"])] = m["op_kind"]
                for i in range(len(shared)):
                    if int(m[f"f{i}"] or 0):
                        per[i].append(_Row(scope=m["scope"], key=m["key"], **{n: m[f"r{i}_{n}"] for n in names[i]}))
        return {r.kind: r.shape(self, rows) for (r, _rf), rows in zip(shared, per, strict=False)}

    # ------------------------------------------------------------------ key sets (for filters)

    def keys_with(self, kinds: Iterable[FindingKind], distinct: bool = True) -> Select | CompoundSelect:
        """A select of distinct ``scope, key`` rows of operations carrying any of ``kinds`` (used as
        the grid's and the export's finding filter). ``distinct=False`` allows repeated rows (enough
        for ``IN``, and it spares the engine a de-duplication that can steer it to a whole-table scan).
        A kind this ledger cannot check (:func:`not_checkable`) adds no row and is never queried."""
        parts = []
        skip = not_checkable(self.l)
        for k in kinds:
            if k in skip:
                continue
            for q in registry.rule(k).selects(self):
                s = q.subquery()
                parts.append(select(s.c.scope, s.c.key))
        if not parts:
            return select(literal_column("''").label("scope"), literal_column("''").label("key")).where(
                literal_column("1") == literal_column("0")
            )
        if len(parts) > 1:
            return union(*parts) if distinct else union_all(*parts)
        return parts[0].distinct() if distinct else parts[0]

    # ------------------------------------------------------------------------------ running

    def run(
        self,
        kinds: Iterable[FindingKind] | None = None,
        flt: Filter | None = None,
        *,
        timeout_s: float | None | object = INTERACTIVE,
    ) -> list[Finding]:
        """All findings of ``kinds`` (default: every registered kind), ordered by kind (registry
        order), then scope and key.

        ``flt`` restricts the findings to the operations it matches, in SQL (each kind's query runs
        with ``(scope, key) IN (filtered operations)``): a finding filter or a time window does not
        wait for the whole ledger's scan. ``timeout_s``: see :meth:`iter_run`."""
        out: list[Finding] = []
        for _kind, fs in self.iter_run(kinds, flt, timeout_s=timeout_s):
            out.extend(fs)
        return out

    def iter_run(
        self,
        kinds: Iterable[FindingKind] | None = None,
        flt: Filter | None = None,
        *,
        timeout_s: float | None | object = INTERACTIVE,
    ) -> Iterator[tuple[FindingKind, list[Finding]]]:
        """Like :meth:`run`, one ``(kind, findings)`` pair at a time as each kind is done (report
        order; each list sorted by scope, key), so a caller can write or show them as they come.

        ``timeout_s``: :data:`INTERACTIVE` (default) keeps the engine's interactive statement timeout;
        a number of seconds bounds each statement instead, ``None`` sets no bound (batch work: a CLI
        scan runs until done or cancelled). Database errors propagate (a stopped statement raises
        ``sqlalchemy.exc.OperationalError``)."""
        wanted = set(kinds) if kinds is not None else None
        # Kinds this ledger cannot have (backend, layout or schema: not_checkable) are not queried at all.
        skip = not_checkable(self.l)
        todo = [r for r in registry.rules() if (wanted is None or r.kind in wanted) and r.kind not in skip]
        self._profile = None
        self.flt = flt if flt is not None and not flt.is_empty() else None
        interactive = self.l
        if timeout_s is not INTERACTIVE:
            self.l = for_batch(self.l, timeout_s)  # type: ignore[arg-type]
        try:
            with self.l.engine.connect() as c:
                # SQLite groups one table through its (scope, key) index without sorting, which a UNION
                # cannot: there the per-kind queries are as fast as the profile (measured at 1M operations).
                use = self.use_profile if self.use_profile is not None else self.l.dialect != "sqlite"
                flags = {r.profile_flag for r in todo if r.profile_flag}
                # Worth it when it replaces at least two kinds' passes (the GUI runs kinds one by one).
                if use and self.flt is None and len(flags) >= 2:
                    q = self.q_key_profile()
                    if q is not None:
                        # the registered rules' flags that the profile computes (is_<flag> columns)
                        cols = set(q.selected_columns.keys())
                        prof: dict[str, set] = {f: set() for f in registry.profile_flags() if "is_" + f in cols}
                        for r in c.execute(q):
                            m = r._mapping
                            for f in prof:
                                if int(m["is_" + f]):
                                    prof[f].add((r.scope, r.key))
                        self._profile = prof
                self.intent_cands = None
                if {K.DUPLICATE_INTENT, K.UNRESOLVED_FAILURE} & {r.kind for r in todo}:
                    ik = packed_intent_key(self.l)
                    if intent_pass.usable(self, c, ik):
                        self.intent_cands = intent_pass.candidates(self, c, ik)
                alone, shared = self._plan_passes(todo)
                shared_kinds = {r.kind for r, _rf in shared}
                shared_out: dict[FindingKind, list[Finding]] | None = None
                op_kinds: dict = {}  # (scope, key) -> operation kind, shared by every kind's weighing
                self.op_kinds = op_kinds  # rows that carry it fill it (rule_base.fetch_all)
                for rule in todo:
                    if rule.kind in shared_kinds:
                        if shared_out is None:
                            shared_out = self._shared_pass(c, shared, op_kinds)
                        fs = shared_out.pop(rule.kind)
                    else:
                        fs = rule.run(self, c)
                    # one post-step for every rule: action class, its severity, regulated (DESIGN §5.1)
                    weigh(self.l, c, fs, op_kinds)
                    fs.sort(key=lambda f: (f.scope, f.key, f.explanation))
                    yield rule.kind, fs
        finally:
            self.flt = None
            self.intent_cands = None
            self.op_kinds = None
            self.l = interactive


def not_checkable(ledger: Ledger) -> dict[FindingKind, str]:
    """The finding kinds ``ledger`` cannot have or show, each with the reason in plain words, in report
    order: the one list the scan runs by (a kind listed here is never queried) and reports (the scan
    JSON's ``not_checkable``, the GUI's chips, a report). It is what each registered kind says it needs
    from the ledger (:meth:`FindingRule.not_checkable`: a mapped field, an attempts table, the schema's
    UNIQUE constraint — absent from a dump, so a dump checks what its database could rule out), then
    what the ledger's source declares, whose reason wins (``ledger.source.not_checkable``: the backend's
    declaration, :meth:`idemview.backends.base.Backend.not_checkable`, with the layout's own, e.g.
    ``deletes_completed``)."""
    out = {}
    for r in registry.rules():
        why = r.not_checkable(ledger)
        if why:
            out[r.kind] = why
    out.update(ledger.source.not_checkable)
    return out


class _Row:
    """One rule's view of a shared-pass row: ``scope``, ``key`` and that rule's columns."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def scan(ledger: Ledger, now: datetime | None = None, kinds=None) -> list[Finding]:
    """Convenience: all findings of ``ledger`` at ``now`` (default: the current time, UTC)."""
    return FindingEngine(ledger, now or datetime.now(UTC)).run(kinds)


# A filter on finding kinds is compiled here, not in the ledger (which never imports the findings).
use_finding_clause(lambda ledger, kinds, now: keysets.finding_clause(FindingEngine(ledger, now), kinds))
