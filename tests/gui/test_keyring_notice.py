"""Issue #9 item 12: one keyring notice, consistent in the connection dialog and the main window, naming
the backend tried and how to get one. The real OS keyring is never touched: each test sets keyring's
backend itself (keyring.set_keyring) to an in-memory one, a locked one, or keyring's fail backend."""

from __future__ import annotations

import os

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail
from keyring.errors import KeyringLocked

from idemview.config import Connection, ConnectionStore, CredentialStore
from idemview.services.session import SharedMasker

SHOTS = os.environ.get("IDEMVIEW_SHOTS")  # a folder: save screenshots there to look at them


class MemoryKeyring(KeyringBackend):
    """A keyring in a dict (this test's only)."""

    priority = 1

    def __init__(self):
        super().__init__()
        self.data = {}

    def get_password(self, service, username):
        return self.data.get((service, username))

    def set_password(self, service, username, password):
        self.data[(service, username)] = password

    def delete_password(self, service, username):
        self.data.pop((service, username), None)


class LockedKeyring(KeyringBackend):
    """A keyring that is there but locked: every access raises KeyringLocked."""

    priority = 1

    def get_password(self, service, username):
        raise KeyringLocked("the collection is locked")

    def set_password(self, service, username, password):
        raise KeyringLocked("the collection is locked")

    def delete_password(self, service, username):
        raise KeyringLocked("the collection is locked")


@pytest.fixture
def backend(request, monkeypatch, tmp_path):
    monkeypatch.setenv("IDEMVIEW_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("IDEMVIEW_DATA_DIR", str(tmp_path / "data"))
    before = keyring.get_keyring()
    kr = request.param()
    keyring.set_keyring(kr)
    yield kr
    keyring.set_keyring(before)


def _store(tmp_path):
    store = ConnectionStore(tmp_path / "connections.toml")
    store.upsert(
        Connection(name="payments", dialect="postgresql", host="127.0.0.1", port=1, database="pay", user="ops")
    )
    return store


def _window(qtbot, creds):
    from idemview.qt.mainwindow import MainWindow

    # the notice matters once a saved server connection with a user exists (not on the demo alone)
    ConnectionStore().upsert(
        Connection(name="payments", dialect="postgresql", host="127.0.0.1", port=1, database="pay", user="ops")
    )

    w = MainWindow(credentials=creds)
    qtbot.addWidget(w)
    w.show()
    return w


def _dialog(qtbot, creds, store, parent=None):
    from idemview.qt.connections import ConnectionDialog

    dlg = ConnectionDialog(creds, SharedMasker(), parent, store=store)
    qtbot.addWidget(dlg)
    dlg.show()
    return dlg


def _shot(widget, name):
    if SHOTS:
        widget.grab().save(os.path.join(SHOTS, name))


@pytest.mark.parametrize("backend", [LockedKeyring], indirect=True)
def test_locked_keyring_shows_the_same_notice_in_dialog_and_main_window(qtbot, backend, tmp_path):
    creds = CredentialStore()
    assert creds.available  # a backend is there: only using it shows it is locked
    w = _window(qtbot, creds)
    assert not w.keyring_notice.isVisible()
    dlg = _dialog(qtbot, creds, _store(tmp_path), parent=w)  # showing the saved one reads its password
    assert not creds.available
    qtbot.waitUntil(lambda: w.keyring_notice.isVisible(), timeout=5000)
    assert dlg.notice.isVisible()
    assert dlg.notice.text() == w.keyring_notice.text()
    text = dlg.notice.text()
    assert "LockedKeyring" in text and "locked" in text and "session only" in text
    assert "Secret Service" in text and "KWallet" in text
    assert not dlg.remember.isEnabled() and not dlg.remember.isChecked()
    assert "session only" in dlg.remember.text()
    _shot(dlg, "keyring_locked_dialog.png")
    _shot(w, "keyring_locked_main.png")
    dlg.password.setText("Qw3rty-Locked")
    dlg.save()
    assert "session only" in dlg.result.text()
    assert creds.get(dlg._current.id) == "Qw3rty-Locked"
    assert "Qw3rty" not in (tmp_path / "connections.toml").read_text()
    dlg.reject()


@pytest.mark.parametrize("backend", [fail.Keyring], indirect=True)
def test_no_keyring_notice_names_the_backend_and_how_to_get_one(qtbot, backend, tmp_path):
    creds = CredentialStore()
    assert not creds.available
    w = _window(qtbot, creds)
    assert w.keyring_notice.isVisible()
    dlg = _dialog(qtbot, creds, _store(tmp_path), parent=w)
    assert dlg.notice.isVisible() and dlg.notice.text() == w.keyring_notice.text()
    text = dlg.notice.text()
    assert "no keyring backend" in text and "session only" in text and "gnome-keyring" in text and "KWallet" in text
    assert "tried: fail Keyring" not in text and "fail Keyring" in w.keyring_notice.toolTip()
    # disabled and unchecked, and its words agree with that: not remembered, kept for this session
    assert not dlg.remember.isEnabled() and not dlg.remember.isChecked()
    assert "session only" in dlg.remember.text() and "unavailable" in dlg.remember.text()
    _shot(dlg, "keyring_none_dialog.png")
    _shot(w, "keyring_none_main.png")
    dlg.reject()


@pytest.mark.parametrize("backend", [MemoryKeyring], indirect=True)
def test_working_keyring_shows_no_notice_and_stores_there(qtbot, backend, tmp_path):
    creds = CredentialStore()
    assert creds.available
    w = _window(qtbot, creds)
    store = _store(tmp_path)
    dlg = _dialog(qtbot, creds, store, parent=w)
    assert not dlg.notice.isVisible() and not w.keyring_notice.isVisible()
    assert dlg.remember.isEnabled() and dlg.remember.isChecked()
    dlg.password.setText("Qw3rty-Memory")
    c = dlg.save()
    assert "saved in the OS keyring" in dlg.result.text()
    assert backend.data == {("idemview", c.id): "Qw3rty-Memory"}
    assert "Qw3rty" not in (tmp_path / "connections.toml").read_text()
    dlg.reject()


@pytest.mark.parametrize("backend", [fail.Keyring], indirect=True)
def test_a_status_message_is_not_squeezed_by_the_notice(qtbot, backend, tmp_path):
    """Found by a tester: with the notice shown, a message was elided to ~80 px ("postg…dings")."""
    from PySide6.QtWidgets import QApplication

    w = _window(qtbot, CredentialStore())
    w.resize(1280, 800)
    qtbot.waitUntil(lambda: w.keyring_notice.isVisible(), timeout=5000)
    text = "No operation with that idempotency key in postgresql://db.internal/payments (findings)"
    w.show_status(text, 400)
    QApplication.processEvents()
    assert w.statusBar().currentMessage() == text and not w.keyring_notice.isVisible()
    qtbot.waitUntil(lambda: w.keyring_notice.isVisible(), timeout=5000)  # back when the message goes


@pytest.mark.parametrize("backend", [fail.Keyring], indirect=True)
def test_notice_not_on_the_demo_alone_and_dismissable(qtbot, backend, tmp_path):
    """Issue 20 §13: no password is involved on the demo: no notice; with a saved server connection it
    shows, and ✕ hides it for the session."""
    from idemview.qt.mainwindow import MainWindow

    w = MainWindow(credentials=CredentialStore())
    qtbot.addWidget(w)
    w.show()
    assert not w.keyring_notice.isVisible() and not w.keyring_dismiss.isVisible()
    w.close()
    w2 = _window(qtbot, CredentialStore())
    assert w2.keyring_notice.isVisible() and w2.keyring_dismiss.isVisible()
    w2.keyring_dismiss.click()
    assert not w2.keyring_notice.isVisible() and not w2.keyring_dismiss.isVisible()
    w2.show_status("a message", 100)
    qtbot.wait(300)
    assert not w2.keyring_notice.isVisible()
