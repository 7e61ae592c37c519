"""One display sink (issue 19 item 10): terminal escapes in table, column or schema names never reach
the terminal raw (stderr, ``detect``); right-to-left overrides and zero-width characters in keys are
shown escaped in the GUI's cells and detail, while the CSV keeps the exact value and its manifest says
which rows carry them."""

from __future__ import annotations

import csv
import json
import logging
import sqlite3

import pytest
from sqlalchemy import create_engine, text

from idemview.cli import main
from idemview.masking.masker import MaskingLogFilter
from idemview.masking.visible import HiddenRows, VisibleWriter, has_hidden, visible

NOW = "2026-11-30T12:00:00Z"
ESC = "\x1b[31mRED\x1b]0;pwned\x07"
RLO_KEY = "order-\u202e1234"  # shows as "order-4321"
ZW_KEY = "order-\u200b1234"  # shows as "order-1234"


def test_visible_escapes_like_json_and_keeps_what_is_printable():
    assert visible("plain ünïcode €") == "plain ünïcode €"
    assert visible(ESC) == "\\u001b[31mRED\\u001b]0;pwned\\u0007"
    assert visible(RLO_KEY) == "order-\\u202e1234" != visible(ZW_KEY) == "order-\\u200b1234"
    assert visible("a\nb\tc", "\n\t") == "a\nb\tc" and visible("a\nb") == "a\\u000ab"
    assert visible("\U000e0041 \udcff") == "\\udb40\\udc41 \\udcff"  # tag character; lone surrogate
    assert json.loads('"' + visible("x\u2028\u202e\x7f") + '"') == "x\u2028\u202e\x7f"  # valid JSON escapes
    assert has_hidden(RLO_KEY) and not has_hidden("two\nlines\ttab")


def test_stderr_and_stdout_go_through_the_sink(tmp_path, capsys):
    db = tmp_path / "demo.db"
    assert main(["demo", str(db)]) == 0
    from idemview.layouts.presets import __path__ as presets

    src = open(f"{list(presets)[0]}/idemview.toml", encoding="utf-8").read()
    src = src.replace('table = "operations"', 'table = "operations\\u001b[2J\\u001b]0;pwned\\u0007"', 1)
    (tmp_path / "evil.toml").write_text(src.replace('name = "idemview"', 'name = "evil"', 1), "utf-8")
    capsys.readouterr()
    assert main(["scan", str(db), "--layout", str(tmp_path / "evil.toml"), "--now", NOW]) == 4
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\u202e" not in err
    assert "operations\\u001b[2J\\u001b]0;pwned\\u0007" in err and err.count("\n") == 1


def test_one_line_writer_escapes_inner_line_breaks():
    out: list[str] = []

    class S:
        def write(self, s):
            out.append(s)

        def flush(self):
            pass

    w = VisibleWriter(S(), one_line=True)
    w.write("idemview: table a\nFORGED second line\x1b[0m\n")
    assert out == ["idemview: table a\\u000aFORGED second line\\u001b[0m\n"]


def test_log_records_go_through_the_sink():
    rec = logging.LogRecord("x", logging.WARNING, __file__, 1, "table %s", (ESC,), None)
    MaskingLogFilter().filter(rec)
    assert "\x1b" not in rec.getMessage() and "\\u001b" in rec.getMessage()


def test_detect_prints_schema_names_escaped(pg_url, capsys):
    from idemview.services.demo import reference_metadata

    eng = create_engine(pg_url)
    evil = "s\x1b[31mRED"
    try:
        with eng.begin() as c:
            c.execute(text(f'DROP SCHEMA IF EXISTS "{evil}" CASCADE'))
            c.execute(text(f'CREATE SCHEMA "{evil}"'))
        reference_metadata().create_all(eng)
        md = reference_metadata()
        for t in md.tables.values():
            t.schema = evil
        md.create_all(eng)
        capsys.readouterr()
        assert main(["detect", pg_url]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "s\\u001b[31mRED" in out
    finally:
        with eng.begin() as c:
            c.execute(text(f'DROP SCHEMA IF EXISTS "{evil}" CASCADE'))
            for t in reference_metadata().tables:
                c.execute(text(f'DROP TABLE IF EXISTS "{t}" CASCADE'))
        eng.dispose()


@pytest.fixture
def bidi_ledger(tmp_path):
    db = tmp_path / "bidi.db"
    assert main(["demo", str(db)]) == 0
    c = sqlite3.connect(db)
    rowids = [r[0] for r in c.execute("SELECT rowid FROM operations ORDER BY rowid LIMIT 2")]
    for rid, key in zip(rowids, (RLO_KEY, ZW_KEY), strict=True):
        old = c.execute("SELECT scope, idempotency_key FROM operations WHERE rowid=?", (rid,)).fetchone()
        c.execute("UPDATE operations SET idempotency_key=? WHERE rowid=?", (key, rid))
        c.execute("UPDATE attempts SET idempotency_key=? WHERE scope=? AND idempotency_key=?", (key, *old))
    c.commit()
    c.close()
    return str(db)


def test_csv_keeps_exact_keys_and_the_manifest_says_which_rows(bidi_ledger, tmp_path, capsys):
    out = tmp_path / "ev.csv"
    assert main(["export", bidi_ledger, "--out", str(out), "--now", NOW]) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
    keys = [r["idempotency_key"] for r in rows]
    assert RLO_KEY in keys and ZW_KEY in keys  # exact values in the file
    man = json.loads((tmp_path / "ev.csv.manifest.json").read_text("utf-8"))
    hc = man["hidden_characters"]
    assert hc["rows"] == 2 and not hc["truncated"]
    assert sorted(keys[i - 1] for i in hc["row_numbers"]) == sorted([RLO_KEY, ZW_KEY])
    plain = tmp_path / "plain.db"
    assert main(["demo", str(plain)]) == 0
    assert main(["export", str(plain), "--out", str(tmp_path / "p.csv"), "--now", NOW]) == 0
    assert "hidden_characters" not in json.loads((tmp_path / "p.csv.manifest.json").read_text("utf-8"))


def test_gui_cells_and_detail_text_are_escaped(bidi_ledger):
    from idemview.services.session import SharedMasker

    m = SharedMasker()
    assert m.text(RLO_KEY) == "order-\\u202e1234" and m.text(ZW_KEY) == "order-\\u200b1234"
    assert m.free_text(f"key {ESC}\nnext line") == "key \\u001b[31mRED\\u001b]0;pwned\\u0007\nnext line"


def test_hidden_rows_are_bounded():
    h = HiddenRows()
    h.note([["x\u200b"] * 250, ["ok"] * 250], 0)
    d = h.describe()
    assert d["rows"] == 250 and len(d["row_numbers"]) == HiddenRows.LIMIT and d["truncated"]
    assert d["row_numbers"][:3] == [1, 2, 3]
