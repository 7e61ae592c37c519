"""The layout editor dialog (issue 5): map an unknown ledger onto the normalized model, in the GUI.

A person starts from a preset or from scratch, picks the operations table and its columns from the
*reflected* schema (never typed SQL), maps the status values sampled from the database (each shown with
its count), chooses time encodings (guessed from the column type and sample values), and watches a live
preview of the first normalized rows and the finding counts. Save writes TOML through
:mod:`idemview.ledger.builder` (validated before it is written) beside the connection.

Every database call (reflection, samples, preview, findings) runs on a :class:`QThreadPool`; results come
back by queued signal and carry a per-topic generation number, so a result for a mapping that has since
changed is dropped (DESIGN §10). Values shown go through :class:`idemview.masking.masker.Masker`.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable
from zoneinfo import available_timezones

from PySide6.QtCore import (
    QAbstractTableModel, QModelIndex, QObject, QRunnable, QThreadPool, Qt, QTimer, Signal,
)
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView, QComboBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QFrame,
    QGridLayout, QGroupBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QListWidget, QListWidgetItem,
    QPushButton, QScrollArea, QSizePolicy, QSpinBox, QSplitter, QStackedWidget, QStyledItemDelegate,
    QTableView, QTabWidget, QVBoxLayout, QWidget,
)
from sqlalchemy.engine import Engine

from idemview.ledger.connect import short_error
from idemview.layouts.layout import (
    ATTEMPT_SOURCES, PAYLOAD_ENCODINGS, PAYLOAD_FIELDS, TIME_ENCODINGS, TIME_FIELDS, VALUE_FIELDS, Layout,
    LayoutError, TimeColumn, load_preset, preset_names,
)
from idemview.ledger.builder import (
    ColumnInfo, TableInfo, blank_model, find_table, guess_status, guess_time_encoding, layout_path_for,
    layout_text, model_from_layout, reflect_schema, sample_distinct, sample_values, save_layout,
)
from idemview.masking.masker import Masker
from idemview.domain.model import FindingKind, Operation, Outcome, Payload, Status
from idemview.ledger.times import decode_time

UTC = timezone.utc
PREVIEW_ROWS = 50
NONE = "(none)"
STATUSES = [s.value for s in Status]
OUTCOMES = [o.value for o in Outcome]
_ZONES = ["UTC"] + sorted(z for z in available_timezones() if z != "UTC" and "/" in z)
_SCRATCH = "(scratch)"


# ------------------------------------------------------------------------------------ background work

class _Relay(QObject):
    """Carries a worker's result back to the GUI thread (queued: it lives on the GUI thread)."""

    done = Signal(str, int, object)    # topic, generation, result
    failed = Signal(str, int, str)     # topic, generation, message


class _Task(QRunnable):
    def __init__(self, relay: _Relay, topic: str, gen: int, fn: Callable[[], Any]):
        super().__init__()
        self.relay, self.topic, self.gen, self.fn = relay, topic, gen, fn

    def run(self):
        try:
            result = self.fn()
        except LayoutError as e:
            msg = str(e)
        except Exception as e:  # noqa: BLE001 - any database error becomes a visible message
            msg = short_error(e)
        else:
            try:
                self.relay.done.emit(self.topic, self.gen, result)
            except RuntimeError:  # the dialog is gone; nobody is waiting for this result
                pass
            return
        try:
            self.relay.failed.emit(self.topic, self.gen, msg)
        except RuntimeError:
            pass


@dataclass
class PreviewResult:
    """What the preview worker computed for one mapping: the first normalized ``rows``, finding
    ``counts`` per kind and the kinds the mapping cannot detect (``unsupported``, kind → reason)."""

    rows: list[Operation]
    counts: dict[FindingKind, int]
    unsupported: dict[FindingKind, str] = field(default_factory=dict)
    more: bool = False


def _preview_job(engine: Engine, layout: Layout, now: datetime) -> PreviewResult:
    # Imported here: the findings engine is only needed on the worker.
    from idemview.findings.engine import FindingEngine
    from idemview.ledger.reader import Ledger
    led = Ledger(engine, layout)
    # Newest first: incidents are usually recent, and that is what a person checks a mapping against.
    page = led.page(limit=PREVIEW_ROWS, now=now, sort="created_at", descending=True)
    fe = FindingEngine(led, now)
    counts = Counter(f.kind for f in fe.run())
    return PreviewResult(page.rows, dict(counts), fe.unsupported(), page.cursor is not None)


# ------------------------------------------------------------------------------------------ models

class StatusMapModel(QAbstractTableModel):
    """The value map of a status (or attempt outcome) column: one row per raw value sampled from the
    database, with its count, and the normalized value chosen for it (column 2, editable).

    Values the layout maps but the sample did not contain are kept (count 0) so nothing is lost on
    save. ``targets`` are the allowed normalized values (statuses or outcomes)."""

    HEADERS = ("value in the database", "rows", "normalized")

    def __init__(self, targets: list[str], masker: Masker, parent=None):
        super().__init__(parent)
        self.targets = targets
        self.masker = masker
        self._rows: list[list[Any]] = []   # [raw text, count | None, normalized, shown text]

    def rowCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else 3

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if orientation == Qt.Horizontal and role == Qt.DisplayRole and 0 <= section < 3:
            return self.HEADERS[section]
        return None

    def flags(self, index):
        if not index.isValid():
            return Qt.NoItemFlags
        f = Qt.ItemIsEnabled | Qt.ItemIsSelectable
        return f | Qt.ItemIsEditable if index.column() == 2 else f

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid() or not (0 <= index.row() < len(self._rows)):
            return None
        raw, count, norm, shown = self._rows[index.row()]
        col = index.column()
        if role in (Qt.DisplayRole, Qt.EditRole):
            if col == 0:
                return shown
            if col == 1:
                return "not in sample" if not count else str(count)
            return norm
        if role == Qt.TextAlignmentRole and col == 1:
            return int(Qt.AlignRight | Qt.AlignVCenter)
        if role == Qt.ToolTipRole and col == 1 and not count:
            return "mapped by the layout, but no row in the sample has this value"
        if role == Qt.ForegroundRole and col == 2 and norm == "unknown":
            return QColor("#8a6d00")
        return None

    def setData(self, index, value, role=Qt.EditRole):
        if (not index.isValid() or index.column() != 2 or role != Qt.EditRole
                or value not in self.targets or not (0 <= index.row() < len(self._rows))):
            return False
        if self._rows[index.row()][2] != value:
            self._rows[index.row()][2] = value
            self.dataChanged.emit(index, index, [Qt.DisplayRole, Qt.EditRole])
        return True

    def set_values(self, samples: list[tuple[Any, int]], mapping: dict[str, str], guess: bool,
                   default: str = "unknown") -> None:
        """Show ``samples`` ([(value, count)], NULL left out: it maps to the default) with the
        normalized value from ``mapping``, else a guess (``guess``) or ``default``; then the mapped
        values that were not sampled."""
        self.beginResetModel()
        rows, seen = [], set()
        for v, n in samples:
            if v is None:
                continue
            raw = str(v)
            if raw in seen:
                continue
            seen.add(raw)
            norm = mapping.get(raw) or (self._guess(v) if guess else default)
            rows.append([raw, n, norm, self._shown(raw)])
        for raw, norm in mapping.items():
            if raw not in seen:
                rows.append([raw, None, norm, self._shown(raw)])
        self._rows = rows
        self.endResetModel()

    def _shown(self, raw: str) -> str:
        out = self.masker.mask_value(raw)
        return "(empty text)" if out == "" else str(out)

    def _guess(self, v: Any) -> str:
        g = guess_status(v)
        if self.targets is OUTCOMES:
            g = {"completed": "succeeded", "new": "unknown"}.get(g, g)
        return g if g in self.targets else "unknown"

    def mapping(self, default: str) -> dict[str, str]:
        """``{raw value: normalized}`` for every row whose choice differs from ``default``."""
        return {raw: norm for raw, _n, norm, _s in self._rows if norm != default}

    def row_of(self, raw: str) -> int:
        """Row number of a raw value, or -1."""
        return next((i for i, r in enumerate(self._rows) if r[0] == raw), -1)


class _ChoiceDelegate(QStyledItemDelegate):
    """A combo box editor for column 2 of a :class:`StatusMapModel`; commits on every change."""

    def createEditor(self, parent, option, index):
        cb = QComboBox(parent)
        cb.addItems(index.model().targets)
        cb.currentIndexChanged.connect(lambda _i, cb=cb: self.commitData.emit(cb))
        return cb

    def setEditorData(self, editor, index):
        v = index.model().data(index, Qt.EditRole)
        i = editor.findText(v)
        if i >= 0 and i != editor.currentIndex():
            editor.blockSignals(True)
            editor.setCurrentIndex(i)
            editor.blockSignals(False)

    def setModelData(self, editor, model, index):
        model.setData(index, editor.currentText(), Qt.EditRole)


PREVIEW_COLUMNS = ("scope", "key", "kind", "status", "raw_status", "created_at", "updated_at",
                   "completed_at", "locked_at", "lock_expires_at", "expires_at", "last_attempt_at",
                   "attempt_count", "fingerprint", "intent_ref", "effect_ref", "error")


def _cell(op: Operation, name: str, masker: Masker) -> str:
    v = getattr(op, name)
    if v is None:
        return "—"   # missing stays missing (DESIGN §3)
    if isinstance(v, datetime):
        return v.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    if isinstance(v, (Status, Outcome)):
        return v.value
    if isinstance(v, Payload):
        if v.encoding == "pickle":
            return f"pickled, not decoded ({v.size} bytes)" if v.size is not None else "pickled, not decoded"
        if isinstance(v.value, bytes):
            return f"{len(v.value)} bytes"
        v = masker.mask_value(v.value, name)
        s = v if isinstance(v, str) else repr(v)
        return s if len(s) <= 120 else s[:119] + "…"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    out = masker.mask_value(v, name)
    return str(out)


class PreviewModel(QAbstractTableModel):
    """The first normalized operations of the current mapping, as masked display text (read-only)."""

    def __init__(self, masker: Masker, parent=None):
        super().__init__(parent)
        self.masker = masker
        self._cells: list[list[str]] = []
        self._status: list[str] = []

    def rowCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(self._cells)

    def columnCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(PREVIEW_COLUMNS)

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if role != Qt.DisplayRole:
            return None
        if orientation == Qt.Horizontal and 0 <= section < len(PREVIEW_COLUMNS):
            return PREVIEW_COLUMNS[section]
        if orientation == Qt.Vertical and 0 <= section < len(self._cells):
            return str(section + 1)
        return None

    def flags(self, index):
        return Qt.ItemIsEnabled | Qt.ItemIsSelectable if index.isValid() else Qt.NoItemFlags

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid() or not (0 <= index.row() < len(self._cells)):
            return None
        if role in (Qt.DisplayRole, Qt.ToolTipRole):
            return self._cells[index.row()][index.column()]
        if role == Qt.ForegroundRole:
            if self._cells[index.row()][index.column()] == "—":
                return QColor("#999999")
            if PREVIEW_COLUMNS[index.column()] == "status":
                return {"failed": QColor("#b00020"), "in_progress": QColor("#1f5fa8"),
                        "unknown": QColor("#8a6d00")}.get(self._status[index.row()])
        return None

    def set_rows(self, rows: list[Operation]) -> None:
        self.beginResetModel()
        self._cells = [[_cell(op, c, self.masker) for c in PREVIEW_COLUMNS] for op in rows]
        self._status = [op.status.value for op in rows]
        self.endResetModel()

    def column_values(self, name: str) -> list[str]:
        """The displayed cells of one preview column (for tests and for copying)."""
        i = PREVIEW_COLUMNS.index(name)
        return [r[i] for r in self._cells]


# ---------------------------------------------------------------------------------------- widgets

class ColumnCombo(QComboBox):
    """A column picker over the reflected columns of one table; ``value()`` is the column name, or
    ``None`` for "(none)". A name that is not in the table (from a preset) is kept, marked, so the
    preview can say what is wrong instead of silently dropping it."""

    def __init__(self, allow_none: bool = True, parent=None):
        super().__init__(parent)
        self.allow_none = allow_none
        self.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        # Small minimum: combos share a narrow pane and grow with it; the popup shows full names + types.
        self.setMinimumContentsLength(8)
        self.set_columns([])

    def set_columns(self, cols: list[ColumnInfo]) -> None:
        keep = self.value()
        self.blockSignals(True)
        self.clear()
        if self.allow_none:
            self.addItem(NONE, None)
        for c in cols:
            self.addItem(f"{c.name}  ({c.type})", c.name)
        self.blockSignals(False)
        self.set_value(keep, emit=False)

    def value(self) -> str | None:
        return self.currentData()

    def set_value(self, name: str | None, emit: bool = True) -> None:
        i = self.findData(name) if name is not None else (0 if self.allow_none else -1)
        if i < 0 and name is not None:
            # case-insensitive match (unquoted DDL folds case), else keep it marked as missing
            low = name.lower()
            i = next((j for j in range(self.count()) if isinstance(self.itemData(j), str)
                      and self.itemData(j).lower() == low), -1)
            if i < 0:
                self.addItem(f"{name}  (not in table)", name)
                i = self.count() - 1
        if not emit:
            self.blockSignals(True)
        self.setCurrentIndex(max(i, 0) if self.count() else -1)
        if not emit:
            self.blockSignals(False)


class CheckList(QListWidget):
    """Checkable column names; ``checked()`` keeps the order in which columns were chosen (a composite
    key's parts are joined in that order)."""

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._order: list[str] = []
        self.itemChanged.connect(self._on_item)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Preferred)
        self.setMaximumHeight(110)

    def set_columns(self, cols: list[ColumnInfo], checked: list[str]) -> None:
        self.blockSignals(True)
        self.clear()
        self._order = list(dict.fromkeys(checked))
        names = {c.name for c in cols}
        # A chosen name the table lacks (from a preset) stays listed, marked, so the preview can name
        # the missing column rather than the mapping silently losing its key.
        items = [(c.name, f"{c.name}  ({c.type})") for c in cols]
        items += [(n, f"{n}  (not in table)") for n in self._order if n not in names]
        for name, label in items:
            it = QListWidgetItem(label)
            it.setData(Qt.UserRole, name)
            it.setFlags(Qt.ItemIsEnabled | Qt.ItemIsUserCheckable | Qt.ItemIsSelectable)
            it.setCheckState(Qt.Checked if name in self._order else Qt.Unchecked)
            self.addItem(it)
        self.blockSignals(False)

    def _on_item(self, it: QListWidgetItem):
        name = it.data(Qt.UserRole)
        if it.checkState() == Qt.Checked and name not in self._order:
            self._order.append(name)
        elif it.checkState() != Qt.Checked and name in self._order:
            self._order.remove(name)
        self.changed.emit()

    def checked(self) -> list[str]:
        return list(self._order)

    def set_checked(self, names: list[str]) -> None:
        """Check exactly ``names`` (in that order), emitting one change per item that flips."""
        for i in range(self.count()):
            it = self.item(i)
            if it.data(Qt.UserRole) not in names and it.checkState() == Qt.Checked:
                it.setCheckState(Qt.Unchecked)
        for n in names:
            for i in range(self.count()):
                it = self.item(i)
                if it.data(Qt.UserRole) == n and it.checkState() != Qt.Checked:
                    it.setCheckState(Qt.Checked)


class TimeRow:
    """The widgets of one time field: column, encoding, zone (for ``naive``), and a decoded sample."""

    def __init__(self, name: str):
        self.name = name
        self.column = ColumnCombo()
        self.encoding = QComboBox()
        self.encoding.addItems(TIME_ENCODINGS)
        self.zone = QComboBox()
        self.zone.setEditable(True)
        self.zone.addItems(_ZONES)
        self.zone.setMinimumContentsLength(6)
        self.zone.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.zone.setToolTip("the IANA zone naive values were written in")
        self.sample = QLabel("")
        self.sample.setStyleSheet("color: #666;")
        # The decoded value can be long: never let it widen the pane (full text in the tooltip).
        self.sample.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.sample.setMinimumWidth(60)
        self._sync_zone()
        self.encoding.currentIndexChanged.connect(self._sync_zone)

    def _sync_zone(self, *_):
        self.zone.setEnabled(self.encoding.currentText() == "naive")

    def value(self) -> dict | None:
        col = self.column.value()
        if not col:
            return None
        d = {"column": col, "encoding": self.encoding.currentText()}
        if d["encoding"] == "naive":
            d["zone"] = self.zone.currentText().strip() or "UTC"
        return d

    def set_value(self, v: Any) -> None:
        if isinstance(v, str):
            v = {"column": v}
        v = v or {}
        self.column.set_value(v.get("column"), emit=False)
        self.encoding.blockSignals(True)
        self.encoding.setCurrentText(v.get("encoding", "datetime"))
        self.encoding.blockSignals(False)
        self.zone.setCurrentText(v.get("zone", "UTC"))
        self._sync_zone()
        self.sample.setText("")


def _tkey(schema: str | None, name: str) -> str:
    # Combo item data is a plain string (schema and name may hold any character but a unit separator).
    return f"{schema or ''}\x1f{name}"


def _tsplit(key: Any) -> tuple[str | None, str] | None:
    if not isinstance(key, str) or "\x1f" not in key:
        return None
    s, n = key.split("\x1f", 1)
    return (s or None, n)


def _grid_row(grid: QGridLayout, r: int, label: str, *widgets: QWidget) -> None:
    grid.addWidget(QLabel(label), r, 0)
    for i, w in enumerate(widgets, 1):
        grid.addWidget(w, r, i)


def _scrolled(w: QWidget) -> QScrollArea:
    sa = QScrollArea()
    sa.setWidgetResizable(True)
    sa.setFrameShape(QFrame.NoFrame)
    sa.setWidget(w)
    return sa


def _spin(maximum: int, suffix: str, special: str | None = None) -> QSpinBox:
    s = QSpinBox()
    s.setRange(0, maximum)
    s.setSuffix(suffix)
    s.setGroupSeparatorShown(True)
    if special:
        s.setSpecialValueText(special)
    return s


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

    def __init__(self, engine: Engine, start: str | Layout | None = None, connection_id: str | None = None,
                 *, save_path: str | Path | None = None, now: datetime | None = None,
                 masker: Masker | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        if now is not None and now.tzinfo is None:
            raise ValueError("now must be timezone-aware")
        self.engine = engine
        self.connection_id = connection_id
        self.save_path = Path(save_path) if save_path else None
        self.now = now
        self.masker = masker or Masker()
        self.tables: list[TableInfo] = []
        self._base: dict = blank_model()
        self._loading = False
        self._closing = False
        self._gens: dict[str, int] = {}
        self._last_text: str | None = None
        self._pending_map: dict[str, dict] = {"status": {}, "outcome": {}}
        self._pending_guess: dict[str, bool] = {"status": False, "outcome": False}
        self.last_counts: dict[str, int] = {}
        self.last_error: str | None = None
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(3)
        self._relay = _Relay(self)
        self._relay.done.connect(self._on_done)
        self._relay.failed.connect(self._on_failed)
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
            "QLabel { color: #8b0000; background: #fdecea; border: 1px solid #f5c2c0; padding: 6px; }")
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
        hint = QLabel("Tables and columns come from the database's reflected schema; a layout never "
                      "contains SQL.")
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
        model.modelReset.connect(lambda v=view, m=model: [
            v.openPersistentEditor(m.index(r, 2)) for r in range(m.rowCount())])
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
        hint = QLabel("The encoding is guessed from the column type and sample values when a column is "
                      "chosen: epoch seconds ≈ 1e9, milliseconds ≈ 1e12, ISO-8601 text. Check the value "
                      "read in the last column.")
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
        self.att_source.setToolTip("table: one row per attempt; json_array: an array column; "
                                   "counter: only fields.attempt_count; none")
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
        lab = QLabel("Each element is one ended attempt, read as {at, attempt, error} "
                     "(Oban/River errors).")
        lab.setWordWrap(True)
        jf.addRow(lab)
        self.att_stack.addWidget(jp)
        # counter / none pages
        for text_ in ("The attempt count is the attempt_count field (Fields tab); no attempt is listed.",
                      "No attempts: only operation records are read."):
            lab = QLabel(text_)
            lab.setWordWrap(True)
            lab.setAlignment(Qt.AlignTop | Qt.AlignLeft)
            self.att_stack.addWidget(lab)
        v.addWidget(self.att_stack, 1)
        return w

    def _expiry_page(self) -> QWidget:
        w = QWidget()
        f = QFormLayout(w)
        self.retention_spin = _spin(10 ** 9, " s", "none")
        self.retention_spin.setToolTip("dedup window: a key expires this long after the time below")
        f.addRow("Retention", self.retention_spin)
        self.retention_from = QComboBox()
        self.retention_from.addItems(TIME_FIELDS)
        f.addRow("counted from", self.retention_from)
        self.lock_spin = _spin(10 ** 8, " s", "none")
        self.lock_spin.setToolTip("an in-progress lock is stale after locked_at + this")
        f.addRow("Lock timeout", self.lock_spin)
        self.window_spin = _spin(10 ** 9, " s", "none")
        self.window_spin.setToolTip("for duplicate_intent when the ledger has no retention")
        f.addRow("Dedup window", self.window_spin)
        self.retry_spin = QSpinBox()
        self.retry_spin.setRange(1, 10 ** 6)
        self.retry_spin.setValue(5)
        f.addRow("Retry storm above", self.retry_spin)
        return w

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
        for w in (self.kind_combo, self.row_id_combo, self.status_default, self.att_number,
                  self.att_outcome_default, self.att_json_column, self.retention_from, *self.att_cols.values(),
                  *[c for pair in self.att_join for c in pair]):
            w.currentIndexChanged.connect(ch)
        for w in (self.retention_spin, self.lock_spin, self.window_spin, self.retry_spin):
            w.valueChanged.connect(ch)
        self.name_edit.textChanged.connect(ch)
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
            self._pool.start(_Task(self._relay, topic, gen, fn))
        return gen

    def _current(self, topic: str, gen: int) -> bool:
        return not self._closing and self._gens.get(topic) == gen

    def _on_done(self, topic: str, gen: int, result: Any):
        if not self._current(topic, gen):
            return   # a stale answer: the mapping has changed since it was asked
        if topic == "schema":
            self._schema_ready(*result)
        elif topic == "status":
            col, samples = result
            self.status_model.set_values(samples, self._pending_map.get("status", {}),
                                         guess=self._pending_guess.get("status", False),
                                         default=self.status_default.currentText())
            self._changed()
        elif topic == "outcome":
            col, samples = result
            self.outcome_model.set_values(samples, self._pending_map.get("outcome", {}),
                                          guess=self._pending_guess.get("outcome", False),
                                          default=self.att_outcome_default.currentText())
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
        self.last_error = self.masker.mask_text(message) if message else None
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

    def set_model(self, model: dict, guess: bool = False) -> None:
        """Show ``model`` (a TOML-shaped dict, see :mod:`idemview.ledger.builder`) in the widgets.

        Entries the widgets do not edit (status rules, JSON paths of the attempts, ``where``, detect
        hints) are kept and saved as they were. ``guess``: suggest statuses for sampled values that the
        model does not map (used when starting from scratch)."""
        self._loading = True
        self._base = copy.deepcopy(model)
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
                "They are kept as they are; choose a status column to replace them with a value map.")
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
        self._loading = False
        self._changed()

    def _set_attempts(self, a: dict):
        src = a.get("source", "none")
        self.att_source.blockSignals(True)
        self.att_source.setCurrentText(src)
        self.att_source.blockSignals(False)
        self.att_stack.setCurrentIndex(ATTEMPT_SOURCES.index(src))
        self._select_table(self.att_table, a.get("table") if src == "table" else None,
                           a.get("schema", self._base.get("operations", {}).get("schema")))
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
            if where else "")
        self.att_where_label.setVisible(bool(where))
        self.att_json_column.set_value(a.get("column") if src == "json_array" else None, emit=False)

    def _cols(self) -> list[ColumnInfo]:
        t = self._table_info(self.table_combo)
        return list(t.columns) if t else []

    def _fill_columns(self):
        cols = self._cols()
        self.key_list.set_columns(cols, self.key_list.checked())
        self.scope_list.set_columns(cols, self.scope_list.checked())
        combos = [self.kind_combo, self.row_id_combo, self.status_combo, self.att_json_column,
                  *[r.column for r in self.time_rows.values()],
                  *[c for c, _p in self.value_rows.values()], *[c for c, _e in self.payload_rows.values()],
                  *[o for _a, o in self.att_join]]
        for cb in combos:
            cb.set_columns(cols)

    def _fill_att_columns(self):
        t = self._table_info(self.att_table)
        cols = list(t.columns) if t else []
        for cb in [self.att_number, self.att_outcome, *self.att_cols.values(),
                   *[r.column for r in self.att_times.values()], *[a for a, _o in self.att_join]]:
            cb.set_columns(cols)

    def model(self) -> dict:
        """The mapping shown, as a TOML-shaped dict (see :mod:`idemview.ledger.builder`): the starting
        model with every entry the widgets edit replaced by the widgets' values."""
        m = copy.deepcopy(self._base)
        meta = m.setdefault("layout", {})
        meta["name"] = self.name_edit.text().strip()
        ops = m.setdefault("operations", {})
        t = _tsplit(self.table_combo.currentData())
        ops["table"], ops["schema"] = (t[1], t[0]) if t else ("", None)
        ops["key"] = self.key_list.checked()
        ops["scope"] = self.scope_list.checked()
        # key_required names key columns (pg-boss: the throttle slot); unchosen ones go
        ops["key_required"] = [c for c in ops.get("key_required") or [] if c in ops["key"]]
        kind = self.kind_combo.value()
        old_kind = ops.get("kind")
        if kind is None:
            if not (isinstance(old_kind, dict) and "value" in old_kind):
                ops.pop("kind", None)   # a literal kind (no column) is kept
        elif isinstance(old_kind, dict) and old_kind.get("column") == kind:
            pass   # keeps its JSON path
        else:
            ops["kind"] = kind
        ops["row_id"] = self.row_id_combo.value()

        old_st = ops.get("status")
        default = self.status_default.currentText()
        col = self.status_combo.value()
        if col:
            ops["status"] = {"column": col, "map": self.status_model.mapping(default), "default": default}
        elif isinstance(old_st, dict) and old_st.get("rules"):
            ops["status"] = dict(old_st, default=default)
        else:
            ops["status"] = default

        ops["times"] = {k: v for k, v in ((n, r.value()) for n, r in self.time_rows.items()) if v}
        old_f = ops.get("fields") or {}
        fields: dict[str, Any] = {}
        for name, (cb, path) in self.value_rows.items():
            c = cb.value()
            if not c:
                continue
            old = old_f.get(name)
            d = dict(old) if isinstance(old, dict) and old.get("column") == c else {"column": c}
            d["json_path"] = path.text().strip() or None
            fields[name] = d if (d.get("json_path") or d.get("encoding")) else c
        for name, (cb, enc) in self.payload_rows.items():
            c = cb.value()
            if c:
                fields[name] = {"column": c, "encoding": enc.currentText()}
        ops["fields"] = fields

        m["attempts"] = self._attempts_model(m.get("attempts") or {})
        exp = m.setdefault("expiry", {})
        exp["retention_seconds"] = self.retention_spin.value() or None
        exp["retention_from"] = self.retention_from.currentText() if exp["retention_seconds"] else None
        exp["lock_timeout_seconds"] = self.lock_spin.value() or None
        exp["dedup_window_seconds"] = self.window_spin.value() or None
        m.setdefault("tunables", {})["retry_threshold"] = self.retry_spin.value()
        return m

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
        keep = {k: self._base[k] for k in ("expiry", "tunables") if k in self._base}
        t = _tsplit(self.table_combo.currentData())
        base = blank_model(self.name_edit.text().strip() or "custom", t[1] if t else "", t[0] if t else None)
        base.update(copy.deepcopy(keep))
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
        self._submit(f"time:{name}", lambda: (col, info, guess, sample_values(eng, t.name, info.name,
                                                                              t.schema, limit=20)))

    def _time_samples(self, name: str, col: str, info: ColumnInfo, guess: bool, samples: list):
        row = self.time_rows[name]
        if row.column.value() != col:
            return
        row._samples = samples
        if guess:
            enc = guess_time_encoding(info, samples)
            if enc and enc != row.encoding.currentText():
                row.encoding.setCurrentText(enc)   # -> _on_time_encoding -> refresh
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
            self._show_error(f"the operations table {where} is not in this database: choose one of its "
                             f"tables, or start from another preset")
            self.previewFailed.emit(self.last_error)
            return
        try:
            text_ = self.layout_text()
            from idemview.layouts.layout import parse_layout
            lay = parse_layout(text_, origin="<editor>")
        except LayoutError as e:
            self._last_text = None
            self.save_button.setEnabled(False)
            self._bump("preview")   # a preview still running is for an older mapping
            self.preview_model.set_rows([])
            self.findings_label.setText("—")
            self._show_error(str(e))
            self.previewFailed.emit(self.last_error or str(e))
            return
        self._last_text = text_
        self.save_button.setEnabled(True)
        now = self.now or datetime.now(UTC)
        eng = self.engine
        self.preview_title.setText(f"Preview: first {PREVIEW_ROWS} normalized operations (masked) — "
                                   "reading…")
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
            f"Preview: {'first ' if r.more else ''}{n} normalized operation{'s' if n != 1 else ''} (masked)")
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
                cells.append(f'<td style="color:#999">{k.value}</td><td style="color:#999">n/a</td><td width="18"></td>')
            else:
                n = r.counts.get(k, 0)
                colour = "#b00020" if n and k in (FindingKind.DUPLICATE_EFFECT,
                                                  FindingKind.REPLAY_AFTER_EXPIRY) else "#000"
                cells.append(f'<td>{k.value}</td><td align="right" style="color:{colour}"><b>{n}</b></td><td width="18"></td>')
        rows = "".join("<tr>" + "".join(cells[i:i + 4]) + "</tr>" for i in range(0, len(cells), 4))
        html = f'<table cellspacing="0" cellpadding="2" style="margin:0">{rows}</table>'
        if r.unsupported:
            html += ('<div style="color:#666">n/a: ' + escape("; ".join(
                f"{k.value}: {why}" for k, why in r.unsupported.items())) + "</div>")
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
            name, _f = QFileDialog.getSaveFileName(self, "Save layout", f"{self.name_edit.text() or 'layout'}.toml",
                                                   "Layouts (*.toml)")
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
        """Stop taking results and wait for running database work (called on close)."""
        if self._closing:
            return
        self._closing = True
        self._debounce.stop()
        self._pool.clear()
        self._pool.waitForDone(30_000)

    def done(self, r: int):
        self.shutdown()
        super().done(r)

    def closeEvent(self, e):
        self.shutdown()
        super().closeEvent(e)
