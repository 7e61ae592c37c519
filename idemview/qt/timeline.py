"""The timeline of one operation: its attempts on a time axis.

Painted with QPainter (not a chart widget) because it is a small, fixed visual grammar that must read at
a glance: one lane per attempt, a bar from start to finish coloured by outcome *and* labelled with the
outcome's glyph and the attempt number; the record's creation mark; the dedup window shaded from
creation to expiry; the expiry as a dashed line; attempts that started after the key had expired drawn
with a heavy outline and "⚠ after expiry", since those are the ones that may have charged twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from idemview.domain.model import Attempt, Outcome, Severity
from idemview.domain.palette import TimeScale, after_expiry, timeline_span
from idemview.qt import theme

UTC = UTC


@dataclass
class Lane:
    attempt: Attempt
    after_expiry: bool


@dataclass
class _Frame:
    """What one paint of the timeline shares between its parts: the painter, font metrics, the time
    scale ``X`` (epoch seconds -> x), the span ``lo``..``hi`` (epoch seconds), the drawing area's
    ``x0``..``x1`` and lanes' ``bottom`` (pixels), and the palette's text and mid colours."""

    p: QPainter
    fm: QFontMetrics
    X: Callable[[float], float]
    lo: float
    hi: float
    x0: float
    x1: float
    bottom: float
    text: QColor
    mid: QColor


class TimelineWidget(QWidget):
    """Attempts of one operation on a time axis (see the module docstring for the grammar)."""

    LANE_H = 22
    TOP = 22
    AXIS_H = 24
    LEFT = 8
    RIGHT = 12

    def __init__(self, parent=None):
        super().__init__(parent)
        self.lanes: list[Lane] = []
        self.created: datetime | None = None
        self.expires: datetime | None = None
        self.now: datetime | None = None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMouseTracking(True)
        self._rects: list[tuple[QRectF, Lane]] = []
        theme.TIME.changed.connect(self.update)

    def set_operation(
        self, attempts: list[Attempt], created: datetime | None, expires: datetime | None, now: datetime | None
    ):
        self.created, self.expires, self.now = created, expires, now
        self.is_open = now is not None  # an operation is shown (its created time may be missing)
        self.lanes = [Lane(a, after_expiry(a, expires)) for a in attempts]
        self.setFixedHeight(self.sizeHint().height())
        self.updateGeometry()
        self.update()

    def clear(self):
        self.set_operation([], None, None, None)

    def after_expiry_rows(self) -> set[int]:
        return {i for i, l in enumerate(self.lanes) if l.after_expiry}

    def sizeHint(self) -> QSize:
        n = max(1, len(self.lanes))
        return QSize(500, self.TOP + n * self.LANE_H + self.AXIS_H + 6)

    # ------------------------------------------------------------------------------- geometry

    def _span(self) -> tuple[float, float] | None:
        # the same range the incident report's timeline pictures use (idemview.domain.palette)
        return timeline_span((l.attempt for l in self.lanes), self.created, self.expires)

    # ------------------------------------------------------------------------------ painting

    def paintEvent(self, _ev):
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        text = pal.color(QPalette.ColorRole.Text)
        mid = pal.color(QPalette.ColorRole.Mid)
        p.fillRect(self.rect(), pal.color(QPalette.ColorRole.Base))
        fm = QFontMetrics(self.font())
        self._rects = []
        span = self._span()
        if not self.lanes:
            p.setPen(text)
            msg = (
                "No attempts recorded for this operation (the ledger keeps only a counter)."
                if getattr(self, "is_open", False)
                else "No operation open."
            )
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, msg)
            return
        if span is None:
            p.setPen(text)
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "These attempts carry no times.")
            return
        lo, hi = span
        x0, x1 = self.LEFT, self.width() - self.RIGHT
        bottom = self.TOP + len(self.lanes) * self.LANE_H

        X = TimeScale(lo, hi, x0, x1).x  # the report's timeline pictures use the same scale
        g = _Frame(p, fm, X, lo, hi, x0, x1, bottom, text, mid)
        self._paint_window(g)
        self._paint_marks(g)
        for i, lane in enumerate(self.lanes):
            self._paint_lane(g, i, lane)
        self._paint_axis(g)
        p.end()

    def _paint_window(self, g: _Frame) -> None:
        """The dedup window: creation -> expiry, shaded, labelled (with the expiry when it is off the right)."""
        p, X, pal = g.p, g.X, self.palette()
        if self.created and self.expires:
            a, b = X(self.created.timestamp()), X(self.expires.timestamp())
            b_clip = min(b, g.x1)
            win = QColor(pal.color(QPalette.ColorRole.Highlight))
            win.setAlpha(28)
            p.fillRect(QRectF(a, self.TOP - 4, max(0.0, b_clip - a), g.bottom - self.TOP + 8), win)
            p.setPen(pal.color(QPalette.ColorRole.Highlight))
            lbl = "dedup window"
            if b > g.x1:
                left = self.expires - datetime.fromtimestamp(g.hi, UTC)
                lbl += f" → key expires {theme.TIME.fmt(self.expires)} (+{theme.duration(left.total_seconds())})"
            p.drawText(
                QPointF(a + 3, self.TOP - 8), g.fm.elidedText(lbl, Qt.TextElideMode.ElideRight, int(g.x1 - a - 4))
            )

    def _paint_marks(self, g: _Frame) -> None:
        """The creation mark (dotted) and the expiry line (dashed, red) when it is on the axis."""
        p, X = g.p, g.X
        if self.created:
            cx = X(self.created.timestamp())
            p.setPen(QPen(g.text, 1, Qt.PenStyle.DotLine))
            p.drawLine(QPointF(cx, self.TOP - 4), QPointF(cx, g.bottom + 2))
        if self.expires:
            ex = X(self.expires.timestamp())
            if g.x0 <= ex <= g.x1:
                red = theme.colour(theme.SEVERITY_COLOURS, Severity.CRITICAL)
                p.setPen(QPen(red, 2, Qt.PenStyle.DashLine))
                p.drawLine(QPointF(ex, self.TOP - 6), QPointF(ex, g.bottom + 2))
                lbl = "key expired"
                w = g.fm.horizontalAdvance(lbl)
                p.drawText(QPointF(min(ex + 3, g.x1 - w), self.TOP - 8), lbl)

    def _paint_lane(self, g: _Frame, i: int, lane: Lane) -> None:
        """Lane ``i``: its bar (outcome colour; hatched while in progress; a heavy outline after expiry)
        and its label; the bar is remembered for the tooltip."""
        p, X, x0, x1 = g.p, g.X, g.x0, g.x1
        a = lane.attempt
        y = self.TOP + i * self.LANE_H
        if i % 2:
            alt = QColor(self.palette().color(QPalette.ColorRole.AlternateBase))
            p.fillRect(QRectF(x0, y, x1 - x0, self.LANE_H), alt)
        if a.started_at is None:
            return
        s = a.started_at.timestamp()
        f = (
            a.finished_at.timestamp()
            if a.finished_at
            else (self.now.timestamp() if self.now and a.outcome == Outcome.IN_PROGRESS else s)
        )
        bx, bw = X(s), max(6.0, X(min(f, g.hi)) - X(s))
        col = theme.colour(theme.OUTCOME_COLOURS, a.outcome)
        r = QRectF(bx, y + 4, bw, self.LANE_H - 8)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(col)
        if a.outcome == Outcome.IN_PROGRESS and a.finished_at is None:
            p.setBrush(Qt.BrushStyle.BDiagPattern)
            p.setPen(QPen(col, 1))
            p.setBrush(col.lighter(130))
        p.drawRoundedRect(r, 3, 3)
        if lane.after_expiry:
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.setPen(QPen(theme.colour(theme.SEVERITY_COLOURS, Severity.CRITICAL), 2.5))
            p.drawRoundedRect(r.adjusted(-2, -2, 2, 2), 4, 4)
        label = (
            f"#{a.number if a.number is not None else '?'} {theme.outcome_glyph(a.outcome)} "
            f"{theme.OUTCOME_WORDS[a.outcome]}"
        )
        if a.started_at and a.finished_at:
            label += f" · {theme.duration((a.finished_at - a.started_at).total_seconds())}"
        if lane.after_expiry:
            label += "  ⚠ after expiry"
        fg = theme.colour(theme.SEVERITY_COLOURS, Severity.CRITICAL) if lane.after_expiry else g.text
        tx, label, fg = self._place_label(g, r, label, fg, col)
        p.setPen(fg)
        p.drawText(QPointF(tx, y + self.LANE_H / 2 + g.fm.ascent() / 2 - 1), label)
        self._rects.append((r, lane))

    @staticmethod
    def _place_label(g: _Frame, r: QRectF, label: str, fg: QColor, col: QColor) -> tuple[float, str, QColor]:
        """Where a bar's label goes: right of the bar, else left of it, else the roomiest of the two or
        inside the bar, elided to fit. Returns (x, the label as drawn, its colour)."""
        fm, x0, x1 = g.fm, g.x0, g.x1
        w = fm.horizontalAdvance(label)
        tx = r.right() + 5
        if tx + w > x1:
            right, left, inside = x1 - tx, r.left() - 5 - x0, r.width() - 8
            if left >= w:
                tx = r.left() - 5 - w
            else:
                # no side holds it whole: the roomiest place, the label elided to it (it never runs
                # off its bar into the next, issue 20 §9); inside the bar in a colour that reads on it
                room = max(right, left, inside)
                label = fm.elidedText(label, Qt.TextElideMode.ElideRight, int(max(room, 0)))
                w = fm.horizontalAdvance(label)
                if room == right:
                    tx = r.right() + 5
                elif room == left:
                    tx = r.left() - 5 - w
                else:
                    tx = max(x0 + 2, r.left() + 4)
                    fg = QColor("#000000") if col.lightness() > 140 else QColor("#ffffff")
        return tx, label, fg

    def _paint_axis(self, g: _Frame) -> None:
        """The time axis: ticks labelled in the display zone (dates on a long span, milliseconds on a
        short one), a label equal to the one before left out."""
        p, X, lo, hi, x0, x1, bottom, fm, mid = g.p, g.X, g.lo, g.hi, g.x0, g.x1, g.bottom, g.fm, g.mid
        p.setPen(QPen(mid, 1))
        p.drawLine(QPointF(x0, bottom + 3), QPointF(x1, bottom + 3))
        long_span = hi - lo > 20 * 3600
        ticks = max(2, int((x1 - x0) // (fm.horizontalAdvance("00-00 00:00") + 40)))
        # a span shorter than one second per tick: milliseconds, else every tick read "14:59:01"
        sub_second = (hi - lo) / ticks < 1
        last = None
        for k in range(ticks + 1):
            t = lo + (hi - lo) * k / ticks
            x = X(t)
            dt = datetime.fromtimestamp(t, UTC)
            shown = theme.TIME.convert(dt)
            lbl = (
                shown.strftime("%m-%d %H:%M")
                if long_span
                else shown.strftime("%H:%M:%S.%f")[:-3]
                if sub_second
                else shown.strftime("%H:%M:%S")
            )
            if lbl == last:  # a label equal to the one before says nothing
                continue
            last = lbl
            p.setPen(QPen(mid, 1))
            p.drawLine(QPointF(x, bottom + 3), QPointF(x, bottom + 7))
            w = fm.horizontalAdvance(lbl)
            p.setPen(g.text)
            p.drawText(QPointF(min(max(x - w / 2, x0), x1 - w), bottom + 7 + fm.ascent()), lbl)

    def event(self, ev):
        if ev.type() == ev.Type.ToolTip:
            for r, lane in self._rects:
                if r.adjusted(-3, -3, 3, 3).contains(ev.position() if hasattr(ev, "position") else QPointF(ev.pos())):
                    a = lane.attempt
                    z = theme.TIME.zone()
                    tip = [
                        f"attempt #{a.number}: {theme.OUTCOME_WORDS[a.outcome]} (ledger says {a.raw_outcome})",
                        f"started {theme.TIME.fmt(a.started_at)} {z}",
                        f"finished {theme.TIME.fmt(a.finished_at)} {z}",
                    ]
                    if a.worker:
                        tip.append(f"worker {a.worker}")
                    if a.effect_ref:
                        tip.append(f"effect {a.effect_ref}")
                    if a.error:
                        tip.append(f"error: {a.error[:300]}")
                    if lane.after_expiry:
                        tip.append("⚠ started after the key had expired: the dedup check could not stop it")
                    from PySide6.QtWidgets import QToolTip

                    QToolTip.showText(ev.globalPos(), "\n".join(tip), self)
                    return True
            from PySide6.QtWidgets import QToolTip

            QToolTip.hideText()
            return True
        return super().event(ev)
