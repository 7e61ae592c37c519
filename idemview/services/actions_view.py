"""What the findings panel shows by action class (DESIGN §5.1) and in its "Ledger audit" part (§5
``secret_at_rest``), computed from a scan's findings without Qt (run on a worker or in tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from idemview.domain.actions import ACTION_WORDS, ACTIONS
from idemview.domain.model import LEDGER_KINDS, SEVERITY_ORDER, Finding, FindingKind, Severity


def action_rows(findings: Iterable[Finding], compact: Mapping[FindingKind, Any] | None = None) -> list[tuple]:
    """``(kind, action, worst severity, operations)`` per finding kind and action class, most severe
    first, then by operations. ``compact`` (kind → :class:`~idemview.services.compact.CompactKind`)
    adds the findings the scan process sent as key lists: counted by class from their summary (their
    severity is the kind's worst). Ledger findings (``secret_at_rest``) are left out: they are about the
    ledger, not about operations (see :func:`ledger_audit`)."""
    refs: dict[tuple[FindingKind, str], set] = {}
    sev: dict[tuple[FindingKind, str], Severity] = {}
    extra: dict[tuple[FindingKind, str], int] = {}
    for f in findings:
        if f.kind in LEDGER_KINDS:
            continue
        g = (f.kind, f.action)
        refs.setdefault(g, set()).add((f.scope, f.key))
        if g not in sev or SEVERITY_ORDER[f.severity] < SEVERITY_ORDER[sev[g]]:
            sev[g] = f.severity
    for k, ck in (compact or {}).items():
        detailed = {a: len(r) for (kk, a), r in refs.items() if kk == k}
        for a, n in (getattr(ck, "by_action", None) or {}).items():
            more = n - detailed.get(a, 0)  # the summary counts the detailed findings too
            if more > 0:
                extra[(k, a)] = more
                sev.setdefault((k, a), ck.worst or Severity.INFO)
    rows = [(k, a, sev[(k, a)], len(refs.get((k, a), ())) + extra.get((k, a), 0)) for (k, a) in sev]
    order = {a: i for i, a in enumerate(ACTIONS)}
    rows.sort(key=lambda r: (SEVERITY_ORDER[r[2]], -r[3], order.get(r[1], 99), r[0].value))
    return rows


def group_sentence(kind_words: str, action: str, n: int) -> str:
    """``"3 duplicate effects that moved money"`` (a naive English plural of ``kind_words``)."""
    noun = kind_words if n == 1 else (kind_words[:-1] + "ies" if kind_words.endswith("y") else kind_words + "s")
    return f"{n} {noun} that {ACTION_WORDS.get(action, action)}"


def ledger_audit(findings: Iterable[Finding]) -> list[tuple[str, str, str]]:
    """``(column, what it keeps, what to change)`` of every ledger finding (``secret_at_rest``), by
    table and column: the "Ledger audit" part of the findings panel, e.g. ``("request_body $.card.number",
    "card in 33 of 73 rows read", "store a hash of the request …")``. Kinds and counts, never a value."""
    out = []
    for f in findings:
        if f.kind not in LEDGER_KINDS:
            continue
        ev = f.evidence[0] if f.evidence else {}
        kinds = ", ".join(k["kind"] for k in ev.get("kinds", []))
        where = f"{ev.get('table', '')}.{f.column}" if ev.get("table") else (f.column or "")
        what = f"{kinds} in {ev.get('rows_with', 0):,} of {ev.get('rows_read', 0):,} rows read"
        out.append((where, what, ev.get("advice", "")))
    out.sort()
    return out
