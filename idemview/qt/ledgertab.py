"""One tab per open ledger: filter bar, incident overview, findings panel, operations grid, detail.

The tab owns a :class:`~idemview.qt.workers.Runner`; every question it asks the database goes through
it on a named channel (``open``, ``findings``, ``page``, ``count``, ``overview``, ``detail``), so a newer
question on a channel silently supersedes an older one. When the database fails, a banner says so in
plain words (with Reconnect when the connection was lost) and what was already shown stays on screen.
"""

from __future__ import annotations

import gc
from datetime import UTC, datetime

from PySide6.QtCore import QModelIndex, QObject, QRect, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QColor, QFontMetrics, QGuiApplication, QKeySequence, QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStyle,
    QStyledItemDelegate,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from idemview.domain.filters import Filter
from idemview.domain.model import LEDGER_KINDS, SEVERITY_ORDER, Finding, FindingKind
from idemview.qt import theme
from idemview.qt.detail import OperationDetail
from idemview.qt.elide import ElidedLabel
from idemview.qt.filterbar import FilterBar
from idemview.qt.models import (
    COL_EFFECTS,
    COL_FINDINGS,
    OP_COLUMNS,
    FindingsModel,
    FindingsRole,
    FindingStateRole,
    OperationsModel,
    RowRole,
)
from idemview.qt.overview import IncidentOverview
from idemview.qt.theme import plural
from idemview.qt.unmapped import UnmappedNotice
from idemview.qt.workers import JobError, Runner, run_detached
from idemview.services.compact import (
    apply_compact,
    compact_kinds_of,
    findings_of,
    narrow_compact,
    total_findings,
    total_operations,
)
from idemview.services.scanstate import ScanState
from idemview.services.session import (
    FilteredFindings,
    FindingsResult,
    Opened,
    OpenSpec,
    SharedMasker,
    count_matching,
    filtered_span,
    ledger_basics,
    load_detail,
    open_ledger,
    overview,
    reveal_state,
    reveal_value,
    scan,
)

UTC = UTC


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


class _ScanRelay(QObject):
    """Carries the findings process's messages from its reader thread to the GUI thread (queued)."""

    message = Signal(object)

    def emit(self, msg):
        try:
            self.message.emit(msg)
        except RuntimeError:  # the tab was closed while the process ran
            pass


class LedgerTab(QWidget):
    """Everything about one open ledger. ``ready`` fires once it is open and its first scan is in;
    ``message(str)`` feeds the status bar; ``title_changed`` when the tab label should change."""

    ready = Signal()
    failed = Signal(str)
    message = Signal(str)
    title_changed = Signal()
    opened_signal = Signal()  # the ledger is open (before its first scan is in)
    #: the saved connection needs a password nobody has (no keyring): the window asks (issue 20 §3);
    #: the argument says why ("" the first time, the refusal after a wrong one)
    password_wanted = Signal(str)
    #: set by the window: whether opening ``spec`` must ask for a password first
    password_check = None

    def __init__(self, spec: OpenSpec, masker: SharedMasker, parent=None):
        super().__init__(parent)
        self.spec, self.masker = spec, masker
        self.runner = Runner(self)
        self.opened: Opened | None = None
        self.findings: FindingsResult | None = None
        self.now: datetime | None = None
        self.flt = Filter()
        self._finding_pos = -1
        self._ordered: list[Finding] = []
        self._ready_sent = False
        self._scanning = False
        self.filtered_findings: FilteredFindings | None = None
        self._narrowed_res: FindingsResult | None = None
        self._scan = ScanState.start(datetime.now(UTC), {}, ())  # a scan of nothing until the first refresh
        self._merged_scan: ScanState | None = None  # the scan whose complete merge is shown
        # the per-operation finding state every view asks (pending / none / these: issue 20 §1)
        from idemview.services.findstate import FindingBoard

        self.board = FindingBoard()
        self._build()
        self.model.board = self.board
        self.board.subscribe(self._board_changed)
        self.runner.busy_changed.connect(self._busy)
        self._scan_relay = _ScanRelay(self)
        self._scan_relay.message.connect(self._on_scan_message)
        theme.TIME.changed.connect(self._show_as_of)

    # ---------------------------------------------------------------------------------- layout

    def _build(self):
        v = QVBoxLayout(self)
        v.setContentsMargins(4, 4, 4, 2)
        v.setSpacing(3)
        self.banner = Banner()
        self.banner.reconnect.clicked.connect(self.reconnect)
        v.addWidget(self.banner)
        info = QHBoxLayout()
        info.setContentsMargins(6, 0, 6, 0)
        self.badge = QLabel()
        self.badge.setObjectName("roBadge")
        # elided labels: a long connection name or detection reason can never widen the window
        self.where = ElidedLabel(f"Connecting to {self.spec.name}…", min_chars=12)
        self.detection = ElidedLabel(min_chars=8, mode=Qt.TextElideMode.ElideMiddle)
        self.detection.setAlignment(Qt.AlignmentFlag.AlignRight)
        info.addWidget(self.badge)
        info.addWidget(self.where, 3)
        self.unmapped = UnmappedNotice()  # raw values the layout does not map (issue 12)
        self.unmapped.toggled.connect(self._only_unmapped)
        info.addWidget(self.unmapped)
        info.addWidget(self.detection, 2)
        # issue 22: dedup windows measured from the data, in a window of their own (qt/windowsview.py)
        self.windows_button = QToolButton(text="Windows")
        self.windows_button.setToolTip("Is each kind's dedup window long enough for the retries that really happen?")
        self.windows_button.clicked.connect(self.show_windows)
        info.addWidget(self.windows_button)
        v.addLayout(info)
        self.filterbar = FilterBar()
        self.filterbar.changed.connect(self.set_filter)
        v.addWidget(self.filterbar)
        main = QSplitter(Qt.Orientation.Horizontal)
        left = QSplitter(Qt.Orientation.Vertical)
        top = QSplitter(Qt.Orientation.Horizontal)
        main.setObjectName("mainSplitter")
        left.setObjectName("leftSplitter")
        top.setObjectName("topSplitter")
        self.splitters = {"main": main, "left": left, "top": top}
        self.overview = IncidentOverview()
        self.overview.region_chosen.connect(self.filterbar.set_region)
        self.overview.region_cleared.connect(self._region_cleared)
        self.overview.range_wanted.connect(self._load_overview)
        self.overview.fit_filter_wanted.connect(self.fit_filter)
        self.overview.finding_clicked.connect(lambda f: self.open_operation(f.scope, f.key))
        top.addWidget(self.overview)
        fp = QWidget()
        fl = QVBoxLayout(fp)
        fl.setContentsMargins(0, 0, 0, 0)
        fl.setSpacing(2)
        self.findings_title = QLabel("<b>Findings</b> — scanning…")
        head = QHBoxLayout()
        head.addWidget(self.findings_title, 1)
        self.findings_help = QToolButton(text="?")
        self.findings_help.setToolTip("What each finding means (the selected one first)")
        self.findings_help.clicked.connect(self._findings_help)
        head.addWidget(self.findings_help, 0, Qt.AlignmentFlag.AlignTop)
        fl.addLayout(head)
        # the instant every finding on screen was computed for (F5 / live refresh move it)
        self.as_of = ElidedLabel("Findings as of —", min_chars=10)
        self.as_of.setObjectName("findingsAsOf")
        self.as_of.setToolTip(
            "Findings (stuck, expired, …) are computed for this instant; F5 re-scans "
            "for the current time. An export from this window records the same instant."
        )
        fl.addWidget(self.as_of)
        # DESIGN §5.1: which findings moved money, changed access, ... ("3 duplicate effects that moved money")
        self.group_by_action = QCheckBox("Group by what the action does")
        self.group_by_action.setObjectName("groupByAction")
        self.group_by_action.setToolTip(
            "One row per finding kind and action class (money, access, approval, …), from each operation's kind"
        )
        self.group_by_action.toggled.connect(self._group_toggled)
        fl.addWidget(self.group_by_action)
        self.findings_model = FindingsModel(self)
        self.findings_view = QTableView()
        self.findings_view.setModel(self.findings_model)
        self.findings_view.verticalHeader().hide()
        self.findings_view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.findings_view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.findings_view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.findings_view.verticalHeader().setDefaultSectionSize(21)
        hh = self.findings_view.horizontalHeader()
        hh.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        hh.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.findings_view.clicked.connect(self._finding_row_clicked)
        fl.addWidget(self.findings_view)
        # what the ledger itself keeps (secret_at_rest): about columns, not operations, so apart
        self.ledger_audit = QLabel()
        self.ledger_audit.setObjectName("ledgerAudit")
        self.ledger_audit.setWordWrap(True)
        self.ledger_audit.setTextFormat(Qt.TextFormat.RichText)
        self.ledger_audit.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.ledger_audit.hide()
        audit_scroll = QScrollArea()
        audit_scroll.setWidgetResizable(True)
        audit_scroll.setFrameShape(QFrame.Shape.NoFrame)
        audit_scroll.setWidget(self.ledger_audit)
        audit_scroll.setMaximumHeight(170)
        self._audit_scroll = audit_scroll
        audit_scroll.hide()
        fl.addWidget(audit_scroll)
        fp.setMaximumWidth(420)
        fp.setMinimumWidth(250)
        top.addWidget(fp)
        top.setStretchFactor(0, 3)
        top.setStretchFactor(1, 1)
        top.setSizes([640, 290])
        left.addWidget(top)
        gw = QWidget()
        gl = QVBoxLayout(gw)
        gl.setContentsMargins(0, 0, 0, 0)
        gl.setSpacing(2)
        self.model = OperationsModel(self.runner, self.masker, parent=self)
        self.model.loading_changed.connect(lambda _b: self._update_footer())
        self.model.page_loaded.connect(lambda _n: self._update_footer())
        self.model.error.connect(self.show_error)
        self.model.effects_error.connect(
            lambda err: self.message.emit("Effect records not counted: " + self.masker.free_text(err.message))
        )
        self.grid = QTableView()
        self.grid.setModel(self.model)
        self.grid.setObjectName("operationsGrid")
        self.grid.verticalHeader().hide()
        self.grid.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.grid.verticalHeader().setDefaultSectionSize(22)
        self.grid.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.grid.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.grid.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.grid.setAlternatingRowColors(True)
        self.grid.setWordWrap(False)
        self.grid.horizontalHeader().setSortIndicator(4, Qt.SortOrder.DescendingOrder)
        self.grid.setSortingEnabled(True)
        self.grid.horizontalHeader().setStretchLastSection(True)
        self.grid.setItemDelegateForColumn(COL_FINDINGS, BadgeDelegate(self.grid))
        # key and times never elided; at 1280 px the Effects column (issue #16 §4) still shows whole
        for i, w in enumerate((195, 70, 112, 100, 140, 140, 62, 56)):
            self.grid.setColumnWidth(i, w)
        self.grid.setColumnHidden(COL_EFFECTS, True)  # shown once the ledger's layout has [effects]
        self._current_timer = QTimer(self, singleShot=True, interval=120)
        self._current_timer.timeout.connect(self._open_current)
        # a *selected* row opens (focus alone makes a row current without selecting it)
        self.grid.selectionModel().selectionChanged.connect(self._grid_selection_changed)
        self.model.modelReset.connect(self._select_shown)
        self.model.page_loaded.connect(self._page_loaded_select)
        self.grid.doubleClicked.connect(self._grid_open)
        self.grid.activated.connect(self._grid_open)
        copy = QAction("Copy", self.grid)
        copy.setShortcut(QKeySequence.StandardKey.Copy)
        copy.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        copy.triggered.connect(self.copy_selection)
        self.grid.addAction(copy)
        self.copy_action = copy
        self.grid.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.grid.customContextMenuRequested.connect(self._grid_menu)
        gl.addWidget(self.grid, 1)
        foot = QHBoxLayout()
        foot.setContentsMargins(4, 0, 4, 0)
        self.footer = ElidedLabel(min_chars=10)
        self.cancel_btn = QToolButton(text="Cancel")
        self.cancel_btn.setToolTip("Stop the running queries (Esc)")
        self.cancel_btn.clicked.connect(self.cancel_all)
        self.cancel_btn.hide()
        foot.addWidget(self.footer, 1)
        foot.addWidget(self.cancel_btn)
        gl.addLayout(foot)
        left.addWidget(gw)
        left.setStretchFactor(0, 0)
        left.setStretchFactor(1, 1)
        left.setSizes([250, 450])
        main.addWidget(left)
        self.detail = OperationDetail()
        self.detail.reveal_requested.connect(self._detail_reveal)
        self.detail.link_requested.connect(self.copy_link)
        # In a scroll area: an operation with findings, effect records and attempts needs more height
        # than a 1280x800 screen leaves it, and its minimum must not grow the window past the screen.
        self.detail_scroll = QScrollArea()
        self.detail_scroll.setWidgetResizable(True)
        self.detail_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.detail_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.detail.setMinimumWidth(320)  # its width follows the pane (text wraps); only height scrolls
        self.detail_scroll.setWidget(self.detail)
        self.detail_scroll.setMinimumWidth(340)
        main.addWidget(self.detail_scroll)
        main.setStretchFactor(0, 3)
        main.setStretchFactor(1, 2)
        main.setSizes([1000, 380])  # the grid's nine columns want the width; the detail has a minimum
        v.addWidget(main, 1)
        self.restore_splitters()
        self._count: int | None = None
        self._update_footer()

    def save_splitters(self, st):
        """Write the splitter states into the QSettings ``st`` (shared by every tab)."""
        for name, sp in self.splitters.items():
            st.setValue(f"splitters/{name}", sp.saveState())

    def restore_splitters(self):
        from idemview.qt.settings import gui_settings

        st = gui_settings()
        for name, sp in self.splitters.items():
            v = st.value(f"splitters/{name}")
            if v is not None:
                sp.restoreState(v)

    # ------------------------------------------------------------------------------- opening

    def start(self, *, asked: bool = False):
        """Open the ledger on a worker; a saved connection whose password nobody has asks first."""
        spec = self.spec
        if not asked and self.password_check is not None and self.password_check(spec):
            self.where.setText(f"Waiting for the password of {self.masker.free_text(spec.name)}…")
            self.password_wanted.emit(getattr(self, "_refused", ""))
            return
        self._asked = asked
        # the whole-table counts come after the first page (_on_open): first rows first (issue 11 §3)
        self.runner.submit("open", lambda tok: open_ledger(spec, tok, basics=False), self._on_open, self._on_open_error)

    def _on_open(self, o: Opened):
        self.opened = o
        self.filterbar.setEnabled(True)  # after a failed first try (Reconnect)
        self.model.set_ledger(o.ledger)
        self.grid.setColumnHidden(COL_EFFECTS, not self.model.has_effects())
        if o.read_only:
            self.badge.setText(" READ-ONLY ")
            self.badge.setToolTip("The database session itself refuses writes (asked the live session)")
        else:
            self.badge.setText(" SESSION NOT READ-ONLY ")
            self.badge.setToolTip("This session did not confirm it is read-only: idemview still only reads")
        self._on_open_badge_only()
        self._show_where(o)
        self.detection.setText(self.masker.free_text(o.detection))
        self.detection.setToolTip(self.masker.free_text(o.detection))
        self.overview.set_span(*o.span)
        self.unmapped.show_counts(o.unmapped, self.masker)
        self.title_changed.emit()
        self.refresh(snapshot_again=False)
        if o.n_ops < 0:  # queued after the first page: counting millions of rows is not in its way
            ledger = o.ledger
            self.runner.submit(
                "basics",
                lambda tok: ledger_basics(ledger),
                lambda b, o=o: self._on_basics(o, b),
                lambda err: self.message.emit("Rows not counted: " + self.masker.free_text(err.message)),
            )
        self.opened_signal.emit()

    def _show_where(self, o: Opened):
        size = f"{plural(o.n_ops, 'operation')} · {plural(o.n_att, 'attempt')}" if o.n_ops >= 0 else "counting rows…"
        self.where.setText(f"{self.masker.free_text(self.spec.name)} · {o.where} · {size}")

    def _on_basics(self, o: Opened, basics):
        o.n_ops, o.n_att, o.unmapped = basics
        if o is self.opened:
            self._show_where(o)
            self.unmapped.show_counts(o.unmapped, self.masker)

    def _on_open_error(self, err: JobError):
        msg = self.masker.free_text(err.message)
        if getattr(self, "_asked", False):  # the typed password did not open it: nothing is kept
            self.spec.password, self._asked = None, False
            self._refused = f"The last try was refused: {msg}"
        self.where.setText(f"Could not open {self.masker.free_text(self.spec.name)}")
        # nothing is scanning and nothing can be filtered until it opens (a tester saw "scanning…"
        # forever and live chips on a tab that never connected)
        self.findings_title.setText("<b>Findings</b> — not read: the ledger could not be opened")
        self.findings_title.setWordWrap(True)  # the panel is narrow: the sentence wraps, not cut
        self.filterbar.setEnabled(False)
        self.show_error(JobError(msg, connection_lost=True))
        self.failed.emit(msg)

    def show_windows(self):
        """Open (or raise) this tab's dedup windows view and measure (issue 22)."""
        from idemview.qt.windowsview import WindowsDialog

        if getattr(self, "windows_dialog", None) is None:
            self.windows_dialog = WindowsDialog(self)
        self.windows_dialog.show()
        self.windows_dialog.raise_()
        self.windows_dialog.view.refresh()

    @property
    def ledger(self):
        return self.opened.ledger if self.opened else None

    def title(self) -> str:
        return self.spec.name

    # ------------------------------------------------------------------------------- refresh

    def refresh(self, live: bool = False, snapshot_again: bool = True):
        """Re-scan findings for the current time and reload what is shown (F5 / live refresh).

        A live refresh keeps the grid when the user has scrolled past the first page, so it never
        yanks rows away from under someone reading them."""
        if self.ledger is None:
            if not self.runner.is_pending("open"):
                self.start()
            return
        if not live and snapshot_again and self.ledger.source.is_snapshot:
            # A Redis ledger is a snapshot: F5 reads the keys again (_on_open then refreshes).
            if not self.runner.is_pending("open"):
                self.start()
            return
        # a link's `now` (idemview open --now) for the first scan; F5 then scans for the current time
        link_now, self._link_now = getattr(self, "_link_now", self.spec.now), None
        self.now = link_now or datetime.now(UTC).replace(microsecond=0)
        self._scanning = True
        self._show_as_of()
        ledger, now = self.ledger, self.now
        from idemview.findings.engine import FindingEngine

        unsupported = FindingEngine(ledger, now).unsupported()  # pure Python: no query
        old = self._scan
        if old.proc is not None:
            old.proc.cancel()
        st = self._scan = ScanState.start(now, unsupported)
        self.board.begin(st.pending)
        if st.pending and not self._scan_in_process(st):
            self._scan_in_threads(st, list(st.pending))
        if not st.pending:
            self._merge_scan(st)
        self.flt = self.filterbar.filter()
        if not live or self.model.rowCount() <= self.model.page_size:
            self._requery()
        self._load_overview()

    #: run the findings scan in a child process (#11 §3); threads are the fallback
    scan_process = True
    #: a multiprocessing (spawn) Event holding the child's scan until set: tests only
    scan_gate = None

    def _scan_in_threads(self, st: ScanState, kinds: list):
        # One job per finding kind, in parallel: the quick kinds show up at once and a kind whose SQL is
        # slow on this ledger (or times out) holds nothing else back.
        ledger, masker, now = self.ledger, self.masker, st.now
        st.started = True
        for k in kinds:
            self.runner.submit(
                f"findings:{k.value}",
                lambda tok, k=k: scan(ledger, masker, now, tok, [k]),
                lambda res, k=k, st=st: self._on_kind(st, k, res),
                lambda err, k=k, st=st: self._on_kind_error(st, k, err),
            )

    def _scan_in_process(self, st: ScanState) -> bool:
        """Start the scan of ``st``'s pending kinds in a child process (results come back in batches
        through :attr:`_scan_relay`); False when this ledger cannot be scanned that way."""
        url = self.spec.url
        if not self.scan_process or ":memory:" in str(url) or str(url).startswith(("redis", "rediss")):
            return False
        from idemview.services.scanproc import ScanProcess

        kinds = [k for k in FindingKind if k in st.pending]
        relay = self._scan_relay
        try:
            st.proc = ScanProcess(
                url,
                self.spec.password,
                self.ledger.layout,
                self.spec.name,
                st.now,
                kinds,
                self.masker.process_key(),
                on_message=lambda what, kind, payload: relay.emit((st, what, kind, payload)),
                on_exit=lambda err: relay.emit((st, "exit", None, err)),
                gate=self.scan_gate,
            )
        except Exception as e:  # noqa: BLE001 - e.g. a layout that cannot be pickled: use threads
            import logging

            logging.getLogger(__name__).info("findings scan in threads: %s", self.masker.free_text(str(e)))
            return False
        return True

    def _on_scan_message(self, msg):
        """GUI thread: file one batch (a list append) or one kind's end; merging happens on a worker."""
        st, what, kind, payload = msg
        if st is not self._scan:
            return
        if what == "batch":
            fs, expl = payload
            st.add_batch(kind, fs, expl)
            # Findings live until the next scan: out of the cyclic GC's generations as they arrive (O(1)).
            # A million of them (an aged ledger's expired keys) made every full collection walk them all
            # while holding the GIL: a 3 s event-loop stall (issue 11 §3, BENCHMARKS.md).
            gc.freeze()
        elif what == "keys":  # a kind too big to keep finding by finding: (severity, [(scope, key)])
            sev, refs = payload
            st.add_keys(kind, sev, refs)
            gc.freeze()
        elif what == "summary":
            st.add_summary(kind, payload)
        elif what == "done":
            st.kind_done(kind)
            self._merge_scan(st)
        elif what == "failed":
            self._on_kind_error(st, kind, JobError(payload))
        elif what in ("error", "exit") and payload and st.pending:
            # the process could not open the ledger (or died): the remaining kinds run in threads
            st.proc = None
            self._scan_in_threads(st, list(st.pending))

    def _requery(self):
        self.model.set_query(self.flt, self.now, None)
        self._count = None
        ledger, flt, now = self.ledger, self.flt, self.now
        if ledger is None:
            return

        scanned = self.model.scanned_for(flt)

        def count(tok):
            return count_matching(ledger, flt, now, scanned)

        self.runner.submit("count", count, self._on_count, lambda e: None)
        self._update_footer()

    def _on_count(self, n: int):
        self._count = n
        self._update_footer()

    def _on_kind(self, st: ScanState, kind: FindingKind, res: FindingsResult):
        if st is not self._scan:
            return
        st.kind_done(kind, res.findings, res.explanations)
        self._merge_scan(st)

    def _on_kind_error(self, st: ScanState, kind: FindingKind, err: JobError):
        if st is not self._scan:
            return
        if st.kind_failed(kind, err.message, cancelled=err.cancelled):
            self.show_error(JobError(f"{theme.KIND_WORDS[kind]} could not be checked: {err.message}"))
        self._merge_scan(st)

    def scan_complete(self) -> bool:
        # the findings shown must come from a merge made after the last kind arrived: an earlier
        # partial merge can land after the pending set emptied (the full merge still on its worker)
        return (
            self.findings is not None
            and self._scan.complete
            and self._merged_scan is self._scan
            and self.findings_settled()
        )

    def findings_settled(self) -> bool:
        """Chips, panel, markers and F8 show the current findings narrowed to the current filter."""
        return (
            self.filtered_findings is not None
            and self._narrowed_res is self.findings
            and not self.runner.is_pending("narrow")
        )

    def _merge_scan(self, st: ScanState):
        # Kinds finish one by one; merging (and redrawing badges, chips, markers) once per burst rather
        # than once per kind keeps the GUI thread's share of a big scan small.
        if getattr(self, "_merge_timer", None) is None:
            from PySide6.QtCore import QTimer

            self._merge_timer = QTimer(self, singleShot=True, interval=80)
            self._merge_timer.timeout.connect(lambda: self._do_merge(self._scan))
        if st.complete:
            self._merge_timer.stop()
            self._do_merge(st)
        elif not self._merge_timer.isActive():
            self._merge_timer.start()

    def _do_merge(self, st: ScanState):
        if st is not self._scan:
            return
        from idemview.services.session import merge_findings

        m = st.merge_inputs()  # a snapshot: what arrives later goes into the next merge
        # Grouping and sorting tens of thousands of findings runs on a worker; the GUI only swaps in
        # the result (stale merges are dropped by the runner's per-channel generation).
        self.runner.submit(
            "merge",
            lambda tok: apply_compact(merge_findings(m.now, m.findings, m.unsupported, m.explanations), m.compact),
            lambda res, st=st: (
                self._on_findings(res, st if m.complete else None, m.pending, m.failed) if st is self._scan else None
            ),
            lambda err: self.show_error(err),
        )

    def _on_findings(
        self, res: FindingsResult, complete_scan: ScanState | None = None, pending=frozenset(), failed=None
    ):
        old = getattr(self.findings, "compact", None) or {}
        keep = {id(c) for c in (getattr(res, "compact", None) or {}).values()}
        keep |= {id(c) for c in self._scan.compact.values()}
        # an older scan's key sets: emptied on a worker once nothing shows them (see _on_narrowed)
        self._to_release = getattr(self, "_to_release", []) + [c for c in old.values() if id(c) not in keep]
        self.findings = res
        self._merged_scan = complete_scan
        # a finding filter still waiting on its SQL gets the scan's answer instead (issue 11 §3)
        requery = self.model.waits_on_finding_sql() and self.model.scan_answers(self.flt, res)
        self.model.refresh_findings(res)
        if requery:
            self._requery()
        self.board.publish(res, pending, failed)  # the detail, grid, chips and search hits follow
        gc.freeze()  # findings live until the next scan; keep full GC passes from walking them (GIL)
        self._scanning = bool(self._scan.pending) or complete_scan is None
        self._show_as_of()
        # chips, panel, markers and F8 show the findings of what the filter shows: narrowed on a worker
        self._narrow()
        if self._scanning:
            return
        if not self._ready_sent:
            self._ready_sent = True
            self.ready.emit()
        self.message.emit(f"{self.spec.name}: {plural(total_findings(res), 'finding')}")

    def _show_as_of(self):
        """ "Findings as of 12:03:10 UTC": the `now` of the scan on screen (and of an export from here)."""
        if self.now is None:
            self.as_of.setText("Findings as of —")
            return
        shown = self.findings.now if self.findings is not None else self.now
        text = f"Findings as of {theme.TIME.fmt_short(shown)} {theme.TIME.zone()}"
        if self.findings is None or self.findings.now != self.now or self._scanning:
            text = f"Findings as of {theme.TIME.fmt_short(self.now)} {theme.TIME.zone()} · scanning…"
        self.as_of.setText(text)
        self.as_of.setToolTip(
            f"Computed for now = {theme.TIME.fmt(self.now)} {theme.TIME.zone()}; F5 "
            "re-scans for the current time; an export from this window records it"
        )

    def _narrow(self):
        """Findings of the filtered operations, computed on a worker (SQL look-ups of the keys that
        carry findings); the result lands in :meth:`_on_narrowed`."""
        res = self.findings
        if res is None:
            return
        ledger, flt, now = self.ledger, self.flt, res.now
        self.runner.submit(
            "narrow",
            lambda tok: narrow_compact(ledger, res, flt, now, tok),
            lambda ff, res=res: self._on_narrowed(res, ff) if res is self.findings else None,
            self.show_error,
        )

    def _on_narrowed(self, res: FindingsResult, ff: FilteredFindings):
        self.filtered_findings = ff
        self._narrowed_res = res
        gone, self._to_release = getattr(self, "_to_release", []), []
        if gone:  # F8 walks this scan now: the previous one's key sets can go, in small steps
            import threading

            # no database, nothing to report: a plain thread (a Runner job would show as "working")
            threading.Thread(
                target=lambda: [c.release() for c in gone], name="idemview-release-keys", daemon=True
            ).start()
        sev = {k: s for k, s, _n in res.kind_rows}
        self.filterbar.set_counts(ff.counts, res.unsupported, ff.totals if ff.base_filtered else None, sev)
        self.findings_model.set_result(res, ff)
        self._show_ledger_audit(res)
        n_ops = total_operations(res)
        if ff.base_filtered:
            head = (
                f"<b>Findings</b> — {ff.n_findings:,} of {plural(ff.n_total, 'finding')} in the filter "
                f"({plural(n_ops, 'operation')} in all)"
            )
        else:
            head = f"<b>Findings</b> — {plural(ff.n_total, 'finding')} on {plural(n_ops, 'operation')}"
        if self._scanning:
            head += " · scanning…"
        self.findings_title.setText(head)
        self.findings_title.setToolTip(
            "Counts follow the filter and the time window; click a row to show only those operations"
        )
        self.overview.set_findings(ff.markers, res.explanations)
        self._ordered = ff.ordered  # a FindingWalk when kinds were sent as keys (no million-list)
        self._finding_pos = -1

    def _load_overview(self, start=None, end=None):
        if self.ledger is None:
            return
        r = (start, end) if start is not None else self.overview.view_range()
        if not r or r[1] <= r[0]:
            return
        ledger, flt, now = self.ledger, self.flt, self.now or datetime.now(UTC)
        self.runner.submit(
            "overview", lambda tok: overview(ledger, r[0], r[1], flt, now), self.overview.set_histogram, self.show_error
        )

    # -------------------------------------------------------------------------------- filter

    def set_filter(self, flt: Filter):
        self.flt = flt
        # one source of truth: the chart's window band shows the filter's time window and nothing else
        if flt.since is None and flt.until is None:
            self.overview.clear_region(emit=False)
        elif self.filterbar.range_is_region():
            self.overview.show_window(flt.since, flt.until)
        else:
            self.overview.clear_region(emit=False)
        if self.ledger is None:
            return
        self._requery()
        self._load_overview()
        self._narrow()

    def fit_filter(self):
        """Refit the chart to the span of the filtered operations (a query on a worker)."""
        if self.ledger is None:
            return
        ledger, flt, now = self.ledger, self.flt, self.now or datetime.now(UTC)
        self.runner.submit(
            "fit",
            lambda tok: filtered_span(ledger, flt, now),
            lambda span: (
                self.overview.fit_to(*span)
                if span[0]
                else self.message.emit("No operation matches the filter: nothing to fit")
            ),
            self.show_error,
        )

    def _only_unmapped(self, on: bool):
        self.filterbar._flt.unmapped_status = on
        self.filterbar._emit()

    def _region_cleared(self):
        self.filterbar.clear_time()

    def _findings_help(self):
        from idemview.qt.helpdialog import show_findings_help

        idx = self.findings_view.currentIndex()
        show_findings_help(self, self.findings_model.kind_at(idx.row()) if idx.isValid() else None)

    def _finding_row_clicked(self, idx: QModelIndex):
        kind = self.findings_model.kind_at(idx.row())
        if kind in LEDGER_KINDS:
            return  # about the ledger's columns: no operation to show (see "Ledger audit")
        action = self.findings_model.action_at(idx.row())
        if kind is not None and action is not None:
            self.filterbar.set_actions([action], [kind])
        elif kind is not None and self.findings and kind not in self.findings.unsupported:
            self.filterbar.set_findings([kind])

    def _group_toggled(self, on: bool):
        self.findings_model.by_action = on
        if self.findings is not None:
            self.findings_model.set_result(self.findings, None if on else getattr(self, "filtered_findings", None))

    def _show_ledger_audit(self, res):
        """The panel's "Ledger audit": one line per column (and JSON path) holding secrets at rest."""
        from html import escape

        from idemview.services.actions_view import ledger_audit

        items = ledger_audit(res.findings) if res is not None else []
        if not items:
            self.ledger_audit.hide()
            self._audit_scroll.hide()
            return
        lines = "".join(f"<li><b>{escape(col)}</b>: {escape(what)}</li>" for col, what, _a in items)
        advice = sorted({a for _c, _w, a in items if a})
        self.ledger_audit.setText(
            f"<b>Ledger audit</b> — {plural(len(items), 'column')} keep secrets in plain text "
            f"(a sample of the newest rows)<ul style='margin-left:-20px'>{lines}</ul>"
            "<b>What to change</b>: " + escape("; ".join(advice)) + "."
        )
        self.ledger_audit.show()
        self._audit_scroll.show()

    def filter_by_finding(self, kind: FindingKind):
        self.filterbar.set_findings([kind])

    # -------------------------------------------------------------------------------- detail

    def _grid_open(self, idx: QModelIndex):
        r = self.model.data(idx, RowRole)
        if r is not None:
            self.open_operation(r.scope_raw, r.key_raw)

    def open_operation(self, scope: str, key: str, *, reload: bool = False):
        """Show the operation (scope, key) in the detail pane (read on a worker). Its findings and
        their state come from :attr:`board`; ``reload``: the same operation again because its finding
        state changed (the pane keeps its scroll position; a new operation starts at the top)."""
        if self.ledger is None:
            return
        ledger, masker = self.ledger, self.masker
        state = self.board.state_of((scope, key))
        res = self.board.result
        fs = list(res.by_ref.get((scope, key), [])) if res else []
        expl = res.explanations if res else {}
        # kinds the scan sent as keys (issue 11 §3): this operation's findings of them, computed now
        compact = getattr(res, "compact", None)
        more = [k for k in compact_kinds_of(compact, (scope, key)) if all(f.kind != k for f in fs)]
        now = res.now if res else None

        def job(tok):
            if not more or now is None:
                return load_detail(ledger, masker, scope, key, fs, expl, state)
            extra, extra_expl = findings_of(ledger, masker, now, scope, key, more)
            allf = sorted(fs + extra, key=lambda f: SEVERITY_ORDER[f.severity])
            ex = {id(f): expl[id(f)] for f in fs if id(f) in expl}
            ex.update(extra_expl)
            return load_detail(ledger, masker, scope, key, allf, ex, state)

        def shown(d):
            self.detail.set_detail(d, now or self.now)
            if not reload:  # F8, a search hit, a click: the new operation is read from its top
                self.detail_scroll.verticalScrollBar().setValue(0)

        self.runner.submit("detail", job, shown, self.show_error)
        self._shown_ref = (scope, key)
        if not reload:
            self._select_shown(scroll=True)

    def _board_changed(self):
        """The scan published: views that show a finding state follow without being re-opened."""
        self.filterbar.set_board(self.board)
        d = self.detail.detail
        if d is None or self.ledger is None:
            return
        new = self.board.state_of((d.scope_raw, d.key_raw))
        old = getattr(d, "state", None)
        if old is None or old.signature != new.signature:
            if (d.scope_raw, d.key_raw) == getattr(self, "_shown_ref", None):
                self.open_operation(d.scope_raw, d.key_raw, reload=True)

    def _select_shown(self, scroll: bool = False):
        """Select the operation the detail shows in the grid when it is loaded there, else select
        nothing: the grid never highlights one operation while the detail shows another."""
        self._rows_seen = self.model.rowCount()
        ref = getattr(self, "_shown_ref", None)
        sm = self.grid.selectionModel()
        self._syncing = True
        try:
            for i, row in enumerate(self.model.rows()):
                if ref is not None and (row.scope_raw, row.key_raw) == ref:
                    if self.grid.currentIndex().row() != i or not sm.isRowSelected(i):
                        self.grid.selectRow(i)
                    if scroll:
                        self.grid.scrollTo(self.model.index(i, 0))
                    return
            sm.clearSelection()
            sm.setCurrentIndex(QModelIndex(), sm.SelectionFlag.NoUpdate)
        finally:
            self._syncing = False

    def _page_loaded_select(self, n: int):
        # only the rows this page added are looked at (a loop over 20,000 loaded rows per page would
        # be GUI-thread time for nothing): the shown operation may have just arrived
        ref = getattr(self, "_shown_ref", None)
        start = getattr(self, "_rows_seen", 0)
        self._rows_seen = n
        if ref is None or self.grid.selectionModel().hasSelection():
            return
        rows = self.model.rows()
        for i in range(min(start, len(rows)), len(rows)):
            if (rows[i].scope_raw, rows[i].key_raw) == ref:
                self._syncing = True
                try:
                    self.grid.selectRow(i)
                finally:
                    self._syncing = False
                return

    def _grid_selection_changed(self, *_):
        # a row selected by click or arrow keys opens in the detail (debounced: holding an arrow key
        # asks once when it stops)
        if getattr(self, "_syncing", False):
            return
        rows = self.grid.selectionModel().selectedRows()
        if len(rows) != 1:
            return
        self._pending_current = rows[0].row()
        self._current_timer.start()

    def _open_current(self):
        i = getattr(self, "_pending_current", -1)
        if 0 <= i < self.model.rowCount():
            r = self.model.row(i)
            if (r.scope_raw, r.key_raw) != getattr(self, "_shown_ref", None):
                self.open_operation(r.scope_raw, r.key_raw)

    def step_finding(self, step: int):
        """F8 / Shift+F8: open the next / previous finding, most severe first."""
        if not self._ordered:
            self.message.emit("No findings to walk through")
            return
        self._finding_pos = (self._finding_pos + step) % len(self._ordered)
        f = self._ordered[self._finding_pos]
        self.open_operation(f.scope, f.key)
        self.message.emit(
            f"Finding {self._finding_pos + 1} of {len(self._ordered)}: {f.severity.value} {theme.KIND_WORDS[f.kind]}"
        )

    # --------------------------------------------------------------------------------- errors

    def show_error(self, err: JobError):
        if err.cancelled:
            self.message.emit("Cancelled")
            return
        self.banner.show_error(self.masker.free_text(err.message), err.connection_lost)
        self.message.emit(self.masker.free_text(err.message))

    def reconnect(self):
        self.banner.hide()
        if self.opened is None:
            self.start()
            return
        engine = self.opened.engine

        def ping(tok):
            from idemview.ledger.connect import session_is_read_only

            # on the worker: closing dead pooled sockets can block; new ones are opened read-only again
            engine.dispose()
            return session_is_read_only(engine)

        self.runner.submit("open", ping, lambda _ro: self.refresh(), self.show_error)

    def cancel_all(self):
        """Esc / Cancel: stop this tab's queries and the findings scan (silent when nothing runs: Esc also
        closes a dropdown, which must not print "Cancelled the running queries")."""
        st = self._scan
        if not self.runner.pending() and not (st.proc is not None and st.pending):
            return
        self.runner.cancel()
        if st.proc is not None and st.pending:
            # what the process had sent stays; the kinds it had not finished say "cancelled"
            st.cancel()
            self._merge_scan(st)
        self.model._set_loading(False)
        self._update_footer()
        self.message.emit("Cancelled the running queries; what was shown stays")

    def _busy(self, busy: bool):
        self.cancel_btn.setVisible(busy)
        self._update_footer()

    def _update_footer(self):
        n = self.model.rowCount()
        parts = []
        if self._count is not None:
            parts.append(f"{plural(self._count, 'operation')} match{'es' if self._count == 1 else ''} · {n:,} loaded")
        else:
            parts.append(f"{n:,} loaded")
        if self.model.is_loading():
            parts.append("loading…")
        elif not self.model.is_exhausted() and n:
            parts.append("scroll for more")
        busy = self.runner.pending()
        if self._scan.proc is not None and self._scan.pending:
            busy = busy + ["findings"]
        if busy and not self.model.is_loading():
            parts.append("working: " + ", ".join(busy))
        self.footer.setText(" · ".join(parts))

    def copy_link(self) -> str | None:
        """ "Copy link": the ``idemview open …`` command for the operation in the detail, with the layout
        and the `now` of the findings on screen (:mod:`idemview.services.links`; no password; the raw key,
        since a masked one would find nothing — refused when the key is a credential)."""
        from idemview.services.session import deep_link

        d = self.detail.detail
        if d is None:
            return None
        if self.masker.is_credential("idempotency_key", d.key_raw):
            self.message.emit("Not copied: this idempotency key looks like a credential")
            return None
        res = self.board.result
        link = deep_link(self.spec, d.scope_raw, d.key_raw, layout=self.ledger.layout, now=res.now if res else self.now)
        QGuiApplication.clipboard().setText(link)
        self.message.emit("Copied a link to this operation: " + self.masker.free_text(link))
        return link

    def open_key(self, key: str, scope: str | None = None):
        """Open the operation with exactly this idempotency key (a deep link): filter the grid to it and
        open it in the detail; without ``scope`` the ledger is asked which scope holds it."""
        self.filterbar.set_key(key)
        if scope is not None:
            self.open_operation(scope, key)
            return
        from idemview.ledger.reader import find_operations

        ledger = self.ledger

        def find(tok):
            return [(o.scope, o.key) for o in find_operations(ledger, key, limit=50) if o.key == key]

        def found(refs):
            if refs:
                self.open_operation(*refs[0])
            else:
                self.message.emit("No operation with that idempotency key in this ledger")

        self.runner.submit("link", find, found, self.show_error)

    def copy_selection(self):
        """Copy the selected row as shown (masked values stay masked on the clipboard)."""
        idx = self.grid.currentIndex()
        if not idx.isValid():
            return
        vals = [
            str(self.model.data(self.model.index(idx.row(), c)) or "")
            for c in range(len(OP_COLUMNS))
            if not self.grid.isColumnHidden(c)
        ]
        QGuiApplication.clipboard().setText("\t".join(vals))

    # -------------------------------------------------------------------------- reveal one cell

    def grid_reveal_action(self, index: QModelIndex, parent=None) -> QAction | None:
        """ "Reveal this value" for a grid cell: enabled for a masked non-credential value, disabled with
        "credentials are never revealed" otherwise. The value is re-read on a worker (never kept)."""
        field = OperationsModel.REVEALABLE.get(index.column()) if index.isValid() else None
        if field is None:
            return None
        a = QAction("Reveal this value", parent or self.grid)
        if self.model.is_revealed(index.row(), index.column()):
            a.setEnabled(False)
            a.setToolTip("already revealed")
            return a
        ok, tip = reveal_state(str(index.data() or ""))
        a.setEnabled(ok)
        a.setToolTip(tip)
        r, row, col = self.model.row(index.row()), index.row(), index.column()

        def go():
            self.reveal(
                r.scope_raw,
                r.key_raw,
                ("op", field),
                r.row_id,
                lambda v: (
                    self.model.set_revealed(row, col, v)
                    if self.model.rowCount() > row and self.model.row(row) is r
                    else None
                ),
            )

        a.triggered.connect(go)
        return a

    def _grid_menu(self, pos):
        from PySide6.QtWidgets import QMenu

        menu = QMenu(self.grid)
        menu.setToolTipsVisible(True)
        menu.addAction(self.copy_action)
        a = self.grid_reveal_action(self.grid.indexAt(pos), menu)
        if a is not None:
            menu.addAction(a)
        menu.popup(self.grid.viewport().mapToGlobal(pos))

    def _detail_reveal(self, req):
        scope, key, where = req
        self.reveal(scope, key, where, None, lambda v: self.detail.show_revealed(scope, key, where, v))

    def reveal(self, scope, key, where, row_id, on_value):
        """Re-read one value unmasked on a worker; a refusal (credential) goes to the status bar."""
        if self.ledger is None:
            return
        ledger, masker = self.ledger, self.masker

        def refused(err: JobError):
            msg = (
                err.message.split(": ", 1)[1]
                if err.message.startswith("RevealRefused: ")
                else self.masker.free_text(err.message)
            )
            self.last_reveal_refusal = msg
            self.message.emit(f"Not revealed: {msg}")

        self.runner.submit(
            "reveal", lambda tok: reveal_value(ledger, masker, scope, key, where, row_id), on_value, refused
        )

    def close_tab(self):
        """Stop this tab's work; its connections are closed on a worker thread (``engine.dispose()``
        can block on a dead server's sockets), so closing a tab never waits for the database."""
        if self._scan.proc is not None:
            self._scan.proc.cancel()
        self.runner.cancel()
        if self.opened is not None:
            # connections and the SSH tunnel, if any: off the GUI thread (dispose can wait on the network)
            run_detached(self.opened.close, "closing the ledger's connections")

    def restyle(self):
        self.overview.restyle()
        self.filterbar._render_chips()
        if self.opened:
            self._on_open_badge_only()
        self.detail._rerender()
        self.grid.viewport().update()

    def _on_open_badge_only(self):
        o = self.opened
        col = (
            theme.colour(theme.OUTCOME_COLOURS, theme.Outcome.SUCCEEDED).name()
            if o.read_only
            else theme.colour(theme.SEVERITY_COLOURS, theme.Severity.HIGH).name()
        )
        fg = "black" if theme.is_dark() else "white"
        self.badge.setStyleSheet(
            f"#roBadge {{ background: {col}; color: {fg}; border-radius: 3px; font-weight: bold; padding: 1px 4px; }}"
        )
