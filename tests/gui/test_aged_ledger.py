"""Issue 11 §3, an aged ledger: a kind with more findings than the findings process sends in full
(``scanproc.DETAIL_MAX``, set low here) keeps its exact count, its finding filter shows exactly its
operations, and a row beyond the detailed ones still names the kind in the grid, the detail and F8."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from idemview.domain.model import FindingKind
from tests.gui.conftest import load_all, open_and_wait, settle

pytestmark = [pytest.mark.gui, pytest.mark.qt_log_ignore("propagateSizeHints")]

N_ROWS, N_OLD, DETAIL = 3000, 2200, 40
K = FindingKind.EXPIRED_KEY


@pytest.fixture
def aged_celery(tmp_path):
    """A Celery result table nobody cleans: N_OLD results done days ago (past the 1-day
    ``result_expires``), the rest within the last hours."""
    p = tmp_path / "celery.db"
    c = sqlite3.connect(p)
    c.execute(
        "CREATE TABLE celery_taskmeta (id INTEGER NOT NULL PRIMARY KEY, task_id VARCHAR(155) UNIQUE, "
        "status VARCHAR(50), result BLOB, date_done DATETIME, traceback TEXT, name VARCHAR(155), args BLOB, "
        "kwargs BLOB, worker VARCHAR(155), retries INTEGER, queue VARCHAR(155))"
    )
    now = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    rows = []
    for i in range(1, N_ROWS + 1):
        age = timedelta(days=2, minutes=i) if i <= N_OLD else timedelta(minutes=i - N_OLD)
        rows.append((i, f"task-{i:06d}", "SUCCESS", b"ok", (now - age).strftime("%Y-%m-%d %H:%M:%S"), "billing.charge"))
    c.executemany(
        "INSERT INTO celery_taskmeta (id, task_id, status, result, date_done, name) VALUES (?, ?, ?, ?, ?, ?)", rows
    )
    c.commit()
    c.close()
    return p


@pytest.mark.parametrize("slice_rows", [700, 10**9], ids=["in key-range slices", "in one query"])
def test_more_expired_keys_than_sent_in_full(qtbot, window, aged_celery, monkeypatch, slice_rows):
    from idemview.domain.filters import Filter
    from idemview.findings.engine import FindingEngine
    from idemview.qt import theme
    from idemview.qt.models import COL_FINDINGS
    from idemview.services import scanproc
    from idemview.services.compact import CompactFindingsResult
    from idemview.services.session import OpenSpec

    monkeypatch.setattr(scanproc, "DETAIL_MAX", DETAIL)
    monkeypatch.setattr(scanproc, "SLICE_ROWS", slice_rows)
    tab = open_and_wait(qtbot, window, OpenSpec(url=str(aged_celery), name="aged celery", layout="celery"))
    settle(qtbot, tab)
    res, now = tab.findings, tab.now
    assert isinstance(res, CompactFindingsResult) and K in res.compact
    assert len([f for f in res.findings if f.kind is K]) == DETAIL  # only these kept finding by finding
    # the detailed ones are the first in F8 order (the oldest expiries), as without compaction
    first = sorted(by_engine_all := FindingEngine(tab.ledger, now).run([K]), key=lambda f: (f.at, f.key))[:DETAIL]
    assert {f.key for f in res.findings if f.kind is K} == {f.key for f in first}
    assert len(by_engine_all) == N_OLD

    # the exact count: the engine's own answer and a direct SQL count of results older than a day
    by_engine = FindingEngine(tab.ledger, now).run([K])
    with sqlite3.connect(aged_celery) as c:
        cutoff = (now - timedelta(days=1)).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S")
        by_sql = {r[0] for r in c.execute("SELECT task_id FROM celery_taskmeta WHERE date_done < ?", (cutoff,))}
    assert len(by_sql) == N_OLD == len(by_engine)
    assert res.counts[K] == N_OLD
    ff = tab.filtered_findings
    assert ff is not None and ff.counts[K] == N_OLD and ff.ops[K] == N_OLD and ff.n_total == len(by_engine)
    assert tab.filterbar._counts[K] == N_OLD  # the chip
    row = next(i for i in range(tab.findings_model.rowCount()) if tab.findings_model.kind_at(i) is K)
    assert tab.findings_model.count_text(row) == str(N_OLD)  # the panel
    assert f"{N_OLD:,}" in tab.findings_title.text()

    # the finding filter shows exactly those operations (its own SQL: the scan kept only keys)
    tab.filter_by_finding(K)
    settle(qtbot, tab)
    load_all(qtbot, tab)
    shown = {r.key_raw for r in tab.model.rows()}
    assert shown == by_sql
    qtbot.waitUntil(lambda: tab._count is not None, timeout=30000)
    assert tab._count == N_OLD
    assert tab.model.scanned_for(Filter(findings=[K])) is None

    # a row beyond the detailed findings: its Findings column and its detail name expired_key
    detailed = {f.key for f in res.findings if f.kind is K}
    i = next(i for i, r in enumerate(tab.model.rows()) if r.key_raw not in detailed)
    r = tab.model.row(i)
    assert theme.KIND_WORDS[K] in tab.model.data(tab.model.index(i, COL_FINDINGS))
    tab.open_operation(r.scope_raw, r.key_raw)
    qtbot.waitUntil(
        lambda: tab.detail.detail is not None and tab.detail.detail.key_raw == r.key_raw and not tab.runner.pending(),
        timeout=30000,
    )
    d = tab.detail.detail
    fs = [f for f in d.findings if f.kind is K]
    assert len(fs) == 1 and d.explanations.get(id(fs[0]))  # explanation computed for this operation
    assert fs[0].explanation == next(f for f in by_engine if f.key == r.key_raw).explanation

    # a search hit beyond the detailed findings carries the kind's badge too (it had none)
    window.search_all(r.key_raw)
    qtbot.waitUntil(lambda: window._search_left <= 0 and window.search_model.rowCount() > 0, timeout=30000)
    sm = window.search_model
    assert sm.hit(0).key_raw == r.key_raw
    assert theme.KIND_SHORT[K] in sm.data(sm.index(0, sm.COL_FINDINGS))

    # F8 walks every expired key, the detailed ones first, then those sent as keys
    assert len(tab._ordered) == N_OLD
    assert {f.key for f in tab._ordered} == by_sql
    tab._finding_pos = DETAIL - 1
    tab.step_finding(1)
    f = tab._ordered[DETAIL]
    assert f.kind is K and f.key not in detailed
    qtbot.waitUntil(
        lambda: tab.detail.detail is not None and tab.detail.detail.key_raw == f.key and not tab.runner.pending(),
        timeout=30000,
    )
    assert [g.kind for g in tab.detail.detail.findings] == [K]

    # F5: a new scan, the same exact numbers; the old scan's key sets are emptied (off the GUI thread)
    old = res.compact[K]
    tab.refresh()
    qtbot.waitUntil(lambda: tab.findings is not res and tab.scan_complete(), timeout=60000)
    settle(qtbot, tab)
    assert tab.findings.counts[K] == N_OLD and tab.filtered_findings.counts[K] == N_OLD
    assert tab.findings.compact[K] is not old
    qtbot.waitUntil(lambda: len(old) == 0 and not old.by_sev, timeout=10000)
    assert len(tab._ordered) == N_OLD


def test_a_filter_narrowing_more_than_kinds_counts_the_compact_kind_in_sql(qtbot, window, aged_celery, monkeypatch):
    from idemview.services import scanproc
    from idemview.services.session import OpenSpec

    monkeypatch.setattr(scanproc, "DETAIL_MAX", DETAIL)
    tab = open_and_wait(qtbot, window, OpenSpec(url=str(aged_celery), name="aged celery", layout="celery"))
    settle(qtbot, tab)
    tab.filterbar.set_key("task-000")  # task-000001 … task-000999: all of them expired
    settle(qtbot, tab)
    ff = tab.filtered_findings
    assert ff is not None and ff.base_filtered
    assert ff.counts[K] == 999 and ff.totals[K] == N_OLD


def test_finding_walk_keeps_f8_order():
    """The walk over detailed findings and key tails is the order a full sort would give."""
    from idemview.domain.model import SEVERITY_ORDER, Finding, Severity
    from idemview.services.compact import FindingWalk

    def f(kind, sev, key):
        return Finding(kind, sev, "s", key, "")

    ordered = [
        f(FindingKind.DUPLICATE_EFFECT, Severity.CRITICAL, "d1"),
        f(FindingKind.STUCK_IN_PROGRESS, Severity.HIGH, "s1"),
        f(K, Severity.INFO, "e1"),
        f(K, Severity.INFO, "e2"),
    ]
    tails = [
        (K, Severity.INFO, [("s", "e3"), ("s", "e4")]),
        (FindingKind.STUCK_IN_PROGRESS, Severity.HIGH, [("s", "s2")]),
        (FindingKind.STUCK_IN_PROGRESS, Severity.LOW, []),
    ]
    walk = FindingWalk(ordered, tails)
    assert [(g.kind, g.key) for g in walk] == [
        (FindingKind.DUPLICATE_EFFECT, "d1"),
        (FindingKind.STUCK_IN_PROGRESS, "s1"),
        (FindingKind.STUCK_IN_PROGRESS, "s2"),
        (K, "e1"),
        (K, "e2"),
        (K, "e3"),
        (K, "e4"),
    ]
    assert len(walk) == 7 and walk[-1].key == "e4" and walk[2].severity is Severity.HIGH
    keys = [(SEVERITY_ORDER[g.severity], g.kind.value) for g in walk]
    assert keys == sorted(keys)
    with pytest.raises(IndexError):
        walk[7]
