"""The filter bar: time range, status, finding-kind chips with counts, key / intent / scope search, and
the filter read out as a sentence (:meth:`idemview.domain.filters.Filter.sentence`) — the very sentence the
evidence manifest records, so what the investigator saw is what the export says.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from PySide6.QtCore import QDateTime, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QComboBox,
    QDateTimeEdit,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from idemview.domain.actions import ACTIONS
from idemview.domain.filters import Filter
from idemview.domain.model import DEFAULT_SEVERITY, LEDGER_KINDS, FindingKind, Status
from idemview.masking.visible import visible
from idemview.qt import theme
from idemview.qt.flow import FlowLayout

UTC = UTC
RANGES = [
    ("All time", None),
    ("Last 1 h", 3600),
    ("Last 6 h", 6 * 3600),
    ("Last 24 h", 86400),
    ("Last 7 days", 7 * 86400),
    ("Custom…", "custom"),
    ("Overview selection", "region"),
]


class CustomRangeDialog(QDialog):
    """Two instants, edited in the zone shown everywhere else (named in the labels)."""

    def __init__(self, since: datetime | None, until: datetime | None, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Custom time range")
        z = theme.TIME.zone()
        form = QFormLayout(self)
        now = datetime.now(UTC)
        self.a, self.b = QDateTimeEdit(), QDateTimeEdit()
        for w, v in ((self.a, since or now - timedelta(hours=1)), (self.b, until or now)):
            w.setDisplayFormat("yyyy-MM-dd HH:mm:ss")
            w.setCalendarPopup(True)
            w.setTimeZone(_qtz())
            w.setDateTime(QDateTime.fromSecsSinceEpoch(int(v.timestamp()), _qtz()))
        form.addRow(f"Created from ({z})", self.a)
        form.addRow(f"Created before ({z})", self.b)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        form.addRow(bb)

    def value(self) -> tuple[datetime, datetime]:
        a = datetime.fromtimestamp(self.a.dateTime().toSecsSinceEpoch(), UTC)
        b = datetime.fromtimestamp(self.b.dateTime().toSecsSinceEpoch(), UTC)
        return (a, b) if a <= b else (b, a)


def _qtz():
    from PySide6.QtCore import QTimeZone

    return QTimeZone.utc() if theme.TIME.utc else QTimeZone.systemTimeZone()


class FilterBar(QWidget):
    """Edits a :class:`Filter`; emits ``changed(Filter)`` (text fields debounced by 300 ms)."""

    changed = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._flt = Filter()
        self._range_secs: int | None = None
        self._counts: dict[FindingKind, int] = {}
        self._unsupported: dict[FindingKind, str] = {}
        v = QVBoxLayout(self)
        v.setContentsMargins(6, 4, 6, 2)
        v.setSpacing(3)
        row1 = QHBoxLayout()
        row1.setSpacing(6)
        self.range = QComboBox()
        self.range.setToolTip("Operations created in this time range (relative ranges end at 'now')")
        for label, _v in RANGES:
            self.range.addItem(label)
        self.range.model().item(len(RANGES) - 1).setEnabled(False)  # set by dragging on the overview
        self.range.activated.connect(self._range_chosen)
        self._build_menus()
        self.key_edit = self._search_edit("Idempotency key contains…")
        self.intent_edit = self._search_edit("Intent reference contains…")
        self.scope_edit = self._search_edit("Scope contains…")
        self.key_edit.setMinimumWidth(140)
        self.clear_btn = QToolButton()
        self.clear_btn.setText("Clear filter")
        self.clear_btn.clicked.connect(self.clear)
        row1.addWidget(QLabel("Created:"))
        row1.addWidget(self.range)
        row1.addWidget(self.status_btn)
        row1.addWidget(self.action_btn)
        row1.addWidget(self.key_edit, 2)
        row1.addWidget(self.intent_edit, 1)
        row1.addWidget(self.scope_edit, 1)
        row1.addWidget(self.clear_btn)
        # on the filter row: beside the chips it wrapped the last chip onto a line of its own at 1280 px
        self.help_btn = QToolButton(text="?")
        self.help_btn.setToolTip("What each finding chip means: definition, severity rule, the fields it rests on")
        self.help_btn.clicked.connect(self._help)
        row1.addWidget(self.help_btn)
        v.addLayout(row1)
        # chips wrap onto a second line on a narrow screen instead of widening the window
        row2 = FlowLayout(spacing=4)
        self.chips: dict[FindingKind, QToolButton] = {}
        row2.addWidget(QLabel("Findings:"))
        for k in FindingKind:
            if k in LEDGER_KINDS:
                continue  # about the ledger, not its operations: shown in the panel's "Ledger audit"
            b = QToolButton()
            b.setCheckable(True)
            b.setAutoRaise(False)
            b.toggled.connect(self._chips_changed)
            self.chips[k] = b
            row2.addWidget(b)
        v.addLayout(row2)
        self.sentence = QLabel()
        self.sentence.setObjectName("filterSentence")
        self.sentence.setWordWrap(True)
        self.sentence.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.sentence.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        f = self.sentence.font()
        f.setPointSizeF(f.pointSizeF() * 1.08)
        f.setBold(True)
        self.sentence.setFont(f)
        v.addWidget(self.sentence)
        self._debounce = QTimer(self, singleShot=True, interval=300)
        self._debounce.timeout.connect(self._emit)
        self._mute = False
        self._render_chips()
        self._update_sentence()
        theme.TIME.changed.connect(self._update_sentence)

    def _build_menus(self) -> None:
        """The Status and Action drop-down buttons (checkable entries, one per status / action class)."""
        self.status_btn = QToolButton()
        self.status_btn.setText("Status: any")
        self.status_btn.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.status_btn)
        self.status_actions: dict[Status, QAction] = {}
        for s in (Status.COMPLETED, Status.FAILED, Status.IN_PROGRESS, Status.NEW, Status.UNKNOWN):
            a = menu.addAction(f"{theme.STATUS_GLYPHS[s]} {theme.STATUS_WORDS[s]}")
            a.setCheckable(True)
            a.toggled.connect(self._statuses_changed)
            self.status_actions[s] = a
        self.status_btn.setMenu(menu)
        # what the action does (DESIGN §5.1): "3 duplicate effects that moved money"
        self.action_btn = QToolButton()
        self.action_btn.setText("Action: any")
        self.action_btn.setToolTip("Only operations whose kind does this (the layout's and connection's rules first)")
        self.action_btn.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        amenu = QMenu(self.action_btn)
        self.action_actions: dict[str, QAction] = {}
        for a_name in ACTIONS:
            a = amenu.addAction(theme.ACTION_LABELS[a_name])
            a.setCheckable(True)
            a.toggled.connect(self._actions_changed)
            self.action_actions[a_name] = a
        self.action_btn.setMenu(amenu)

    def _search_edit(self, placeholder: str) -> QLineEdit:
        e = QLineEdit()
        e.setPlaceholderText(placeholder)
        e.setClearButtonEnabled(True)
        e.textChanged.connect(lambda _t: self._debounce.start())
        e.returnPressed.connect(self._emit)
        return e

    # ---------------------------------------------------------------------------------- state

    def filter(self) -> Filter:
        """The current filter; relative ranges ('last 6 h') are re-anchored to now on every call."""
        f = self._flt
        since, until = f.since, f.until
        if self._range_secs:
            until = None
            since = (datetime.now(UTC) - timedelta(seconds=self._range_secs)).replace(microsecond=0)
        return Filter(
            findings=[k for k, b in self.chips.items() if b.isChecked()],
            statuses=[s for s, a in self.status_actions.items() if a.isChecked()],
            kinds=list(f.kinds),
            key=self.key_edit.text() or None,
            intent=self.intent_edit.text() or None,
            scope=self.scope_edit.text() or None,
            since=since,
            until=until,
            unmapped_status=f.unmapped_status,
            actions=[a for a, act in self.action_actions.items() if act.isChecked()],
        )

    def set_counts(
        self,
        counts: dict[FindingKind, int],
        unsupported: dict[FindingKind, str],
        totals: dict[FindingKind, int] | None = None,
        severities: dict | None = None,
    ):
        """Chip counts: ``counts`` of the filtered set, ``totals`` of the whole ledger (given when the
        filter narrows: the chip reads "7 of 63"); ``severities`` the worst severity found per kind
        (the chip's glyph matches the findings panel: a critical replay shows the critical glyph)."""
        self._counts, self._unsupported = dict(counts), dict(unsupported)
        self._totals = dict(totals) if totals is not None else None
        self._severities = dict(severities or {})
        self._render_chips()

    def _help(self):
        from idemview.qt.helpdialog import show_findings_help

        show_findings_help(self)

    def set_board(self, board) -> None:
        """The tab's :class:`~idemview.services.findstate.FindingBoard`: a kind it still has pending
        shows "…" on its chip (never a count of 0 while it is being checked)."""
        self._board = board
        self._render_chips()

    def chip_severity(self, k: FindingKind):
        return (
            self._severities.get(k, DEFAULT_SEVERITY[k]) if getattr(self, "_severities", None) else DEFAULT_SEVERITY[k]
        )

    #: the glyph of a chip whose kind is not checked yet: its severity is not known, never guessed
    PENDING_GLYPH = "◌"

    def _render_chips(self):
        totals = getattr(self, "_totals", None)
        board = getattr(self, "_board", None)
        for k, b in self.chips.items():
            n = self._counts.get(k)
            why = self._unsupported.get(k)
            pending = board is not None and board.kind_pending(k)
            if pending:  # still being checked: a finding filter on it still works (its own SQL)
                why = None
            # a kind whose check was cancelled or failed was never answered: its severity is as unknown
            # as a pending one's (its tooltip says why; the chip stays disabled)
            unchecked = board is not None and k in board.failed
            # not known yet (being checked, or no scan has answered): a neutral chip, not the default
            # severity's colour and glyph, which the scan's answer then contradicted (a tester saw a
            # chip change severity when the scan landed)
            unknown = pending or (n is None and not why)
            sev = self.chip_severity(k)
            shown = ""
            if unknown:
                shown = "  …"
            elif n is not None and not why:
                shown = f"  {n} of {totals.get(k, 0)}" if totals is not None else f"  {n}"
            glyph = self.PENDING_GLYPH if unknown or unchecked else theme.kind_glyph(k, sev)  # hint or sev's
            b.setText(f"{glyph} {theme.KIND_SHORT[k]}" + shown)
            col = theme.kind_colour(k, sev).name()
            b.setEnabled(why is None)
            b.setToolTip(
                (why if why.startswith(("still", "the check")) else f"Not checkable with this layout: {why}")
                if why
                else ("still being checked (its severity is known once it is) — " if unknown else f"{sev.value} — ")
                + f"show only operations with {theme.a_an(theme.KIND_WORDS[k])}"
            )
            b.setStyleSheet(
                f"QToolButton {{ border: 1px solid {col}; border-radius: 9px; padding: 1px 8px; }}"
                f"QToolButton:checked {{ background: {col}; color: white; }}"
                if n and not unknown and not unchecked
                else "QToolButton { border: 1px solid palette(mid); border-radius: 9px; padding: 1px 8px; }"
                "QToolButton:checked { background: palette(highlight); color: palette(highlighted-text); }"
            )

    def set_findings(self, kinds: list[FindingKind]):
        self._mute = True
        for k, b in self.chips.items():
            b.setChecked(k in kinds)
        self._mute = False
        self._emit()

    def set_actions(self, actions: list[str], kinds: list[FindingKind] | None = None):
        """Show only operations of these action classes (and, with ``kinds``, these finding kinds)."""
        self._mute = True
        for a, act in self.action_actions.items():
            act.setChecked(a in actions)
        if kinds is not None:
            for k, b in self.chips.items():
                b.setChecked(k in kinds)
        self._mute = False
        self._actions_changed()  # names the chosen classes on the button and emits the filter once

    def toggle_finding(self, kind: FindingKind):
        self.chips[kind].setChecked(not self.chips[kind].isChecked())

    def set_region(self, since: datetime, until: datetime):
        """A window dragged on the overview becomes the filter's created range."""
        self._range_secs = None
        self._flt.since, self._flt.until = since, until
        self.range.setCurrentIndex(len(RANGES) - 1)
        self._emit()

    def range_is_region(self) -> bool:
        """The time range came from the overview (or a custom range): the chart draws it as a band."""
        return self._range_secs is None and (self._flt.since is not None or self._flt.until is not None)

    def clear_time(self):
        """Drop the time range only (the overview's "Clear window")."""
        self._range_secs = None
        self._flt.since = self._flt.until = None
        self.range.setCurrentIndex(0)
        self._emit()

    def set_key(self, text: str):
        self.key_edit.setText(text)
        self._emit()

    def clear(self):
        self._mute = True
        for b in self.chips.values():
            b.setChecked(False)
        for a in self.status_actions.values():
            a.setChecked(False)
        for a in self.action_actions.values():
            a.setChecked(False)
        self._actions_changed()
        for e in (self.key_edit, self.intent_edit, self.scope_edit):
            e.clear()
        self._flt = Filter()
        self._range_secs = None
        self.range.setCurrentIndex(0)
        self._mute = False
        self._emit()

    # ------------------------------------------------------------------------------- signals

    def _range_chosen(self, i: int):
        v = RANGES[i][1]
        if v == "custom":
            dlg = CustomRangeDialog(self._flt.since, self._flt.until, self)
            if dlg.exec() != QDialog.DialogCode.Accepted:
                return
            self._range_secs = None
            self._flt.since, self._flt.until = dlg.value()
        elif v == "region":
            return
        else:
            self._range_secs = v
            self._flt.since = self._flt.until = None
        self._emit()

    def _statuses_changed(self):
        chosen = [s for s, a in self.status_actions.items() if a.isChecked()]
        self.status_btn.setText("Status: " + (", ".join(theme.STATUS_WORDS[s] for s in chosen) if chosen else "any"))
        if not self._mute:
            self._emit()

    def _actions_changed(self, *_):
        chosen = [a for a, act in self.action_actions.items() if act.isChecked()]
        self.action_btn.setText("Action: " + (", ".join(chosen) if chosen else "any"))
        if not self._mute:
            self._emit()

    def _chips_changed(self):
        if not self._mute:
            self._emit()

    def _emit(self):
        self._debounce.stop()
        if self._mute:
            return
        self._update_sentence()
        self.changed.emit(self.filter())

    def _update_sentence(self):
        # Filter.sentence() in the zone shown: the manifest records this one beside the UTC sentence.
        self.sentence.setText(visible(self.filter().sentence(theme.TIME.zone(), theme.TIME.tz())))

    def sentence_text(self) -> str:
        return self.sentence.text()
