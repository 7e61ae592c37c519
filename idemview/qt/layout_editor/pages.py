"""The layout editor's tabs (Operations, Status, Times, Fields, Attempts, Expiry, Effects, Actions): the
widgets each tab holds and how the Effects and Actions tabs read back. A mixin of
:class:`~idemview.qt.layout_editor.dialog.LayoutEditor` (the attributes it reads are the dialog's)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import (
    Qt,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QSpinBox,
    QStackedWidget,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from idemview.domain.actions import ACTIONS, ActionRuleError, ActionRules
from idemview.layouts.layout import (
    ATTEMPT_SOURCES,
    PAYLOAD_ENCODINGS,
    PAYLOAD_FIELDS,
    TIME_FIELDS,
    VALUE_FIELDS,
)
from idemview.qt.layout_editor.common import (
    OUTCOMES,
    STATUSES,
)
from idemview.qt.layout_editor.models import (
    StatusMapModel,
    _ChoiceDelegate,
)
from idemview.qt.layout_editor.widgets import (
    CheckList,
    ColumnCombo,
    TimeRow,
    _grid_row,
    _spin,
    _tkey,
    _tsplit,
)


class EditorPages:
    """The tabs' widgets (built once by the dialog's ``_build_ui``)."""

    masker: Any
    tables: Any
    _draft: Any
    _loading: bool

    def _ops_page(self) -> QWidget:
        w = QWidget()
        f = QFormLayout(w)
        f.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        self.table_combo = QComboBox()
        self.table_combo.setToolTip("the table with one row per operation record")
        f.addRow("Operations table", self.table_combo)
        self.key_list = CheckList()
        self.key_list.setToolTip("the idempotency key column(s); several are joined with '/'")
        f.addRow("Key column(s)", self.key_list)
        self.scope_list = CheckList()
        self.scope_list.setToolTip("the namespace in which a key is unique (tenant, user, queue…); may be empty")
        f.addRow("Scope column(s)", self.scope_list)
        self.kind_combo = ColumnCombo()
        self.kind_combo.setToolTip("task, endpoint or message type")
        f.addRow("Kind", self.kind_combo)
        self.row_id_combo = ColumnCombo()
        self.row_id_combo.setToolTip("the row's own identity: tells literal duplicate rows apart, pages the grid")
        f.addRow("Row identity", self.row_id_combo)
        hint = QLabel("Tables and columns come from the database's reflected schema; a layout never contains SQL.")
        hint.setWordWrap(True)
        hint.setStyleSheet("color: #666;")
        f.addRow(hint)
        return w

    def _status_page(self) -> QWidget:
        w = QWidget()
        v = QVBoxLayout(w)
        f = QFormLayout()
        self.status_combo = ColumnCombo()
        self.status_combo.setToolTip("the column holding the ledger's own state")
        f.addRow("Status column", self.status_combo)
        self.status_default = QComboBox()
        self.status_default.addItems(STATUSES)
        self.status_default.setToolTip("the status of a value not mapped below (and of NULL)")
        f.addRow("Unmapped values are", self.status_default)
        v.addLayout(f)
        self.rules_label = QLabel("")
        self.rules_label.setWordWrap(True)
        self.rules_label.setStyleSheet("color: #444; background: #eef3fb; padding: 6px;")
        self.rules_label.hide()
        v.addWidget(self.rules_label)
        v.addWidget(QLabel("Values sampled from the database (most frequent first), and what each means:"))
        self.status_model = StatusMapModel(STATUSES, self.masker, self)
        self.status_view = self._map_view(self.status_model)
        v.addWidget(self.status_view, 1)
        return w

    def _map_view(self, model: StatusMapModel) -> QTableView:
        view = QTableView()
        view.setModel(model)
        view.setItemDelegateForColumn(2, _ChoiceDelegate(view))
        view.setSelectionMode(QAbstractItemView.NoSelection)
        view.verticalHeader().hide()
        view.verticalHeader().setDefaultSectionSize(28)
        h = view.horizontalHeader()
        h.setSectionResizeMode(0, QHeaderView.Stretch)
        h.setSectionResizeMode(1, QHeaderView.ResizeToContents)
        h.setSectionResizeMode(2, QHeaderView.Fixed)
        h.resizeSection(2, 140)
        view.setMinimumHeight(160)
        # Persistent combos: every choice is visible at a glance, one click to change.
        model.modelReset.connect(
            lambda v=view, m=model: [v.openPersistentEditor(m.index(r, 2)) for r in range(m.rowCount())]
        )
        return view

    def _times_page(self) -> QWidget:
        w = QWidget()
        g = QGridLayout(w)
        for c, h in enumerate(("field", "column", "encoding", "zone (naive)", "first value, read")):
            lab = QLabel(f"<b>{h}</b>")
            g.addWidget(lab, 0, c)
        self.time_rows: dict[str, TimeRow] = {}
        for r, name in enumerate(TIME_FIELDS, 1):
            row = TimeRow(name)
            self.time_rows[name] = row
            _grid_row(g, r, name, row.column, row.encoding, row.zone, row.sample)
        hint = QLabel(
            "The encoding is guessed from the column type and sample values when a column is "
            "chosen: epoch seconds ≈ 1e9, milliseconds ≈ 1e12, ISO-8601 text. Check the value "
            "read in the last column."
        )
        hint.setWordWrap(True)
        hint.setStyleSheet("color: #666;")
        g.addWidget(hint, len(TIME_FIELDS) + 1, 0, 1, 5)
        g.setRowStretch(len(TIME_FIELDS) + 2, 1)
        g.setColumnStretch(1, 1)
        g.setColumnStretch(4, 1)
        return w

    def _fields_page(self) -> QWidget:
        w = QWidget()
        g = QGridLayout(w)
        self.value_rows: dict[str, tuple[ColumnCombo, QLineEdit]] = {}
        r = 0
        for name in VALUE_FIELDS:
            cb, path = ColumnCombo(), QLineEdit()
            path.setPlaceholderText("JSON path, e.g. $.order_id")
            path.setToolTip("optional: read a scalar inside a JSON column")
            self.value_rows[name] = (cb, path)
            _grid_row(g, r, name, cb, path)
            r += 1
        self.payload_rows: dict[str, tuple[ColumnCombo, QComboBox]] = {}
        for name in PAYLOAD_FIELDS:
            cb, enc = ColumnCombo(), QComboBox()
            enc.addItems(PAYLOAD_ENCODINGS)
            enc.setToolTip("pickle is never unpickled: shown as 'pickled, not decoded' with its size")
            self.payload_rows[name] = (cb, enc)
            _grid_row(g, r, name, cb, enc)
            r += 1
        g.setColumnStretch(1, 1)
        g.setRowStretch(r, 1)
        return w

    def _attempts_page(self) -> QWidget:
        w = QWidget()
        v = QVBoxLayout(w)
        f = QFormLayout()
        self.att_source = QComboBox()
        self.att_source.addItems(ATTEMPT_SOURCES)
        self.att_source.setToolTip(
            "table: one row per attempt; json_array: an array column; counter: only fields.attempt_count; none"
        )
        f.addRow("Attempts come from", self.att_source)
        v.addLayout(f)
        self.att_stack = QStackedWidget()
        self.att_stack.addWidget(self._attempts_table_page())
        # json_array page
        jp = QWidget()
        jf = QFormLayout(jp)
        jf.setContentsMargins(0, 0, 0, 0)
        self.att_json_column = ColumnCombo()
        jf.addRow("Array column", self.att_json_column)
        lab = QLabel("Each element is one ended attempt, read as {at, attempt, error} (Oban/River errors).")
        lab.setWordWrap(True)
        jf.addRow(lab)
        self.att_stack.addWidget(jp)
        # counter / none pages
        for text_ in (
            "The attempt count is the attempt_count field (Fields tab); no attempt is listed.",
            "No attempts: only operation records are read.",
        ):
            lab = QLabel(text_)
            lab.setWordWrap(True)
            lab.setAlignment(Qt.AlignTop | Qt.AlignLeft)
            self.att_stack.addWidget(lab)
        v.addWidget(self.att_stack, 1)
        return w

    def _attempts_table_page(self) -> QWidget:
        """Attempts from a table of their own: the table, the join, its columns and outcome map."""
        tp = QWidget()
        tf = QFormLayout(tp)
        tf.setContentsMargins(0, 0, 0, 0)
        self.att_table = QComboBox()
        tf.addRow("Attempts table", self.att_table)
        jw = QWidget()
        jg = QGridLayout(jw)
        jg.setContentsMargins(0, 0, 0, 0)
        self.att_join: list[tuple[ColumnCombo, ColumnCombo]] = []
        for i in range(3):
            a, o = ColumnCombo(), ColumnCombo()
            jg.addWidget(a, i, 0)
            jg.addWidget(QLabel("="), i, 1)
            jg.addWidget(o, i, 2)
            self.att_join.append((a, o))
        jw.setToolTip("attempts column = operations column (scope and key, usually)")
        jg.setColumnStretch(0, 1)
        jg.setColumnStretch(2, 1)
        tf.addRow("Joined on", jw)
        self.att_number = ColumnCombo()
        tf.addRow("Attempt number", self.att_number)
        self.att_outcome = ColumnCombo()
        tf.addRow("Outcome column", self.att_outcome)
        self.att_outcome_default = QComboBox()
        self.att_outcome_default.addItems(OUTCOMES)
        tf.addRow("Unmapped outcomes are", self.att_outcome_default)
        self.outcome_model = StatusMapModel(OUTCOMES, self.masker, self)
        self.outcome_view = self._map_view(self.outcome_model)
        self.outcome_view.setMinimumHeight(120)
        tf.addRow(self.outcome_view)
        self.att_times = {k: TimeRow(k) for k in ("started_at", "finished_at")}
        for k, row in self.att_times.items():
            hw = QWidget()
            hl = QHBoxLayout(hw)
            hl.setContentsMargins(0, 0, 0, 0)
            hl.addWidget(row.column, 2)
            hl.addWidget(row.encoding, 1)
            hl.addWidget(row.zone, 1)
            tf.addRow(k, hw)
        self.att_cols = {k: ColumnCombo() for k in ("error", "effect_ref", "worker", "fingerprint")}
        for k, cb in self.att_cols.items():
            tf.addRow(k, cb)
        self.att_where_label = QLabel("")
        self.att_where_label.setWordWrap(True)
        self.att_where_label.setStyleSheet("color: #444;")
        tf.addRow(self.att_where_label)
        return tp

    def _expiry_page(self) -> QWidget:
        w = QWidget()
        f = QFormLayout(w)
        self.retention_spin = _spin(10**9, " s", "none")
        self.retention_spin.setToolTip("dedup window: a key expires this long after the time below")
        f.addRow("Retention", self.retention_spin)
        self.retention_from = QComboBox()
        self.retention_from.addItems(TIME_FIELDS)
        f.addRow("counted from", self.retention_from)
        self.lock_spin = _spin(10**8, " s", "none")
        self.lock_spin.setToolTip("an in-progress lock is stale after locked_at + this")
        f.addRow("Lock timeout", self.lock_spin)
        self.window_spin = _spin(10**9, " s", "none")
        self.window_spin.setToolTip("for duplicate_intent when the ledger has no retention")
        f.addRow("Dedup window", self.window_spin)
        self.retry_spin = QSpinBox()
        self.retry_spin.setRange(1, 10**6)
        self.retry_spin.setValue(5)
        f.addRow("Retry storm above", self.retry_spin)
        return w

    def _effects_page(self) -> QWidget:
        """The ``[effects]`` section (issue #16): the downstream records that prove a side effect
        happened, chosen from the reflected schema of the ledger's database."""
        w = QWidget()
        f = QFormLayout(w)
        f.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        self.fx_table = QComboBox()
        self.fx_table.setToolTip("charges, sent messages, grants…: one row per side effect")
        f.addRow("Effect table", self.fx_table)
        self.fx_link = ColumnCombo()
        self.fx_link.setToolTip("the effect table's column that names its operation")
        f.addRow("Linked by column", self.fx_link)
        self.fx_link_to = QComboBox()
        self.fx_link_to.setToolTip(
            "what that column holds: the idempotency key, the operation's effect "
            "reference, or an operations-table column (a foreign key to its row id)"
        )
        f.addRow("which holds", self.fx_link_to)
        self.fx_id = ColumnCombo()
        f.addRow("Record identity", self.fx_id)
        self.fx_reference = ColumnCombo()
        self.fx_reference.setToolTip("the side effect's id in the other system (e.g. a charge id)")
        f.addRow("Reference", self.fx_reference)
        self.fx_time = TimeRow("effects.time")
        tw = QWidget()
        tl = QHBoxLayout(tw)
        tl.setContentsMargins(0, 0, 0, 0)
        for x in (self.fx_time.column, self.fx_time.encoding, self.fx_time.zone):
            tl.addWidget(x)
        f.addRow("Time", tw)
        self.fx_show = CheckList()
        self.fx_show.setToolTip("columns shown beside each effect record (masked like every value)")
        f.addRow("Show columns", self.fx_show)
        self.fx_note = QLabel("")
        self.fx_note.setWordWrap(True)
        self.fx_note.setStyleSheet("color: #666;")
        f.addRow(self.fx_note)
        return w

    def _actions_page(self) -> QWidget:
        """The ``[actions]`` section (DESIGN §5.1): the layout's own rules from kind to action class,
        tried before the shipped vocabulary, and the classes a person decides on."""
        w = QWidget()
        f = QFormLayout(w)
        f.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        self.actions_edit = QLineEdit()
        self.actions_edit.setObjectName("actionRules")
        self.actions_edit.setPlaceholderText("CLASS=REGEX ; … e.g. money=^billing\\. ; regulated=money")
        self.actions_edit.setToolTip(
            "CLASS=REGEX entries, first match on the operation's kind wins; regulated=CLASS,… marks classes "
            "a person decides on. CLASS is one of " + ", ".join(ACTIONS)
        )
        f.addRow("Action rules", self.actions_edit)
        self.actions_problem = QLabel("")
        self.actions_problem.setWordWrap(True)
        self.actions_problem.setStyleSheet("color: #b00020;")
        f.addRow(self.actions_problem)
        note = QLabel(
            "Without a rule, a kind's class comes from the shipped vocabulary (docs/actions.md): "
            "billing.tasks.refund_order is money, POST /v1/refunds money, GET … a read. The class sets the "
            "severity of duplicate effects, hidden successes, replays and duplicate intents."
        )
        note.setWordWrap(True)
        note.setStyleSheet("color: #666;")
        f.addRow(note)
        self.actions_edit.textChanged.connect(self._check_actions)
        return w

    def _check_actions(self, *_):
        try:
            ActionRules.from_text(self.actions_edit.text(), "action rules")
            self.actions_problem.setText("")
        except ActionRuleError as e:
            self.actions_problem.setText(f"{e} (not kept)")

    def _fill_fx(self, section: dict | None):
        """Show ``section`` (a TOML-shaped ``[effects]`` dict, or ``None``) in the Effects page."""
        sec = dict(section or {})
        self._fx_kept = {k: v for k, v in sec.items() if k in ("connection", "where", "optional")}
        self.fx_table.blockSignals(True)
        self.fx_table.clear()
        self.fx_table.addItem("(no effect records)", None)
        for t in self.tables:
            self.fx_table.addItem(t.label, _tkey(t.schema, t.name))
        if sec.get("table") and not sec.get("connection"):
            self._select_table(self.fx_table, sec.get("table"), sec.get("schema"))
        self.fx_table.blockSignals(False)
        self._fill_fx_columns(sec)
        other = sec.get("connection")
        self.fx_note.setText(
            f"The effect records live in another database ({other}); this page edits effects in the "
            "ledger's own database, so that section is kept as it is."
            if other
            else "Reconciliation reports duplicate_effect (≥ 2 records for one operation), hidden_success (the "
            "ledger says failed, stuck or timed out, yet a record exists) and orphan_effect. Effects in "
            'another database: add connection = "…" to the saved file (docs/effects.md).'
        )
        self.tabs.widget(self.tabs.count() - 1).setEnabled(not other)

    def _fill_fx_columns(self, sec: dict | None = None):
        t = self._table_info(self.fx_table)
        cols = list(t.columns) if t else []
        sec = sec or {}
        link = sec.get("link") or {}
        for cb, v in (
            (self.fx_link, link.get("effect")),
            (self.fx_id, sec.get("id")),
            (self.fx_reference, sec.get("reference")),
        ):
            cb.set_columns(cols)
            cb.set_value(v, emit=False)
        self.fx_time.column.set_columns(cols)
        self.fx_time.set_value(sec.get("time"))
        self.fx_show.set_columns(cols, list(sec.get("show") or []))
        self.fx_link_to.blockSignals(True)
        self.fx_link_to.clear()
        self.fx_link_to.addItem("the idempotency key", "key")
        self.fx_link_to.addItem("the operation's effect reference", "effect_ref")
        for c in self._cols():
            self.fx_link_to.addItem(f"operations.{c.name}", c.name)
        i = self.fx_link_to.findData(link.get("operation", "key"))
        self.fx_link_to.setCurrentIndex(max(i, 0))
        self.fx_link_to.blockSignals(False)

    def _fx_model(self) -> dict | None:
        """The Effects page as a TOML-shaped ``[effects]`` section (``None``: no effect records)."""
        kept = getattr(self, "_fx_kept", {})
        if kept.get("connection"):
            return self._draft.extra.get("effects")
        t = _tsplit(self.fx_table.currentData())
        if not t or not self.fx_link.value():
            return None
        d: dict = {
            "table": t[1],
            "schema": t[0],
            "link": {"effect": self.fx_link.value(), "operation": self.fx_link_to.currentData() or "key"},
            "id": self.fx_id.value(),
            "reference": self.fx_reference.value(),
        }
        tv = self.fx_time.value()
        if tv:
            d["time"] = tv
        if self.fx_show.checked():
            d["show"] = self.fx_show.checked()
        d.update({k: v for k, v in kept.items() if k != "connection"})
        return d
