"""Issue 27 item 4: ``duplicate_intent`` and ``unresolved_failure`` share one packed pass on
PostgreSQL 14+ (:mod:`idemview.findings.intent_pass`): each record's intent hash, packed per status,
grouped in numpy; the exact SQL then runs on the candidates only. The scan JSON must be the one the
rules' own groupings write, byte for byte, on the planted ledger of test_intent_parts and on a variant
(many groups, a scope-less failure resolved by a later success, hash collisions forced)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, event, func, literal_column, text
from sqlalchemy.engine import Engine

from idemview.cli import main
from idemview.findings import intent_pass
from tests.conftest import ANCHOR
from tests.ledgers import load
from tests.presets.test_planted_stripe_powertools_celery import celery_md
from tests.unit.test_intent_parts import WANT, M, _r, _rows

NOW = ANCHOR


def _load(pg_url, rows):
    w = create_engine(pg_url)
    try:
        load(w, celery_md(), {"celery_taskmeta": rows})
        with w.begin() as c:  # the pass needs the table's size estimate (pg_class.reltuples)
            c.execute(text("ANALYZE celery_taskmeta"))
    finally:
        w.dispose()


def _scan(pg_url, capsys) -> tuple[str, list[str]]:
    stmts: list[str] = []

    def seen(conn, cursor, statement, *a):
        stmts.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    capsys.readouterr()
    try:
        args = ["scan", pg_url, "--layout", "celery", "--now", NOW.isoformat(), "--format", "json"]
        assert main(args + ["--audit-rows", "0"]) == 0
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    return capsys.readouterr().out, stmts


def _kinds(out: str) -> set:
    kinds = ("duplicate_intent", "unresolved_failure")
    return {(f["kind"], f["key"]) for f in json.loads(out)["findings"] if f["kind"] in kinds}


def _both(pg_url, capsys, monkeypatch) -> tuple[str, str]:
    packed, stmts = _scan(pg_url, capsys)
    assert any("string_agg" in s for s in stmts)  # the packed pass ran
    monkeypatch.setattr(intent_pass, "MAX_ROWS", -1)  # the rules' own groupings
    grouped, stmts = _scan(pg_url, capsys)
    assert not any("string_agg" in s for s in stmts)
    return packed, grouped


def test_packed_pass_writes_the_same_scan_json(pg_url, capsys, monkeypatch):
    _load(pg_url, _rows())
    packed, grouped = _both(pg_url, capsys, monkeypatch)
    assert _kinds(packed) == WANT
    assert packed == grouped


def _variant():
    rows = []
    for g in range(30):  # 30 calls sent twice, and 30 sent once
        for j in range(2 if g % 2 == 0 else 1):
            rows.append(_r(len(rows) + 1, f"g{g}-{j}", "billing.charge", b'["c%d"]' % g, b"{}", ago=(10 - j) * M))
    # failures: one resolved by a success of its call, one whose call only failed, one twice failed
    rows.append(_r(len(rows) + 1, "f-resolved", "billing.charge", b'["c0"]', b"{}", status="FAILURE"))
    rows.append(_r(len(rows) + 1, "f-open", "billing.charge", b'["zz"]', b"{}", status="FAILURE"))
    rows.append(_r(len(rows) + 1, "f-twice-1", "mail.send", b'["t"]', b"{}", status="FAILURE"))
    rows.append(_r(len(rows) + 1, "f-twice-2", "mail.send", b'["t"]', b"{}", status="REVOKED"))
    return rows


WANT_VARIANT = {("duplicate_intent", f"g{g}-1") for g in range(0, 30, 2)} | {
    ("unresolved_failure", "f-open"),
    ("unresolved_failure", "f-twice-1"),
    ("unresolved_failure", "f-twice-2"),
}


@pytest.mark.parametrize("collide", [False, True])
def test_packed_pass_variant_and_collisions(pg_url, capsys, monkeypatch, collide):
    """A hash collision only adds candidates the exact SQL rejects: with every hash folded into two
    values (every record a candidate), the findings are the same."""
    if collide:
        real = intent_pass.scoped_hash
        monkeypatch.setattr(intent_pass, "scoped_hash", lambda ik, sub: func.mod(real(ik, sub), literal_column("2")))
    _load(pg_url, _variant())
    packed, grouped = _both(pg_url, capsys, monkeypatch)
    assert _kinds(packed) == WANT_VARIANT
    assert packed == grouped


def test_no_candidates_reads_no_group(pg_url, capsys, monkeypatch):
    """Every call distinct and no failure resolvable: neither kind runs its grouping."""
    rows = [_r(i + 1, f"k{i}", "billing.charge", b'["c%d"]' % i, b"{}", ago=(i + 1) * M) for i in range(20)]
    rows.append(_r(30, "f-open", "billing.charge", b'["zz"]', b"{}", status="FAILURE"))
    _load(pg_url, rows)
    out, stmts = _scan(pg_url, capsys)
    assert _kinds(out) == {("unresolved_failure", "f-open")}
    assert not any("GROUP BY" in s and "ik0" in s for s in stmts)
    # the failures ride along the one shared pass (stuck, unresolved, retry flags f0..f2) instead of
    # a scan of their own
    shared = [s for s in stmts if " AS f0" in s]
    assert len(shared) == 1 and " AS f2" in shared[0]


@pytest.mark.parametrize("rows", ["planted", "variant"])
def test_sqlite_shared_grouping_writes_the_same_scan_json(sqlite_db, capsys, monkeypatch, rows):
    """SQLite has no hash function: one GROUP BY over the completed and failed records names the
    candidate groups of both kinds. Above MAX_GROUPS (here 0) each kind groups by itself, as before:
    the same scan JSON either way."""
    writable, path = sqlite_db
    load(writable, celery_md(), {"celery_taskmeta": _rows() if rows == "planted" else _variant()})
    shared, stmts = _scan(path, capsys)
    named = [s for s in stmts if "AS nc" in s and "GROUP BY" in s]
    assert len(named) == 1  # the shared grouping ran
    assert _kinds(shared) == (WANT if rows == "planted" else WANT_VARIANT)
    monkeypatch.setattr(intent_pass, "MAX_GROUPS", 0)
    own, _stmts = _scan(path, capsys)
    assert shared == own
