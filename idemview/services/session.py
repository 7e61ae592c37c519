"""An open ledger as the GUI holds it, and the functions that open and read it (run on workers).

Everything here that touches the database is called from a :class:`~idemview.qt.workers.Runner` job,
never from the GUI thread. Values are masked *before* they reach a view: rows arrive as
:class:`OpRow` objects whose display strings went through the session's one :class:`SharedMasker`,
while the raw (scope, key) stays inside for the next query and is never painted.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Engine

from idemview.backends.base import fit_layout  # noqa: F401 - importable from here, as before
from idemview.config import new_masker
from idemview.domain.filters import Filter
from idemview.domain.model import SEVERITY_ORDER, Attempt, Finding, FindingKind, Operation, Severity, Status
from idemview.findings.engine import FindingEngine
from idemview.ledger.connect import session_is_read_only
from idemview.ledger.reader import Histogram, Ledger, Page, find_operations, histogram, time_span
from idemview.masking.visible import visible
from idemview.services.cancel import CancelToken

# Opening lives in idemview.services.opener (the one opener); these names stay importable from here.
from idemview.services.opener import OpenSpec, open_source, password_needed, spec_for_connection, spec_for_target  # noqa: F401, E402

UTC = UTC


class SharedMasker:
    """The one :class:`idemview.masking.masker.Masker` of a GUI session, shared by worker threads.

    The Masker's own caches and counts are not thread-safe, and equal values must get equal tags
    across every view (grid, detail, clipboard), so one instance is used behind a lock."""

    def __init__(self):
        import secrets

        # The session's tag key: random, kept in memory only (never stored, logged or pickled). It is
        # shared with an export started from this window and with the findings process, so a tag on
        # screen is the same tag in the file (DESIGN §6: "equal within one session or export").
        self.__key = secrets.token_bytes(32)
        self._m = new_masker(key=self.__key)
        self._lock = threading.Lock()

    def export_masker(self):
        """A fresh :class:`Masker` with this session's key: same tags as the screen, counts of its own
        (an export's manifest counts only what that export masked)."""
        return new_masker(key=self.__key)

    def process_key(self) -> bytes:
        """The session key, for a child process of this session (sent over its pipe, never stored)."""
        return self.__key

    def value(self, v: Any, column: str | None = None) -> Any:
        """A value masked; a text result also through the display sink (structures are rendered, and
        sunk, by the view that shows them)."""
        with self._lock:
            out = self._m.mask_value(v, column)
        return visible(out, "\n\t") if isinstance(out, str) else out

    def text(self, v: Any, column: str | None = None) -> str:
        """A cell as display text, masked (``—`` for NULL)."""
        if v is None:
            return "—"
        with self._lock:
            out = self._m.mask_value(v if isinstance(v, str) else str(v), column)
        return visible(out)  # the display sink: control, bidi and invisible characters escaped

    def free_text(self, s: str) -> str:
        """Free text the GUI shows (explanations, banners, status lines): every detector, plus what
        messages need — secrets this process knows and ``user:password@host`` shapes (issue #9)."""
        with self._lock:
            return visible(self._m.mask_message(s), "\n\t")

    def is_credential(self, column: str | None, value: Any) -> bool:
        with self._lock:
            return self._m.is_credential(column, value)


@dataclass
class OpRow:
    """One grid row: masked display strings plus the raw identity (used only to query)."""

    scope_raw: str
    key_raw: str
    row_id: Any
    key: str
    scope: str
    kind: str
    status: Status
    raw_status: str
    created_at: datetime | None
    expires_at: datetime | None
    attempts: int | None
    intent: str
    findings: list[Finding] = field(default_factory=list)


@dataclass
class Opened:
    engine: Engine
    ledger: Ledger
    read_only: bool
    n_ops: int
    n_att: int
    span: tuple[datetime | None, datetime | None]
    detection: str  # how the layout was chosen, in words (confidence + reason when detected)
    where: str  # safe URL (no user, no password)
    # raw status / outcome values the layout does not map, with counts (Ledger.unmapped_counts)
    unmapped: dict[str, dict[str, int]] = field(default_factory=lambda: {"status": {}, "outcome": {}})
    tunnel: Any = None  # the SSH tunnel (idemview.ledger.tunnel.Tunnel) the ledger is read through; None: direct

    def close(self) -> None:
        """Release the connections and close the SSH tunnel (the tab closes)."""
        self.engine.dispose()
        if self.tunnel is not None:
            self.tunnel.close()


def unmapped(ledger: Ledger) -> dict[str, dict[str, int]]:
    """Raw status / outcome values the layout does not map, with counts (run on a worker): see
    :meth:`idemview.ledger.reader.Ledger.unmapped_counts`."""
    return ledger.unmapped_counts()


def open_ledger(spec: OpenSpec, token: CancelToken, *, basics: bool = True) -> Opened:
    """Open ``spec`` through the one opener (:func:`idemview.services.opener.open_source`: its backend,
    its SSH tunnel, its layout given or detected and fitted) and read what the GUI shows first: whether
    the session is read-only and the time span. ``basics=False`` leaves out the whole-table counts of a
    live database (``n_ops``/``n_att`` -1, no unmapped values): the GUI asks for them with
    :func:`ledger_basics` after the first page (issue 11 §3: first rows); a snapshot counts its own
    rows at once. The SSH tunnel is kept in ``Opened.tunnel`` and closed by :meth:`Opened.close`."""
    o = open_source(spec, token)
    try:
        ledger = o.ledger
        token.check()
        ro = session_is_read_only(o.engine)
        um: dict[str, dict[str, int]] = {"status": {}, "outcome": {}}
        if ledger.source.is_snapshot:  # counted in memory; the raw values were read by the snapshot
            n_ops, n_att = ledger.counts()
        else:
            n_ops, n_att, um = ledger_basics(ledger) if basics else (-1, -1, um)
        span = time_span(ledger)
        token.check()
    except BaseException:
        o.close()
        raise
    return Opened(o.engine, ledger, ro, n_ops, n_att, span, o.detection, o.where, unmapped=um, tunnel=o.tunnel)


def ledger_basics(ledger: Ledger) -> tuple[int, int, dict[str, dict[str, int]]]:
    """(operations, attempts, unmapped raw values) of the whole ledger: full-table counts (run on a
    worker; on millions of rows they take longer than the first page). One aggregate pass per table
    (:func:`idemview.ledger.queries.ledger_basics`)."""
    from idemview.ledger.queries import ledger_basics as _basics

    b = _basics(ledger, unknown_times=False)
    return b.operations, b.attempts, b.unmapped


@dataclass
class FindingsResult:
    now: datetime
    findings: list[Finding]
    by_ref: dict[tuple[str, str], list[Finding]]
    counts: dict[FindingKind, int]
    unsupported: dict[FindingKind, str]
    explanations: dict[int, str]  # id(finding) -> masked explanation
    ordered: list[Finding] = field(default_factory=list)  # most severe first (F8 order)
    markers: list[Finding] = field(default_factory=list)  # what the overview draws (bounded)
    kind_rows: list[tuple] = field(default_factory=list)  # (kind, worst severity, operations) per kind


def kind_summary(findings: list[Finding]) -> list[tuple]:
    """(kind, most severe severity, distinct operations) for every kind, in one pass (run on a worker:
    a big ledger carries tens of thousands of findings)."""
    from idemview.domain.model import DEFAULT_SEVERITY, LEDGER_KINDS

    sev: dict[FindingKind, Severity] = {}
    refs: dict[FindingKind, set] = {k: set() for k in FindingKind}
    for f in findings:
        # a ledger finding has no operation: each one (a column) counts
        refs[f.kind].add((f.scope, f.key) if f.kind not in LEDGER_KINDS else (f.column, id(f)))
        if f.kind not in sev or SEVERITY_ORDER[f.severity] < SEVERITY_ORDER[sev[f.kind]]:
            sev[f.kind] = f.severity
    return [(k, sev.get(k, DEFAULT_SEVERITY[k]), len(refs[k])) for k in FindingKind]


def scan(
    ledger: Ledger, masker: SharedMasker, now: datetime, token: CancelToken, kinds: list[FindingKind] | None = None
) -> FindingsResult:
    """Findings of ``kinds`` (default all) for ``now``; explanations masked."""
    fe = FindingEngine(ledger, now)
    fs = fe.run(kinds)
    token.check()
    return merge_findings(fe.now, fs, fe.unsupported(), {id(f): masker.free_text(f.explanation) for f in fs})


def merge_findings(
    now: datetime, fs: list[Finding], unsupported: dict[FindingKind, str], explanations: dict[int, str]
) -> FindingsResult:
    by_ref: dict[tuple[str, str], list[Finding]] = {}
    counts: dict[FindingKind, int] = {k: 0 for k in FindingKind}
    for f in fs:
        by_ref.setdefault((f.scope, f.key), []).append(f)
        counts[f.kind] += 1
    for lst in by_ref.values():
        lst.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    ordered = sorted(fs, key=lambda f: (SEVERITY_ORDER[f.severity], f.kind.value, f.at.timestamp() if f.at else 0))
    # The overview shows at most MARKERS findings with a time, most severe first, never info (expired
    # keys are many and old); chosen here, on the worker, so the GUI thread only draws.
    markers = [f for f in ordered if f.at is not None and f.severity != Severity.INFO][:MARKERS]
    return FindingsResult(now, fs, by_ref, counts, unsupported, explanations, ordered, markers, kind_summary(fs))


MARKERS = 2000


@dataclass
class FilteredFindings:
    """The findings of the operations a filter shows (issue #13: counts follow the filter everywhere).

    ``counts[kind]`` / ``ops[kind]``: findings / distinct operations of each kind among the operations
    the filter *without its finding chips* shows (so each chip says how many of its kind are in the time
    window, status, key… chosen); ``totals`` the same over the whole ledger. ``ordered`` (F8) and
    ``markers`` (the overview) are the findings of the rows shown: the filter's operations, and of the
    chosen kinds when chips are checked. ``base_filtered``: the filter narrows more than finding kinds
    (then counts are "7 of 63")."""

    counts: dict[FindingKind, int]
    ops: dict[FindingKind, int]
    totals: dict[FindingKind, int]
    total_ops: dict[FindingKind, int]
    ordered: list[Finding]
    markers: list[Finding]
    kind_rows: list[tuple]
    base_filtered: bool
    n_findings: int
    n_total: int


def _base_filter(flt: Filter) -> Filter:
    return flt.without(findings=True)


def refs_in_filter(
    ledger: Ledger, flt: Filter, now: datetime, refs, token: CancelToken | None = None, batch: int = 400
) -> set[tuple[str, str]]:
    """Which of ``refs`` ((scope, key) pairs) the filter ``flt`` shows, asked in SQL batches of
    ``batch`` keys (indexed look-ups by (scope, key); runs on a worker). Raises what the database
    raises."""
    from sqlalchemy import and_, or_
    from sqlalchemy import select as _select

    refs = list(refs)
    out: set[tuple[str, str]] = set()
    where = ledger.filter_clause(flt, now)
    se, ke = ledger.scope_expr, ledger.key_expr
    with ledger.engine.connect() as c:
        for i in range(0, len(refs), batch):
            if token is not None:
                token.check()
            part = refs[i : i + batch]
            # keys by scope: one IN per scope keeps the statement short and index-friendly
            by_scope: dict[Any, list] = {}
            for sc, k in part:
                by_scope.setdefault(sc, []).append(k)
            cond = or_(*[and_(se.is_(None) if sc is None else se == sc, ke.in_(ks)) for sc, ks in by_scope.items()])
            q = _select(se, ke).select_from(ledger.ops).where(and_(where, cond))
            for sc, k in c.execute(q):
                out.add((sc, k))
    return out


def findings_in_filter(
    ledger: Ledger | None, res: FindingsResult, flt: Filter, now: datetime, token: CancelToken | None = None
) -> FilteredFindings:
    """Narrow a scan's findings to what ``flt`` shows (see :class:`FilteredFindings`). Without a
    constraint other than finding kinds no query is made; otherwise only the operations that carry a
    finding are looked up, in SQL (:func:`refs_in_filter`). Runs on a worker."""
    base = _base_filter(flt)
    if base.is_empty() or ledger is None:
        inside = None
    else:
        inside = refs_in_filter(ledger, base, now, res.by_ref.keys(), token)
    fs = res.findings if inside is None else [f for f in res.findings if (f.scope, f.key) in inside]
    counts: dict[FindingKind, int] = {k: 0 for k in FindingKind}
    for f in fs:
        counts[f.kind] += 1
    rows = kind_summary(fs)
    ops = {k: n for k, _s, n in rows}
    total_ops = {k: n for k, _s, n in (res.kind_rows or kind_summary(res.findings))}
    chosen = set(flt.findings)
    walk = [f for f in fs if not chosen or f.kind in chosen]
    ordered = sorted(walk, key=lambda f: (SEVERITY_ORDER[f.severity], f.kind.value, f.at.timestamp() if f.at else 0))
    markers = [f for f in ordered if f.at is not None and f.severity != Severity.INFO][:MARKERS]
    # the panel keeps the whole-ledger worst severity per kind, so a glyph never changes with a filter
    sev = {k: s for k, s, _n in (res.kind_rows or kind_summary(res.findings))}
    kind_rows = [(k, sev.get(k, s), n) for k, s, n in rows]
    return FilteredFindings(
        counts,
        ops,
        dict(res.counts),
        total_ops,
        ordered,
        markers,
        kind_rows,
        not base.is_empty(),
        len(fs),
        len(res.findings),
    )


def to_rows(
    ops: list[Operation], masker: SharedMasker, by_ref: dict[tuple[str, str], list[Finding]] | None
) -> list[OpRow]:
    out = []
    for op in ops:
        out.append(
            OpRow(
                scope_raw=op.scope,
                key_raw=op.key,
                row_id=op.row_id,
                key=masker.text(op.key, "idempotency_key"),
                scope=masker.text(op.scope, "scope") if op.scope else "",
                kind=masker.text(op.kind, "kind") if op.kind else "",
                status=op.status,
                raw_status=masker.text(op.raw_status, "status"),
                created_at=op.created_at,
                expires_at=op.expires_at,
                attempts=op.attempt_count,
                intent=masker.text(op.intent_ref, "intent_ref") if op.intent_ref else "",
                findings=list((by_ref or {}).get((op.scope, op.key), [])),
            )
        )
    return out


#: Above this many operations a finding filter is asked in SQL again rather than as a key list.
SCANNED_REFS_MAX = 5000
_refs_cache: dict[str, Any] = {}
_refs_lock = threading.Lock()


def scanned_refs(res: FindingsResult | None, flt: Filter, now: datetime | None) -> list[tuple[str, str]] | None:
    """The (scope, key) of the operations with findings of ``flt.findings``, taken from a scan that
    already answered (``res`` for the same ``now``, every chosen kind complete), or None: then the
    filter runs the findings' SQL. A list of at most :data:`SCANNED_REFS_MAX` keys is looked up through
    the key index, where the findings' SQL may walk a whole table (Celery's ``status`` has no index).
    Runs on a worker (one pass over the scan's operations; the last answer is kept)."""
    if not flt.findings or res is None or now is None or res.now != now:
        return None
    kinds = frozenset(flt.findings)
    if any(k in res.unsupported for k in kinds):  # still scanning, failed, or not checkable
        return None
    with _refs_lock:
        if _refs_cache.get("res") is res and _refs_cache.get("kinds") == kinds:
            return _refs_cache["refs"]
    refs = [ref for ref, fs in res.by_ref.items() if any(f.kind in kinds for f in fs)]
    out = refs if len(refs) <= SCANNED_REFS_MAX else None
    with _refs_lock:
        _refs_cache.update(res=res, kinds=kinds, refs=out)
    return out


class _RefsFiltered:
    """``ledger`` whose :meth:`filter_clause` replaces the finding kinds of a filter by a list of
    (scope, key) (see :func:`scanned_refs`); everything else is the ledger's own."""

    def __init__(self, ledger: Ledger, refs: list[tuple[str, str]]):
        self._ledger, self._refs = ledger, refs

    def __getattr__(self, name):
        return getattr(self._ledger, name)

    def filter_clause(self, flt: Filter | None, now: datetime | None = None):
        from dataclasses import replace

        from sqlalchemy import and_, false, or_

        led = self._ledger
        base = led.filter_clause(replace(flt, findings=[]) if flt is not None else None, now)
        if not self._refs:
            return and_(base, false())
        se, ke = led.scope_expr, led.key_expr
        by_scope: dict[Any, list] = {}
        for sc, k in self._refs:
            by_scope.setdefault(sc, []).append(k)
        cond = or_(*[and_(se.is_(None) if sc is None else se == sc, ke.in_(ks)) for sc, ks in by_scope.items()])
        return and_(base, cond)


@dataclass
class GridPage:
    """One grid page as :func:`fetch_grid_page` reads it: masked ``rows``, the ``cursor`` of the next
    page (``None`` after the last) and the cursors of its ``first`` and ``last`` row (``None`` when
    empty) to read the same stretch again, bounded (:meth:`Ledger.page`'s ``start`` / ``end``)."""

    rows: list[OpRow]
    cursor: tuple | None
    first: tuple | None
    last: tuple | None


def fetch_grid_page(
    ledger: Ledger,
    masker: SharedMasker,
    flt: Filter,
    sort: str,
    descending: bool,
    after: tuple | None,
    limit: int,
    now: datetime,
    by_ref: dict | None,
    scanned: FindingsResult | None = None,
    *,
    start: tuple | None = None,
    end: tuple | None = None,
) -> GridPage:
    """One grid page, ``after`` a cursor and between the inclusive row cursors ``start`` and ``end``
    (each optional). With ``scanned`` (the tab's scan) a finding filter uses the scan's answer when
    it has one (:func:`scanned_refs`) instead of running the findings' SQL again for every page."""
    refs = scanned_refs(scanned, flt, now)
    led: Any = ledger if refs is None else _RefsFiltered(ledger, refs)
    page: Page = Ledger.page(
        led,
        flt,
        sort=sort,
        descending=descending,
        after=after,
        limit=limit,
        now=now,
        payloads=False,
        start=start,
        end=end,
    )
    return GridPage(to_rows(page.rows, masker, by_ref), page.cursor, page.first, page.last)


def fetch_page(
    ledger: Ledger,
    masker: SharedMasker,
    flt: Filter,
    sort: str,
    descending: bool,
    after: tuple | None,
    limit: int,
    now: datetime,
    by_ref: dict | None,
    scanned: FindingsResult | None = None,
) -> tuple[list[OpRow], tuple | None]:
    """One grid page as ``(rows, cursor of the next page)`` (:func:`fetch_grid_page` without bounds)."""
    g = fetch_grid_page(ledger, masker, flt, sort, descending, after, limit, now, by_ref, scanned)
    return g.rows, g.cursor


def count_matching(ledger: Ledger, flt: Filter, now: datetime, scanned: FindingsResult | None = None) -> int:
    """How many operation records ``flt`` shows (a finding filter answered as :func:`fetch_page` does)."""
    from sqlalchemy import func as _f
    from sqlalchemy import select as _select

    refs = scanned_refs(scanned, flt, now)
    led: Any = ledger if refs is None else _RefsFiltered(ledger, refs)
    with ledger.engine.connect() as c:
        return int(
            c.execute(_select(_f.count()).select_from(ledger.ops).where(led.filter_clause(flt, now))).scalar() or 0
        )


@dataclass
class EffectCounts:
    """Effect records per operation of one grid page (issue #16 §4): ``counts[(scope, key)]``, and
    ``where`` they were counted ("charges (sqlite demo-effects.db)")."""

    counts: dict[tuple[str, str], int]
    where: str
    queries: int  # statements it took: 1, or 2 when links are read from the ledger's own database first


def effects_where(ledger: Ledger) -> str:
    """Where the layout's effect records are read, in words ("" without effects). No query."""
    if ledger.effects is None:
        return ""
    fx = ledger.effects.describe()
    return f"{fx['table']} ({fx['dialect']} {fx['database'] or fx['host']})"


def effect_counts(ledger: Ledger, refs, token: CancelToken | None = None) -> EffectCounts:
    """How many effect records each operation in ``refs`` ((scope, key) pairs, one grid page) has —
    the count the detail pane lists (:meth:`EffectSource.records_of_operation`), for a whole page at
    once: one grouped count over the page's links (``GROUP BY link`` with an ``IN`` list the link
    index serves). When the effects link on the idempotency key the links are the keys; otherwise the
    page's links are read first from the operations table (one more statement). Runs on a worker."""
    from sqlalchemy import and_, or_
    from sqlalchemy import select as _select

    refs = list(dict.fromkeys(refs))
    fx = ledger.effects
    if fx is None or not refs:
        return EffectCounts({}, effects_where(ledger), 0)
    queries = 0
    links_of: dict[tuple[str, str], set[str]] = {}
    if fx.spec.link_operation == "key":
        links_of = {(sc, k): {k} for sc, k in refs if k is not None}
    else:
        se, ke = ledger.scope_expr, ledger.key_expr
        by_scope: dict[Any, list] = {}
        for sc, k in refs:
            by_scope.setdefault(sc, []).append(k)
        cond = or_(*[and_(se.is_(None) if sc is None else se == sc, ke.in_(ks)) for sc, ks in by_scope.items()])
        q = (
            _select(se, ke, fx.operation_link)
            .select_from(ledger.ops)
            .where(cond, fx.operation_link.is_not(None))
            .distinct()
        )
        with ledger.engine.connect() as c:
            for sc, k, link in c.execute(q):
                links_of.setdefault((sc, k), set()).add(link)
        queries += 1
    if token is not None:
        token.check()
    links = sorted({x for s in links_of.values() for x in s})
    per_link: dict[str, int] = {}
    if links:
        gq = fx.grouped_select().where(fx.link.in_(links))
        with fx.engine.connect() as c:
            for r in c.execute(gq):
                per_link[r.link] = int(r.n)
        queries += 1
    counts = {ref: sum(per_link.get(x, 0) for x in links_of.get(ref, ())) for ref in refs}
    return EffectCounts(counts, effects_where(ledger), queries)


@dataclass
class Detail:
    """An operation opened in the detail pane: records, attempts, findings (all masked for display)."""

    scope_raw: str
    key_raw: str
    records: list[Operation]  # masked copies
    attempts: list[Attempt]  # masked copies
    findings: list[Finding]
    explanations: dict[int, str]
    window_s: float | None
    lock_timeout_s: float | None
    effects: list = field(default_factory=list)  # EffectRecord, masked copies (issue #16)
    effects_where: str = ""  # where they were read: "charges (sqlite demo-effects.db)"; "" without effects
    effects_problem: str = ""  # why a layout's [effects] section could not be read ("" when fine or absent)
    # what is known of its findings (services.findstate.OpFindings): pending / none / these. None: the
    # caller did not say, and the pane then says "pending" rather than "none" (issue 20 §1)
    state: Any = None


def _mask_effect(e, m: SharedMasker):
    from dataclasses import replace

    return replace(
        e,
        link=m.text(e.link, "link"),
        reference=m.value(e.reference, "reference"),
        record_id=m.value(e.record_id, "id"),
        shown={k: m.value(v, k) for k, v in e.shown.items()},
    )


def _mask_op(op: Operation, m: SharedMasker) -> Operation:
    from dataclasses import replace

    return replace(
        op,
        scope=m.text(op.scope, "scope") if op.scope else "",
        key=m.text(op.key, "idempotency_key"),
        kind=m.value(op.kind, "kind"),
        raw_status=m.value(op.raw_status, "status"),
        fingerprint=m.value(op.fingerprint, "fingerprint"),
        intent_ref=m.value(op.intent_ref, "intent_ref"),
        effect_ref=m.value(op.effect_ref, "effect_ref"),
        request=m.value(op.request, "request"),
        response=m.value(op.response, "response"),
        error=m.value(op.error, "error"),
    )


def _mask_att(a: Attempt, m: SharedMasker) -> Attempt:
    from dataclasses import replace

    return replace(
        a,
        scope="",
        key="",
        raw_outcome=m.value(a.raw_outcome, "outcome"),
        error=m.value(a.error, "error"),
        effect_ref=m.value(a.effect_ref, "effect_ref"),
        worker=m.value(a.worker, "worker"),
    )


def load_detail(
    ledger: Ledger,
    masker: SharedMasker,
    scope: str,
    key: str,
    findings: list[Finding],
    explanations: dict[int, str],
    state: Any = None,
) -> Detail:
    """One operation for the detail pane (records, attempts, effect records; masked), run on a worker.
    ``state``: its :class:`~idemview.services.findstate.OpFindings` from the tab's finding board."""
    recs = ledger.records(scope, key)
    atts = ledger.attempts(scope, key, recs)
    recs.sort(key=lambda o: (o.created_at is None, o.created_at or datetime.max.replace(tzinfo=UTC)))
    effects, where = [], ""
    problem = (ledger.effects_problem or "") if ledger.layout.effects is not None else ""
    if ledger.effects is not None:
        where = effects_where(ledger)
        effects = [_mask_effect(e, masker) for e in ledger.effects.records_of_operation(scope, key)]
    return Detail(
        scope,
        key,
        [_mask_op(r, masker) for r in recs],
        [_mask_att(a, masker) for a in atts],
        findings,
        explanations,
        ledger.layout.window_seconds(),
        ledger.lock_timeout_s,
        effects,
        where,
        problem,
        state,
    )


def overview(
    ledger: Ledger, start: datetime, end: datetime, flt: Filter, now: datetime, buckets: int = 120
) -> Histogram:
    # The overview ignores the filter's own time bounds: it is where those bounds are chosen.
    f = flt.without(times=True)
    return histogram(ledger, start, end, buckets=buckets, flt=f, now=now)


def filtered_span(ledger: Ledger, flt: Filter, now: datetime) -> tuple[datetime | None, datetime | None]:
    """(earliest, latest) ``created_at`` of the operations ``flt`` shows (one min/max query, on a
    worker); ``(None, None)`` when none match or the layout has no creation time."""
    from sqlalchemy import func as _f
    from sqlalchemy import select as _select

    from idemview.ledger.times import from_epoch

    if "created_at" not in ledger.epoch:
        return None, None
    e = ledger.epoch["created_at"]
    with ledger.engine.connect() as c:
        lo, hi = c.execute(
            _select(_f.min(e), _f.max(e)).select_from(ledger.ops).where(ledger.filter_clause(flt, now))
        ).one()
    return from_epoch(lo), from_epoch(hi)


@dataclass
class SearchHit:
    ledger_name: str
    tab_index: int
    scope_raw: str
    key_raw: str
    key: str
    scope: str
    status: Status
    kind: str
    intent: str
    created_at: datetime | None
    findings: list[Finding] = field(default_factory=list)  # most severe first
    # the tab's FindingBoard when the search was given one: views ask it live (pending turns into the
    # answer when that ledger's scan lands, issue 20 §1); ``findings`` is the answer at search time
    board: Any = None


def search(
    ledger: Ledger,
    masker: SharedMasker,
    text: str,
    tab_index: int,
    name: str,
    by_ref: dict[tuple[str, str], list[Finding]] | None = None,
) -> list[SearchHit]:
    """Operations whose idempotency key or intent reference contains ``text`` (at most 50, masked),
    each with its findings from ``by_ref`` (the tab's last scan). Runs on a worker."""
    ops = find_operations(ledger, text, limit=50)
    seen, out = set(), []
    for op in ops:
        if (op.scope, op.key) in seen:
            continue
        seen.add((op.scope, op.key))
        out.append(
            SearchHit(
                name,
                tab_index,
                op.scope,
                op.key,
                masker.text(op.key, "idempotency_key"),
                masker.text(op.scope, "scope") if op.scope else "",
                op.status,
                masker.text(op.kind, "kind") if op.kind else "",
                masker.text(op.intent_ref, "intent_ref") if op.intent_ref else "",
                op.created_at,
                list((by_ref or {}).get((op.scope, op.key), None) or []),
                by_ref if hasattr(by_ref, "state_of") else None,
            )
        )
    return out


def severity_of(fs: list[Finding]) -> Severity | None:
    return min((f.severity for f in fs), key=lambda s: SEVERITY_ORDER[s], default=None)


# ------------------------------------------------------------------------------ reveal one cell


class RevealRefused(Exception):
    """A value that may not (or cannot) be revealed; the message is plain words, never the value."""


#: Operation fields the GUI may reveal, with the column name masking knows them by.
OP_REVEAL = {
    "key": "idempotency_key",
    "scope": "scope",
    "kind": "kind",
    "raw_status": "status",
    "fingerprint": "fingerprint",
    "intent_ref": "intent_ref",
    "effect_ref": "effect_ref",
}
#: Attempt fields the GUI may reveal.
ATT_REVEAL = {"worker": "worker", "effect_ref": "effect_ref", "error": "error", "raw_outcome": "outcome"}
CREDENTIAL_TOOLTIP = "credentials are never revealed"


def reveal_state(shown: str | None) -> tuple[bool, str]:
    """Whether a cell shown as ``shown`` (masked text) offers "Reveal this value", and the tooltip.
    Decided from the tags' kinds, so the menu needs no raw value; :func:`reveal_value` checks again
    with :meth:`Masker.is_credential` on the raw value before anything is shown."""
    from idemview.masking.masker import CREDENTIAL_KINDS, TAG_RE

    tags = TAG_RE.findall(shown or "")
    if not tags:
        return False, "nothing is masked here"
    if any(t[1 : t.index("#")] in CREDENTIAL_KINDS for t in tags):
        return False, CREDENTIAL_TOOLTIP
    return True, "Show this one value unmasked (read again from the database, never logged)"


def tag_at(text: str, pos: int) -> str | None:
    """The masking tag in ``text`` that spans position ``pos`` (a cursor), if any."""
    from idemview.masking.masker import TAG_RE

    for m in TAG_RE.finditer(text):
        if m.start() <= pos <= m.end():
            return m.group(0)
    return None


def _leaf_for_tag(masker: SharedMasker, value: Any, tag: str, name: str | None) -> tuple[str | None, Any] | None:
    """The smallest part of a parsed payload whose masked form carries ``tag``, with its field name."""
    if isinstance(value, dict):
        for k, v in value.items():
            hit = _leaf_for_tag(masker, v, tag, k if isinstance(k, str) else None)
            if hit is not None:
                return hit
    elif isinstance(value, (list, tuple)):
        for v in value:
            hit = _leaf_for_tag(masker, v, tag, name)
            if hit is not None:
                return hit
    if value is None or isinstance(value, (bytes, bytearray)):
        return None
    return (name, value) if tag in str(masker.value(value, name)) else None


def reveal_value(ledger: Ledger, masker: SharedMasker, scope: str, key: str, where: tuple, row_id: Any = None) -> str:
    """Re-read one operation and return one of its values unmasked (runs on a worker).

    ``where``: ``("op", field)`` (a field of :data:`OP_REVEAL`), ``("att", index, field)`` (an attempt
    as :func:`load_detail` orders them, a field of :data:`ATT_REVEAL`) or ``("payload", field, tag)``
    (the part of the request/response/error that carries ``tag``). ``row_id`` picks the record (else
    the first, as the detail pane shows it). Raises :class:`RevealRefused` for a credential
    (:meth:`Masker.is_credential`) or a value that is gone. The value is returned, never logged."""
    recs = ledger.records(scope, key)
    recs.sort(key=lambda o: (o.created_at is None, o.created_at or datetime.max.replace(tzinfo=UTC)))
    rec = next((r for r in recs if r.row_id == row_id), None) if row_id is not None else None
    rec = rec or (recs[0] if recs else None)
    if rec is None:
        raise RevealRefused("this operation is no longer in the ledger")
    if where[0] == "op" and where[1] in OP_REVEAL:
        column, raw = OP_REVEAL[where[1]], getattr(rec, where[1])
    elif where[0] == "att" and where[2] in ATT_REVEAL:
        atts = ledger.attempts(scope, key, recs)
        if not 0 <= where[1] < len(atts):
            raise RevealRefused("this attempt is no longer in the ledger")
        column, raw = ATT_REVEAL[where[2]], getattr(atts[where[1]], where[2])
    elif where[0] == "payload" and where[1] in ("request", "response", "error"):
        pl = getattr(rec, where[1])
        if pl is None or pl.encoding == "pickle":
            raise RevealRefused("nothing to reveal here")
        hit = _leaf_for_tag(masker, pl.value, where[2], where[1])
        if hit is None:
            raise RevealRefused("that value is no longer in this payload")
        column, raw = hit
    else:
        raise RevealRefused("this value cannot be revealed")
    if raw is None:
        raise RevealRefused("the value is NULL")
    if masker.is_credential(column, raw):
        raise RevealRefused(CREDENTIAL_TOOLTIP)
    if isinstance(raw, (dict, list)):
        import json

        return json.dumps(raw, ensure_ascii=False, default=str)
    return raw if isinstance(raw, str) else str(raw)


# ------------------------------------------------------------------------------- deep links


def deep_link(spec: OpenSpec, scope: str, key: str, *, layout: Any = None, now: datetime | None = None) -> str:
    """The shell command that opens this operation (``idemview open TARGET --key=KEY …``): see
    :mod:`idemview.services.links` (layout, ``now``, a saved connection's name; never a password)."""
    from idemview.services.links import deep_link as _link

    return _link(spec, scope, key, layout=layout, now=now).command()
