"""Regressions found by the any-input suite (``test_any_input_every_engine.py``, issue 19): each failed
before its fix, on the input the suite found and on a variant."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import create_engine, text

from idemview.cli import main
from idemview.config import new_masker
from idemview.domain.filters import Filter
from idemview.findings.audit import _cells
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.services.demo import reference_metadata
from tests.conftest import ANCHOR

NOW = "2026-11-30T12:00:00Z"


# 1. The masker's JSON-escape decoder raised UnicodeDecodeError ('utf-16-le' codec) on a lone surrogate
#    escape: JSON text "\ud800" (valid JSON; json.loads gives a lone surrogate) failed scan and export.


@pytest.mark.parametrize(
    "value",
    ['"\\ud800"', "\\udc00", "\\ud800\\u0041", '{"a": "x\\udbff"}', "\\\\ud83d\\\\ude00", '"\\ud83d\\ude00"'],
)
def test_lone_surrogate_escapes_are_kept_as_written(value):
    assert new_masker(key=b"k" * 32).mask_value(value, "request") == value


def test_a_secret_beside_a_lone_surrogate_escape_is_still_masked():
    m = new_masker(key=b"k" * 32)
    out = m.mask_value('{"note": "\\ud800 j\\u00fcrgen@m\\u00fcller.de"}', "request")
    assert "\\ud800" in out and "[email#" in out and "ller.de" not in out
    # a surrogate pair one JSON level down (JSON in a JSON string) is decoded as one character
    out = m.mask_value('{"n": "j\\\\u00fcrgen@m\\\\u00fcller.de \\\\ud83d\\\\ude00"}', "request")
    assert "[email#" in out and "ller.de" not in out


def test_lone_surrogate_json_scans_and_exports(tmp_path):
    db = tmp_path / "l.db"
    w = create_engine(f"sqlite:///{db}")
    reference_metadata().create_all(w)
    with w.begin() as c:
        c.execute(
            text(
                "INSERT INTO operations (id, scope, idempotency_key, status, attempt_count, request_body) "
                "VALUES (1, 's', 'k', 'failed', 1, :b)"
            ),
            {"b": '"\\ud800"'},
        )
    w.dispose()
    assert main(["scan", str(db), "--now", NOW]) == 0
    assert main(["export", str(db), "--now", NOW, "--out", str(tmp_path / "o.csv")]) == 0


# 2. The ledger audit (secret_at_rest) parsed a JSON cell with json.loads, past the parse chokepoint:
#    a document nested 2,000 levels in 62 KB (under the audit's 64 KiB cell) raised RecursionError,
#    and `scan` exited 2.


@pytest.mark.parametrize("doc", ["[" * 5000 + "]" * 5000, '{"password": "hunter2", "a": [' * 2000 + "1" + "]}" * 2000])
def test_audit_reads_deep_json_as_text(doc):
    assert _cells(doc, "request_body") == [(None, "request_body", doc)]


def test_scan_with_audit_over_deep_json(tmp_path, capsys):
    db = tmp_path / "deep.db"
    assert main(["demo", str(db)]) == 0
    c = sqlite3.connect(db)
    c.execute(
        "UPDATE operations SET request_body = ? WHERE id = (SELECT MIN(id) FROM operations)", ("[" * 3000 + "]" * 3000,)
    )
    c.commit()
    c.close()
    capsys.readouterr()
    assert main(["scan", str(db), "--now", NOW, "--format", "json"]) == 0


# 3. PostgreSQL timestamps Python cannot hold (infinity, -infinity, BC, after 9999) made psycopg raise
#    DataError on the whole result set: scan and every export exited 2. Read as unknown times now; the
#    grid's keyset paging by such a column neither loses nor repeats rows.


@pytest.fixture
def pg_infinite(pg_url):
    w = create_engine(pg_url)
    md = reference_metadata()
    md.drop_all(w)
    md.create_all(w)
    vals = ["infinity", "-infinity", "0044-03-15 BC", "294276-01-01 00:00:00", "2026-11-30 11:00:00", None]
    with w.begin() as c:
        for i, t in enumerate(vals, 1):
            c.execute(
                text(
                    "INSERT INTO operations (id, scope, idempotency_key, status, attempt_count, created_at, "
                    "expires_at) VALUES (:i, 's', :k, 'succeeded', 1, CAST(:t AS timestamp), CAST(:t AS timestamp))"
                ),
                {"i": i, "k": f"k{i}", "t": t},
            )
    w.dispose()
    yield pg_url, len(vals)
    w = create_engine(pg_url)
    md.drop_all(w)
    w.dispose()


def test_pg_infinite_times_scan_and_export(pg_infinite, tmp_path, capsys):
    url, n = pg_infinite
    assert main(["scan", url, "--layout", "idemview", "--now", NOW]) == 0
    for rows in ("operations", "findings"):
        assert (
            main(
                [
                    "export",
                    url,
                    "--layout",
                    "idemview",
                    "--now",
                    NOW,
                    "--rows",
                    rows,
                    "--out",
                    str(tmp_path / f"{rows}.csv"),
                ]
            )
            == 0
        )
    import idemview

    ops = idemview.open(url, layout="idemview").operations(now=NOW)
    assert len(ops) == n
    assert ops["created_at"].notna().sum() == 1  # only 2026-11-30 11:00 is a time Python holds


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("sort", ["created_at", "expires_at"])
def test_pg_infinite_times_page_every_row_once(pg_infinite, sort, descending):
    url, n = pg_infinite
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("idemview"))
        seen, after = [], None
        for _ in range(n + 2):
            page = led.page(Filter(), sort=sort, descending=descending, after=after, limit=1, now=ANCHOR)
            seen += [op.key for op in page.rows]
            after = page.cursor
            if after is None:
                break
    finally:
        eng.dispose()
    assert sorted(seen) == [f"k{i}" for i in range(1, n + 1)]
