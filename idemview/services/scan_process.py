"""The findings scan as a plain top-level function, so that it can run in another process
(``concurrent.futures.ProcessPoolExecutor`` / ``multiprocessing``): the GUI's event loop then never waits
on the Python half of a scan (shaping rows into findings holds the GIL), issue 11.

Everything crossing the process boundary is picklable: the URL (text), the layout (a preset name or a
TOML path), ``now``, kinds and a :class:`~idemview.domain.filters.Filter` going in; findings
(:class:`~idemview.domain.model.Finding` dataclasses) and the "not checkable" reasons coming back. No
:class:`~idemview.masking.masker.Masker` crosses it (its key never leaves the process that made it):
explanations come back unmasked and are masked by the caller, as ``services.session.scan`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from idemview.domain.filters import Filter
from idemview.domain.model import Finding, FindingKind


@dataclass
class ScanOutcome:
    """What :func:`scan_findings` returns: findings in report order, ``not_checkable`` kind -> why, and
    ``now`` (aware, UTC) they were computed for."""

    now: datetime
    findings: list[Finding] = field(default_factory=list)
    not_checkable: dict[FindingKind, str] = field(default_factory=dict)


def scan_findings(
    url: str,
    layout: str,
    now: datetime,
    *,
    kinds: list[FindingKind] | None = None,
    flt: Filter | None = None,
    password: str | None = None,
    naive_zone: str | None = None,
    lock_timeout_s: float | None = None,
    retry_threshold: int | None = None,
    retention_s: float | None = None,
    timeout_s: float | None = None,
) -> ScanOutcome:
    """Open ``url`` read-only with ``layout`` (preset name or layout file) and compute the findings of
    ``kinds`` (default all) for ``now`` (aware), restricted in SQL to the operations ``flt`` matches.

    Batch work: the interactive statement timeout does not apply; ``timeout_s`` bounds each statement
    (``None``: no bound; terminate the worker process to cancel). Raises
    :class:`~idemview.ledger.connect.ConnectError` (cannot connect),
    :class:`~idemview.layouts.layout.LayoutError` (the layout does not fit) and SQLAlchemy errors."""
    from idemview.findings.engine import FindingEngine
    from idemview.layouts.layout import load_layout
    from idemview.ledger.batch import for_batch
    from idemview.ledger.connect import open_engine
    from idemview.ledger.reader import Ledger

    engine = open_engine(url, password=password)
    try:
        ledger = Ledger(
            engine,
            load_layout(layout),
            naive_zone=naive_zone,
            lock_timeout_s=lock_timeout_s,
            retry_threshold=retry_threshold,
            retention_s=retention_s,
        )
        fe = FindingEngine(for_batch(ledger, timeout_s), now)
        fs = fe.run(kinds, flt)
        return ScanOutcome(fe.now, fs, fe.unsupported())
    finally:
        engine.dispose()
