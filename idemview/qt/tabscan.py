"""The findings side of a ledger tab: the findings panel and what the scan service's events do to it.

The scan itself is :class:`idemview.services.scanservice.ScanService` (no Qt: state, transport, merges);
:class:`ScanViews` relays its events to the views — the :class:`~idemview.services.findstate.FindingBoard`
(detail, grid badges, search hits), the findings panel, the chips of the filter bar, the chart's markers
and F8 — and narrows the findings to the filter on a worker. A mixin of
:class:`~idemview.qt.ledgertab.LedgerTab`: the attributes it reads are the tab's.
"""

from __future__ import annotations

import gc
from typing import Any

from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from idemview.domain.model import LEDGER_KINDS, FindingKind
from idemview.qt import theme
from idemview.qt.elide import ElidedLabel
from idemview.qt.models import FindingsModel
from idemview.qt.theme import plural
from idemview.qt.workers import JobError
from idemview.services.compact import narrow_compact, total_findings, total_operations
from idemview.services.scanservice import KindFailure, Merged, ScanService
from idemview.services.scanstate import CANCELLED, ScanState
from idemview.services.session import FilteredFindings, FindingsResult

#: The findings panel's greatest width (px): the chart keeps the rest.
PANEL_MAX = 420


class ScanViews:
    """The findings panel of a tab and the relay from its :class:`ScanService` to the views."""

    # the tab's (LedgerTab.__init__ / _build)
    scans: ScanService
    findings: FindingsResult | None
    filtered_findings: FilteredFindings | None
    runner: Any
    board: Any
    model: Any
    flt: Any
    now: Any
    spec: Any
    ledger: Any
    filterbar: Any
    overview: Any
    message: Any
    ready: Any

    @property
    def _scan(self) -> ScanState:
        """The current scan's state (tests read ``tab._scan.pending`` / ``.proc`` / ``.failed``)."""
        return self.scans.state

    def _connect_scans(self) -> None:
        ev = self.scans.events
        ev.started.connect(lambda st: self.board.begin(st.pending))
        ev.merged.connect(self._on_merged)
        ev.kind_failed.connect(self._on_kind_failed)
        ev.error.connect(self.show_error)  # type: ignore[attr-defined]

    def _build_findings_panel(self) -> QWidget:
        """The panel beside the chart: title and help, "as of", group toggle, table, ledger audit."""
        fp = QWidget()
        fl = QVBoxLayout(fp)
        fl.setContentsMargins(0, 0, 0, 0)
        fl.setSpacing(2)
        # wraps, never clipped by the "?" beside it (a tester read "96 operatio…" cut under the button):
        # the panel is narrow and the sentence ("… of 1,204 findings in the filter (96 operations in
        # all)") is longer than it
        self.findings_title = QLabel("<b>Findings</b> — scanning…")
        self.findings_title.setObjectName("findingsTitle")
        self.findings_title.setWordWrap(True)
        self.findings_title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        head = QHBoxLayout()
        head.setSpacing(4)
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
        fp.setMaximumWidth(PANEL_MAX)
        fp.setMinimumWidth(250)
        return fp

    def findings_panel_width(self) -> int:
        """The panel's width (px) at which every finding's name, severity and count shows whole
        (bold, as critical and high rows are), at most :data:`PANEL_MAX`. The tab gives the panel this
        width and lets the chart take what the window gains or loses: at 1280×800 with the detail open
        the panel had its 250 px minimum and read "duplicate …", "replay aft…"."""
        from PySide6.QtGui import QFont, QFontMetrics

        view = self.findings_view
        bold = QFont(view.font())
        bold.setBold(True)
        fm, head = QFontMetrics(bold), QFontMetrics(view.horizontalHeader().font())
        pad = 2 * view.style().pixelMetric(view.style().PixelMetric.PM_FocusFrameHMargin, None, view) + 12
        sev = max(fm.horizontalAdvance(f"{theme.SEVERITY_GLYPHS[s]} {s.value}") for s in theme.SEVERITY_GLYPHS)
        kind = max(fm.horizontalAdvance(w) for w in theme.KIND_WORDS.values())
        ops = max(fm.horizontalAdvance("9,999 of 9,999"), head.horizontalAdvance(FindingsModel.HEADERS[2]) + 8)
        widths = zip((sev, kind, ops), FindingsModel.HEADERS, strict=True)
        columns = sum(max(w, head.horizontalAdvance(h) + 8) + pad for w, h in widths)
        bar = view.verticalScrollBar().sizeHint().width()
        return min(PANEL_MAX, columns + bar + 2 * view.frameWidth())

    def _on_merged(self, m: Merged) -> None:
        self._on_findings(m.result, m.state if m.complete else None, m.pending, m.failed)

    def _on_kind_failed(self, f: KindFailure) -> None:
        self.show_error(JobError(f"{theme.KIND_WORDS[f.kind]} could not be checked: {f.message}"))  # type: ignore[attr-defined]

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
        if self._scanning:  # a partial count is no answer: "0 findings on 0 operations" read as "none"
            so_far = f" ({plural(ff.n_total, 'finding')} so far)" if ff.n_total else ""
            head = f"<b>Findings</b> — scanning…{so_far}"
        elif ff.base_filtered:
            head = (
                f"<b>Findings</b> — {ff.n_findings:,} of {plural(ff.n_total, 'finding')} in the filter "
                f"({plural(n_ops, 'operation')} in all)"
            )
        else:
            head = f"<b>Findings</b> — {plural(ff.n_total, 'finding')} on {plural(n_ops, 'operation')}"
        # cancelled or failed kinds: "0 findings" is not "none"
        if not self._scanning and (unchecked := self.board.failed):
            why = "cancelled" if set(unchecked.values()) == {CANCELLED} else "cancelled or failed"
            head += f" · {plural(len(unchecked), 'kind')} not checked ({why})"
            if not ff.n_total and all(k in unchecked or k in res.unsupported for k in FindingKind):
                # nothing was checked: "0 findings on 0 operations" read as "none" (tester, Esc at the open)
                head = f"<b>Findings</b> — not checked: {plural(len(unchecked), 'kind')} {why} (F5 scans again)"
        self.findings_title.setText(head)
        self.findings_title.setToolTip(
            "Counts follow the filter and the time window; click a row to show only those operations"
        )
        self.overview.set_findings(ff.markers, res.explanations)
        self._ordered = ff.ordered  # a FindingWalk when kinds were sent as keys (no million-list)
        self._finding_pos = -1

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

    def step_finding(self, step: int):
        """F8 / Shift+F8: open the next / previous finding, most severe first."""
        if not self._ordered:
            # while the scan runs an empty walk is no answer: "No findings" read as "none" (issue 20 §1)
            pending = self.findings is None or self._scanning or not self.findings_settled()
            self.message.emit("Findings are still being scanned…" if pending else "No findings to walk through")
            return
        self._finding_pos = (self._finding_pos + step) % len(self._ordered)
        f = self._ordered[self._finding_pos]
        self.open_operation(f.scope, f.key)
        self.message.emit(
            f"Finding {self._finding_pos + 1} of {len(self._ordered)}: {f.severity.value} {theme.KIND_WORDS[f.kind]}"
        )
