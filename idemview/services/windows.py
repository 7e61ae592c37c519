"""Dedup windows for the front ends (issue #22): measure a ledger's windows, list a kind's late
operations, and export the table as evidence (CSV + manifest, :mod:`idemview.evidence.writer`).

The measuring itself is :mod:`idemview.findings.windows` (SQL in the ledger's engine); this module only
adds what a front end needs around it, so the GUI's worker and the CLI call the same functions.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from idemview.evidence.plan import MASKING_KEYS, _tables_read
from idemview.evidence.writer import ColumnSpec, ExportResult, write_evidence
from idemview.findings.windows import WindowsReport, late_operations, measure_windows
from idemview.ledger.batch import for_batch
from idemview.ledger.connect import describe
from idemview.ledger.times import iso

__all__ = ["COLUMNS", "export_windows", "late_operations", "measure", "rows_of"]

#: The CSV columns of a windows export, one row per kind (seconds as numbers; null when unknown).
COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("kind", "text"),
    ColumnSpec("verdict", "text"),
    ColumnSpec("reason", "text"),
    ColumnSpec("operations", "integer"),
    ColumnSpec("retried", "integer"),
    ColumnSpec("window_s", "number"),
    ColumnSpec("window_source", "text"),
    ColumnSpec("lock_timeout_s", "number"),
    ColumnSpec("retry_span_p50_s", "number"),
    ColumnSpec("retry_span_p99_s", "number"),
    ColumnSpec("retry_span_max_s", "number"),
    ColumnSpec("late", "integer"),
    ColumnSpec("late_max_s", "number"),
    ColumnSpec("suggested_window_s", "number"),
    ColumnSpec("unreadable", "integer"),
    ColumnSpec("sentence", "text"),  # after the kind
    ColumnSpec("notes", "text"),
)


def measure(ledger, now: datetime | None = None, timeout_s: float | None = None) -> WindowsReport:
    """:func:`~idemview.findings.windows.measure_windows` as batch work (``timeout_s`` bounds each
    statement; ``None``: no bound), so a GUI job is not cut by the interactive statement timeout."""
    return measure_windows(for_batch(ledger, timeout_s), now)


def rows_of(report: WindowsReport) -> list[list[Any]]:
    """The report's groups as rows in :data:`COLUMNS` order (unmasked: the writer masks every cell)."""
    out = []
    for g in report.groups:
        j = g.to_json()
        span = j["retry_span_s"]
        out.append(
            [
                g.kind,
                g.verdict,
                g.reason,
                g.operations,
                g.retried,
                j["window_s"],
                g.window_source,
                j["lock_timeout_s"],
                span["p50"],
                span["p99"],
                span["max"],
                g.late,
                j["late_max_s"],
                j["suggested_window_s"],
                g.unreadable,
                g.sentence_rest,  # the kind has its own column (and masked as one text, see masked_sentence)
                "; ".join(g.notes) or None,
            ]
        )
    return out


def export_windows(
    ledger,
    report: WindowsReport,
    path: str | os.PathLike[str],
    *,
    masker,
    connection_name: str | None = None,
    masking_key: str = "session",
    overwrite: bool = False,
) -> ExportResult:
    """Write ``report`` as ``path`` (CSV, one row per kind) and its manifest, like any evidence (DESIGN
    §7): the ledger's identity (never a user name or password), the layout and its hash, the ``now``
    the report was measured for, and the masking applied. ``masker``: the :class:`Masker` whose tags
    the file uses (the GUI passes its session's export masker). Raises what
    :func:`~idemview.evidence.writer.write_evidence` raises (``FinalNameTaken``, ``OSError``)."""
    ident = ledger.source.identity or describe(ledger.engine)
    manifest = {
        "ledger": {"connection": connection_name or ledger.name, **ident},
        "layout": {"name": ledger.layout.name, "sha256": ledger.layout.hash, **_tables_read(ledger)},
        "filter": {"structured": {}, "sentence": "every operation, grouped by kind"},
        "now": iso(report.now.astimezone(UTC)),
        "masking_key": MASKING_KEYS[masking_key],
        "rows": {
            "kind": "windows",
            "description": "dedup windows measured from data, one row per operation kind (DESIGN §5.2; "
            f"percentiles by {report.method})",
        },
    }
    return write_evidence(path, COLUMNS, rows_of(report), masker=masker, manifest=manifest, overwrite=overwrite)
