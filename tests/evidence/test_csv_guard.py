"""Issue #9 item 9: the CSV formula guard (DESIGN §7, OWASP "CSV Injection") leaves plain numbers alone
and guards everything that could start a formula, the NULL literal included."""

from __future__ import annotations

import csv
import io

import pytest

from idemview.cli import main
from idemview.evidence.writer import ColumnSpec, guard_formula, write_evidence
from idemview.masking.masker import Masker

PLAIN_NUMBERS = ["-42", "-1250.5", "+15", "1e-5", "-.5", "-0", "+3.", "-2E+10", "42"]
FORMULAS = [
    "-1+2",
    "-2+3*4",
    "+A1",
    "=1",
    "@SUM(A1)",
    "-",
    "+",
    "-e5",
    "- 4",
    "-4 ",
    "\t-4",
    "-1e",
    "--1",
    "-0x1F",
    "-inf",
    "-NaN",
    "+1,5",
]


@pytest.mark.parametrize("s", PLAIN_NUMBERS)
def test_plain_number_is_written_unchanged(s):
    assert guard_formula(s) == s


@pytest.mark.parametrize("s", FORMULAS)
def test_formula_or_non_number_stays_guarded(s):
    assert guard_formula(s) == ("'" + s if s[0] in "=+-@\t\r\0" else s)


def _export(tmp_path, rows, **kw):
    cols = [ColumnSpec("t", "text"), ColumnSpec("j", "json"), ColumnSpec("n", "number")]
    res = write_evidence(
        tmp_path / "out.csv", cols, rows, masker=Masker(key=b"k" * 32), manifest={"ledger": {"connection": "t"}}, **kw
    )
    return list(csv.reader(io.StringIO((tmp_path / "out.csv").read_text("utf-8"), newline="")))[1:], res


def test_text_cells_that_are_plain_numbers_are_not_prefixed(tmp_path):
    rows = [(s, s, s) for s in PLAIN_NUMBERS] + [(s, s, s) for s in FORMULAS]
    got, _ = _export(tmp_path, rows)
    n = len(PLAIN_NUMBERS)
    assert [r[0] for r in got[:n]] == PLAIN_NUMBERS
    assert [r[1] for r in got[:n]] == PLAIN_NUMBERS
    assert [r[2] for r in got[:n]] == PLAIN_NUMBERS
    for r, s in zip(got[n:], FORMULAS, strict=False):
        want = "'" + s if s[0] in "=+-@\t\r\0" else s
        assert r[0] == want and r[1] == want and r[2] == want


def test_null_literal_is_guarded_like_any_text(tmp_path):
    got, _ = _export(tmp_path, [(None, None, None), ("x", None, 1)], null_literal="=NULL()")
    assert got == [["'=NULL()"] * 3, ["x", "'=NULL()", "1"]]
    got, _ = _export(tmp_path, [(None, "-1", None)], null_literal="-1", overwrite=True)  # a number literal is fine
    # ... and a text equal to it is told apart from NULL (issue 19, item 15: values round-trip)
    assert got == [["-1", "'-1", "-1"]]


def test_cli_null_literal_is_guarded(tmp_path, capsys):
    from idemview.services.demo import write_demo

    db = tmp_path / "demo.db"
    write_demo(db, operations=10)
    out = tmp_path / "out.csv"
    assert main(["export", str(db), "--out", str(out), "--null", "=NULL()"]) == 0
    capsys.readouterr()
    text = out.read_text("utf-8")
    assert "'=NULL()" in text
    assert not any(cell == "=NULL()" for row in csv.reader(io.StringIO(text, newline="")) for cell in row)


@pytest.mark.parametrize("s", ['＝HYPERLINK("http://x")', "＋1", "－5", "＠SUM(A1)"])
def test_fullwidth_formula_starters_are_guarded_and_read_back(s, tmp_path):
    """Spreadsheets in CJK locales take fullwidth ＝＋－＠ as operators (found by a tester)."""
    import idemview

    assert guard_formula(s) == "'" + s
    rows, res = _export(tmp_path, [[s, None, None]])
    assert rows[0][0] == "'" + s
    assert list(idemview.read_evidence(res.path)["t"]) == [s]
