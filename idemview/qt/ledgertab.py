"""One tab per open ledger: filter bar, incident overview, findings panel, operations grid, detail.

The tab owns a :class:`~idemview.qt.workers.Runner`; every question it asks the database goes through
it on a named channel (``open``, ``findings``, ``page``, ``count``, ``overview``, ``detail``), so a newer
question on a channel silently supersedes an older one. When the database fails, a banner says so in
plain words (with Reconnect when the connection was lost) and what was already shown stays on screen.
"""

from __future__ import annotations

from datetime import UTC, datetime

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QScrollArea,
    QSplitter,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from idemview.domain.filters import Filter
from idemview.domain.model import Finding
from idemview.qt import theme
from idemview.qt.detail import OperationDetail
from idemview.qt.elide import ElidedLabel
from idemview.qt.filterbar import FilterBar
from idemview.qt.models import COL_EFFECTS, COL_FINDINGS, OperationsModel
from idemview.qt.overview import IncidentOverview
from idemview.qt.tabdetail import DetailViews
from idemview.qt.tabparts import BadgeDelegate, Banner  # noqa: F401 - BadgeDelegate: imported from here too
from idemview.qt.tabscan import ScanViews
from idemview.qt.theme import plural
from idemview.qt.unmapped import UnmappedNotice
from idemview.qt.workers import JobError, Runner, run_detached
from idemview.services.leanengine import bound_sqlite_memory
from idemview.services.scanservice import ProcessArgs, ScanService
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
    open_ledger,
    overview,
)

UTC = UTC

#: The grid's column widths at first (px): key and times never elided; at 1280 px the Effects column
#: (issue #16 §4) still shows whole.
GRID_WIDTHS = (195, 70, 112, 100, 140, 140, 62, 56)
#: The detail pane's least width (px): its text wraps to the pane, only its height scrolls.
DETAIL_MIN = 260
#: Its width when it unfolds for the first operation opened (a 36-character key shows whole).
DETAIL_OPEN = 380
#: When a ledger opens, the first page is asked alone; the findings process, the counts and the chart
#: start when it is in, or after this many ms when it is slow (issue 27 item 3: first rows <= 0.5 s).
FIRST_PAGE_WAIT_MS = 2000
#: Esc leaves these channels alone: they bring the scan's answer (also "cancelled" per kind) to the views
LANDING_CHANNELS = ("merge", "narrow")


class LedgerTab(ScanViews, DetailViews, QWidget):
    """Everything about one open ledger. ``ready`` fires once it is open and its first scan is in;
    ``message(str)`` feeds the status bar; ``title_changed`` when the tab label should change.

    The findings side (:class:`~idemview.qt.tabscan.ScanViews`: the panel, the relay from the
    :class:`~idemview.services.scanservice.ScanService`) and the operation side
    (:class:`~idemview.qt.tabdetail.DetailViews`: detail, selection, links, reveal) are mixins."""

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
        self._first_rest = None  # what waits for the first page when the ledger opens (_defer_to_first_page)
        self.filtered_findings: FilteredFindings | None = None
        self._narrowed_res: FindingsResult | None = None
        # the scan as a service (no Qt): its state, its transport (process or threads), its merges
        self.scans = ScanService(self.runner)
        self._merged_scan: ScanState | None = None  # the scan whose complete merge is shown
        # the per-operation finding state every view asks (pending / none / these: issue 20 §1)
        from idemview.services.findstate import FindingBoard

        self.board = FindingBoard()
        self._build()
        self.model.board = self.board
        self.board.subscribe(self._board_changed)
        self._connect_scans()
        self.runner.busy_changed.connect(self._busy)
        # the footer's "working: …" drops a finished job at once (it named "basics" long after the count)
        self.runner.pending_dropped.connect(self._job_dropped)
        theme.TIME.changed.connect(self._show_as_of)

    # ---------------------------------------------------------------------------------- layout

    def _build(self):
        v = QVBoxLayout(self)
        v.setContentsMargins(4, 4, 4, 2)
        v.setSpacing(3)
        self.banner = Banner()
        self.banner.reconnect.clicked.connect(self.reconnect)
        v.addWidget(self.banner)
        v.addLayout(self._build_info())
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
        top.addWidget(self._build_findings_panel())
        # the panel keeps the width its rows need; the chart gains or gives up the rest (when the detail
        # opens, it gave the panel its minimum and cut the finding names)
        top.setStretchFactor(0, 1)
        top.setStretchFactor(1, 0)
        top.setSizes([640, self.findings_panel_width()])
        left.addWidget(top)
        left.addWidget(self._build_grid())
        left.setStretchFactor(0, 0)
        left.setStretchFactor(1, 1)
        left.setSizes([250, 450])
        main.addWidget(left)
        main.addWidget(self._build_detail())
        main.setStretchFactor(0, 1)
        main.setStretchFactor(1, 0)
        # Until an operation is opened the detail pane is folded away and its hint is in the footer:
        # it took a third of the window for a two-line hint, and the grid scrolled sideways
        # (_unfold_detail opens it at DETAIL_OPEN px). A width the user chose is remembered instead.
        main.setCollapsible(1, True)
        main.setSizes([sum(GRID_WIDTHS) + 190, 0])
        v.addWidget(main, 1)
        if not self.restore_splitters():
            main.setSizes([sum(GRID_WIDTHS) + 190, 0])
        self._count: int | None = None
        self._update_footer()

    def _build_info(self) -> QHBoxLayout:
        """The line under the banner: read-only badge, where, unmapped values, detection, Windows."""
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
        return info

    def _build_grid(self) -> QWidget:
        """The operations grid (a lazy model over keyset pages) and its footer with Cancel."""
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
        for i, w in enumerate(GRID_WIDTHS):
            self.grid.setColumnWidth(i, w)
        self.grid.setColumnHidden(COL_EFFECTS, True)  # shown once the ledger's layout has [effects]
        self._current_timer = QTimer(self, singleShot=True, interval=120)
        self._current_timer.timeout.connect(self._open_current)
        # a *selected* row opens (focus alone makes a row current without selecting it)
        self.grid.selectionModel().selectionChanged.connect(self._grid_selection_changed)
        self.model.modelReset.connect(self._select_shown)
        self.model.dataChanged.connect(self._open_when_held)  # a row clicked while its page was "…"
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
        return gw

    def _build_detail(self) -> QScrollArea:
        """The detail pane, in a scroll area: an operation with findings, effect records and attempts
        needs more height than a 1280x800 screen leaves it, and its minimum must not grow the window."""
        self.detail = OperationDetail()
        self.detail.reveal_requested.connect(self._detail_reveal)
        self.detail.link_requested.connect(self.copy_link)
        self.detail_scroll = QScrollArea()
        self.detail_scroll.setWidgetResizable(True)
        self.detail_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.detail_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.detail.setMinimumWidth(DETAIL_MIN - 20)  # its width follows the pane (text wraps); only height scrolls
        self.detail_scroll.setWidget(self.detail)
        self.detail_scroll.setMinimumWidth(DETAIL_MIN)
        return self.detail_scroll

    def save_splitters(self, st):
        """Write the splitter states into the QSettings ``st`` (shared by every tab)."""
        for name, sp in self.splitters.items():
            st.setValue(f"splitters/{name}", sp.saveState())

    def restore_splitters(self) -> bool:
        """Restore the splitters' remembered states; True when the main splitter had one."""
        from idemview.qt.settings import gui_settings

        st = gui_settings()
        main = False
        for name, sp in self.splitters.items():
            v = st.value(f"splitters/{name}")
            if v is not None:
                sp.restoreState(v)
                main = main or name == "main"
        return main

    def _unfold_detail(self) -> None:
        """Open the folded detail pane (an operation is being shown) at :data:`DETAIL_OPEN` px."""
        main = self.splitters["main"]
        sizes = main.sizes()
        if len(sizes) == 2 and sizes[1] == 0:
            total = sum(sizes)
            main.setSizes([max(total - DETAIL_OPEN, 0), DETAIL_OPEN])

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
        # a window stays open: a small SQLite page cache and no file map (services/leanengine.py)
        bound_sqlite_memory(o.engine)
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
        self.refresh(snapshot_again=False, first=True)
        self.opened_signal.emit()

    def _count_basics(self, o: Opened) -> None:
        """The whole-ledger counts (operations, attempts, unmapped values) of a live database, asked after
        the first page: counting millions of rows is not in its way."""
        if o.n_ops >= 0 or o is not self.opened or self.runner.is_pending("basics"):
            return
        ledger = o.ledger
        self.runner.submit(
            "basics",
            lambda tok: ledger_basics(ledger),
            lambda b, o=o: self._on_basics(o, b),
            lambda err, o=o: self._basics_failed(o, err),
        )

    def _basics_failed(self, o: Opened, err: JobError) -> None:
        msg = self.masker.free_text(err.message)
        self.message.emit("Rows not counted: " + msg)
        if o is self.opened:  # never "counting rows…" once nothing counts (a tester's broken file)
            self._show_where(o, uncounted="rows not counted (F5 tries again)")

    def _show_where(self, o: Opened, uncounted: str = "counting rows…"):
        """The line under the banner; ``uncounted`` stands for the counts not known: "counting rows…" only
        while they are being counted (Esc or a failure says so instead; F5 counts again)."""
        size = f"{plural(o.n_ops, 'operation')} · {plural(o.n_att, 'attempt')}" if o.n_ops >= 0 else uncounted
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

    def refresh(self, live: bool = False, snapshot_again: bool = True, first: bool = False):
        """Re-scan findings for the current time and reload what is shown (F5 / live refresh).

        A live refresh keeps the grid when the user has scrolled past the first page, so it never
        yanks rows away from under someone reading them. ``first`` (the ledger has just opened): the
        first page is asked alone and the scan, the counts and the chart follow it
        (:meth:`_defer_to_first_page`)."""
        self._first_rest = None  # a refresh replaces what an opening still had waiting
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
        self.flt = self.filterbar.filter()
        if first:
            self._requery(count=False)
            o = self.opened

            def rest() -> None:
                self.scans.start(ledger, self.masker, now, unsupported, self._process_args())
                self._submit_count()
                self._load_overview()
                if o is not None:
                    self._count_basics(o)

            self._defer_to_first_page(rest)
            return
        self.scans.start(ledger, self.masker, now, unsupported, self._process_args())
        if not live or self.model.rowCount() <= self.model.page_size:
            self._requery()
        self._load_overview()
        if self.opened is not None:
            # not counted yet: F5 during the first-page wait took the opening's count away, and Esc stops
            # it (a tester saw "counting rows…" forever with nothing counting)
            self._show_where(self.opened)
            self._count_basics(self.opened)

    def _defer_to_first_page(self, rest) -> None:
        """Run ``rest`` once the first page is in (or failed), or after :data:`FIRST_PAGE_WAIT_MS`.

        Why (issue 27 item 3, BENCHMARKS.md "A lean window"): on two loaded cores the findings process's
        interpreter start and imports, a whole-ledger count and the chart's query all ran beside the first
        page (43 ms of CPU alone) and made it arrive 1.4 s after the open. Until the scan starts, the
        board says every kind is pending, so no view says "none" meanwhile (issue 20 §1). A refresh, a
        cancel or closing the tab takes ``rest`` away (:meth:`_take_first_rest`)."""
        self._first_rest = rest
        timer = QTimer(self, singleShot=True, interval=FIRST_PAGE_WAIT_MS)

        def later() -> None:
            go = self._take_first_rest(rest)
            if go is not None:
                go()

        def fire(*_a) -> None:
            timer.stop()
            for sig, slot in ((self.model.page_loaded, fire), (self.model.error, fire)):
                try:
                    sig.disconnect(slot)
                except (RuntimeError, TypeError):
                    pass
            # the next turn of the event loop: the page's rows are painted before the process starts
            QTimer.singleShot(0, self, later)

        timer.timeout.connect(fire)
        self.model.page_loaded.connect(fire)
        self.model.error.connect(fire)
        timer.start()

    def _take_first_rest(self, rest=None):
        """The opening's waiting work (None when none waits, or when it is not ``rest``), no longer waiting."""
        go = self._first_rest
        if go is None or (rest is not None and go is not rest):
            return None
        self._first_rest = None
        return go

    #: run the findings scan in a child process (#11 §3); threads are the fallback
    scan_process = True
    #: a multiprocessing (spawn) Event holding the child's scan until set: tests only
    scan_gate = None

    def _process_args(self) -> ProcessArgs | None:
        """What the findings process needs to open this ledger again (None: scan in threads)."""
        if not self.scan_process:
            return None
        spec = self.spec
        return ProcessArgs(
            spec.url, spec.password, self.ledger.layout, spec.name, self.masker.process_key(), self.scan_gate
        )

    def _requery(self, count: bool = True):
        self.model.set_query(self.flt, self.now, None)
        self._count = None
        if count:
            self._submit_count()
        self._update_footer()

    def _submit_count(self) -> None:
        """Count the operations the current filter shows (on a worker; the footer says it)."""
        ledger, flt, now = self.ledger, self.flt, self.now
        if ledger is None:
            return

        scanned = self.model.scanned_for(flt)

        def count(tok):
            return count_matching(ledger, flt, now, scanned)

        self.runner.submit("count", count, self._on_count, lambda e: None)

    def _on_count(self, n: int):
        self._count = n
        self._update_footer()

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
        rest = self._take_first_rest()
        if rest is not None:  # the scan had not started: started and cancelled, its kinds say "cancelled"
            rest()
        if not self.runner.pending() and not self.scans.running:
            return
        # not the scan's landing: the merge and narrowing that carry a cancelled (or finished) scan's kinds to
        # the views. A second Esc during the first one's merge left every kind "scanning…" with nothing
        # running (tester); scans.cancel() below supersedes a running scan's merge anyway.
        for ch in self.runner.pending():
            if ch not in LANDING_CHANNELS:
                self.runner.cancel(ch)
        if self.opened is not None and self.opened.n_ops < 0:  # its count was stopped too
            self._show_where(self.opened, uncounted="rows not counted (cancelled; F5 counts them)")
        # what the scan had sent stays; the kinds it had not finished say "cancelled" (merged)
        self.scans.cancel()
        self.model._set_loading(False)
        self._update_footer()
        self.message.emit("Cancelled the running queries; what was shown stays")

    def _job_dropped(self, _channel: str) -> None:
        self._update_footer()

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
        if n and self.detail.detail is None:  # the folded detail pane's hint
            parts.append("double-click a row to read it; F8 walks the findings")
        busy = self.runner.pending()  # the findings process is its "findings" channel
        if busy and not self.model.is_loading():
            parts.append("working: " + ", ".join(busy))
        self.footer.setText(" · ".join(parts))

    def close_tab(self):
        """Stop this tab's work; its connections are closed on a worker thread (``engine.dispose()``
        can block on a dead server's sockets), so closing a tab never waits for the database."""
        self._first_rest = None
        self.scans.close()
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
