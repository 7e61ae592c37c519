"""The GUI layout editor (pytest-qt, offscreen): map an unknown schema end to end, then scan it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from PySide6.QtCore import Qt
from sqlalchemy import Column, Integer, MetaData, Table, Text, create_engine, insert

from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_layout, load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger

pytestmark = [pytest.mark.gui, pytest.mark.qt_log_level_fail("WARNING")]

UTC = UTC
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
S = int(NOW.timestamp())

# The planted incidents, and nothing else, must be found once the schema is mapped.
PLANTED = {
    ("stuck_in_progress", "t1", "r-stuck"),  # PROCESSING, lease taken 1 h ago (timeout 600 s)
    ("retry_storm", "t2", "r-storm"),  # 9 tries > 5
    ("unresolved_failure", "t1", "r-gaveup"),
}  # GAVE_UP (mapped to failed by hand), never done


def _iso(sec: int) -> str:
    return datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def unknown_ledger(tmp_path):
    """A SQLite ledger no preset knows: payments_dedup with epoch-second and ISO-text times."""
    path = tmp_path / "payments.db"
    w = create_engine(f"sqlite:///{path}")
    md = MetaData()
    t = Table(
        "payments_dedup",
        md,
        Column("req_id", Text),
        Column("tenant", Text),
        Column("state", Text),
        Column("first_seen", Integer),
        Column("done_at", Text),
        Column("tries", Integer),
    )
    Table("unrelated", md, Column("id", Integer, primary_key=True), Column("note", Text))
    md.create_all(w)
    rows = [
        dict(
            req_id=f"r-ok-{i}",
            tenant=("t1", "t2")[i % 2],
            state="DONE",
            first_seen=S - 7200 + i * 60,
            done_at=_iso(S - 7200 + i * 60 + 5),
            tries=1 + i % 2,
        )
        for i in range(8)
    ]
    rows += [
        dict(req_id="r-stuck", tenant="t1", state="PROCESSING", first_seen=S - 3600, done_at=None, tries=1),
        dict(req_id="r-fresh", tenant="t2", state="PROCESSING", first_seen=S - 60, done_at=None, tries=1),
        dict(req_id="r-storm", tenant="t2", state="DONE", first_seen=S - 5000, done_at=_iso(S - 4000), tries=9),
        dict(req_id="r-gaveup", tenant="t1", state="GAVE_UP", first_seen=S - 3000, done_at=None, tries=3),
        # failed, then completed later under the same key: resolved, not a finding
        dict(req_id="r-retried", tenant="t2", state="GAVE_UP", first_seen=S - 2500, done_at=None, tries=2),
        dict(req_id="r-retried", tenant="t2", state="DONE", first_seen=S - 2000, done_at=_iso(S - 1990), tries=1),
        dict(req_id="r-queued", tenant="t1", state="queued", first_seen=S - 30, done_at=None, tries=0),
    ]
    with w.begin() as c:
        c.execute(insert(t), rows)
    w.dispose()
    eng = open_engine(str(path))
    yield eng
    eng.dispose()


@pytest.fixture
def config(tmp_path, monkeypatch):
    d = tmp_path / "cfg"
    monkeypatch.setenv("IDEMVIEW_CONFIG_DIR", str(d))
    return d


def _editor(qtbot, engine, start=None, **kw):
    from idemview.qt.layout_editor import LayoutEditor

    ed = LayoutEditor(engine, start, now=NOW, **kw)
    qtbot.addWidget(ed)
    with qtbot.waitSignal(ed.schemaLoaded, timeout=10_000):
        pass
    return ed


def _pick(combo, data):
    i = combo.findData(data)
    assert i >= 0, f"{data!r} not offered by the combo"
    combo.setCurrentIndex(i)


def _check(checklist, names):
    for i in range(checklist.count()):
        it = checklist.item(i)
        if it.data(Qt.UserRole) in names:
            it.setCheckState(Qt.Checked)


def test_map_an_unknown_schema_end_to_end_and_scan(qtbot, qtmodeltester, unknown_ledger, config):
    ed = _editor(qtbot, unknown_ledger, connection_id="c0ffee")
    assert ed.tabs.isEnabled()
    # Only reflected tables are offered.
    labels = [ed.table_combo.itemText(i) for i in range(ed.table_combo.count())]
    assert labels == ["(choose a table)", "payments_dedup", "unrelated"]
    # Nothing chosen yet: the mapping does not validate and says why, visibly.
    qtbot.waitUntil(lambda: not ed.error_label.isHidden(), timeout=5000)
    assert not ed.save_button.isEnabled()

    _pick(ed.table_combo, "\x1fpayments_dedup")
    assert [ed.key_list.item(i).data(Qt.UserRole) for i in range(ed.key_list.count())] == [
        "req_id",
        "tenant",
        "state",
        "first_seen",
        "done_at",
        "tries",
    ]
    _check(ed.key_list, {"req_id"})
    _check(ed.scope_list, {"tenant"})

    # Status: the values are sampled from the database, with counts, and pre-guessed.
    _pick(ed.status_combo, "state")
    m = ed.status_model
    qtbot.waitUntil(lambda: m.rowCount() == 4, timeout=5000)
    shown = {m.index(r, 0).data(): (m.index(r, 1).data(), m.index(r, 2).data()) for r in range(m.rowCount())}
    assert shown == {
        "DONE": ("10", "completed"),
        "GAVE_UP": ("2", "unknown"),
        "PROCESSING": ("2", "in_progress"),
        "queued": ("1", "new"),
    }
    # GAVE_UP is a word no guess knows: map it by hand through its combo in the table.
    combo = ed.status_view.indexWidget(m.index(m.row_of("GAVE_UP"), 2))
    combo.setCurrentText("failed")
    assert m.index(m.row_of("GAVE_UP"), 2).data() == "failed"
    qtmodeltester.check(m)

    # Times: the encoding is guessed from the sampled values when a column is chosen.
    rows = ed.time_rows
    _pick(rows["created_at"].column, "first_seen")
    _pick(rows["completed_at"].column, "done_at")
    _pick(rows["locked_at"].column, "first_seen")
    qtbot.waitUntil(
        lambda: (
            (
                rows["created_at"].encoding.currentText(),
                rows["completed_at"].encoding.currentText(),
                rows["locked_at"].encoding.currentText(),
            )
            == ("epoch_s", "iso_text", "epoch_s")
        ),
        timeout=5000,
    )
    qtbot.waitUntil(lambda: rows["completed_at"].sample.text().startswith("2026-11-30"), timeout=5000)

    _pick(ed.value_rows["attempt_count"][0], "tries")
    ed.att_source.setCurrentText("counter")
    ed.lock_spin.setValue(600)

    # The live preview and the finding counts follow the mapping (computed off the GUI thread).
    want = {"stuck_in_progress": 1, "retry_storm": 1, "unresolved_failure": 1}
    qtbot.waitUntil(lambda: ed.last_counts == want, timeout=10_000)
    assert ed.error_label.isHidden()
    pm = ed.preview_model
    assert pm.rowCount() == 15
    qtmodeltester.check(pm)
    keys = pm.column_values("key")
    assert keys[0] == "r-queued"  # newest first
    assert pm.column_values("status")[keys.index("r-gaveup")] == "failed"
    assert pm.column_values("created_at")[keys.index("r-stuck")] == "2026-11-30 11:00:00Z"
    assert pm.column_values("completed_at")[keys.index("r-stuck")] == "—"  # missing stays missing
    assert "n/a" in ed.findings_label.text()  # kinds this mapping cannot detect are named

    with qtbot.waitSignal(ed.saved, timeout=5000) as sig:
        ed.save_button.click()
    path = config / "layouts" / "c0ffee.toml"
    assert sig.args == [str(path)]

    lay = load_layout(str(path))
    assert lay.table == "payments_dedup" and lay.key == ["req_id"] and lay.scope == ["tenant"]
    assert lay.status.map["GAVE_UP"] == "failed"
    assert lay.times["completed_at"].encoding == "iso_text"
    fs = FindingEngine(Ledger(unknown_ledger, lay), NOW).run()
    assert {(f.kind.value, f.scope, f.key) for f in fs} == PLANTED


def test_start_from_preset_then_edit(qtbot, tmp_path, config):
    from idemview.services.demo import DEFAULT_ANCHOR, write_demo

    write_demo(tmp_path / "demo.db", operations=300)
    eng = open_engine(str(tmp_path / "demo.db"))
    try:
        from idemview.qt.layout_editor import LayoutEditor

        ed = LayoutEditor(eng, "idemview", now=DEFAULT_ANCHOR, save_path=tmp_path / "mine.toml")
        qtbot.addWidget(ed)
        with qtbot.waitSignal(ed.previewUpdated, timeout=10_000):
            pass
        assert ed.key_list.checked() == ["idempotency_key"] and ed.scope_list.checked() == ["scope"]
        qtbot.waitUntil(lambda: ed.status_model.rowCount() >= 3, timeout=5000)
        assert ed.status_model.index(ed.status_model.row_of("succeeded"), 2).data() == "completed"
        assert sum(ed.last_counts.values()) > 0
        # untouched, the saved layout is the preset's mapping
        ed.name_edit.setText("demo-local")
        out = ed.save()
        lay = load_layout(str(out))
        assert lay.name == "demo-local" and lay.attempts.source == "table"
        assert lay.attempts.join == {"scope": "scope", "idempotency_key": "idempotency_key"}
        base = FindingEngine(Ledger(eng, load_preset("idemview")), DEFAULT_ANCHOR).run()
        mine = FindingEngine(Ledger(eng, lay), DEFAULT_ANCHOR).run()
        assert [f.to_json() for f in mine] == [f.to_json() for f in base]
    finally:
        eng.dispose()


def test_a_preset_that_does_not_fit_shows_a_message(qtbot, unknown_ledger, config):
    ed = _editor(qtbot, unknown_ledger, start="celery")
    qtbot.waitUntil(lambda: not ed.error_label.isHidden(), timeout=10_000)
    assert "celery_taskmeta" in ed.error_label.text()
    assert "not in database" in ed.table_combo.currentText()
    assert ed.preview_model.rowCount() == 0
    # Starting over from scratch clears it.
    ed.start_combo.setCurrentText("(scratch)")
    ed.start_button.click()
    qtbot.waitUntil(lambda: ed.table_combo.currentData() is None and ed.tabs.isEnabled(), timeout=10_000)


def test_stale_results_are_dropped(qtbot, unknown_ledger, config):
    from idemview.qt.layout_editor import PreviewResult

    ed = _editor(qtbot, unknown_ledger)
    _pick(ed.table_combo, "\x1fpayments_dedup")
    _check(ed.key_list, {"req_id"})
    qtbot.waitUntil(lambda: ed.preview_model.rowCount() == 15, timeout=10_000)
    old = ed._gens["preview"]
    _check(ed.scope_list, {"tenant"})  # a new mapping: the next preview has a new generation
    qtbot.waitUntil(lambda: ed._gens["preview"] > old, timeout=5000)
    ed._on_done("preview", old, PreviewResult([], {}))  # a late answer for the old mapping
    qtbot.wait(50)
    assert ed.preview_model.rowCount() == 15


def test_invalid_mapping_cannot_be_saved(qtbot, unknown_ledger, tmp_path, config):
    ed = _editor(qtbot, unknown_ledger, save_path=tmp_path / "x.toml")
    _pick(ed.table_combo, "\x1fpayments_dedup")
    with qtbot.waitSignal(ed.previewFailed, timeout=5000) as sig:
        pass
    assert "operations.key is required" in sig.args[0]
    assert ed.save() is None and not (tmp_path / "x.toml").exists()
    assert "operations.key is required" in ed.error_label.text()


def test_closing_cancels_running_work_instead_of_waiting(qtbot, unknown_ledger, config):
    """Closing the editor returns while its database work is still running (the old private pool waited
    up to 30 s for it), and the late result is dropped."""
    import threading

    from idemview.qt import workers

    ed = _editor(qtbot, unknown_ledger)
    started, release, finished, delivered = threading.Event(), threading.Event(), threading.Event(), []

    def slow():
        started.set()
        release.wait(20)  # stands in for a long query; the test releases it after close returns
        finished.set()
        return ("col", [])

    ed._on_done = lambda *a: delivered.append(a)
    ed._submit("status", slow)
    qtbot.waitUntil(started.is_set, timeout=10_000)  # running on a worker (a queued job is simply dropped)
    ed.close()
    assert not finished.is_set(), "close() waited for the running job"
    release.set()
    assert workers.pool().waitForDone(10_000)
    qtbot.wait(50)  # let a (stale) result reach the event loop, were it delivered
    assert finished.is_set() and delivered == []


def test_add_effect_records_from_the_reflected_schema(qtbot, tmp_path, config):
    """Issue #16: the editor adds an [effects] section from the reflected schema; the saved layout
    reconciles (a failed operation with a charge is a hidden success, a second charge a duplicate)."""
    import sqlite3

    from idemview.services.demo import DEFAULT_ANCHOR, write_demo

    path = tmp_path / "demo.db"
    write_demo(path, operations=200)
    with sqlite3.connect(path) as c:
        failed = c.execute(
            "SELECT scope, idempotency_key FROM operations WHERE status = 'failed' ORDER BY id LIMIT 1"
        ).fetchone()
        done = c.execute(
            "SELECT scope, idempotency_key FROM operations WHERE status = 'succeeded' ORDER BY id LIMIT 1"
        ).fetchone()
        c.execute(
            "CREATE TABLE payouts (id INTEGER PRIMARY KEY, op_key TEXT, payout_id TEXT, amount INT, paid_at TEXT)"
        )
        c.executemany(
            "INSERT INTO payouts (op_key, payout_id, amount, paid_at) VALUES (?, ?, ?, ?)",
            [
                (failed[1], "po_1", 100, "2026-11-30T10:00:00Z"),
                (done[1], "po_2", 100, "2026-11-30T10:00:00Z"),
                (done[1], "po_3", 100, "2026-11-30T10:01:00Z"),
            ],
        )
    eng = open_engine(str(path))
    try:
        from idemview.qt.layout_editor import LayoutEditor

        ed = LayoutEditor(eng, "idemview", now=DEFAULT_ANCHOR, save_path=tmp_path / "fx.toml")
        qtbot.addWidget(ed)
        with qtbot.waitSignal(ed.previewUpdated, timeout=10_000):
            pass
        assert ed.fx_table.currentData() is None  # the preset has no effect records
        _pick(ed.fx_table, "\x1fpayouts")  # (schema, table) key of the reflected table
        ed.fx_link.set_value("op_key")
        _pick(ed.fx_link_to, "key")
        ed.fx_id.set_value("id")
        ed.fx_reference.set_value("payout_id")
        ed.fx_time.column.set_value("paid_at")
        ed.fx_time.encoding.setCurrentText("iso_text")
        _check(ed.fx_show, ["amount"])
        import os

        if os.environ.get("IDEMVIEW_SHOT"):
            ed.tabs.setCurrentIndex(ed.tabs.count() - 1)
            ed.resize(1300, 760)
            ed.grab().save(os.environ["IDEMVIEW_SHOT"])
        lay = load_layout(str(ed.save()))
        assert lay.effects is not None and lay.effects.table == "payouts"
        assert (lay.effects.link_effect, lay.effects.link_operation) == ("op_key", "key")
        assert lay.effects.show == ["amount"] and lay.effects.time.encoding == "iso_text"
        fs = FindingEngine(Ledger(eng, lay), DEFAULT_ANCHOR).run()
        got = {
            (f.kind.value, f.key)
            for f in fs
            if f.kind.value == "hidden_success" or "effect records in payouts" in f.explanation
        }
        assert got == {("hidden_success", failed[1]), ("duplicate_effect", done[1])}
    finally:
        eng.dispose()
