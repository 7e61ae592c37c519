"""The Windows view of a ledger tab (issue #22): the demo's too-short kind on top with its chart and
sentence, a late operation filters the grid to its key, the table exports with a manifest, and no
statement runs on the GUI thread."""

from __future__ import annotations

import json

import pytest

from tests.gui.conftest import assert_off_gui_thread, open_and_wait, settle, spec_for

pytestmark = [pytest.mark.gui, pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise")]


def _off_thread(fn):
    """``fn()`` on another thread: the test's own reference queries must not count as the GUI's."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as ex:
        return ex.submit(fn).result()


def test_windows_view_on_the_demo(qtbot, window, demo_db, tmp_path, query_threads):
    from idemview.services.windows import late_operations, measure

    path, planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    query_threads.clear()
    tab.windows_button.click()
    view = tab.windows_dialog.view
    qtbot.waitUntil(lambda: view.report is not None and not tab.runner.is_pending("windows"), timeout=60000)
    rep = view.report
    # the same report the core computes for the tab's now
    want = _off_thread(lambda: measure(tab.ledger, tab.now))
    assert [g.to_json() for g in rep.groups] == [g.to_json() for g in want.groups]
    top = rep.groups[0]
    assert (top.kind, top.verdict) == ("payment.capture", "too_short")
    assert top.window_s == 86400 and top.late == len(planted.incidents["replay_after_expiry"])
    assert all(g.verdict == "enough" for g in rep.groups[1:])
    assert view.table.rowCount() == len(rep.groups) and view.table.item(0, 1).text() == "too short"
    assert "payment.capture: window 24 h;" in view.sentence.text()
    # the chart: one bar, one max dot and one window tick per kind
    items = view.plot.getPlotItem().listDataItems()
    assert len(items) == 3 * len(rep.groups)
    # the late operations of the selected (too short) kind, latest first
    qtbot.waitUntil(lambda: view.late.rowCount() > 0 and not tab.runner.is_pending("windows:late"), timeout=30000)
    late = _off_thread(lambda: late_operations(tab.ledger, "payment.capture"))
    assert view.late.rowCount() == len(late) == top.over
    assert {(r["scope"], r["key"]) for r in late} == set(planted.incidents["replay_after_expiry"])
    # clicking one filters the grid to its idempotency key
    view._late_clicked(0, 0)
    settle(qtbot, tab)
    assert tab.filterbar.filter().key == late[0]["key"]
    qtbot.waitUntil(lambda: tab.model.rowCount() == 1, timeout=30000)
    # export: CSV + manifest, one row per kind
    out = tmp_path / "windows.csv"
    view.export_to(str(out))
    qtbot.waitUntil(lambda: not tab.runner.is_pending("windows:export"), timeout=30000)
    assert f"Exported {len(rep.groups)} kinds" in view.status.text() and len(rep.groups) == 7  # issue 21 added 2
    manifest = json.loads((tmp_path / "windows.csv.manifest.json").read_text())
    assert manifest["row_count"] == len(rep.groups) and manifest["rows"]["kind"] == "windows"
    import idemview

    df = idemview.read_evidence(out)
    assert list(df["verdict"])[0] == "too_short" and list(df["kind"])[0] == "payment.capture"
    # a second export to the same file is refused, not overwritten, and says why
    view.export_to(str(out))
    qtbot.waitUntil(lambda: not tab.runner.is_pending("windows:export"), timeout=30000)
    assert view.status.text().startswith("Export failed:")
    assert_off_gui_thread(query_threads)
    tab.windows_dialog.close()
