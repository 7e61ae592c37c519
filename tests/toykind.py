"""A finding kind from outside the package (issue 25 item 2): one object and one registration.

``toy_failed_record``: an operation record whose normalized status is ``failed`` (a stand-in for a
real check; the point is the plumbing). Registered through the ``idemview.finding_kinds`` entry point
(:data:`RULES`) by ``tests/unit/test_toy_kind.py`` and ``tests/gui/test_toy_kind_gui.py``.
"""

from __future__ import annotations

from sqlalchemy import select

from idemview.domain.model import Finding, FindingKind, Severity
from idemview.findings.rules import FindingRule

TOY = FindingKind.define(
    "toy_failed_record",
    severity=Severity.LOW,
    words="toy failed record",
    short="toy",
    phrase="with a toy failed record",
    glyph="✱",
    colour=("#6a1b9a", "#ce93d8"),
    definition="an operation record whose normalized status is failed (a test kind registered from outside)",
    fields=("status",),
)


class ToyFailedRecord(FindingRule):
    """The toy kind's rule: SQL over the operations table, shaped into one finding per (scope, key)."""

    kind = TOY

    def selects(self, e):
        l = e.l
        return [
            select(l.scope_expr.label("scope"), l.key_expr.label("key"))
            .select_from(l.ops)
            .where(l.status_in(["failed"]))
        ]

    def run(self, e, c):
        seen: set = set()
        out = []
        for q in e.restrict(self.selects(e)):
            for r in c.execute(q):
                if (r.scope, r.key) not in seen:
                    seen.add((r.scope, r.key))
                    out.append(Finding(TOY, self.severity, r.scope, r.key, "a toy finding: the record failed", []))
        return out


#: What the entry point names (a list of rules).
RULES = [ToyFailedRecord()]


def install_entry_point(root) -> None:
    """Write a minimal distribution under directory ``root`` whose entry point
    ``idemview.finding_kinds`` names :data:`RULES` (``root`` must then be on ``sys.path``)."""
    from pathlib import Path

    d = Path(root) / "idemview_toy_kind-1.0.dist-info"
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: idemview-toy-kind\nVersion: 1.0\n", encoding="utf-8")
    (d / "entry_points.txt").write_text("[idemview.finding_kinds]\ntoy = tests.toykind:RULES\n", encoding="utf-8")
