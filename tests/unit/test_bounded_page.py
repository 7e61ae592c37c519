"""``Ledger.page`` bounded at both ends: ``start`` and ``end`` are the inclusive cursors of a page's first
and last row (``Page.first`` / ``Page.last``), so an evicted grid page is read again between its own rows
and rows written since outside that stretch never shift into it (tests/gui/test_fresh_eyes.py, the
grid's side). On SQLite, PostgreSQL and MySQL-family under both dialect names, ascending and descending,
with ties, NULL sort values (the second range of the order) and, on PostgreSQL, a time Python cannot
hold (``infinity``: its cursor is the value's text)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import MetaData, insert, text

from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.ledger.reference import add_reference_tables

T0 = datetime(2026, 11, 30, 12, 0, 0)
T1, T2 = T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)
INF = datetime.max  # stands for PostgreSQL's 'infinity' when ordering in Python

# id -> (created_at, kind): ties on both sort columns, NULLs in both
ROWS = {
    1: (T0, "a"),
    2: (T1, "b"),
    3: (T1, None),
    4: (None, "a"),
    5: (T2, "b"),
    6: (T1, "a"),
    7: (None, None),
    8: (T0, "c"),
    9: (None, "b"),
    10: (T2, None),
    11: (T1, "a"),
    12: (None, "a"),
}


def _expected(rows: dict[int, tuple], sort: str, desc: bool) -> list[str]:
    """The page order by hand: rows with a value by (value, id), then the NULLs by id; both reversed
    when descending (NULLs stay last)."""
    col = 0 if sort == "created_at" else 1
    valued = sorted(((v[col], i) for i, v in rows.items() if v[col] is not None), reverse=desc)
    nulls = sorted((i for i, v in rows.items() if v[col] is None), reverse=desc)
    return [f"k{i:02d}" for _, i in valued] + [f"k{i:02d}" for i in nulls]


def _insert(w, rows: dict[int, tuple]) -> None:
    md = MetaData()
    add_reference_tables(md)
    md.create_all(w)
    recs = [
        {
            "id": i,
            "scope": "",
            "idempotency_key": f"k{i:02d}",
            "status": "succeeded",
            "attempt_count": 1,
            "created_at": None if c is INF else c,
            "kind": k,
        }
        for i, (c, k) in rows.items()
    ]
    with w.begin() as c:
        c.execute(insert(md.tables["operations"]), recs)
        for i, (ca, _k) in rows.items():
            if ca is INF:
                c.execute(text("UPDATE operations SET created_at = 'infinity' WHERE id = :i"), {"i": i})


def _keys(page) -> list[str]:
    return [o.key for o in page.rows]


@pytest.mark.parametrize("sort", ["created_at", "kind"])
def test_a_page_read_between_its_first_and_last_row(dialect_db, sort):
    w, url = dialect_db
    rows = dict(ROWS)
    pg = url.startswith("postgresql")
    if pg:
        rows[13] = (INF, "c")  # after every finite time; read as None, its cursor is the text 'infinity'
    _insert(w, rows)
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("idemview"))
        for desc in (False, True):
            want = _expected(rows, sort, desc)
            # every row's cursor, one-row pages by ``after`` (the unbounded paging as before)
            curs, got, after = [], [], None
            while True:
                p = led.page(sort=sort, descending=desc, after=after, limit=1)
                assert p.first == p.last and len(p.rows) == 1
                got += _keys(p)
                curs.append(p.first)
                if p.cursor is None:
                    break
                after = p.cursor
            assert got == want, (sort, desc)
            n = len(want)
            nulls_from = next(k for k, c in enumerate(curs) if c[0])  # first row of the NULL section
            assert all(c[0] for c in curs[nulls_from:]) and not any(c[0] for c in curs[:nulls_from])
            pairs = [
                (0, n - 1),  # everything
                (1, 3),  # inside the valued section, through ties
                (2, nulls_from - 1),  # to the section's last valued row
                (nulls_from - 2, nulls_from + 1),  # across into the NULL section
                (nulls_from, n - 1),  # the NULL section alone
                (nulls_from + 1, nulls_from + 2),  # inside it
                (4, 4),  # one row
            ]
            for i, j in pairs:
                p = led.page(sort=sort, descending=desc, start=curs[i], end=curs[j], limit=100)
                assert _keys(p) == want[i : j + 1], (sort, desc, i, j)
                assert (p.first, p.last, p.cursor) == (curs[i], curs[j], None)
                # the limit still cuts: the first rows of the stretch, and a cursor to go on with
                short = led.page(sort=sort, descending=desc, start=curs[i], end=curs[j], limit=2)
                assert _keys(short) == want[i : min(i + 2, j + 1)]
                assert short.cursor == (curs[i + 1] if j - i >= 2 else None)
                # start only / end only: open at the other end
                assert _keys(led.page(sort=sort, descending=desc, start=curs[i], limit=100)) == want[i:]
                assert _keys(led.page(sort=sort, descending=desc, end=curs[j], limit=100)) == want[: j + 1]
                # ``after`` with ``end``: strictly after i, up to j
                got_after = led.page(sort=sort, descending=desc, after=curs[i], end=curs[j], limit=100)
                assert _keys(got_after) == want[i + 1 : j + 1]
            # an end before the start: nothing (never the rows around them)
            assert _keys(led.page(sort=sort, descending=desc, start=curs[5], end=curs[2], limit=100)) == []

        # rows written since: before, inside and after a stretch (valued and NULL sections)
        desc = True
        want = _expected(rows, sort, desc)
        curs = []
        after = None
        for _ in want:
            p = led.page(sort=sort, descending=desc, after=after, limit=1)
            curs.append(p.first)
            after = p.cursor
        nulls_from = next(k for k, c in enumerate(curs) if c[0])
        i, j = 1, nulls_from + 1  # from the second row to the second NULL row
        later = {
            20: (T2 + timedelta(days=1), "z"),  # sorts first (descending): outside, before i
            21: (T1, "b"),  # a tie at T1 / "b", by id 21: inside the valued part of the stretch
            22: (None, None),  # NULL, id 22: first of the NULL section (descending): inside
            23: (None, None),  # NULL, id 23: sorts before the section's first NULL row; inside
        }
        with w.begin() as c:
            md = MetaData()
            add_reference_tables(md)
            for k, (ca, kd) in later.items():
                c.execute(
                    insert(md.tables["operations"]),
                    {
                        "id": k,
                        "scope": "",
                        "idempotency_key": f"k{k:02d}",
                        "status": "succeeded",
                        "attempt_count": 1,
                        "created_at": ca,
                        "kind": kd,
                    },
                )
        now = _expected({**rows, **later}, sort, desc)
        lo, hi = now.index(want[i]), now.index(want[j])
        p = led.page(sort=sort, descending=desc, start=curs[i], end=curs[j], limit=100)
        assert _keys(p) == now[lo : hi + 1]
        assert "k20" not in _keys(p) and {"k22", "k23"} <= set(_keys(p))
        assert _keys(p)[0] == want[i] and _keys(p)[-1] == want[j]  # nothing shifted in at either end
    finally:
        eng.dispose()
