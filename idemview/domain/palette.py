"""Colours, glyphs, words and time geometry shared by every picture idemview draws: the GUI's views
(``idemview.qt.theme``, ``qt.timeline``, ``qt.overview``) and the incident report's inline SVG
(``idemview.evidence.svg``). Qt-free, so the report draws with the same table and the same scale.

Outcome, status and severity are never shown by colour alone: each has a glyph and a word too, so a
view or a printed report stays readable for colour-blind people and in black and white. Colours are
``(light, dark)`` pairs of ``#rrggbb``: dark variants are lighter so they keep contrast on a dark
background; the report (paper) uses the light ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from idemview.domain.kinds import KIND_WORDS as _KIND_WORDS
from idemview.domain.model import Attempt, FindingKind, Outcome, Severity, Status

OUTCOME_COLOURS = {
    Outcome.SUCCEEDED: ("#2e7d32", "#66bb6a"),
    Outcome.FAILED: ("#c62828", "#ef5350"),
    Outcome.TIMED_OUT: ("#ef6c00", "#ffa726"),
    Outcome.REJECTED: ("#6a1b9a", "#ba68c8"),
    Outcome.IN_PROGRESS: ("#1565c0", "#42a5f5"),
    Outcome.UNKNOWN: ("#616161", "#9e9e9e"),
}
STATUS_COLOURS = {
    Status.COMPLETED: OUTCOME_COLOURS[Outcome.SUCCEEDED],
    Status.FAILED: OUTCOME_COLOURS[Outcome.FAILED],
    Status.IN_PROGRESS: OUTCOME_COLOURS[Outcome.IN_PROGRESS],
    Status.NEW: ("#455a64", "#90a4ae"),
    Status.UNKNOWN: OUTCOME_COLOURS[Outcome.UNKNOWN],
}
SEVERITY_COLOURS = {
    Severity.CRITICAL: ("#b71c1c", "#ff5252"),
    Severity.HIGH: ("#d84315", "#ff8a50"),
    Severity.MEDIUM: ("#a66c00", "#ffca28"),
    Severity.LOW: ("#1565c0", "#64b5f6"),
    Severity.INFO: ("#546e7a", "#b0bec5"),
}
FALLBACK_COLOUR = ("#616161", "#9e9e9e")
SEVERITY_GLYPHS = {
    Severity.CRITICAL: "‼",
    Severity.HIGH: "▲",
    Severity.MEDIUM: "◆",
    Severity.LOW: "●",
    Severity.INFO: "ℹ",
}
STATUS_GLYPHS = {
    Status.COMPLETED: "✓",
    Status.FAILED: "✗",
    Status.IN_PROGRESS: "⟳",
    Status.NEW: "○",
    Status.UNKNOWN: "?",
}
OUTCOME_GLYPHS = {
    Outcome.SUCCEEDED: "✓",
    Outcome.FAILED: "✗",
    Outcome.TIMED_OUT: "⏱",
    Outcome.REJECTED: "⊘",
    Outcome.IN_PROGRESS: "⟳",
    Outcome.UNKNOWN: "?",
}
#: The glyphs a report uses: ⏱ is missing from common fonts (DejaVu, Liberation), and a reader's
#: viewer cannot fall back as the GUI does, so a timed-out attempt is ◷ there.
PRINT_OUTCOME_GLYPHS = {**OUTCOME_GLYPHS, Outcome.TIMED_OUT: "◷"}
STATUS_WORDS = {
    Status.COMPLETED: "completed",
    Status.FAILED: "failed",
    Status.IN_PROGRESS: "in progress",
    Status.NEW: "new",
    Status.UNKNOWN: "unknown",
}
OUTCOME_WORDS = {
    Outcome.SUCCEEDED: "succeeded",
    Outcome.FAILED: "failed",
    Outcome.TIMED_OUT: "timed out",
    Outcome.REJECTED: "rejected",
    Outcome.IN_PROGRESS: "in progress",
    Outcome.UNKNOWN: "unknown",
}
#: A finding kind in words: derived from the kinds (FindingKind.words), see idemview.domain.kinds.
KIND_WORDS = _KIND_WORDS


def kind_glyph(kind: FindingKind, severity: Severity | None = None) -> str:
    """The glyph a badge of ``kind`` shows: the kind's own hint (``FindingKind.glyph``), else the glyph
    of ``severity`` (default: the kind's default severity)."""
    k = FindingKind(kind)
    return k.glyph or SEVERITY_GLYPHS[severity or k.severity]


def kind_colour(kind: FindingKind, severity: Severity | None = None) -> tuple[str, str]:
    """The ``(light, dark)`` colour pair of ``kind``: its own hint (``FindingKind.colour``), else the
    colour of ``severity`` (default: the kind's default severity)."""
    k = FindingKind(kind)
    return k.colour or SEVERITY_COLOURS[severity or k.severity]


#: Bottom-to-top order of the incident overview's stacked bars: successes at the base, the outcomes
#: that need a look on top where the eye lands.
OVERVIEW_STACK = [
    Outcome.SUCCEEDED,
    Outcome.REJECTED,
    Outcome.IN_PROGRESS,
    Outcome.UNKNOWN,
    Outcome.TIMED_OUT,
    Outcome.FAILED,
]
#: A status counted on the overview when the ledger keeps no attempt times (operations by status).
STATUS_AS_OUTCOME = {
    Status.COMPLETED.value: Outcome.SUCCEEDED,
    Status.FAILED.value: Outcome.FAILED,
    Status.IN_PROGRESS.value: Outcome.IN_PROGRESS,
    Status.NEW.value: Outcome.UNKNOWN,
    Status.UNKNOWN.value: Outcome.UNKNOWN,
}


def light(table: dict, key) -> str:
    """The light (paper) colour of ``key`` in one of the tables above, ``#rrggbb``."""
    return table.get(key, FALLBACK_COLOUR)[0]


def after_expiry(a: Attempt, expires: datetime | None) -> bool:
    """True when attempt ``a`` started after the key had expired (the attempts that may have repeated
    a side effect: DESIGN §5 ``replay_after_expiry``)."""
    return bool(expires and a.started_at and a.started_at > expires)


def timeline_span(
    attempts: Iterable[Attempt], created: datetime | None, expires: datetime | None
) -> tuple[float, float] | None:
    """The time range (epoch seconds, padded 6 % each side) one operation's timeline shows: every
    attempt start and finish and the record's creation; the expiry only when it falls inside that span
    (a replay) or within half of it after it (a 24 h dedup window after a 3 s operation is drawn as an
    arrow instead of squashing the bars). At least 2 s wide. ``None`` when nothing has a time."""
    ts = []
    for a in attempts:
        for t in (a.started_at, a.finished_at):
            if t is not None:
                ts.append(t.timestamp())
    if created:
        ts.append(created.timestamp())
    if not ts:
        return None
    lo, hi = min(ts), max(ts)
    if expires is not None:
        e = expires.timestamp()
        if lo <= e <= hi or (e > hi and e - hi <= max(hi - lo, 60) * 0.5):
            hi = max(hi, e)
    if hi - lo < 2:
        hi = lo + 2
    pad = (hi - lo) * 0.06
    return lo - pad, hi + pad


class TimeScale:
    """Epoch seconds ``[lo, hi]`` onto ``[x0, x1]`` (pixels), linearly; ``x(t)`` for a time."""

    def __init__(self, lo: float, hi: float, x0: float, x1: float):
        self.lo, self.hi, self.x0, self.x1 = lo, hi if hi > lo else lo + 1.0, x0, x1

    def x(self, t: float) -> float:
        return self.x0 + (t - self.lo) / (self.hi - self.lo) * (self.x1 - self.x0)
