"""The "Windows" view of a ledger tab (issue #22, DESIGN §5.2): is each kind's dedup window long enough
for the retries that really happen?

Per kind, the chart draws the retry spans (a bar from p50 to p99, a dot at the largest) on a log time
axis against the kind's window (a vertical tick), coloured by verdict; beside it a table of the figures,
and under it the selected kind's sentence, the layout's notes and its late operations. Clicking a late
operation filters the tab's grid to its idempotency key and opens it (the tab's own key filter). The
table exports to CSV with a manifest like any evidence (:func:`idemview.services.windows.export_windows`).

Every database call is a job on the tab's :class:`~idemview.qt.workers.Runner` (channels ``windows``,
``windows:late``, ``windows:export``); every text shown from the ledger goes through the tab's masker.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pyqtgraph as pg
from PySide6.QtCore import QRect, Qt, Signal
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from idemview.domain.model import Severity
from idemview.findings.windows import LADDER, WindowGroup, WindowsReport, duration_words
from idemview.qt import theme
from idemview.qt.workers import JobError

UTC = UTC

#: Verdict -> the severity whose colour it borrows (too short is an incident, enough is calm).
_VERDICT_SEVERITY = {"too_short": Severity.CRITICAL, "unknown": Severity.INFO, "enough": Severity.LOW}
_VERDICT_WORDS = {"too_short": "too short", "enough": "enough", "unknown": "unknown"}
#: The chart's least width (px) when the table takes the room its columns need.
CHART_MIN = 380
# The ladder's rungs as axis ticks (15 min left out: on a log axis it crowds 5 min)
_TICKS = [(1.0, "1 s"), (60.0, "1 min")] + [(w, duration_words(w)) for w in LADDER if w != 900.0]
_HEADERS = ("Kind", "Verdict", "Window", "p50", "p99", "Max", "Late", "Suggested")


def _x(seconds: float | None) -> float | None:
    """Seconds on the chart's log axis (spans under half a second are drawn at half a second)."""
    return None if seconds is None else math.log10(max(float(seconds), 0.5))


def _words(s: float | None) -> str:
    return "—" if s is None else duration_words(s)


class WindowsView(QWidget):
    """The view itself (shown in :class:`WindowsDialog`). ``tab``: the :class:`LedgerTab` whose ledger,
    runner, masker and grid it uses. ``report_shown`` is emitted when a report is on screen."""

    report_shown = Signal()

    def __init__(self, tab, parent=None):
        super().__init__(parent)
        self.tab = tab
        self.report: WindowsReport | None = None
        self.late_rows: list[dict] = []
        v = QVBoxLayout(self)
        v.setContentsMargins(6, 6, 6, 6)
        top = QHBoxLayout()
        self.header = QLabel("Measuring dedup windows…")
        self.header.setWordWrap(True)
        top.addWidget(self.header, 1)
        self.refresh_button = QPushButton("Measure again")
        self.refresh_button.clicked.connect(self.refresh)
        self.export_button = QPushButton("Export CSV…")
        self.export_button.setEnabled(False)
        self.export_button.clicked.connect(self._ask_export)
        top.addWidget(self.refresh_button)
        top.addWidget(self.export_button)
        v.addLayout(top)
        split = QSplitter(Qt.Orientation.Vertical)
        upper = QSplitter(Qt.Orientation.Horizontal)
        self.plot = pg.PlotWidget()
        self.plot.hideButtons()
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.setMinimumHeight(160)
        self.plot.getPlotItem().getAxis("bottom").setTicks([[(_x(s), w) for s, w in _TICKS]])
        self.plot.getPlotItem().setLabel("bottom", "retry span (p50–p99 bar, ● max) against the window (│)")
        upper.addWidget(self.plot)
        self.table = QTableWidget(0, len(_HEADERS))
        self.table.setHorizontalHeaderLabels(list(_HEADERS))
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.itemSelectionChanged.connect(self._kind_selected)
        upper.addWidget(self.table)
        upper.setSizes([470, 560])
        self.upper = upper
        split.addWidget(upper)
        lower = QWidget()
        lv = QVBoxLayout(lower)
        lv.setContentsMargins(0, 0, 0, 0)
        self.sentence = QLabel("")
        self.sentence.setWordWrap(True)
        self.sentence.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lv.addWidget(self.sentence)
        self.notes = QLabel("")
        self.notes.setWordWrap(True)
        self.notes.setObjectName("windowsNotes")
        lv.addWidget(self.notes)
        self.late_title = QLabel("")
        lv.addWidget(self.late_title)
        self.late = QTableWidget(0, 4)
        self.late.setHorizontalHeaderLabels(["Idempotency key", "Scope", "Late by", "Retry span"])
        self.late.verticalHeader().hide()
        self.late.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.late.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.late.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.late.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.late.cellClicked.connect(self._late_clicked)
        self.late.setToolTip("Click an operation to filter the grid to its idempotency key and open it")
        lv.addWidget(self.late, 1)
        split.addWidget(lower)
        split.setSizes([300, 220])
        v.addWidget(split, 1)
        self.status = QLabel("")
        v.addWidget(self.status)

    # ----------------------------------------------------------------------------------- jobs

    def refresh(self) -> None:
        """Measure the tab's ledger again (a job on the tab's runner; the GUI thread only draws)."""
        from idemview.services.windows import measure

        ledger = self.tab.ledger
        if ledger is None:
            self.header.setText("The ledger is not open yet.")
            return
        now = self.tab.now or datetime.now(UTC)
        self.header.setText("Measuring dedup windows…")
        self.refresh_button.setEnabled(False)
        self.tab.runner.submit("windows", lambda tok: measure(ledger, now), self._on_report, self._on_error)

    def _on_report(self, rep: WindowsReport) -> None:
        self.refresh_button.setEnabled(True)
        self.report = rep
        m = self.tab.masker
        n_short = sum(1 for g in rep.groups if g.verdict == "too_short")
        self.header.setText(
            f"<b>Dedup windows</b> of {m.free_text(self.tab.spec.name)} as of {theme.TIME.fmt(rep.now)} — "
            f"{theme.plural(len(rep.groups), 'kind')}, {n_short} with a window too short for the retries seen "
            f"(percentiles by {rep.method})"
        )
        self._fill_table(rep)
        self.fit_table()
        self._draw(rep)
        self.export_button.setEnabled(bool(rep.groups))
        if rep.groups:
            self.table.selectRow(0)
        else:
            self.sentence.setText("No operations.")
        self.report_shown.emit()

    def fit_table(self, avail: QRect | None = None) -> None:
        """Give the table the width its columns need (the window grows within ``avail``, default its
        screen's available geometry; the chart gives up the rest down to :data:`CHART_MIN` px): at
        1280×800 the last column, "Suggested" — the answer — was behind a horizontal scroll bar."""
        from idemview.qt.fit import FRAME_W, _avail

        hh = self.table.horizontalHeader()
        need = hh.length() + 2 * self.table.frameWidth() + self.table.verticalScrollBar().sizeHint().width()
        sizes = self.upper.sizes()
        if len(sizes) != 2 or need <= sizes[1]:
            return
        win = self.window()
        avail = avail or _avail(win)
        frame = (win.frameGeometry().width() - win.width()) or FRAME_W
        grow = max(0, min(need + CHART_MIN - sum(sizes), avail.width() - frame - win.width()))
        if grow and win is not self.tab.window():
            win.resize(win.width() + grow, win.height())
            if win.frameGeometry().right() > avail.right():  # moved left to stay on the screen
                win.move(max(avail.left(), avail.right() - frame - win.width()), win.y())
        total = sum(sizes) + (grow if win is not self.tab.window() else 0)
        table = min(need, max(total - CHART_MIN, sizes[1]))
        self.upper.setSizes([total - table, table])

    def _on_error(self, err: JobError) -> None:
        self.refresh_button.setEnabled(True)
        if err.cancelled:
            return
        self.header.setText("Dedup windows could not be measured: " + self.tab.masker.free_text(err.message))

    def _kind_selected(self) -> None:
        g = self.selected_group()
        if g is None:
            return
        m = self.tab.masker
        colour = theme.colour(theme.SEVERITY_COLOURS, _VERDICT_SEVERITY[g.verdict]).name()
        verdict = _VERDICT_WORDS[g.verdict] + (f" ({m.free_text(g.reason)})" if g.reason else "")
        self.sentence.setText(
            f'<span style="color:{colour}"><b>{verdict}</b></span> — {_esc(g.masked_sentence(m.free_text))}'
        )
        self.notes.setText("<br>".join("⚠ " + _esc(m.free_text(n)) for n in g.notes))
        self.notes.setVisible(bool(g.notes))
        self.late.setRowCount(0)
        self.late_rows = []
        if not (g.late or g.over):
            self.late_title.setText("No late operations for this kind.")
            return
        self.late_title.setText("Late operations (latest first) — loading…")
        from idemview.services.windows import late_operations

        ledger, kind = self.tab.ledger, g.kind
        self.tab.runner.submit(
            "windows:late", lambda tok: late_operations(ledger, kind, 200), self._on_late, self._on_error
        )

    def _on_late(self, rows: list[dict]) -> None:
        self.late_rows = rows
        m = self.tab.masker
        self.late.setRowCount(len(rows))
        for i, r in enumerate(rows):
            cells = (
                m.text(r["key"], "idempotency_key"),
                m.text(r["scope"], "scope") if r["scope"] else "",
                _words(r["late_s"]) + (" after expiry" if r["late_s"] is not None else ""),
                _words(r["span_s"]),
            )
            for j, c in enumerate(cells):
                self.late.setItem(i, j, QTableWidgetItem(c))
        self.late_title.setText(
            f"Late operations (latest first, {len(rows)}{' shown' if len(rows) >= 200 else ''}) — "
            "click one to filter the grid to it"
        )

    def _late_clicked(self, row: int, _col: int) -> None:
        if 0 <= row < len(self.late_rows):
            r = self.late_rows[row]
            self.tab.open_key(r["key"], r["scope"])

    # -------------------------------------------------------------------------------- export

    def _ask_export(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export dedup windows", "windows.csv", "CSV (*.csv)")
        if path:
            self.export_to(path)

    def export_to(self, path: str, overwrite: bool = False) -> None:
        """Write the table to ``path`` (CSV + manifest) on a worker; the status line says where."""
        from idemview.evidence.plan import check_target
        from idemview.services.windows import export_windows

        rep, ledger, tab = self.report, self.tab.ledger, self.tab
        if rep is None or ledger is None:
            return

        def job(tok):
            target = check_target(path, ledger, overwrite=overwrite)
            return export_windows(ledger, rep, target, masker=tab.masker.export_masker(), connection_name=tab.spec.name)

        self.status.setText("Exporting…")
        self.tab.runner.submit("windows:export", job, self._on_exported, self._on_export_error)

    def _on_exported(self, res) -> None:
        self.status.setText(f"Exported {theme.plural(res.rows, 'kind')} to {res.path} (manifest beside it)")

    def _on_export_error(self, err: JobError) -> None:
        self.status.setText("Export failed: " + self.tab.masker.free_text(err.message))

    # ------------------------------------------------------------------------------- drawing

    def selected_group(self) -> WindowGroup | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows or self.report is None:
            return None
        i = rows[0].row()
        return self.report.groups[i] if 0 <= i < len(self.report.groups) else None

    def _fill_table(self, rep: WindowsReport) -> None:
        m = self.tab.masker
        self.table.setRowCount(len(rep.groups))
        for i, g in enumerate(rep.groups):
            win = _words(g.window_s)
            late = str(g.late) + (f" (≤ {_words(g.late_max_s)})" if g.late else "")
            cells = (
                m.free_text(g.label),
                _VERDICT_WORDS[g.verdict],
                win,
                _words(g.p50),
                _words(g.p99),
                _words(g.max),
                late,
                _words(g.suggested_window_s),
            )
            for j, c in enumerate(cells):
                item = QTableWidgetItem(c)
                if j == 1:
                    item.setForeground(theme.colour(theme.SEVERITY_COLOURS, _VERDICT_SEVERITY[g.verdict]))
                tip = g.masked_sentence(m.free_text)
                if j == 2 and g.window_source:
                    tip = f"window from {g.window_source}" + (
                        f"; lock timeout {_words(g.lock_timeout_s)}" if g.lock_timeout_s else ""
                    )
                item.setToolTip(tip)
                self.table.setItem(i, j, item)

    def _draw(self, rep: WindowsReport) -> None:
        p = self.plot
        p.clear()
        pal = self.palette()
        bg, fg = pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text)
        p.setBackground(bg)
        for name in ("left", "bottom"):
            ax = p.getPlotItem().getAxis(name)
            ax.setPen(pg.mkPen(fg))
            ax.setTextPen(pg.mkPen(fg))
        n = len(rep.groups)
        m = self.tab.masker
        labels = []
        xs = [_x(1.0), _x(3600.0)]
        for i, g in enumerate(rep.groups):
            y = n - 1 - i  # the first group (too short) on top
            labels.append((y, _short(m.free_text(g.label))))
            c = theme.colour(theme.SEVERITY_COLOURS, _VERDICT_SEVERITY[g.verdict])
            lo, hi, mx = _x(g.p50), _x(g.p99), _x(g.max)
            if lo is not None and hi is not None:
                fill = QColor(c)
                fill.setAlpha(150)
                p.addItem(pg.PlotDataItem([lo, max(hi, lo + 0.02)], [y, y], pen=pg.mkPen(fill, width=12)))
                xs += [lo, hi]
            if mx is not None:
                p.addItem(pg.ScatterPlotItem([mx], [y], size=10, brush=pg.mkBrush(c), pen=pg.mkPen(fg)))
                xs.append(mx)
            w = _x(g.window_s)
            if w is not None:
                p.addItem(pg.PlotDataItem([w, w], [y - 0.38, y + 0.38], pen=pg.mkPen(fg, width=3)))
                xs.append(w)
        p.getPlotItem().getAxis("left").setTicks([labels])
        p.setXRange(min(xs) - 0.2, max(xs) + 0.3, padding=0)
        p.setYRange(-0.7, max(n - 1, 0) + 0.7, padding=0)


def _short(s: str, n: int = 22) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class WindowsDialog(QDialog):
    """A non-modal window holding one tab's :class:`WindowsView` (opened from the tab's "Windows"
    button; measuring starts when it is shown)."""

    def __init__(self, tab, parent=None):
        super().__init__(parent or tab)
        self.setWindowTitle(f"Dedup windows — {tab.masker.free_text(tab.spec.name)}")
        self.setModal(False)
        self.view = WindowsView(tab, self)
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        v.addWidget(self.view)
        self.resize(1060, 640)
