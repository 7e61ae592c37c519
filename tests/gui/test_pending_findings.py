"""Issue 20 §1: a finding state has three values — pending, none, these — and pending turns into the
answer by itself. The findings process is held (``LedgerTab.scan_gate``) so the detail, the grid, the
chips and a search hit are looked at deterministically before the scan lands, then after."""

from __future__ import annotations

import multiprocessing

import pytest

from idemview.domain.model import FindingKind
from idemview.services.findstate import FindingBoard, FindingState
from tests.gui.conftest import spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def _held_tab(qtbot, window, path, monkeypatch):
    from idemview.qt.ledgertab import LedgerTab

    gate = multiprocessing.get_context("spawn").Event()
    monkeypatch.setattr(LedgerTab, "scan_gate", gate)
    tab = window.open_spec(spec_for(path))
    qtbot.waitUntil(lambda: tab.ledger is not None and tab._scan.proc is not None, timeout=30000)
    return tab, gate


def _findings_text(tab) -> str:
    return tab.detail.findings_box.text()


def _double_by_attempts(path, planted) -> tuple[str, str]:
    """A planted duplicate effect whose two attempts both succeeded (the demo also plants doubles seen
    only in the effect records, whose "why" has no attempt #2)."""
    import sqlite3

    with sqlite3.connect(path) as c:
        twice = set(
            c.execute(
                "SELECT scope, idempotency_key FROM attempts WHERE outcome = 'succeeded' "
                "GROUP BY scope, idempotency_key HAVING count(*) >= 2"
            ).fetchall()
        )
    return sorted(set(planted.incidents["duplicate_effect"]) & twice)[0]


def test_detail_opened_before_the_scan_says_pending_then_shows_the_double_charge(qtbot, window, demo_db, monkeypatch):
    from idemview.qt.models import COL_FINDINGS, FindingStateRole

    path, planted = demo_db
    tab, gate = _held_tab(qtbot, window, path, monkeypatch)
    scope, key = _double_by_attempts(path, planted)
    tab.open_operation(scope, key)
    qtbot.waitUntil(lambda: tab.detail.detail is not None and tab.detail.detail.key_raw == key, timeout=20000)
    assert tab._scan.pending and tab.findings is None, "the scan was held: nothing can have landed"
    text = _findings_text(tab)
    assert "pending" in text and "No findings" not in text
    assert tab.board.state_of((scope, key)).state is FindingState.PENDING
    # the grid, the chips and a search hit say "scanning", not "none"
    qtbot.waitUntil(lambda: tab.model.rowCount() > 0, timeout=20000)
    st = tab.model.data(tab.model.index(0, COL_FINDINGS), FindingStateRole)
    assert st.state is FindingState.PENDING
    assert tab.filterbar.chips[FindingKind.DUPLICATE_EFFECT].text().endswith("…")
    window.search_all(key)
    qtbot.waitUntil(lambda: window._search_left <= 0 and window.search_model.rowCount() > 0, timeout=10000)
    m = window.search_model
    assert m.data(m.index(0, m.COL_FINDINGS)) == "scanning…"

    gate.set()  # the scan lands: nothing is re-opened
    qtbot.waitUntil(lambda: tab.scan_complete(), timeout=60000)
    qtbot.waitUntil(lambda: "duplicate" in _findings_text(tab).lower(), timeout=20000)
    text = _findings_text(tab)
    assert "pending" not in text and "critical" in text
    # why, not only what (issue 20 §8): from the two succeeded attempts of the planted double charge
    assert "Why dedup failed" in text and "Attempt #2 started" in text and "under the same key" in text
    assert tab.detail.detail.key_raw == key
    assert tab.board.state_of((scope, key)).state is FindingState.THESE
    assert "dup" in m.data(m.index(0, m.COL_FINDINGS)).lower()  # the search hit followed the scan too
    assert not tab.filterbar.chips[FindingKind.DUPLICATE_EFFECT].text().endswith("…")


def test_refresh_makes_the_detail_pending_again_and_it_settles_by_itself(qtbot, window, demo_db, monkeypatch):
    """F5 (a new `now`): an operation without findings shows "pending" while the new scan runs, then
    "No findings" again, without being re-opened; one with findings keeps them and then shows the new ones."""
    from tests.gui.conftest import open_and_wait

    path, planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    clean = next(
        (
            ref
            for r in tab.model.rows()
            if tab.board.state_of(ref := (r.scope_raw, r.key_raw)).state is FindingState.NONE
        ),
        None,
    )
    assert clean is not None and not any(clean in set(map(tuple, v)) for v in planted.incidents.values())
    tab.open_operation(*clean)
    qtbot.waitUntil(lambda: tab.detail.detail is not None and "No findings" in _findings_text(tab), timeout=20000)
    from idemview.qt.ledgertab import LedgerTab

    gate = multiprocessing.get_context("spawn").Event()
    monkeypatch.setattr(LedgerTab, "scan_gate", gate)
    tab.refresh()
    qtbot.waitUntil(lambda: "pending" in _findings_text(tab), timeout=20000)
    gate.set()
    qtbot.waitUntil(lambda: tab.scan_complete() and "No findings" in _findings_text(tab), timeout=60000)


def test_board_answers_pending_none_these_and_never_none_while_a_kind_is_out():
    """The board on its own: before any result, during a partial one, after the last kind, and with a
    kind that failed (its answer is unknown: the operation is not called clean for it)."""
    from datetime import UTC, datetime

    from idemview.domain.model import Finding, Severity
    from idemview.services.session import merge_findings

    now = datetime(2026, 6, 15, 12, tzinfo=UTC)
    b = FindingBoard()
    seen = []
    b.subscribe(lambda: seen.append(b.version))
    assert b.state_of(("s", "k1")).state is FindingState.PENDING
    b.begin(list(FindingKind))
    f = Finding(FindingKind.DUPLICATE_EFFECT, Severity.CRITICAL, "s", "k1", "charged twice", [], None)
    part = merge_findings(now, [f], {}, {id(f): "charged twice"})
    b.publish(part, pending={FindingKind.STUCK_IN_PROGRESS})
    st1, st2 = b.state_of(("s", "k1")), b.state_of(("s", "k2"))
    assert st1.state is FindingState.THESE and st1.pending == {FindingKind.STUCK_IN_PROGRESS}
    assert st2.state is FindingState.PENDING
    b.publish(part, pending=(), failed={FindingKind.RETRY_STORM: "timeout"})
    st2 = b.state_of(("s", "k2"))
    assert st2.state is FindingState.NONE and FindingKind.RETRY_STORM in st2.failed
    assert "not checked" in st2.words()
    assert len(seen) == 3 and b.complete
