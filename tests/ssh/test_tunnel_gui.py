"""The SSH fields of the connection dialog (issue 23 item 1): saved in connections.toml without the
passphrase (that goes to the keyring as ``<id>:ssh``), Test goes through the tunnel to the real server, and
the tab's ledger (services.session.open_ledger) keeps the tunnel until it is closed."""

from __future__ import annotations

import socket

import keyring
import pytest
from sqlalchemy.engine import make_url

from idemview.config import ConnectionStore, CredentialStore
from idemview.services.cancel import CancelToken
from idemview.services.session import SharedMasker, open_ledger, spec_for_connection
from tests.sshd import PASSPHRASE


@pytest.fixture
def dialog(qtbot, tmp_path):
    from idemview.qt.connections import ConnectionDialog

    store = ConnectionStore(tmp_path / "connections.toml")
    dlg = ConnectionDialog(CredentialStore(), SharedMasker(), store=store)
    qtbot.addWidget(dlg)
    dlg.show()
    yield dlg, store
    dlg.reject()


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_dialog_saves_tests_and_opens_through_the_tunnel(qtbot, dialog, sshd, ssh_home, pg_url):
    from sqlalchemy import create_engine

    from idemview.services.demo import generate
    from tests.conftest import ANCHOR, _clear

    w = create_engine(pg_url)
    _clear(w)
    generate(w, operations=60, anchor=ANCHOR)
    w.dispose()
    u = make_url(pg_url)
    dlg, store = dialog
    dlg.new()
    dlg.name.setText("behind bastion")
    dlg.type.setCurrentIndex(dlg.type.findData("postgresql"))
    dlg.host.setText(u.host)
    dlg.port.setValue(u.port or 5432)
    dlg.dbname.setText(u.database)
    dlg.user.setText(u.username)
    assert dlg.ssh.isVisible() and dlg.ssh_key.isVisible() and dlg.ssh_secret.isVisible()
    dlg.ssh.setText(sshd.spec)
    dlg.ssh_key.setText(str(sshd.key_enc))
    dlg.ssh_secret.setText(PASSPHRASE)
    saved = dlg.save()
    assert (saved.ssh, saved.ssh_key) == (sshd.spec, str(sshd.key_enc))
    text = store.path.read_text()
    assert sshd.spec in text and PASSPHRASE not in text
    assert keyring.get_password("idemview", f"{saved.id}:ssh") == PASSPHRASE

    dlg.test()
    qtbot.waitUntil(lambda: dlg.result.text() not in ("", "Testing…"), timeout=30000)
    assert dlg.result.text().startswith(f"✓ SSH 127.0.0.1:{sshd.port} host key known · ✓ reachable"), dlg.result.text()
    assert "read-only session confirmed" in dlg.result.text() and "detected idemview" in dlg.result.text()

    dlg.new()  # selecting it again shows the fields (and the keyring's passphrase, masked in the field)
    dlg._show(ConnectionStore(store.path).find("behind bastion"))
    assert dlg.ssh.text() == sshd.spec and dlg.ssh_secret.text() == PASSPHRASE

    opened = open_ledger(spec_for_connection(saved), CancelToken())
    try:
        assert opened.tunnel is not None and listening(opened.tunnel.local_port)
        assert opened.read_only and opened.n_ops > 60
    finally:
        opened.close()  # what closing the tab does (LedgerTab.close_tab)
    assert not opened.tunnel.is_open and not listening(opened.tunnel.local_port)


def test_dialog_test_names_an_unknown_host_key(qtbot, dialog, sshd, ssh_home, pg_url):
    sshd.write_home(ssh_home, known=False)
    u = make_url(pg_url)
    dlg, _store = dialog
    dlg.new()
    dlg.type.setCurrentIndex(dlg.type.findData("postgresql"))
    dlg.host.setText(u.host)
    dlg.dbname.setText(u.database)
    dlg.user.setText(u.username)
    dlg.ssh.setText(sshd.spec)
    dlg.ssh_key.setText(str(sshd.key))
    dlg.test()
    qtbot.waitUntil(lambda: dlg.result.text() not in ("", "Testing…"), timeout=30000)
    assert dlg.result.text().startswith("⚠ ") and f"[127.0.0.1]:{sshd.port}" in dlg.result.text()
    assert "ssh-keyscan" in dlg.result.text()
