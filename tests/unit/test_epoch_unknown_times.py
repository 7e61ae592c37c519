"""Issue 19, item 14: an epoch column (``epoch_s`` / ``epoch_ms``) holding a value that is not a time
(``NaN``, ``yesterday``, a negative number, zero, beyond year 9999) is an unknown time, as NULL: in the
findings computed in SQL (no ``expired_key`` or ``stuck_in_progress`` invented from it), in the evidence
and in Python (no 1970-01-01 or 0001-01-01), on SQLite, PostgreSQL and MariaDB, in numeric and in text
columns (and NaN / infinities in PostgreSQL's double precision), and the unknown times are counted.

The table is Powertools' idempotency record as a SQL table (the preset ``powertools-sql``:
``expiration`` in epoch seconds, ``in_progress_expiration`` in epoch milliseconds)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import BigInteger, Column, Double, MetaData, String, Table, Text, insert

from idemview.cli import main
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.ledger.times import epoch_instant
from tests.conftest import ANCHOR
from tests.scan_json import check_scan_json

NOW = ANCHOR
H = timedelta(hours=1)


def _s(t: datetime) -> int:
    return int(t.timestamp())


def _ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


# Per column type: values that are not times, for both columns (seconds and milliseconds alike).
BAD = {
    "bigint": [-5, 0, -(10**12), 10**18],
    "text": ["yesterday", "NaN", "-5", "1e30", "", "   ", "12abc", "1.2.3", "0", "Infinity", "99999999999999999"],
    "double": [-5.0, 0.0, 1e30, -1e30],
}
PG_ONLY = {"double": [float("nan"), float("inf"), float("-inf")]}
COLTYPE = {"bigint": BigInteger, "text": Text, "double": Double}


def _engine_name(url: str) -> str:
    return "postgresql" if url.startswith("postgresql") else "mysql" if url.startswith("mysql") else "sqlite"


def _plant(w, kind: str, engine: str) -> list[str]:
    """The good records (one expired, one live, one stuck) and one record per bad value; returns the
    keys of the bad ones."""
    md = MetaData()
    t = Table(
        "idempotency",
        md,
        Column("id", String(255), primary_key=True),
        Column("expiration", COLTYPE[kind]),
        Column("in_progress_expiration", COLTYPE[kind]),
        Column("status", String(20), nullable=False),
        Column("data", Text),
        Column("validation", String(64)),
    )
    md.create_all(w)
    conv = str if kind == "text" else (float if kind == "double" else int)
    rows = [
        {"id": "fn#expired", "status": "COMPLETED", "expiration": conv(_s(NOW - H)), "in_progress_expiration": None},
        {"id": "fn#live", "status": "COMPLETED", "expiration": conv(_s(NOW + H)), "in_progress_expiration": None},
        {
            "id": "fn#stuck",
            "status": "INPROGRESS",
            "expiration": conv(_s(NOW + H)),
            "in_progress_expiration": conv(_ms(NOW - 10 * timedelta(minutes=1))),
        },
    ]
    bad = BAD[kind] + (PG_ONLY.get(kind, []) if engine == "postgresql" else [])
    keys = []
    for i, v in enumerate(bad):
        # in progress, so that a lease time made up from the value would make it "stuck"
        rows.append({"id": f"fn#bad{i}", "status": "INPROGRESS", "expiration": v, "in_progress_expiration": v})
        keys.append(f"fn#bad{i}")
    with w.begin() as c:
        c.execute(insert(t), rows)
    return keys


@pytest.mark.parametrize("kind", ["bigint", "text", "double"])
def test_epoch_values_that_are_not_times_are_unknown(db, kind, capsys):
    writable, url = db
    engine = _engine_name(url if "://" in url else "sqlite")
    bad_keys = _plant(writable, kind, engine)
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("powertools-sql"))
        found = {(f.kind.value, f.key) for f in FindingEngine(led, NOW).run()}
        assert found == {("expired_key", "fn#expired"), ("stuck_in_progress", "fn#stuck")}
        ops = {o.key: o for o in led.page(limit=100).rows}
        assert ops["fn#expired"].expires_at == NOW - H
        assert ops["fn#stuck"].lock_expires_at == NOW - timedelta(minutes=10)
        for k in bad_keys:
            assert (ops[k].expires_at, ops[k].lock_expires_at) == (None, None), (k, ops[k])
        # sorted by the column in SQL: every row still comes, the bad ones among the unknown
        assert len(led.page(limit=100, sort="expires_at").rows) == 3 + len(bad_keys)
        # ten years later every real time has passed; still nothing made up from the bad values
        later = {(f.kind.value, f.key) for f in FindingEngine(led, NOW + timedelta(days=3650)).run()}
        assert {k for _kind, k in later} == {"fn#expired", "fn#live", "fn#stuck"}
    finally:
        eng.dispose()
    assert main(["scan", url, "--layout", "powertools-sql", "--now", "2026-11-30T12:00:00Z", "--format", "json"]) == 0
    doc = check_scan_json(capsys.readouterr().out)
    # both columns of every bad record are counted: the values were there, they are no times
    n_bad = len(bad_keys) - sum(1 for v in BAD[kind] if isinstance(v, str) and not v.strip())
    assert doc["unknown_times"] == {"expires_at": n_bad, "lock_expires_at": n_bad}
    assert {(f["kind"], f["key"]) for f in doc["findings"]} == {
        ("expired_key", "fn#expired"),
        ("stuck_in_progress", "fn#stuck"),
    }
    assert "1970" not in json.dumps(doc) and "0001-" not in json.dumps(doc)


def test_epoch_instant_in_python():
    t = datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert epoch_instant(int(t.timestamp()), "epoch_s") == t
    assert epoch_instant(f" {int(t.timestamp() * 1000)} ", "epoch_ms") == t
    assert epoch_instant(t.timestamp() + 0.5, "epoch_s") == t + timedelta(milliseconds=500)
    for v in ["yesterday", "NaN", "nan", "inf", "-5", "1e9", "", "0x10", True, float("nan"), float("inf"), -5, 0]:
        assert epoch_instant(v, "epoch_s") is None, v
    assert epoch_instant(253402300799, "epoch_s") == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert epoch_instant(253402300800, "epoch_s") is None
    assert epoch_instant(253402300800 * 1000, "epoch_ms") is None
