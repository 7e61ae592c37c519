"""Colours, glyphs, palettes and time formatting shared by every view.

Outcome, status and severity are never shown by colour alone: each has a glyph and a word too, so the
views stay readable for colour-blind people, on a monochrome printout and in a screenshot pasted into a
ticket. The palette follows the system colour scheme (``QStyleHints.colorScheme``) and is rebuilt when
it changes; the severity/outcome colours have a light and a dark variant chosen for contrast.
"""

from __future__ import annotations

from datetime import UTC, datetime

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from idemview.domain import palette as _palette
from idemview.domain.kinds import KIND_SHORT as _KIND_SHORT
from idemview.domain.model import FindingKind, Outcome, Severity, Status  # noqa: F401 - the views use theme.Severity

# The colour, glyph and word tables live in the core (idemview.domain.palette): the incident report
# draws with the same ones. Re-exported here for the views.
from idemview.domain.palette import (  # noqa: F401
    KIND_WORDS,
    OUTCOME_COLOURS,
    OUTCOME_WORDS,
    SEVERITY_COLOURS,
    SEVERITY_GLYPHS,
    STATUS_COLOURS,
    STATUS_GLYPHS,
    STATUS_WORDS,
)
from idemview.domain.palette import OUTCOME_GLYPHS as _OUTCOME_GLYPHS

UTC = UTC

# Short badge labels for the grid (the full words are in the tooltip): derived from the kinds
# (FindingKind.short), so a kind registered at run time has one too.
KIND_SHORT = _KIND_SHORT
# Action classes (DESIGN §5.1) as the findings panel names its groups.
ACTION_LABELS = {
    "money": "moved money",
    "access": "changed access",
    "approval": "approvals (a person decides)",
    "inventory": "changed inventory",
    "notification": "notified someone",
    "record": "wrote records",
    "downstream": "triggered downstream work",
    "read": "reads",
    "unknown": "action unknown",
}


def outcome_glyph(o: Outcome) -> str:
    """The outcome's glyph; ⏱ falls back to ◷ when the UI font cannot draw it (no tofu boxes)."""
    g = _OUTCOME_GLYPHS.get(o, "?")
    if g == "⏱" and QGuiApplication.instance() is not None:
        if not QFontMetrics(QGuiApplication.font()).inFontUcs4(ord(g)):
            return "◷"
    return g


def kind_glyph(kind: FindingKind, severity: Severity | None = None) -> str:
    """The glyph of a ``kind`` badge: the kind's hint (``FindingKind.glyph``), else ``severity``'s."""
    return _palette.kind_glyph(kind, severity)


def kind_colour(kind: FindingKind, severity: Severity | None = None) -> QColor:
    """The colour of a ``kind`` badge for the current scheme: the kind's hint, else ``severity``'s."""
    light, dark = _palette.kind_colour(kind, severity)
    return QColor(dark if is_dark() else light)


def is_dark() -> bool:
    """True when the application palette is dark (read from the palette, which we keep in sync with
    the system scheme, so a user's own dark Qt theme also counts)."""
    app = QGuiApplication.instance()
    if app is None:
        return False
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128


def colour(table: dict, key) -> QColor:
    light, dark = table.get(key, ("#616161", "#9e9e9e"))
    return QColor(dark if is_dark() else light)


def dark_palette() -> QPalette:
    p = QPalette()
    base, window, text = QColor("#1e1f22"), QColor("#2b2d30"), QColor("#dfe1e5")
    for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
        p.setColor(group, QPalette.ColorRole.Window, window)
        p.setColor(group, QPalette.ColorRole.WindowText, text)
        p.setColor(group, QPalette.ColorRole.Base, base)
        p.setColor(group, QPalette.ColorRole.AlternateBase, QColor("#25272a"))
        p.setColor(group, QPalette.ColorRole.Text, text)
        p.setColor(group, QPalette.ColorRole.Button, QColor("#393b40"))
        p.setColor(group, QPalette.ColorRole.ButtonText, text)
        p.setColor(group, QPalette.ColorRole.ToolTipBase, QColor("#393b40"))
        p.setColor(group, QPalette.ColorRole.ToolTipText, text)
        p.setColor(group, QPalette.ColorRole.Highlight, QColor("#2f65ca"))
        p.setColor(group, QPalette.ColorRole.HighlightedText, QColor("#ffffff"))
        p.setColor(group, QPalette.ColorRole.Link, QColor("#6ea8fe"))
        p.setColor(group, QPalette.ColorRole.PlaceholderText, QColor("#8c8f94"))
        p.setColor(group, QPalette.ColorRole.Mid, QColor("#4e5157"))
        p.setColor(group, QPalette.ColorRole.Midlight, QColor("#43454a"))
        p.setColor(group, QPalette.ColorRole.Dark, QColor("#151618"))
        p.setColor(group, QPalette.ColorRole.Light, QColor("#55585e"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor("#6f737a"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText, QColor("#6f737a"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, QColor("#6f737a"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Window, window)
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Base, base)
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Button, QColor("#393b40"))
    return p


def apply_scheme(app: QApplication, scheme: Qt.ColorScheme | None = None) -> bool:
    """Apply the Fusion style with a palette for ``scheme`` (default: the system's). Returns True
    when dark. Fusion is used because it honours the palette identically on every platform."""
    if scheme is None:
        scheme = app.styleHints().colorScheme()
    app.setStyle("Fusion")
    dark = scheme == Qt.ColorScheme.Dark
    app.setPalette(dark_palette() if dark else app.style().standardPalette())
    return dark


class TimeFormat(QObject):
    """Process-wide UTC/local switch. Every header that shows times names the zone (``UTC`` or the
    local zone's abbreviation), so a screenshot never leaves the zone to guesswork."""

    changed = Signal()

    def __init__(self):
        super().__init__()
        self.utc = True

    def set_utc(self, utc: bool) -> None:
        if utc != self.utc:
            self.utc = utc
            self.changed.emit()

    def zone(self) -> str:
        """``UTC``, or ``local <abbreviation>`` (``local UTC`` on a machine that runs in UTC: the word
        "local" shows that the switch took effect even when the clock reads the same)."""
        if self.utc:
            return "UTC"
        return f"local {datetime.now().astimezone().tzname() or ''}".strip()

    def tz(self):
        """The ``tzinfo`` times are shown in (UTC or this computer's zone)."""
        from datetime import UTC

        return UTC if self.utc else datetime.now().astimezone().tzinfo

    def convert(self, t: datetime) -> datetime:
        return t.astimezone(UTC) if self.utc else t.astimezone()

    def fmt(self, t: datetime | None, seconds: bool = True) -> str:
        if t is None:
            return "—"
        return self.convert(t).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")

    def fmt_short(self, t: datetime | None) -> str:
        if t is None:
            return "—"
        return self.convert(t).strftime("%H:%M:%S")


TIME = TimeFormat()


def a_an(word: str) -> str:
    """``word`` with its indefinite article: "an unresolved failure", "a duplicate effect"."""
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def duration(seconds: float | None) -> str:
    """A duration on a timeline or in a table (milliseconds and tenths shown); "—" when unknown."""
    from idemview.ledger.times import human_duration

    return "—" if seconds is None else human_duration(seconds, fine=True)


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``"1 operation"``, ``"2 operations"``, ``"1,204 operations"`` (English plural; ``nouns`` for
    irregular forms)."""
    return f"{n:,} {noun if n == 1 else (nouns or noun + 's')}"
