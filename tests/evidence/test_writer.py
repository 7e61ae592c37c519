"""Evidence export (DESIGN §7): CSV bytes, formula guard, exact numbers, instants, atomic write,
manifest and its SHA-256."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import tracemalloc
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from idemview import __version__
from idemview.domain.filters import Filter
from idemview.domain.model import FindingKind, Payload, Status
from idemview.evidence.writer import (
    ColumnSpec,
    ExportCancelled,
    manifest_path_for,
    verify_evidence,
    write_evidence,
)
from idemview.masking.masker import Masker

KEY = b"e" * 32
UTC = UTC
LEDGER = {
    "name": "payments-prod",
    "dialect": "postgresql",
    "host": "db.internal",
    "database": "pay",
    "user": "svc_ledger_reader",
    "password": "Tr0ub4dor&3",
    "url": "postgresql+psycopg://svc_ledger_reader:Tr0ub4dor&3@db.internal:5432/pay?sslmode=require",
}


def manifest_entries(**extra):
    f = Filter(
        statuses=[Status.FAILED],
        findings=[FindingKind.DUPLICATE_EFFECT],
        key="jane@example.com",
        since=datetime(2024, 5, 1, 10, tzinfo=UTC),
        until=datetime(2024, 5, 1, 12, tzinfo=UTC),
    )
    d = {
        "ledger": dict(LEDGER),
        "layout": {"name": "rocket-rides", "sha256": "ab" * 32},
        "filter": {"structured": f.to_dict(), "sentence": f.sentence()},
        "now": datetime(2024, 5, 2, 9, 30, tzinfo=UTC),
        "rows": "operations",
    }
    d.update(extra)
    return d


def export(tmp_path, columns, rows, name="out.csv", **kw):
    kw.setdefault("masker", Masker(key=KEY))
    kw.setdefault("manifest", manifest_entries())
    return write_evidence(tmp_path / name, columns, rows, **kw)


def read_rows(path, bom=False):
    raw = path.read_bytes()
    text = raw.decode("utf-8-sig" if bom else "utf-8")
    return list(csv.reader(io.StringIO(text, newline="")))


def dir_listing(tmp_path):
    return sorted(p.name for p in tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------


def test_basic_export_bytes_and_manifest(tmp_path):
    cols = [ColumnSpec("key", "text"), ColumnSpec("attempts", "integer"), ColumnSpec("note", "text")]
    rows = [("k1", 2, 'say "hi", then\nleave'), ("k2", None, "")]
    res = export(tmp_path, cols, rows)
    path = tmp_path / "out.csv"
    assert res.path == str(path) and res.rows == 2
    assert res.manifest_path == str(path) + ".manifest.json"
    raw = path.read_bytes()
    # every text field quoted, the integer and the NULL bare; an empty text is not NULL: "'" (issue 19)
    assert raw == b'"key","attempts","note"\r\n"k1",2,"say ""hi"", then\nleave"\r\n"k2",,"\'"\r\n'
    assert not raw.startswith(b"\xef\xbb\xbf")
    assert res.sha256 == hashlib.sha256(raw).hexdigest() and res.size == len(raw)
    assert dir_listing(tmp_path) == ["out.csv", "out.csv.manifest.json"]

    man = json.loads((tmp_path / "out.csv.manifest.json").read_text("utf-8"))
    assert man["tool"] == {"name": "idemview", "version": __version__}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", man["exported_at"])
    assert man["row_count"] == 2 and man["rows"] == "operations"
    assert man["columns"] == [
        {"name": "key", "kind": "text"},
        {"name": "attempts", "kind": "integer"},
        {"name": "note", "kind": "text"},
    ]
    assert man["csv"]["sha256"] == hashlib.sha256(raw).hexdigest()
    assert man["csv"]["bytes"] == len(raw) and man["csv"]["file"] == "out.csv"
    assert man["now"] == "2024-05-02T09:30:00+00:00"
    assert man["layout"] == {"name": "rocket-rides", "sha256": "ab" * 32}
    assert man["filter"]["structured"]["statuses"] == ["failed"]
    assert man["filter"]["sentence"].startswith("Failed operations with a duplicate effect")
    assert "rules_sha256" in man["masking"]["rules"] and man["masking"]["counts"] == {}
    assert verify_evidence(path)


def test_manifest_never_holds_user_or_password_and_is_masked(tmp_path):
    res = export(tmp_path, [ColumnSpec("k")], [("x",)])
    text = (tmp_path / "out.csv.manifest.json").read_text("utf-8")
    man = json.loads(text)
    for s in ("svc_ledger_reader", "Tr0ub4dor", "sslmode", "jane@example.com"):
        assert s not in text
    assert man["ledger"] == {
        "name": "payments-prod",
        "dialect": "postgresql",
        "host": "db.internal",
        "database": "pay",
        "url": "postgresql+psycopg://db.internal:5432/pay",
    }
    # the filter searched for an e-mail: the manifest shows the same tag the CSV would
    tag = Masker(key=KEY).tag("email", "jane@example.com")
    assert man["filter"]["structured"]["key"] == tag
    assert tag in man["filter"]["sentence"]
    assert res.masking == {}


def test_manifest_strips_credentials_anywhere_in_ledger(tmp_path):
    ledger = {
        "name": "x",
        "connection": {"Username": "bob", "PWD": "s3cr3t!", "host": "h"},
        "dsn": "mysql://bob:s3cr3t!@h/db",
    }
    export(tmp_path, [ColumnSpec("k")], [("x",)], manifest={"ledger": ledger})
    text = (tmp_path / "out.csv.manifest.json").read_text("utf-8")
    assert "bob" not in text and "s3cr3t" not in text
    assert json.loads(text)["ledger"] == {"name": "x", "connection": {"host": "h"}, "dsn": "mysql://h/db"}


def test_reserved_manifest_keys_are_refused(tmp_path):
    with pytest.raises(ValueError, match="reserved"):
        export(tmp_path, [ColumnSpec("k")], [("x",)], manifest={"csv": "mine"})
    assert dir_listing(tmp_path) == []


# ---------------------------------------------------------------------------------------------
# Formula injection (OWASP CSV injection), checked in the raw bytes


def test_formula_injection_guard_in_raw_bytes(tmp_path):
    cols = [
        ColumnSpec('=HYPERLINK("x")', "text"),
        ColumnSpec("n", "integer"),
        ColumnSpec("x", "number"),
        ColumnSpec("j", "json"),
        ColumnSpec("-b", "boolean"),
    ]
    rows = [
        ("=1+1", -5, -1.5, {"a": "=cmd"}, True),
        ("+SUM(A1)", -9223372036854775808, Decimal("-0.10"), -7, False),
        ("-2", 0, "-3e5", "=bad", None),
        ("@import", "12", "=1+2", "@x", "=no"),
        ("\tTAB", 1, 2, None, 1),
        ("\rCR", 1, 2, None, 0),
        ("\x00NUL", 1, 2, None, None),
        ("safe = text", "-x", "nan", [1, "-y"], None),
    ]
    export(tmp_path, cols, rows)
    raw = (tmp_path / "out.csv").read_bytes()
    lines = raw.split(b"\r\n")
    # text and JSON cells quoted (issue 19, item 16); numbers, booleans and NULL bare
    assert lines[0] == b'"\'=HYPERLINK(""x"")","n","x","j","\'-b"'
    assert lines[1] == b'"\'=1+1",-5,-1.5,"{""a"":""=cmd""}",true'
    assert lines[2] == b'"\'+SUM(A1)",-9223372036854775808,-0.10,"-7",false'  # JSON number -7
    assert lines[3] == b'"-2",0,-3e5,"\'=bad",'  # a plain number in a text column is not a formula (#9)
    assert lines[4] == b'"\'@import",12,"\'=1+2","\'@x","\'=no"'
    assert lines[5] == b'"\'\tTAB",1,2,,true'
    assert lines[6] == b'"\'\rCR",1,2,,false'
    assert lines[7] == b'"\'\x00NUL",1,2,,'
    assert lines[8] == b'"safe = text","\'-x","nan","[1,""-y""]",'
    # and it reads back as the guarded text
    back = read_rows(tmp_path / "out.csv")
    assert back[1][0] == "'=1+1" and back[6][0] == "'\rCR"


# ---------------------------------------------------------------------------------------------
# Numbers


def test_long_integers_are_exact(tmp_path):
    big = 1234567890123456789  # 19 digits: not representable as float
    assert float(big) != big
    cols = [ColumnSpec("id", "integer"), ColumnSpec("amount", "number"), ColumnSpec("ref", "text")]
    rows = [
        (big, Decimal("12345678901234567.891"), big),
        (9223372036854775807, 10**30, "9223372036854775807"),
        (Decimal("1234567890123456789"), 0.1, None),
        ("1234567890123456789", 1e16, None),
        ("+42", float("inf"), None),
    ]
    export(tmp_path, cols, rows)
    back = read_rows(tmp_path / "out.csv")[1:]
    assert back[0] == ["1234567890123456789", "12345678901234567.891", "1234567890123456789"]
    assert back[1] == ["9223372036854775807", "1" + "0" * 30, "9223372036854775807"]
    assert back[2] == ["1234567890123456789", "0.1", ""]
    assert back[3] == ["1234567890123456789", "1e+16", ""]
    assert back[4] == ["42", "inf", ""]


def test_float_in_integer_column_is_not_rounded_silently(tmp_path):
    export(tmp_path, [ColumnSpec("id", "integer")], [(3.0,), (1.2345678901234567e18,), (2.5,)])
    back = read_rows(tmp_path / "out.csv")[1:]
    assert back == [["3"], ["1.2345678901234568e+18"], ["2.5"]]


# ---------------------------------------------------------------------------------------------
# Instants


def test_aware_and_naive_instants(tmp_path):
    cet = timezone(timedelta(hours=2))
    cols = [ColumnSpec("at", "instant"), ColumnSpec("naive_at", "naive_instant")]
    rows = [
        (datetime(2024, 5, 1, 10, 0, tzinfo=UTC), datetime(2024, 5, 1, 10, 0)),
        (datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=cet), datetime(2024, 5, 1, 10, 0, 0, 500)),
        (datetime(2024, 5, 1, 10, 0), datetime(2024, 5, 1, 12, 0, tzinfo=cet)),
        (date(2024, 5, 1), None),
        ("not a time", "=2+2"),
    ]
    export(tmp_path, cols, rows)
    back = read_rows(tmp_path / "out.csv")[1:]
    assert back[0] == ["2024-05-01T10:00:00+00:00", "2024-05-01T10:00:00"]
    assert back[1] == ["2024-05-01T10:00:00.123456+00:00", "2024-05-01T10:00:00.000500"]
    # a naive value in an aware column gets no invented offset; an aware value in a naive column
    # keeps the offset it has
    assert back[2] == ["2024-05-01T10:00:00", "2024-05-01T12:00:00+02:00"]
    assert back[3] == ["2024-05-01", ""]
    assert back[4] == ["not a time", "'=2+2"]


# ---------------------------------------------------------------------------------------------
# Encoding, NULL, kinds


def test_bom_only_with_excel(tmp_path):
    export(tmp_path, [ColumnSpec("naïve")], [("é",)], name="x.csv", excel=True)
    raw = (tmp_path / "x.csv").read_bytes()
    assert raw.startswith(b'\xef\xbb\xbf"na\xc3\xafve"\r\n"\xc3\xa9"\r\n')
    man = json.loads((tmp_path / "x.csv.manifest.json").read_text("utf-8"))
    assert man["csv"]["bom"] is True
    assert man["csv"]["sha256"] == hashlib.sha256(raw).hexdigest()
    export(tmp_path, [ColumnSpec("naïve")], [("é",)], name="y.csv")
    assert (tmp_path / "y.csv").read_bytes() == '"naïve"\r\n"é"\r\n'.encode()


def test_null_literal(tmp_path):
    cols = [ColumnSpec("a", "text"), ColumnSpec("b", "integer"), ColumnSpec("c", "json")]
    export(tmp_path, cols, [(None, None, None), ("", 0, {})], null_literal="NULL")
    assert (tmp_path / "out.csv").read_bytes() == b'"a","b","c"\r\nNULL,NULL,NULL\r\n"",0,"{}"\r\n'


def test_booleans_bytes_payloads_and_mapping_rows(tmp_path):
    cols = [ColumnSpec("ok", "boolean"), ColumnSpec("raw", "text"), ColumnSpec("request", "json")]
    rows = [
        {"ok": True, "raw": b"caf\xc3\xa9", "request": Payload("pickle", None, size=120)},
        {"ok": 0, "raw": b"\xff\x00", "request": Payload("json", {"b": 1})},
        {"raw": b"=x"},  # missing keys are NULL
    ]
    res = export(tmp_path, cols, rows)
    back = read_rows(tmp_path / "out.csv")[1:]
    assert back == [
        ["true", "café", "pickled, not decoded (120 bytes)"],
        ["false", "0xff00", '{"b":1}'],
        ["", "'=x", ""],
    ]
    assert res.rows == 3


def test_unknown_column_kind_and_bad_rows(tmp_path):
    with pytest.raises(ValueError, match="unknown kind"):
        ColumnSpec("x", "float")
    with pytest.raises(ValueError, match="row 2 has 1 values for 2 columns"):
        export(tmp_path, [ColumnSpec("a"), ColumnSpec("b")], [("1", "2"), ("3",)])
    assert dir_listing(tmp_path) == []


# ---------------------------------------------------------------------------------------------
# Masking in the CSV


def test_cells_are_masked_through_the_masker(tmp_path):
    cols = [
        ColumnSpec("key", "text"),
        ColumnSpec("customer_email", "text"),
        ColumnSpec("card_number", "integer"),
        ColumnSpec("request", "json"),
        ColumnSpec("error", "text"),
        ColumnSpec("tokens_used", "integer"),
    ]
    rows = [
        (
            "k1",
            "jane@example.com",
            4242424242424242,
            {
                "amount": 1000,
                "password": "hunter2",
                "card": {"number": "4242 4242 4242 4242"},
                "note": "mail JANE@example.com",
            },
            "connect postgres://app:hunter2@db/x failed",
            1200,
        ),
        ("k2", "jane@example.com", None, None, '=HYPERLINK("http://x?token=abc123")', 7),
    ]
    masker = Masker(key=KEY)
    res = export(tmp_path, cols, rows, masker=masker)
    raw = (tmp_path / "out.csv").read_bytes().decode()
    for s in ("hunter2", "jane@example.com", "JANE@", "4242424242424242", "4242 4242", "abc123"):
        assert s not in raw
    back = read_rows(tmp_path / "out.csv")
    t_email = Masker(key=KEY).tag("email", "jane@example.com")
    assert back[1][1] == t_email and back[2][1] == t_email  # same value, same tag
    assert re.fullmatch(r"\[card#[0-9a-f]{6} …4242\]", back[1][2])
    req = json.loads(back[1][3])
    assert req["amount"] == 1000 and req["note"] == f"mail {t_email}"
    assert re.fullmatch(r"\[password#[0-9a-f]{6}\]", req["password"])
    # a whole JSON value under a card name keeps its card's last four too (issue #20 11c)
    assert re.fullmatch(r"\[card#[0-9a-f]{6} …4242\]", req["card"])
    assert back[1][3] == json.dumps(req, ensure_ascii=False, separators=(",", ":"))  # compact
    assert re.fullmatch(r"connect postgres://app:\[password#[0-9a-f]{6}\]@db/x failed", back[1][4])
    assert re.fullmatch(r"'=HYPERLINK\(\"http://x\?token=\[token#[0-9a-f]{6}\]\"\)", back[2][4])
    assert back[1][5] == "1200"
    assert res.masking == {"email": 3, "card": 2, "password": 2, "token": 1}
    man = json.loads((tmp_path / "out.csv.manifest.json").read_text("utf-8"))
    assert man["masking"]["counts"] == {"card": 2, "email": 3, "password": 2, "token": 1}
    assert "email" in man["masking"]["rules"]["detectors"]


def test_counts_are_per_export_with_a_shared_masker(tmp_path):
    masker = Masker(key=KEY)
    masker.mask_text("a@b.co")  # e.g. the grid, earlier
    res = export(tmp_path, [ColumnSpec("e")], [("c@d.co",), ("x",)], masker=masker)
    assert res.masking == {"email": 1}
    assert masker.counts == {"email": 2}


# ---------------------------------------------------------------------------------------------
# Atomic write, cancel, hash


def _rows_then_fail(n):
    for i in range(n):
        yield (f"k{i}", i)
    raise RuntimeError("database went away")


def test_failure_mid_way_leaves_nothing(tmp_path):
    cols = [ColumnSpec("key"), ColumnSpec("n", "integer")]
    with pytest.raises(RuntimeError, match="database went away"):
        export(tmp_path, cols, _rows_then_fail(5000), check_every=100)
    assert dir_listing(tmp_path) == []


def test_failure_keeps_an_older_export_intact(tmp_path):
    cols = [ColumnSpec("key"), ColumnSpec("n", "integer")]
    first = export(tmp_path, cols, [("old", 1)])
    before = (tmp_path / "out.csv").read_bytes(), (tmp_path / "out.csv.manifest.json").read_bytes()
    with pytest.raises(RuntimeError):
        export(tmp_path, cols, _rows_then_fail(2500))
    after = (tmp_path / "out.csv").read_bytes(), (tmp_path / "out.csv.manifest.json").read_bytes()
    assert before == after and dir_listing(tmp_path) == ["out.csv", "out.csv.manifest.json"]
    assert verify_evidence(first.path)


def test_cancel_leaves_nothing(tmp_path):
    calls = []

    def progress(n):
        calls.append(n)

    def cancel():
        return len(calls) >= 3  # after 3 batches

    rows = ((f"k{i}", i) for i in range(100_000))
    with pytest.raises(ExportCancelled, match="after 300 rows"):
        export(
            tmp_path,
            [ColumnSpec("key"), ColumnSpec("n", "integer")],
            rows,
            progress=progress,
            cancel=cancel,
            check_every=100,
        )
    assert calls == [100, 200, 300]
    assert dir_listing(tmp_path) == []


def test_cancel_before_start(tmp_path):
    with pytest.raises(ExportCancelled):
        export(tmp_path, [ColumnSpec("k")], [("x",)], cancel=lambda: True)
    assert dir_listing(tmp_path) == []


def test_progress_and_hash_over_many_rows(tmp_path):
    seen = []
    rows = ((f"k{i}", i, datetime(2024, 5, 1, tzinfo=UTC) + timedelta(seconds=i)) for i in range(2500))
    cols = [ColumnSpec("key"), ColumnSpec("n", "integer"), ColumnSpec("at", "instant")]
    res = export(tmp_path, cols, rows, progress=seen.append, check_every=1000)
    assert seen == [1000, 2000, 2500] and res.rows == 2500
    raw = (tmp_path / "out.csv").read_bytes()
    assert raw.count(b"\r\n") == 2501
    assert hashlib.sha256(raw).hexdigest() == res.sha256
    man = json.loads(open(manifest_path_for(res.path), encoding="utf-8").read())
    assert man["csv"]["sha256"] == res.sha256 and man["row_count"] == 2500


def test_verify_detects_tampering_and_missing_manifest(tmp_path):
    res = export(tmp_path, [ColumnSpec("k")], [("x",), ("y",)])
    ok = verify_evidence(res.path)
    assert ok and ok.actual_sha256 == ok.expected_sha256 == res.sha256 and ok.problems == []
    with open(res.path, "ab") as f:
        f.write(b"z\r\n")
    bad = verify_evidence(res.path)
    assert not bad and "SHA-256 differs from the manifest" in bad.problems
    assert any("size" in p for p in bad.problems)
    os.remove(res.manifest_path)
    missing = verify_evidence(res.path)
    assert not missing and missing.problems[0].startswith("manifest unreadable")


def test_memory_stays_flat_in_row_count(tmp_path):
    cols = [ColumnSpec("key"), ColumnSpec("n", "integer"), ColumnSpec("note"), ColumnSpec("p", "json")]
    notes = [f"note {i} for order ord-{i:04d}" for i in range(100)]

    def rows(n):
        for i in range(n):
            yield (f"k{i % 500}", i, notes[i % 100], {"i": i % 50, "s": notes[i % 100]})

    def peak(n):
        tracemalloc.start()
        try:
            export(tmp_path, cols, rows(n), name=f"m{n}.csv")
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(5_000), peak(60_000)
    assert large < small + 512 * 1024, (small, large)  # 12x the rows, < 0.5 MB more


# ------------------------------------------------------------------ large rows written field by field


def test_row_pieces_equal_the_csv_module():
    """A large row is written without the csv module (issue 27 item 1): the same bytes, bare cells
    with a delimiter, quote or line break quoted as the csv module quotes them."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from idemview.evidence import writer
    from idemview.evidence.writer import _Bare, _row_pieces

    cell = st.text(alphabet=st.sampled_from(list("ab,\"\r\n;= 'x\u00e9\u2028")), max_size=12)
    field = st.tuples(st.booleans(), cell).map(lambda bt: _Bare(bt[1]) if bt[0] else bt[1])

    @settings(max_examples=400, deadline=None)
    @given(st.lists(field, min_size=1, max_size=6))
    def check(fields):
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_NONNUMERIC).writerow(fields)
        assert "".join(_row_pieces(fields)) == buf.getvalue()

    check()
    old = writer.PIECE_CHARS
    writer.PIECE_CHARS = 3  # fields longer than a piece are quoted slice by slice
    try:
        check()
    finally:
        writer.PIECE_CHARS = old


def test_csv_text_by_columns_equals_the_csv_module():
    """Chunks are written a column at a time (issue 27 item 2): the same text as the csv module's
    writerows, for columns of text cells, bare cells (numbers, NULLs, a bare cell holding a delimiter,
    quote or line break) and both mixed, NUL and line separators included."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from idemview.evidence.writer import _Bare, _BareColumn, _csv_text

    cell = st.text(alphabet=st.sampled_from(list("ab,\"\r\n;= 'x\x00\u00e9\u2028")), max_size=8)
    # what a column marked bare as a whole holds: ints, ISO-8601 instants, a NULL cell without , " CR LF
    safe_cell = st.text(alphabet=st.sampled_from(list("0189-+:.TZ N=x'")), max_size=8)
    kinds = st.sampled_from(["str", "bare", "mixed", "column"])

    @st.composite
    def columns(draw):
        n = draw(st.integers(min_value=1, max_value=6))
        out = []
        for _ in range(draw(st.integers(min_value=2, max_value=5))):
            k = draw(kinds)
            texts = draw(st.lists(safe_cell if k == "column" else cell, min_size=n, max_size=n))
            if k == "column":  # the csv module is given the per-cell marks
                out.append(_BareColumn(texts))
            elif k == "str":
                out.append(texts)
            elif k == "bare":
                out.append([_Bare(t) for t in texts])
            else:
                out.append([_Bare(t) if draw(st.booleans()) else t for t in texts])
        return out

    @settings(max_examples=500, deadline=None)
    @given(columns())
    def check(cols):
        buf = io.StringIO()
        per_cell = [[_Bare(t) for t in c] if type(c) is _BareColumn else c for c in cols]
        csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_NONNUMERIC).writerows(zip(*per_cell, strict=True))
        assert _csv_text(cols) == buf.getvalue()

    check()


def test_a_large_row_is_written_like_the_csv_module_and_held_once(tmp_path, monkeypatch):
    from idemview.evidence import writer as w

    big = ('=SUM(A1) "quoted"; ' + "x" * 997 + "\n-1;") * 1500  # ~1.5 MB, guard and quotes inside
    rows = [(1, big, None), (2, "small", 3), (3, big[:5000], None)]
    cols = [ColumnSpec("n", "integer"), ColumnSpec("body"), ColumnSpec("m", "integer")]

    def run(name):
        return write_evidence(
            tmp_path / name, cols, iter(rows), masker=Masker(key=b"k" * 32), manifest={}, check_every=1
        )

    a = run("a.csv")
    monkeypatch.setattr(w, "BIG_ROW", 10**12)  # never the field-by-field path
    b = run("b.csv")
    monkeypatch.setattr(w, "BIG_ROW", 1)  # every one-row chunk field by field
    monkeypatch.setattr(w, "PIECE_CHARS", 7)  # in slices that split doubled quotes' neighbours
    c = run("c.csv")
    data = (tmp_path / "a.csv").read_bytes()
    assert data == (tmp_path / "b.csv").read_bytes() == (tmp_path / "c.csv").read_bytes()
    assert a.sha256 == b.sha256 == c.sha256 == hashlib.sha256(data).hexdigest()
    old = csv.field_size_limit(1 << 24)
    try:
        got = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    finally:
        csv.field_size_limit(old)
    assert got[1][1].startswith("'=SUM(A1)") and len(got) == 4
