"""Issue 27 item 4: a scan does only necessary work. ``unresolved_failure`` over an intent no index serves
(Celery's name + args + kwargs) is one grouped pass, not a whole-table NOT EXISTS per failed record, and
finds exactly what the anti-join finds; counts and unmapped values come from one grouped pass."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Column, DateTime, Integer, LargeBinary, MetaData, String, Table, Text, event

from idemview.domain.model import FindingKind as K
from idemview.findings import rules
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load

NOW = ANCHOR
H = timedelta(hours=1)


def celery_md() -> MetaData:
    """celery_taskmeta with ``result_extended`` columns (Celery's backends/database/models.py TaskExtended)."""
    md = MetaData()
    Table(
        "celery_taskmeta",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("task_id", String(155), unique=True),
        Column("status", String(50)),
        Column("result", LargeBinary),
        Column("date_done", DateTime),
        Column("traceback", Text),
        Column("name", String(155)),
        Column("args", LargeBinary),
        Column("kwargs", LargeBinary),
        Column("worker", String(155)),
        Column("retries", Integer),
        Column("queue", String(155)),
    )
    return md


def _rows():
    def r(i, tid, status, done, name="billing.charge", args=b"[1]", kwargs=b"{}"):
        return {
            "id": i,
            "task_id": tid,
            "status": status,
            "date_done": None if done is None else (NOW - done).replace(tzinfo=None),
            "name": name,
            "args": args,
            "kwargs": kwargs,
            "retries": 0,
        }

    return [
        r(1, "f-resolved", "FAILURE", 5 * H, args=b"[1]"),  # a success of the same call resolves it
        r(2, "s-later", "SUCCESS", 4 * H, args=b"[1]"),
        r(3, "f-after-success", "FAILURE", 3 * H, args=b"[2]"),  # no creation time: resolved too
        r(4, "s-earlier", "SUCCESS", 6 * H, args=b"[2]"),
        r(5, "f-other-args", "FAILURE", 2 * H, args=b"[3]"),  # success of other arguments: open
        r(6, "s-other", "SUCCESS", 1 * H, args=b"[4]"),
        r(7, "f-no-args", "FAILURE", 2 * H, args=b"[]", kwargs=b"{}"),  # no intent: open
        r(8, "s-no-args", "SUCCESS", 1 * H, args=b"[]", kwargs=b"{}"),
        r(9, "f-unknown-time", "FAILURE", None, args=b"[5]"),  # a time unknown: resolved (as the anti-join)
        r(10, "s-5", "SUCCESS", 1 * H, args=b"[5]"),
        r(11, "f-other-name", "REVOKED", 2 * H, name="mail.send", args=b"[1]"),  # same args, other task
        r(12, "f-twice-a", "FAILURE", 3 * H, args=b"[6]"),  # two failures, one success between them
        r(13, "s-6", "SUCCESS", 2 * H, args=b"[6]"),
        r(14, "f-twice-b", "FAILURE", 1 * H, args=b"[6]"),
    ]


# Celery keeps no creation time (only date_done): any success of the same call resolves a failure.
WANT = {"f-other-args", "f-no-args", "f-other-name"}


def _unresolved(url, monkeypatch=None, indexed=None):
    if monkeypatch is not None:
        monkeypatch.setattr(rules, "_intent_indexed", lambda l: indexed)
    eng = open_engine(url)
    try:
        stmts: list[str] = []
        event.listen(eng, "before_cursor_execute", lambda c, cur, s, *a: stmts.append(s))
        led = Ledger(eng, load_preset("celery"))
        assert "intent_ref" in led.layout.fields
        fs = FindingEngine(led, NOW).run([K.UNRESOLVED_FAILURE])
        return {f.key for f in fs}, stmts
    finally:
        eng.dispose()


def test_unindexed_intent_is_one_grouped_pass_with_the_anti_joins_answer(db, monkeypatch):
    writable, url = db
    load(writable, celery_md(), {"celery_taskmeta": _rows()})
    got, stmts = _unresolved(url)
    assert got == WANT
    sql = " ".join(stmts).upper()
    # no correlated probe per failed record (PostgreSQL too: its hash anti-join hashed every completed
    # record, slower than the grouped pass since the intent is compared by its columns, issue 27)
    assert "GROUP BY" in sql and "EXISTS" not in sql, stmts
    # the anti-join form (kept for an indexed intent column) finds the same failures
    same, stmts2 = _unresolved(url, monkeypatch, indexed=True)
    assert same == WANT
    assert "EXISTS" in " ".join(stmts2).upper()


@pytest.mark.parametrize("seed", [3, 11])
def test_demo_ledger_same_failures_either_way(tmp_path, monkeypatch, seed):
    """A variant with creation times (the idemview reference layout: a success *at or after* the
    failure resolves it): the grouped pass, forced on its plain intent column, answers as the probe."""
    from idemview.services.demo import write_demo

    p = tmp_path / "demo.db"
    write_demo(p, operations=600, seed=seed, anchor=NOW)

    def run(indexed):
        monkeypatch.setattr(rules, "_intent_indexed", lambda l: indexed)
        eng = open_engine(str(p))
        try:
            led = Ledger(eng, load_preset("idemview"))
            return {(f.scope, f.key) for f in FindingEngine(led, NOW).run([K.UNRESOLVED_FAILURE])}
        finally:
            eng.dispose()

    grouped, probed = run(False), run(True)
    assert grouped == probed and len(grouped) >= 3


@pytest.mark.parametrize("indexed", [True, False])
def test_plain_intent_column_uses_its_index(indexed):
    """The idemview preset's ``intent_ref`` is a plain column: indexed, the probe per failure stays."""

    class L:
        pass

    from sqlalchemy import Index

    md = MetaData()
    t = Table("operations", md, Column("id", Integer, primary_key=True), Column("intent_ref", String(40)))
    if indexed:
        Index("ix_intent", t.c.intent_ref)
    led = L()
    led.layout = load_preset("idemview")
    led.ops = t
    assert rules._intent_indexed(led) is indexed


def _basics_both_ways(url, layout="celery"):
    from idemview.ledger.queries import ledger_basics
    from idemview.ledger.unknown_times import unknown_time_counts

    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset(layout))
        stmts: list[str] = []
        event.listen(eng, "before_cursor_execute", lambda c, cur, s, *a: stmts.append(s))
        b = ledger_basics(led)
        one_pass = list(stmts)
        n_ops, n_att = led.counts()
        return b, (n_ops, n_att, led.unmapped_counts(), unknown_time_counts(led)), one_pass
    finally:
        eng.dispose()


def test_basics_in_one_pass_per_table(db):
    """Counts, unmapped raw values and unknown times: the one-pass answer equals the three questions,
    with unmapped statuses (then only the unmapped records are grouped) and without."""
    writable, url = db
    rows = _rows()
    load(writable, celery_md(), {"celery_taskmeta": rows})
    b, sep, stmts = _basics_both_ways(url)
    assert (b.operations, b.attempts, b.unmapped, b.unknown_times) == sep
    assert b.operations == len(rows) and b.attempts == len(rows)  # Celery counts retries + 1 per task
    assert len(stmts) == 1, stmts  # one table, nothing unmapped: one statement
    # a variant with raw statuses Celery's map does not know: grouped, counted, still equal
    odd = [
        dict(r, id=100 + i, task_id=f"odd-{i}", status=st)
        for i, (r, st) in enumerate(zip(rows[:3], ["WEIRD", "WEIRD", "paused"], strict=True))
    ]
    load(writable, celery_md(), {"celery_taskmeta": rows + odd})
    b, sep, stmts = _basics_both_ways(url)
    assert (b.operations, b.attempts, b.unmapped, b.unknown_times) == sep
    assert b.unmapped["status"] == {"WEIRD": 2, "paused": 1}
    assert len(stmts) == 2 and "GROUP BY" in stmts[1].upper(), stmts


def test_basics_on_the_demo_ledger(tmp_path):
    """The reference layout: operations and an attempts table (counted by rows), time columns of both."""
    from idemview.services.demo import write_demo

    p = tmp_path / "demo.db"
    write_demo(p, operations=300, seed=5, anchor=NOW)
    b, sep, stmts = _basics_both_ways(str(p), "idemview")
    assert (b.operations, b.attempts, b.unmapped, b.unknown_times) == sep
    assert b.operations >= 300 and b.attempts > b.operations
    assert len([s for s in stmts if "GROUP BY" not in s.upper()]) == 2, stmts  # one pass per table
