"""The findings scan as a service without Qt (issue 25 item 5): state transitions, events, cancel, a stale
generation dropped and a failing kind, on the real demo ledger through the InlineWorker (no display, no
threads: the test decides when each answer arrives). Also the packed keys that cross from the findings
process (issue 27 item 3)."""

from __future__ import annotations

import pickle

import pytest

from idemview.domain.model import FindingKind, Severity
from idemview.findings.engine import FindingEngine
from idemview.services.cancel import CancelToken
from idemview.services.compact import CompactKind, FindingWalk
from idemview.services.demo import write_demo
from idemview.services.packedrefs import PackedRefs, RefChain, ref_hash
from idemview.services.scanservice import KIND_CHANNEL, KindFailure, Merged, ScanService
from idemview.services.scanstate import CANCELLED, ScanPhase
from idemview.services.session import OpenSpec, SharedMasker, open_ledger, scan
from idemview.services.work import InlineWorker, JobError
from tests.conftest import ANCHOR


@pytest.fixture(scope="module")
def demo_ledger(tmp_path_factory):
    p = tmp_path_factory.mktemp("scanservice") / "demo.db"
    write_demo(p, anchor=ANCHOR)
    opened = open_ledger(OpenSpec(str(p), "demo", layout="idemview"), CancelToken())
    yield opened.ledger
    opened.engine.dispose()


class Seen:
    """Every event of a ScanService, in order."""

    def __init__(self, svc: ScanService):
        self.events: list[tuple[str, object]] = []
        for name in ("started", "kind_failed", "merged", "error"):
            getattr(svc.events, name).connect(lambda p, name=name: self.events.append((name, p)))

    def of(self, name: str) -> list:
        return [p for n, p in self.events if n == name]


def _service(ledger):
    w = InlineWorker()
    svc = ScanService(w)
    return w, svc, Seen(svc), FindingEngine(ledger, ANCHOR).unsupported()


def test_a_scan_in_threads_goes_pending_running_done_and_merges_the_whole_scan(demo_ledger):
    w, svc, seen, unsupported = _service(demo_ledger)
    masker = SharedMasker()
    st = svc.start(demo_ledger, masker, ANCHOR, unsupported)
    assert [p for p in seen.of("started")] == [st]
    assert st.phase is ScanPhase.RUNNING and st.pending == {k for k in FindingKind if k not in unsupported}
    assert sorted(w.pending()) == sorted(f"{KIND_CHANNEL}{k.value}" for k in st.pending)
    assert seen.of("merged") == []  # nothing ran yet: nothing is claimed
    w.run_all()
    assert st.phase is ScanPhase.DONE and st.progress == (st.total, st.total)
    merged: list[Merged] = seen.of("merged")
    last = merged[-1]
    assert last.complete and last.pending == frozenset() and last.failed == {} and last.state is st
    whole = scan(demo_ledger, masker, ANCHOR, CancelToken())
    assert last.result.counts == whole.counts and sum(whole.counts.values()) > 0
    assert sorted(last.result.by_ref) == sorted(whole.by_ref)
    # every merge before the last said which kinds it did not answer yet
    assert all(m.pending for m in merged[:-1])


def test_a_stale_generation_is_dropped(demo_ledger):
    w, svc, seen, unsupported = _service(demo_ledger)
    masker = SharedMasker()
    first = svc.start(demo_ledger, masker, ANCHOR, unsupported)
    old_jobs = w.queued()
    second = svc.start(demo_ledger, masker, ANCHOR, unsupported)  # F5 before the first landed
    assert svc.generation == 2 and svc.state is second
    for _ in range(old_jobs):  # the first scan's answers arrive after the second started
        w.run_next(0)
    assert first.parts == {} and second.parts == {}, "no answer of the first scan was recorded anywhere"
    assert seen.of("merged") == []
    w.run_all()
    assert second.phase is ScanPhase.DONE
    assert {m.state for m in seen.of("merged")} == {second}
    assert first.pending, "the superseded scan was left as it was"


def test_cancel_records_the_pending_kinds_as_cancelled_and_merges(demo_ledger):
    w, svc, seen, unsupported = _service(demo_ledger)
    st = svc.start(demo_ledger, SharedMasker(), ANCHOR, unsupported)
    before = set(st.pending)
    w.run_next(0)  # one kind answered before the cancel
    (answered,) = before - st.pending
    assert svc.cancel() is True
    assert not svc.running and st.phase is ScanPhase.CANCELLED
    assert not any(ch.startswith(KIND_CHANNEL) for ch in w.pending()), "the kinds' jobs were cancelled"
    w.run_all()
    m = seen.of("merged")[-1]
    assert m.complete and m.state is st
    assert set(m.failed) == before - {answered}, "what arrived stays; only the rest is cancelled"
    assert all(v == CANCELLED for v in m.failed.values())
    assert {m.result.unsupported[k] for k in m.failed} == {"the check failed: cancelled"}
    assert svc.cancel() is False  # nothing runs any more
    assert seen.of("kind_failed") == [], "a cancel is not a failure to report"


def test_a_failing_kind_is_reported_and_never_merged_as_none(demo_ledger, monkeypatch):
    import idemview.services.scanservice as ss

    real = ss.scan
    bad = FindingKind.STUCK_IN_PROGRESS

    def flaky(ledger, masker, now, tok, kinds):
        if kinds == [bad]:
            raise TimeoutError("the statement ran too long")
        return real(ledger, masker, now, tok, kinds)

    monkeypatch.setattr(ss, "scan", flaky)
    w, svc, seen, unsupported = _service(demo_ledger)
    assert bad not in unsupported
    st = svc.start(demo_ledger, SharedMasker(), ANCHOR, unsupported)
    w.run_all()
    assert st.phase is ScanPhase.FAILED
    (f,) = seen.of("kind_failed")
    assert isinstance(f, KindFailure) and f.kind is bad and "TimeoutError" in f.message
    m = seen.of("merged")[-1]
    assert m.complete and set(m.failed) == {bad}
    assert m.result.unsupported[bad].startswith("the check failed: TimeoutError")
    assert m.result.counts.get(bad, 0) == 0 and bad in m.result.unsupported  # unknown, not "none found"


def test_a_merge_of_an_older_scan_is_not_emitted(demo_ledger):
    w, svc, seen, unsupported = _service(demo_ledger)
    masker = SharedMasker()
    svc.start(demo_ledger, masker, ANCHOR, unsupported)
    while any(ch.startswith(KIND_CHANNEL) for ch in w.pending()):  # the last kind submits the complete merge
        w.run_next(0)
    assert w.is_pending("merge")
    later = svc.start(demo_ledger, masker, ANCHOR, unsupported)
    w.run_all()
    assert {m.state for m in seen.of("merged")} == {later}


def test_inline_worker_drops_stale_answers_and_reports_failures():
    w = InlineWorker()
    got: list = []
    w.submit("page", lambda tok: 1, got.append)
    w.submit("page", lambda tok: 2, got.append)  # supersedes the first
    errs: list[JobError] = []
    w.submit("count", lambda tok: 1 / 0, got.append, errs.append)
    w.run_all()
    assert got == [2]
    assert len(errs) == 1 and errs[0].message.startswith("ZeroDivisionError")
    w.submit("page", lambda tok: 3, got.append)
    w.cancel("page")
    w.run_all()
    assert got == [2] and w.pending() == []


def test_packed_refs_round_trip_and_look_up():
    refs = [("tenant-1", "k1"), (None, "k2"), ("s", None), ("ü\udc80", "key with \xff and \x00")]
    p = PackedRefs.pack(refs)
    assert list(p) == refs and len(p) == 4 and p[-1] == refs[-1]
    for r in refs:
        assert r in p
    assert ("tenant-1", "k2") not in p and ("tenant-1", "k1 ") not in p
    q = pickle.loads(pickle.dumps(p))
    assert list(q) == refs and ("s", None) in q
    # what crosses the pipe is three buffers, not a list of tuples
    assert len(pickle.dumps(p)) < 400
    chain = RefChain([p, PackedRefs.pack([("x", "y")])])
    assert len(chain) == 5 and chain[4] == ("x", "y") and chain[3] == refs[3]
    assert ref_hash(("a", "b")) == ref_hash(("a", "b")) != ref_hash(("ab", ""))


def test_compact_kind_keeps_keys_packed_for_badges_and_f8():
    c = CompactKind(FindingKind.EXPIRED_KEY)
    c.add(Severity.MEDIUM, PackedRefs.pack([("s", f"k{i}") for i in range(1000)]))
    c.add(Severity.MEDIUM, [("s", "k1000")])  # a list is packed on arrival
    c.add(Severity.LOW, PackedRefs.pack([("s", "low")]))
    assert len(c) == 1002 and c.severity_of(("s", "k999")) is Severity.MEDIUM
    assert c.severity_of(("s", "low")) is Severity.LOW and c.severity_of(("s", "nope")) is None
    assert c.nbytes < 1002 * 40, "about the keys' own length and 16 bytes each"
    walk = FindingWalk([], [(c.kind, s, refs) for s, refs in c.runs])
    assert len(walk) == 1002 and walk[1000].key == "k1000" and walk[1001].key == "low"
    c.release()
    assert len(c) == 0 and not c.by_sev


def test_a_snapshot_ledger_is_scanned_in_threads_not_in_a_findings_process(demo_ledger):
    """The findings process opens the ledger again from its URL; a snapshot (Redis, DynamoDB, any backend
    declaring ``source.snapshot``) lives in this process's memory only, so the scan goes to threads at
    once, whatever its URL's scheme (a ``dynamodb://`` URL used to start a process that could only fail)."""
    import copy

    from idemview.ledger.source import LedgerSource
    from idemview.services.scanservice import PROCESS_CHANNEL, ProcessArgs

    snap = copy.copy(demo_ledger)
    snap.source = LedgerSource("dynamodb", object(), dialect="dynamodb")
    w, svc, _seen, unsupported = _service(snap)
    args = ProcessArgs("dynamodb://idem?region=us-east-1", None, snap.layout, "idem", b"k" * 32)
    st = svc.start(snap, SharedMasker(), ANCHOR, unsupported, args)
    assert PROCESS_CHANNEL not in w.pending() and st.proc is None
    assert sorted(w.pending()) == sorted(f"{KIND_CHANNEL}{k.value}" for k in st.pending)
    w.run_all()
    assert st.phase is ScanPhase.DONE
