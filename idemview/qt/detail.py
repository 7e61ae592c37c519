"""The operation detail pane: header, findings in plain words, the attempts timeline, the attempts
table, and the request / response / error viewers. Everything shown here was masked on the worker
thread (:func:`idemview.services.session.load_detail`) before it reached this widget.
"""

from __future__ import annotations

import html
import json
from datetime import datetime

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QAction, QFont, QGuiApplication, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QTableView,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from idemview.domain.model import Finding, Operation, Payload
from idemview.masking.visible import LINE_BREAKS, visible
from idemview.qt import theme
from idemview.qt.models import AttemptsModel
from idemview.qt.timeline import TimelineWidget
from idemview.services.session import Detail, reveal_state, tag_at


def mono() -> QFont:
    f = QFont("DejaVu Sans Mono")
    f.setStyleHint(QFont.StyleHint.Monospace)
    return f


def render_payload(p: Payload | None) -> str:
    """A payload as text: pretty JSON, plain text, a hex dump for bytes, and never an unpickled value."""
    if p is None:
        return "(empty)"
    if p.encoding == "pickle":
        size = f"{p.size} bytes" if p.size is not None else "size unknown"
        return (
            f"pickled, not decoded ({size}).\n\nidemview never unpickles: unpickling runs code chosen by "
            "whoever wrote the row."
        )
    head = f"⚠ {p.problem}\n\n" if p.problem else ""
    v = p.value
    if isinstance(v, (bytes, bytearray)):
        return head + hexdump(bytes(v))
    if p.encoding == "json" and not p.problem:
        try:
            return head + json.dumps(v, indent=2, ensure_ascii=False, sort_keys=False, default=str)
        except (TypeError, ValueError):
            pass
    return head + ("" if v is None else str(v))


def hexdump(b: bytes, limit: int = 4096) -> str:
    lines = [f"{len(b)} bytes, shown as hex"]
    for i in range(0, min(len(b), limit), 16):
        chunk = b[i : i + 16]
        hx = " ".join(f"{c:02x}" for c in chunk)
        asc = "".join(chr(c) if 32 <= c < 127 else "." for c in chunk)
        lines.append(f"{i:08x}  {hx:<47}  {asc}")
    if len(b) > limit:
        lines.append(f"… {len(b) - limit} more bytes")
    return "\n".join(lines)


def _when(t: datetime | None, zone: str) -> str:
    """A time with its zone, or "— (not recorded)" for a NULL or unreadable one (not "— UTC")."""
    return f"{theme.TIME.fmt(t)} {zone}" if t is not None else "— <i>(not recorded)</i>"


class OperationDetail(QWidget):
    """Detail of one operation (see the module docstring). ``set_detail(detail, now)`` shows it."""

    closed = Signal()
    #: "Reveal this value" was chosen: ``(scope_raw, key_raw, where)`` (see :func:`session.reveal_value`)
    reveal_requested = Signal(object)
    #: "Copy link" was clicked (the tab knows the ledger and builds the command)
    link_requested = Signal()

    HEADER_FIELDS = [
        ("key", "Idempotency key"),
        ("scope", "Scope"),
        ("kind", "Kind"),
        ("raw_status", "Status (ledger)"),
        ("fingerprint", "Fingerprint"),
        ("intent_ref", "Intent"),
        ("effect_ref", "Effect"),
    ]
    ATT_COLUMNS = {5: "worker", 6: "effect_ref", 7: "error"}

    def __init__(self, parent=None):
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.placeholder = QLabel(
            "Double-click an operation (or press Enter) to read its timeline.\n"
            "F8 / Shift+F8 walk through the findings, most severe first."
        )
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        outer.addWidget(self.placeholder)
        self.body = QWidget()
        outer.addWidget(self.body)
        self.body.hide()
        v = QVBoxLayout(self.body)
        v.setContentsMargins(6, 4, 6, 4)
        v.setSpacing(4)
        self._build_head(v)
        self._build_records(v)
        v.addWidget(self._build_attempts_and_payloads(), 1)
        self.detail: Detail | None = None
        self._now: datetime | None = None
        self._revealed: dict[tuple, str] = {}  # where -> value revealed on request (this operation only)
        theme.TIME.changed.connect(self._rerender)

    def _build_head(self, v: QVBoxLayout) -> None:
        """The key (with Copy key / Copy link), the header line and the findings box."""
        top = QHBoxLayout()
        # the key on a row of its own (the Copy buttons cut it at 1280 px); a key longer than the pane
        # is elided in the middle, whole in the tooltip and on Copy key
        from idemview.qt.elide import ElidedLabel

        self.title = ElidedLabel(min_chars=8, mode=Qt.TextElideMode.ElideMiddle)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.title.setFont(mono())
        f = self.title.font()
        f.setBold(True)
        f.setPointSizeF(f.pointSizeF() * 1.15)
        self.title.setFont(f)
        self.copy_btn = QToolButton(text="Copy key")
        self.copy_btn.setToolTip("Copy the idempotency key as shown (masked values stay masked)")
        self.copy_btn.clicked.connect(self._copy_key)
        self.link_btn = QToolButton(text="Copy link")
        self.link_btn.setToolTip(
            "Copy an `idemview open …` command that opens this operation (for a colleague; never carries a password)"
        )
        self.link_btn.clicked.connect(lambda: self.link_requested.emit())
        v.addWidget(self.title)
        top.addStretch(1)
        top.addWidget(self.copy_btn)
        top.addWidget(self.link_btn)
        v.addLayout(top)
        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.header.setWordWrap(True)
        for w in (self.title, self.header):
            w.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
            w.customContextMenuRequested.connect(lambda pos, w=w: self._header_menu(w, pos))
        v.addWidget(self.header)
        self.findings_box = QLabel()
        self.findings_box.setTextFormat(Qt.TextFormat.RichText)
        self.findings_box.setWordWrap(True)
        self.findings_box.setFrameShape(QFrame.Shape.StyledPanel)
        self.findings_box.setContentsMargins(6, 4, 6, 4)
        self.findings_box.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.LinksAccessibleByMouse
        )
        self.findings_box.linkActivated.connect(self._finding_link)
        v.addWidget(self.findings_box)

    def _build_records(self, v: QVBoxLayout) -> None:
        """The timeline and the downstream effect records."""
        self.timeline_title = QLabel("<b>Timeline</b>")
        v.addWidget(self.timeline_title)
        self.timeline = TimelineWidget()
        self.timeline_scroll = QScrollArea()
        self.timeline_scroll.setWidget(self.timeline)
        self.timeline_scroll.setWidgetResizable(True)
        self.timeline_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.timeline_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        v.addWidget(self.timeline_scroll)
        # downstream effect records (issue #16): the proof that a side effect happened
        self.effects_box = QLabel()
        self.effects_box.setWordWrap(True)
        self.effects_box.setTextFormat(Qt.TextFormat.RichText)
        self.effects_box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # never squeezed below its rows by the attempts/payload splitter under it
        self.effects_box.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        v.addWidget(self.effects_box)
        # the records themselves: a table with its own horizontal scroll (ids, times and shown columns
        # do not fit a 340 px pane; as rich text they wrapped and were cut)
        self.effects_table = QTableWidget(0, 0)
        self.effects_table.verticalHeader().hide()
        self.effects_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.effects_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.effects_table.verticalHeader().setDefaultSectionSize(22)
        self.effects_table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.effects_table.hide()
        v.addWidget(self.effects_table)

    def _build_attempts_and_payloads(self) -> QSplitter:
        """The attempts table over the payload viewers (Request, Response, Error, Records)."""
        split = QSplitter(Qt.Orientation.Vertical)
        self.attempts_model = AttemptsModel(self)
        self.attempts = QTableView()
        self.attempts.setModel(self.attempts_model)
        self.attempts.verticalHeader().hide()
        self.attempts.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.attempts.horizontalHeader().setStretchLastSection(True)
        self.attempts.setAlternatingRowColors(True)
        self.attempts.verticalHeader().setDefaultSectionSize(22)
        self.attempts.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.attempts.customContextMenuRequested.connect(self._attempts_menu)
        split.addWidget(self.attempts)
        self.payloads = QTabWidget()
        self.viewers: dict[str, QPlainTextEdit] = {}
        for name in ("Request", "Response", "Error", "Records"):
            ed = QPlainTextEdit()
            ed.setReadOnly(True)
            ed.setFont(mono())
            ed.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
            if name != "Records":
                ed.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
                ed.customContextMenuRequested.connect(lambda pos, n=name: self._payload_menu(n, pos))
            self.viewers[name] = ed
            self.payloads.addTab(ed, name)
        split.addWidget(self.payloads)
        # the payloads get the larger share: on a 1280×800 screen they were down to three lines
        self.attempts.setMinimumHeight(70)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setSizes([200, 300])
        return split

    # -------------------------------------------------------------------------------- content

    def clear(self):
        self.detail = None
        self._revealed = {}
        self.body.hide()
        self.placeholder.show()

    def set_detail(self, d: Detail, now: datetime | None):
        if self.detail is None or (d.scope_raw, d.key_raw) != (self.detail.scope_raw, self.detail.key_raw):
            self._revealed = {}
        self.detail, self._now = d, now
        self.placeholder.hide()
        self.body.show()
        self._rerender()

    def _rerender(self):
        d = self.detail
        if d is None:
            return
        rec: Operation | None = d.records[0] if d.records else None
        z = theme.TIME.zone()
        if rec is not None and self._revealed:
            from dataclasses import replace

            rec = replace(rec, **{w[1]: v for w, v in self._revealed.items() if w[0] == "op"})
        self.title.setText(visible(rec.key) if rec else "(operation not found)")
        if rec is None:
            self.header.setText("This operation is no longer in the ledger (it may have been purged).")
        else:
            sc = theme.colour(theme.STATUS_COLOURS, rec.status).name()
            rows = [
                ("Scope", html.escape(rec.scope or "(none)")),
                ("Kind", html.escape(str(rec.kind or "—"))),
                (
                    "Status",
                    f'<span style="color:{sc}"><b>{theme.STATUS_GLYPHS[rec.status]} '
                    f"{theme.STATUS_WORDS[rec.status]}</b></span> (ledger: {html.escape(str(rec.raw_status))})",
                ),
                ("Created", _when(rec.created_at, z)),
                ("Expires", _when(rec.expires_at, z) + self._expired_note(rec)),
                ("Fingerprint", f"<code>{html.escape(str(rec.fingerprint or '—'))}</code>"),
                ("Intent", f"<code>{html.escape(str(rec.intent_ref or '—'))}</code>"),
                ("Effect", f"<code>{html.escape(str(rec.effect_ref or '—'))}</code>"),
                (
                    "Attempts",
                    str(rec.attempt_count if rec.attempt_count is not None else len(d.attempts))
                    + (f" · {len(d.records)} records for this key" if len(d.records) > 1 else ""),
                ),
            ]
            muted = self.palette().color(QPalette.ColorRole.PlaceholderText).name()
            cells = "".join(
                f'<tr><td style="padding-right:10px; color:{muted}">{k}</td><td>{v}</td></tr>' for k, v in rows
            )
            self.header.setText(f"<table cellspacing=0 cellpadding=1>{cells}</table>")
        self.findings_box.setText(self._findings_html(d.findings, d.explanations, d.state))
        self.findings_box.setVisible(True)
        created = rec.created_at if rec else None
        expires = rec.expires_at if rec else None
        self.timeline.set_operation(d.attempts, created, expires, self._now)
        self.timeline_scroll.setFixedHeight(min(self.timeline.sizeHint().height(), 260) + 2)
        self.timeline_title.setText(
            f"<b>Timeline</b> — {len(d.attempts)} attempt{'s' if len(d.attempts) != 1 else ''} ({z})"
        )
        self.effects_box.setText(self._effects_html(d))
        self.effects_box.setVisible(bool(d.effects_where or d.effects_problem))
        self._fill_effects_table(d)
        self.attempts_model.set_attempts(
            d.attempts,
            self.timeline.after_expiry_rows(),
            {(w[1], w[2]): v for w, v in self._revealed.items() if w[0] == "att"},
        )
        self.attempts.resizeColumnsToContents()
        for name in ("Request", "Response", "Error"):
            p = getattr(rec, name.lower()) if rec else None
            text = render_payload(p)
            for w, v in self._revealed.items():
                if w[0] == "payload" and w[1] == name.lower():
                    shown = json.dumps(v, ensure_ascii=False)[1:-1] if p is not None and p.encoding == "json" else v
                    text = text.replace(w[2], shown)
            self.viewers[name].setPlainText(visible(text, LINE_BREAKS))
        self.viewers["Records"].setPlainText(visible(self._records_text(d.records), LINE_BREAKS))

    EFFECTS_SHOWN = 10

    def _effects_html(self, d: Detail) -> str:
        """The operation's effect records as a small table (masked values; at most ``EFFECTS_SHOWN``)."""
        if d.effects_problem:
            return f"<b>Effect records</b> — <i>not read: {html.escape(d.effects_problem)}</i>"
        n = len(d.effects)
        title = f"<b>Effect records</b> — {n} in {html.escape(d.effects_where)}"
        if not n:
            return title + "<br><i>no side effect of this operation was recorded downstream</i>"
        more = f" <i>(the first {self.EFFECTS_SHOWN} shown)</i>" if n > self.EFFECTS_SHOWN else ""
        warn = " <span style='color:#b00020'><b>‼ more than one</b></span>" if n > 1 else ""
        return f"{title}{warn}{more}"

    def effects_rows(self, d: Detail) -> tuple[list[str], list[list[str]]]:
        """(headers, rows) of the effect records table: record id, reference, time, the shown columns
        (values already masked by the session), at most ``EFFECTS_SHOWN`` rows."""
        z = theme.TIME.zone()
        keys = list(d.effects[0].shown) if d.effects else []
        rows = [
            [
                str(e.record_id if e.record_id is not None else "—"),
                str(e.reference or "—"),
                theme.TIME.fmt(e.at) if e.at else "—",
                *[str(e.shown.get(k, "—")) for k in keys],
            ]
            for e in d.effects[: self.EFFECTS_SHOWN]
        ]
        return ["record", "reference", f"at ({z})", *keys], rows

    def _fill_effects_table(self, d: Detail) -> None:
        t = self.effects_table
        if d.effects_problem or not d.effects:
            t.hide()
            t.setRowCount(0)
            return
        heads, rows = self.effects_rows(d)
        t.clear()
        t.setColumnCount(len(heads))
        t.setHorizontalHeaderLabels(heads)
        t.setRowCount(len(rows))
        for i, row in enumerate(rows):
            for j, cell in enumerate(row):
                t.setItem(i, j, QTableWidgetItem(cell))
        t.resizeColumnsToContents()
        bar = t.horizontalScrollBar().sizeHint().height()
        t.setFixedHeight(t.horizontalHeader().sizeHint().height() + 22 * len(rows) + bar + 4)
        t.show()

    def _expired_note(self, rec: Operation) -> str:
        if rec.expires_at and self._now and rec.expires_at <= self._now:
            return " <i>(expired)</i>"
        return ""

    def _findings_html(self, fs: list[Finding], expl: dict[int, str], state=None) -> str:
        """The findings box: *pending*, *none* or *these* (issue 20 §1), from the tab's finding board
        (``state``, an :class:`~idemview.services.findstate.OpFindings`). Without a state the pane says
        "pending": it never claims "no findings" for an operation nobody said was checked."""
        from idemview.services.findstate import FindingState

        kind_state = state.state if state is not None else (FindingState.THESE if fs else FindingState.PENDING)
        pending = state.pending if state is not None else frozenset()
        failed = state.failed if state is not None else {}
        muted = self.palette().color(QPalette.ColorRole.PlaceholderText).name()
        still = (
            f'<p style="margin:2px 0; color:{muted}"><i>Scanning: {len(pending)} finding '
            f"kind{'s' if len(pending) != 1 else ''} not checked yet for this operation; this updates by "
            "itself when the scan lands.</i></p>"
            if pending
            else ""
        )
        from idemview.services.scanstate import CANCELLED

        why = "cancelled" if set(failed.values()) == {CANCELLED} else "cancelled or the check failed"
        unchecked = (
            f'<p style="margin:2px 0; color:{muted}"><i>Not checked ({why}): '
            + html.escape(", ".join(theme.KIND_WORDS[k] for k in failed))
            + "</i></p>"
            if failed
            else ""
        )
        if kind_state is FindingState.PENDING or (not fs and kind_state is not FindingState.NONE):
            return "<b>Findings: pending</b> — the findings scan has not reached this operation yet." + (
                still or '<p style="margin:2px 0"><i>This updates by itself when the scan lands.</i></p>'
            )
        if not fs and failed:  # "✓ No findings" said "none" of kinds nobody checked (Esc at the open)
            return "<b>Findings: not all checked</b> — none found by the kinds that were checked." + unchecked
        if not fs:
            return "✓ No findings for this operation."
        parts = []
        for i, f in enumerate(fs):
            c = theme.colour(theme.SEVERITY_COLOURS, f.severity).name()
            parts.append(
                f'<p style="margin:2px 0"><span style="color:{c}"><b>{theme.SEVERITY_GLYPHS[f.severity]} '
                f"{f.severity.value} · {theme.KIND_WORDS[f.kind]}</b></span> — "
                f"{html.escape(expl.get(id(f), f.kind.value))} "
                f'<a href="help:{i}">what is this?</a></p>'
            )
        why = self._why(fs)
        if why:
            parts.append(
                '<p style="margin:4px 0 2px 0"><b>Why dedup failed</b> (from the attempts and records below):</p>'
                + "".join(f'<p style="margin:1px 0 1px 10px">• {html.escape(w)}</p>' for w in why)
            )
        parts.append('<p style="margin:2px 0"><i>Evidence for a human decision, not a verdict.</i></p>')
        return "".join(parts) + still + unchecked

    def _why(self, fs: list[Finding]) -> list[str]:
        """Why a duplicate effect got through (services.why), computed from this operation's evidence."""
        from idemview.domain.model import FindingKind
        from idemview.services.why import why_duplicate

        if self.detail is None or not any(f.kind == FindingKind.DUPLICATE_EFFECT for f in fs):
            return []
        return why_duplicate(self.detail)

    def _finding_link(self, href: str) -> None:
        """ "what is this?" beside a finding: its kind's definition and severity rule (one click)."""
        from idemview.qt.helpdialog import show_findings_help

        d = self.detail
        if d is None or not href.startswith("help:"):
            return
        i = int(href[5:])
        if 0 <= i < len(d.findings):
            show_findings_help(self, d.findings[i].kind, d.findings[i])

    def _records_text(self, recs: list[Operation]) -> str:
        out = []
        z = theme.TIME.zone()
        for i, r in enumerate(recs, 1):
            out.append(
                f"record {i}: status {r.status.value} (ledger: {r.raw_status}), created "
                f"{theme.TIME.fmt(r.created_at)} {z}, updated {theme.TIME.fmt(r.updated_at)}, completed "
                f"{theme.TIME.fmt(r.completed_at)}, locked {theme.TIME.fmt(r.locked_at)}, lock expires "
                f"{theme.TIME.fmt(r.lock_expires_at)}, expires {theme.TIME.fmt(r.expires_at)}"
            )
        return "\n".join(out) or "(no record)"

    def _copy_key(self):
        if self.detail and self.detail.records:
            QGuiApplication.clipboard().setText(visible(self.detail.records[0].key))

    # ----------------------------------------------------------------------------- reveal one cell

    def _reveal_action(self, label: str, shown: str, where: tuple, parent) -> QAction:
        ok, tip = reveal_state(shown)
        a = QAction(label, parent)
        a.setEnabled(ok and where not in self._revealed)
        a.setToolTip(tip if where not in self._revealed else "already revealed")
        d = self.detail
        a.triggered.connect(lambda: self.reveal_requested.emit((d.scope_raw, d.key_raw, where)))
        return a

    def header_reveal_actions(self, parent=None) -> list[QAction]:
        """One "Reveal …" action per masked field of the header (credentials disabled)."""
        d = self.detail
        if d is None or not d.records:
            return []
        rec = d.records[0]
        out = []
        for attr, label in self.HEADER_FIELDS:
            shown = str(getattr(rec, attr) or "")
            if reveal_state(shown)[1] != "nothing is masked here":
                out.append(self._reveal_action(f"Reveal this value: {label}", shown, ("op", attr), parent or self))
        return out

    def attempt_reveal_action(self, row: int, col: int, parent=None) -> QAction | None:
        d = self.detail
        attr = self.ATT_COLUMNS.get(col)
        if d is None or attr is None or not 0 <= row < len(d.attempts):
            return None
        return self._reveal_action(
            "Reveal this value", str(getattr(d.attempts[row], attr) or ""), ("att", row, attr), parent or self
        )

    def payload_reveal_action(self, viewer: str, pos: int, parent=None) -> QAction | None:
        """The action for the masked value under text position ``pos`` of a payload viewer."""
        if self.detail is None or viewer not in ("Request", "Response", "Error"):
            return None
        tag = tag_at(self.viewers[viewer].toPlainText(), pos)
        if tag is None:
            return None
        return self._reveal_action("Reveal this value", tag, ("payload", viewer.lower(), tag), parent or self)

    def show_revealed(self, scope: str, key: str, where: tuple, value: str):
        d = self.detail
        if d is None or (d.scope_raw, d.key_raw) != (scope, key):
            return  # another operation is shown now
        self._revealed[where] = value
        self._rerender()

    def _popup(self, widget, pos: QPoint, actions, base: QMenu | None = None):
        menu = base or QMenu(widget)
        menu.setToolTipsVisible(True)
        if actions and base is not None:
            menu.addSeparator()
        for a in actions:
            a.setParent(menu)
            menu.addAction(a)
        if menu.actions():
            menu.popup(widget.mapToGlobal(pos))

    def _header_menu(self, w, pos: QPoint):
        self._popup(w, pos, self.header_reveal_actions())

    def _attempts_menu(self, pos: QPoint):
        idx = self.attempts.indexAt(pos)
        a = self.attempt_reveal_action(idx.row(), idx.column()) if idx.isValid() else None
        self._popup(self.attempts.viewport(), pos, [a] if a else [])

    def _payload_menu(self, name: str, pos: QPoint):
        ed = self.viewers[name]
        a = self.payload_reveal_action(name, ed.cursorForPosition(pos).position())
        self._popup(ed.viewport(), pos, [a] if a else [], ed.createStandardContextMenu(pos))
