"""Layout capabilities the job-queue presets need, on SQLite, PostgreSQL and MariaDB: an ``any``
predicate group (OR) and a binary reference shown as hex."""

from datetime import timedelta

import pytest
from sqlalchemy import Column, DateTime, Integer, LargeBinary, MetaData, String, Table

from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import LayoutError, parse_layout
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load

LAYOUT = """
[layout]
name = "t"
[operations]
table = "jobs"
key = ["id"]
[operations.status]
column = "state"
map = { done = "completed" }
[operations.times]
created_at = "created"
[operations.fields]
intent_ref = { column = "digest", encoding = "hex" }
[attempts]
source = "table"
table = "history"
join = { job_id = "id" }
where = [{ any = [{ column = "name", in = ["Succeeded", "Failed"] }, { column = "reason", like = "Retry attempt%" }] }]
outcome = { column = "name", map = { Succeeded = "succeeded" }, default = "failed" }
[tunables]
retry_threshold = 2
"""


def _md():
    md = MetaData()
    Table(
        "jobs",
        md,
        Column("id", Integer, primary_key=True),
        Column("state", String(20)),
        Column("created", DateTime),
        Column("digest", LargeBinary),
    )
    Table(
        "history",
        md,
        Column("id", Integer, primary_key=True),
        Column("job_id", Integer),
        Column("name", String(20)),
        Column("reason", String(100)),
    )
    return md


def test_any_group_and_hex_reference(db):
    writable, url = db
    t = ANCHOR.replace(tzinfo=None)
    jobs = [
        {"id": 1, "state": "done", "created": t - timedelta(minutes=5), "digest": b"\x0a\xff"},
        {"id": 2, "state": "done", "created": t - timedelta(minutes=4), "digest": b"\x0a\xff"},
    ]
    hist = [
        {"id": 1, "job_id": 1, "name": "Enqueued", "reason": None},
        {"id": 2, "job_id": 1, "name": "Scheduled", "reason": "Retry attempt 1 of 10: boom"},
        {"id": 3, "job_id": 1, "name": "Scheduled", "reason": "Retry attempt 2 of 10: boom"},
        {"id": 4, "job_id": 1, "name": "Succeeded", "reason": None},
        {"id": 5, "job_id": 2, "name": "Scheduled", "reason": None},
        {"id": 6, "job_id": 2, "name": "Succeeded", "reason": None},
    ]
    load(writable, _md(), {"jobs": jobs, "history": hist})
    eng = open_engine(url)
    led = Ledger(eng, parse_layout(LAYOUT))
    assert led.counts() == (2, 4)  # 3 rows of job 1 and 1 of job 2 are attempts
    assert [a.outcome.value for a in led.attempts("", "1")] == ["failed", "failed", "succeeded"]
    assert led.records("", "1")[0].intent_ref == "0aff"
    got = {(f.kind.value, f.key) for f in FindingEngine(led, ANCHOR).run()}
    assert got == {("retry_storm", "1"), ("duplicate_intent", "2")}
    eng.dispose()


def test_any_and_hex_are_validated():
    with pytest.raises(LayoutError, match="any takes"):
        parse_layout(
            LAYOUT.replace(
                '{ any = [{ column = "name", in = ["Succeeded", "Failed"] }, '
                '{ column = "reason", like = "Retry attempt%" }] }',
                "{ any = [] }",
            )
        )
    with pytest.raises(LayoutError, match="only encoding"):
        parse_layout(LAYOUT.replace('encoding = "hex"', 'encoding = "base64"'))
