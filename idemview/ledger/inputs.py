"""Values a user gives idemview (issue #19 items 13, 18): one parser per kind, shared by the command line
(argparse types in :mod:`idemview.cli`) and the Python API (:mod:`idemview.api`), so both accept the
same inputs and refuse the rest up front — before any query runs or any line is printed.

- an **instant** (``--now``, ``--since``, ``--until``, ``now=``): ISO-8601 text (``Z`` or an offset;
  naive text means UTC), an aware :class:`datetime.datetime` or :class:`pandas.Timestamp` (a
  ``datetime`` subclass); in years 1971–9998 once in UTC, so epoch arithmetic stays in range on every
  engine (SQLite/MySQL epoch functions, PostgreSQL ``to_timestamp``);
- **seconds** (``--lock-timeout``, ``--retention``, ``--timeout``): a finite number in [0, 100 years];
- a **count** (``--retry-threshold``, ``--limit``, ``--operations``): a whole number in [0, 2**31 − 1]
  (a 32-bit signed integer: what every engine binds without overflow).

Errors: :class:`~idemview.errors.InputError` (a ``ValueError``, exit code 2) for a value of the right
kind that is malformed or out of range; ``TypeError`` for a value of the wrong Python type (API only).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from numbers import Real

from idemview.errors import InputError

MIN_YEAR, MAX_YEAR = 1971, 9998
#: 100 Julian years in seconds: longer than any retention, lock timeout or statement limit.
MAX_SECONDS = 100 * 365.25 * 86400
MAX_COUNT = 2**31 - 1


def instant_value(value: object, what: str = "time") -> datetime:
    """``value`` as an aware UTC ``datetime`` (see the module docstring for what is accepted).

    Raises ``TypeError`` for anything but ``str``/``datetime``; :class:`InputError` for text that is
    not ISO-8601, a naive ``datetime`` (ambiguous: pass ``tzinfo``), or a year outside 1971–9998."""
    if isinstance(value, str):
        text = value.strip()
        t = _iso(text)
        if t is None:
            raise InputError(f"{what}: not an ISO-8601 instant: {value!r} (e.g. 2024-05-01T12:00:00Z)")
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
    elif isinstance(value, datetime):  # pandas.Timestamp is a datetime
        if value != value:  # pandas.NaT
            raise InputError(f"{what}: NaT is not an instant")
        if value.tzinfo is None or value.utcoffset() is None:
            raise InputError(f"{what}: {value!r} is naive; give an aware datetime (e.g. tzinfo=UTC)")
        t = value
    else:
        raise TypeError(
            f"{what} must be an ISO-8601 string, a datetime or a pandas.Timestamp, not {type(value).__name__}"
        )
    try:
        u = t.astimezone(UTC)
    except (OverflowError, ValueError):  # 0001-01-01T00:00+01:00 is before year 1 in UTC
        u = None
    if u is None or not MIN_YEAR <= u.year <= MAX_YEAR:
        raise InputError(f"{what}: {value!s} is out of range (years {MIN_YEAR} to {MAX_YEAR})")
    if hasattr(u, "to_pydatetime"):  # a pandas.Timestamp: the plain datetime the core expects
        u = u.to_pydatetime()
    return u


def _iso(text: str) -> datetime | None:
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def seconds_value(value: object, what: str = "seconds") -> float:
    """``value`` (text or a real number) as seconds: finite, in [0, :data:`MAX_SECONDS`].
    Raises :class:`InputError`; ``TypeError`` for a non-number that is not text (``bool`` included)."""
    if isinstance(value, bool) or not isinstance(value, (str, Real)):
        raise TypeError(f"{what} must be a number of seconds, not {type(value).__name__}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}: {value!r} is not a number of seconds") from None
    if math.isnan(v) or math.isinf(v) or not 0 <= v <= MAX_SECONDS:
        raise InputError(f"{what}: {value!r} must be a finite number of seconds from 0 to {MAX_SECONDS:.0f}")
    return v


def write_ttl_value(value: object, what: str = "write_ttl") -> float:
    """``value`` as the TTL a key-value store sets at every write, in seconds: :func:`seconds_value`, and
    above 0 (Celery's ``result_expires`` 0 means results never expire, and Redis refuses ``SET … EX 0``:
    no store sets a TTL of 0 at every write). Raises :class:`InputError`; ``TypeError`` as
    :func:`seconds_value`."""
    v = seconds_value(value, what)
    if v <= 0:
        raise InputError(f"{what}: {value!r} must be above 0 seconds (the TTL the store sets at every write)")
    return v


def count_value(value: object, what: str = "count") -> int:
    """``value`` (text or an int) as a whole number in [0, :data:`MAX_COUNT`]. Raises
    :class:`InputError`; ``TypeError`` for another type (a float is not a count)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"{what} must be a whole number, not {type(value).__name__}")
    try:
        v = int(value.strip()) if isinstance(value, str) else int(value)
    except ValueError:
        raise InputError(f"{what}: {value!r} is not a whole number") from None
    if not 0 <= v <= MAX_COUNT:
        raise InputError(f"{what}: {value!r} must be from 0 to {MAX_COUNT}")
    return v
