"""JSON nested 700 / 2,000 / 100,000 levels is read, masked and exported, never a RecursionError
(issue 19 item 11). One parse chokepoint (``idemview.domain.jsontext.loads``) bounds the depth; the
masker walks parsed values by a loop and masks what lies deeper than its bound as text."""

from __future__ import annotations

import csv
import json
import sqlite3

import pytest
from sqlalchemy import text

from idemview.cli import main
from idemview.domain.jsontext import MAX_JSON_DEPTH, JSONTooDeep, json_depth, loads, loads_or_text
from idemview.ledger.reader import decode_payload
from idemview.masking.masker import MAX_MASK_DEPTH, Masker, dump_json

NOW = "2026-11-30T12:00:00Z"


def deep_text(n: int, secret: str = "hunter2secret") -> str:
    # every level an object with a password and a list: masking must reach the bottom
    return ('{"password": "' + secret + '", "a": [') * n + "1" + "]}" * n


def deep_value(n: int):
    v: object = {"email": "bottom@example.com"}
    for i in range(n):
        v = {"a": v, "note": "card 4111 1111 1111 1111"} if i % 2 else [v, "x"]
    return v


@pytest.mark.parametrize("n", [700, 2000, 100_000])
def test_parse_chokepoint_bounds_depth(n):
    t = deep_text(n)
    assert json_depth(t) == 2 * n
    with pytest.raises(JSONTooDeep):
        loads(t)
    assert loads_or_text(t) == t
    p = decode_payload(t, "json")
    assert p.value == t and "levels deep" in p.problem
    assert loads(deep_text(10)) == json.loads(deep_text(10))  # shallow: parsed as before
    assert json_depth('{"a": "[[[[[[", "b": ["]]]"]}') == 2  # brackets in strings do not nest


@pytest.mark.parametrize("n", [700, 2000, 100_000])
def test_masker_walks_any_depth_and_leaks_nothing(n):
    m = Masker()
    out = m.mask_value(deep_value(n))
    flat = dump_json(out)
    assert "4111 1111 1111 1111" not in flat and "bottom@example.com" not in flat
    assert m.counts["email"] == 1 and m.counts["card"] == n // 2
    depth, t = 0, out
    while isinstance(t, (dict, list)):
        t = t["a"] if isinstance(t, dict) else t[0]
        depth += 1
    assert depth == MAX_MASK_DEPTH and isinstance(t, str)  # deeper than the bound: one masked text
    # a sensitive name over a deep value: one tag, no recursion in the tag's serialisation
    assert Masker().mask_value({"password": deep_value(n)})["password"].startswith("[password#")
    assert json.loads(dump_json(deep_value(50))) == deep_value(50)


@pytest.fixture
def deep_ledger(tmp_path):
    db = tmp_path / "deep.db"
    assert main(["demo", str(db)]) == 0
    c = sqlite3.connect(db)
    for i, n in enumerate((700, 2000, 100_000)):
        c.execute(
            "UPDATE operations SET request_body=? WHERE rowid = (SELECT rowid FROM operations LIMIT 1 OFFSET ?)",
            (deep_text(n, f"hunter2secret{i}"), i),
        )
    c.commit()
    c.close()
    return str(db)


def test_export_api_scan_detect_complete(deep_ledger, tmp_path, capsys):
    out = tmp_path / "ev.csv"
    assert main(["export", deep_ledger, "--out", str(out), "--now", NOW]) == 0
    body = out.read_text("utf-8")
    assert "hunter2secret" not in body and "[password#" in body
    old = csv.field_size_limit(1 << 30)  # a 600 kB cell: the 100,000-level document, masked as text
    try:
        rows = list(csv.DictReader(out.open(encoding="utf-8")))
    finally:
        csv.field_size_limit(old)
    assert len(rows) > 3
    assert main(["scan", deep_ledger, "--now", NOW]) == 0
    assert main(["detect", deep_ledger]) == 0
    capsys.readouterr()

    import idemview

    led = idemview.open(deep_ledger)
    ops = led.operations()
    assert len(ops) == len(rows)
    assert not any("hunter2secret" in str(v) for v in ops["request"].dropna())


def test_json_columns_of_a_server_come_through_the_chokepoint(pg_url):
    from sqlalchemy import cast, literal, select
    from sqlalchemy.dialects.postgresql import JSONB

    from idemview.ledger.connect import open_engine

    eng = open_engine(pg_url)
    try:
        with eng.connect() as c:
            shallow = c.execute(select(cast(literal('{"a": [1]}'), JSONB))).scalar_one()
            deep = c.execute(select(cast(literal(deep_text(1500)), JSONB))).scalar_one()
            assert c.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        eng.dispose()
    assert shallow == {"a": [1]}
    assert isinstance(deep, str) and json_depth(deep) == 3000 > MAX_JSON_DEPTH
