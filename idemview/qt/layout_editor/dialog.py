"""The layout editor dialog (issue 5): map an unknown ledger onto the normalized model, in the GUI.

A person starts from a preset or from scratch, picks the operations table and its columns from the
*reflected* schema (never typed SQL), maps the status values sampled from the database (each shown with
its count), chooses time encodings (guessed from the column type and sample values), and watches a live
preview of the first normalized rows and the finding counts. Save writes TOML through
:mod:`idemview.ledger.builder` (validated before it is written) beside the connection.

Every database call (reflection, samples, preview, findings) runs through the GUI's one worker pattern,
:class:`idemview.qt.workers.Runner` (shared bounded pool; results come back by queued signal with a
per-topic generation, so a result for a mapping that has since changed is dropped; closing cancels the
running statement in the database instead of waiting for it, DESIGN §10). Values shown go through
:class:`idemview.masking.masker.Masker`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QSplitter,
    QStackedWidget,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)
from sqlalchemy.engine import Engine

from idemview.config import new_masker
from idemview.domain.actions import ACTIONS, ActionRuleError, ActionRules
from idemview.domain.model import FindingKind
from idemview.layouts.draft import AttemptsDraft, ExpiryDraft, LayoutDraft, StatusDraft, TimeDraft, ValueDraft
from idemview.layouts.layout import (
    ATTEMPT_SOURCES,
    PAYLOAD_ENCODINGS,
    PAYLOAD_FIELDS,
    TIME_FIELDS,
    VALUE_FIELDS,
    Layout,
    LayoutError,
    TimeColumn,
    load_preset,
    preset_names,
)
from idemview.ledger.builder import (
    ColumnInfo,
    TableInfo,
    blank_model,
    find_table,
    guess_time_encoding,
    layout_path_for,
    layout_text,
    model_from_layout,
    reflect_schema,
    sample_distinct,
    sample_values,
    save_layout,
)
from idemview.ledger.times import decode_time
from idemview.masking.masker import Masker
from idemview.qt.layout_editor.common import (
    _SCRATCH,
    NONE,
    OUTCOMES,
    PREVIEW_ROWS,
    STATUSES,
    UTC,
)
from idemview.qt.layout_editor.jobs import (
    PreviewResult,
    _job,
    _preview_job,
    _Refused,
)
from idemview.qt.layout_editor.models import (
    PreviewModel,
    StatusMapModel,
    _ChoiceDelegate,
)
from idemview.qt.layout_editor.widgets import (
    CheckList,
    ColumnCombo,
    TimeRow,
    _grid_row,
    _scrolled,
    _spin,
    _tkey,
    _tsplit,
)
from idemview.qt.workers import JobError, Runner
from idemview.services.cancel import watch_engine

# ------------------------------------------------------------------------------------------ dialog


class LayoutEditor(QDialog):
    """Build or edit a layout against a live, read-only database.

    ``engine`` must be read-only (:func:`idemview.ledger.connect.open_engine`). ``start`` is a preset name, a
    parsed :class:`Layout`, or ``None`` (from scratch); a preset is fitted to the database's real table
    names and schema by detection when it matches. ``connection_id`` names where Save writes
    (``config_dir()/layouts/<id>.toml``); ``save_path`` overrides it; with neither, Save asks for a
    file. ``now`` (aware) fixes the instant findings are computed for (default: the current time at
    each refresh). ``masker``: the session's Masker (a new one by default).

    Signals: ``saved(str)`` with the path written; ``schemaLoaded()`` once the schema is reflected and
    the starting mapping shown; ``previewUpdated(int)`` with the number of preview rows after each
    fresh preview; ``previewFailed(str)`` with the message shown when the mapping does not work.
    """

    saved = Signal(str)
    schemaLoaded = Signal()
    previewUpdated = Signal(int)
    previewFailed = Signal(str)

    def __init__(
        self,
        engine: Engine,
        start: str | Layout | None = None,
        connection_id: str | None = None,
        *,
        save_path: str | Path | None = None,
        now: datetime | None = None,
        masker: Masker | None = None,
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        if now is not None and now.tzinfo is None:
            raise ValueError("now must be timezone-aware")
        self.engine = engine
        self.connection_id = connection_id
        self.save_path = Path(save_path) if save_path else None
        self.now = now
        self.masker = masker or new_masker()
        self.tables: list[TableInfo] = []
        self._draft = LayoutDraft.from_model(blank_model())  # what the widgets do not show is kept here
        self._loading = False
        self._closing = False
        self._gens: dict[str, int] = {}
        self._last_text: str | None = None
        self._pending_map: dict[str, dict] = {"status": {}, "outcome": {}}
        self._pending_guess: dict[str, bool] = {"status": False, "outcome": False}
        self.last_counts: dict[str, int] = {}
        self.last_error: str | None = None
        # The common worker pattern: the shared bounded pool, one generation per topic, and cancel that
        # interrupts the running statement in the database, so closing never waits for a query.
        watch_engine(engine)
        self._runner = Runner(self)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(250)
        self._debounce.timeout.connect(self._refresh)

        self.setWindowTitle("Layout editor")
        self.resize(1200, 800)
        self._build_ui()
        self._wire()
        self._set_enabled(False)
        if isinstance(start, str):
            self.start_combo.setCurrentText(start)
        self._start(start)

    # ------------------------------------------------------------------------------------ UI build

    def _build_ui(self):
        root = QVBoxLayout(self)

        top = QHBoxLayout()
        top.addWidget(QLabel("Start from"))
        self.start_combo = QComboBox()
        self.start_combo.addItem(_SCRATCH)
        self.start_combo.addItems(preset_names())
        self.start_combo.setToolTip("a shipped preset to adapt, or scratch to map every column yourself")
        top.addWidget(self.start_combo)
        self.start_button = QPushButton("Start over")
        self.start_button.setToolTip("replace the current mapping with the chosen start")
        top.addWidget(self.start_button)
        top.addSpacing(24)
        top.addWidget(QLabel("Layout name"))
        self.name_edit = QLineEdit()
        self.name_edit.setMaximumWidth(220)
        top.addWidget(self.name_edit)
        top.addStretch(1)
        self.busy_label = QLabel("Reading the schema…")
        self.busy_label.setStyleSheet("color: #666;")
        top.addWidget(self.busy_label)
        root.addLayout(top)

        split = QSplitter(Qt.Horizontal)
        split.setChildrenCollapsible(False)
        self.tabs = QTabWidget()
        self.tabs.addTab(_scrolled(self._ops_page()), "Operations")
        self.tabs.addTab(_scrolled(self._status_page()), "Status")
        self.tabs.addTab(_scrolled(self._times_page()), "Times")
        self.tabs.addTab(_scrolled(self._fields_page()), "Fields")
        self.tabs.addTab(_scrolled(self._attempts_page()), "Attempts")
        self.tabs.addTab(_scrolled(self._expiry_page()), "Expiry")
        self.tabs.addTab(_scrolled(self._effects_page()), "Effects")
        self.tabs.addTab(_scrolled(self._actions_page()), "Actions")
        split.addWidget(self.tabs)

        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        fbox = QGroupBox("Findings with this mapping")
        fl = QVBoxLayout(fbox)
        self.findings_label = QLabel("—")
        self.findings_label.setTextFormat(Qt.RichText)
        self.findings_label.setWordWrap(True)
        self.findings_label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        fl.addWidget(self.findings_label)
        rl.addWidget(fbox)
        self.error_label = QLabel("")
        self.error_label.setWordWrap(True)
        self.error_label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.error_label.setStyleSheet(
            "QLabel { color: #8b0000; background: #fdecea; border: 1px solid #f5c2c0; padding: 6px; }"
        )
        self.error_label.hide()
        rl.addWidget(self.error_label)
        self.preview_title = QLabel(f"Preview: first {PREVIEW_ROWS} normalized operations (masked)")
        rl.addWidget(self.preview_title)
        self.preview_model = PreviewModel(self.masker, self)
        self.preview_view = QTableView()
        self.preview_view.setModel(self.preview_model)
        self.preview_view.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.preview_view.setWordWrap(False)
        self.preview_view.verticalHeader().setDefaultSectionSize(22)
        self.preview_view.horizontalHeader().setDefaultSectionSize(120)
        rl.addWidget(self.preview_view, 1)
        split.addWidget(right)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([620, 560])
        root.addWidget(split, 1)

        bottom = QHBoxLayout()
        self.target_label = QLabel("")
        self.target_label.setStyleSheet("color: #666;")
        self.target_label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        bottom.addWidget(self.target_label, 1)
        self.buttons = QDialogButtonBox(QDialogButtonBox.Save | QDialogButtonBox.Close)
        self.save_button = self.buttons.button(QDialogButtonBox.Save)
        bottom.addWidget(self.buttons)
        root.addLayout(bottom)
        self._show_target()

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
        # table page
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
        self.att_stack.addWidget(tp)
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

    # ------------------------------------------------------------------------------------- wiring

    def _wire(self):
        self.start_button.clicked.connect(lambda: self._start(self._start_choice()))
        self.buttons.rejected.connect(self.reject)
        self.save_button.clicked.connect(lambda: self.save())
        self.table_combo.currentIndexChanged.connect(self._on_table)
        self.att_table.currentIndexChanged.connect(self._on_att_table)
        self.att_source.currentIndexChanged.connect(self._on_att_source)
        self.status_combo.currentIndexChanged.connect(self._on_status_column)
        self.att_outcome.currentIndexChanged.connect(self._on_outcome_column)
        ch = self._changed
        for w in (
            self.kind_combo,
            self.row_id_combo,
            self.status_default,
            self.att_number,
            self.att_outcome_default,
            self.att_json_column,
            self.retention_from,
            *self.att_cols.values(),
            *[c for pair in self.att_join for c in pair],
        ):
            w.currentIndexChanged.connect(ch)
        for w in (self.retention_spin, self.lock_spin, self.window_spin, self.retry_spin):
            w.valueChanged.connect(ch)
        self.name_edit.textChanged.connect(ch)
        self.fx_table.currentIndexChanged.connect(lambda _i: (self._fill_fx_columns(), ch()))
        for w in (
            self.fx_link,
            self.fx_link_to,
            self.fx_id,
            self.fx_reference,
            self.fx_time.column,
            self.fx_time.encoding,
        ):
            w.currentIndexChanged.connect(ch)
        self.fx_show.changed.connect(ch)
        self.key_list.changed.connect(ch)
        self.scope_list.changed.connect(ch)
        for m in (self.status_model, self.outcome_model):
            m.dataChanged.connect(ch)
        for name, row in self.time_rows.items():
            row.column.currentIndexChanged.connect(lambda _i, n=name: self._on_time_column(n))
            # a person choosing an encoding overrides any guess still on its way
            row.encoding.activated.connect(lambda _i, n=name: self._bump(f"time:{n}"))
            row.encoding.currentIndexChanged.connect(lambda _i, n=name: self._on_time_encoding(n))
            row.zone.currentTextChanged.connect(ch)
        for row in self.att_times.values():
            for w in (row.column, row.encoding):
                w.currentIndexChanged.connect(ch)
            row.zone.currentTextChanged.connect(ch)
        for cb, path in self.value_rows.values():
            cb.currentIndexChanged.connect(ch)
            path.textChanged.connect(ch)
        for cb, enc in self.payload_rows.values():
            cb.currentIndexChanged.connect(ch)
            enc.currentIndexChanged.connect(ch)

    def _set_enabled(self, on: bool):
        self.tabs.setEnabled(on)
        self.save_button.setEnabled(on and self._last_text is not None)

    def _show_target(self):
        try:
            p = self._target()
        except ValueError as e:
            p, err = None, str(e)
        else:
            err = None
        self.target_label.setText(f"Saves to {p}" if p else (err or "Save asks where to write the layout"))

    def _target(self) -> Path | None:
        if self.save_path is not None:
            return self.save_path
        if self.connection_id:
            return layout_path_for(self.connection_id)
        return None

    # ------------------------------------------------------------------------------- background

    def _bump(self, topic: str) -> int:
        self._gens[topic] = self._gens.get(topic, 0) + 1
        return self._gens[topic]

    def _submit(self, topic: str, fn: Callable[[], Any]) -> int:
        gen = self._bump(topic)
        if not self._closing:

            def ok(result, topic=topic, gen=gen):
                if isinstance(result, _Refused):
                    self._on_failed(topic, gen, result.message)
                else:
                    self._on_done(topic, gen, result)

            def failed(err: JobError, topic=topic, gen=gen):
                if not err.cancelled:
                    self._on_failed(topic, gen, err.message)

            self._runner.submit(topic, _job(fn), ok, failed)
        return gen

    def _current(self, topic: str, gen: int) -> bool:
        return not self._closing and self._gens.get(topic) == gen

    def _on_done(self, topic: str, gen: int, result: Any):
        if not self._current(topic, gen):
            return  # a stale answer: the mapping has changed since it was asked
        if topic == "schema":
            self._schema_ready(*result)
        elif topic == "status":
            col, samples = result
            self.status_model.set_values(
                samples,
                self._pending_map.get("status", {}),
                guess=self._pending_guess.get("status", False),
                default=self.status_default.currentText(),
            )
            self._changed()
        elif topic == "outcome":
            col, samples = result
            self.outcome_model.set_values(
                samples,
                self._pending_map.get("outcome", {}),
                guess=self._pending_guess.get("outcome", False),
                default=self.att_outcome_default.currentText(),
            )
            self._changed()
        elif topic.startswith("time:"):
            self._time_samples(topic[5:], *result)
        elif topic == "preview":
            self._preview_ready(result)

    def _on_failed(self, topic: str, gen: int, message: str):
        if not self._current(topic, gen):
            return
        if topic == "schema":
            self.busy_label.setText("Cannot read the schema")
        if topic == "preview":
            self.preview_model.set_rows([])
            self.findings_label.setText("—")
        self._show_error(message)
        if topic == "preview":
            self.previewFailed.emit(self.last_error or message)

    def _show_error(self, message: str | None):
        from idemview.masking.masker import mask_message

        # session tags first (equal to the grid's), then what only messages need: known secrets and
        # user:password@host shapes (issue #9)
        self.last_error = mask_message(self.masker.mask_text(message)) if message else None
        self.error_label.setText(self.last_error or "")
        self.error_label.setVisible(bool(message))

    # ------------------------------------------------------------------------------- starting

    def _start_choice(self) -> str | None:
        t = self.start_combo.currentText()
        return None if t == _SCRATCH else t

    def _start(self, start: str | Layout | None):
        """Reflect the schema (off the GUI thread) and then show ``start``'s mapping."""
        self._set_enabled(False)
        self.busy_label.setText("Reading the schema…")
        engine = self.engine

        def job():
            from idemview.ledger.detect import detect

            tables = reflect_schema(engine)
            lay = load_preset(start) if isinstance(start, str) else start
            if lay is not None:
                # Fit the preset to this database's real table names (prefix, schema, case).
                m = detect(engine, [lay])
                if m:
                    lay = m[0].layout
            return tables, lay

        self._submit("schema", job)

    def _schema_ready(self, tables: list[TableInfo], lay: Layout | None):
        self.tables = tables
        self.table_combo.blockSignals(True)
        self.att_table.blockSignals(True)
        self.table_combo.clear()
        self.att_table.clear()
        self.table_combo.addItem("(choose a table)", None)
        for t in tables:
            self.table_combo.addItem(t.label, _tkey(t.schema, t.name))
            self.att_table.addItem(t.label, _tkey(t.schema, t.name))
        self.table_combo.blockSignals(False)
        self.att_table.blockSignals(False)
        if lay is not None:
            model = model_from_layout(lay)
        else:
            model = blank_model("custom")
        self.set_model(model, guess=lay is None)
        self.busy_label.setText(f"{len(tables)} tables · read-only")
        self._set_enabled(True)
        self.schemaLoaded.emit()

    # ------------------------------------------------------------------------------ model <-> UI

    def _table_info(self, combo: QComboBox) -> TableInfo | None:
        d = _tsplit(combo.currentData())
        if not d:
            return None
        return next((t for t in self.tables if (t.schema, t.name) == d), None)

    def _select_table(self, combo: QComboBox, name: str | None, schema: str | None):
        combo.blockSignals(True)
        t = find_table(self.tables, name, schema) if name else None
        if t is None and name:
            t = find_table(self.tables, name)
        if t is not None:
            combo.setCurrentIndex(combo.findData(_tkey(t.schema, t.name)))
        elif name:
            # Keep the missing name visible: the preview then says the table is not in the database.
            combo.addItem(f"{name}  (not in database)", _tkey(schema, name))
            combo.setCurrentIndex(combo.count() - 1)
        else:
            combo.setCurrentIndex(0)
        combo.blockSignals(False)

    def set_model(self, model: dict | LayoutDraft, guess: bool = False) -> None:
        """Show ``model`` (a :class:`LayoutDraft`, or its TOML-shaped dict) in the widgets.

        Entries the widgets do not edit (status rules, JSON paths of the attempts, ``where``, detect
        hints) are kept and saved as they were. ``guess``: suggest statuses for sampled values that the
        model does not map (used when starting from scratch)."""
        self._loading = True
        self._draft = copy.deepcopy(model) if isinstance(model, LayoutDraft) else LayoutDraft.from_model(model)
        model = self._draft.to_model()
        meta, ops = model.get("layout", {}), model.get("operations", {})
        self.name_edit.setText(meta.get("name", ""))
        self._select_table(self.table_combo, ops.get("table"), ops.get("schema"))
        self._fill_columns()
        self.key_list.set_columns(self._cols(), list(ops.get("key") or []))
        self.scope_list.set_columns(self._cols(), list(ops.get("scope") or []))
        kind = ops.get("kind")
        self.kind_combo.set_value(kind if isinstance(kind, str) else (kind or {}).get("column"), emit=False)
        self.row_id_combo.set_value(ops.get("row_id"), emit=False)

        st = ops.get("status", "unknown")
        st = st if isinstance(st, dict) else {"default": st}
        self.status_default.setCurrentText(st.get("default", "unknown"))
        rules = st.get("rules") or []
        self.status_combo.blockSignals(True)
        self.status_combo.set_columns(self._cols())
        if rules:
            self.status_combo.setItemText(0, "(ordered rules from the preset)")
            self.status_combo.set_value(None, emit=False)
            self.rules_label.setText(
                f"This layout derives the status from {len(rules)} ordered rules over columns "
                f"({', '.join(sorted({p.get('column', 'any') for r in rules for p in r.get('when', [])}))}). "
                "They are kept as they are; choose a status column to replace them with a value map."
            )
        else:
            self.status_combo.setItemText(0, NONE)
            self.status_combo.set_value(st.get("column"), emit=False)
        self.rules_label.setVisible(bool(rules))
        self.status_combo.blockSignals(False)
        self._pending_map = {"status": dict(st.get("map") or {})}
        self._pending_guess = {"status": guess}
        self.status_model.set_values([], {} if rules else self._pending_map["status"], False)
        if self.status_combo.value():
            self._sample_status()

        times = ops.get("times") or {}
        for name, row in self.time_rows.items():
            row.set_value(times.get(name))
            if row.column.value():
                self._sample_time(name, guess=False)
        fields = ops.get("fields") or {}
        for name, (cb, path) in self.value_rows.items():
            v = fields.get(name)
            cb.set_value(v if isinstance(v, str) else (v or {}).get("column"), emit=False)
            path.setText("" if isinstance(v, str) or v is None else (v.get("json_path") or ""))
        for name, (cb, enc) in self.payload_rows.items():
            v = fields.get(name)
            cb.set_value(v if isinstance(v, str) else (v or {}).get("column"), emit=False)
            enc.setCurrentText("text" if isinstance(v, str) or v is None else v.get("encoding", "text"))

        self._set_attempts(model.get("attempts") or {"source": "none"})

        exp, tun = model.get("expiry") or {}, model.get("tunables") or {}
        self.retention_spin.setValue(int(exp.get("retention_seconds") or 0))
        self.retention_from.setCurrentText(exp.get("retention_from", "created_at"))
        self.lock_spin.setValue(int(exp.get("lock_timeout_seconds") or 0))
        self.window_spin.setValue(int(exp.get("dedup_window_seconds") or 0))
        self.retry_spin.setValue(int(tun.get("retry_threshold", 5)))
        self._fill_fx(model.get("effects"))
        try:
            self.actions_edit.setText(ActionRules.from_dict(model.get("actions")).to_text())
        except ActionRuleError:
            self.actions_edit.setText("")
        self._loading = False
        self._changed()

    def _set_attempts(self, a: dict):
        src = a.get("source", "none")
        self.att_source.blockSignals(True)
        self.att_source.setCurrentText(src)
        self.att_source.blockSignals(False)
        self.att_stack.setCurrentIndex(ATTEMPT_SOURCES.index(src))
        self._select_table(
            self.att_table,
            a.get("table") if src == "table" else None,
            a.get("schema", self._draft.operations.schema),
        )
        self._fill_att_columns()
        join = list((a.get("join") or {}).items()) if src == "table" else []
        for i, (ac, oc) in enumerate(self.att_join):
            pair = join[i] if i < len(join) else (None, None)
            ac.set_value(pair[0], emit=False)
            oc.set_value(pair[1], emit=False)
        self.att_number.set_value(a.get("number"), emit=False)
        out = a.get("outcome", "unknown")
        out = out if isinstance(out, dict) else {"default": out}
        self.att_outcome.set_value(out.get("column"), emit=False)
        self.att_outcome_default.setCurrentText(out.get("default", "unknown"))
        self._pending_map["outcome"] = dict(out.get("map") or {})
        self._pending_guess["outcome"] = self._pending_guess.get("status", False)
        self.outcome_model.set_values([], self._pending_map["outcome"], False)
        if src == "table" and self.att_outcome.value():
            self._sample_outcome()
        for k, row in self.att_times.items():
            row.set_value(a.get(k))
        for k, cb in self.att_cols.items():
            cb.set_value(a.get(k), emit=False)
        where = a.get("where") or []
        self.att_where_label.setText(
            f"Only rows matching the layout's {len(where)} 'where' condition(s) count as attempts (kept)."
            if where
            else ""
        )
        self.att_where_label.setVisible(bool(where))
        self.att_json_column.set_value(a.get("column") if src == "json_array" else None, emit=False)

    def _cols(self) -> list[ColumnInfo]:
        t = self._table_info(self.table_combo)
        return list(t.columns) if t else []

    def _fill_columns(self):
        cols = self._cols()
        self.key_list.set_columns(cols, self.key_list.checked())
        self.scope_list.set_columns(cols, self.scope_list.checked())
        combos = [
            self.kind_combo,
            self.row_id_combo,
            self.status_combo,
            self.att_json_column,
            *[r.column for r in self.time_rows.values()],
            *[c for c, _p in self.value_rows.values()],
            *[c for c, _e in self.payload_rows.values()],
            *[o for _a, o in self.att_join],
        ]
        for cb in combos:
            cb.set_columns(cols)

    def _fill_att_columns(self):
        t = self._table_info(self.att_table)
        cols = list(t.columns) if t else []
        for cb in [
            self.att_number,
            self.att_outcome,
            *self.att_cols.values(),
            *[r.column for r in self.att_times.values()],
            *[a for a, _o in self.att_join],
        ]:
            cb.set_columns(cols)

    def model(self) -> dict:
        """The mapping shown, as a TOML-shaped dict (``self.draft().to_model()``)."""
        return self.draft().to_model()

    def draft(self) -> LayoutDraft:
        """The mapping shown, as a typed :class:`LayoutDraft`: the starting draft with every entry the
        widgets edit replaced by the widgets' values."""
        d = copy.deepcopy(self._draft)
        d.name = self.name_edit.text().strip()
        o = d.operations
        t = _tsplit(self.table_combo.currentData())
        o.table, o.schema = (t[1], t[0]) if t else ("", None)
        o.key = self.key_list.checked()
        o.scope = self.scope_list.checked()
        # key_required names key columns (pg-boss: the throttle slot); unchosen ones go. A key fallback
        # stays for composite keys too (a record whose key is incomplete is keyed "#<row id>").
        if o.extra.get("key_required"):
            o.extra["key_required"] = [c for c in o.extra["key_required"] if c in o.key]
        kind, old_kind = self.kind_combo.value(), o.kind
        if kind is None:
            if not (old_kind is not None and old_kind.literal is not None):
                o.kind = None  # a literal kind (no column) is kept
        elif old_kind is None or old_kind.column != kind or old_kind.literal is not None:
            o.kind = ValueDraft(kind)  # the same column keeps its JSON path
        o.row_id = self.row_id_combo.value()

        default = self.status_default.currentText()
        col = self.status_combo.value()
        if col:
            o.status = StatusDraft(column=col, map=self.status_model.mapping(default), default=default)
        elif o.status.rules:
            o.status.default = default
        else:
            o.status = StatusDraft(default=default, literal=default)

        o.times = {n: TimeDraft.from_model(v) for n, v in ((n, r.value()) for n, r in self.time_rows.items()) if v}
        fields: dict[str, ValueDraft] = {}
        for name, (cb, path) in self.value_rows.items():
            c = cb.value()
            if not c:
                continue
            old = o.fields.get(name)
            v = copy.copy(old) if old is not None and old.column == c and old.literal is None else ValueDraft(c)
            v.json_path = path.text().strip() or None
            fields[name] = v
        for name, (cb, enc) in self.payload_rows.items():
            c = cb.value()
            if c:
                fields[name] = ValueDraft(c, encoding=enc.currentText(), payload=True)
        o.fields = fields

        d.attempts = AttemptsDraft.from_model(self._attempts_model(d.attempts.to_model()))
        retention = self.retention_spin.value() or None
        d.expiry = ExpiryDraft(
            retention_seconds=retention,
            retention_from=self.retention_from.currentText() if retention else "created_at",
            lock_timeout_seconds=self.lock_spin.value() or None,
            dedup_window_seconds=self.window_spin.value() or None,
        )
        d.retry_threshold = self.retry_spin.value()
        fx = self._fx_model()
        if fx is None:
            d.extra.pop("effects", None)
        else:
            d.extra["effects"] = fx
        try:  # a rule that does not parse keeps the section as it was (the page says why)
            rules = ActionRules.from_text(self.actions_edit.text(), "action rules")
            if rules:
                d.extra["actions"] = rules.to_dict()
            else:
                d.extra.pop("actions", None)
        except ActionRuleError:
            pass
        return d

    def _attempts_model(self, old: dict) -> dict:
        src = self.att_source.currentText()
        if src in ("none", "counter"):
            return {"source": src}
        if src == "json_array":
            d = dict(old) if old.get("source") == "json_array" else {"source": src}
            d["column"] = self.att_json_column.value()
            return d
        t = _tsplit(self.att_table.currentData())
        same = old.get("source") == "table" and t and old.get("table") == t[1]
        d = dict(old) if same else {"source": "table"}
        d["table"], d["schema"] = (t[1], t[0]) if t else (None, None)
        d["join"] = {a.value(): o.value() for a, o in self.att_join if a.value() and o.value()}
        d["number"] = self.att_number.value()
        default = self.att_outcome_default.currentText()
        oc = self.att_outcome.value()
        old_out = d.get("outcome")
        if oc:
            d["outcome"] = {"column": oc, "map": self.outcome_model.mapping(default), "default": default}
        elif isinstance(old_out, dict) and old_out.get("rules"):
            d["outcome"] = dict(old_out, default=default)
        else:
            d["outcome"] = default
        for k, row in self.att_times.items():
            d[k] = row.value()
        for k, cb in self.att_cols.items():
            d[k] = cb.value()
        return d

    def layout_text(self) -> str:
        """The TOML of the mapping shown. Raises :class:`LayoutError` when it is not a valid layout."""
        return layout_text(self.model())

    # ------------------------------------------------------------------------------- reactions

    def _changed(self, *_):
        if self._loading:
            return
        self._debounce.start()

    def _on_table(self, _i):
        if self._loading:
            return
        # Another table: the previous column choices mean nothing there. Keep name, expiry, tunables.
        t = _tsplit(self.table_combo.currentData())
        base = LayoutDraft.from_model(
            blank_model(self.name_edit.text().strip() or "custom", t[1] if t else "", t[0] if t else None)
        )
        base.expiry, base.retry_threshold = copy.deepcopy(self._draft.expiry), self._draft.retry_threshold
        self._loading = True
        self.key_list.set_columns([], [])
        self.scope_list.set_columns([], [])
        self._loading = False
        self.set_model(base, guess=True)

    def _on_att_table(self, _i):
        if self._loading:
            return
        self._fill_att_columns()
        self._changed()

    def _on_att_source(self, _i):
        self.att_stack.setCurrentIndex(self.att_source.currentIndex())
        self._changed()

    def _on_status_column(self, _i):
        if self._loading:
            return
        self.rules_label.hide()
        self.status_combo.setItemText(0, NONE)
        # A new column: suggest statuses for its values; a person confirms or changes each.
        self._pending_map["status"] = {}
        self._pending_guess["status"] = True
        self.status_model.set_values([], {}, False)
        self._bump("status")
        if self.status_combo.value():
            self._sample_status()
        self._changed()

    def _on_outcome_column(self, _i):
        if self._loading:
            return
        self._pending_map["outcome"] = {}
        self._pending_guess["outcome"] = True
        self.outcome_model.set_values([], {}, False)
        self._bump("outcome")
        if self.att_outcome.value():
            self._sample_outcome()
        self._changed()

    def _sample_status(self):
        t = self._table_info(self.table_combo)
        col, eng = self.status_combo.value(), self.engine
        if t is None or col is None:
            return
        self._submit("status", lambda: (col, sample_distinct(eng, t.name, col, t.schema)))

    def _sample_outcome(self):
        t = self._table_info(self.att_table)
        col, eng = self.att_outcome.value(), self.engine
        if t is None or col is None:
            return
        self._submit("outcome", lambda: (col, sample_distinct(eng, t.name, col, t.schema)))

    def _on_time_column(self, name: str):
        if self._loading:
            return
        row = self.time_rows[name]
        row.sample.setText("")
        self._bump(f"time:{name}")
        if row.column.value():
            self._sample_time(name, guess=True)
        self._changed()

    def _on_time_encoding(self, name: str):
        if self._loading:
            return
        self._decode_sample(name)
        self._changed()

    def _sample_time(self, name: str, guess: bool):
        t = self._table_info(self.table_combo)
        row = self.time_rows[name]
        col, eng = row.column.value(), self.engine
        if t is None or col is None or t.column(col) is None:
            return
        info = t.column(col)
        self._submit(
            f"time:{name}", lambda: (col, info, guess, sample_values(eng, t.name, info.name, t.schema, limit=20))
        )

    def _time_samples(self, name: str, col: str, info: ColumnInfo, guess: bool, samples: list):
        row = self.time_rows[name]
        if row.column.value() != col:
            return
        row._samples = samples
        if guess:
            enc = guess_time_encoding(info, samples)
            if enc and enc != row.encoding.currentText():
                row.encoding.setCurrentText(enc)  # -> _on_time_encoding -> refresh
        self._decode_sample(name)

    def _decode_sample(self, name: str):
        row = self.time_rows[name]
        samples = getattr(row, "_samples", None)
        if not samples or not row.column.value():
            row.sample.setText("")
            return
        v = row.value()
        tc = TimeColumn(v["column"], v["encoding"], v.get("zone", "UTC"))
        try:
            dt = decode_time(samples[0], tc)
        except Exception:  # noqa: BLE001 - a zone being typed, an odd value: show "unreadable"
            dt = None
        raw = str(self.masker.mask_value(samples[0], v["column"]))
        raw = raw if len(raw) <= 24 else raw[:23] + "…"
        shown = dt.strftime("%Y-%m-%d %H:%M:%SZ") if dt else f"unreadable as {tc.encoding}"
        row.sample.setText(shown)
        row.sample.setToolTip(f"stored {raw} → read as {shown}")

    # --------------------------------------------------------------------------------- preview

    def _refresh(self):
        """Validate the mapping (on the GUI thread: parsing only) and preview it off the GUI thread."""
        if self._closing or not self.tables:
            return
        t = _tsplit(self.table_combo.currentData())
        if t is not None and self._table_info(self.table_combo) is None:
            where = f"{t[0]}.{t[1]}" if t[0] else t[1]
            self._last_text = None
            self.save_button.setEnabled(False)
            self._bump("preview")
            self.preview_model.set_rows([])
            self.findings_label.setText("—")
            self._show_error(
                f"the operations table {where} is not in this database: choose one of its "
                f"tables, or start from another preset"
            )
            self.previewFailed.emit(self.last_error)
            return
        try:
            text_ = self.layout_text()
            from idemview.layouts.layout import parse_layout

            lay = parse_layout(text_, origin="<editor>")
        except LayoutError as e:
            self._last_text = None
            self.save_button.setEnabled(False)
            self._bump("preview")  # a preview still running is for an older mapping
            self.preview_model.set_rows([])
            self.findings_label.setText("—")
            self._show_error(str(e))
            self.previewFailed.emit(self.last_error or str(e))
            return
        self._last_text = text_
        self.save_button.setEnabled(True)
        now = self.now or datetime.now(UTC)
        eng = self.engine
        self.preview_title.setText(f"Preview: first {PREVIEW_ROWS} normalized operations (masked) — reading…")
        self._submit("preview", lambda: _preview_job(eng, lay, now))

    def _preview_ready(self, r: PreviewResult):
        self._show_error(None)
        self.preview_model.set_rows(r.rows)
        self.preview_view.resizeColumnsToContents()
        h = self.preview_view.horizontalHeader()
        for c in range(self.preview_model.columnCount()):
            h.resizeSection(c, min(h.sectionSize(c), 260))
        n = len(r.rows)
        self.preview_title.setText(
            f"Preview: {'first ' if r.more else ''}{n} normalized operation{'s' if n != 1 else ''} (masked)"
        )
        self.last_counts = {k.value: v for k, v in r.counts.items()}
        self.findings_label.setText(self._findings_html(r))
        self.previewUpdated.emit(n)

    @staticmethod
    def _findings_html(r: PreviewResult) -> str:
        """Counts per kind as a 4-column grid (kind names never wrap mid-entry); kinds the mapping
        cannot detect are greyed with the reason in a line below."""
        from html import escape

        cells = []
        for k in FindingKind:
            if k in r.unsupported:
                cells.append(
                    f'<td style="color:#999">{k.value}</td><td style="color:#999">n/a</td><td width="18"></td>'
                )
            else:
                n = r.counts.get(k, 0)
                colour = (
                    "#b00020" if n and k in (FindingKind.DUPLICATE_EFFECT, FindingKind.REPLAY_AFTER_EXPIRY) else "#000"
                )
                cells.append(
                    f'<td>{k.value}</td><td align="right" style="color:{colour}"><b>{n}</b></td><td width="18"></td>'
                )
        rows = "".join("<tr>" + "".join(cells[i : i + 4]) + "</tr>" for i in range(0, len(cells), 4))
        html = f'<table cellspacing="0" cellpadding="2" style="margin:0">{rows}</table>'
        if r.unsupported:
            html += (
                '<div style="color:#666">n/a: '
                + escape("; ".join(f"{k.value}: {why}" for k, why in r.unsupported.items()))
                + "</div>"
            )
        return html

    # ------------------------------------------------------------------------------------ saving

    def save(self, path: str | Path | None = None) -> Path | None:
        """Write the mapping (validated) to ``path``, else the editor's target (see the class); asks for
        a file when there is none. Emits ``saved(path)`` and returns the path; on an invalid mapping or
        a write error shows the message and returns ``None``."""
        target = Path(path) if path else None
        try:
            if target is None:
                target = self._target()
        except ValueError as e:
            self._show_error(str(e))
            return None
        if target is None:
            name, _f = QFileDialog.getSaveFileName(
                self, "Save layout", f"{self.name_edit.text() or 'layout'}.toml", "Layouts (*.toml)"
            )
            if not name:
                return None
            target = Path(name)
        try:
            out = save_layout(self.model(), path=target)
        except LayoutError as e:
            self._show_error(str(e))
            return None
        except OSError as e:
            self._show_error(f"cannot write {target}: {e.strerror or e}")
            return None
        self.target_label.setText(f"Saved to {out}")
        self.saved.emit(str(out))
        return out

    # ---------------------------------------------------------------------------------- closing

    def shutdown(self):
        """Stop taking results and cancel running database work (called on close). Never waits: a
        cancelled statement is interrupted in the database and its late result is dropped."""
        if self._closing:
            return
        self._closing = True
        self._debounce.stop()
        self._runner.cancel()

    def done(self, r: int):
        self.shutdown()
        super().done(r)

    def closeEvent(self, e):
        self.shutdown()
        super().closeEvent(e)
