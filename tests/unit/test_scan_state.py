"""The scan's state as a typed object without Qt (issue 25 item 5): a real scan of the demo ledger,
kind by kind as the GUI's worker jobs run it, recorded in a ScanState whose merge equals one whole scan."""

from __future__ import annotations

import pytest

from idemview.domain.model import FindingKind, Severity
from idemview.findings.engine import FindingEngine
from idemview.services.cancel import CancelToken
from idemview.services.demo import write_demo
from idemview.services.scanstate import CANCELLED, ScanPhase, ScanState
from idemview.services.session import OpenSpec, SharedMasker, merge_findings, open_ledger, scan
from tests.conftest import ANCHOR


@pytest.fixture(scope="module")
def demo_ledger(tmp_path_factory):
    p = tmp_path_factory.mktemp("scanstate") / "demo.db"
    write_demo(p, anchor=ANCHOR)
    opened = open_ledger(OpenSpec(str(p), "demo", layout="idemview"), CancelToken())
    yield opened.ledger
    opened.engine.dispose()


def test_kind_by_kind_scan_merges_to_the_whole_scan(demo_ledger):
    masker = SharedMasker()
    unsupported = FindingEngine(demo_ledger, ANCHOR).unsupported()
    st = ScanState.start(ANCHOR, unsupported)
    assert st.phase is ScanPhase.PENDING and st.progress == (0, len(FindingKind) - len(unsupported))
    assert st.pending == {k for k in FindingKind if k not in unsupported}
    for i, k in enumerate(sorted(st.pending, key=lambda k: k.value)):
        res = scan(demo_ledger, masker, ANCHOR, CancelToken(), [k])
        st.kind_done(k, res.findings, res.explanations)
        assert st.progress == (i + 1, st.total)
        assert st.phase is (ScanPhase.DONE if st.complete else ScanPhase.RUNNING)
        partial = st.merge_inputs()
        assert all(partial.unsupported[p] == "still scanning…" for p in partial.pending)
    m = st.merge_inputs()
    assert m.complete and m.pending == frozenset() and m.failed == {}
    merged = merge_findings(m.now, m.findings, m.unsupported, m.explanations)
    whole = scan(demo_ledger, masker, ANCHOR, CancelToken())
    assert merged.counts == whole.counts and sum(merged.counts.values()) > 0
    assert sorted(merged.by_ref) == sorted(whole.by_ref)


def test_failed_and_cancelled_kinds():
    kinds = [FindingKind(k) for k in list(FindingKind)[:3]]
    st = ScanState.start(ANCHOR, {}, kinds)
    assert st.kind_failed(kinds[0], "the query ran past its time limit") is True
    assert st.kind_failed(kinds[1], "cancelled", cancelled=True) is False  # a cancel is not reported
    assert st.phase is ScanPhase.RUNNING and st.progress == (2, 3)
    st.kind_done(kinds[2])
    assert st.phase is ScanPhase.FAILED
    assert st.merge_inputs().unsupported == {kinds[0]: "the check failed: the query ran past its time limit"}

    st = ScanState.start(ANCHOR, {}, kinds)
    st.add_batch(kinds[0], [], {})
    assert st.phase is ScanPhase.RUNNING
    st.add_keys(kinds[1], Severity.HIGH, [("s", "k1"), ("s", "k2")])
    assert not st.merge_inputs().compact  # an unfinished compact kind is not merged
    st.add_summary(kinds[1], (2, 2, Severity.HIGH))
    assert list(st.merge_inputs().compact) == [kinds[1]]
    st.cancel()
    assert st.phase is ScanPhase.CANCELLED and st.failed == {k: CANCELLED for k in kinds}
