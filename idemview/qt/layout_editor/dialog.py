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
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)
from sqlalchemy.engine import Engine

from idemview.config import new_masker
from idemview.domain.model import FindingKind
from idemview.layouts.draft import LayoutDraft
from idemview.layouts.layout import (
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
    guess_time_encoding,
    layout_path_for,
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
    PREVIEW_ROWS,
    UTC,
)
from idemview.qt.layout_editor.jobs import (
    PreviewResult,
    _job,
    _preview_job,
    _Refused,
)
from idemview.qt.layout_editor.mapping import EditorMapping
from idemview.qt.layout_editor.models import (
    PreviewModel,
)
from idemview.qt.layout_editor.pages import EditorPages
from idemview.qt.layout_editor.widgets import (
    _scrolled,
    _tkey,
    _tsplit,
)
from idemview.qt.workers import JobError, Runner
from idemview.services.cancel import watch_engine

# ------------------------------------------------------------------------------------------ dialog


class LayoutEditor(EditorPages, EditorMapping, QDialog):
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

        split.addWidget(self._preview_pane())
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

    # ------------------------------------------------------------------------------------- wiring

    def _preview_pane(self) -> QWidget:
        """The right side: findings with this mapping, the error shown when it does not work, preview."""
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
        return right

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
