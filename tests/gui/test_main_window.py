"""The real main window, driven with pytest-qt on the offscreen platform.

Ledgers: the demo SQLite ledger and the same demo generated into PostgreSQL. Every test fails on a Qt
warning (``qt_log_level_fail``), and every query the GUI makes is recorded with the thread it ran on:
none may run on the GUI thread.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from sqlalchemy import create_engine

from idemview.domain.filters import Filter
from idemview.domain.model import FindingKind, Outcome

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    # the offscreen platform warns about a window-manager feature it lacks; not our bug
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]

UTC = UTC
HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


# conftest.py also gives the fixtures demo_db and query_threads, and isolates config and data folders
from tests.gui.conftest import (  # noqa: E402
    assert_off_gui_thread,
    close_window,
    load_all,
    make_window,
    open_and_wait,
    spec_for,
)


@pytest.fixture
def window(qtbot):
    """The main window at 1400×900 (the size these tests' layouts assume)."""
    w = make_window(qtbot)
    w.resize(1400, 900)
    w.show()
    yield w
    close_window(w)


# ------------------------------------------------------------------------------------------ tests


def test_demo_opens_with_findings_and_readonly_badge(qtbot, window, demo_db, query_threads):
    path, planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    assert tab.badge.text().strip() == "READ-ONLY"
    counts = tab.findings.counts
    for kind, refs in planted.incidents.items():
        assert counts[FindingKind(kind)] >= len(set(refs)), kind
    assert tab.filterbar.sentence_text() == "All operations"
    assert tab.findings_model.rowCount() == len(FindingKind)
    # overview got a histogram with attempts in it
    qtbot.waitUntil(lambda: bool(tab.overview._hist is not None and tab.overview._hist.counts), timeout=10000)
    assert_off_gui_thread(query_threads)


@pytest.mark.parametrize(
    "kind", [FindingKind.DUPLICATE_EFFECT, FindingKind.STUCK_IN_PROGRESS, FindingKind.REPLAY_AFTER_EXPIRY]
)
def test_filter_by_finding_shows_exactly_its_operations(qtbot, window, demo_db, kind, query_threads):
    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    tab.filter_by_finding(kind)
    qtbot.waitUntil(lambda: tab.flt.findings == [kind], timeout=5000)
    load_all(qtbot, tab)
    shown = {(r.scope_raw, r.key_raw) for r in tab.model.rows()}
    expected = {(f.scope, f.key) for f in tab.findings.findings if f.kind == kind}
    assert shown == expected and shown
    assert tab.filterbar.sentence_text() == Filter(findings=[kind]).sentence()
    assert tab.filterbar.chips[kind].isChecked()
    assert_off_gui_thread(query_threads)


def test_findings_panel_click_filters_grid(qtbot, window, demo_db):
    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    row = next(
        i for i in range(tab.findings_model.rowCount()) if tab.findings_model.kind_at(i) == FindingKind.KEY_CONFLICT
    )
    from PySide6.QtCore import Qt

    rect = tab.findings_view.visualRect(tab.findings_model.index(row, 1))
    qtbot.mouseClick(tab.findings_view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: tab.flt.findings == [FindingKind.KEY_CONFLICT], timeout=5000)
    load_all(qtbot, tab)
    assert {r.key_raw for r in tab.model.rows()} == {
        f.key for f in tab.findings.findings if f.kind == FindingKind.KEY_CONFLICT
    }


def test_operation_timeline_attempts(qtbot, window, demo_db, query_threads):
    path, planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    # a planted duplicate effect: two attempts, both succeeded (the effect-record duplicates planted by
    # demo_effects have one attempt: leave them out)
    import sqlite3

    with sqlite3.connect(path) as c:
        two = {(s, k) for s, k in c.execute("SELECT scope, idempotency_key FROM attempts WHERE attempt_no = 2")}
    dups = set(planted.incidents["duplicate_effect"]) - set(planted.incidents["replay_after_expiry"])
    scope, key = sorted(dups & two)[0]
    tab.open_operation(scope, key)
    qtbot.waitUntil(lambda: tab.detail.detail is not None and tab.detail.detail.key_raw == key, timeout=10000)
    lanes = tab.detail.timeline.lanes
    assert [l.attempt.outcome for l in lanes] == [Outcome.SUCCEEDED, Outcome.SUCCEEDED]
    assert [l.attempt.number for l in lanes] == [1, 2]
    assert tab.detail.attempts_model.rowCount() == 2
    assert "duplicate effect" in tab.detail.findings_box.text()
    # a replay after expiry: the late attempt is flagged on the timeline
    scope, key = sorted(planted.incidents["replay_after_expiry"])[0]
    tab.open_operation(scope, key)
    qtbot.waitUntil(lambda: tab.detail.detail.key_raw == key, timeout=10000)
    assert tab.detail.timeline.after_expiry_rows() == {len(tab.detail.timeline.lanes) - 1}
    # the request payload is shown masked: the demo's test card number never appears
    text = tab.detail.viewers["Request"].toPlainText()
    assert "[card#" in text and "4242424242424242" not in text and "5555555555554444" not in text
    tab.detail.grab()  # paints the timeline (exercises paintEvent)
    assert_off_gui_thread(query_threads)


def test_f8_walks_findings_most_severe_first(qtbot, window, demo_db):
    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    from PySide6.QtCore import Qt

    window.activateWindow()
    tab.grid.setFocus()
    qtbot.keyClick(tab.grid, Qt.Key.Key_F8)
    qtbot.waitUntil(lambda: tab.detail.detail is not None, timeout=10000)
    first = tab._ordered[0]
    assert first.severity.value == "critical"
    assert tab.detail.detail.key_raw == first.key


def test_grid_sort_is_a_database_query(qtbot, window, demo_db, query_threads):
    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    from PySide6.QtCore import Qt

    n_before = len(query_threads)
    tab.grid.sortByColumn(0, Qt.SortOrder.AscendingOrder)
    qtbot.waitUntil(
        lambda: tab.model.sort_key == "key" and tab.model.rowCount() > 0 and not tab.model.is_loading(), timeout=10000
    )
    keys = [r.key_raw for r in tab.model.rows()]
    assert keys == sorted(keys)
    assert any("ORDER BY" in s for s, _t in query_threads[n_before:])
    assert_off_gui_thread(query_threads)


def test_time_window_from_overview_filters(qtbot, window, demo_db):
    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    from datetime import timedelta

    since, until = HOUR - timedelta(hours=2), HOUR
    tab.overview.select_window(since, until)
    qtbot.waitUntil(lambda: tab.flt.since is not None, timeout=5000)
    load_all(qtbot, tab)
    assert tab.model.rowCount() > 0
    assert all(since <= r.created_at < until for r in tab.model.rows())
    assert "created between" in tab.filterbar.sentence_text()


def test_slow_query_cancel_keeps_ui_responsive(qtbot, window, demo_db):
    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    engine = tab.ledger.engine
    rec = {}

    def slow(tok):
        from sqlalchemy import text

        rec["start"] = time.monotonic()
        try:
            with engine.connect() as c:
                c.execute(
                    text(
                        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r "
                        "WHERE i < 5000000000) SELECT count(*) FROM r"
                    )
                ).scalar()
        finally:
            rec["end"] = time.monotonic()

    gaps = _tick_gaps(qtbot)
    got = []
    tab.runner.submit("custom", slow, got.append, got.append)
    qtbot.waitUntil(lambda: "start" in rec, timeout=5000)
    qtbot.wait(400)
    assert "end" not in rec  # it really is slow
    tab.cancel_all()
    # The statement stopped in the database, not just in our books (it would run for hours).
    # No timing limit here: stall limits are asserted by `make bench` (benchmarks/gui_stall.py).
    qtbot.waitUntil(lambda: "end" in rec, timeout=5000)
    qtbot.wait(100)
    assert got == []  # a cancelled job's result is dropped
    assert gaps.stop(), "the event loop kept ticking while the query ran"


def test_error_banner_and_what_was_shown_stays(qtbot, window, demo_db, tmp_path):
    from idemview.qt.workers import JobError

    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    n = tab.model.rowCount()
    tab.show_error(JobError("connection lost: server closed the connection unexpectedly", connection_lost=True))
    assert tab.banner.isVisible() and tab.banner.reconnect.isVisible()
    assert tab.model.rowCount() == n
    tab.banner.reconnect.click()
    qtbot.waitUntil(lambda: not tab.banner.isVisible(), timeout=5000)
    # a ledger that cannot be opened says why, in words
    bad = window.open_spec(spec_for(tmp_path / "nope.db", "missing"))
    qtbot.waitUntil(lambda: bad.banner.isVisible(), timeout=10000)
    assert "no SQLite file" in bad.banner.label.text()
    # and it does not look half-alive: not "scanning…", no chips to click (found by a tester)
    assert "scanning" not in bad.findings_title.text() and "could not be opened" in bad.findings_title.text()
    assert not bad.filterbar.isEnabled()


def test_models_pass_qtmodeltester(qtbot, qtmodeltester, window, demo_db):
    path, planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    qtmodeltester.check(tab.model, force_py=True)
    # the tester called fetchMore: let that page land while the tester still watches this model, and
    # its effect counts (their dataChanged would otherwise be checked against the next model tested:
    # one qtmodeltester checks several models in turn and stays connected to the earlier ones)
    qtbot.waitUntil(
        lambda: not tab.model.is_loading() and not any(c.startswith("effects:") for c in tab.runner.pending()),
        # an upper bound, not a timing claim: qtmodeltester re-checks the whole model on every signal, so
        # on a loaded 2-core machine the pages and effect counts take well over 10 s to land
        timeout=60000,
    )
    assert tab.model.rowCount() > tab.model.page_size
    # every page once: fetchMore called from inside rowsAboutToBeInserted must not re-ask the same page
    ids = [r.row_id for r in tab.model.rows()]
    assert len(ids) == len(set(ids)) and len(ids) <= planted.operations
    qtmodeltester.check(tab.findings_model, force_py=True)
    scope, key = sorted(planted.incidents["retry_storm"])[0]
    tab.open_operation(scope, key)
    qtbot.waitUntil(lambda: tab.detail.detail is not None and tab.detail.detail.key_raw == key, timeout=10000)
    qtmodeltester.check(tab.detail.attempts_model, force_py=True)
    window.search_all(key)
    qtbot.waitUntil(lambda: window.search_model.rowCount() > 0, timeout=10000)
    qtmodeltester.check(window.search_model, force_py=True)


def test_connection_dialog_paste_url_save_and_test(qtbot, demo_db, tmp_path):
    from idemview.config import ConnectionStore, CredentialStore
    from idemview.qt.connections import ConnectionDialog
    from idemview.services.session import SharedMasker

    store = ConnectionStore(tmp_path / "connections.toml")
    creds = CredentialStore()
    creds.available, creds.notice = False, "No OS keyring is available: passwords are kept for this session only."
    dlg = ConnectionDialog(creds, SharedMasker(), store=store)
    qtbot.addWidget(dlg)
    dlg.show()
    assert dlg.notice.isVisible() and "session only" in dlg.notice.text()
    dlg.name.setText("payments")
    dlg.url.setText("postgresql+psycopg://app:s3cr%40t@db.internal:6543/payments?sslmode=require")
    dlg.split_btn.click()
    assert (dlg.host.text(), dlg.port.value(), dlg.dbname.text(), dlg.user.text()) == (
        "db.internal",
        6543,
        "payments",
        "app",
    )
    assert dlg.password.text() == "s3cr@t" and dlg.url.text() == ""
    assert dlg.sslmode.currentText() == "require"
    c = dlg.save()
    saved = (tmp_path / "connections.toml").read_text()
    assert "s3cr" not in saved and "db.internal" in saved
    assert creds.get(c.id) == "s3cr@t"  # kept in memory for the session
    # a SQLite ledger: Test connects read-only and detects the layout (on a worker)
    dlg.new()
    dlg.type.setCurrentIndex(0)
    dlg.file.setText(str(demo_db[0]))
    dlg.test_btn.click()
    qtbot.waitUntil(lambda: "reachable" in dlg.result.text() or "⚠" in dlg.result.text(), timeout=10000)
    assert "read-only session confirmed" in dlg.result.text()
    assert "detected idemview" in dlg.result.text() and "confidence" in dlg.result.text()


# ------------------------------------------------------------------------------------ PostgreSQL


@pytest.fixture(scope="module")
def pg_demo(request):
    url = request.getfixturevalue("pg_url")
    from idemview.services.demo import generate

    eng = create_engine(url)
    planted = generate(eng, anchor=HOUR)
    eng.dispose()
    return url, planted


@pytest.mark.postgres
def test_postgres_ledger_filter_and_search_across_two_ledgers(qtbot, window, demo_db, pg_demo, query_threads):
    from idemview.services.session import OpenSpec

    url, planted = pg_demo
    pg = open_and_wait(qtbot, window, OpenSpec(url=url, name="payments-pg", layout=None))
    assert pg.badge.text().strip() == "READ-ONLY"
    assert "detected idemview" in pg.detection.text()
    pg.filter_by_finding(FindingKind.DUPLICATE_INTENT)
    qtbot.waitUntil(lambda: pg.flt.findings == [FindingKind.DUPLICATE_INTENT], timeout=5000)
    load_all(qtbot, pg)
    assert {(r.scope_raw, r.key_raw) for r in pg.model.rows()} == set(planted.incidents["duplicate_intent"])
    # the SQLite demo has the same seed, so the same keys: a search finds the key in both ledgers
    open_and_wait(qtbot, window, spec_for(demo_db[0], "demo-sqlite"))
    scope, key = sorted(planted.incidents["duplicate_effect"])[0]
    window.search_box.setText(key)
    window.search_all(key)
    qtbot.waitUntil(lambda: window._search_left <= 0, timeout=15000)
    hits = window.search_model.hits()
    assert {h.ledger_name for h in hits} == {"payments-pg", "demo-sqlite"}
    assert all(h.key_raw == key for h in hits[:2])
    # double-click opens it in its ledger

    row = next(i for i, h in enumerate(hits) if h.ledger_name == "payments-pg")
    window.search_view.doubleClicked.emit(window.search_model.index(row, 1))
    qtbot.waitUntil(lambda: pg.detail.detail is not None and pg.detail.detail.key_raw == key, timeout=10000)
    assert window.current_tab() is pg
    assert len(pg.detail.timeline.lanes) >= 2
    assert_off_gui_thread(query_threads)


@pytest.mark.postgres
def test_postgres_cancel_pg_sleep(qtbot, window, pg_demo):
    from idemview.services.session import OpenSpec

    url, _ = pg_demo
    tab = open_and_wait(qtbot, window, OpenSpec(url=url, name="pg", layout="idemview"))
    engine, rec, got = tab.ledger.engine, {}, []

    def slow(tok):
        from sqlalchemy import text

        rec["start"] = time.monotonic()
        try:
            with engine.connect() as c:
                c.execute(text("SELECT pg_sleep(30)"))
        finally:
            rec["end"] = time.monotonic()

    gaps = _tick_gaps(qtbot)
    tab.runner.submit("custom", slow, got.append, got.append)
    qtbot.waitUntil(lambda: "start" in rec, timeout=5000)
    qtbot.wait(300)
    tab.cancel_all()
    qtbot.waitUntil(lambda: "end" in rec, timeout=5000)  # pg_sleep(30) was cancelled in the server
    qtbot.wait(100)
    assert got == []
    assert gaps.stop(), "the event loop kept ticking while the query ran"


# ------------------------------------------------------------------------------------- helpers


class _Gaps:
    def __init__(self, timer, gaps):
        self.timer, self.gaps = timer, gaps

    def stop(self):
        self.timer.stop()
        return self.gaps or [0.0]


def _tick_gaps(qtbot, interval_ms=10):
    """A 10 ms timer recording the gaps between its ticks: the event loop's stalls."""
    from PySide6.QtCore import QTimer

    gaps, last = [], [time.monotonic()]
    t = QTimer()
    t.setInterval(interval_ms)

    def tick():
        now = time.monotonic()
        gaps.append(now - last[0])
        last[0] = now

    t.timeout.connect(tick)
    t.start()
    return _Gaps(t, gaps)


# ------------------------------------------------------------------------------------ export / reveal


def _planted_secrets(path) -> list[str]:
    """Secrets the demo plants in its payloads and errors (a bearer token, a DSN password, e-mails)."""
    import re
    import sqlite3

    with sqlite3.connect(path) as c:
        text = "\n".join(
            str(v) for row in c.execute("SELECT request_body, response_body, error FROM operations") for v in row if v
        ) + "\n".join(r[0] for r in c.execute("SELECT error FROM attempts WHERE error IS NOT NULL"))
    found = set(re.findall(r"sk_live_[0-9a-f]+", text)) | set(re.findall(r"tok_[0-9a-f]+", text))
    found |= set(re.findall(r"[\w.]+@example\.com", text))
    if "hunter2" in text:
        found.add("hunter2")
    assert found, "the demo no longer plants secrets: this check would be empty"
    return sorted(found)


def test_export_duplicate_effect_through_the_dialog(qtbot, window, demo_db, tmp_path, monkeypatch, query_threads):
    import csv
    import json
    import sqlite3

    from PySide6.QtGui import QDesktopServices
    from PySide6.QtWidgets import QMessageBox

    path, _ = demo_db
    opened: list = []
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda url: opened.append(url) or True))
    monkeypatch.setattr(QMessageBox, "exec", lambda self: pytest.fail("a blocking message box was shown"))
    tab = open_and_wait(qtbot, window, spec_for(path))
    tab.filter_by_finding(FindingKind.DUPLICATE_EFFECT)
    qtbot.waitUntil(lambda: tab.flt.findings == [FindingKind.DUPLICATE_EFFECT], timeout=5000)

    out = tmp_path / "evidence.csv"
    out.write_text("old")  # exists: the dialog must ask before replacing it
    window.export_current()
    dlg = window.export_dialog
    assert dlg.isVisible()
    dlg.path.setText(str(out))
    dlg.null_literal.setText("NULL")
    asked: list[str] = []
    dlg.ask_replace = lambda p: asked.append(p) or False
    dlg.export_btn.click()
    assert asked == [str(out)] and dlg.isVisible() and "already exists" in dlg.problem.text()
    # the ledger file itself is refused with check_target's reason, in the dialog
    dlg.path.setText(str(path))
    dlg.export_btn.click()
    assert dlg.isVisible() and "is the ledger being read" in dlg.problem.text()
    # a missing folder too
    dlg.path.setText(str(tmp_path / "nope" / "x.csv"))
    dlg.export_btn.click()
    assert "does not exist" in dlg.problem.text()
    dlg.path.setText(str(out))
    dlg.ask_replace = lambda p: True
    dialog_texts = [dlg.sentence.text(), dlg.problem.text()]
    dlg.export_btn.click()
    assert not dlg.isVisible()
    qtbot.waitUntil(lambda: getattr(window, "export_done_box", None) is not None, timeout=30000)
    box = window.export_done_box
    assert box.isVisible()
    with sqlite3.connect(path) as c:
        in_ledger = {
            (s, k)
            for s, k in c.execute(
                "SELECT scope, idempotency_key FROM idemview_demo_planted WHERE kind = 'duplicate_effect'"
            )
        }
    # the demo opens with its charges file: double charges found there are duplicate effects too
    planted = set(demo_db[1].incidents["duplicate_effect"])
    assert in_ledger < planted
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {(r["scope"], r["idempotency_key"]) for r in rows} == planted
    assert f"Exported {len(rows):,} operation rows" in box.text()
    assert str(out) in box.text() and str(out) + ".manifest.json" in box.text()
    assert any(r[k] == "NULL" for r in rows for k in r)  # the NULL literal reached the core
    manifest = json.loads((tmp_path / "evidence.csv.manifest.json").read_text())
    assert manifest["filter"]["sentence"] == tab.filterbar.sentence_text()
    # Open folder opens the CSV's folder
    btn = next(b for b in box.buttons() if b.text() == "Open folder")
    btn.click()
    assert [u.toLocalFile() for u in opened] == [str(tmp_path)]
    dialog_texts += [box.text(), window.statusBar().currentMessage()]
    for secret in _planted_secrets(path):
        assert not any(secret in t for t in dialog_texts), secret
    assert_off_gui_thread(query_threads)


def test_connection_list_follows_the_form_and_naive_zone_reaches_the_ledger(qtbot, demo_db, tmp_path):
    from idemview.config import ConnectionStore, CredentialStore
    from idemview.qt.connections import ConnectionDialog
    from idemview.services.cancel import CancelToken
    from idemview.services.session import SharedMasker, open_ledger

    creds = CredentialStore()
    creds.available, creds.notice = False, "no keyring"
    dlg = ConnectionDialog(creds, SharedMasker(), store=ConnectionStore(tmp_path / "c.toml"))
    qtbot.addWidget(dlg)
    dlg.name.setText("payments (prod replica)")
    dlg.url.setText("postgresql+psycopg://ledger_reader@db.internal:5432/payments")
    dlg.split_btn.click()
    assert dlg.list.currentItem().text().startswith("payments (prod replica)\n  postgresql · db.internal/payments")
    dlg.new()
    dlg.type.setCurrentIndex(0)
    dlg.file.setText(str(demo_db[0]))
    dlg.name.setText("demo in Berlin")
    dlg.zone.setText("Europe/Berlin")
    assert dlg.list.currentItem().text().startswith("demo in Berlin\n  sqlite")
    dlg.layout_box.setCurrentIndex(dlg.layout_box.findData("idemview"))
    dlg.connect_()
    assert dlg.spec.naive_zone == "Europe/Berlin"
    opened = open_ledger(dlg.spec, CancelToken())
    try:
        assert all(tc.zone == "Europe/Berlin" for tc in opened.ledger.layout.times.values() if tc.encoding == "naive")
    finally:
        opened.engine.dispose()


def test_reveal_one_cell_but_never_a_credential(qtbot, window, demo_db, tmp_path, query_threads):
    import json
    import shutil
    import sqlite3

    from idemview.qt.models import COL_KEY

    path = tmp_path / "reveal.db"
    shutil.copy(demo_db[0], path)
    with sqlite3.connect(path) as c:
        (a_id,), (b_id,) = c.execute("SELECT id FROM operations ORDER BY created_at DESC LIMIT 2").fetchall()
        c.execute("UPDATE operations SET idempotency_key = 'signup-ann.lee@example.com' WHERE id = ?", (a_id,))
        c.execute(
            "UPDATE operations SET idempotency_key = 'Bearer sk_live_0123456789abcdef01234567' WHERE id = ?", (b_id,)
        )
        scope, key, body = c.execute(
            "SELECT o.scope, o.idempotency_key, o.request_body FROM operations o WHERE EXISTS (SELECT 1 FROM "
            "attempts a WHERE a.scope = o.scope AND a.idempotency_key = o.idempotency_key AND a.error LIKE "
            "'%hunter2%') AND o.request_body LIKE '%Bearer%' ORDER BY o.id LIMIT 1"
        ).fetchone()
    email = json.loads(body)["customer"]["email"]
    tab = open_and_wait(qtbot, window, spec_for(path, "reveal"))
    rows = tab.model.rows()
    ia = next(i for i, r in enumerate(rows) if r.row_id == a_id)
    ib = next(i for i, r in enumerate(rows) if r.row_id == b_id)
    # grid: the e-mail key shows masked; "Reveal this value" re-reads it on a worker
    cell = tab.model.index(ia, COL_KEY)
    assert "ann.lee" not in cell.data() and "[email#" in cell.data()
    act = tab.grid_reveal_action(cell)
    assert act.isEnabled()
    act.trigger()
    qtbot.waitUntil(lambda: tab.model.index(ia, COL_KEY).data() == "signup-ann.lee@example.com", timeout=10000)
    # a bearer token: the action is there, disabled, and says why
    act = tab.grid_reveal_action(tab.model.index(ib, COL_KEY))
    assert not act.isEnabled() and act.toolTip() == "credentials are never revealed"
    assert "sk_live_0123" not in tab.model.index(ib, COL_KEY).data()
    # even if asked directly, the worker refuses (Masker.is_credential on the raw value)
    tab.last_reveal_refusal = None
    tab.reveal(rows[ib].scope_raw, rows[ib].key_raw, ("op", "key"), b_id, lambda v: pytest.fail("revealed"))
    qtbot.waitUntil(lambda: tab.last_reveal_refusal is not None, timeout=10000)
    assert tab.last_reveal_refusal == "credentials are never revealed"

    # detail pane: the customer's e-mail in the request can be revealed, the Authorization header not
    tab.open_operation(scope, key)
    qtbot.waitUntil(lambda: tab.detail.detail is not None and tab.detail.detail.key_raw == key, timeout=10000)
    req = tab.detail.viewers["Request"]
    text = req.toPlainText()
    assert email not in text
    pos = text.index('"email": "[email#') + len('"email": "') + 2
    act = tab.detail.payload_reveal_action("Request", pos)
    assert act.isEnabled()
    act.trigger()
    qtbot.waitUntil(lambda: email in req.toPlainText(), timeout=10000)
    assert "sk_live_" not in req.toPlainText()
    text = req.toPlainText()
    pos = text.index('"Authorization": "') + len('"Authorization": "') + 2
    act = tab.detail.payload_reveal_action("Request", pos)
    assert not act.isEnabled() and act.toolTip() == "credentials are never revealed"
    # the attempts table: an error carrying a DSN password is never revealed
    am = tab.detail.attempts_model
    row = next(i for i in range(am.rowCount()) if "postgres://" in (am.index(i, 7).data() or ""))
    assert "hunter2" not in am.index(row, 7).data()
    act = tab.detail.attempt_reveal_action(row, 7)
    assert not act.isEnabled() and act.toolTip() == "credentials are never revealed"
    # the header: a field without a masked value offers nothing; a credential key would be disabled
    assert all(a.text().startswith("Reveal this value") for a in tab.detail.header_reveal_actions())
    assert "hunter2" not in window.statusBar().currentMessage()
    assert_off_gui_thread(query_threads)


def test_edit_layout_from_the_connection_dialog_and_from_a_tab(qtbot, window, demo_db, tmp_path, query_threads):
    from idemview.config import ConnectionStore, CredentialStore
    from idemview.layouts.layout import load_layout
    from idemview.qt.connections import ConnectionDialog
    from idemview.services.session import SharedMasker

    path, _ = demo_db
    creds = CredentialStore()
    creds.available, creds.notice = False, "no keyring"
    dlg = ConnectionDialog(creds, SharedMasker(), store=ConnectionStore(tmp_path / "c.toml"))
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.name.setText("demo")
    dlg.type.setCurrentIndex(0)
    dlg.file.setText(str(path))
    dlg.layout_box.setCurrentIndex(dlg.layout_box.findData("idemview"))
    dlg.edit_layout_btn.click()
    qtbot.waitUntil(lambda: dlg.layout_editor is not None, timeout=10000)
    ed = dlg.layout_editor
    qtbot.waitUntil(lambda: ed.tabs.isEnabled() and ed.key_list.checked() == ["idempotency_key"], timeout=15000)
    ed.name_edit.setText("demo-mine")
    saved = ed.save()
    assert saved is not None and str(saved).endswith(f"{dlg._current.id}.toml")
    assert dlg.layout_box.currentData() == str(saved) and "demo-mine" in dlg.layout_box.currentText()
    assert dlg.form_connection().layout == str(saved)
    ed.close()
    # connect with it: the tab opens with the edited layout
    dlg.connect_()
    tab = open_and_wait(qtbot, window, dlg.spec)
    assert tab.ledger.layout.name == "demo-mine"
    # and from the open tab: edit, save, the tab reopens with the new layout
    window.edit_layout_current()
    ed = window.layout_editor
    qtbot.waitUntil(lambda: ed.tabs.isEnabled() and ed.key_list.checked() == ["idempotency_key"], timeout=15000)
    ed.name_edit.setText("demo-tab")
    out = ed.save(tmp_path / "tab.toml")
    assert load_layout(str(out)).name == "demo-tab"
    qtbot.waitUntil(lambda: window.current_tab() is not tab and window.current_tab().ledger is not None, timeout=15000)
    assert window.current_tab().ledger.layout.name == "demo-tab" and len(window.ledger_tabs()) == 1
    ed.close()
    assert_off_gui_thread(query_threads)
