"""The finding state of one operation: *pending*, *none* or *these* (issue 20 §1).

An evidence tool must never say "no findings" about an operation it has not finished checking. Every
view that shows findings (the detail pane, the grid's Findings column, the filter chips, search hits)
asks one :class:`FindingBoard` per open ledger; the scan publishes to it as its kinds land. So a view
cannot show "none" while a kind is still being checked, and a view that listens to the board turns
"pending" into the answer by itself when the scan lands.

The board holds the latest merged :class:`~idemview.services.session.FindingsResult` (with its compact
kinds, :mod:`idemview.services.compact`) and the kinds still pending for it. No Qt here: the GUI wraps
a board in a signal (:mod:`idemview.qt.findstate`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING

from idemview.domain.model import SEVERITY_ORDER, Finding, FindingKind

if TYPE_CHECKING:
    from idemview.services.session import FindingsResult


class FindingState(str, Enum):
    """What is known of an operation's findings: not yet (``pending``), nothing found (``none``), or
    ``these`` findings (possibly with more kinds still pending: :attr:`OpFindings.pending`)."""

    PENDING = "pending"
    NONE = "none"
    THESE = "these"


@dataclass(frozen=True)
class OpFindings:
    """The answer for one (scope, key). ``findings`` most severe first; ``pending`` the kinds not yet
    checked; ``failed`` kind -> why a kind could not be checked (its answer is unknown, never "none");
    ``now`` the instant the findings were computed for (None before any scan landed)."""

    state: FindingState
    findings: tuple[Finding, ...] = ()
    pending: frozenset[FindingKind] = frozenset()
    failed: dict[FindingKind, str] = field(default_factory=dict)
    now: datetime | None = None

    @property
    def signature(self) -> tuple:
        """Equal for two answers that show the same (a view re-renders only when it changes)."""
        return (
            self.state,
            tuple((f.kind, f.severity) for f in self.findings),
            self.pending,
            tuple(sorted(k.value for k in self.failed)),
            self.now,
        )

    def words(self) -> str:
        """One short phrase for a cell or a tooltip: "scanning…", "none" or the kinds' count."""
        if self.state is FindingState.PENDING:
            return "scanning…"
        if self.state is FindingState.NONE:
            return "none" + (" (some kinds not checked)" if self.failed else "")
        n = len({f.kind for f in self.findings})
        more = " · still scanning…" if self.pending else ""
        return f"{n} kind{'s' if n != 1 else ''}{more}"


class FindingBoard:
    """The per-operation finding state of one ledger, published by the scan and asked by every view.

    ``begin(kinds)`` when a scan starts (the kinds it will check); ``publish(result, pending, failed)``
    each time a merge of it lands; ``state_of((scope, key))`` answers. Listeners (callables without
    arguments) run after each change, on the thread that published (the GUI thread in the app).
    Reads are safe from workers: the board swaps immutable snapshots."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._res: FindingsResult | None = None
        self._pending: frozenset[FindingKind] = frozenset(FindingKind)  # nothing checked yet
        self._failed: dict[FindingKind, str] = {}
        self._listeners: list[Callable[[], None]] = []
        self.version = 0

    # ------------------------------------------------------------------------------ publishing

    def begin(self, kinds: Iterable[FindingKind]) -> None:
        """A scan of ``kinds`` started: until its merges land they are pending (the previous result,
        computed for an earlier ``now``, keeps answering for the operations it had findings for)."""
        with self._lock:
            self._pending = frozenset(kinds)
            self._failed = {}
            self.version += 1
        self._notify()

    def publish(
        self, res: FindingsResult, pending: Iterable[FindingKind] = (), failed: dict[FindingKind, str] | None = None
    ) -> None:
        """A merge landed: ``res`` holds the findings of every kind not in ``pending``; ``failed``
        kind -> message for kinds whose check failed (or was cancelled)."""
        with self._lock:
            self._res = res
            self._pending = frozenset(pending)
            self._failed = dict(failed or {})
            self.version += 1
        self._notify()

    def subscribe(self, fn: Callable[[], None]) -> None:
        self._listeners.append(fn)

    def unsubscribe(self, fn: Callable[[], None]) -> None:
        try:
            self._listeners.remove(fn)
        except ValueError:
            pass

    def _notify(self) -> None:
        for fn in list(self._listeners):
            fn()

    # -------------------------------------------------------------------------------- asking

    @property
    def result(self) -> FindingsResult | None:
        return self._res

    @property
    def pending(self) -> frozenset[FindingKind]:
        return self._pending

    @property
    def failed(self) -> dict[FindingKind, str]:
        return dict(self._failed)

    @property
    def complete(self) -> bool:
        """Every checkable kind has an answer (found, none, or failed)."""
        return self._res is not None and not self._pending

    def kind_pending(self, kind: FindingKind) -> bool:
        return kind in self._pending

    def state_of(self, ref: tuple[str, str]) -> OpFindings:
        """The finding state of the operation ``ref`` = (scope, key) (raw values, as the ledger has them)."""
        from idemview.services.compact import compact_findings

        with self._lock:
            res, pending, failed = self._res, self._pending, self._failed
        if res is None:
            return OpFindings(FindingState.PENDING, (), pending, dict(failed), None)
        fs = list(res.by_ref.get(ref, ()))
        compact = getattr(res, "compact", None)
        if compact:  # kinds sent as keys (issue 11 §3): a stub finding from the key set
            fs += [f for f in compact_findings(compact, ref) if all(g.kind != f.kind for g in fs)]
        fs.sort(key=lambda f: SEVERITY_ORDER[f.severity])
        if fs:
            return OpFindings(FindingState.THESE, tuple(fs), pending, dict(failed), res.now)
        if pending:
            return OpFindings(FindingState.PENDING, (), pending, dict(failed), res.now)
        return OpFindings(FindingState.NONE, (), frozenset(), dict(failed), res.now)

    def get(self, ref: tuple[str, str], default=None):
        """The findings of ``ref`` as a list (``default`` when none): the ``by_ref`` shape
        :func:`idemview.services.session.to_rows` and :func:`~idemview.services.session.search` read."""
        fs = self.state_of(ref).findings
        return list(fs) if fs else default

    def __bool__(self) -> bool:
        return True
