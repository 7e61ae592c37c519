"""Finding kinds too many to keep one by one (issue 11 §3: an aged ledger's million ``expired_key``).

The findings process sends such a kind compact (:mod:`idemview.services.scanproc`): its first
``DETAIL_MAX`` findings in full, the rest as (scope, key) lists in F8 order, and the exact numbers. Here
the tab keeps the rest as a :class:`CompactKind` and everything that used to walk a million
:class:`Finding` objects asks it instead:

- counts per kind and operations are the exact numbers (:func:`apply_compact`, :func:`narrow_compact`);
- the grid's Findings column (:func:`compact_findings` gives a row its badge);
- the finding filter runs the kind's own SQL (the scan's key list would be the first ``DETAIL_MAX``);
- F8 walks the detailed findings, then the keys (:class:`FindingWalk`, same order as before);
- the detail computes one operation's findings of the kind on demand (:func:`findings_of`).

Nothing here imports Qt; the functions that touch the database run on a worker.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from idemview.domain.filters import Filter
from idemview.domain.model import SEVERITY_ORDER, Finding, FindingKind, Severity
from idemview.services.packedrefs import ChunkedSequence, PackedRefs, RefChain, ref_hash
from idemview.services.session import FilteredFindings, FindingsResult, count_matching, findings_in_filter


class CompactKind:
    """The findings of one kind beyond the detailed ones: ``runs`` [(severity, references)] in F8 order
    (each a :class:`~idemview.services.packedrefs.RefChain` of packed chunks, never a list of tuples)
    and ``by_sev`` severity -> its packed chunks for look-ups; ``count`` / ``ops`` / ``worst`` the
    exact numbers of the whole kind (detailed ones included), set when its summary arrives (``complete``)."""

    def __init__(self, kind: FindingKind):
        self.kind = kind
        self.runs: list[tuple[Severity, RefChain]] = []
        self.by_sev: dict[Severity, list[PackedRefs]] = {}
        self.count = 0
        self.ops = 0
        self.worst: Severity | None = None
        #: findings of the whole kind per action class (DESIGN §5.1), from the summary
        self.by_action: dict[str, int] = {}
        self.complete = False

    def add(self, severity: Severity, refs: PackedRefs | Sequence[tuple[str, str]]) -> None:
        """One chunk from the process (owner's thread: two list appends)."""
        packed = refs if isinstance(refs, PackedRefs) else PackedRefs.pack(refs)
        if self.runs and self.runs[-1][0] == severity:
            self.runs[-1][1].append(packed)
        else:
            self.runs.append((severity, RefChain([packed])))
        self.by_sev.setdefault(severity, []).append(packed)

    def finish(self, summary: tuple) -> None:
        """The exact numbers: ``(findings, operations, worst severity[, {action class: findings}])``."""
        self.count, self.ops, self.worst = summary[:3]
        if len(summary) > 3:
            self.by_action = dict(summary[3])
        self.complete = True

    def severity_of(self, ref: tuple[str, str]) -> Severity | None:
        if not self.by_sev:
            return None
        h = ref_hash(ref)
        for sev, chunks in self.by_sev.items():
            if any(c.has_hash(h) for c in chunks):
                return sev
        return None

    def hashes(self):
        """The hashes of every key of this kind (a numpy ``uint64`` array, unsorted across chunks)."""
        import numpy as np

        parts = [c.hashes for chunks in self.by_sev.values() for c in chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype="<u8")

    def __len__(self) -> int:
        return sum(len(r) for _s, r in self.runs)

    @property
    def nbytes(self) -> int:
        """Bytes held by the packed keys (docs/benchmarks-history.md: what the GUI keeps of a compact kind)."""
        return sum(c.nbytes for chunks in self.by_sev.values() for c in chunks)

    def release(self) -> None:
        """Drop the keys (a newer scan replaced this one): a few large buffers, freed at once in
        microseconds (a list of a million tuples took ~0.25 s of the GIL to free)."""
        self.runs, self.by_sev = [], {}


def stub(kind: FindingKind, severity: Severity, ref: tuple[str, str]) -> Finding:
    """A finding as the grid and F8 need it (kind, severity, operation); its explanation and evidence
    are computed when the operation is opened (:func:`findings_of`)."""
    return Finding(kind, severity, ref[0], ref[1], "")


def compact_findings(compact: dict[FindingKind, CompactKind] | None, ref: tuple[str, str]) -> list[Finding]:
    """Stub findings of ``ref`` in the compact kinds (the grid's badge; [] when none)."""
    if not compact:
        return []
    out = []
    for k, c in compact.items():
        sev = c.severity_of(ref)
        if sev is not None:
            out.append(stub(k, sev, ref))
    return out


class FindingsByRef:
    """``by_ref`` (the detailed findings per (scope, key)) that also answers for the compact kinds'
    keys with stub findings: what a search hit's badges read (a hit beyond the first ``DETAIL_MAX``
    of a kind had none). Only ``get`` is offered, which is all :func:`to_rows` asks."""

    def __init__(self, by_ref: dict[tuple[str, str], list[Finding]], compact: dict[FindingKind, CompactKind] | None):
        self.by_ref, self.compact = by_ref, compact or {}

    def get(self, ref: tuple[str, str], default: Any = None) -> Any:
        found = list(self.by_ref.get(ref, ())) + compact_findings(self.compact, ref)
        return found if found else default

    def __bool__(self) -> bool:
        return True


def compact_kinds_of(compact: dict[FindingKind, CompactKind] | None, ref: tuple[str, str]) -> list[FindingKind]:
    return [f.kind for f in compact_findings(compact, ref)]


@dataclass
class CompactFindingsResult(FindingsResult):
    """A scan's merged findings where ``compact`` kinds keep only their first findings in ``findings``;
    ``counts`` and ``kind_rows`` are exact, ``n_findings`` / ``n_ops`` the exact totals."""

    compact: dict[FindingKind, CompactKind] = field(default_factory=dict)
    n_findings: int = 0
    n_ops: int = 0


def total_findings(res: FindingsResult) -> int:
    return res.n_findings if isinstance(res, CompactFindingsResult) else len(res.findings)


def total_operations(res: FindingsResult) -> int:
    return res.n_ops if isinstance(res, CompactFindingsResult) else len(res.by_ref)


def apply_compact(res: FindingsResult, compact: dict[FindingKind, CompactKind]) -> FindingsResult:
    """``res`` (merged from the detailed findings) with the exact numbers of the ``compact`` kinds
    (complete ones only). Runs on a worker: the one loop over the keys is plain Python, so the GIL
    passes to the GUI thread every few ms (no single long C call such as a sort or a set union)."""
    compact = {k: c for k, c in compact.items() if c.complete}
    if not compact:
        return res
    counts = dict(res.counts)
    detailed = {k: counts.get(k, 0) for k in compact}
    for k, c in compact.items():
        counts[k] = c.count
    kind_rows = [(k, compact[k].worst or s, compact[k].ops) if k in compact else (k, s, n) for k, s, n in res.kind_rows]
    n_findings = len(res.findings) + sum(c.count - detailed[k] for k, c in compact.items())
    seen = res.by_ref
    # distinct keys of the compact kinds not already among the detailed findings: one numpy pass over
    # the packed hashes (C, on this worker), not a set of a million tuples
    import numpy as np

    allh = np.unique(np.concatenate([c.hashes() for c in compact.values()]))
    seen_h = np.fromiter((ref_hash(r) for r in seen), dtype="<u8", count=len(seen))
    extra = len(allh) - int(np.isin(np.unique(seen_h), allh).sum())
    n_ops = len(seen) + extra
    return CompactFindingsResult(
        res.now,
        res.findings,
        res.by_ref,
        counts,
        res.unsupported,
        res.explanations,
        res.ordered,
        res.markers,
        kind_rows,
        compact=compact,
        n_findings=n_findings,
        n_ops=n_ops,
    )


class FindingWalk(ChunkedSequence[Finding]):
    """F8's order over detailed findings (``ordered``, sorted by severity, kind, ``at``) and compact
    tails [(kind, severity, refs)] (each after the detailed findings of its severity and kind), without
    building a million findings: an index into a tail makes a :func:`stub`."""

    def __init__(self, ordered: Sequence[Finding], tails: list[tuple[FindingKind, Severity, list]]):
        keys = [(SEVERITY_ORDER[f.severity], f.kind.value) for f in ordered]
        placed = sorted(
            ((bisect_right(keys, (SEVERITY_ORDER[s], k.value)), SEVERITY_ORDER[s], k.value, k, s, refs))
            for k, s, refs in tails
            if refs
        )
        self._segs: list[tuple[int, Any]] = []  # (start, list of findings | (kind, severity, refs))
        start = prev = 0
        for pos, _so, _kv, k, s, refs in placed:
            if pos > prev:
                self._segs.append((start, list(ordered[prev:pos])))
                start += pos - prev
                prev = pos
            self._segs.append((start, (k, s, refs)))
            start += len(refs)
        if prev < len(ordered):
            self._segs.append((start, list(ordered[prev:])))
            start += len(ordered) - prev
        self._len = start
        self._starts = [s for s, _ in self._segs]

    def _in_chunk(self, n: int, j: int) -> Finding:
        seg = self._segs[n][1]
        if isinstance(seg, list):
            return seg[j]
        k, s, refs = seg
        return stub(k, s, refs[j])

    def __iter__(self) -> Iterator[Finding]:
        for i in range(self._len):
            yield self[i]


def narrow_compact(ledger, res: FindingsResult, flt: Filter, now: datetime, token=None) -> FilteredFindings:
    """:func:`~idemview.services.session.findings_in_filter` with the compact kinds' exact numbers: the
    scan's when the filter narrows only finding kinds, else counted in SQL (operations of the kind
    that the filter shows). F8 walks the compact keys too when the filter narrows only finding kinds;
    under another filter it walks the detailed findings of the filtered operations. Runs on a worker."""
    ff = findings_in_filter(ledger, res, flt, now, token)
    if not isinstance(res, CompactFindingsResult) or not res.compact:
        return ff
    base = replace(flt, findings=[])
    whole = base.is_empty() or ledger is None
    for k, c in res.compact.items():
        if whole:
            cnt, ops = c.count, c.ops
        else:
            if token is not None:
                token.check()
            cnt = ops = count_matching(ledger, replace(base, findings=[k]), now)
        ff.n_findings += cnt - ff.counts.get(k, 0)
        ff.counts[k], ff.ops[k] = cnt, ops
        ff.totals[k], ff.total_ops[k] = c.count, c.ops
    ff.n_total = res.n_findings
    ff.kind_rows = [(k, s, ff.ops[k]) if k in res.compact else (k, s, n) for k, s, n in ff.kind_rows]
    if whole:
        chosen = set(flt.findings)
        tails = [(k, s, refs) for k, c in res.compact.items() if not chosen or k in chosen for s, refs in c.runs]
        ff.ordered = FindingWalk(ff.ordered, tails)  # type: ignore[assignment,arg-type]
    return ff


class _OneOperation:
    """``ledger`` whose :meth:`filter_clause` replaces a filter's finding kinds by one (scope, key)."""

    def __init__(self, ledger, scope: str, key: str):
        self._ledger, self._ref = ledger, (scope, key)

    def __getattr__(self, name):
        return getattr(self._ledger, name)

    def filter_clause(self, flt: Filter | None, now: datetime | None = None):
        from sqlalchemy import and_

        led = self._ledger
        base = led.filter_clause(replace(flt, findings=[]) if flt is not None else None, now)
        se, ke = led.scope_expr, led.key_expr
        scope, key = self._ref
        return and_(base, se.is_(None) if scope is None else se == scope, ke == key)


def findings_of(
    ledger, masker, now: datetime, scope: str, key: str, kinds: list[FindingKind]
) -> tuple[list[Finding], dict[int, str]]:
    """The findings of ``kinds`` of one operation, computed now in SQL restricted to it (its key
    index), with masked explanations: the detail of an operation whose findings were sent as keys.
    Runs on a worker."""
    from idemview.findings.engine import FindingEngine

    fe = FindingEngine(_OneOperation(ledger, scope, key), now)  # type: ignore[arg-type]
    fs = [f for f in fe.run(kinds, Filter(findings=list(kinds))) if (f.scope, f.key) == (scope, key)]
    return fs, {id(f): masker.free_text(f.explanation) for f in fs}
