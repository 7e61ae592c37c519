"""The grid's Effects column (issue #16 §4): effect records per operation, counted per page on a worker
in one grouped query, equal to what the effects file holds; hidden when the layout has no [effects]."""

from __future__ import annotations

import os
import sqlite3

import pytest

from tests.gui.conftest import assert_off_gui_thread, load_all, open_and_wait, spec_for

pytestmark = [pytest.mark.gui, pytest.mark.qt_log_ignore("propagateSizeHints")]


def _direct_counts(effects_db) -> dict[str, int]:
    with sqlite3.connect(effects_db) as c:
        return dict(c.execute("SELECT idempotency_key, count(*) FROM charges GROUP BY idempotency_key"))


def _counted(tab) -> bool:
    m = tab.model
    return (
        not m.is_loading()
        and not any(ch.startswith("effects:") for ch in tab.runner.pending())
        and all(m.effect_count(i) is not None for i in range(m.rowCount()))
    )


def test_effects_column_counts_records_per_page_off_the_gui_thread(qtbot, window, demo_db, query_threads, tmp_path):
    from idemview.qt.models import COL_EFFECTS
    from idemview.services.demo_effects import effects_path_for

    path, _planted = demo_db
    with sqlite3.connect(effects_path_for(path)) as c:
        q = "SELECT scope, idempotency_key FROM idemview_demo_planted WHERE kind = 'duplicate_effect'"
        doubles = {(s, k) for s, k in c.execute(q)}
    direct = _direct_counts(effects_path_for(path))
    assert doubles and all(direct[k] == 2 for _s, k in doubles), "the demo plants double charges"

    tab = open_and_wait(qtbot, window, spec_for(path))
    load_all(qtbot, tab)
    qtbot.waitUntil(lambda: _counted(tab), timeout=60000)
    m = tab.model
    assert not tab.grid.isColumnHidden(COL_EFFECTS)
    head = m.headerData(COL_EFFECTS, tab.grid.horizontalHeader().orientation(), 3)  # ToolTipRole
    assert "Effect records of each operation, counted in charges (sqlite" in head

    rows = {(m.row(i).scope_raw, m.row(i).key_raw): i for i in range(m.rowCount())}
    # every row shows what a direct count in the effects file says
    for (_s, k), i in rows.items():
        assert m.effect_count(i) == direct.get(k, 0), k
    # a known double charge: "2 ⚠", with a tooltip saying what and where
    i2 = rows[sorted(doubles & rows.keys())[0]]
    assert m.index(i2, COL_EFFECTS).data() == "2 ⚠"
    tip = m.index(i2, COL_EFFECTS).data(3)
    assert tip.startswith("2 effect records of this operation in charges (sqlite") and "more than once" in tip
    # a normal charge: one record; an operation without a charge: 0
    i1 = next(i for (_s, k), i in rows.items() if direct.get(k) == 1)
    assert m.index(i1, COL_EFFECTS).data() == "1"
    i0 = next(i for (_s, k), i in rows.items() if k not in direct)
    assert m.index(i0, COL_EFFECTS).data() == "0"

    # one grouped count per page, never one query per row, and none on the GUI thread
    grouped = [s for s, _t in query_threads if "charges" in s and "GROUP BY" in s.upper() and "count(" in s.lower()]
    pages = -(-m.rowCount() // m.page_size)
    assert pages <= len(grouped) <= pages + 2  # + a page re-read when the scan's findings arrive
    per_row = [s for s, _t in query_threads if "FROM charges" in s and "GROUP BY" not in s.upper()]
    assert len(per_row) < 10, "effect records are not read row by row"
    assert_off_gui_thread(query_threads)

    window.resize(1280, 800)
    qtbot.wait(50)
    window.grab().save(os.environ.get("IDEMVIEW_SHOT_EFFECTS", str(tmp_path / "effects_col.png")))


def test_effects_column_hidden_without_effects(qtbot, window, demo_db):
    from idemview.qt.models import COL_EFFECTS
    from idemview.services.session import OpenSpec

    path, _planted = demo_db
    tab = open_and_wait(qtbot, window, OpenSpec(url=str(path), name="plain", layout="idemview"))
    assert tab.grid.isColumnHidden(COL_EFFECTS)
    assert not tab.model.has_effects()
    assert tab.model.index(0, COL_EFFECTS).data() == ""
    assert not any(ch.startswith("effects:") for ch in tab.runner.pending())
