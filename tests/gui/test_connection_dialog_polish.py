"""What a person on a 1280×800 screen saw wrong in the connection dialog (gui-polish):

- the read-only sentence said "enforced by the database session" for every type; DynamoDB, Redis and a
  dump are kept read-only otherwise, and each backend now says how (``Backend.read_only_note``);
- Redis's "Write TTL (s)" sat in the server box right under the TLS files (a ``tls.`` option inside),
  read as a TLS setting; it is how records are dated, so it is a row under "Naive times in";
- switching from PostgreSQL to Redis kept port 5432;
- a rediss connection's rows did not fit the screen's height and the server box's rows were squeezed
  onto each other; the layout list's long titles made the fields 1,000 px wide (cut at the right).
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect
from PySide6.QtWidgets import QFormLayout, QLabel, QLineEdit

from idemview.backends import backend_for_dialect
from idemview.config import ConnectionStore, CredentialStore
from idemview.services.session import SharedMasker

pytestmark = [pytest.mark.gui, pytest.mark.qt_log_ignore("propagateSizeHints")]

SCREEN = QRect(0, 0, 1280, 800)


@pytest.fixture
def dlg(qtbot, tmp_path):
    from idemview.qt.connections import ConnectionDialog

    d = ConnectionDialog(CredentialStore(), SharedMasker(), store=ConnectionStore(tmp_path / "c.toml"))
    qtbot.addWidget(d)
    d.show()
    yield d
    d.reject()


def _choose(d, dialect: str) -> None:
    d.type.setCurrentIndex(d.type.findData(dialect))


@pytest.mark.parametrize(
    ("dialect", "says", "never"),
    [
        ("sqlite", "enforced by the database session", "allowlist"),
        ("postgresql", "enforced by the database session", "allowlist"),
        ("dynamodb", "refuses any operation other than DescribeTable, Scan, Query and GetItem", "database session"),
        ("duckdb", "only one SELECT per statement", "database session"),
        ("redis", "allowlist of read commands", "database session"),
    ],
)
def test_the_read_only_sentence_is_the_backends_own(dlg, dialect, says, never):
    _choose(dlg, dialect)
    shown = dlg.read_only.text()
    assert shown == backend_for_dialect(dialect).read_only_note
    assert says in shown and never not in shown
    assert dlg.read_only.isVisible()


def test_a_test_result_does_not_replace_the_read_only_sentence(dlg):
    _choose(dlg, "dynamodb")
    dlg.result.setText("Saved x.")
    _choose(dlg, "duckdb")
    assert dlg.result.text() == "Saved x."
    assert dlg.read_only.text().startswith("Read-only: DuckDB may read only the dump's files")


def test_write_ttl_is_a_reading_row_not_a_tls_option(dlg):
    for dialect in ("redis", "rediss"):
        _choose(dlg, dialect)
        ttl = dlg.options["write_ttl"]
        assert ttl.isVisible() and not dlg.server.isAncestorOf(ttl)
        row, _role = dlg.form.getWidgetPosition(ttl)
        zone_row, _ = dlg.form.getWidgetPosition(dlg.zone)
        assert row == zone_row + 1  # under "Naive times in": both say how records are dated
        label = dlg.form.itemAt(row, QFormLayout.ItemRole.LabelRole).widget()
        assert isinstance(label, QLabel) and label.text() == "Write TTL (s)"
        assert "result_expires" in label.toolTip() and label.toolTip() == ttl.toolTip()
        server_labels = [
            dlg.server_form.itemAt(r, QFormLayout.ItemRole.LabelRole).widget().text()
            for r in range(dlg.server_form.rowCount())
            if dlg.server_form.itemAt(r, QFormLayout.ItemRole.LabelRole) is not None
        ]
        assert "Write TTL (s)" not in server_labels
    _choose(dlg, "postgresql")  # gone with the type, and no label left behind
    assert not dlg.options["write_ttl"].isVisible()
    labels = [w.text() for w in dlg.findChildren(QLabel) if w.isVisible()]
    assert "Write TTL (s)" not in labels
    _choose(dlg, "redis")  # back: one row, not two
    labels = [w.text() for w in dlg.findChildren(QLabel) if w.isVisible()]
    assert labels.count("Write TTL (s)") == 1


def test_the_previous_types_default_port_follows_the_type(dlg):
    _choose(dlg, "postgresql")
    assert dlg.port.value() == 5432
    _choose(dlg, "redis")
    assert dlg.port.value() == 6379
    dlg.port.setValue(6380)  # a port the user typed stays
    _choose(dlg, "mysql")
    assert dlg.port.value() == 6380


def test_rediss_rows_fit_a_1280x800_screen_unsqueezed(qtbot, dlg):
    from idemview.qt.fit import fit_dialog

    _choose(dlg, "rediss")
    dlg.ssh.setText("ops@bastion")
    fit_dialog(dlg, SCREEN)
    qtbot.wait(50)
    assert dlg.frameGeometry().height() <= SCREEN.height() and dlg.width() <= SCREEN.width()
    right = dlg.fields_scroll.widget()
    assert right.width() <= dlg.fields_scroll.viewport().width()  # nothing cut at the right
    edits = [w for w in dlg.server.findChildren(QLineEdit) if w.isVisible() and w.parent() is dlg.server]
    assert len(edits) >= 9
    for e in edits:
        assert e.height() >= e.minimumSizeHint().height(), e.placeholderText()
    tops = sorted(edits, key=lambda w: w.y())
    for a, b in zip(tops, tops[1:], strict=False):
        assert a.geometry().bottom() < b.geometry().top(), (a.placeholderText(), b.placeholderText())
    # the layout list no longer sets the dialog's width; its popup still shows whole titles
    assert dlg.layout_box.minimumSizeHint().width() < 400
    assert dlg.layout_box.view().minimumWidth() >= dlg.layout_box.view().sizeHintForColumn(0)
