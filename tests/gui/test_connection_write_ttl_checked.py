"""The connection dialog's "Write TTL (s)" row is checked as ``--write-ttl`` is
(:func:`idemview.ledger.inputs.write_ttl_value`) on Save, Connect and Test: a bad value is said in the
dialog and nothing is saved or opened (it used to be saved and fail only when opened)."""

from __future__ import annotations

import pytest

from idemview.config import ConnectionStore, CredentialStore
from idemview.services.session import SharedMasker


def _dialog(qtbot, tmp_path):
    from idemview.qt.connections import ConnectionDialog

    store = ConnectionStore(tmp_path / "c.toml")
    dlg = ConnectionDialog(CredentialStore(), SharedMasker(), store=store)
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.url.setText("redis://cache.internal:6379/2")
    dlg.split_url()
    return dlg, store


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("abc", "Write TTL (s): 'abc' is not a number of seconds"),
        ("0", "Write TTL (s): '0' must be above 0 seconds (the TTL the store sets at every write)"),
        ("-5", "Write TTL (s): '-5' must be a finite number of seconds from 0 to"),
        ("inf", "Write TTL (s): 'inf' must be a finite number of seconds from 0 to"),
        ("1e20", "Write TTL (s): '1e20' must be a finite number of seconds from 0 to"),
    ],
)
def test_a_bad_write_ttl_is_said_and_nothing_is_saved(qtbot, tmp_path, text, said):
    dlg, store = _dialog(qtbot, tmp_path)
    name = dlg.name.text()
    dlg.options["write_ttl"].setText(text)
    assert dlg.save() is None
    assert said in dlg.result.text() and dlg.result.text().startswith("⚠ ")
    assert store.find(name) is None and store.load() == []
    dlg.connect_()  # Connect saves first: refused the same way, the dialog stays open
    assert dlg.spec is None and dlg.isVisible() and said in dlg.result.text()
    dlg.result.setText("")
    dlg.test()  # refused before any connection is tried
    assert said in dlg.result.text() and dlg.test_btn.isEnabled()
    dlg.options["write_ttl"].setText(" 3600 ")  # a good one saves as ever
    saved = dlg.save()
    assert saved is not None and store.find(saved.name).tls == {"write_ttl": "3600"}
    dlg.reject()
