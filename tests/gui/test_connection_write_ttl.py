"""Issue 26 leftover in the connection dialog: a Redis connection's "Write TTL (s)" row (the backend's
``tls.write_ttl`` Field, rendered by the dialog like any backend field) is saved with the connection and
reaches the one opener as the URL option ``write_ttl``; a pasted ``?write_ttl=`` survives Save."""

from __future__ import annotations

from idemview.config import ConnectionStore, CredentialStore
from idemview.services.opener import spec_for_connection
from idemview.services.session import SharedMasker


def test_a_redis_connection_keeps_its_write_ttl_through_save(qtbot, tmp_path):
    from idemview.qt.connections import ConnectionDialog

    store = ConnectionStore(tmp_path / "c.toml")
    dlg = ConnectionDialog(CredentialStore(), SharedMasker(), store=store)
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.url.setText("redis://cache.internal:6379/2?write_ttl=3600")
    dlg.split_url()
    assert dlg.options["write_ttl"].text() == "3600" and dlg.options["write_ttl"].isVisible()
    saved = dlg.save()
    stored = store.find(saved.name)
    assert stored is not None and stored.tls == {"write_ttl": "3600"}
    assert str(spec_for_connection(stored).url).endswith("/2?write_ttl=3600")
    dlg.options["write_ttl"].setText("")  # an emptied row saves no option
    dlg.save()
    dlg.reject()
    stored = store.find(saved.name)
    assert stored is not None and stored.tls == {}
