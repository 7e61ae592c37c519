"""“Export report…”: the incident report (DESIGN §5.4) of the current tab's filter, from the GUI.

The dialog asks where and how many operations to show in full; the report is written on the window's
:class:`~idemview.qt.workers.Runner` (never on the GUI thread) by
:func:`idemview.evidence.report.write_report`, the CLI's code, with the session's masking key (tags
in the report match the tags on screen) and the ``now`` of the findings on screen.
"""

from __future__ import annotations

import html
import threading
from datetime import UTC, datetime
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QUrl, Signal
from PySide6.QtGui import QAction, QDesktopServices
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressDialog,
    QPushButton,
    QSpinBox,
)

from idemview.errors import TargetExists, TargetRefused
from idemview.evidence.plan import check_target
from idemview.evidence.report import DEFAULT_FULL, write_report
from idemview.qt import theme
from idemview.qt.workers import JobError

UTC = UTC


class ReportDialog(QDialog):
    """Where to write the report and how many operations it shows in full; the filter sentence it
    will carry. The target is checked on Export (file system only, no database call): a refused
    path is explained here; an existing file is replaced only after the user says so."""

    def __init__(self, sentence: str, default_path: str, ledger=None, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Export report")
        self.ledger, self.overwrite = ledger, False
        form = QFormLayout(self)
        self.sentence = QLabel(
            f"<b>{html.escape(sentence)}</b><br>one self-contained HTML file, masked, printable, "
            "with a manifest (FILE.html.manifest.json)"
        )
        self.sentence.setWordWrap(True)
        form.addRow("Reports", self.sentence)
        self.full = QSpinBox()
        self.full.setRange(0, 100000)
        self.full.setValue(DEFAULT_FULL)
        self.full.setSuffix(" operations")
        self.full.setMaximumWidth(180)
        self.full.setToolTip("Operations shown in full (findings, timeline, attempts); the rest are a table")
        form.addRow("In full", self.full)
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
        self.problem.hide()
        form.addRow(self.problem)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.export_btn = bb.button(QDialogButtonBox.StandardButton.Ok)
        self.export_btn.setText("Export")
        bb.accepted.connect(self.try_accept)
        bb.rejected.connect(self.reject)
        form.addRow(bb)
        self.resize(600, 200)

    def _browse(self):
        p, _ = QFileDialog.getSaveFileName(
            self, "Export report", self.path.text(), "HTML (*.html)", options=QFileDialog.Option.DontConfirmOverwrite
        )
        if p:
            self.path.setText(p if p.endswith((".html", ".htm")) else p + ".html")

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
        out = self.path.text().strip()
        if not out:
            self._set_problem("choose a file to write the report to")
            return
        self.overwrite = False
        try:
            check_target(out, self.ledger, overwrite=False)
        except TargetRefused as e:
            self._set_problem(str(e))
            return
        except TargetExists as e:
            if not self.ask_replace(out):
                self._set_problem(str(e))
                return
            self.overwrite = True
        self._set_problem("")
        self.accept()


class _Progress(QObject):
    changed = Signal(str)


def install_report_action(window, toolbar) -> QAction:
    """The “Export report…” action on ``toolbar`` of the main ``window`` (enabled while a ledger tab
    is current; a tab still opening says so in the status bar); returns it (``window.act_report``)."""
    act = QAction("Export report…", window)
    act.setToolTip("An HTML incident report of what the filter shows, masked, with a manifest")
    act.triggered.connect(lambda: export_report(window))
    toolbar.addAction(act)

    def sync(_i=None):  # like "Export evidence…": on while a ledger tab is current
        act.setEnabled(window.current_tab() is not None)

    window.tabs.currentChanged.connect(sync)
    sync()
    window.act_report = act
    return act


def export_report(window) -> ReportDialog | None:
    """Open the report dialog for the current tab; on Export, write the report on a worker."""
    t = window.current_tab()
    if t is None:
        return None
    if t.ledger is None:
        window.show_status("This ledger is not open yet; export the report once it is", 8000)
        return None
    flt, now = t.filterbar.filter(), t.now or datetime.now(UTC)
    default = str(Path.home() / f"idemview-report-{now.strftime('%Y%m%dT%H%M%SZ')}.html")
    shown = flt.sentence(theme.TIME.zone(), theme.TIME.tz())
    dlg = ReportDialog(window.masker.free_text(shown), default, t.ledger, window)
    window.report_dialog = dlg
    dlg.accepted.connect(lambda: _start(window, t, flt, now, dlg, shown))
    dlg.finished.connect(dlg.deleteLater)
    dlg.open()
    return dlg


def _start(window, t, flt, now, dlg: ReportDialog, shown: str):
    out, full, overwrite = dlg.path.text().strip(), dlg.full.value(), dlg.overwrite
    stop = threading.Event()
    prog = _Progress(window)
    pd = QProgressDialog("Writing the report…", "Cancel", 0, 0, window)
    pd.setWindowModality(Qt.WindowModality.WindowModal)
    pd.setMinimumDuration(0)
    pd.canceled.connect(stop.set)
    window.report_progress = pd
    prog.changed.connect(pd.setLabelText)
    ledger, name = t.ledger, t.title()
    masker = window.masker.export_masker()  # the session's key, counts of its own

    def run(tok):
        return write_report(
            ledger,
            flt,
            out,
            now=now,
            full=full,
            connection_name=name,
            masker=masker,
            masking_key="session",
            sentence_shown=shown,
            overwrite=overwrite,
            progress=lambda phase, n: prog.changed.emit(f"Writing the report… {phase}: {n:,}"),
            cancel=lambda: stop.is_set() or tok.cancelled,
        )

    def ok(res):
        pd.close()
        window.show_status(f"Wrote the report of {theme.plural(res.operations, 'operation')} to {res.path}", 15000)
        more = f" ({res.operations - res.in_full:,} more as a table)" if res.operations > res.in_full else ""
        box = window._notify(
            QMessageBox.Icon.Information,
            "Report written",
            f"{theme.plural(res.findings, 'finding')} on {theme.plural(res.operations, 'operation')}, "
            f"{res.in_full:,} in full{more}; masked.\n\nReport: {res.path}\nManifest: {res.manifest_path}\n"
            f"SHA-256: {res.sha256}",
        )
        b = box.addButton("Open report", QMessageBox.ButtonRole.ActionRole)
        b.clicked.connect(lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(res.path)))
        window.report_done_box = box

    def fail(err: JobError):
        pd.close()
        if err.cancelled or stop.is_set():
            window.show_status("Report cancelled; no file written", 8000)
            return
        window._notify(QMessageBox.Icon.Warning, "Report failed", window.masker.free_text(err.message))

    window.runner.submit("report", run, ok, fail)
    pd.show()
