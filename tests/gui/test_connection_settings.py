"""Issue 12 in the connection dialog: a connection keeps the schema its tables are in and extra raw
status/outcome values, saved to connections.toml and read back, so a preset is never edited for one
installation; a malformed pair is named and not kept."""

from __future__ import annotations

import pytest

from idemview.config import ConnectionStore, CredentialStore
from idemview.services.session import SharedMasker


@pytest.fixture
def dialog(qtbot, tmp_path):
    from idemview.qt.connections import ConnectionDialog

    store = ConnectionStore(tmp_path / "connections.toml")
    dlg = ConnectionDialog(CredentialStore(), SharedMasker(), store=store)
    qtbot.addWidget(dlg)
    dlg.show()
    yield dlg, store
    dlg.reject()


def test_schema_and_value_maps_are_saved_and_shown(dialog):
    dlg, store = dialog
    dlg.new()
    dlg.name.setText("pg-boss prod")
    dlg.type.setCurrentIndex(dlg.type.findData("postgresql"))
    dlg.host.setText("db.internal")
    dlg.dbname.setText("app")
    dlg.schema.setText("jobs")
    dlg.status_map.setText("paused=in_progress, archived = completed")
    dlg.outcome_map.setText("aborted=failed")
    assert not dlg.map_problem.isVisible()
    saved = dlg.save()
    assert saved.schema == "jobs"
    assert saved.status_map == {"paused": "in_progress", "archived": "completed"}
    assert saved.outcome_map == {"aborted": "failed"}
    back = ConnectionStore(store.path).find("pg-boss prod")
    assert back is not None and back.schema == "jobs" and back.status_map == saved.status_map
    dlg.new()
    assert dlg.schema.text() == "" and dlg.status_map.text() == ""
    dlg._show(back)  # selecting it again fills the fields as written
    assert dlg.schema.text() == "jobs"
    assert dlg.status_map.text() == "paused=in_progress, archived=completed"


def test_malformed_pair_is_named_and_not_kept(dialog):
    dlg, _store = dialog
    dlg.new()
    dlg.status_map.setText("paused=in_progress, oops, stalled=nonsense")
    assert dlg.map_problem.isVisible()
    assert "oops" in dlg.map_problem.text() and "not kept" in dlg.map_problem.text()
    assert dlg.form_connection().status_map == {"paused": "in_progress"}
