"""Issue 20 §3: without a keyring, reopening a saved MariaDB connection asks for its password (kept for
this session only, once it worked); a failed open changes nothing (not "last opened", nothing kept), and
Reconnect asks again saying why. A real MariaDB user with a password, created here and dropped after.

Also: a saved connection becomes an OpenSpec in one place (services.session.spec_for_connection), and
every Connection field reaches every open path (start page, Connect, ``idemview open NAME``)."""

from __future__ import annotations

import os
import secrets
from dataclasses import fields

import keyring
import pytest
from keyring.backends import fail
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.gui.conftest import HOUR, close_window, make_window

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


@pytest.fixture
def maria_user(mysql_url):
    """(database URL without user, user, password) of a MariaDB user with a password and SELECT on a
    demo ledger; dropped afterwards."""
    from idemview.services.demo import generate

    url = make_url(mysql_url)
    eng = create_engine(url)
    generate(eng, operations=120, anchor=HOUR)
    user, pw = f"idv_pw_{os.getpid()}", "Pw-" + secrets.token_hex(8)
    with eng.begin() as c:
        c.execute(text(f"DROP USER IF EXISTS '{user}'@'%'"))
        c.execute(text(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{pw}'"))
        c.execute(text(f"GRANT SELECT ON `{url.database}`.* TO '{user}'@'%'"))
    yield url, user, pw
    with eng.begin() as c:
        c.execute(text(f"DROP USER IF EXISTS '{user}'@'%'"))
    eng.dispose()


@pytest.fixture
def no_keyring():
    before = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    yield
    keyring.set_keyring(before)


def test_saved_mariadb_connection_asks_for_its_password(qtbot, maria_user, no_keyring):
    from idemview.config import Connection, ConnectionStore
    from idemview.qt.settings import gui_settings

    url, user, pw = maria_user
    c = Connection(
        name="maria with password",
        dialect="mariadb",
        host=url.host,
        port=url.port or 3306,
        database=url.database,
        user=user,
        layout="idemview",
    )
    ConnectionStore().upsert(c)
    win = make_window(qtbot)
    win.show()
    assert not win.credentials.available
    tab = win.open_saved(c.id)  # the start page's button
    qtbot.waitUntil(lambda: getattr(win, "password_prompt", None) is not None and win.password_prompt.isVisible())
    assert tab.ledger is None and not tab.runner.is_pending("open")  # nothing tried without it
    # a wrong password: refused, and nothing changes
    win.password_prompt.field.setText("wrong-" + pw)
    win.password_prompt.accept()
    qtbot.waitUntil(lambda: tab.banner.isVisible(), timeout=30000)
    assert tab.ledger is None and "denied" in tab.banner.label.text().lower()
    assert pw not in tab.banner.label.text()
    assert gui_settings().value(f"recent/{c.id}") in (None, "")
    assert win.credentials.get(c.id) is None and tab.spec.password is None
    # Reconnect asks again, saying why
    tab.banner.reconnect.click()
    qtbot.waitUntil(lambda: win.password_prompt is not None and win.password_prompt.isVisible())
    note = win.password_prompt.findChild(__import__("PySide6.QtWidgets").QtWidgets.QLabel, "passwordNote")
    assert note is not None and "refused" in note.text()
    win.password_prompt.field.setText(pw)
    win.password_prompt.accept()
    qtbot.waitUntil(lambda: tab.ledger is not None, timeout=30000)
    assert gui_settings().value(f"recent/{c.id}")
    assert win.credentials.get(c.id) == pw  # kept for the session (memory: no keyring)
    assert pw not in (win.credentials.notice or "")
    # opened again while open: its tab comes forward (no second tab); closed and reopened: no prompt
    assert win.open_saved(c.id) is tab and win.tabs.count() == 1
    win.close_tab(win.tabs.indexOf(tab))
    win.password_prompt = None
    again = win.open_saved(c.id)
    qtbot.waitUntil(lambda: again.ledger is not None, timeout=30000)
    assert win.password_prompt is None
    close_window(win)


def test_every_connection_field_reaches_every_open_path(qtbot, monkeypatch, tmp_path):
    from idemview.config import Connection, ConnectionStore
    from idemview.services.session import OpenSpec, spec_for_connection, spec_for_target

    c = Connection(
        name="all fields",
        dialect="postgresql",
        driver="psycopg",
        host="db.example",
        port=6543,
        database="payments",
        user="reader",
        tls={"sslmode": "require"},
        layout="stripe",
        naive_zone="Europe/Paris",
        colour="#aa0000",
        schema="billing",
        status_map={"RETRIES_EXCEEDED": "failed"},
        outcome_map={"TIMEOUT": "timed_out"},
        actions={"rules": [{"match": "^settle", "action": "money"}], "regulated": ["money"]},
        ssh="reader@bastion.example:2222",
        ssh_key=str(tmp_path / "id_ed25519"),
    )
    ConnectionStore().upsert(c)
    want = spec_for_connection(c, "pw")
    # every field of the Connection is in the spec (the password only as given)
    assert want.url == c.url() and want.name == c.name and want.layout == "stripe"
    assert (want.naive_zone, want.schema, want.colour, want.connection_id) == (
        "Europe/Paris",
        "billing",
        "#aa0000",
        c.id,
    )
    assert want.status_map == c.status_map and want.outcome_map == c.outcome_map and want.password == "pw"
    assert want.actions == c.actions
    assert (want.ssh, want.ssh_key) == ("reader@bastion.example:2222", str(tmp_path / "id_ed25519"))
    assert "sslmode=require" in want.url.render_as_string() and want.url.port == 6543
    covered = {"name", "dialect", "driver", "host", "port", "database", "user", "tls", "layout", "naive_zone"}
    covered |= {"colour", "schema", "status_map", "outcome_map", "id", "actions", "ssh", "ssh_key"}
    assert {f.name for f in fields(Connection)} == covered, "a new Connection field: map it in spec_for_connection"
    # the paths: the start page, the dialog's Connect, `idemview open NAME`
    from idemview.qt.connections import ConnectionDialog
    from idemview.qt.mainwindow import MainWindow

    seen: list[OpenSpec] = []
    monkeypatch.setattr(MainWindow, "open_spec", lambda self, spec: seen.append(spec))
    win = make_window(qtbot)

    class Creds:
        available = True
        listeners: list = []
        notice = None
        backend = "test"

        def get(self, _id):
            return "pw"

        def set(self, *_a):
            return True

    win.credentials = Creds()
    win.open_saved(c.id)
    from idemview.services.session import SharedMasker

    dlg = ConnectionDialog(win.credentials, SharedMasker(), win)
    qtbot.addWidget(dlg)
    dlg.list.setCurrentRow(next(i for i, x in enumerate(dlg.conns) if x.id == c.id))
    dlg.connect_()
    seen.append(dlg.spec)
    seen.append(spec_for_target("all fields", win.credentials))
    assert len(seen) == 3
    for got in seen:
        assert got.url.render_as_string() == want.url.render_as_string()
        for f in ("name", "layout", "password", "colour", "connection_id", "naive_zone", "schema", "ssh", "ssh_key"):
            assert getattr(got, f) == getattr(want, f), f
        assert got.status_map == want.status_map and got.outcome_map == want.outcome_map
        assert got.actions == want.actions
