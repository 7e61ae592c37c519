"""The password prompt for a saved connection whose password nobody has (issue 20 §3).

Without a keyring (DESIGN §8), reopening a saved server connection asks for its password as every
database GUI does, instead of trying without one and showing the driver's "Access denied (using
password: NO)". The password typed is kept for this session only (:class:`~idemview.config.
CredentialStore` memory) and only once the ledger opened with it: a failed open keeps nothing. The
dialog is window-modal but never blocks the event loop (``open()``, a callback).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QLineEdit, QVBoxLayout


class PasswordPrompt(QDialog):
    """Asks the password of the connection called ``name`` (user ``user`` on ``where``); ``note`` says
    why it asks (e.g. the last try was refused). ``accepted_password(str)`` runs on OK."""

    def __init__(self, name: str, user: str, where: str, note: str = "", parent=None):
        super().__init__(parent)
        self.setWindowTitle(f"Password for {name}")
        self.setObjectName("passwordPrompt")
        v = QVBoxLayout(self)
        head = QLabel(f"<b>{_esc(name)}</b> — user <code>{_esc(user)}</code> on {_esc(where)}")
        head.setWordWrap(True)
        v.addWidget(head)
        if note:
            why = QLabel(note)
            why.setWordWrap(True)
            why.setObjectName("passwordNote")
            v.addWidget(why)
        self.field = QLineEdit()
        self.field.setEchoMode(QLineEdit.EchoMode.Password)
        self.field.setPlaceholderText("password")
        v.addWidget(self.field)
        keep = QLabel("No keyring is available: the password is kept in memory for this session only.")
        keep.setWordWrap(True)
        v.addWidget(keep)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        bb.button(QDialogButtonBox.StandardButton.Ok).setText("Connect")
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        v.addWidget(bb)
        self.setWindowModality(Qt.WindowModality.WindowModal)


def _esc(s: str) -> str:
    import html

    return html.escape(s or "")


def ask_password(
    parent, name: str, user: str, where: str, on_password: Callable[[str], None], on_cancel=None, note: str = ""
) -> PasswordPrompt:
    """Show the prompt (not blocking); ``on_password(pw)`` on Connect, ``on_cancel()`` on Cancel."""
    dlg = PasswordPrompt(name, user, where, note, parent)
    dlg.accepted.connect(lambda: on_password(dlg.field.text()))
    if on_cancel is not None:
        dlg.rejected.connect(on_cancel)
    dlg.finished.connect(dlg.deleteLater)
    from idemview.qt.fit import fit_dialog

    fit_dialog(dlg)
    dlg.open()
    dlg.field.setFocus()
    return dlg
