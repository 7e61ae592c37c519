"""The findings scan of one open ledger as a service object without Qt (issue 25, item 5).

A :class:`ScanService` runs scans one after another (F5 starts a new one, which supersedes the last): in
the findings process (:class:`~idemview.services.scanproc.ScanProcess`, a *stream* of its
:class:`~idemview.services.work.Worker`) or, when a ledger cannot be scanned there (in-memory SQLite, a
Redis snapshot, a layout that does not pickle, a process that died), one worker job per finding kind.
What arrived is recorded in a typed :class:`~idemview.services.scanstate.ScanState`; merges are
debounced over a burst of kinds and computed on the worker. Views learn everything from
:attr:`ScanService.events`:

- ``started`` (:class:`ScanState`): a scan of these kinds began; nothing of it is known yet;
- ``kind_failed`` (:class:`KindFailure`): one kind could not be checked (not sent for a cancel);
- ``merged`` (:class:`Merged`): a merge of what arrived so far, with what is still pending;
- ``error`` (:class:`~idemview.services.work.JobError`): a merge itself failed.

Every answer is checked against the scan it belongs to: a message, a kind or a merge of an older scan
(a stale generation) changes nothing and emits nothing. The widget (``qt/tabscan.py``) only relays these
events to the board, the panel and the chips.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from idemview.domain.model import FindingKind
from idemview.services.compact import apply_compact
from idemview.services.events import EventEmitter
from idemview.services.scanstate import ScanPhase, ScanState
from idemview.services.session import FindingsResult, merge_findings, scan
from idemview.services.work import JobError, Timer, Worker

#: Kinds landing within this many seconds are merged once (badges, chips and markers redrawn once).
MERGE_DEBOUNCE_S = 0.08
#: The worker channel of the findings process (a stream) and the prefix of the per-kind thread jobs.
PROCESS_CHANNEL = "findings"
KIND_CHANNEL = "findings:"


@dataclass(frozen=True)
class ProcessArgs:
    """What the findings process needs to open the ledger again: ``url``/``password`` of the open spec,
    the ``layout`` as the parent's Ledger resolved it, the ledger's ``name``, the session masker's
    ``key`` (so masked tags match the screen); ``gate`` holds the child until set (tests only)."""

    url: Any
    password: str | None
    layout: Any
    name: str
    key: bytes
    gate: Any = None


@dataclass(frozen=True)
class KindFailure:
    """One kind's check failed: ``message`` is masked, fit to show."""

    state: ScanState
    kind: FindingKind
    message: str


@dataclass(frozen=True)
class Merged:
    """A merge landed: ``result`` holds every kind not in ``pending``; ``complete`` when no kind was
    pending at the time of the merge; ``failed`` kind -> message (``"cancelled"`` for a cancelled kind)."""

    state: ScanState
    result: FindingsResult
    complete: bool
    pending: frozenset[FindingKind]
    failed: dict[FindingKind, str]


class ScanEvents:
    """The events of a :class:`ScanService` (module docstring)."""

    def __init__(self) -> None:
        self.started: EventEmitter[ScanState] = EventEmitter("started")
        self.kind_failed: EventEmitter[KindFailure] = EventEmitter("kind_failed")
        self.merged: EventEmitter[Merged] = EventEmitter("merged")
        self.error: EventEmitter[JobError] = EventEmitter("error")


class ScanService:
    """Findings scans of one ledger, through ``worker``; one at a time (the newest). Owner's thread only.

    :meth:`start` a scan for ``now``; :meth:`cancel` it; :attr:`state` the current one (a scan of nothing
    before the first start); :meth:`close` when the ledger closes."""

    def __init__(self, worker: Worker, *, use_process: bool = True):
        self.worker = worker
        self.use_process = use_process
        self.events = ScanEvents()
        self.state = ScanState.start(datetime.now().astimezone(), {}, ())
        self.generation = 0
        self._merge_timer: Timer | None = None
        self._ledger: Any = None
        self._masker: Any = None

    # ------------------------------------------------------------------------------ control

    def start(
        self,
        ledger,
        masker,
        now: datetime,
        unsupported: dict[FindingKind, str],
        process: ProcessArgs | None = None,
    ) -> ScanState:
        """Scan every kind ``ledger``'s layout supports (``unsupported``: kind -> why not) for ``now``;
        in the findings process when ``process`` is given (and :attr:`use_process`), else in threads."""
        self._stop_running()
        self._ledger, self._masker = ledger, masker
        st = self.state = ScanState.start(now, unsupported)
        self.generation += 1
        self.events.started.emit(st)
        if st.pending and not (process is not None and self.use_process and self._in_process(st, process)):
            self._in_threads(st, ledger, masker, list(st.pending))
        if not st.pending:
            self._merge(st)
        return st

    def cancel(self) -> bool:
        """Stop the running scan: what arrived stays; the kinds still pending are recorded as cancelled
        and merged (their answer is "not checked", never "none"). False when nothing was running."""
        st = self.state
        if not st.pending:
            return False
        self._stop_running()
        st.cancel()
        self._merge(st)
        return True

    def close(self) -> None:
        """The ledger closes: stop the process and the jobs; nothing more is emitted."""
        self._stop_running()
        self.generation += 1
        self.state = ScanState.start(self.state.now, {}, ())

    @property
    def running(self) -> bool:
        return bool(self.state.pending)

    @property
    def phase(self) -> ScanPhase:
        return self.state.phase

    def _stop_running(self) -> None:
        st = self.state
        if st.proc is not None:
            st.proc.cancel()
        for ch in self.worker.pending():
            if ch == PROCESS_CHANNEL or ch.startswith(KIND_CHANNEL):
                self.worker.cancel(ch)
        if self._merge_timer is not None:
            self._merge_timer.cancel()
            self._merge_timer = None

    # ----------------------------------------------------------------------------- transport

    def _in_threads(self, st: ScanState, ledger, masker, kinds: list[FindingKind]) -> None:
        # One job per finding kind, in parallel: the quick kinds show up at once and a kind whose SQL is
        # slow on this ledger (or times out) holds nothing else back.
        now = st.now
        st.started = True
        for k in kinds:
            self._submit_kind(st, ledger, masker, now, k)

    def _submit_kind(self, st: ScanState, ledger, masker, now: datetime, k: FindingKind) -> None:
        def job(tok: Any) -> FindingsResult:
            return scan(ledger, masker, now, tok, [k])

        def ok(res: FindingsResult) -> None:
            self._on_kind(st, k, res)

        def failed(err: JobError) -> None:
            self._on_kind_error(st, k, err)

        self.worker.submit(f"{KIND_CHANNEL}{k.value}", job, ok, failed)

    def _in_process(self, st: ScanState, p: ProcessArgs) -> bool:
        """Start the scan of ``st``'s pending kinds in the findings process; False when it cannot start
        (a ledger the child cannot open again: an in-memory database, a snapshot — Redis, DynamoDB, any
        backend's whose ``source`` declares one —; a layout that does not pickle)."""
        url = str(p.url)
        if ":memory:" in url or (self._ledger is not None and self._ledger.source.is_snapshot):
            return False
        from idemview.services.scanproc import ScanProcess

        kinds = [k for k in FindingKind if k in st.pending]

        def start(emit: Callable[[Any], None], done: Callable[[str | None], None], _tok):
            return ScanProcess(
                p.url,
                p.password,
                p.layout,
                p.name,
                st.now,
                kinds,
                p.key,
                on_message=lambda what, kind, payload: emit((what, kind, payload)),
                on_exit=done,
                gate=p.gate,
            )

        def started_proc(msg) -> None:
            self._on_message(st, msg)

        try:
            self.worker.stream(PROCESS_CHANNEL, _Recorder(st, start), started_proc, lambda err: self._on_exit(st, err))
        except Exception as e:  # noqa: BLE001 - e.g. a layout that cannot be pickled: use threads
            import logging

            logging.getLogger(__name__).info("findings scan in threads: %s", type(e).__name__)
            st.proc = None
            return False
        return True

    def _on_message(self, st: ScanState, msg) -> None:
        """Owner's thread: file one batch (a list append) or one kind's end; merging happens on the worker."""
        if st is not self.state:
            return
        what, kind, payload = msg
        if what == "batch":
            fs, expl = payload
            st.add_batch(kind, fs, expl)
            # Findings live until the next scan: out of the cyclic GC's generations as they arrive (O(1)).
            # A million of them made every full collection walk them all while holding the GIL: a 3 s
            # stall of the owner's (GUI) thread (issue 11 §3, docs/benchmarks-history.md).
            gc.freeze()
        elif what == "keys":  # a kind too big to keep finding by finding: (severity, packed keys)
            sev, refs = payload
            st.add_keys(kind, sev, refs)
        elif what == "summary":
            st.add_summary(kind, payload)
        elif what == "done":
            st.kind_done(kind)
            self._merge(st)
        elif what == "failed":
            self._on_kind_error(st, kind, JobError(payload))
        elif what == "error" and payload:
            self._fallback(st)

    def _on_exit(self, st: ScanState, err: str | None) -> None:
        if st is self.state and err:
            self._fallback(st)

    def _fallback(self, st: ScanState) -> None:
        # the process could not open the ledger (or died): the remaining kinds run in threads
        if st.proc is None or not st.pending:
            return
        st.proc = None
        self._in_threads(st, self._ledger, self._masker, list(st.pending))

    def _on_kind(self, st: ScanState, kind: FindingKind, res: FindingsResult) -> None:
        if st is not self.state:
            return
        st.kind_done(kind, res.findings, res.explanations)
        self._merge(st)

    def _on_kind_error(self, st: ScanState, kind: FindingKind, err: JobError) -> None:
        if st is not self.state:
            return
        if st.kind_failed(kind, err.message, cancelled=err.cancelled):
            self.events.kind_failed.emit(KindFailure(st, kind, err.message))
        self._merge(st)

    # --------------------------------------------------------------------------------- merge

    def _merge(self, st: ScanState) -> None:
        # Kinds finish one by one; merging (and redrawing badges, chips, markers) once per burst rather
        # than once per kind keeps the owner thread's share of a big scan small.
        if st.complete:
            if self._merge_timer is not None:
                self._merge_timer.cancel()
                self._merge_timer = None
            self._do_merge(st)
        elif self._merge_timer is None:
            self._merge_timer = self.worker.call_later(MERGE_DEBOUNCE_S, lambda: self._timer_fired(st))

    def _timer_fired(self, st: ScanState) -> None:
        self._merge_timer = None
        self._do_merge(st)

    def _do_merge(self, st: ScanState) -> None:
        if st is not self.state:
            return
        m = st.merge_inputs()  # a snapshot: what arrives later goes into the next merge
        # Grouping and sorting tens of thousands of findings runs on the worker; the owner only swaps in
        # the result (a stale merge is dropped by the worker's per-channel generation).
        self.worker.submit(
            "merge",
            lambda tok: apply_compact(merge_findings(m.now, m.findings, m.unsupported, m.explanations), m.compact),
            lambda res: (
                self.events.merged.emit(Merged(st, res, m.complete, m.pending, m.failed)) if st is self.state else None
            ),
            self.events.error.emit,
        )


class _Recorder:
    """A stream start that records the process it started on the scan (``ScanState.proc``: the tab's
    "working: findings" and the tests look at it)."""

    def __init__(self, st: ScanState, start):
        self.st, self.start = st, start

    def __call__(self, emit, done, tok):
        self.st.proc = h = self.start(emit, done, tok)
        self.st.started = True
        return h


__all__ = ["KindFailure", "Merged", "ProcessArgs", "ScanEvents", "ScanService"]
