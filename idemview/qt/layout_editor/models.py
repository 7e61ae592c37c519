"""Qt item models of the layout editor: the status/outcome mapping table and the live preview."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    Qt,
)
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox,
    QStyledItemDelegate,
)

from idemview.domain.model import Operation, Outcome, Payload, Status
from idemview.ledger.builder import (
    guess_status,
)
from idemview.masking.masker import Masker
from idemview.qt.layout_editor.common import (
    OUTCOMES,
    UTC,
)

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
        self._rows: list[list[Any]] = []  # [raw text, count | None, normalized, shown text]

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
        if (
            not index.isValid()
            or index.column() != 2
            or role != Qt.EditRole
            or value not in self.targets
            or not (0 <= index.row() < len(self._rows))
        ):
            return False
        if self._rows[index.row()][2] != value:
            self._rows[index.row()][2] = value
            self.dataChanged.emit(index, index, [Qt.DisplayRole, Qt.EditRole])
        return True

    def set_values(
        self, samples: list[tuple[Any, int]], mapping: dict[str, str], guess: bool, default: str = "unknown"
    ) -> None:
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


PREVIEW_COLUMNS = (
    "scope",
    "key",
    "kind",
    "status",
    "raw_status",
    "created_at",
    "updated_at",
    "completed_at",
    "locked_at",
    "lock_expires_at",
    "expires_at",
    "last_attempt_at",
    "attempt_count",
    "fingerprint",
    "intent_ref",
    "effect_ref",
    "error",
)


def _cell(op: Operation, name: str, masker: Masker) -> str:
    v = getattr(op, name)
    if v is None:
        return "—"  # missing stays missing (DESIGN §3)
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
                return {
                    "failed": QColor("#b00020"),
                    "in_progress": QColor("#1f5fa8"),
                    "unknown": QColor("#8a6d00"),
                }.get(self._status[index.row()])
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
