"""The layout editor's background jobs (plain functions run through :class:`idemview.qt.workers.Runner`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from idemview.domain.model import FindingKind, Operation
from idemview.layouts.layout import (
    Layout,
    LayoutError,
)
from idemview.qt.layout_editor.common import (
    PREVIEW_ROWS,
)

# ------------------------------------------------------------------------------------ background work


@dataclass(frozen=True)
class _Refused:
    """A job's LayoutError, returned (not raised) so the editor shows its own words, not a class name."""

    message: str


def _job(fn: Callable[[], Any]) -> Callable[[Any], Any]:
    """Wrap an editor job for :class:`~idemview.qt.workers.Runner` (which passes a cancel token)."""

    def run(_token):
        try:
            return fn()
        except LayoutError as e:
            return _Refused(str(e))

    return run


@dataclass
class PreviewResult:
    """What the preview worker computed for one mapping: the first normalized ``rows``, finding
    ``counts`` per kind and the kinds the mapping cannot detect (``unsupported``, kind → reason)."""

    rows: list[Operation]
    counts: dict[FindingKind, int]
    unsupported: dict[FindingKind, str] = field(default_factory=dict)
    more: bool = False


def _preview_job(engine: Engine, layout: Layout, now: datetime) -> PreviewResult:
    # Imported here: the findings engine is only needed on the worker.
    from idemview.findings.engine import FindingEngine
    from idemview.ledger.reader import Ledger

    led = Ledger(engine, layout)
    # Newest first: incidents are usually recent, and that is what a person checks a mapping against.
    page = led.page(limit=PREVIEW_ROWS, now=now, sort="created_at", descending=True)
    fe = FindingEngine(led, now)
    counts = Counter(f.kind for f in fe.run())
    return PreviewResult(page.rows, dict(counts), fe.unsupported(), page.cursor is not None)
