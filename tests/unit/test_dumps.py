"""Dump files as ledgers (issue 23 item 3, DESIGN §5.3): a ledger built in SQLite, dumped table by table
to CSV, Parquet and JSON Lines (by DuckDB, as a DBA's export would be), gives the same scan JSON as
the SQLite file; detection, export, report and the Python API work on the dump; the dump is never
written to and nothing else is readable through it; bad dumps are one line, exit 2 (4 for a missing
table), files untouched."""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from sqlalchemy import create_engine
from sqlalchemy.exc import DBAPIError

from idemview.cli import main
from idemview.ledger.connect import open_engine, session_is_read_only
from idemview.ledger.dialects import DUCKDB, family
from idemview.ledger.dump_engine import StatementRefused, check_statement
from idemview.ledger.dumps import DumpError, is_dump_path, list_dump
from tests.conftest import ANCHOR
from tests.ledgers import load

NOW_ISO = "2026-11-30T12:00:00Z"
FORMATS = ("csv", "parquet", "jsonl")
_COPY = {"csv": "(FORMAT csv, HEADER)", "parquet": "(FORMAT parquet)", "jsonl": "(FORMAT json)"}


def _core():
    from tests.presets import test_planted_stripe_powertools_celery as core

    return core


def _celery(path: Path) -> str:
    c = _core()
    h = timedelta(hours=1)
    rows = c.cel_clean() + [
        c.cel_row(10, "stuck-0000-4000-8000-000000000010", "STARTED", ANCHOR - 3 * h),
        c.cel_row(11, "failed-000-4000-8000-000000000011", "FAILURE", ANCHOR - 2 * h, retries=3),
        c.cel_row(12, "storm-0000-4000-8000-000000000012", "SUCCESS", ANCHOR - 1 * h, retries=9),
        c.cel_row(13, "old-00000-4000-8000-000000000013", "SUCCESS", ANCHOR - 30 * h),
    ]
    w = create_engine(f"sqlite:///{path}")
    load(w, c.celery_md(), {"celery_taskmeta": rows})
    w.dispose()
    return "celery"


def _powertools(path: Path) -> str:
    c = _core()
    rows = c.pt_clean() + [
        c.pt_row("deadbeef01", "INPROGRESS", ANCHOR + timedelta(minutes=50), lease=ANCHOR - timedelta(minutes=3)),
        c.pt_row("cafef00d02", "COMPLETED", ANCHOR - timedelta(minutes=10)),
    ]
    w = create_engine(f"sqlite:///{path}")
    load(w, c.powertools_md(), {"idempotency": rows})
    w.dispose()
    return "powertools-sql"


def _idemview(path: Path) -> str:
    """The demo ledger (idemview's own preset: operations + attempts, every finding kind planted)."""
    assert main(["demo", str(path), "--operations", "300", "--seed", "7"]) == 0
    return "idemview"


BUILDERS = {"celery": _celery, "powertools-sql": _powertools, "idemview": _idemview}


def dump_sqlite(db: Path, out: Path, fmt: str) -> list[Path]:
    """Each table of the SQLite file ``db`` as ``out/TABLE.fmt``, written by DuckDB from the rows as
    SQLite returns them (times as text, pickles as bytes): what a dump of a SQLite ledger holds."""
    out.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(db)
    names = [r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    files = []
    for n in names:
        frame = pd.read_sql(f'SELECT * FROM "{n}"', src)  # noqa: F841 - read by DuckDB below
        con = duckdb.connect()
        con.register("frame", frame)
        target = out / f"{n}.{fmt}"
        con.execute(f"COPY frame TO '{target}' {_COPY[fmt]}")
        con.close()
        files.append(target)
    src.close()
    return files


def _fingerprint(files) -> dict:
    return {str(f): (f.read_bytes(), f.stat().st_mtime_ns) for f in files}


def _scan(target: str, capsys, *extra: str) -> dict:
    assert main(["scan", target, *extra, "--now", NOW_ISO, "--format", "json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """{preset: (sqlite file, {format: dump folder})} for the three presets."""
    base = tmp_path_factory.mktemp("dumps")
    out = {}
    for preset, build in BUILDERS.items():
        db = base / f"{preset}.db"
        build(db)
        out[preset] = (db, {fmt: dump_sqlite(db, base / f"{preset}-{fmt}", fmt)[0].parent for fmt in FORMATS})
    return out


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("preset", sorted(BUILDERS))
def test_scan_of_a_dump_equals_the_sqlite_ledger(built, preset, fmt, capsys):
    db, dumps = built[preset]
    want = _scan(str(db), capsys, "--layout", preset)
    assert want["findings"], "the fixture has planted incidents"
    got = _scan(str(dumps[fmt]), capsys, "--layout", preset)
    # A dump keeps no constraints: where SQLite's UNIQUE (task_id) made a kind impossible, the dump's
    # scan checks it (and finds nothing); every other field is byte-identical.
    why_w, why_g = want.pop("not_checkable", None), got.pop("not_checkable", None)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
    assert set(why_g or {}) <= set(why_w or {})


@pytest.mark.parametrize("preset", sorted(BUILDERS))
def test_detect_on_a_dump_names_the_preset(built, preset, capsys):
    _, dumps = built[preset]
    assert main(["detect", str(dumps["parquet"])]) == 0
    assert capsys.readouterr().out.split("\t")[0] == preset


def test_one_file_is_one_table_named_after_it(built, capsys):
    _, dumps = built["celery"]
    f = dumps["parquet"] / "celery_taskmeta.parquet"
    d = list_dump(f)
    assert [(t.name, t.format) for t in d.tables] == [("celery_taskmeta", "parquet")]
    assert main(["detect", str(f)]) == 0
    assert capsys.readouterr().out.startswith("celery\t")


def test_python_api_opens_a_dump(built):
    import idemview

    db, dumps = built["idemview"]
    a = idemview.open(str(db), layout="idemview").findings(now=ANCHOR)
    b = idemview.open(str(dumps["jsonl"])).findings(now=ANCHOR)  # detected
    assert len(b) == len(a) > 0
    pairs = lambda f: sorted(zip(f["kind"], f["idempotency_key"].astype(str), strict=True))  # noqa: E731
    assert pairs(b) == pairs(a)


def test_the_manifest_records_each_file_sha256(built, tmp_path):
    import hashlib

    _, dumps = built["idemview"]
    folder = dumps["parquet"]
    out = tmp_path / "e.csv"
    assert main(["export", str(folder), "--now", NOW_ISO, "--out", str(out)]) == 0
    led = json.loads((tmp_path / "e.csv.manifest.json").read_text())["ledger"]
    assert led["dialect"] == "duckdb"
    want = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}
    assert {f["file"]: f["sha256"] for f in led["files"]} == want
    assert {f["table"] for f in led["files"]} == {"operations", "attempts", "idemview_demo_planted"}


# ------------------------------------------------------------------------------- never written


_HOSTILE = [
    "COPY operations TO '{f}'",
    "COPY operations TO '{f}' (FORMAT parquet, USE_TMP_FILE false)",
    "COPY (SELECT 1) TO '{other}'",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM '/etc/passwd'",
    "ATTACH '{other}.db' AS x",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "RESET enable_external_access",
    "CREATE TABLE t AS SELECT 1",
    "CREATE OR REPLACE VIEW operations AS SELECT 1",
    "PRAGMA enable_profiling",
    "CALL pragma_version()",
    "EXPORT DATABASE '{dir}'",
    "SELECT 1; COPY operations TO '{f}'",
]


def _attempts(engine, f: Path, other: Path) -> list[str]:
    """Every hostile statement through every handle idemview offers; the ones that ran."""
    ran = []
    for stmt in _HOSTILE:
        s = stmt.format(f=f, other=other, dir=other.parent / "exported")
        with engine.connect() as c:
            try:
                c.exec_driver_sql(s)
                ran.append(f"exec_driver_sql: {s}")
            except DBAPIError:
                pass
        raw = engine.raw_connection()
        try:
            try:
                raw.cursor().execute(s)
                ran.append(f"cursor: {s}")
            except duckdb.Error:
                pass
            try:
                raw.driver_connection.execute(s)
                ran.append(f"driver connection: {s}")
            except duckdb.Error:
                pass
        finally:
            raw.close()
    return ran


def test_a_dump_is_never_written_and_reads_nothing_else(built, tmp_path, capsys):
    _, dumps = built["idemview"]
    folder = dumps["parquet"]
    files = sorted(folder.iterdir())
    before = _fingerprint(files)
    # scan, export, report: the dump is read only
    _scan(str(folder), capsys)
    assert main(["export", str(folder), "--now", NOW_ISO, "--out", str(tmp_path / "e.csv")]) == 0
    assert main(["report", str(folder), "--now", NOW_ISO, "--out", str(tmp_path / "r.html")]) == 0
    # an export over one of the dump's files is refused (the dump is a source)
    assert main(["export", str(folder), "--out", str(files[0]), "--force"]) == 2
    engine = open_engine(str(folder))
    try:
        assert family(engine) == DUCKDB and session_is_read_only(engine)
        other = tmp_path / "stolen.csv"
        assert _attempts(engine, files[0], other) == []
        raw = engine.raw_connection()
        try:  # DuckDB's own Python methods are not reachable behind the guard
            for name in ("sql", "query", "register", "read_csv", "install_extension", "load_extension", "from_df"):
                assert not hasattr(raw.driver_connection, name), name
        finally:
            raw.close()
        assert not other.exists() and not (tmp_path / "exported").exists()
    finally:
        engine.dispose()
    import idemview

    frames = idemview.open(str(folder))
    assert _attempts(frames.ledger.engine, files[1], tmp_path / "stolen2.csv") == []
    assert _fingerprint(files) == before


def test_the_guard_allows_one_select_only():
    for ok in ("SELECT 1", "WITH a AS (SELECT 1) SELECT * FROM a", "FROM operations", "DESCRIBE operations"):
        check_statement(ok)
    for bad in ("COPY x TO 'y'", "SELECT 1; SELECT 2", "INSERT INTO x VALUES (1)", "SET a = 1", "", "SELEC 1"):
        with pytest.raises(StatementRefused):
            check_statement(bad)


@pytest.mark.parametrize(
    "table",
    ["read_csv('/etc/passwd')", "/etc/passwd", "{f}", "read_parquet('{f}')", "operations.parquet"],
)
def test_a_layout_names_tables_never_file_functions(built, tmp_path, table, capsys):
    """A layout's table is a table of the dump or nothing: DuckDB's table functions and file paths
    (its replacement scans) are not tables of the dump, so the layout does not fit (exit 4)."""
    _, dumps = built["celery"]
    folder = dumps["csv"]
    f = folder / "celery_taskmeta.csv"
    lay = (Path(__file__).parents[2] / "idemview/layouts/presets/celery.toml").read_text()
    lay = lay.replace('table = "celery_taskmeta"', f"table = {json.dumps(table.format(f=f))}", 1)
    assert json.dumps(table.format(f=f)) in lay
    path = tmp_path / "evil.toml"
    path.write_text(lay)
    before = _fingerprint([f])
    assert main(["scan", str(folder), "--layout", str(path)]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not in the database" in err
    assert "root:" not in err
    assert _fingerprint([f]) == before


# ----------------------------------------------------------------------------------- bad input


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_malformed_csv_is_one_line_exit_2(tmp_path, capsys):
    f = tmp_path / "celery_taskmeta.csv"
    f.write_text("id,task_id,status\n1,a,SUCCESS\n2,b,SUCCESS,extra\n")
    before = _fingerprint([f])
    assert main(["scan", str(f), "--layout", "celery"]) == 2
    err = _one_line(capsys)
    assert str(f) in err and "not a readable CSV file" in err
    assert _fingerprint([f]) == before


def test_malformed_parquet_is_one_line_exit_2(tmp_path, capsys):
    f = tmp_path / "celery_taskmeta.parquet"
    f.write_bytes(b"PAR1" + b"\x00" * 64 + b"not parquet")
    before = _fingerprint([f])
    assert main(["scan", str(f)]) == 2
    err = _one_line(capsys)
    assert str(f) in err and "not a readable Parquet file" in err
    assert _fingerprint([f]) == before


def test_malformed_jsonl_is_one_line_exit_2(tmp_path, capsys):
    f = tmp_path / "operations.jsonl"
    f.write_text('{"id": 1}\n{"id": \n')
    assert main(["detect", str(f)]) == 2
    assert "not a readable JSON Lines file" in _one_line(capsys)


def test_empty_folder_is_exit_2(tmp_path, capsys):
    (tmp_path / "README.txt").write_text("the dump")
    assert main(["scan", str(tmp_path)]) == 2
    assert "holds no .csv, .parquet or .jsonl file" in _one_line(capsys)


def test_mixed_folder_is_exit_2(built, tmp_path, capsys):
    _, dumps = built["idemview"]
    for fmt, name in (("csv", "operations"), ("parquet", "attempts")):
        (tmp_path / f"{name}.{fmt}").write_bytes((dumps[fmt] / f"{name}.{fmt}").read_bytes())
    before = _fingerprint(list(tmp_path.iterdir()))
    assert main(["scan", str(tmp_path)]) == 2
    assert "mixes CSV and Parquet files" in _one_line(capsys)
    assert _fingerprint(list(tmp_path.iterdir())) == before


def test_two_files_for_one_table_is_exit_2(tmp_path, capsys):
    (tmp_path / "ops.csv").write_text("a\n1\n")
    (tmp_path / "OPS.csv").write_text("a\n1\n")
    assert main(["scan", str(tmp_path)]) == 2
    assert "would both be the table" in _one_line(capsys)


def test_missing_file_is_exit_2(tmp_path, capsys):
    assert main(["scan", str(tmp_path / "nope.parquet"), "--layout", "celery"]) == 2
    assert "nope.parquet" in _one_line(capsys)
    with pytest.raises(DumpError, match="no dump file or folder at"):
        open_engine(str(tmp_path / "nope.parquet"))


def test_missing_table_is_exit_4(built, tmp_path, capsys):
    """The idemview preset reads attempts too: a dump of operations only does not fit it."""
    _, dumps = built["idemview"]
    src = dumps["parquet"] / "operations.parquet"
    (tmp_path / "operations.parquet").write_bytes(src.read_bytes())
    assert main(["scan", str(tmp_path), "--layout", "idemview"]) == 4
    assert "attempts" in _one_line(capsys)


def test_a_fifo_in_a_dump_folder_is_refused_without_blocking(tmp_path, capsys):
    os.mkfifo(tmp_path / "operations.csv")
    assert main(["scan", str(tmp_path)]) == 2
    assert "FIFO" in _one_line(capsys)


def test_what_is_a_dump_path(tmp_path):
    (tmp_path / "l.db").write_bytes(b"")
    assert is_dump_path(str(tmp_path)) and is_dump_path("x.parquet") and is_dump_path("a/b.CSV")
    assert not is_dump_path(str(tmp_path / "l.db")) and not is_dump_path("postgresql://h/x.csv")
    with pytest.raises(DumpError):
        list_dump(tmp_path / "l.db")


def test_a_duckdb_url_to_a_database_file_is_not_a_dump(tmp_path, capsys):
    """``duckdb:///x.duckdb`` would open a writable DuckDB database: only dumps are opened."""
    assert main(["scan", f"duckdb:///{tmp_path / 'x.duckdb'}"]) == 2
    assert "not a dump file" in _one_line(capsys)
    assert not (tmp_path / "x.duckdb").exists()
