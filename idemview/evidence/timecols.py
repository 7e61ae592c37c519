"""Whole-column forms of the export's time decoding (issue 27 item 2): a fetched batch's time column
decoded by C-level ``map`` calls instead of one Python call per cell, where that gives exactly what the
per-value converters of :mod:`idemview.evidence.plan` give; ``None`` (use the per-value path) otherwise.

- :func:`naive_utc_texts`: a ``naive`` column stored in UTC and exported as the stored UTC wall time
  (Celery's ``date_done`` as SQLite returns it: text). ``decode_time`` parses the text with
  ``datetime.fromisoformat`` (after ``strip`` and a ``Z`` suffix, which ``fromisoformat`` would refuse or
  read as an offset), sets the zone UTC, converts to UTC; the export converts back to the stored zone
  (UTC) and drops it: for a naive parse that is the parsed value itself. A column with a NULL, a text
  ``fromisoformat`` refuses as it stands, or one with an offset takes the per-value path.
- :func:`pickled_bytes`, :func:`hex_bytes`: payload columns whose cells are all ``bytes``;
  :func:`all_null`: a payload column of NULLs.
- :func:`epoch_floats`: an epoch-seconds column computed in SQL (``expires_at``), exported in UTC:
  ``from_epoch`` is ``datetime.fromtimestamp(round(float(x), 3), UTC)``; for ``float`` cells ``float(x)``
  is ``x``. Any other type, or a value ``fromtimestamp`` refuses, takes the per-value path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from itertools import repeat
from operator import attrgetter
from typing import Any

_TZINFO = attrgetter("tzinfo")
_FROMISO = datetime.fromisoformat
_FROMTS = datetime.fromtimestamp


def naive_utc_texts(col: Sequence[Any]) -> list[datetime] | None:
    """The naive UTC datetimes of a batch of stored texts, or ``None`` (module docstring)."""
    if not col or set(map(type, col)) != {str}:
        return None
    try:
        out = list(map(_FROMISO, col))
    except ValueError:
        return None
    if set(map(_TZINFO, out)) != {None}:
        return None
    return out


def epoch_floats(col: Sequence[Any]) -> list[datetime] | None:
    """The aware UTC datetimes of a batch of epoch-second floats, or ``None`` (module docstring)."""
    if not col or set(map(type, col)) != {float}:
        return None
    try:
        return list(map(_FROMTS, map(round, col, repeat(3)), repeat(UTC)))
    except (ValueError, OverflowError, OSError):
        return None


def pickled_bytes(col: Sequence[Any]) -> list[str] | None:
    """A ``pickle`` payload column of ``bytes`` cells: ``"pickled, not decoded (N bytes)"`` (what
    ``plan._payload_converter`` writes for each), one text per distinct length; ``None`` for another
    column (a NULL, text)."""
    if not col or set(map(type, col)) != {bytes}:
        return None
    lens = list(map(len, col))
    texts = {n: f"pickled, not decoded ({n} bytes)" for n in set(lens)}
    return list(map(texts.__getitem__, lens))


def hex_bytes(col: Sequence[Any]) -> list[str] | None:
    """A ``binary`` payload column of ``bytes`` cells as lower-case hex (``bytes.hex``, what
    ``plan._payload_converter`` writes for each); ``None`` for another column."""
    if not col or set(map(type, col)) != {bytes}:
        return None
    return list(map(bytes.hex, col))


def all_null(col: Sequence[Any]) -> list[None] | None:
    """A payload column of NULLs only: NULLs (``decode_payload`` gives ``None`` for ``None`` whatever
    the encoding); ``None`` for another column."""
    if col and set(map(type, col)) == {type(None)}:
        return [None] * len(col)
    return None


def payload_bulk(encoding: str | None) -> Callable:
    """The whole-column function for a payload column of ``encoding`` (:func:`all_null` at least)."""
    bytes_fn = {"pickle": pickled_bytes, "binary": hex_bytes}.get(encoding or "")
    if bytes_fn is None:
        return all_null
    return lambda col: bytes_fn(col) or all_null(col)


def bulk_for(encoding: str | None, zone: str | None, stored_zone: str | None) -> Callable | None:
    """The whole-column function for a time column decoded as ``encoding`` in ``zone`` and exported
    in ``stored_zone`` (``None``: UTC, aware), or ``None`` where none is exact."""
    if encoding == "naive" and zone == "UTC" and stored_zone == "UTC":
        return naive_utc_texts
    return None
