"""Issue 19, items 15 and 16: evidence read back is what was exported, and nothing in the CSV opens as a
formula, in a comma or a semicolon locale.

- ``read_evidence`` on a malformed manifest (not JSON, nested without end, a key missing, a value of the
  wrong type, a timestamp that is none) or a CSV that does not fit it raises ``EvidenceMismatch`` with the
  reason, never ValueError / KeyError / RecursionError;
- text round-trips exactly through the formula guard (a stored ``'=x`` comes back as ``'=x``), also a
  text equal to the NULL literal (property test over arbitrary text);
- every text field is quoted, and a formula start after ``;`` or a line break inside a field is guarded:
  a spreadsheet that splits at ``;`` (semicolon-separator locales) finds no cell that starts a formula.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import idemview
from idemview.errors import EvidenceMismatch
from idemview.evidence.cells import FORMULA_STARTERS, is_plain_number
from idemview.evidence.writer import ColumnSpec, write_evidence
from idemview.masking.masker import Masker

KEY = b"r" * 32


class _Unmasked(Masker):
    """A Masker that changes no value: the round trip of the CSV codec alone (masking is tested apart)."""

    def mask_value(self, v, column=None):  # type: ignore[override]
        return v

    def for_column(self, name):  # type: ignore[override]
        return lambda v: v

    def column_kind(self, name):  # type: ignore[override]
        return None


def _export(path: Path, cols, rows, **kw):
    return write_evidence(path, cols, rows, masker=kw.pop("masker", _Unmasked(key=KEY)), manifest={}, **kw)


# ------------------------------------------------------------------------------------------ round trip

STARTS = ["", "'", "''", "=", "'=", "+", "-", "@", "\t", "\r", "\n", "\0", ";", ";=", "\r\n=", ";'", ';"=', "＝", "-5"]
TEXTS = st.builds(lambda a, b, c: a + b + c, st.sampled_from(STARTS), st.text(max_size=12), st.sampled_from(STARTS))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.one_of(st.none(), TEXTS), min_size=1, max_size=8),
    null=st.sampled_from(["", "NULL", "-1", "\\N", "=NULL()"]),
)
def test_text_values_round_trip_exactly(tmp_path_factory, values, null):
    if null == "=NULL()":  # a literal that needs the guard itself: a text equal to it is NULL's twin
        assume("=NULL()" not in values)
    path = tmp_path_factory.mktemp("rt") / "out.csv"
    cols = [ColumnSpec("id", "integer"), ColumnSpec("t", "text")]
    _export(path, cols, [(i, v) for i, v in enumerate(values)], null_literal=null)
    back = idemview.read_evidence(path)
    assert [None if v is pd.NA else v for v in back["t"]] == values
    assert list(back["id"]) == list(range(len(values)))


@pytest.mark.parametrize("value", ["'=x", "'", "''=1", "=x", "'hello", "a;'=b", ";=1", "x\n'y", ""])
def test_a_stored_quote_comes_back(tmp_path, value):
    _export(tmp_path / "q.csv", [ColumnSpec("t")], [(value,), (None,)])
    back = list(idemview.read_evidence(tmp_path / "q.csv")["t"])
    assert back[0] == value and back[1] is pd.NA


def test_header_names_that_need_the_guard_read_back(tmp_path):
    cols = [ColumnSpec("=name", "text"), ColumnSpec("n", "integer")]
    _export(tmp_path / "h.csv", cols, [("x", 1)])
    assert list(idemview.read_evidence(tmp_path / "h.csv").columns) == ["=name", "n"]


# ----------------------------------------------------------------------------- semicolon locales, bytes

_STARTER = set(FORMULA_STARTERS)


def _cell_starts(text: str) -> list[str]:
    """What a spreadsheet may take as the start of a cell whatever it thinks of the quotes: the file's
    start and the text after every ``,`` ``;`` CR or LF, with leading quotes skipped."""
    out = [text]
    for m in re.finditer(r"[,;\r\n]", text):
        out.append(text[m.end() :])
    return [s.lstrip('"') for s in out]


def _formula_cells(text: str) -> list[str]:
    bad = []
    for s in _cell_starts(text):
        # a line break starts a row: the text after it is a cell start of its own, checked as such
        if s and s[0] in _STARTER and s[0] not in "\r\n":
            head = re.split(r'[,;"\r\n]', s, maxsplit=1)[0]
            if not is_plain_number(head):
                bad.append(s[:30])
    return bad


def test_a_formula_after_a_semicolon_is_guarded_and_text_is_quoted(tmp_path):
    cols = [ColumnSpec("id", "integer"), ColumnSpec("key", "text"), ColumnSpec("n", "number")]
    rows = [
        (5, "order-2;=cmd|' /C calc'!A0", -1.5),
        (6, 'x;"=HYPERLINK(""http://evil"")', None),
        (7, "first line\n=2+3\r@SUM(A1)", 2),
        (8, "a;-b;+c;@d;\tE", None),
    ]
    _export(tmp_path / "s.csv", cols, rows)
    raw = (tmp_path / "s.csv").read_bytes()
    lines = raw.split(b"\r\n")
    assert lines[0] == b'"id","key","n"'
    assert lines[1] == b"5,\"order-2;'=cmd|' /C calc'!A0\",-1.5"
    assert lines[2] == b'6,"x;\'""=HYPERLINK(""""http://evil"""")",'
    assert raw.split(b"\r\n", 3)[3].startswith(b"7,\"first line\n'=2+3\r'@SUM(A1)\",2")
    assert lines[-2] == b"8,\"a;'-b;'+c;'@d;'\tE\","
    # whatever a spreadsheet takes for the quotes, no cell it can find starts a formula
    assert _formula_cells(raw.decode("utf-8")) == []
    back = idemview.read_evidence(tmp_path / "s.csv")
    assert list(back["key"]) == [r[1] for r in rows]


def test_the_demo_export_has_no_formula_cell_in_any_locale(tmp_path, capsys):
    from idemview.cli import main
    from idemview.services.demo import write_demo

    db = tmp_path / "demo.db"
    write_demo(db, operations=60, seed=4)
    for rows in ("operations", "attempts", "findings"):
        out = tmp_path / f"{rows}.csv"
        assert main(["export", str(db), "--rows", rows, "--out", str(out), "--now", "2026-11-30T12:00:00Z"]) == 0
        assert _formula_cells(out.read_text("utf-8")) == [], rows
        assert len(idemview.read_evidence(out)) > 0
    capsys.readouterr()


# ---------------------------------------------------------------------------------- broken manifests


@pytest.fixture
def good(tmp_path):
    cols = [ColumnSpec("k", "text"), ColumnSpec("n", "integer"), ColumnSpec("at", "instant")]
    from datetime import UTC, datetime

    _export(tmp_path / "e.csv", cols, [("a", 1, datetime(2026, 1, 1, tzinfo=UTC)), ("b", None, None)])
    return tmp_path / "e.csv"


def _manifest(p: Path) -> Path:
    return p.with_name(p.name + ".manifest.json")


def _edit(p: Path, fn) -> None:
    m = _manifest(p)
    doc = json.loads(m.read_text("utf-8"))
    fn(doc)
    m.write_text(json.dumps(doc), "utf-8")


def _set(path, value):
    def f(doc):
        cur = doc
        for k in path[:-1]:
            cur = cur[k]
        cur[path[-1]] = value

    return f


def _drop(path):
    def f(doc):
        cur = doc
        for k in path[:-1]:
            cur = cur[k]
        del cur[path[-1]]

    return f


EDITS = {
    "no csv": _drop(["csv"]),
    "no columns": _drop(["columns"]),
    "no row_count": _drop(["row_count"]),
    "no sha256": _drop(["csv", "sha256"]),
    "no exported_at": _drop(["exported_at"]),
    "columns not a list": _set(["columns"], "k,n,at"),
    "column not an object": _set(["columns"], ["k", "n", "at"]),
    "column without kind": _set(["columns", 0], {"name": "k"}),
    "unknown kind": _set(["columns", 0, "kind"], "float"),
    "row_count text": _set(["row_count"], "2"),
    "row_count bool": _set(["row_count"], True),
    "bytes text": _set(["csv", "bytes"], "120"),
    "sha256 number": _set(["csv", "sha256"], 12),
    "csv a list": _set(["csv"], []),
    "null a number": _set(["csv", "null"], 0),
    "guard unknown": _set(["csv", "formula_guard"], {"version": 99}),
    "exported_at yesterday": _set(["exported_at"], "yesterday"),
    "exported_at month 13": _set(["exported_at"], "2026-13-45T00:00:00Z"),
    "exported_at year 0": _set(["exported_at"], "0000-01-01T00:00:00Z"),
    "exported_at number": _set(["exported_at"], 1764504000),
    "format other": _set(["format"], "something/9"),
    "wrong row count": _set(["row_count"], 3),
}


@pytest.mark.parametrize("what", sorted(EDITS))
def test_a_malformed_manifest_is_an_evidence_mismatch(good, what):
    _edit(good, EDITS[what])
    with pytest.raises(EvidenceMismatch) as e:
        idemview.read_evidence(good)
    assert str(good) in str(e.value)


@pytest.mark.parametrize(
    "text",
    [
        b"{not json",
        b"",
        b"[1, 2]",
        b'"a string"',
        b"null",
        b"\xff\xfe{}",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a":' * 5000 + b"1" + b"}" * 5000,
    ],
    ids=["bad-json", "empty", "array", "string", "null", "not-utf8", "deep-array", "deep-object"],
)
def test_a_manifest_that_is_not_one_is_an_evidence_mismatch(good, text):
    _manifest(good).write_bytes(text)
    with pytest.raises(EvidenceMismatch):
        idemview.read_evidence(good)


def test_a_missing_manifest_is_an_evidence_mismatch(good):
    _manifest(good).unlink()
    with pytest.raises(EvidenceMismatch, match="manifest"):
        idemview.read_evidence(good)


def _rewrite_csv(p: Path, data: bytes) -> None:
    """The CSV replaced and its manifest's SHA-256 and size made to match (a consistent but bad pair)."""
    p.write_bytes(data)
    _edit(p, _set(["csv", "sha256"], hashlib.sha256(data).hexdigest()))
    _edit(p, _set(["csv", "bytes"], len(data)))


@pytest.mark.parametrize(
    "data",
    [
        b'"k","n","at"\r\n"a",1,yesterday\r\n"b",,\r\n',
        b'"k","n","at"\r\n"a",1,2026-13-45T00:00:00Z\r\n"b",,\r\n',
        b'"k","n","x"\r\n"a",1,\r\n"b",,\r\n',
        b'"k","n","at"\r\n"a",1\r\n"b",,\r\n',
        b'"k","n","at"\r\n"a,1,\r\n',
        b"",
        b'"k","n","at"\r\n"\xff",1,\r\n"b",,\r\n',
    ],
    ids=["instant-word", "instant-month-13", "header", "short-row", "open-quote", "empty", "not-utf8"],
)
def test_a_csv_that_does_not_fit_its_manifest_is_an_evidence_mismatch(good, data):
    _rewrite_csv(good, data)
    with pytest.raises(EvidenceMismatch):
        idemview.read_evidence(good)


def test_the_good_pair_reads(good):
    back = idemview.read_evidence(good)
    assert list(back["k"]) == ["a", "b"] and back["n"].tolist()[0] == 1 and back["at"].isna().tolist() == [False, True]
