"""Pasting a URL the dialog cannot open says so in one line and leaves the type as it was: a typo in the
scheme (``postgresq://``, ``dynamo://``) or a scheme no backend claims (``http://``) used to fill the
fields as a PostgreSQL connection, silently."""

from __future__ import annotations

import pytest

from idemview.config import ConnectionStore, CredentialStore
from idemview.services.session import SharedMasker


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("postgresq://ops:pw-Zq81x@db.internal/ledger", "did you mean postgresql?"),
        ("dynamo://idempotency?region=eu-west-1", "did you mean dynamodb?"),
        ("http://example.com/ledger", "unknown kind of database 'http'"),
    ],
)
def test_a_pasted_url_of_an_unknown_kind_is_refused_in_one_line(qtbot, tmp_path, url, said):
    from idemview.qt.connections import ConnectionDialog

    dlg = ConnectionDialog(CredentialStore(), SharedMasker(), store=ConnectionStore(tmp_path / "c.toml"))
    qtbot.addWidget(dlg)
    dlg.show()
    before = dlg.type.currentData()
    dlg.url.setText(url)
    dlg.split_url()
    text = dlg.result.text()
    assert text.startswith("⚠") and said in text and "pw-Zq81x" not in text and "\n" not in text
    assert dlg.type.currentData() == before and dlg.host.text() != "db.internal"
    dlg.reject()
