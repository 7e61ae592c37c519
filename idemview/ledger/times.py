"""Decoding stored times into aware UTC instants (DESIGN §3), in Python.

A layout says how each time column is stored: ``datetime`` (aware, or naive meaning UTC), ``naive``
(wall time in ``zone``), ``epoch_s``, ``epoch_ms``, ``iso_text``. :func:`decode_time` never invents a
value: ``None``, empty text and anything it cannot parse give ``None``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from functools import lru_cache
from zoneinfo import ZoneInfo

from idemview.layouts.layout import TimeColumn

UTC = UTC


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def _parse_text(s: str) -> datetime | None:
    s = s.strip()
    if not s:
        return None
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(s)
    except ValueError:
        return None


def decode_time(value, tc: TimeColumn) -> datetime | None:
    """The stored ``value`` of a column encoded as ``tc`` says, as an aware UTC ``datetime``.

    Naive datetimes are read in ``tc.zone`` (UTC unless the layout says otherwise); epoch numbers may
    arrive as int, float, Decimal or numeric text. Returns ``None`` when missing or unparsable."""
    if value is None:
        return None
    enc = tc.encoding
    try:
        if enc in ("epoch_s", "epoch_ms"):
            if isinstance(value, (str, bytes)):
                value = float(value)
            x = float(value) if isinstance(value, Decimal) else value
            if enc == "epoch_ms":
                x = x / 1000.0
            return datetime.fromtimestamp(x, UTC)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str):
            value = _parse_text(value)
            if value is None:
                return None
        elif isinstance(value, date) and not isinstance(value, datetime):
            value = datetime(value.year, value.month, value.day)
        if not isinstance(value, datetime):
            return None
        if value.tzinfo is None:
            zone = tc.zone if enc == "naive" else "UTC"
            value = value.replace(tzinfo=_zone(zone))
        return value.astimezone(UTC)
    except (ValueError, OverflowError, OSError, TypeError):
        return None


def from_epoch(x) -> datetime | None:
    """An epoch-seconds float computed in SQL, as an aware UTC instant rounded to the millisecond
    (engines differ below that: SQLite's julianday arithmetic is not exact to the microsecond)."""
    if x is None:
        return None
    try:
        return datetime.fromtimestamp(round(float(x), 3), UTC)
    except (ValueError, OverflowError, OSError):
        return None


def iso(t: datetime | None) -> str | None:
    """ISO-8601 in UTC with ``Z``; milliseconds only when present."""
    if t is None:
        return None
    t = t.astimezone(UTC)
    if t.microsecond:
        return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return t.isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_instant(text: str) -> datetime:
    """Parse a command-line instant (ISO-8601; naive means UTC). Raises ``ValueError``."""
    t = _parse_text(text)
    if t is None:
        raise ValueError(f"not an ISO-8601 instant: {text!r} (e.g. 2024-05-01T12:00:00Z)")
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.astimezone(UTC)


def human_duration(seconds: float, *, fine: bool = False) -> str:
    """A duration for people: ``"42 s"``, ``"17 min"``, ``"3.5 h"``, ``"2.1 days"`` (sign ignored).
    ``fine`` shows milliseconds below a second and a tenth of a second below two minutes (timelines)."""
    s = abs(seconds)
    if fine and s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 120:
        return f"{s:.1f} s" if fine else f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"
