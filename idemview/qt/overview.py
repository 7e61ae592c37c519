"""The incident overview: attempts over time, stacked by outcome, with finding markers.

Drawn with pyqtgraph rather than QtCharts because it stays fast with many bars and points (it draws
through a scene graph of plain QGraphicsItems with numpy arrays, no per-point QObject), because
``LinearRegionItem`` gives a draggable time-window selection for free, and because it needs neither the
QtCharts module (absent from PySide6-Essentials) nor its GPL/commercial licence.

Interaction (like Grafana): drag with the left button to select a time window — it becomes the filter's
created range for the grid and everything else; drag the window's edges to adjust; the mouse wheel
zooms the time axis and the histogram is re-queried for the visible range (computed in the database,
buckets sized to the view).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from idemview.domain.model import SEVERITY_ORDER, Finding, Outcome, Severity
from idemview.domain.palette import OVERVIEW_STACK, STATUS_AS_OUTCOME
from idemview.ledger.reader import Histogram
from idemview.qt import theme

UTC = UTC
_STACK = OVERVIEW_STACK  # shared with the incident report's chart (idemview.domain.palette)
_STATUS_AS_OUTCOME = STATUS_AS_OUTCOME
_SEV_SYMBOL = {
    Severity.CRITICAL: "star",
    Severity.HIGH: "t",
    Severity.MEDIUM: "d",
    Severity.LOW: "o",
    Severity.INFO: "s",
}
_GLYPH_SYMBOLS: dict = {}
#: ms after the widget before its chart is built: a later event-loop turn than the tab's own build (issue 27)
CHART_DELAY_MS = 20


def _sev_symbol(sev: Severity):
    """The marker shape of a severity: the chips' and panel's own glyph (‼ for critical, as a path made
    from the text; ▲ ◆ ● are pyqtgraph's t, d, o), so a critical marker looks like a critical chip."""
    if sev != Severity.CRITICAL:
        return _SEV_SYMBOL[sev]
    if sev not in _GLYPH_SYMBOLS:
        from PySide6.QtGui import QFont, QPainterPath, QTransform

        path = QPainterPath()
        f = QFont()
        f.setBold(True)
        path.addText(0, 0, f, theme.SEVERITY_GLYPHS[sev])
        br = path.boundingRect()
        scale = 1.0 / max(br.width(), br.height(), 1e-6)
        tr = QTransform()
        tr.scale(scale, scale)
        tr.translate(-br.x() - br.width() / 2.0, -br.y() - br.height() / 2.0)
        _GLYPH_SYMBOLS[sev] = tr.map(path)
    return _GLYPH_SYMBOLS[sev]


MAX_MARKERS = 2000  # finding markers drawn on the overview at most


class _SelectViewBox(pg.ViewBox):
    """Left-drag selects a time window instead of panning; the wheel zooms time only."""

    def __init__(self, owner: IncidentOverview):
        super().__init__(enableMenu=False)
        self.owner = owner
        self.setMouseEnabled(x=True, y=False)
        self._drag_start: float | None = None

    def mouseDragEvent(self, ev, axis=None):
        if ev.button() != Qt.MouseButton.LeftButton:
            return super().mouseDragEvent(ev, axis)
        ev.accept()
        x = self.mapSceneToView(ev.scenePos()).x()
        if ev.isStart():
            self._drag_start = self.mapSceneToView(ev.buttonDownScenePos()).x()
        if self._drag_start is None:
            return
        lo, hi = sorted((self._drag_start, x))
        self.owner._show_region(lo, hi)
        if ev.isFinish():
            self._drag_start = None
            self.owner._region_done()


class IncidentOverview(QWidget):
    """Histogram of attempts by outcome over time with finding markers and a selectable window.

    Signals: ``region_chosen(since, until)`` (aware UTC), ``region_cleared()``, ``range_wanted(start,
    end)`` when the visible time range changes (the owner re-queries :func:`idemview.ledger.reader.histogram`),
    ``finding_clicked(Finding)``."""

    region_chosen = Signal(object, object)
    region_cleared = Signal()
    range_wanted = Signal(object, object)
    finding_clicked = Signal(object)
    fit_filter_wanted = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        v.setSpacing(2)
        top = QHBoxLayout()
        top.setContentsMargins(6, 0, 6, 0)
        self.title = QLabel("Attempts over time")
        f = self.title.font()
        f.setBold(True)
        self.title.setFont(f)
        self.legend = QLabel()
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.fit_btn = QToolButton(text="Fit all")
        self.fit_btn.setToolTip("Show the ledger's whole activity span")
        self.fit_btn.clicked.connect(self.fit_all)
        self.fit_filter_btn = QToolButton(text="Fit filter")
        self.fit_filter_btn.setToolTip("Show the time span of the operations the filter shows")
        self.fit_filter_btn.clicked.connect(lambda: self.fit_filter_wanted.emit())
        self.day_btn = QToolButton(text="Last 6 h")
        self.day_btn.setToolTip("Show the last 6 hours of the ledger's activity")
        self.day_btn.clicked.connect(self.fit_recent)
        self.clear_btn = QToolButton(text="Clear window")
        self.clear_btn.setToolTip("Remove the selected time window from the filter")
        self.clear_btn.clicked.connect(lambda: self.clear_region(emit=True))  # not clicked(bool) as emit
        self.clear_btn.setEnabled(False)
        self.legend.setWordWrap(True)
        self.legend.setContentsMargins(6, 0, 6, 0)
        top.addWidget(self.title)
        top.addStretch(1)
        for b in (self.day_btn, self.fit_btn, self.fit_filter_btn, self.clear_btn):
            top.addWidget(b)
        v.addLayout(top)
        v.addWidget(self.legend)
        # The chart itself (pyqtgraph's PlotWidget, axes, band, markers) is built one event-loop turn
        # later (_build_chart): it was half of the tab's construction, and the 2M-row Celery ledger's
        # open was the GUI thread's longest stall (issue 27). Until then a light placeholder holds its
        # room, and what the chart is asked to show is kept and replayed when it is built.
        self.axis: pg.DateAxisItem | None = None
        self.vb: _SelectViewBox | None = None
        self.plot: pg.PlotWidget | None = None
        self.region: pg.LinearRegionItem | None = None
        self._markers: pg.ScatterPlotItem | None = None
        self._axes_on = {"bottom": False, "left": False}  # no numbers until the first histogram
        self._pending_x: tuple[float, float] | None = None  # the time range asked before the chart exists
        self._pending_band: tuple[float, float] | None = None  # the band asked before the chart exists
        self._placeholder = QLabel("Drawing the chart…")
        self._placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._placeholder.setMinimumHeight(150)
        v.addWidget(self._placeholder, 1)
        self.hint = QLabel("Drag across the chart to filter by a time window · wheel zooms time")
        self.hint.setContentsMargins(6, 0, 6, 0)
        v.addWidget(self.hint)
        self._bars: list[pg.BarGraphItem] = []
        self._hist: Histogram | None = None
        self._findings: list[Finding] = []
        self._explanations: dict[int, str] = {}
        self._span: tuple[datetime | None, datetime | None] = (None, None)
        self._muted = False
        self._range_timer = QTimer(self, singleShot=True, interval=250)
        self._range_timer.timeout.connect(self._emit_range)
        theme.TIME.changed.connect(self._zone_changed)
        self.restyle()
        # a child timer, not a bare singleShot: closing the tab before it fires deletes it with the widget.
        # Not 0 ms: a zero timer ran in the same event-loop pass as the tab's build (one 50-57 ms turn)
        self._chart_timer = QTimer(self, singleShot=True, interval=CHART_DELAY_MS)
        self._chart_timer.timeout.connect(self.ensure_chart)
        self._chart_timer.start()

    def ensure_chart(self) -> pg.PlotWidget:
        """Build the chart now if it is not built yet (normally one event-loop turn after the widget) and
        replay what it was asked to show meanwhile: time range, axes' numbers, bars, markers, band."""
        if self.plot is not None:
            return self.plot
        self._chart_timer.stop()
        self.axis = pg.DateAxisItem(orientation="bottom", utcOffset=0)
        self.vb = _SelectViewBox(self)
        plot = pg.PlotWidget(viewBox=self.vb, axisItems={"bottom": self.axis})
        plot.setMinimumHeight(150)
        plot.hideButtons()
        plot.setMenuEnabled(False)
        plot.getPlotItem().getAxis("left").setWidth(44)
        self.region = pg.LinearRegionItem(movable=True, swapMode="sort")
        self.region.setZValue(10)
        self.region.hide()
        self.region.sigRegionChangeFinished.connect(self._region_done)
        self._markers = pg.ScatterPlotItem(hoverable=True, tip=self._tip, size=13)
        self._markers.setZValue(20)
        self._markers.sigClicked.connect(self._marker_clicked)
        plot.addItem(self.region)
        plot.addItem(self._markers)
        self.plot = plot
        layout = self.layout()
        layout.replaceWidget(self._placeholder, plot)
        layout.setStretchFactor(plot, 1)
        self._placeholder.hide()
        self._placeholder.deleteLater()
        self._axes_values(self._axes_on["bottom"], ("bottom",))
        self._axes_values(self._axes_on["left"], ("left",))
        if self._pending_x is not None:
            self._muted = True
            self.vb.setXRange(*self._pending_x, padding=0)
            self._muted = False
        self.vb.sigXRangeChanged.connect(lambda *_: None if self._muted else self._range_timer.start())
        self._zone_changed()
        self.restyle()
        if self._pending_band is not None:
            self._show_region(*self._pending_band)
        return plot

    # ---------------------------------------------------------------------------- appearance

    def restyle(self):
        pal = self.palette()
        if self.plot is not None and self.region is not None:
            bg, fg = pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text)
            self.plot.setBackground(bg)
            for name in ("left", "bottom"):
                ax = self.plot.getPlotItem().getAxis(name)
                ax.setPen(pg.mkPen(fg))
                ax.setTextPen(pg.mkPen(fg))
            hl = pal.color(QPalette.ColorRole.Highlight)
            fill = QColor(hl)
            fill.setAlpha(60)
            self.region.setBrush(fill)
            for line in self.region.lines:
                line.setPen(pg.mkPen(hl, width=2))
        parts = []
        for o in reversed(_STACK):
            c = theme.colour(theme.OUTCOME_COLOURS, o).name()
            words = f"■ {theme.outcome_glyph(o)} {theme.OUTCOME_WORDS[o]}".replace(" ", "&nbsp;")
            parts.append(f'<span style="color:{c}">{words}</span>')
        g = theme.SEVERITY_GLYPHS
        parts.append(
            f"·&nbsp;findings:&nbsp;{g[Severity.CRITICAL]}&nbsp;critical {g[Severity.HIGH]}&nbsp;high "
            f"{g[Severity.MEDIUM]}&nbsp;medium {g[Severity.LOW]}&nbsp;low"
        )
        self.legend.setText(" ".join(parts))
        self._draw()

    def _zone_changed(self):
        if self.axis is None:
            return  # the chart's build sets it
        self.axis.utcOffset = 0 if theme.TIME.utc else None
        self.axis.setLabel(f"time ({theme.TIME.zone()})")
        self.axis.picture = None
        self.axis.update()

    # --------------------------------------------------------------------------------- data

    def set_span(self, lo: datetime | None, hi: datetime | None):
        """The ledger's activity span; the first view shows its last 6 hours (an incident is usually
        recent, and a wider first view squeezes its spike into a few bars)."""
        self._span = (lo, hi)
        self.fit_recent()

    def view_range(self) -> tuple[datetime, datetime] | None:
        """The chart's visible time range (aware UTC), or None while it has none."""
        if self.vb is None:
            if self._pending_x is None:
                return None
            x0, x1 = self._pending_x
        else:
            (x0, x1), _ = self.vb.viewRange()
        if x1 <= x0:
            return None
        return datetime.fromtimestamp(x0, UTC), datetime.fromtimestamp(x1, UTC)

    def fit_recent(self):
        lo, hi = self._span
        if hi is None:
            return
        start = max(lo, hi - timedelta(hours=6)) if lo else hi - timedelta(hours=6)
        self._set_x(start - timedelta(minutes=10), hi + timedelta(minutes=10))

    def fit_all(self):
        lo, hi = self._span
        if hi is None or lo is None:
            return
        pad = max((hi - lo) * 0.02, timedelta(minutes=5))
        self._set_x(lo - pad, hi + pad)

    def _set_x(self, a: datetime, b: datetime):
        self._pending_x = (a.timestamp(), b.timestamp())
        if self.vb is not None:
            self._muted = True
            self.vb.setXRange(*self._pending_x, padding=0)
            self._muted = False
        self._emit_range()

    def _emit_range(self):
        r = self.view_range()
        if r:
            self.range_wanted.emit(*r)

    def _axes_values(self, on: bool, axes: tuple[str, ...] = ("bottom", "left")) -> None:
        """Show (or hide) the numbers of ``axes`` (both by default)."""
        for name in axes:
            self._axes_on[name] = on
            if self.plot is not None:
                self.plot.getPlotItem().getAxis(name).setStyle(showValues=on)

    def axes_show_values(self, axis: str = "bottom") -> bool:
        """Whether ``axis`` ("bottom": times, "left": counts) shows its numbers (not before the first
        histogram; times also once finding markers give a real range)."""
        if self.plot is None:
            return self._axes_on[axis]
        return bool(self.plot.getPlotItem().getAxis(axis).style["showValues"])

    def set_histogram(self, h: Histogram):
        self._hist = h
        # numbers only over a real time range: a ledger without creation times (Celery) has no span and
        # an empty histogram, and its chart's 0..1 range read as times "00.100 … 00.900" (until markers)
        self._axes_values(self._span[1] is not None or any(any(c) for c in h.counts.values()))
        src = "Attempts" if h.source == "attempts" else "Operations created"
        self.title.setText(f"{src} over time")
        self._draw()

    def set_findings(self, findings: list[Finding], explanations: dict[int, str]):
        """Replace the finding markers (the bars stay: a filter change redraws only what changed)."""
        self._findings = [f for f in findings if f.at is not None]
        self._explanations = explanations
        self._draw_markers()

    def _draw(self):
        self._draw_bars()
        self._draw_markers()

    def _draw_bars(self):
        if self.plot is None or self.vb is None:
            return  # kept in self._hist; the chart's build draws it
        for b in self._bars:
            self.plot.removeItem(b)
        self._bars = []
        h = self._hist
        ymax = 1.0
        if h is not None and h.counts:
            edges = np.array([e.timestamp() for e in h.edges])
            centers = (edges[:-1] + edges[1:]) / 2
            width = float(edges[1] - edges[0]) * 0.92 if len(edges) > 1 else 1.0
            base = np.zeros(len(centers))
            for o in _STACK:
                vals = np.zeros(len(centers))
                for raw, counts in h.counts.items():
                    oo = _STATUS_AS_OUTCOME.get(raw) if h.source == "operations" else None
                    if oo is None:
                        try:
                            oo = Outcome(raw)
                        except ValueError:
                            oo = Outcome.UNKNOWN
                    if oo == o:
                        vals += np.array(counts, dtype=float)
                if not vals.any():
                    continue
                c = theme.colour(theme.OUTCOME_COLOURS, o)
                bar = pg.BarGraphItem(x=centers, height=vals, width=width, y0=base.copy(), brush=c, pen=pg.mkPen(None))
                self.plot.addItem(bar)
                self._bars.append(bar)
                base += vals
            ymax = max(1.0, float(base.max()))
        self._muted = True
        self.vb.setYRange(0, ymax * 1.18, padding=0)
        self._muted = False
        self._ymax = ymax

    def _draw_markers(self):
        if self._markers is None:
            if any(f.severity != Severity.INFO for f in self._findings):
                self._axes_values(True, ("bottom",))  # as drawn markers do (the chart's build draws them)
            return
        ymax = getattr(self, "_ymax", 1.0)
        # Info-level findings (expired keys) are many and old: they would bury the signal, so they are
        # left out before any work is done; brushes are made once per severity, not once per marker,
        # and at most MAX_MARKERS are drawn (most severe first) so a huge ledger cannot stall the loop.
        shown = [f for f in self._findings if f.severity != Severity.INFO]
        if len(shown) > MAX_MARKERS:
            shown = sorted(shown, key=lambda f: SEVERITY_ORDER[f.severity])[:MAX_MARKERS]
        edge = pg.mkPen(self.palette().color(QPalette.ColorRole.Base), width=1)
        brushes = {sev: pg.mkBrush(theme.colour(theme.SEVERITY_COLOURS, sev)) for sev in Severity}
        # arrays rather than one dict per spot: a third of the GUI-thread time for 2,000 markers
        x = np.fromiter((f.at.timestamp() for f in shown), dtype=float, count=len(shown))
        data = np.empty(len(shown), dtype=object)
        data[:] = shown
        self._markers.setData(
            x=x,
            y=np.full(len(shown), ymax * 1.08),
            data=data,
            symbol=[_sev_symbol(f.severity) for f in shown],
            brush=[brushes[f.severity] for f in shown],
            pen=edge,
        )
        if shown:  # the markers' times are a real range; the counts axis waits for a histogram with some:
            # "0 … 1.0" beside no bars read as "no operations" while the chart's query ran (2M Celery rows)
            self._axes_values(True, ("bottom",))

    def _tip(self, x, y, data):
        f: Finding = data
        return (
            f"{f.severity.value}: {theme.KIND_WORDS[f.kind]} at {theme.TIME.fmt(f.at)} "
            f"{theme.TIME.zone()}\n{self._explanations.get(id(f), '')}\n(click to open the operation)"
        )

    def _marker_clicked(self, _item, points, _ev=None):
        if len(points):
            self.finding_clicked.emit(points[0].data())

    # ------------------------------------------------------------------------------ region

    def _show_region(self, lo: float, hi: float):
        self._pending_band = (lo, hi)
        if self.region is None:
            return
        self.region.blockSignals(True)
        self.region.setRegion((lo, hi))
        self.region.blockSignals(False)
        self.region.show()

    def _region_done(self):
        lo, hi = self.region.getRegion() if self.region is not None else (self._pending_band or (0.0, 0.0))
        if hi - lo < 1:
            return
        self.clear_btn.setEnabled(True)
        self.region_chosen.emit(
            datetime.fromtimestamp(lo, UTC).replace(microsecond=0),
            datetime.fromtimestamp(hi, UTC).replace(microsecond=0),
        )

    def select_window(self, since: datetime, until: datetime):
        """Select a window programmatically (tests, keyboard users) and filter by it."""
        self._show_region(since.timestamp(), until.timestamp())
        self._region_done()

    def show_window(self, since: datetime | None, until: datetime | None):
        """Draw the filter's time window as the band (no signal: the filter already has it)."""
        if since is None and until is None:
            self.clear_region(emit=False)
            return
        lo = (since or (self._span[0] or until)).timestamp()
        hi = (until or (self._span[1] or since)).timestamp()
        self._show_region(lo, hi)
        self.clear_btn.setEnabled(True)

    def window_shown(self) -> tuple[float, float] | None:
        """The band's (start, end) in epoch seconds, or None when no band is drawn."""
        if self.region is None:
            return self._pending_band
        return tuple(self.region.getRegion()) if self.region.isVisible() else None

    def fit_to(self, lo: datetime | None, hi: datetime | None):
        """Show ``lo``…``hi`` (the filtered operations' span) with a little room on both sides."""
        if lo is None or hi is None:
            return
        pad = max((hi - lo) * 0.05, timedelta(minutes=5))
        self._set_x(lo - pad, hi + pad)

    def clear_region(self, emit: bool = True):
        self._pending_band = None
        if self.region is not None:
            self.region.hide()
        self.clear_btn.setEnabled(False)
        if emit:
            self.region_cleared.emit()
