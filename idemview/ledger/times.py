"""Decoding stored times into aware UTC instants (DESIGN §3), in Python.

A layout says how each time column is stored: ``datetime`` (aware, or naive meaning UTC), ``naive``
(wall time in ``zone``), ``epoch_s``, ``epoch_ms``, ``iso_text``. :func:`decode_time` never invents a
value: ``None``, empty text and anything it cannot parse give ``None``.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo

from idemview.layouts.layout import TimeColumn

UTC = UTC


#: The epoch values that are times (seconds): after the epoch itself and before 10000-01-01T00:00:00Z, the
#: end of ISO-8601's four-digit years and of Python's ``datetime``. Zero, negative numbers (the ``-1``
#: or ``0`` "never" of an integer column), NaN, infinities and anything beyond are unknown times: none
#: of them is when an idempotency key was written (issue 19, item 14). :mod:`idemview.ledger.sqlx`
#: compiles the same bounds into SQL.
EPOCH_S_MIN = 0.0  # exclusive
EPOCH_S_MAX = 253402300800.0  # exclusive: 10000-01-01T00:00:00Z
#: Numeric text an epoch column may hold (spaces around it allowed): unsigned decimal digits, at most one
#: point, no exponent. The SQL side accepts exactly this shape, so Python and SQL agree on every cell.
EPOCH_TEXT = re.compile(r" *(?:[0-9]{1,20}(?:\.[0-9]*)?|\.[0-9]{1,20}) *")


def epoch_instant(value, encoding: str) -> datetime | None:
    """A stored epoch value (``encoding`` ``epoch_s`` or ``epoch_ms``) as an aware UTC instant, or
    ``None`` when it is not a time: not a number (``"yesterday"``, ``True``), numeric text of another
    shape than :data:`EPOCH_TEXT`, NaN, an infinity, or outside (:data:`EPOCH_S_MIN`,
    :data:`EPOCH_S_MAX`). Accepts int, float, Decimal, str and bytes."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("ascii", "replace")
    if isinstance(value, str):
        if not EPOCH_TEXT.fullmatch(value):
            return None
        value = float(value)
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if encoding == "epoch_ms":
        x = x / 1000.0
    if math.isnan(x) or not EPOCH_S_MIN < x < EPOCH_S_MAX:
        return None
    try:
        return datetime.fromtimestamp(x, UTC)
    except (ValueError, OverflowError, OSError):
        return None


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
    arrive as int, float, Decimal or numeric text (:func:`epoch_instant` says which are times).
    Returns ``None`` when missing or unparsable."""
    if value is None:
        return None
    enc = tc.encoding
    try:
        if enc in ("epoch_s", "epoch_ms"):
            return epoch_instant(value, enc)
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
