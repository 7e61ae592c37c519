"""Epoch-second and epoch-millisecond columns holding text that is not a number: SQL reads them as
unknown, exactly as :func:`idemview.ledger.times.decode_time` does in Python (DESIGN §9: bad data is
read as unknown, never as 1970-01-01). SQLite keeps such text even in an INTEGER column (type
affinity); MySQL/MariaDB read text by its leading digits ('abc' * 1.0 is 0). Found by
``idemview windows`` on a ledger with 'abc' in an epoch_ms column: a retry span of 55 years."""

from __future__ import annotations

import pytest
from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table, create_engine, insert, select

from idemview.layouts.layout import TimeColumn
from idemview.ledger.dialects import family
from idemview.ledger.sqlx import epoch_seconds
from idemview.ledger.times import decode_time

VALUES = ["1762000000", " 1762000000.5 ", "abc", "", "12abc", None, "-5", "1.7e9", "1.2.3x", "12:00"]


@pytest.mark.parametrize("enc", ["epoch_s", "epoch_ms"])
def test_sql_epoch_agrees_with_python_on_text(dialect_db, enc):
    w, url = dialect_db
    # PostgreSQL: an epoch column is numeric there (text * 1.0 is an error), so only the numbers are read
    pg = family(w.dialect.name) == "postgresql"
    md = MetaData()
    t = Table(
        "ep",
        md,
        Column("id", Integer, primary_key=True),
        Column("txt", String(32)),
        Column("num", BigInteger),
    )
    md.create_all(w)
    with w.begin() as c:
        c.execute(insert(t), [{"id": i, "txt": v, "num": 1762000000} for i, v in enumerate(VALUES, 1)])
        if family(w.dialect.name) == "sqlite":  # text in an INTEGER column: SQLite keeps it
            c.exec_driver_sql("UPDATE ep SET num = 'abc' WHERE id = 3")
    tc = TimeColumn(column="txt", encoding=enc)
    eng = create_engine(url if "://" in url else f"sqlite:///{url}")
    try:
        with eng.connect() as c:
            d = eng.dialect.name
            txt = epoch_seconds(t.c.num if pg else t.c.txt, tc, d)
            rows = c.execute(select(t.c.id, t.c.txt, txt, epoch_seconds(t.c.num, tc, d)).order_by(t.c.id)).all()
    finally:
        eng.dispose()
    for _id, raw, sql_txt, _sql_num in rows:
        if pg:
            raw = 1762000000
        want = decode_time(raw, tc)
        got = None if sql_txt is None else round(float(sql_txt), 3)
        assert got == (None if want is None else round(want.timestamp(), 3)), (raw, sql_txt)
    # the INTEGER column's 'abc' (SQLite) is unknown too; its numbers read as numbers
    by_id = {r[0]: r[3] for r in rows}
    scale = 1.0 if enc == "epoch_s" else 1000.0
    assert by_id[1] == pytest.approx(1762000000 / scale)
    if family(w.dialect.name) == "sqlite":
        assert by_id[3] is None
