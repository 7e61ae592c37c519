"""Issue #9 items 2-3 in the connection dialog: "Fill fields" splits user info at the last '@', and no
fragment of a password lands in another field, the dialog's text, or connections.toml — for arbitrary
passwords (hypothesis) in URLs of each dialect, well-formed or not. The real keyring is never touched."""

from __future__ import annotations

import string
from urllib.parse import quote

import keyring
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from keyring.backends import fail
from PySide6.QtWidgets import QAbstractButton, QComboBox, QLabel, QLineEdit, QListWidget

from idemview.config import ConnectionStore, CredentialStore
from idemview.services.session import SharedMasker

W = 6


@pytest.fixture
def dialog(qtbot, tmp_path, monkeypatch):
    import idemview.masking.masker as m

    monkeypatch.setenv("IDEMVIEW_CONFIG_DIR", str(tmp_path / "config"))
    before = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    from idemview.qt.connections import ConnectionDialog

    store = ConnectionStore(tmp_path / "connections.toml")
    dlg = ConnectionDialog(CredentialStore(), SharedMasker(), store=store)
    qtbot.addWidget(dlg)
    dlg.show()
    yield dlg, tmp_path / "connections.toml"
    dlg.reject()
    keyring.set_keyring(before)
    m._KNOWN_SECRETS.clear()


def visible_text(dlg) -> str:
    """Every text the dialog shows, except the password field and the URL being typed."""
    parts = [dlg.windowTitle()]
    for w in dlg.findChildren(QLabel):
        parts.append(w.text())
    for w in dlg.findChildren(QLineEdit):
        if w is not dlg.password and w is not dlg.url:
            parts += [w.text(), w.placeholderText(), w.toolTip()]
    for w in dlg.findChildren(QComboBox):
        parts.append(w.currentText())
    for w in dlg.findChildren(QAbstractButton):
        parts.append(w.text())
    lw = dlg.findChild(QListWidget)
    parts += [lw.item(i).text() for i in range(lw.count())]
    return "\n".join(parts)


def fill_and_save(dlg, toml, url):
    """Start from nothing (no saved file, no connection in the list), paste, Fill fields, Save."""
    if toml.exists():
        toml.unlink()
    dlg.conns = []
    dlg._reload_list()
    dlg.new()
    dlg.url.setText(url)
    dlg.split_btn.click()
    filled = visible_text(dlg)
    dlg.save()
    saved = toml.read_text("utf-8") if toml.exists() else ""
    return filled + "\n" + visible_text(dlg), saved


def test_raw_at_in_password_fills_the_right_fields(dialog):
    dlg, toml = dialog
    shown, saved = fill_and_save(dlg, toml, "postgresql://ops:ab@PW7x@cd@127.0.0.1:1/ledger")
    assert (dlg.host.text(), dlg.port.value(), dlg.dbname.text(), dlg.user.text()) == ("127.0.0.1", 1, "ledger", "ops")
    assert dlg.password.text() == "ab@PW7x@cd"
    assert "PW7x" not in shown and "PW7x" not in saved and "127.0.0.1" in saved


def test_secret_query_parameter_is_not_saved(dialog):
    dlg, toml = dialog
    shown, saved = fill_and_save(dlg, toml, "postgresql://ops@db:5432/x?sslmode=require&password=Qz8secretQ")
    assert dlg.password.text() == "Qz8secretQ" and dlg.sslmode.currentText() == "require"
    assert "Qz8secret" not in shown and "Qz8secret" not in saved and "require" in saved


def test_one_slash_url_is_refused_without_echo(dialog):
    dlg, toml = dialog
    shown, saved = fill_and_save(dlg, toml, "postgresql+psycopg:/ops:Zx9PWsecret@127.0.0.1/ledger")
    assert "not a SQLAlchemy URL" in shown or "Saved" in dlg.result.text()
    assert "Zx9PW" not in shown and "Zx9PW" not in saved


DIALECTS = ["postgresql+psycopg", "mysql+pymysql", "mariadb+pymysql", "frobdb+nodriver"]
SHAPES = {
    "encoded": lambda d, pw: f"{d}://ops:{quote(pw, safe='')}@127.0.0.1:1/ledger",
    "raw": lambda d, pw: f"{d}://ops:{pw}@127.0.0.1:1/ledger",
    "one_slash": lambda d, pw: f"{d}:/ops:{pw}@127.0.0.1:1/ledger",
    "no_host": lambda d, pw: f"{d}://ops:{pw}@:1/ledger",
    "raw_at": lambda d, pw: f"{d}://ops:ab@{pw}@127.0.0.1:1/ledger",
}
NEUTRAL = "Qq" * 12


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pw=st.text(alphabet=st.sampled_from(string.printable), min_size=6, max_size=24),
    dialect=st.sampled_from(DIALECTS),
    shape=st.sampled_from(sorted(SHAPES)),
)
def test_fill_and_save_never_show_or_store_a_password(dialog, pw, dialect, shape):
    """A leak is a 6-character window of the password (typed or percent-encoded) in the dialog's text or
    the saved file that the same steps with a neutral password do not produce (fixed text is no leak)."""
    dlg, toml = dialog
    make = SHAPES[shape]
    shown, saved = fill_and_save(dlg, toml, make(dialect, pw))
    b_shown, b_saved = fill_and_save(dlg, toml, make(dialect, NEUTRAL))
    forms = {pw, quote(pw, safe="")}
    wins = {f[i : i + W] for f in forms for i in range(len(f) - W + 1)}
    leaks = sorted(w for w in wins if (w in shown and w not in b_shown) or (w in saved and w not in b_saved))
    assert not leaks, (make(dialect, pw), leaks)
