"""Issue #13 §8: a start page listing saved connections (last opened first, one click), tabs restored on
request, a rotating masked log file with Help → Open log folder, and deep links (`idemview open URL
--key K --scope S`, "Copy link" in the detail, never a password)."""

from __future__ import annotations

import logging
import shlex

import pytest
from PySide6.QtGui import QGuiApplication

from tests.gui.conftest import close_window, make_window

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def _save(name, path):
    from idemview.config import Connection, ConnectionStore

    c = Connection(name=name, dialect="sqlite", database=str(path), layout="idemview")
    ConnectionStore().upsert(c)
    return c


def test_start_page_lists_saved_connections_last_opened_first(qtbot, demo_db):
    path, _ = demo_db
    a, b = _save("alpha ledger", path), _save("beta ledger", path)
    win = make_window(qtbot)
    win.show()
    assert set(win.start_buttons) == {a.id, b.id}
    assert all("never opened" in btn.text() for btn in win.start_buttons.values())
    tab = win.open_saved(b.id)  # what one click does
    qtbot.waitUntil(lambda: tab.ledger is not None, timeout=30000)
    win.close_tab(win.tabs.indexOf(tab))
    rows = win.recent_connections()
    assert [c.id for c, _ in rows] == [b.id, a.id]
    assert "last opened" in win.start_buttons[b.id].text()
    # one click on the button opens it
    win.start_buttons[a.id].click()
    qtbot.waitUntil(lambda: win.current_tab() is not None and win.current_tab().ledger is not None, timeout=30000)
    assert win.current_tab().spec.connection_id == a.id
    win.close()
    close_window(win)
    # tabs come back on request only
    again = make_window(qtbot)
    again.show()
    assert again.tabs.count() == 0 and again.saved_tabs() == [a.id]
    assert not again.restore_btn.isHidden() and "(1)" in again.restore_btn.text()
    again.restore_btn.click()
    qtbot.waitUntil(lambda: again.current_tab() is not None and again.current_tab().ledger is not None, timeout=30000)
    assert again.current_tab().spec.connection_id == a.id
    close_window(again)


def test_log_file_is_masked_and_help_opens_its_folder(qtbot, window, tmp_path, monkeypatch):
    from PySide6.QtGui import QDesktopServices

    from idemview.qt.applog import LOG_NAME, install_log, uninstall_log

    opened = []
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda u: opened.append(u) or True))
    path = install_log()
    try:
        assert path == tmp_path / "logs" / LOG_NAME
        logging.getLogger("idemview.test").warning(
            "cannot connect to postgresql://app:hunter2@db/x as alice@example.com"
        )
        for h in logging.getLogger().handlers:
            h.flush()
        text = path.read_text(encoding="utf-8")
        assert "cannot connect to" in text and "hunter2" not in text and "alice@example.com" not in text
        window.act_log_folder.trigger()
        assert [u.toLocalFile() for u in opened] == [str(tmp_path / "logs")]
    finally:
        uninstall_log()


def test_deep_link_opens_the_operation_and_copy_link_gives_the_command(qtbot, window, demo_db):
    path, planted = demo_db
    scope, key = sorted(planted.incidents["duplicate_effect"])[0]
    tab = window.open_link(str(path), key, scope)
    qtbot.waitUntil(lambda: tab.detail.detail is not None and tab.detail.detail.key_raw == key, timeout=30000)
    assert tab.flt.key == key
    link = tab.copy_link()
    assert shlex.split(link)[:5] == ["idemview", "open", str(path), f"--key={key}", f"--scope={scope}"]
    assert QGuiApplication.clipboard().text() == link
    # without --scope the ledger is asked which scope holds the key
    tab2 = window.open_link(str(path), key)
    qtbot.waitUntil(lambda: tab2.detail.detail is not None and tab2.detail.detail.key_raw == key, timeout=30000)
    assert tab2.detail.detail.scope_raw == scope


def test_copy_link_never_carries_a_password():
    from idemview.services.session import OpenSpec, deep_link

    spec = OpenSpec(url="postgresql+psycopg://app:s3cr3t@db.internal:5432/payments", name="payments")
    link = deep_link(spec, "acme", "k-1")
    assert "s3cr3t" not in link and "***" not in link
    assert shlex.split(link) == [
        "idemview",
        "open",
        "postgresql+psycopg://app@db.internal:5432/payments",
        "--key=k-1",
        "--scope=acme",
    ]
    saved = OpenSpec(url="postgresql+psycopg://app:s3cr3t@db/x", name="prod ledger", connection_id="abc")
    assert shlex.split(deep_link(saved, "", "k 2")) == ["idemview", "open", "prod ledger", "--key=k 2"]


def test_cli_open_passes_the_link_to_the_gui(monkeypatch):
    import idemview.qt.app as app
    from idemview.cli import main

    seen = []
    monkeypatch.setattr(app, "run_gui", lambda **kw: seen.append(kw) or 0)
    assert main(["open", "ledger.db", "--key", "k1", "--scope", "acme"]) == 0
    from idemview.services.links import DeepLink

    assert seen == [{"link": DeepLink("ledger.db", "k1", "acme")}]
    assert main(["open", "ledger.db", "--scope", "acme"]) == 2
