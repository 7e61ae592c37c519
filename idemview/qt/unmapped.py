"""A small notice for raw status / outcome values the ledger's layout does not map (DESIGN §9).

Hidden when every value is mapped. Its "only these" toggle asks the tab to filter the grid to records
with an unmapped status (:attr:`idemview.domain.filters.Filter.unmapped_status`). Values are masked
before they are shown.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget


class UnmappedNotice(QWidget):
    """``show_counts({"status": {RAW: N}, "outcome": {RAW: N}}, masker)``; emits ``toggled(bool)``
    when the user asks for (or leaves) the "unmapped status" filter."""

    toggled = Signal(bool)

    def __init__(self, parent=None):
        super().__init__(parent)
        h = QHBoxLayout(self)
        h.setContentsMargins(0, 0, 0, 0)
        h.setSpacing(4)
        self.label = QLabel()
        self.label.setObjectName("unmappedNotice")
        self.button = QPushButton("Only unmapped")
        self.button.setCheckable(True)
        self.button.setToolTip("Show only records whose raw status the layout does not map")
        self.button.toggled.connect(self.toggled)
        h.addWidget(self.label)
        h.addWidget(self.button)
        self.hide()

    def show_counts(self, counts: dict, masker) -> None:
        st, oc = counts.get("status") or {}, counts.get("outcome") or {}
        if not st and not oc:
            self.hide()
            return
        parts = []
        for what, vals in (("status", st), ("outcome", oc)):
            if vals:
                top = sorted(vals.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
                parts.append(
                    f"{what} "
                    + ", ".join(f"{masker.free_text(r)} ({n:,})" for r, n in top)
                    + (" …" if len(vals) > 5 else "")
                )
        self.label.setText("⚠ Unmapped " + "; ".join(parts))
        self.label.setToolTip(
            "Raw values this layout does not map are shown as the layout's default "
            "(usually unknown). Map them in the connection's settings (status_map)."
        )
        self.button.setVisible(bool(st))
        self.show()
