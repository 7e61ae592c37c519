"""How many stored times are not times (DESIGN §3, §9: bad data is read, shown as unknown, and counted).

A time column may hold a value that decodes to no instant: ``yesterday`` or ``NaN`` in an epoch column,
a negative epoch, a MariaDB zero date, ISO text that does not parse. Each is an unknown time, exactly as
a missing one (:mod:`idemview.ledger.times`, :mod:`idemview.ledger.sqlx`), and is counted here so that
the reader learns they exist (issue 19, item 14).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import DateTime, Integer, Numeric, String, and_, case, cast, func, literal, select
from sqlalchemy.sql.expression import ColumnElement
from sqlalchemy.types import TypeDecorator


def _stored(col: ColumnElement) -> ColumnElement:
    """``col`` holds something: not NULL, and for text not only spaces (empty text is a missing time)."""
    t = getattr(col, "type", None)
    if isinstance(t, TypeDecorator):
        t = t.impl_instance
    if isinstance(t, (Integer, Numeric, DateTime)):
        return col.is_not(None)
    return and_(col.is_not(None), func.trim(cast(col, String())) != literal(""))


def unknown_time_counts(ledger: Any) -> dict[str, int]:
    """``{time field: N}``: how many operation records (``created_at``, ``expires_at``...) and attempts
    (``started_at``, ``finished_at``) store a value in the field's column that is no instant, counted in
    the database (one aggregate query per table; fields with none are left out). A ledger that is not
    read through SQL (no ``time_cols``) has nothing to count: ``{}``."""
    out: dict[str, int] = {}
    tables = [(getattr(ledger, "time_cols", None), getattr(ledger, "epoch", {}), getattr(ledger, "ops", None), None)]
    if getattr(ledger, "att", None) is not None:
        tables.append((ledger.att_time, ledger.att_epoch, ledger.att, ledger.att_where))
    with ledger.engine.connect() as c:
        for cols, epoch, table, where in tables:
            if not cols or table is None:
                continue
            names = [k for k in cols if k in epoch]
            if not names:
                continue
            sums = [func.sum(case((and_(_stored(cols[k][0]), epoch[k].is_(None)), 1), else_=0)).label(k) for k in names]
            q = select(*sums).select_from(table)
            if where is not None:
                q = q.where(where)
            row = c.execute(q).one()
            for k in names:
                n = int(getattr(row, k) or 0)
                if n:
                    out[k] = out.get(k, 0) + n
    return out
