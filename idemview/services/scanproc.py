"""The findings scan in a separate process, so the window never waits on it (issue #11 §3).

Computing findings holds the GIL for long stretches (decoding rows, building :class:`Finding` objects,
masking explanations); in the GUI process that starves the event loop however the threads are
scheduled. :func:`scan_process_main` is a top-level function (so ``spawn`` can start it): it opens the
ledger again from its URL and layout, runs the kinds one by one for the given ``now``, masks the
explanations with the session's key (so tags match the screen), and sends the findings back in small
batches over a pipe. :class:`ScanProcess` starts it and reads the pipe on a plain thread that spends its
time waiting, not computing; the GUI thread only appends the batches it is handed.

Messages on the pipe, each a tuple ``(what, kind, payload)``:
``("batch", kind, [(Finding, masked explanation), ...])`` at most ``batch`` findings;
``("done", kind, None)`` when a kind is complete; ``("failed", kind, message)`` when its query failed
(message masked); ``("error", None, message)`` when the ledger could not be opened at all;
``("end", None, None)`` after the last kind.

A kind with more than ``detail_max`` findings (an aged ledger's million ``expired_key``, issue 11 §3) is
sent compact: the first ``detail_max`` findings in F8 order (severity, then ``at``) in full as above, the
rest as ``("keys", kind, (severity, PackedRefs))`` chunks (:mod:`idemview.services.packedrefs`: bytes and
arrays, not lists of Python objects) in the same order, and before its
"done" ``("summary", kind, (findings, operations, worst severity, {action class: findings}))`` with the
exact numbers (each detailed finding carries its own ``action``; the keys after them are counted by class). The parent
keeps the rest as key lists (:class:`CompactKind`): badges, the finding filter (its SQL), F8
(:class:`FindingWalk`) and the detail (:func:`findings_of`, on demand) use them.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from idemview.ledger.procworker import ChildDied, ChildProcess

BATCH = 100  # one pickle.loads holds the GIL: ~100 findings keep it to a few ms in the parent
#: Above this many findings of one kind the rest is sent as (scope, key) lists (read when a scan starts).
DETAIL_MAX = 5000
#: A per-row kind (expired, stuck, …) with more operations than this runs in key-range slices of about
#: this many, so the findings process never holds more findings of it at once (its RSS stays bounded).
SLICE_ROWS = 100_000
KEYS_BATCH = 20_000  # one chunk of keys: unpickling it and adding it to a set take ~2-3 ms
#: The findings process runs this much nicer than the window (POSIX ``nice``; 0: as the window). The scan
#: is background work: on a busy machine it waits for a core rather than the window (issue 27 item 3).
SCAN_NICE = 10


def _be_nice(increment: int) -> None:
    """Lower this process's CPU priority by ``increment`` (nothing where ``os.nice`` is missing or refused)."""
    import os

    if increment > 0 and hasattr(os, "nice"):
        try:
            os.nice(increment)
        except OSError:
            pass


def _short(e: BaseException) -> str:
    try:
        from idemview.ledger.connect import short_error

        return short_error(e)
    except Exception:  # noqa: BLE001 - a message is all we need
        return f"{type(e).__name__}: {e}"


def scan_process_main(
    conn,
    url: Any,
    password: str | None,
    layout,
    name: str,
    now: datetime,
    kinds: list,
    key: bytes,
    batch: int = BATCH,
    gate=None,
    detail_max: int = DETAIL_MAX,
    slice_rows: int = SLICE_ROWS,
    nice: int = SCAN_NICE,
) -> None:
    """Child-process entry point: findings of ``kinds`` for ``now`` on the ledger at ``url`` with
    ``layout`` (the layout as the parent's :class:`Ledger` resolved it), sent over ``conn`` in batches
    of ``batch`` with explanations masked by a :class:`Masker` on ``key``. Never raises: every failure
    is sent as a masked message. ``gate`` (a multiprocessing Event, tests only) holds the scan until set.
    ``nice``: how much lower than the window this process runs (:data:`SCAN_NICE`), set before its imports.
    """
    _be_nice(nice)
    from idemview.config import new_masker

    if gate is not None:
        gate.wait()
    masker = new_masker(key=key)
    try:
        from idemview.findings.engine import FindingEngine
        from idemview.ledger.connect import open_engine
        from idemview.ledger.reader import Ledger
        from idemview.services.leanengine import bound_sqlite_memory

        engine = open_engine(url, password=password)
        bound_sqlite_memory(engine)  # the findings process's memory is the window's too (issue 27 item 3)
        ledger = Ledger(engine, layout, name=name)
        fe = FindingEngine(ledger, now)
        unsupported = fe.unsupported()
    except BaseException as e:  # noqa: BLE001
        conn.send(("error", None, masker.mask_text(_short(e))))
        conn.close()
        return
    try:
        for k in kinds:
            if k in unsupported:
                conn.send(("done", k, None))
                continue
            gc.disable()  # a million findings (no cycles among them) made every full collection walk them
            try:
                head, tail, summary = _run_kind(fe, ledger, now, k, detail_max, slice_rows)
            except Exception as e:  # noqa: BLE001 - one kind failing holds nothing else back
                conn.send(("failed", k, masker.mask_text(_short(e))))
                continue
            finally:
                gc.enable()
            for i in range(0, len(head), batch):
                conn.send(("batch", k, [(f, masker.mask_text(f.explanation)) for f in head[i : i + batch]]))
            if summary is not None:
                from idemview.domain.model import Severity
                from idemview.services.packedrefs import PackedRefs

                sevs = list(Severity)
                for i in range(0, len(tail), KEYS_BATCH):
                    chunk = tail[i : i + KEYS_BATCH]
                    j = 0
                    while j < len(chunk):  # runs of one severity
                        so, stop = chunk[j][0], j
                        while stop < len(chunk) and chunk[stop][0] == so:
                            stop += 1
                        refs = PackedRefs.pack((t[-2], t[-1]) for t in chunk[j:stop])
                        conn.send(("keys", k, (sevs[so], refs)))
                        j = stop
                    tail[i : i + KEYS_BATCH] = [None] * len(chunk)  # free as sent
                conn.send(("summary", k, summary))
            del head, tail
            conn.send(("done", k, None))
        conn.send(("end", None, None))
    finally:
        engine.dispose()
        conn.close()


def _f8_key(f) -> tuple:
    # F8 order within a kind (services.session.merge_findings sorts by severity, kind, ``at``), then
    # the operation: a total order, so the first findings and the keys after them never overlap
    from idemview.domain.model import SEVERITY_ORDER

    return (SEVERITY_ORDER[f.severity], f.at.timestamp() if f.at else 0, f.scope or "", f.key or "")


def _run_kind(fe, ledger, now, k, detail_max: int, slice_rows: int) -> tuple[list, list, tuple | None]:
    """One kind's findings as (the first ``detail_max`` in F8 order, the rest as sorted tuples
    ``(severity index, [at,] scope, key)``, (findings, operations, worst severity)); with no more than
    ``detail_max`` findings: (all of them, [], None). A kind whose condition is a per-row one and that
    matches more than ``slice_rows`` operations runs in slices of the key range (:class:`_KeyRange`)."""
    from sqlalchemy import func, select

    from idemview.domain.filters import Filter
    from idemview.domain.model import SEVERITY_ORDER, Severity
    from idemview.findings import registry
    from idemview.findings.engine import FindingEngine

    slices = None
    if registry.rule(k).row_filter(fe) is not None:
        keys = fe.keys_with([k], distinct=False).subquery()
        with ledger.engine.connect() as c:
            n = c.execute(select(func.count()).select_from(keys)).scalar() or 0
            if n > slice_rows:
                # bounds every slice_rows keys, read as a stream (the keys are never all held)
                q = select(keys.c.key).where(keys.c.key.is_not(None)).order_by(keys.c.key)
                bounds: list = []
                res = c.execution_options(stream_results=True, yield_per=20_000).execute(q)
                for i, (key,) in enumerate(res):
                    if i % slice_rows == 0 and i and (not bounds or key != bounds[-1]):
                        bounds.append(key)
                res.close()
                edges = [None, *bounds, None]
                slices = [(edges[i], edges[i + 1], False) for i in range(len(edges) - 1)] + [(None, None, True)]
    if slices is None:
        fs = fe.run([k])
        if len(fs) <= detail_max:
            return fs, [], None
        fs.sort(key=_f8_key)
        summary = (len(fs), len({(f.scope, f.key) for f in fs}), fs[0].severity, _by_action(fs))
        tail = [(_f8_key(f)[0], f.scope, f.key) for f in fs[detail_max:]]
        return fs[:detail_max], tail, summary
    head: list = []
    rows: list = []  # (severity index, at, scope, key) of every finding: ~200 bytes each
    scopes: dict = {}  # one string per scope (the driver makes one per row)
    n_ops, nulls = 0, False
    acts: dict[str, int] = {}
    for lo, hi, null in slices:
        sliced: Any = _KeyRange(ledger, lo, hi, null)
        part = FindingEngine(sliced, now).run([k], Filter(findings=[k]))
        n_ops += len({(f.scope, f.key) for f in part})  # slices split the keys: no operation in two
        for a, n in _by_action(part).items():
            acts[a] = acts.get(a, 0) + n
        for f in part:
            sc = scopes.setdefault(f.scope, f.scope)
            nulls = nulls or sc is None or f.key is None
            rows.append((SEVERITY_ORDER[f.severity], f.at.timestamp() if f.at else 0, sc, f.key))
        part.sort(key=_f8_key)
        head = sorted(head + part[:detail_max], key=_f8_key)[:detail_max]
        del part
    if nulls:  # None does not compare: sort as _f8_key does
        rows.sort(key=lambda r: (r[0], r[1], r[2] or "", r[3] or ""))
    else:
        rows.sort()
    if len(rows) <= detail_max:
        return head, [], None
    summary = (len(rows), n_ops, list(Severity)[rows[0][0]], acts)
    del rows[:detail_max]  # the rest, in place (a copy of a million rows would double the peak)
    return head, rows, summary


def _by_action(fs) -> dict[str, int]:
    """Findings per action class (the compact summary's counts by class)."""
    out: dict[str, int] = {}
    for f in fs:
        out[f.action] = out.get(f.action, 0) + 1
    return out


class _KeyRange:
    """``ledger`` whose :meth:`filter_clause` replaces a filter's finding kinds by a range of the key
    (``lo <= key < hi``, an open end for None; ``null``: the operations without a key)."""

    def __init__(self, ledger, lo, hi, null: bool):
        self._ledger, self._lo, self._hi, self._null = ledger, lo, hi, null

    def __getattr__(self, name):
        return getattr(self._ledger, name)

    def filter_clause(self, flt, now=None):
        from dataclasses import replace

        from sqlalchemy import and_, true

        led = self._ledger
        base = led.filter_clause(replace(flt, findings=[]) if flt is not None else None, now)
        ke = led.key_expr
        if self._null:
            return and_(base, ke.is_(None))
        lo = ke >= self._lo if self._lo is not None else true()
        hi = ke < self._hi if self._hi is not None else ke.is_not(None)
        return and_(base, lo, hi)


class ScanProcess:
    """One scan in a child process (``spawn``: no inherited threads, locks or Qt state).

    ``on_message(what, kind, payload)`` is called on the reader thread for every message, with batches
    already unpacked to ``(findings, {id(finding): explanation})``; ``on_exit(error or None)`` once at
    the end (an error when the process died without saying "end"). :meth:`cancel` terminates it.
    ``gate``: an Event of the same multiprocessing context that holds the child until set (tests)."""

    def __init__(
        self,
        url,
        password,
        layout,
        name,
        now,
        kinds,
        key: bytes,
        on_message: Callable[[str, Any, Any], None],
        on_exit: Callable[[str | None], None],
        method: str = "spawn",
        gate=None,
    ):
        # the one process mechanism (idemview.ledger.procworker), as the Redis snapshot's mapping worker
        self._child = ChildProcess(
            scan_process_main,
            (url, password, layout, name, now, list(kinds), key, BATCH, gate, DETAIL_MAX, SLICE_ROWS, SCAN_NICE),
            what="the findings process",
            name="idemview-findings",
            method=method,
        )
        self.proc = self._child.proc
        self._stop = threading.Event()
        self._on_message, self._on_exit = on_message, on_exit
        self._thread = threading.Thread(target=self._read, name="idemview-findings-reader", daemon=True)
        self._thread.start()

    def _read(self):
        ended, err = False, None
        try:
            for what, kind, payload in self._child.messages(self._stop):
                if what == "batch":
                    fs = [f for f, _e in payload]
                    payload = (fs, {id(f): e for f, e in payload})
                elif what == "end":
                    ended = True
                self._on_message(what, kind, payload)
                if ended:
                    break
        except ChildDied:
            pass  # reported below, with the exit code
        except Exception as e:  # noqa: BLE001 - reported below
            err = _short(e)
        finally:
            self._child.close(timeout=5)
        if self._stop.is_set():
            return
        if not ended and err is None:
            err = f"the findings process ended unexpectedly (exit code {self.proc.exitcode})"
        self._on_exit(err)

    def cancel(self):
        """Stop reading and terminate the child (its queries die with its connections)."""
        self._stop.set()
        self._child.cancel()
