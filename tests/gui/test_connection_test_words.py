"""Test in the connection dialog says what to fix in the user's words: an input error (an empty DynamoDB
table, a dump that names no file, a path that is no dump) was shown as "DynamoUrlError: …", "InputError: …"
(a Python class name) while a failed connection was shown in words."""

from __future__ import annotations

import pytest

from idemview.config import ConnectionStore, CredentialStore
from idemview.services.session import SharedMasker


@pytest.mark.parametrize(
    ("dialect", "fill", "said"),
    [
        ("dynamodb", {"dbname": "", "region": "eu-west-1"}, "dynamodb://TABLE: a table name is"),
        ("duckdb", {"file": ""}, "this dump names no file or folder"),
        ("duckdb", {"file": "/etc/hostname"}, "is not a dump file"),
    ],
)
def test_an_input_error_is_shown_in_words_without_a_class_name(qtbot, tmp_path, dialect, fill, said):
    from idemview.qt.connections import ConnectionDialog

    dlg = ConnectionDialog(CredentialStore(), SharedMasker(), store=ConnectionStore(tmp_path / "c.toml"))
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.type.setCurrentIndex(dlg.type.findData(dialect))
    for key, value in fill.items():
        (dlg.options[key] if key == "region" else getattr(dlg, key)).setText(value)
    dlg.test()
    qtbot.waitUntil(lambda: dlg.test_btn.isEnabled(), timeout=60_000)
    text = dlg.result.text()
    assert text.startswith("⚠ ") and said in text, text
    assert "Error:" not in text and "\n" not in text
    dlg.reject()
