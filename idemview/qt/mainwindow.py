"""The main window: a tab per open ledger, the toolbar (connect, refresh, live refresh, export, UTC/local,
search across every open ledger) and the keyboard conventions of database tools:

====================  =====================================================
Ctrl+O                connections
Ctrl+F                filter by idempotency key (the filter bar's key field)
Ctrl+K                search a key or intent across all open ledgers
F5                    refresh (re-scan findings for the current time)
Ctrl+E                export evidence
F8 / Shift+F8         next / previous finding, most severe first
Esc                   cancel the running queries of this tab
Ctrl+W                close the tab
====================  =====================================================
"""

from __future__ import annotations

import html
import logging
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDockWidget,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QProgressDialog,
    QPushButton,
    QSpinBox,
    QTableView,
    QTabWidget,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from idemview.config import CredentialStore
from idemview.errors import TargetExists, TargetRefused
from idemview.qt import theme
from idemview.qt.elide import ElidedLabel
from idemview.qt.ledgertab import LedgerTab
from idemview.qt.models import SearchModel
from idemview.qt.report import install_report_action
from idemview.qt.settings import gui_settings
from idemview.qt.workers import JobError, Runner
from idemview.services.session import OpenSpec, SharedMasker, search

UTC = UTC
_log = logging.getLogger("idemview.gui")

try:  # the evidence export core arrives separately; the action is disabled until it does
    from idemview.evidence.plan import check_target, export_evidence  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the branch
    export_evidence = check_target = None


class _CancelFlag:
    """Cancel signal for the export core: callable, truthy and ``is_set()``-able, so it fits whichever
    convention ``export_evidence(cancel=...)`` uses."""

    def __init__(self):
        self._e = threading.Event()

    def set(self):
        self._e.set()

    def is_set(self) -> bool:
        return self._e.is_set()

    __call__ = is_set

    def __bool__(self):
        return self._e.is_set()


class _Progress(QObject):
    changed = Signal(object)


class ExportDialog(QDialog):
    """Where and what to export; shows the filter sentence that the manifest will record.

    Export checks the target first (:func:`idemview.evidence.plan.check_target`): the reason a path is refused
    is shown in the dialog, and an existing file is replaced only after the user says so (then
    ``overwrite`` is True). ``ask_replace(path)`` asks; tests replace it."""

    def __init__(self, sentence: str, default_path: str, ledger=None, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Export evidence")
        self.ledger = ledger
        self.overwrite = False
        form = QFormLayout(self)
        self.sentence = QLabel(f"<b>{html.escape(sentence)}</b><br>masked, with a manifest (FILE.csv.manifest.json)")
        self.sentence.setWordWrap(True)
        form.addRow("Exports", self.sentence)
        self.rows = QComboBox()
        for label, value in (("operations", "operations"), ("attempts", "attempts"), ("findings", "findings")):
            self.rows.addItem(label, value)
        if ledger is not None and getattr(ledger, "effects", None) is not None:
            # the downstream records that prove a side effect happened (the CLI's --rows effects)
            self.rows.addItem("effect records", "effects")
        form.addRow("Rows", self.rows)
        self.excel = QCheckBox("UTF-8 with BOM, for spreadsheets")
        form.addRow("Excel", self.excel)
        self.null_literal = QLineEdit()
        self.null_literal.setPlaceholderText("empty field")
        self.null_literal.setToolTip("What a NULL is written as (e.g. NULL or \\N); empty: an empty field")
        self.null_literal.setMaximumWidth(160)
        form.addRow("NULL as", self.null_literal)
        h = QHBoxLayout()
        self.path = QLineEdit(default_path)
        self.path.textChanged.connect(lambda _t: self._set_problem(""))
        b = QPushButton("Browse…")
        b.clicked.connect(self._browse)
        h.addWidget(self.path, 1)
        h.addWidget(b)
        form.addRow("File", h)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problem.hide()
        form.addRow(self.problem)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.export_btn = bb.button(QDialogButtonBox.StandardButton.Ok)
        self.export_btn.setText("Export")
        bb.accepted.connect(self.try_accept)
        bb.rejected.connect(self.reject)
        form.addRow(bb)
        self.resize(600, 240)

    def _browse(self):
        # the native dialog asks about replacing an existing file itself; we still check it on Export
        p, _ = QFileDialog.getSaveFileName(
            self, "Export evidence", self.path.text(), "CSV (*.csv)", options=QFileDialog.Option.DontConfirmOverwrite
        )
        if p:
            self.path.setText(p if p.endswith(".csv") else p + ".csv")

    def _set_problem(self, text: str):
        self.problem.setText(f"⚠ {text}" if text else "")
        self.problem.setVisible(bool(text))

    def ask_replace(self, path: str) -> bool:
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Replace the file?",
            f"{path} already exists (or its manifest does).\nReplace it?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            self,
        )
        box.setDefaultButton(QMessageBox.StandardButton.No)
        return box.exec() == QMessageBox.StandardButton.Yes

    def try_accept(self):
        """Check the target (file-system only: no database query) and accept, or say why not."""
        out = self.path.text().strip()
        if not out:
            self._set_problem("choose a file to export to")
            return
        self.overwrite = False
        try:
            check_target(out, self.ledger, overwrite=False)
        except TargetRefused as e:  # the ledger itself, a device, no such folder
            self._set_problem(str(e))
            return
        except TargetExists as e:  # refusals are checked first: replacing is the only question left
            if not self.ask_replace(out):
                self._set_problem(str(e))
                return
            self.overwrite = True
        self._set_problem("")
        self.accept()


class MainWindow(QMainWindow):
    """idemview's main window (see the module docstring for the shortcuts)."""

    keyring_changed = Signal()  # the credential store found the keyring unusable (any thread)

    def __init__(self, credentials: CredentialStore | None = None):
        # Qt calls into Python once per cell and role while painting; each call must take the GIL from
        # whichever worker holds it. A 1 ms switch interval (default 5 ms) bounds that wait, which is
        # what keeps the event loop responsive while workers decode and mask pages.
        sys.setswitchinterval(0.0005)
        super().__init__()
        self.setWindowTitle("idemview — operation ledger inspector")
        self.masker = SharedMasker()
        self.credentials = credentials or CredentialStore()
        self.runner = Runner(self)
        self.tabs = QTabWidget()
        self.tabs.setTabsClosable(True)
        self.tabs.setMovable(True)
        self.tabs.setDocumentMode(True)
        self.tabs.tabCloseRequested.connect(self.close_tab)
        self.tabs.currentChanged.connect(lambda _i: self._sync_actions())
        self.welcome = self._welcome()
        self.stack = QWidget()
        sv = QVBoxLayout(self.stack)
        sv.setContentsMargins(0, 0, 0, 0)
        sv.addWidget(self.welcome)
        sv.addWidget(self.tabs)
        self.tabs.hide()
        self.setCentralWidget(self.stack)
        self._toolbar()
        self._search_dock()
        self._shortcuts()
        self.live_timer = QTimer(self)
        self.live_timer.timeout.connect(self._live_tick)
        # The keyring notice: the same text as the connection dialog's, shown whenever no keyring can
        # be used — including one found locked later (a listener on the credential store).
        self.keyring_notice = QLabel()
        # two lines at most: a word-wrapped label asks for its height at a narrow width, and the status
        # bar grew to a tenth of a 1280×800 window (the whole text stays in the tooltip of the bar)
        fm = self.keyring_notice.fontMetrics()
        self.keyring_notice.setMaximumHeight(2 * fm.lineSpacing() + 10)
        self.statusBar().addPermanentWidget(self.keyring_notice, 1)
        self.keyring_dismiss = QToolButton(text="✕")
        self.keyring_dismiss.setToolTip("Hide this notice for this session")
        self.keyring_dismiss.clicked.connect(self._dismiss_keyring_notice)
        self.statusBar().addPermanentWidget(self.keyring_dismiss)
        self.keyring_changed.connect(self._sync_keyring_notice)
        self._keyring_listener = self.keyring_changed.emit
        self.credentials.listeners.append(self._keyring_listener)
        self._sync_keyring_notice()
        self._help_menu()
        from idemview.qt.fit import install_screen_fit

        install_screen_fit()  # every dialog and window fits the screen it opens on (issue 20 §5)
        self.restore_geometry()  # fits the screen (issue #13), or the remembered geometry
        self.refresh_start_page()
        self._sync_actions()
        app = QApplication.instance()
        if app is not None:
            app.styleHints().colorSchemeChanged.connect(self._scheme_changed)
        from idemview.qt.prewarm import start_prewarm

        QTimer.singleShot(0, start_prewarm)  # once shown: what the first open imports (issue 27 item 3)

    # ---------------------------------------------------------------------------------- geometry

    def available(self):
        """The available geometry (without panels and docks of the desktop) of this window's screen."""
        scr = self.screen() or QApplication.primaryScreen()
        return scr.availableGeometry()

    def fit_to(self, avail=None):
        """Size the window to ``avail`` (a QRect; default the screen's available geometry): 94 % of it,
        at most 1800×1100, centred; never larger than it (issue #13: it opened 1400–2103 px wide)."""
        avail = avail or self.available()
        w = min(avail.width(), max(min(int(avail.width() * 0.94), 1800), 640))
        h = min(avail.height(), max(min(int(avail.height() * 0.94), 1100), 480))
        self.resize(w, h)
        self.move(avail.x() + (avail.width() - w) // 2, avail.y() + (avail.height() - h) // 2)

    def clamp_to(self, avail=None):
        """Shrink (and move) the window back inside ``avail`` when it does not fit."""
        avail = avail or self.available()
        g = self.geometry()
        if g.width() > avail.width() or g.height() > avail.height():
            self.resize(min(g.width(), avail.width()), min(g.height(), avail.height()))
        g = self.frameGeometry()
        x = min(max(g.x(), avail.x()), avail.right() - g.width() + 1)
        y = min(max(g.y(), avail.y()), avail.bottom() - g.height() + 1)
        if (x, y) != (g.x(), g.y()):
            self.move(x, y)

    def restore_geometry(self):
        """The geometry saved at the last close (QSettings), kept inside the screen; else fit it."""
        geo = gui_settings().value("window/geometry")
        if geo is not None and self.restoreGeometry(geo):
            self.clamp_to()
        else:
            self.fit_to()

    def save_state(self):
        """Remember the window geometry and the current tab's splitter sizes."""
        st = gui_settings()
        st.setValue("window/geometry", self.saveGeometry())
        from idemview.services.demo_ledger import demo_path

        ids = []
        for t in self.ledger_tabs():
            if t.spec.connection_id:
                ids.append(t.spec.connection_id)
            elif str(t.spec.url) == str(demo_path()):
                ids.append("demo")
        st.setValue("session/tabs", ids)
        t = self.current_tab()
        if t is not None:
            t.save_splitters(st)
        st.sync()

    def show_status(self, text: str, ms: int = 8000):
        """A status-bar message, elided to the bar's width (the whole text in the tooltip): a message
        can never make the window wider."""
        sb = self.statusBar()
        notice = self.keyring_notice
        room = sb.width() - (notice.width() if notice.isVisible() else 0) - 40
        if notice.isVisible() and room < sb.width() // 2:
            # The keyring notice (two lines, nearly the bar's width) would leave a message ~80 px
            # ("postg…dings", found by a tester): it steps aside while the message shows.
            notice.hide()
            self.keyring_dismiss.hide()
            self._notice_stepped_aside = True
            room = sb.width() - 40
            if not getattr(self, "_notice_returns", False):
                self._notice_returns = True
                sb.messageChanged.connect(self._notice_back)
        room = max(80, room)
        shown = sb.fontMetrics().elidedText(text, Qt.TextElideMode.ElideMiddle, room)
        sb.setToolTip(text if shown != text else "")
        sb.showMessage(shown, ms)

    def _notice_back(self, message: str) -> None:
        """The keyring notice returns when the message it stepped aside for is gone."""
        if not message and getattr(self, "_notice_stepped_aside", False):
            self._notice_stepped_aside = False
            self._sync_keyring_notice()

    # ---------------------------------------------------------------------------------- chrome

    def _welcome(self) -> QWidget:
        """The start page: saved connections (last opened first, one click opens), "Reopen last
        session's tabs" when there were any, and the demo."""
        w = QWidget()
        w.setObjectName("startPage")
        v = QVBoxLayout(w)
        v.addStretch(1)
        t = QLabel(
            "<h2>idemview</h2><p>Open an operation ledger to see its idempotency keys, attempts, "
            "outcomes and findings. Every connection is read-only.</p>"
        )
        t.setAlignment(Qt.AlignmentFlag.AlignCenter)
        t.setWordWrap(True)
        v.addWidget(t)
        self.start_list = QVBoxLayout()
        self.start_list.setSpacing(2)
        box = QWidget()
        box.setLayout(self.start_list)
        box.setMaximumWidth(720)
        hb = QHBoxLayout()
        hb.addStretch(1)
        hb.addWidget(box, 4)
        hb.addStretch(1)
        v.addLayout(hb)
        h = QHBoxLayout()
        h.addStretch(1)
        b1 = QPushButton("Connections…  (Ctrl+O)")
        b1.clicked.connect(self.show_connections)
        b2 = QPushButton("Open the demo ledger")
        b2.clicked.connect(self.open_demo)
        self.restore_btn = QPushButton("Reopen last session's tabs")
        self.restore_btn.clicked.connect(self.restore_tabs)
        h.addWidget(b1)
        h.addWidget(b2)
        h.addWidget(self.restore_btn)
        h.addStretch(1)
        v.addLayout(h)
        v.addStretch(2)
        return w

    def recent_connections(self) -> list[tuple]:
        """Saved connections as (Connection, last opened ISO string or ""), last opened first."""
        from idemview.config import ConnectionStore

        st = gui_settings()
        try:
            conns = ConnectionStore().load()
        except Exception:  # noqa: BLE001 - a damaged file must not stop the start page
            return []
        from idemview.qt.opening import order_connections

        return [(c, str(st.value(f"recent/{c.id}", "") or "")) for c in order_connections(conns)]

    def refresh_start_page(self):
        """List the saved connections on the start page (one button each) and offer to reopen tabs."""
        while self.start_list.count():
            it = self.start_list.takeAt(0)
            if it.widget() is not None:
                it.widget().deleteLater()
        rows = self.recent_connections()
        self.start_buttons: dict[str, QPushButton] = {}
        if rows:
            head = QLabel("<b>Saved connections</b> — click to open")
            self.start_list.addWidget(head)
        for c, last in rows:
            where = c.database if c.dialect == "sqlite" else f"{c.host or 'localhost'}/{c.database}"
            when = (
                "never opened"
                if not last
                else "last opened "
                + theme.TIME.fmt(datetime.fromisoformat(last), seconds=False)
                + " "
                + theme.TIME.zone()
            )
            b = QPushButton(f"{c.name}   ·   {c.dialect} {where}   ·   {when}")
            b.setStyleSheet(
                "QPushButton { text-align: left; padding: 5px 10px; border: 1px solid palette(mid);"
                " border-radius: 4px; } QPushButton:hover { background: palette(midlight); }"
            )
            b.setToolTip(f"Open {c.name} (read-only)")
            b.clicked.connect(lambda _=False, cid=c.id: self.open_saved(cid))
            self.start_list.addWidget(b)
            self.start_buttons[c.id] = b
        tabs = self.saved_tabs()
        self.restore_btn.setVisible(bool(tabs))
        self.restore_btn.setText(f"Reopen last session's tabs ({len(tabs)})")

    def open_saved(self, conn_id: str) -> LedgerTab | None:
        """Open a saved connection by id (its password from the keyring)."""
        from idemview.config import ConnectionStore

        c = next((c for c in ConnectionStore().load() if c.id == conn_id), None)
        if c is None:
            return None
        from idemview.services.session import spec_for_connection

        pw = self.credentials.get(c.id)
        return self.open_spec(spec_for_connection(c, pw))

    def saved_tabs(self) -> list[str]:
        """The tabs open at the last close: saved-connection ids, or "demo"."""
        v = gui_settings().value("session/tabs", [])
        if isinstance(v, str):
            v = [v] if v else []
        return [str(x) for x in (v or [])]

    def restore_tabs(self):
        """Reopen the last session's tabs (on request: a restart never reconnects by itself)."""
        for t in self.saved_tabs():
            if t == "demo":
                self.open_demo()
            else:
                self.open_saved(t)

    def _help_menu(self):
        m = self.menuBar().addMenu("&Help")
        self.act_log_folder = QAction("Open log folder", self)
        self.act_log_folder.setToolTip("The rotating, masked log file (idemview.log)")
        self.act_log_folder.triggered.connect(self.open_log_folder)
        m.addAction(self.act_log_folder)
        from idemview.qt import helpdialog

        m.addAction("Findings explained", lambda: helpdialog.show_findings_help(self))
        m.addAction("Keyboard shortcuts", lambda: helpdialog.show_shortcuts(self))
        m.addAction("About idemview", lambda: helpdialog.show_about(self))

    def open_log_folder(self) -> str:
        from idemview.qt.applog import log_dir

        d = str(log_dir())
        self.open_folder(d)
        return d

    def open_folder(self, folder: str) -> bool:
        """Open ``folder`` in the file manager; without one (nothing handles the URL) say where it is."""
        if QDesktopServices.openUrl(QUrl.fromLocalFile(folder)):
            return True
        self.show_status(f"No file manager to open it with; the folder is {folder}", 30000)
        QApplication.clipboard().setText(folder)
        return False

    def _toolbar(self):
        tb = QToolBar("Main")
        tb.setObjectName("mainToolbar")
        tb.setMovable(False)
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.addToolBar(tb)
        self.act_connect = QAction("Connections…", self, shortcut=QKeySequence("Ctrl+O"))
        self.act_connect.triggered.connect(self.show_connections)
        self.act_refresh = QAction("Refresh", self, shortcut=QKeySequence("F5"))
        self.act_refresh.setToolTip("Re-scan findings for the current time and reload (F5)")
        self.act_refresh.triggered.connect(self.refresh_current)
        self.act_export = QAction("Export evidence…", self, shortcut=QKeySequence("Ctrl+E"))
        self.act_export.triggered.connect(self.export_current)
        self.act_layout = QAction("Edit layout…", self)
        self.act_layout.setToolTip("Adjust this ledger's layout in the layout editor; the tab reopens with it")
        self.act_layout.triggered.connect(self.edit_layout_current)
        for a in (self.act_connect, self.act_refresh):
            tb.addAction(a)
        tb.addSeparator()
        self.live = QCheckBox("Live every")
        self.live.setToolTip("Refresh findings, overview and the first page periodically (uncheck to pause)")
        self.live.toggled.connect(self._live_changed)
        self.live_secs = QSpinBox()
        self.live_secs.setRange(5, 3600)
        self.live_secs.setValue(30)
        self.live_secs.setSuffix(" s")
        self.live_secs.valueChanged.connect(lambda _v: self._live_changed(self.live.isChecked()))
        tb.addWidget(self.live)
        tb.addWidget(self.live_secs)
        tb.addSeparator()
        tb.addAction(self.act_export)
        install_report_action(self, tb)  # "Export report…": the HTML incident report (idemview.qt.report)
        tb.addAction(self.act_layout)
        tb.addSeparator()
        self.zone_btn = QToolButton()
        self.zone_btn.setCheckable(True)
        self.zone_btn.setText("Times: UTC")
        self.zone_btn.setToolTip("Show times in UTC or in this computer's zone (the zone is named in every header)")
        self.zone_btn.toggled.connect(self._zone_toggled)
        tb.addWidget(self.zone_btn)
        spacer = QWidget()
        spacer.setSizePolicy(
            spacer.sizePolicy().horizontalPolicy().Expanding, spacer.sizePolicy().verticalPolicy().Preferred
        )
        tb.addWidget(spacer)
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText("Search key or intent in all ledgers (Ctrl+K)")
        self.search_box.setClearButtonEnabled(True)
        self.search_box.setMinimumWidth(330)
        self.search_box.returnPressed.connect(lambda: self.search_all(self.search_box.text()))
        tb.addWidget(self.search_box)

    def _search_dock(self):
        self.search_model = SearchModel(self)
        self.search_view = QTableView()
        self.search_view.setModel(self.search_model)
        self.search_view.verticalHeader().hide()
        self.search_view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.search_view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.search_view.horizontalHeader().setStretchLastSection(True)
        self.search_view.doubleClicked.connect(self._open_hit)
        self.search_view.activated.connect(self._open_hit)
        w = QWidget()
        v = QVBoxLayout(w)
        v.setContentsMargins(4, 2, 4, 2)
        self.search_status = ElidedLabel(min_chars=10)
        v.addWidget(self.search_status)
        v.addWidget(self.search_view)
        self.search_dock = QDockWidget("Search across open ledgers", self)
        self.search_dock.setObjectName("searchDock")
        self.search_dock.setWidget(w)
        from idemview.qt.ledgertab import BadgeDelegate

        self.search_view.setItemDelegateForColumn(SearchModel.COL_FINDINGS, BadgeDelegate(self.search_view))
        self.search_view.verticalHeader().setDefaultSectionSize(22)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.search_dock)
        self.search_dock.hide()

    def _shortcuts(self):
        def sc(keys, fn):
            s = QShortcut(QKeySequence(keys), self)
            s.activated.connect(fn)
            return s

        sc("Ctrl+K", self.focus_search)
        sc("Ctrl+F", self.focus_filter)
        sc("F8", lambda: self._tab_call("step_finding", 1))
        sc("Shift+F8", lambda: self._tab_call("step_finding", -1))
        sc("Escape", lambda: self._tab_call("cancel_all"))
        sc("Ctrl+W", lambda: self.close_tab(self.tabs.currentIndex()))

    def _sync_actions(self):
        has = self.current_tab() is not None
        self.act_refresh.setEnabled(has)
        self.act_layout.setEnabled(has)
        if export_evidence is None:
            self.act_export.setEnabled(False)
            self.act_export.setToolTip(
                "Evidence export is not available in this build (the idemview.evidence.plan module is missing)"
            )
        else:
            self.act_export.setEnabled(has)
            self.act_export.setToolTip("Export what the filter shows, masked, with a manifest (Ctrl+E)")

    # ----------------------------------------------------------------------------------- tabs

    def current_tab(self) -> LedgerTab | None:
        w = self.tabs.currentWidget()
        return w if isinstance(w, LedgerTab) else None

    def ledger_tabs(self) -> list[LedgerTab]:
        return [self.tabs.widget(i) for i in range(self.tabs.count())]

    def _tab_call(self, name, *args):
        t = self.current_tab()
        if t is not None:
            getattr(t, name)(*args)

    def open_spec(self, spec: OpenSpec) -> LedgerTab:
        """Open a ledger in a new tab (connection and reading happen on worker threads)."""
        for t in self.ledger_tabs():  # an open connection: switch to its tab (not a second one)
            if spec.connection_id and t.spec.connection_id == spec.connection_id:
                self.tabs.setCurrentWidget(t)
                return t
        tab = LedgerTab(spec, self.masker, self)
        from idemview.qt.opening import watch_opening

        watch_opening(self, tab)  # password prompt, "last opened" and the log (issue 20 §3, §6)
        tab.message.connect(lambda m: self.show_status(m, 8000))
        i = self.tabs.addTab(tab, spec.name)
        tab.title_changed.connect(lambda t=tab: self._retitle(t))
        self.tabs.setCurrentIndex(i)
        self.welcome.hide()
        self.tabs.show()
        tab.start()
        self._sync_actions()
        return tab

    def _retitle(self, tab: LedgerTab):
        i = self.tabs.indexOf(tab)
        if i >= 0 and tab.opened:
            self.tabs.setTabText(i, tab.title() + ("" if tab.opened.read_only else " (not read-only!)"))
            self.tabs.setTabToolTip(i, f"{tab.opened.where} — {tab.opened.ledger.layout.name}")

    def close_tab(self, i: int):
        w = self.tabs.widget(i)
        if isinstance(w, LedgerTab):
            w.close_tab()
            self.tabs.removeTab(i)
            w.deleteLater()
        if self.tabs.count() == 0:
            self.tabs.hide()
            self.refresh_start_page()
            self.welcome.show()
        self._sync_actions()

    def _sync_keyring_notice(self):
        from idemview.qt.connections import show_keyring_notice
        from idemview.qt.opening import keyring_notice_matters

        show_keyring_notice(self.keyring_notice, self.credentials)
        # only where a password is involved (a saved server connection with a user; not the demo),
        # and not once dismissed (issue 20 §13)
        if getattr(self, "_keyring_dismissed", False) or not keyring_notice_matters():
            self.keyring_notice.hide()
        self.keyring_dismiss.setVisible(self.keyring_notice.isVisibleTo(self))

    def _dismiss_keyring_notice(self):
        self._keyring_dismissed = True
        self._sync_keyring_notice()

    def open_link(
        self,
        target: str,
        key: str | None = None,
        scope: str | None = None,
        *,
        layout: str | None = None,
        schema: str | None = None,
        now: datetime | None = None,
    ) -> LedgerTab | None:
        """``idemview open TARGET [--key KEY] [--scope S] [--layout L] [--schema S] [--now ISO]``: open
        the ledger (a saved connection's name, a URL or a SQLite file) with that layout, scanned for that
        ``now``, and, once it is open, the operation."""
        import os
        from dataclasses import replace

        from idemview.services.session import spec_for_target

        try:
            spec = spec_for_target(target, self.credentials)
            lay = os.path.expanduser(layout) if layout and layout.startswith("~") else layout
            spec = replace(spec, layout=lay or spec.layout, schema=schema or spec.schema, now=now)
        except Exception as e:  # noqa: BLE001 - a bad link is a message, never a crash
            self._notify(QMessageBox.Icon.Warning, "Cannot open the link", self.masker.free_text(str(e)))
            return None
        tab = self.open_spec(spec)
        if key:

            def go():
                if tab.ledger is not None:
                    tab.open_key(key, scope)

            if tab.ledger is not None:  # the connection was open already
                go()
            else:
                tab.opened_signal.connect(go)
        return tab

    def open_demo(self) -> None:
        """Open the demo ledger; when it must be (re)written first, that runs on a worker thread and the
        tab opens when it is done (the window never waits for the write)."""
        from idemview.services.demo_ledger import demo_is_current, demo_path, demo_spec, spec_for_demo

        path = demo_path()
        if demo_is_current(path):
            self.open_spec(spec_for_demo(path))
            return
        if self.runner.is_pending("demo"):  # already being written: one writer per file
            return
        self.show_status("Writing the demo ledger…", 0)

        def written(spec):
            self.statusBar().clearMessage()
            self.open_spec(spec)

        def failed(err: JobError):
            self.statusBar().clearMessage()
            self._notify(QMessageBox.Icon.Warning, "Cannot write the demo ledger", self.masker.free_text(err.message))

        self.runner.submit("demo", lambda _tok: demo_spec(path), written, failed, cancel_previous=False)

    def show_connections(self):
        from idemview.qt.connections import ConnectionDialog

        dlg = ConnectionDialog(self.credentials, self.masker, self)
        if dlg.exec() == QDialog.DialogCode.Accepted and dlg.spec is not None:
            self.open_spec(dlg.spec)
        self.refresh_start_page()
        self._sync_keyring_notice()  # a server connection saved just now makes the notice matter

    # -------------------------------------------------------------------------------- actions

    def refresh_current(self):
        self._tab_call("refresh")

    def focus_filter(self):
        t = self.current_tab()
        if t is not None:
            t.filterbar.key_edit.setFocus()
            t.filterbar.key_edit.selectAll()

    def focus_search(self):
        self.search_box.setFocus()
        self.search_box.selectAll()

    def search_all(self, text: str):
        """Find an idempotency key or intent reference in every open ledger (each on its own worker)."""
        text = text.strip()
        self.search_model.clear()
        if not text:
            return
        self.search_dock.show()
        tabs = [t for t in self.ledger_tabs() if t.ledger is not None]
        # a tab that failed to open (or is still opening) cannot be searched: say so, by name
        self._not_searched = [self.masker.free_text(t.title()) for t in self.ledger_tabs() if t.ledger is None]
        self._search_left = len(tabs)
        self.search_status.setText(f"Searching {theme.plural(len(tabs), 'ledger')}…" + self._not_searched_text())
        self._size_search_dock()
        masker = self.masker
        for t in tabs:
            ledger, name = t.ledger, t.title()
            idx = self.tabs.indexOf(t)
            by_ref: Any = t.board  # the tab's finding state (pending / none / these), asked live by the hits
            t.runner.submit(
                "search",
                lambda tok, l=ledger, n=name, ix=idx, br=by_ref: search(l, masker, text, ix, n, br),
                self._search_hits,
                lambda e, n=name: self._search_failed(e, n),
            )
        if not tabs:
            self._search_done(count=False)

    def _search_hits(self, hits):
        self.search_model.add(hits)
        self._search_done()

    def _search_failed(self, err: JobError, name: str = "a ledger"):
        self._not_searched.append(f"{self.masker.free_text(name)} ({self.masker.free_text(err.message)})")
        self._search_done()

    def _not_searched_text(self) -> str:
        ns = getattr(self, "_not_searched", [])
        return (" · not searched: " + ", ".join(ns)) if ns else ""

    def _search_done(self, count: bool = True):
        if count:
            self._search_left -= 1
        n = self.search_model.rowCount()
        ledgers = len({h.ledger_name for h in self.search_model.hits()})
        state = "" if self._search_left <= 0 else " (still searching)"
        self.search_status.setText(
            f"{theme.plural(n, 'operation')} in {theme.plural(ledgers, 'ledger')}{state}"
            " — double-click to open" + self._not_searched_text()
        )
        self.search_view.resizeColumnsToContents()

    def _size_search_dock(self):
        """The results dock takes about a fifth of the window's height, so the detail pane (and
        the grid) keep most of it."""
        h = max(120, min(220, self.height() // 5))
        self.resizeDocks([self.search_dock], [h], Qt.Orientation.Vertical)

    def _open_hit(self, idx):
        h = self.search_model.hit(idx.row())
        if 0 <= h.tab_index < self.tabs.count():
            self.tabs.setCurrentIndex(h.tab_index)
            self.tabs.widget(h.tab_index).open_operation(h.scope_raw, h.key_raw)

    def _zone_toggled(self, local: bool):
        theme.TIME.set_utc(not local)
        self.zone_btn.setText(f"Times: {theme.TIME.zone()}")
        for t in self.ledger_tabs():
            t.grid.viewport().update()
            t.model.headerDataChanged.emit(Qt.Orientation.Horizontal, 0, t.model.columnCount() - 1)
        self.search_model.headerDataChanged.emit(Qt.Orientation.Horizontal, 0, self.search_model.columnCount() - 1)

    def _live_changed(self, on: bool):
        if on:
            self.live_timer.start(self.live_secs.value() * 1000)
        else:
            self.live_timer.stop()

    def _live_tick(self):
        for t in self.ledger_tabs():
            t.refresh(live=True)

    def _scheme_changed(self, scheme):
        theme.apply_scheme(QApplication.instance(), scheme)
        self.restyle()

    def restyle(self):
        for t in self.ledger_tabs():
            t.restyle()

    # -------------------------------------------------------------------------------- layout

    def edit_layout_current(self):
        """The layout editor on this tab's (read-only) engine and current layout; on Save the tab
        reopens with the saved layout (and a saved connection keeps it)."""
        t = self.current_tab()
        if t is None or t.opened is None:
            return
        from idemview.qt.layout_editor import LayoutEditor

        ed = LayoutEditor(t.opened.engine, t.ledger.layout, t.spec.connection_id, now=t.now, parent=self)
        ed.saved.connect(lambda path, t=t: self._layout_saved(t, path))
        ed.finished.connect(ed.deleteLater)
        self.layout_editor = ed
        ed.open()

    def _layout_saved(self, tab: LedgerTab, path: str):
        from dataclasses import replace

        i = self.tabs.indexOf(tab)
        if i < 0:
            return
        if tab.spec.connection_id:
            from idemview.config import ConnectionStore

            store = ConnectionStore()
            for c in store.load():
                if c.id == tab.spec.connection_id:
                    store.upsert(replace(c, layout=path))
        spec = replace(tab.spec, layout=path)
        self.close_tab(i)
        new = self.open_spec(spec)
        self.tabs.tabBar().moveTab(self.tabs.indexOf(new), min(i, self.tabs.count() - 1))
        self.tabs.setCurrentWidget(new)
        self.show_status(f"Reopened {spec.name} with the layout saved to {path}", 10000)

    # -------------------------------------------------------------------------------- export

    def export_current(self):
        """Ctrl+E: the export dialog (window-modal, not blocking), then the export on a worker with a
        progress dialog and Cancel; on success a message with the row count, the paths and Open folder."""
        t = self.current_tab()
        if t is None or t.ledger is None or export_evidence is None:
            return
        # `now` is the instant the findings on screen were computed for ("Findings as of …"): the
        # manifest records that one, so the file and the screen agree.
        flt, now = t.filterbar.filter(), t.now or datetime.now(UTC)
        default = str(Path.home() / f"idemview-evidence-{now.strftime('%Y%m%dT%H%M%SZ')}.csv")
        shown = flt.sentence(theme.TIME.zone(), theme.TIME.tz())
        dlg = ExportDialog(self.masker.free_text(shown), default, t.ledger, self)
        self.export_dialog = dlg
        dlg.accepted.connect(lambda: self._start_export(t, flt, now, dlg, shown))
        dlg.finished.connect(dlg.deleteLater)
        dlg.open()

    def _start_export(self, t: LedgerTab, flt, now, dlg: ExportDialog, shown: str | None = None):
        out, rows, excel = dlg.path.text().strip(), dlg.rows.currentData(), dlg.excel.isChecked()
        null, overwrite = dlg.null_literal.text(), dlg.overwrite
        flag, prog = _CancelFlag(), _Progress(self)
        pd = QProgressDialog("Exporting evidence…", "Cancel", 0, 0, self)
        pd.setWindowModality(Qt.WindowModality.WindowModal)
        pd.setMinimumDuration(0)
        pd.canceled.connect(flag.set)
        self.export_progress = pd
        prog.changed.connect(
            lambda n: pd.setLabelText(
                f"Exporting evidence… {theme.plural(n, 'row')}" if isinstance(n, int) else "Exporting evidence…"
            )
        )
        ledger, name = t.ledger, t.title()
        # The session's key with counts of its own: a tag in the file is the tag on screen, and the
        # manifest counts only this export's masks (and says whose key it is).
        masker = self.masker.export_masker()

        def run(tok):
            return export_evidence(
                ledger,
                flt,
                out,
                rows=rows,
                now=now,
                excel=excel,
                null_literal=null,
                connection_name=name,
                masker=masker,
                progress=lambda *a: prog.changed.emit(a[0] if a else None),
                cancel=flag,
                overwrite=overwrite,
                masking_key="session",
                sentence_shown=shown,
            )

        def ok(res):
            pd.close()
            _log.info(
                "exported %s %s rows of %s to %s (manifest %s), SHA-256 %s",
                res.rows,
                rows,
                name,
                res.path,
                res.manifest_path,
                res.sha256,
            )
            self.show_status(f"Exported {theme.plural(res.rows, 'row')} to {res.path}", 15000)
            self._export_done(res, rows)

        def fail(err: JobError):
            pd.close()
            if err.cancelled or flag.is_set() or err.message.startswith("ExportCancelled"):
                self.show_status("Export cancelled; no file written", 8000)
                return
            _log.warning("export to %s failed: %s", out, err.message)
            self._notify(QMessageBox.Icon.Warning, "Export failed", self.masker.free_text(err.message))

        self.runner.submit("export", run, ok, fail)
        pd.show()

    def _notify(self, icon, title: str, text: str) -> QMessageBox:
        box = QMessageBox(icon, title, text, QMessageBox.StandardButton.Close, self)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box.open()  # window-modal but not blocking: the event loop (and the workers) keep running
        return box

    def _export_done(self, res, rows: str):
        folder = str(Path(res.path).parent)
        box = self._notify(
            QMessageBox.Icon.Information,
            "Evidence exported",
            f"Exported {theme.plural(res.rows, {'effects': 'effect record'}.get(rows, rows[:-1] + ' row'))}, masked."
            f"\n\nCSV: {res.path}\n"
            f"Manifest: {res.manifest_path}\nSHA-256: {res.sha256}",
        )
        b = box.addButton("Open folder", QMessageBox.ButtonRole.ActionRole)
        b.clicked.connect(lambda: self.open_folder(folder))
        self.export_done_box = box

    def closeEvent(self, ev):
        self.save_state()
        for t in self.ledger_tabs():
            t.close_tab()
        try:
            self.credentials.listeners.remove(self._keyring_listener)
        except ValueError:
            pass
        super().closeEvent(ev)
