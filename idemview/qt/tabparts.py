"""Widgets of a ledger tab that hold no state of their own: the findings badges of the grid (painted
chips, "scanning…" while an operation's state is pending) and the error banner across the top."""

from __future__ import annotations

from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QStyle, QStyledItemDelegate, QToolButton

from idemview.domain.model import Finding
from idemview.qt import theme
from idemview.qt.models import FindingsRole, FindingStateRole


class BadgeDelegate(QStyledItemDelegate):
    """Paints findings as coloured pills with a severity glyph and a short word (never colour only);
    "scanning…" while the operation's finding state is pending. The most severe kind always shows as a
    chip (elided when the cell is narrow), never as a bare "+1" (issue 20 §10)."""

    PAD, GAP = 12, 4

    @classmethod
    def chips(cls, fs: list[Finding], fm: QFontMetrics, left: int, right: int) -> tuple[list[tuple], int]:
        """([(label, x, width, severity)], kinds not shown) for the cell spanning ``left``..``right`` px."""
        kinds: list[Finding] = []
        for f in fs:
            if all(g.kind != f.kind for g in kinds):
                kinds.append(f)
        out: list[tuple] = []
        x = left + 3
        for i, f in enumerate(kinds):
            label = f"{theme.SEVERITY_GLYPHS[f.severity]} {theme.KIND_SHORT[f.kind]}"
            w = fm.horizontalAdvance(label) + cls.PAD
            rest = len(kinds) - i - 1
            more_w = fm.horizontalAdvance(f" +{rest}") + 2 if rest else 0
            if x + w + more_w > right - 2:
                if i == 0:  # the first (most severe) always shows, elided to the room left
                    room = max(
                        right - 2 - x - more_w - cls.PAD, fm.horizontalAdvance(theme.SEVERITY_GLYPHS[f.severity])
                    )
                    label = fm.elidedText(label, Qt.TextElideMode.ElideRight, room)
                    out.append((label, x, fm.horizontalAdvance(label) + cls.PAD, f.severity))
                    return out, rest
                return out, len(kinds) - i
            out.append((label, x, w, f.severity))
            x += w + cls.GAP
        return out, 0

    def sizeHint(self, option, index):  # noqa: N802 - Qt override
        """Wide enough for every chip: resizeColumnsToContents gives the column that width."""
        size = super().sizeHint(option, index)
        fs: list[Finding] = index.data(FindingsRole) or []
        fm = QFontMetrics(option.font)
        chips, _more = self.chips(fs, fm, 0, 10**6)
        width = chips[-1][1] + chips[-1][2] + 6 if chips else fm.horizontalAdvance("scanning…") + 8
        size.setWidth(max(size.width(), width))
        return size

    def paint(self, painter: QPainter, option, index):
        fs: list[Finding] = index.data(FindingsRole) or []
        if option.state & QStyle.StateFlag.State_Selected:
            painter.fillRect(option.rect, option.palette.highlight())
        if not fs:
            st = index.data(FindingStateRole)
            if st is not None and st.state.value == "pending":  # never an empty cell that reads as "none"
                painter.save()
                painter.setPen(option.palette.color(QPalette.ColorRole.PlaceholderText))
                painter.drawText(option.rect.adjusted(4, 0, -2, 0), Qt.AlignmentFlag.AlignVCenter, "scanning…")
                painter.restore()
            return
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        fm = QFontMetrics(option.font)
        chips, more = self.chips(fs, fm, option.rect.left(), option.rect.right())
        for label, x, w, sev in chips:
            r = QRectF(x, option.rect.top() + 3, w, option.rect.height() - 6)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(theme.colour(theme.SEVERITY_COLOURS, sev))
            painter.drawRoundedRect(r, r.height() / 2, r.height() / 2)
            painter.setPen(QColor("#000000") if theme.is_dark() else QColor("#ffffff"))
            painter.drawText(r, Qt.AlignmentFlag.AlignCenter, label)
        if more:
            x = (chips[-1][1] + chips[-1][2] + 2) if chips else option.rect.left() + 3
            painter.setPen(option.palette.color(QPalette.ColorRole.Text))
            painter.drawText(
                QRect(int(x), option.rect.top(), 40, option.rect.height()), Qt.AlignmentFlag.AlignVCenter, f"+{more}"
            )
        painter.restore()


class Banner(QFrame):
    """An error message across the top of a tab; Reconnect appears when the connection was lost."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("banner")
        h = QHBoxLayout(self)
        h.setContentsMargins(8, 4, 8, 4)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.reconnect = QPushButton("Reconnect")
        self.dismiss = QToolButton(text="✕")
        self.dismiss.setToolTip("Hide this message")
        self.dismiss.clicked.connect(self.hide)
        h.addWidget(self.label, 1)
        h.addWidget(self.reconnect)
        h.addWidget(self.dismiss)
        self.hide()

    def show_error(self, text: str, reconnect: bool):
        bg = theme.colour(theme.SEVERITY_COLOURS, theme.Severity.CRITICAL).darker(115).name()
        self.setStyleSheet(f"#banner {{ background: {bg}; border-radius: 4px; }} #banner QLabel {{ color: white; }}")
        self.label.setText("⚠ " + text)
        self.reconnect.setVisible(reconnect)
        self.show()
