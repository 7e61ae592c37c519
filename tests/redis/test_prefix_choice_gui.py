"""A preset found under a custom key prefix, chosen in the connection dialog (issue 26): the dialog shows a
saved ``NAME@PREFIX`` layout as that preset under that prefix (not as an unreadable file), keeps it on
Save, a Test that finds the chosen preset's keys only under another prefix switches the choice to the
name carrying it, and the main window opens the saved connection under the prefix."""

from __future__ import annotations

import pytest

from idemview.config import Connection, ConnectionStore, CredentialStore
from idemview.domain.model import FindingKind
from idemview.services.opener import spec_for_connection
from idemview.services.session import SharedMasker
from tests.redis.test_custom_prefixes import _plant_acme_locks

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def _conn(url: str, layout: str) -> Connection:
    host, _, db = url.split("://", 1)[1].partition("/")
    return Connection(
        name="locks",
        dialect="redis",
        host=host.rsplit(":", 1)[0],
        port=int(host.rsplit(":", 1)[1]),
        database=db,
        layout=layout,
    )


def test_dialog_keeps_and_finds_the_prefixed_choice(qtbot, tmp_path, redis_db):
    from idemview.qt.connections import ConnectionDialog

    url, raw = redis_db
    _plant_acme_locks(raw)
    store = ConnectionStore(tmp_path / "c.toml")
    store.upsert(_conn(url, "sidekiq-unique-jobs@acme_locks"))
    dlg = ConnectionDialog(CredentialStore(), SharedMasker(), store=store)
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.list.setCurrentRow(0)
    assert dlg.layout_box.currentData() == "sidekiq-unique-jobs@acme_locks"
    assert dlg.layout_box.currentText() == "sidekiq-unique-jobs — key prefix 'acme_locks' (Redis)"
    assert dlg.save().layout == "sidekiq-unique-jobs@acme_locks"
    # the plain preset chosen: Test finds its keys under acme_locks and the choice follows
    dlg.layout_box.setCurrentIndex(dlg.layout_box.findData("sidekiq-unique-jobs"))
    dlg.test()
    qtbot.waitUntil(lambda: dlg.test_btn.isEnabled(), timeout=20000)
    assert "sidekiq-unique-jobs@acme_locks" in dlg.result.text()
    assert dlg.layout_box.currentData() == "sidekiq-unique-jobs@acme_locks"
    # "Detect automatically" stays as chosen: opening detects the prefix itself
    dlg.layout_box.setCurrentIndex(0)
    dlg.test()
    qtbot.waitUntil(lambda: dlg.test_btn.isEnabled(), timeout=20000)
    assert "detected sidekiq-unique-jobs@acme_locks" in dlg.result.text() and dlg.layout_box.currentData() == ""
    dlg.reject()


def test_main_window_opens_the_saved_prefixed_connection(qtbot, tmp_path, monkeypatch, redis_db):
    from tests.gui.conftest import close_window, make_window

    monkeypatch.setenv("IDEMVIEW_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("IDEMVIEW_DATA_DIR", str(tmp_path / "data"))
    url, raw = redis_db
    _plant_acme_locks(raw)
    w = make_window(qtbot)
    try:
        tab = w.open_spec(spec_for_connection(_conn(url, "sidekiq-unique-jobs@acme_locks")))
        qtbot.waitUntil(lambda: tab.scan_complete() and not tab.model.is_loading(), timeout=30000)
        assert "layout sidekiq-unique-jobs@acme_locks (chosen)" in tab.detection.toolTip()
        # the default prefix would give no finding (test_custom_prefixes): the duplicate lock is read
        assert tab.findings.counts[FindingKind.DUPLICATE_EFFECT] == 1
    finally:
        close_window(w)
