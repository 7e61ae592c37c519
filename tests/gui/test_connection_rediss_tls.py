"""A ``rediss://`` connection keeps its TLS files: pasted into the dialog, saved, and opened again (the
Redis form had no field for them, so a pasted ``?ssl_ca_certs=`` was dropped on Save without a word and
Test then failed on the server's certificate)."""

from __future__ import annotations

from idemview.backends import backend_for_dialect
from idemview.config import ConnectionStore, CredentialStore
from idemview.services.opener import spec_for_connection
from idemview.services.session import SharedMasker


def test_a_pasted_rediss_url_keeps_its_tls_files_through_save(qtbot, tmp_path):
    from idemview.qt.connections import ConnectionDialog

    store = ConnectionStore(tmp_path / "c.toml")
    dlg = ConnectionDialog(CredentialStore(), SharedMasker(), store=store)
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.url.setText("rediss://cache.internal:6380/3?ssl_ca_certs=/etc/ssl/ca.pem&ssl_certfile=/etc/ssl/me.pem")
    dlg.split_url()
    saved = dlg.save()
    dlg.reject()
    again = store.find(saved.name)
    assert again is not None and again.dialect == "rediss"
    assert again.tls == {"ssl_ca_certs": "/etc/ssl/ca.pem", "ssl_certfile": "/etc/ssl/me.pem"}
    url = str(spec_for_connection(again).url)
    assert "ssl_ca_certs=" in url and "ssl_certfile=" in url
    # a plain redis:// connection shows no TLS rows (the options need rediss://)
    keys = {f.key for f in backend_for_dialect("redis").fields("redis")}
    assert not any(k.startswith("tls.ssl_") for k in keys)  # (tls.write_ttl is idemview's own option)
