"""Labels that can never widen the window: long text is elided to the space given, whole in the tooltip.

A plain ``QLabel`` without word wrap asks its layout for the width of its whole text, so a long status
("working: count, page, findings:…") or a long detection reason pushed the main window past the screen
edge (issue #13, observation 1). An :class:`ElidedLabel` asks for almost nothing and paints what fits.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QLabel, QSizePolicy, QStyleOption


class ElidedLabel(QLabel):
    """A one-line plain-text label whose text is elided (``…``) to its width; the whole text is its
    tooltip when it does not fit. Its minimum width is ``min_chars`` average characters, so no text
    can make its layout (and the window) wider."""

    def __init__(self, text: str = "", parent=None, *, mode=Qt.TextElideMode.ElideRight, min_chars: int = 8):
        super().__init__(parent)
        self._full = ""
        self._mode = mode
        self._min_chars = min_chars
        self._own_tip = False
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt naming
        self._full = text or ""
        super().setText(self._full)
        self._sync_tip()
        self.update()

    def full_text(self) -> str:
        return self._full

    def shown_text(self) -> str:
        """The text as painted at the current width (elided when it does not fit)."""
        return self.fontMetrics().elidedText(self._full, self._mode, max(0, self.contentsRect().width()))

    def _sync_tip(self):
        fits = self.fontMetrics().horizontalAdvance(self._full) <= self.contentsRect().width()
        if not fits:
            super().setToolTip(self._full)
            self._own_tip = True
        elif self._own_tip:
            super().setToolTip("")
            self._own_tip = False

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        fm = self.fontMetrics()
        return QSize(fm.averageCharWidth() * self._min_chars, fm.height())

    def sizeHint(self) -> QSize:  # noqa: N802
        fm = self.fontMetrics()
        return QSize(min(fm.horizontalAdvance(self._full) + 4, fm.averageCharWidth() * 60), fm.height())

    def resizeEvent(self, ev):  # noqa: N802
        super().resizeEvent(ev)
        self._sync_tip()

    def paintEvent(self, _ev):  # noqa: N802
        p = QPainter(self)
        opt = QStyleOption()
        opt.initFrom(self)
        r = self.contentsRect()
        self.style().drawItemText(
            p,
            r,
            int(self.alignment() | Qt.AlignmentFlag.AlignVCenter),
            opt.palette,
            self.isEnabled(),
            self.shown_text(),
            self.foregroundRole(),
        )
