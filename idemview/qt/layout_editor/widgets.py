"""Small widgets and layout helpers of the layout editor: column pickers, check lists, time rows."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import (
    Qt,
    Signal,
)
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QGridLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QWidget,
)

from idemview.layouts.layout import (
    TIME_ENCODINGS,
)
from idemview.ledger.builder import (
    ColumnInfo,
)
from idemview.qt.layout_editor.common import (
    _ZONES,
    NONE,
)

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
            i = next(
                (
                    j
                    for j in range(self.count())
                    if isinstance(self.itemData(j), str) and self.itemData(j).lower() == low
                ),
                -1,
            )
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
