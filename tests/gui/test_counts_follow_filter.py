"""Issue #13 §2–§4 and #11 §3: chips, findings panel, markers and F8 follow the filter and the time
window; grid and detail show the same operation; "Findings as of …" is on screen and is the export's
`now`; clearing the filter clears the chart's window; the chart fits the filtered operations."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from idemview.domain.filters import Filter
from idemview.domain.model import FindingKind
from tests.gui.conftest import HOUR, assert_off_gui_thread, load_all, open_and_wait, settle, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def _refs(tab, flt: Filter) -> set:
    """(scope, key) of the operations ``flt`` shows, read by the test on a thread of its own (so the
    "no statement on the GUI thread" check keeps watching the GUI alone)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as ex:
        return ex.submit(lambda: {(o.scope, o.key) for o in tab.ledger.iter_operations(flt, now=tab.now)}).result()


def _expected(tab, flt: Filter) -> dict[FindingKind, int]:
    """Findings per kind among the operations ``flt`` shows, computed independently of the GUI: the
    ledger's own filtered operations intersected with the scan's findings."""
    refs = _refs(tab, flt)
    out = {k: 0 for k in FindingKind}
    for f in tab.findings.findings:
        if (f.scope, f.key) in refs:
            out[f.kind] += 1
    return out


def test_chips_panel_markers_and_f8_follow_the_time_window(qtbot, window, demo_db, query_threads):
    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    totals = dict(tab.findings.counts)
    assert sum(totals.values()) == len(tab.findings.findings)
    # unfiltered: a chip shows the ledger's count alone
    k = FindingKind.DUPLICATE_EFFECT
    assert tab.filterbar.chips[k].text().endswith(f"  {totals[k]}")

    since, until = HOUR - timedelta(hours=2), HOUR - timedelta(minutes=30)
    tab.overview.select_window(since, until)
    qtbot.waitUntil(lambda: tab.flt.since == since, timeout=5000)
    settle(qtbot, tab)
    want = _expected(tab, Filter(since=since, until=until))
    assert sum(want.values()) < sum(totals.values())  # the window really narrows
    for kind, b in tab.filterbar.chips.items():
        if kind in tab.findings.unsupported:
            continue
        assert b.text().endswith(f"  {want[kind]} of {totals[kind]}"), (kind, b.text())
    ff = tab.filtered_findings
    assert ff.counts == want
    head = tab.findings_title.text()
    assert f"{sum(want.values()):,} of {sum(totals.values()):,} findings" in head
    # the panel: operations per kind, "n of N"
    for row in range(tab.findings_model.rowCount()):
        kind = tab.findings_model.kind_at(row)
        if kind in tab.findings.unsupported:
            continue
        assert tab.findings_model.count_text(row) == f"{ff.ops[kind]} of {ff.total_ops[kind]}"
    # markers and F8 only walk findings of operations created in the window
    inside = _refs(tab, Filter(since=since, until=until))
    assert tab._ordered and all((f.scope, f.key) in inside for f in tab._ordered)
    assert all((f.scope, f.key) in inside for f in tab.overview._findings)
    assert len(tab._ordered) == sum(want.values())
    assert_off_gui_thread(query_threads)


def test_f8_opens_only_rows_shown_and_grid_matches_detail(qtbot, window, demo_db):
    path, planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    tab.filter_by_finding(FindingKind.DUPLICATE_EFFECT)
    qtbot.waitUntil(lambda: tab.flt.findings == [FindingKind.DUPLICATE_EFFECT], timeout=5000)
    settle(qtbot, tab)
    load_all(qtbot, tab)
    shown = {(r.scope_raw, r.key_raw) for r in tab.model.rows()}
    assert len(tab._ordered) == tab.findings.counts[FindingKind.DUPLICATE_EFFECT]
    seen = set()
    for _ in range(len(tab._ordered) + 2):  # past the end it wraps round
        tab.step_finding(1)
        f = tab._ordered[tab._finding_pos]
        qtbot.waitUntil(lambda f=f: tab.detail.detail is not None and tab.detail.detail.key_raw == f.key, timeout=10000)
        assert (f.scope, f.key) in shown and f.kind == FindingKind.DUPLICATE_EFFECT
        sel = tab.grid.selectionModel().selectedRows()
        assert len(sel) == 1
        r = tab.model.row(sel[0].row())
        assert (r.scope_raw, r.key_raw) == (tab.detail.detail.scope_raw, tab.detail.detail.key_raw)
        seen.add((f.scope, f.key))
    assert seen == {(f.scope, f.key) for f in tab._ordered}


def test_a_detail_outside_the_loaded_rows_leaves_no_other_row_selected(qtbot, window, demo_db):
    path, planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    tab.grid.selectRow(0)
    first = tab.model.row(0)
    qtbot.waitUntil(
        lambda: tab.detail.detail is not None and tab.detail.detail.key_raw == first.key_raw, timeout=10000
    )  # a selected row opens in the detail
    loaded = {(r.scope_raw, r.key_raw) for r in tab.model.rows()}
    scope, key = next(ref for refs in planted.incidents.values() for ref in refs if ref not in loaded)
    tab.open_operation(scope, key)
    qtbot.waitUntil(lambda: tab.detail.detail.key_raw == key, timeout=10000)
    assert tab.grid.selectionModel().selectedRows() == []


def test_findings_as_of_is_shown_refreshed_and_exported(qtbot, window, demo_db, tmp_path, monkeypatch):
    from idemview.qt import theme

    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    first = tab.now
    assert tab.as_of.full_text() == f"Findings as of {first.strftime('%H:%M:%S')} UTC"
    assert tab.findings.now == first
    qtbot.waitUntil(
        lambda: __import__("datetime").datetime.now(first.tzinfo).replace(microsecond=0) > first, timeout=5000
    )
    window.act_refresh.trigger()  # F5
    qtbot.waitUntil(lambda: tab.scan_complete() and tab.findings.now > first, timeout=30000)
    second = tab.now
    assert tab.as_of.full_text() == f"Findings as of {second.strftime('%H:%M:%S')} UTC"
    # live refresh moves it too
    qtbot.waitUntil(
        lambda: __import__("datetime").datetime.now(first.tzinfo).replace(microsecond=0) > second, timeout=5000
    )
    window._live_tick()
    qtbot.waitUntil(lambda: tab.scan_complete() and tab.findings.now > second, timeout=30000)
    third = tab.now
    assert tab.as_of.full_text().startswith(f"Findings as of {third.strftime('%H:%M:%S')}")
    # in local time the label names the zone (on a UTC machine too)
    window.zone_btn.setChecked(True)
    assert "local" in tab.as_of.full_text() and "local" in window.zone_btn.text()
    window.zone_btn.setChecked(False)
    # the export's manifest records the `now` on screen, and says whose masking key it used
    out = tmp_path / "ev.csv"
    window.export_current()
    dlg = window.export_dialog
    dlg.path.setText(str(out))
    dlg.export_btn.click()
    qtbot.waitUntil(lambda: getattr(window, "export_done_box", None) is not None, timeout=30000)
    m = json.loads((tmp_path / "ev.csv.manifest.json").read_text())
    assert m["now"].replace("Z", "+00:00") == third.isoformat()
    assert m["masking_key"]["scope"] == "session"
    assert theme.TIME.utc


def test_clear_filter_clears_the_window_band_and_the_chart_fits_the_filter(qtbot, window, demo_db):
    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    since, until = HOUR - timedelta(hours=3), HOUR - timedelta(hours=2)
    tab.overview.select_window(since, until)
    qtbot.waitUntil(lambda: tab.flt.since == since, timeout=5000)
    assert tab.overview.window_shown() == (since.timestamp(), until.timestamp())
    assert tab.overview.clear_btn.isEnabled()
    tab.filterbar.clear_btn.click()
    qtbot.waitUntil(lambda: tab.flt.since is None, timeout=5000)
    assert tab.overview.window_shown() is None
    assert not tab.overview.clear_btn.isEnabled()
    # "Clear window" on the chart clears the filter's time range (and only that)
    tab.filterbar.status_actions[list(tab.filterbar.status_actions)[1]].setChecked(True)
    tab.overview.select_window(since, until)
    qtbot.waitUntil(lambda: tab.flt.since == since, timeout=5000)
    tab.overview.clear_btn.click()
    qtbot.waitUntil(lambda: tab.flt.since is None, timeout=5000)
    assert tab.flt.statuses and tab.overview.window_shown() is None
    assert tab.filterbar.sentence_text() == tab.flt.sentence()
    # fit the chart to the filtered operations: a key filter on one planted operation
    tab.filterbar.clear()
    settle(qtbot, tab)
    f = tab.findings.ordered[0]
    tab.filterbar.set_key(f.key)
    qtbot.waitUntil(lambda: tab.flt.key == f.key, timeout=5000)
    created = [o.created_at for o in tab.ledger.iter_operations(Filter(key=f.key), now=tab.now)]
    tab.overview.fit_filter_btn.click()
    lo, hi = min(created), max(created)
    qtbot.waitUntil(
        lambda: (
            tab.overview.view_range()[0] <= lo
            and tab.overview.view_range()[1] >= hi
            and (tab.overview.view_range()[1] - tab.overview.view_range()[0]) < timedelta(hours=1)
        ),
        timeout=10000,
    )


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "mariadb"])
def test_counts_follow_the_window_on_server_engines(qtbot, window, request, dialect):
    """The findings process and the narrowing SQL on PostgreSQL and MariaDB (under both the ``mysql``
    and the ``mariadb`` dialect names): chips read "n of N" with n computed independently."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    from idemview.services.demo import generate
    from idemview.services.session import OpenSpec

    base = request.getfixturevalue("pg_url" if dialect == "postgresql" else "mysql_url")
    url = make_url(base)
    if dialect != "postgresql":
        url = url.set(drivername=f"{dialect}+pymysql")
    eng = create_engine(url)
    try:
        generate(eng, operations=300, anchor=HOUR)
    finally:
        eng.dispose()
    tab = open_and_wait(
        qtbot, window, OpenSpec(url=url.render_as_string(hide_password=False), name=dialect, layout="idemview")
    )
    assert tab._scan.proc is not None  # scanned in the child process
    # the live session confirms read-only under the `mariadb` name too (it was "NOT READ-ONLY")
    assert tab.badge.text().strip() == "READ-ONLY"
    totals = dict(tab.findings.counts)
    since, until = HOUR - timedelta(hours=3), HOUR - timedelta(minutes=20)
    tab.overview.select_window(since, until)
    qtbot.waitUntil(lambda: tab.flt.since == since, timeout=5000)
    settle(qtbot, tab)
    want = _expected(tab, Filter(since=since, until=until))
    assert sum(want.values()) < sum(totals.values())
    for kind, b in tab.filterbar.chips.items():
        if kind not in tab.findings.unsupported:
            assert b.text().endswith(f"  {want[kind]} of {totals[kind]}"), (kind, b.text())
