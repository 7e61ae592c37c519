"""#11 §3: the findings scan runs in a child process (results in batches, explanations masked with
the session's key), and a finding filter runs its own SQL: its rows show while the scan is still held."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from idemview.domain.model import FindingKind
from tests.gui.conftest import assert_off_gui_thread, open_and_wait, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def test_scan_runs_in_a_child_process_with_the_session_key(qtbot, window, demo_db):
    from idemview.findings.engine import FindingEngine

    path, planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    proc = tab._scan.proc
    assert proc is not None and proc.proc.pid != os.getpid()
    qtbot.waitUntil(lambda: proc.proc.exitcode is not None, timeout=10000)
    assert proc.proc.exitcode == 0
    # the same findings as the engine computes here for the same `now`
    mine = FindingEngine(tab.ledger, tab.findings.now).run()
    assert sorted((f.kind.value, f.scope, f.key) for f in tab.findings.findings) == sorted(
        (f.kind.value, f.scope, f.key) for f in mine
    )
    for kind, refs in planted.incidents.items():
        got = {(f.scope, f.key) for f in tab.findings.findings if f.kind.value == kind}
        assert set(refs) <= got, kind
    # explanations were masked in the child with the session's key: the screen masks them the same way
    for f in tab.findings.findings:
        shown = tab.findings.explanations[id(f)]
        assert shown == tab.masker.free_text(f.explanation)


def test_a_finding_filter_shows_rows_while_the_scan_is_held(qtbot, window, demo_db, monkeypatch, query_threads):
    from idemview.qt.ledgertab import LedgerTab

    path, planted = demo_db
    gate = multiprocessing.get_context("spawn").Event()
    monkeypatch.setattr(LedgerTab, "scan_gate", gate)
    tab = window.open_spec(spec_for(path))
    qtbot.waitUntil(lambda: tab.ledger is not None and tab._scan.proc is not None, timeout=30000)
    tab.filter_by_finding(FindingKind.DUPLICATE_EFFECT)
    qtbot.waitUntil(
        lambda: (
            tab.flt.findings == [FindingKind.DUPLICATE_EFFECT]
            and tab.model.rowCount() > 0
            and not tab.model.is_loading()
            and tab.model.is_exhausted()
        ),
        timeout=30000,
    )
    assert tab._scan.pending, "the scan was held: its results cannot have arrived"
    assert tab.findings is None
    assert {(r.scope_raw, r.key_raw) for r in tab.model.rows()} == set(planted.incidents["duplicate_effect"])
    gate.set()
    qtbot.waitUntil(lambda: tab.scan_complete(), timeout=60000)
    assert tab.findings.counts[FindingKind.DUPLICATE_EFFECT] >= len(set(planted.incidents["duplicate_effect"]))
    assert_off_gui_thread(query_threads)


def test_cancel_stops_the_findings_process(qtbot, window, demo_db, monkeypatch):
    from idemview.qt.ledgertab import LedgerTab

    path, _ = demo_db
    gate = multiprocessing.get_context("spawn").Event()
    monkeypatch.setattr(LedgerTab, "scan_gate", gate)
    tab = window.open_spec(spec_for(path))
    qtbot.waitUntil(lambda: tab.ledger is not None and tab._scan.proc is not None, timeout=30000)
    proc = tab._scan.proc
    tab.cancel_all()
    qtbot.waitUntil(lambda: not proc.proc.is_alive(), timeout=10000)
    assert not tab._scan.pending
    qtbot.waitUntil(lambda: tab.findings is not None, timeout=10000)
    assert set(tab.findings.unsupported.values()) >= {"the check failed: cancelled"}
