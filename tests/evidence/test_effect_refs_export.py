"""The operations export keeps every effect reference an operation's attempts carry (issue #20, item
11b): a double charge (attempt 1 charged ``ch_1``, attempt 2 charged ``ch_2``, the record keeps only
``ch_2``) shows both in ``attempt_effect_refs``, read a batch of operations at a time (one grouped
query per batch, never one per row), on every engine under every dialect name."""

from __future__ import annotations

import csv
import json
from datetime import datetime, timedelta

from sqlalchemy import MetaData, event

from idemview.evidence.plan import ATTEMPT_EFFECT_REFS_NOTE, export_evidence
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.ledger.reference import add_reference_tables
from idemview.masking.masker import Masker
from tests.conftest import ANCHOR
from tests.ledgers import load

T0 = datetime(2026, 11, 30, 9, 0, 0)  # naive UTC, as the reference tables store it


def _op(i: int, scope: str, key: str, effect: str | None) -> dict:
    return {
        "id": i,
        "scope": scope,
        "idempotency_key": key,
        "kind": "payment.capture",
        "status": "completed",
        "effect_ref": effect,
        "attempt_count": 2,
        "created_at": T0 + timedelta(minutes=i),
        "updated_at": T0 + timedelta(minutes=i, seconds=30),
        "completed_at": T0 + timedelta(minutes=i, seconds=30),
    }


def _att(i: int, scope: str, key: str, n: int, outcome: str, effect: str | None) -> dict:
    at = T0 + timedelta(minutes=i // 10, seconds=n * 5)
    return {
        "id": i,
        "scope": scope,
        "idempotency_key": key,
        "attempt_no": n,
        "started_at": at,
        "finished_at": at + timedelta(seconds=2),
        "outcome": outcome,
        "effect_ref": effect,
    }


def _fixture(writable, filler: int = 30) -> None:
    md = MetaData()
    add_reference_tables(md)
    ops = [
        _op(1, "acme", "double", "ch_2"),  # the record kept the second charge only
        _op(2, "acme", "single", "ch_9"),
        _op(3, "acme", "none", None),
        _op(4, "globex", "double", "ch_7"),  # same key, another scope: its own attempts only
        _op(5, "acme", "case", "CH_5"),  # two charges differing in case only (MariaDB's collation merges them)
    ]
    atts = [
        # listed out of order: the export orders by attempt number, not by insertion
        _att(10, "acme", "double", 2, "succeeded", "ch_2"),
        _att(11, "acme", "double", 1, "succeeded", "ch_1"),
        _att(12, "acme", "double", 3, "succeeded", "ch_2"),  # a repeat of ch_2 is listed once
        _att(20, "acme", "single", 1, "failed", None),
        _att(21, "acme", "single", 2, "succeeded", "ch_9"),
        _att(30, "acme", "none", 1, "failed", None),
        _att(31, "acme", "none", 2, "failed", ""),
        _att(40, "globex", "double", 1, "succeeded", "ch_7"),
        _att(50, "acme", "case", 1, "succeeded", "ch_5"),
        _att(51, "acme", "case", 2, "succeeded", "CH_5"),
    ]
    for j in range(filler):  # operations enough that a query per row would show
        ops.append(_op(100 + j, "acme", f"fill-{j:03d}", f"ch_f{j}"))
        atts.append(_att(1000 + j, "acme", f"fill-{j:03d}", 1, "succeeded", f"ch_f{j}"))
    load(writable, md, {"operations": ops, "attempts": atts})


def _export(url: str, tmp_path) -> tuple[dict, dict, int]:
    eng = open_engine(url)
    inside = [False]
    calls: list[int] = []  # statements run by each Ledger.attempt_effect_refs call

    @event.listens_for(eng, "before_cursor_execute")
    def _count(conn, cursor, statement, params, context, executemany):  # noqa: ARG001
        if inside[0]:
            calls[-1] += 1

    try:
        led = Ledger(eng, load_preset("idemview"), name="t")
        read = led.attempt_effect_refs

        def spy(keys):
            calls.append(0)
            inside[0] = True
            try:
                return read(keys)
            finally:
                inside[0] = False

        led.attempt_effect_refs = spy  # type: ignore[method-assign]
        res = export_evidence(led, None, tmp_path / "ops.csv", now=ANCHOR, masker=Masker(key=bytes(32)))
    finally:
        eng.dispose()
    with open(res.path, newline="", encoding="utf-8") as f:
        rows = {(r["scope"], r["idempotency_key"]): r for r in csv.DictReader(f)}
    manifest = json.loads(open(res.manifest_path, encoding="utf-8").read())
    assert all(n == 1 for n in calls), calls  # one grouped query per batch of keys
    return rows, manifest, len(calls)


def _refs(cell: str):
    return json.loads(cell) if cell else None


def test_operations_export_lists_every_effect_ref_of_the_attempts(dialect_db, tmp_path):
    writable, url = dialect_db
    _fixture(writable)
    rows, manifest, queries = _export(url, tmp_path)

    dbl = rows[("acme", "double")]
    assert dbl["effect_ref"] == "ch_2"
    assert _refs(dbl["attempt_effect_refs"]) == ["ch_1", "ch_2"]  # both charges, first charged first
    assert _refs(rows[("acme", "single")]["attempt_effect_refs"]) == ["ch_9"]
    assert _refs(rows[("acme", "none")]["attempt_effect_refs"]) is None  # NULL and '' are no reference
    assert _refs(rows[("globex", "double")]["attempt_effect_refs"]) == ["ch_7"]
    assert _refs(rows[("acme", "case")]["attempt_effect_refs"]) == ["ch_5", "CH_5"]  # compared exactly
    assert _refs(rows[("acme", "fill-017")]["attempt_effect_refs"]) == ["ch_f17"]

    # bounded batches: a handful of grouped queries for 35 operations, not one per row
    assert len(rows) == 35
    assert 1 <= queries <= 3, queries

    cols = {c["name"]: c for c in manifest["columns"]}
    assert cols["attempt_effect_refs"] == {
        "name": "attempt_effect_refs",
        "kind": "json",
        "description": ATTEMPT_EFFECT_REFS_NOTE,
    }
    assert "double charge" in cols["attempt_effect_refs"]["description"]
    assert list(cols).index("attempt_effect_refs") == list(cols).index("effect_ref") + 1


def test_effect_refs_are_read_per_batch_of_keys(sqlite_db, tmp_path, monkeypatch):
    """A variant: with a batch of 4 keys the 35 operations take about 35/4 grouped queries, each
    answering only its own keys (the results do not change)."""
    import idemview.evidence.plan as plan

    writable, url = sqlite_db
    _fixture(writable)
    monkeypatch.setattr(plan, "EFFECT_REFS_BATCH", 4)
    rows, _manifest, queries = _export(url, tmp_path)
    assert _refs(rows[("acme", "double")]["attempt_effect_refs"]) == ["ch_1", "ch_2"]
    assert _refs(rows[("globex", "double")]["attempt_effect_refs"]) == ["ch_7"]
    assert all(_refs(rows[("acme", f"fill-{j:03d}")]["attempt_effect_refs"]) == [f"ch_f{j}"] for j in range(30))
    assert 9 <= queries <= 11, queries
