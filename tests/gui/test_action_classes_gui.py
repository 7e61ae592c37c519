"""Action classes in the window (DESIGN §5.1, issue 21): the findings panel grouped by class, a click
filtering kind and class, the Ledger audit part, and the rules edited in the layout editor and the
connection dialog."""

from __future__ import annotations

from idemview.config import ConnectionStore, CredentialStore
from idemview.domain.model import FindingKind
from idemview.layouts.layout import load_layout
from idemview.ledger.connect import open_engine
from idemview.services.session import SharedMasker
from tests.gui.conftest import open_and_wait, spec_for


def test_findings_panel_groups_by_action_and_a_row_filters_kind_and_class(qtbot, window, demo_db):
    path, _planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    qtbot.waitUntil(lambda: tab.findings is not None and not tab._scanning, timeout=30_000)
    tab.group_by_action.setChecked(True)
    m = tab.findings_model
    rows = {(m.kind_at(r), m.action_at(r)): m.data(m.index(r, 2)) for r in range(m.rowCount())}
    assert (FindingKind.DUPLICATE_EFFECT, "read") in rows and (FindingKind.DUPLICATE_EFFECT, "access") in rows
    r = next(i for i in range(m.rowCount()) if (m.kind_at(i), m.action_at(i)) == (FindingKind.DUPLICATE_EFFECT, "read"))
    assert m.data(m.index(r, 0)).endswith("low") and m.data(m.index(r, 1)) == "dup effect · read"
    assert "that only read" in m.data(m.index(r, 1), 3)  # ToolTipRole: "1 duplicate effect that only read"
    tab._finding_row_clicked(m.index(r, 1))
    flt = tab.filterbar.filter()
    assert flt.findings == [FindingKind.DUPLICATE_EFFECT] and flt.actions == ["read"]
    assert "that only read" in tab.filterbar.sentence_text()
    assert tab.filterbar.action_btn.text() == "Action: read"
    qtbot.waitUntil(lambda: tab.model.rowCount() == 1, timeout=30_000)  # the requery runs on a worker
    # the ledger audit names the columns that keep secrets, and what to change; never a value
    qtbot.waitUntil(lambda: tab.ledger_audit.isVisibleTo(tab), timeout=30_000)
    text = tab.ledger_audit.text()
    assert "Ledger audit" in text and "request_body $.card.number" in text and "not the card number" in text
    assert "4242424242424242" not in text and "5555555555554444" not in text
    assert FindingKind.SECRET_AT_REST not in tab.filterbar.chips
    tab.group_by_action.setChecked(False)
    assert m.action_at(0) is None


def test_layout_editor_keeps_action_rules(qtbot, tmp_path):
    from idemview.qt.layout_editor import LayoutEditor
    from idemview.services.demo import DEFAULT_ANCHOR, write_demo

    write_demo(tmp_path / "demo.db", operations=100)
    eng = open_engine(str(tmp_path / "demo.db"))
    try:
        ed = LayoutEditor(eng, "idemview", now=DEFAULT_ANCHOR, save_path=tmp_path / "mine.toml")
        qtbot.addWidget(ed)
        with qtbot.waitSignal(ed.previewUpdated, timeout=10_000):
            pass
        ed.actions_edit.setText("cash=x")
        assert "unknown action class 'cash'" in ed.actions_problem.text()
        ed.actions_edit.setText(r"read=^report\. ; regulated=notification")
        assert ed.actions_problem.text() == ""
        ed.name_edit.setText("demo-actions")
        lay = load_layout(str(ed.save()))
        assert lay.actions.rules == ((r"^report\.", "read"),) and lay.actions.regulated == {"notification"}
    finally:
        eng.dispose()


def test_connection_dialog_keeps_action_rules(qtbot, tmp_path):
    from idemview.qt.connections import ConnectionDialog

    store = ConnectionStore(tmp_path / "connections.toml")
    dlg = ConnectionDialog(CredentialStore(), SharedMasker(), store=store)
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.new()
    dlg.name.setText("shop")
    dlg.action_rules.setText(r"money=^shop\.tasks\. ; regulated=money")
    saved = dlg.save()
    assert saved.actions == {"rules": [{"match": r"^shop\.tasks\.", "action": "money"}], "regulated": ["money"]}
    back = ConnectionStore(store.path).find("shop")
    assert back is not None and back.actions == saved.actions
    dlg.action_rules.setText("money=(")
    assert "bad regular expression" in dlg.map_problem.text() and "not kept" in dlg.map_problem.text()
    dlg.new()
    assert dlg.action_rules.text() == ""
    dlg._show(back)
    assert dlg.action_rules.text() == r"money=^shop\.tasks\. ; regulated=money"
    dlg.reject()
