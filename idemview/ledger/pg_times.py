"""PostgreSQL times Python cannot hold read as unknown times, never a failed query (issue 19 suite).

PostgreSQL's ``timestamp``, ``timestamptz`` and ``date`` hold ``infinity`` and ``-infinity`` and years
4713 BC to 294276 AD (PostgreSQL docs, "Date/Time Types", table 8.9 and "Special Values"); Python's
``datetime`` holds years 1 to 9999. psycopg 3's loaders raise ``DataError`` ("timestamp too small
(before year 1): '-infinity'") for anything outside, which fails the whole result set: one such row
made ``scan`` and every export of the ledger exit 2. :func:`adapt` gives a connection loaders that return
``None`` for those values, which idemview treats as an unknown time (as an epoch value that is not a
time, issue 19 item 14). In-range values are loaded by psycopg's own loaders.
"""

from __future__ import annotations

from typing import Any

#: psycopg 3 type names whose values may lie outside Python's datetime range.
TIME_TYPES = ("timestamp", "timestamptz", "date")


def adapt(conn: Any) -> None:
    """Register the out-of-range-tolerant time loaders on ``conn`` (a psycopg 3 connection, text and
    binary formats); any other driver's connection is left alone."""
    adapters = getattr(conn, "adapters", None)
    if adapters is None or not hasattr(adapters, "register_loader"):
        return
    from psycopg import DataError
    from psycopg.types import datetime as pgdt

    def tolerant(base: type) -> type:
        class _Tolerant(base):  # type: ignore[misc, valid-type]
            def load(self, data):
                try:
                    return super().load(data)
                except DataError:  # infinity, -infinity, BC or after 9999: not a Python datetime
                    return None

        _Tolerant.__name__ = "Tolerant" + base.__name__
        return _Tolerant

    pairs = (
        ("timestamp", pgdt.TimestampLoader, pgdt.TimestampBinaryLoader),
        ("timestamptz", pgdt.TimestamptzLoader, pgdt.TimestamptzBinaryLoader),
        ("date", pgdt.DateLoader, pgdt.DateBinaryLoader),
    )
    for name, text_loader, binary_loader in pairs:
        adapters.register_loader(name, tolerant(text_loader))
        adapters.register_loader(name, tolerant(binary_loader))
