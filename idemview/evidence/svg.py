"""Inline SVG pictures for the incident report (DESIGN §5.4): one operation's timeline and the
incident overview, drawn with the GUI's colour tables and time geometry (``idemview.domain.palette``)
so the report shows what the window shows. No Qt: the core may not import it.

The builder writes SVG 1.1 text elements only (``rect``, ``line``, ``path``, ``text``, ``title``):
no script, no ``href``, no external reference, so a mail client's preview or a browser offline
renders it the same. Every piece of text and every attribute value is XML-escaped here
(``html.escape`` with quotes), and text that comes from a ledger reaches it only after the report's
masking sink (:class:`idemview.evidence.report.Sink`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape

from idemview.domain.model import SEVERITY_ORDER, Attempt, Outcome, Severity
from idemview.domain.palette import (
    OUTCOME_COLOURS,
    OUTCOME_WORDS,
    OVERVIEW_STACK,
    SEVERITY_COLOURS,
    SEVERITY_GLYPHS,
    STATUS_AS_OUTCOME,
    TimeScale,
    after_expiry,
    light,
    timeline_span,
)
from idemview.domain.palette import (
    PRINT_OUTCOME_GLYPHS as OUTCOME_GLYPHS,
)
from idemview.ledger.times import human_duration

UTC = UTC
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif"


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


class Svg:
    """A small SVG document: elements appended as text, attributes escaped. ``str()`` is the markup
    (an ``<svg>`` element with ``role="img"`` and an accessible title)."""

    def __init__(self, width: float, height: float, title: str):
        self.width, self.height, self.title = width, height, title
        self.parts: list[str] = []

    @staticmethod
    def _attrs(attrs: dict) -> str:
        out = []
        for k, v in attrs.items():
            if v is None:
                continue
            if isinstance(v, float):
                v = _num(v)
            out.append(f' {k.rstrip("_").replace("_", "-")}="{escape(str(v), quote=True)}"')
        return "".join(out)

    def rect(self, x: float, y: float, w: float, h: float, tip: str | None = None, **attrs) -> None:
        body = f"<title>{escape(tip)}</title>" if tip else ""
        a = self._attrs({"x": float(x), "y": float(y), "width": float(max(w, 0.0)), "height": float(max(h, 0.0))})
        self.parts.append(f"<rect{a}{self._attrs(attrs)}>{body}</rect>" if body else f"<rect{a}{self._attrs(attrs)}/>")

    def line(self, x1: float, y1: float, x2: float, y2: float, **attrs) -> None:
        a = self._attrs({"x1": float(x1), "y1": float(y1), "x2": float(x2), "y2": float(y2)})
        self.parts.append(f"<line{a}{self._attrs(attrs)}/>")

    def path(self, d: str, tip: str | None = None, **attrs) -> None:
        body = f"<title>{escape(tip)}</title>" if tip else ""
        self.parts.append(f"<path{self._attrs({'d': d, **attrs})}>{body}</path>")

    def text(self, x: float, y: float, s: str, **attrs) -> None:
        a = self._attrs({"x": float(x), "y": float(y), **attrs})
        self.parts.append(f"<text{a}>{escape(s)}</text>")

    def __str__(self) -> str:
        w, h = _num(self.width), _num(self.height)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'role="img" style="{FONT};font-size:11px;max-width:100%;height:auto">'
            f"<title>{escape(self.title)}</title>" + "".join(self.parts) + "</svg>"
        )


def _fmt(t: datetime, long_span: bool) -> str:
    return t.astimezone(UTC).strftime("%m-%d %H:%M" if long_span else "%H:%M:%S")


def _axis(svg: Svg, sc: TimeScale, y: float, ticks: int) -> None:
    svg.line(sc.x0, y, sc.x1, y, stroke="#9e9e9e")
    long_span = sc.hi - sc.lo > 20 * 3600
    for k in range(ticks + 1):
        t = sc.lo + (sc.hi - sc.lo) * k / ticks
        x = sc.x(t)
        svg.line(x, y, x, y + 4, stroke="#9e9e9e")
        anchor = "start" if k == 0 else "end" if k == ticks else "middle"
        svg.text(x, y + 15, _fmt(datetime.fromtimestamp(t, UTC), long_span), text_anchor=anchor, fill="#424242")


def timeline_svg(
    attempts: Sequence[Attempt],
    created: datetime | None,
    expires: datetime | None,
    now: datetime,
    *,
    width: int = 760,
) -> str:
    """One operation's attempts as a picture (the grammar of the GUI's ``qt.timeline``): a lane per
    attempt, a bar from start to finish coloured by outcome and labelled with the attempt number,
    the outcome's glyph and word and the duration; the dedup window shaded from creation to expiry;
    the expiry as a dashed red line ("key expired"); an attempt that started after the expiry drawn
    with a heavy red outline and "⚠ after expiry". Times in UTC. Returns SVG markup, or a
    ``<p>`` saying why there is nothing to draw."""
    if not attempts:
        return '<p class="muted">No attempts recorded for this operation (the ledger keeps only a counter).</p>'
    span = timeline_span(attempts, created, expires)
    if span is None:
        return '<p class="muted">These attempts carry no times.</p>'
    lane_h, top, axis_h, left, right = 22, 22, 24, 8, 12
    bottom = top + len(attempts) * lane_h
    svg = Svg(width, bottom + axis_h + 6, f"Timeline of {len(attempts)} attempt(s), times in UTC")
    sc = TimeScale(span[0], span[1], left, width - right)
    x0, x1 = sc.x0, sc.x1
    _window(svg, sc, created, expires, top, bottom)
    for i, at in enumerate(attempts):
        _lane(svg, sc, at, i, top, lane_h, expires, now)
    _axis(svg, sc, bottom + 3, max(2, int((x1 - x0) // 120)))
    return str(svg)


def _window(svg: Svg, sc: TimeScale, created: datetime | None, expires: datetime | None, top: int, bottom: int):
    """The dedup window (shaded from creation to expiry), the creation line and the expiry line."""
    x0, x1 = sc.x0, sc.x1
    crit = light(SEVERITY_COLOURS, Severity.CRITICAL)
    if created and expires:
        a, b = sc.x(created.timestamp()), sc.x(expires.timestamp())
        svg.rect(a, top - 4, min(b, x1) - a, bottom - top + 8, fill="#1565c0", fill_opacity="0.10")
        lbl = "dedup window"
        if b > x1:
            left_s = (expires - datetime.fromtimestamp(sc.hi, UTC)).total_seconds()
            lbl += f" → key expires {expires.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC (+{human_duration(left_s)})"
        svg.text(a + 3, top - 8, lbl, fill="#1565c0")
    if created:
        cx = sc.x(created.timestamp())
        svg.line(cx, top - 4, cx, bottom + 2, stroke="#424242", stroke_dasharray="1 2")
    if expires:
        ex = sc.x(expires.timestamp())
        if x0 <= ex <= x1:
            svg.line(ex, top - 6, ex, bottom + 2, stroke=crit, stroke_width="2", stroke_dasharray="6 3")
            svg.text(min(ex + 3, x1 - 60), top - 8, "key expired", fill=crit)


def _lane(svg: Svg, sc: TimeScale, at: Attempt, i: int, top: int, lane_h: int, expires, now: datetime) -> None:
    """Lane ``i`` of the timeline: attempt ``at``'s bar and its label."""
    x0, x1 = sc.x0, sc.x1
    crit = light(SEVERITY_COLOURS, Severity.CRITICAL)
    y = top + i * lane_h
    if i % 2:
        svg.rect(x0, y, x1 - x0, lane_h, fill="#f5f5f5")
    if at.started_at is None:
        svg.text(x0 + 2, y + lane_h / 2 + 4, f"#{at.number if at.number is not None else '?'} (no start time)")
        return
    s = at.started_at.timestamp()
    f = at.finished_at.timestamp() if at.finished_at else (now.timestamp() if at.outcome == Outcome.IN_PROGRESS else s)
    bx = sc.x(s)
    bw = max(6.0, sc.x(min(f, sc.hi)) - bx)
    col = light(OUTCOME_COLOURS, at.outcome)
    late = after_expiry(at, expires)
    word = OUTCOME_WORDS.get(at.outcome, "unknown")
    label = f"#{at.number if at.number is not None else '?'} {OUTCOME_GLYPHS.get(at.outcome, '?')} {word}"
    if at.started_at and at.finished_at:
        label += f" · {human_duration((at.finished_at - at.started_at).total_seconds(), fine=True)}"
    if late:
        label += "  ⚠ after expiry"
    tip = f"attempt {label}; started {at.started_at.astimezone(UTC):%Y-%m-%d %H:%M:%S.%f}"[:-3] + " UTC"
    open_bar = at.outcome == Outcome.IN_PROGRESS and at.finished_at is None
    svg.rect(
        bx,
        y + 4,
        bw,
        lane_h - 8,
        tip=tip,
        rx="3",
        fill=col,
        fill_opacity="0.45" if open_bar else None,
        stroke=col if open_bar else None,
    )
    if late:
        svg.rect(bx - 2, y + 2, bw + 4, lane_h - 4, rx="4", fill="none", stroke=crit, stroke_width="2.5")
    # the label to the right of the bar, else to its left (7 px per character is a safe width)
    est = 6.6 * len(label)
    tx, anchor = bx + bw + 5, "start"
    if tx + est > x1:
        tx, anchor = bx - 5, "end"
        if tx - est < x0:
            tx, anchor = x0 + 2, "start"
    svg.text(tx, y + lane_h / 2 + 4, label, text_anchor=anchor, fill=crit if late else "#212121")


def overview_svg(
    edges: Sequence[datetime],
    counts: dict[str, list[int]],
    source: str,
    markers: Sequence[tuple[datetime, Severity, str]],
    *,
    width: int = 900,
    height: int = 220,
    max_markers: int = 2000,
) -> str:
    """The incident overview (the GUI's ``qt.overview``): ``counts`` per bucket between ``edges``
    (``len(edges) - 1`` buckets; keys are outcomes, or statuses when ``source == "operations"``)
    as bars stacked by outcome in :data:`OVERVIEW_STACK` order, and a marker per finding
    ``(at, severity, label)`` above the bars (its severity's glyph and colour; the most severe drawn
    last, at most ``max_markers``). A legend names every outcome drawn. Times in UTC."""
    if len(edges) < 2:
        return '<p class="muted">No activity to draw: the ledger keeps no attempt or creation times.</p>'
    per: dict[Outcome, list[int]] = {}
    n = len(edges) - 1
    for raw, vals in counts.items():
        o = STATUS_AS_OUTCOME.get(raw, Outcome.UNKNOWN) if source == "operations" else _outcome(raw)
        acc = per.setdefault(o, [0] * n)
        for i, v in enumerate(vals[:n]):
            acc[i] += int(v)
    totals = [sum(per[o][i] for o in per) for i in range(n)]
    top_count = max(totals) if totals and max(totals) > 0 else 1
    left, right, top, axis_h, legend_h = 44, 12, 22, 22, 20
    base = height - axis_h - legend_h
    what = "attempts" if source == "attempts" else "operations"
    svg = Svg(width, height, f"Incident overview: {what} over time stacked by outcome, with finding markers (UTC)")
    sc = TimeScale(edges[0].timestamp(), edges[-1].timestamp(), left, width - right)
    plot_h = base - top
    for frac in (0.0, 0.5, 1.0):
        y = base - plot_h * frac
        svg.line(left, y, width - right, y, stroke="#e0e0e0")
        svg.text(left - 4, y + 4, f"{round(top_count * frac):,}", text_anchor="end", fill="#616161")
    for i in range(n):
        if not totals[i]:
            continue
        xa, xb = sc.x(edges[i].timestamp()), sc.x(edges[i + 1].timestamp())
        y = base
        for o in OVERVIEW_STACK:
            v = per.get(o, [0] * n)[i]
            if not v:
                continue
            h = plot_h * v / top_count
            y -= h
            tip = f"{v:,} {OUTCOME_WORDS[o]} {what}, {edges[i]:%Y-%m-%d %H:%M:%S} UTC"
            svg.rect(xa, y, max(1.0, xb - xa - 0.5), h, tip=tip, fill=light(OUTCOME_COLOURS, o))
    shown = sorted(
        (m for m in markers if m[0] is not None and edges[0] <= m[0] <= edges[-1]),
        key=lambda m: -SEVERITY_ORDER[m[1]],
    )[-max_markers:]
    for at, sev, label in shown:
        x = sc.x(at.timestamp())
        col = light(SEVERITY_COLOURS, sev)
        svg.line(x, top - 2, x, base, stroke=col, stroke_opacity="0.35")
        svg.path(f"M{_num(x - 5)} {top - 12}h10l-5 8z", tip=f"{SEVERITY_GLYPHS[sev]} {label}", fill=col)
    _axis(svg, sc, base, max(2, int((width - left - right) // 130)))
    lx = left
    for o in OVERVIEW_STACK:
        if o not in per:
            continue
        svg.rect(lx, height - 14, 10, 10, fill=light(OUTCOME_COLOURS, o))
        word = f"{OUTCOME_GLYPHS[o]} {OUTCOME_WORDS[o]}"
        svg.text(lx + 14, height - 5, word, fill="#212121")
        lx += 24 + 7 * len(word)
    if shown:
        svg.path(f"M{_num(lx)} {height - 14}h10l-5 8z", fill=light(SEVERITY_COLOURS, Severity.CRITICAL))
        svg.text(lx + 14, height - 5, "finding (colour: severity)", fill="#212121")
    return str(svg)


def _outcome(raw: str) -> Outcome:
    try:
        return Outcome(raw)
    except ValueError:
        return Outcome.UNKNOWN
