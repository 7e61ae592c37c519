"""Small SQL and shaping helpers shared by the finding rules (:mod:`idemview.findings.rules`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import and_, func, or_
from sqlalchemy.sql.expression import ColumnElement

from idemview.domain.model import Finding
from idemview.ledger.times import human_duration

#: Keys per evidence query (an OR of (scope, key) pairs, each served by the key index).
EVIDENCE_BATCH = 200


def nonempty(expr) -> ColumnElement:
    """``expr`` is neither NULL nor the empty string."""
    return and_(expr.is_not(None), expr != "")


def two_distinct(expr) -> ColumnElement:
    """HAVING condition "at least two distinct non-NULL values of ``expr``": ``min <> max`` is one
    hash-aggregatable pass, where ``count(DISTINCT ...)`` makes PostgreSQL and MySQL sort each group."""
    return func.min(expr) != func.max(expr)


def key_batches(keys) -> Iterable[list]:
    """``keys`` (an iterable of (scope, key)) sorted and cut into lists of :data:`EVIDENCE_BATCH`."""
    keys = sorted(keys, key=lambda k: (k[0] is None, k[0] or "", k[1] is None, k[1] or ""))
    for i in range(0, len(keys), EVIDENCE_BATCH):
        yield keys[i : i + EVIDENCE_BATCH]


def in_keys(scope_col, key_col, keys) -> ColumnElement:
    """``(scope, key)`` is one of ``keys`` (NULL scopes matched with IS NULL)."""
    return or_(*[and_(scope_col.is_(None) if s is None else scope_col == s, key_col == k) for s, k in keys])


def dur(seconds: float | None) -> str:
    """A duration in seconds in words ("an unknown time" for ``None``)."""
    return "an unknown time" if seconds is None else human_duration(seconds)


def who(scope, key) -> str:
    """``key 'k' in scope 's'`` (the scope left out when empty)."""
    return f"key {key!r}" + (f" in scope {scope!r}" if scope else "")


def dedupe(fs: list[Finding]) -> list[Finding]:
    """``fs`` keeping the first finding of each (scope, key)."""
    seen, out = set(), []
    for f in fs:
        if (f.scope, f.key) in seen:
            continue
        seen.add((f.scope, f.key))
        out.append(f)
    return out


def as_int(v):
    """``int(v)``, ``None`` kept."""
    return int(v) if v is not None else None


def jsonable(v):
    """``v`` if JSON can hold it as is, else its ``str``."""
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)


def ev_sort(e: dict):
    """Sort key of duplicate_effect evidence items: records first, then attempts by number and time."""
    return (
        "attempt" in e,
        e.get("attempt") or 0,
        e.get("started_at") or e.get("created_at") or "",
        str(e.get("record")),
    )


def parse_iso(s):
    """An ISO-8601 text (``Z`` allowed) as an aware datetime; ``None`` for empty."""
    if not s:
        return None
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


class KeyRow:
    """A bare (scope, key) row, shaped like a result row of a key select."""

    __slots__ = ("scope", "key")

    def __init__(self, scope, key):
        self.scope, self.key = scope, key
