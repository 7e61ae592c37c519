"""Layout capabilities the workflow and webhook presets need, on SQLite, PostgreSQL and MariaDB:
case-insensitive column names, ``key_fallback``, the ``in_table`` predicate and ``attempt_count``
read through a JSON path."""

from datetime import timedelta

import pytest
from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, Text, text

from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import LayoutError, parse_layout
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load

NOW = ANCHOR


def _run(url, toml):
    eng = open_engine(url)
    try:
        led = Ledger(eng, parse_layout(toml))
        fs = FindingEngine(led, NOW).run()
        return led, {(f.kind.value, f.scope, f.key) for f in fs}
    finally:
        eng.dispose()


def test_columns_match_case_insensitively(db):
    writable, url = db
    with writable.begin() as c:
        c.execute(text("DROP TABLE IF EXISTS msgs"))
        # unquoted DDL: PostgreSQL folds these names to lower case, SQLite and MariaDB keep them
        c.execute(text("CREATE TABLE msgs (procName VARCHAR(50), msgId VARCHAR(50), doneAt TIMESTAMP NULL)"))
        c.execute(
            text(
                "INSERT INTO msgs (procName, msgId, doneAt) VALUES "
                "('p', 'm1', '2026-11-30 10:00:00'), ('p', 'm1', '2026-11-30 10:00:01'), "
                "('p', 'm2', '2026-11-30 10:00:00')"
            )
        )
    led, got = _run(
        url,
        """
[layout]
name = "t"
[operations]
table = "MSGS"
key = ["msgId"]
scope = ["procName"]
status = "completed"
[operations.times]
created_at = { column = "doneAt", encoding = "naive" }
""",
    )
    assert got == {("duplicate_effect", "p", "m1")}


def _jobs_md():
    md = MetaData()
    Table(
        "jobs",
        md,
        Column("id", Integer, primary_key=True),
        Column("dedup", String(50)),
        Column("finished_at", DateTime),
        Column("arguments", Text),
    )
    Table("failed", md, Column("id", Integer, primary_key=True), Column("job_id", Integer))
    return md


JOBS = """
[layout]
name = "t"
[operations]
table = "jobs"
row_id = "id"
key = ["dedup"]
key_fallback = "id"
[operations.status]
rules = [
  { when = [{ column = "id", in_table = { table = "failed", column = "job_id" } }], status = "failed" },
  { when = [{ column = "finished_at", is_null = false }], status = "completed" },
]
default = "new"
[operations.fields]
attempt_count = { column = "arguments", json_path = "$.executions" }
"""


def test_key_fallback_in_table_and_json_counter(db):
    writable, url = db
    t = naive = NOW.replace(tzinfo=None) - timedelta(hours=1)
    rows = [
        {"id": 1, "dedup": None, "finished_at": t, "arguments": '{"executions": 0}'},
        {"id": 2, "dedup": None, "finished_at": t, "arguments": '{"executions": 0}'},  # no key: not a dup
        {"id": 3, "dedup": "k", "finished_at": t, "arguments": '{"executions": 1}'},
        {"id": 4, "dedup": "k", "finished_at": naive, "arguments": '{"executions": 0}'},
        {"id": 5, "dedup": None, "finished_at": None, "arguments": '{"executions": 7}'},
    ]
    load(writable, _jobs_md(), {"jobs": rows, "failed": [{"id": 1, "job_id": 5}]})
    led, got = _run(url, JOBS)
    assert got == {("duplicate_effect", "", "k"), ("unresolved_failure", "", "#5"), ("retry_storm", "", "#5")}
    eng = open_engine(url)
    led = Ledger(eng, parse_layout(JOBS))
    ops = {o.key: o for o in led.iter_operations()}
    eng.dispose()
    assert set(ops) == {"#1", "#2", "k", "#5"}
    assert ops["#5"].status.value == "failed" and ops["#5"].attempt_count == 7
    assert ops["#1"].status.value == "completed"


def test_in_table_names_a_missing_table(sqlite_db):
    writable, url = sqlite_db
    md = _jobs_md()
    md.remove(md.tables["failed"])
    load(writable, md, {})
    eng = open_engine(url)
    with pytest.raises(LayoutError) as e:
        Ledger(eng, parse_layout(JOBS))
    eng.dispose()
    assert e.value.missing == ["table failed"]


@pytest.mark.parametrize(
    "bad,msg",
    [
        ('{ column = "id", in_table = "failed" }', "in_table takes"),
        ('{ column = "id", in_table = { table = "failed" } }', "in_table takes"),
    ],
)
def test_in_table_form_is_checked(bad, msg):
    with pytest.raises(LayoutError, match=msg):
        parse_layout(JOBS.replace('{ column = "id", in_table = { table = "failed", column = "job_id" } }', bad))


def test_key_fallback_with_a_composite_key_and_key_required():
    # a composite key falls back when all its columns are NULL, or one of key_required is (pg-boss slots)
    lay = parse_layout(JOBS.replace('key = ["dedup"]', 'key = ["dedup", "id"]\nkey_required = ["id"]'))
    assert lay.key_fallback == "id" and lay.key_required == ["id"]
    with pytest.raises(LayoutError, match="key_fallback"):
        parse_layout(JOBS.replace('key_fallback = "id"', 'key_required = ["dedup"]'))
