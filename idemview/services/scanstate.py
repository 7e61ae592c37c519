"""The state of one findings scan, as a typed object without Qt (issue 25, item 5).

A ledger tab starts a scan for a ``now`` (UTC): every finding kind the ledger's layout can check is
*pending*; kinds finish one by one, from worker threads (:func:`idemview.services.session.scan`, one kind
per job) or from the scan process (:class:`idemview.services.scanproc.ScanProcess`, findings in batches,
a huge kind as key sets). :class:`ScanState` records what arrived, what failed and what is still pending,
and says what a merge must be given (:meth:`ScanState.merge_inputs`); the widget only relays the
transport's messages to it and its merges to the FindingBoard.

Phases (:class:`ScanPhase`): ``pending`` (created, nothing started), ``running`` (kinds pending; with
:attr:`ScanState.progress`), ``done`` (every kind answered), ``failed`` (done, some kind's check
failed), ``cancelled`` (stopped before every kind answered).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from idemview.domain.model import Finding, FindingKind, Severity
from idemview.services.compact import CompactKind

#: The failure message a cancelled kind is recorded with.
CANCELLED = "cancelled"


class ScanPhase(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class MergeInputs:
    """What one merge of a scan is made from (a snapshot: later arrivals do not change it).

    ``findings`` in kind order; ``unsupported`` kind -> reason (the layout's, "still scanning…" for a
    pending kind, "the check failed: …" for a failed one); ``compact``: the complete compact kinds only;
    ``complete``: no kind pending; ``pending``/``failed``: what this merge does not answer."""

    now: datetime
    findings: list[Finding]
    unsupported: dict[FindingKind, str]
    explanations: dict[int, str]
    compact: dict[FindingKind, CompactKind]
    complete: bool
    pending: frozenset[FindingKind]
    failed: dict[FindingKind, str]


@dataclass(eq=False)
class ScanState:
    """One scan of one ledger for ``now`` (UTC, tz-aware). Built by :meth:`start`; not thread-safe: one
    thread (the GUI's) records into it.

    ``parts`` kind -> its detailed findings; ``expl`` finding id -> explanation; ``failed`` kind -> message
    (``"cancelled"`` for a cancelled kind); ``compact`` kind -> :class:`CompactKind` (findings beyond the
    process's detail limit, as keys); ``proc``: the scan process running it (``None``: threads)."""

    now: datetime
    unsupported: dict[FindingKind, str]
    pending: set[FindingKind]
    parts: dict[FindingKind, list[Finding]] = field(default_factory=dict)
    expl: dict[int, str] = field(default_factory=dict)
    failed: dict[FindingKind, str] = field(default_factory=dict)
    compact: dict[FindingKind, CompactKind] = field(default_factory=dict)
    proc: Any = None
    #: set once work for it was started (jobs submitted, the process spawned) or anything arrived
    started: bool = False
    total: int = 0

    @classmethod
    def start(
        cls, now: datetime, unsupported: dict[FindingKind, str], kinds: Iterable[FindingKind] = FindingKind
    ) -> ScanState:
        """A scan of every kind in ``kinds`` (default: all) the layout supports (``unsupported``: kind ->
        why not, from :meth:`FindingEngine.unsupported`)."""
        pending = {k for k in kinds if k not in unsupported}
        return cls(now=now, unsupported=dict(unsupported), pending=pending, total=len(pending))

    # -- what arrives ------------------------------------------------------------------------------
    def add_batch(self, kind: FindingKind, findings: list[Finding], explanations: dict[int, str]) -> None:
        """A batch of ``kind``'s findings from the scan process (more may follow)."""
        self.started = True
        self.parts.setdefault(kind, []).extend(findings)
        self.expl.update(explanations)

    def add_keys(self, kind: FindingKind, severity: Severity, refs: list[tuple[str, str]]) -> None:
        """``(scope, key)`` refs of ``kind`` at ``severity``, for a kind too big to keep finding by finding."""
        self.started = True
        c = self.compact.get(kind)
        if c is None:
            c = self.compact[kind] = CompactKind(kind)
        c.add(severity, refs)

    def add_summary(self, kind: FindingKind, summary: tuple) -> None:
        """The exact numbers of a compact kind (:meth:`CompactKind.finish`)."""
        self.compact.setdefault(kind, CompactKind(kind)).finish(summary)

    def kind_done(
        self,
        kind: FindingKind,
        findings: list[Finding] | None = None,
        explanations: dict[int, str] | None = None,
    ) -> None:
        """``kind`` answered: with ``findings`` (a thread's whole result, replacing any batches) or
        after its batches (``None``)."""
        self.started = True
        self.pending.discard(kind)
        if findings is not None:
            self.parts[kind] = findings
        if explanations:
            self.expl.update(explanations)

    def kind_failed(self, kind: FindingKind, message: str, *, cancelled: bool = False) -> bool:
        """``kind``'s check failed (``message``, safe to show) or was cancelled; True when it is a failure
        to report (not a cancel)."""
        self.started = True
        self.pending.discard(kind)
        if cancelled:
            return False
        self.failed[kind] = message
        return True

    def cancel(self) -> None:
        """Stop the scan: the process (if any) is terminated, every pending kind is recorded as
        cancelled."""
        if self.proc is not None:
            self.proc.cancel()
        for k in list(self.pending):
            self.failed[k] = CANCELLED
        self.pending.clear()

    # -- what it says ------------------------------------------------------------------------------
    @property
    def phase(self) -> ScanPhase:
        if self.pending:
            return ScanPhase.RUNNING if (self.started or self.proc is not None) else ScanPhase.PENDING
        if any(m == CANCELLED for m in self.failed.values()):
            return ScanPhase.CANCELLED
        return ScanPhase.FAILED if self.failed else ScanPhase.DONE

    @property
    def progress(self) -> tuple[int, int]:
        """``(kinds answered, kinds scanned)``."""
        return self.total - len(self.pending), self.total

    @property
    def complete(self) -> bool:
        return not self.pending

    def merge_inputs(self) -> MergeInputs:
        """A snapshot of what to merge now (see :class:`MergeInputs`)."""
        unsupported = dict(self.unsupported)
        for k in self.pending:
            unsupported[k] = "still scanning…"
        for k, msg in self.failed.items():
            unsupported[k] = f"the check failed: {msg}"
        return MergeInputs(
            now=self.now,
            findings=[f for k in FindingKind for f in self.parts.get(k, [])],
            unsupported=unsupported,
            explanations=dict(self.expl),
            compact={k: c for k, c in self.compact.items() if c.complete},  # complete ones no longer change
            complete=not self.pending,
            pending=frozenset(self.pending),
            failed=dict(self.failed),
        )


__all__ = ["CANCELLED", "MergeInputs", "ScanPhase", "ScanState"]
