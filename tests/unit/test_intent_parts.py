"""Issue 27 item 4: ``duplicate_intent`` and ``unresolved_failure`` compare a computed intent
(``intent_ref = {hash = [...]}``: Celery's name + args + kwargs) by its columns, not by their
concatenation (SQLite) or its md5 (PostgreSQL, MySQL/MariaDB), which no index serves and every row
had to build. The scan JSON is the same as comparing by the reference on every engine (DESIGN §5: one
intent is one call, and a NULL column counts as ''). Before the reference became one md5 everywhere
(issue 27 item 2) it was wrong in two ways the parts never were:

- two different calls whose columns concatenate alike (a value holding the separator 0x1F) shared a
  reference on SQLite and MySQL/MariaDB (binary columns now enter as hex, which never holds 0x1F);
- on PostgreSQL ``concat_ws`` skipped a NULL column, so ``(n, 'q', NULL)`` and ``(n, NULL, 'q')`` shared
  an md5, and ``(n, NULL, k)`` differed from ``(n, '', k)`` (a NULL column is now '' there too).

By the columns, the findings are the same on every engine (asserted below)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from idemview.cli import main
from idemview.findings import rules
from tests.conftest import ANCHOR
from tests.ledgers import load
from tests.presets.test_planted_stripe_powertools_celery import cel_row, celery_md

NOW = ANCHOR
M = timedelta(minutes=1)
US = "\x1f"


def _r(i, tid, name, args, kwargs, status="SUCCESS", ago=10 * M):
    r = cel_row(i, tid, status, NOW - ago)
    r.update(name=name, args=args, kwargs=kwargs)
    return r


def _rows():
    return [
        # one call sent twice (planted), and a third time: each later key is reported
        _r(1, "dup-1", "billing.charge", b'["c1"]', b'{"n": 1}', ago=30 * M),
        _r(2, "dup-2", "billing.charge", b'["c1"]', b'{"n": 1}', ago=20 * M),
        _r(3, "dup-3", "billing.charge", b'["c1"]', b'{"n": 1}', ago=15 * M),
        _r(4, "dup-started", "billing.charge", b'["c1"]', b'{"n": 1}', status="STARTED", ago=14 * M),
        # NULL args and empty args are one call (a NULL column counts as '')
        _r(5, "null-args", "mail.send", None, b'{"to": "a"}', ago=40 * M),
        _r(6, "empty-args", "mail.send", b"", b'{"to": "a"}', ago=35 * M),
        # empty kwargs '{}' and NULL kwargs are different texts: two calls
        _r(7, "kw-braces", "mail.send", b'["x"]', b"{}", ago=40 * M),
        _r(8, "kw-null", "mail.send", b'["x"]', None, ago=35 * M),
        # no arguments at all: no intent (a periodic task's runs)
        _r(9, "tick-1", "maint.tick", b"[]", b"{}", ago=9 * M),
        _r(10, "tick-2", "maint.tick", None, None, ago=8 * M),
        # different splits, the separator between them: two calls
        _r(11, "split-ab", "ab", b"c", b"{}", ago=7 * M),
        _r(12, "split-a", "a", b"bc", b"{}", ago=6 * M),
        # different splits that concatenate alike (a value holding the separator)
        _r(13, "sep-in-name", "a" + US + "b", b"c", b"{}", ago=5 * M),
        _r(14, "sep-in-args", "a", b"b" + US.encode() + b"c", b"{}", ago=4 * M),
        # a NULL column in another position: two calls
        _r(15, "null-kwargs", "n", b"q", None, ago=3 * M),
        _r(16, "null-args-q", "n", None, b"q", ago=2 * M),
        # two days apart: beyond the dedup window (Celery's retention, 1 day)
        _r(17, "old-call", "billing.charge", b'["c9"]', b"{}", ago=timedelta(days=2)),
        _r(18, "new-call", "billing.charge", b'["c9"]', b"{}", ago=1 * M),
        # failures: resolved by a success of the same call (Celery keeps no creation time: any)
        _r(20, "fail-resolved", "billing.charge", b'["c1"]', b'{"n": 1}', status="FAILURE"),
        _r(21, "fail-empty-args", "mail.send", b"", b'{"to": "a"}', status="FAILURE"),
        # its columns concatenate as sep-in-name's and sep-in-args' do; no success of this call
        _r(22, "fail-sep", "a", b"b", b"c" + US.encode() + b"{}", status="REVOKED"),
        # a success of ('m', NULL, 'q') is another call (PostgreSQL's md5 took it for this one)
        _r(19, "m-success", "m", None, b"q", ago=50 * M),
        _r(23, "fail-null-shift", "m", b"q", None, status="FAILURE"),
        _r(24, "fail-open", "billing.refund", b'["c1"]', b'{"n": 1}', status="FAILURE"),
        _r(25, "fail-no-args", "maint.tick", b"[]", None, status="FAILURE"),
    ]


# By the columns, on every engine: (kind, key)
WANT = {
    ("duplicate_intent", "dup-2"),
    ("duplicate_intent", "dup-3"),
    ("duplicate_intent", "empty-args"),
    ("unresolved_failure", "fail-sep"),
    ("unresolved_failure", "fail-null-shift"),
    ("unresolved_failure", "fail-open"),
    ("unresolved_failure", "fail-no-args"),
}


def _scan_json(url, capsys, by_parts: bool, monkeypatch) -> dict:
    monkeypatch.setattr(rules, "INTENT_BY_PARTS", by_parts)
    capsys.readouterr()
    args = ["scan", url, "--layout", "celery", "--now", NOW.isoformat(), "--format", "json", "--audit-rows", "0"]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def _kinds(doc, kinds=("duplicate_intent", "unresolved_failure")) -> set:
    return {(f["kind"], f["key"]) for f in doc["findings"] if f["kind"] in kinds}


def test_scan_json_by_parts_equals_by_reference(dialect_db, capsys, monkeypatch):
    """Since issue 27 the reference is the same md5 on every engine with a NULL column as '' and a
    binary column (Celery's args, kwargs) as hex, which never holds the separator: for Celery's columns
    (one text, then binary) no two calls share a reference, so both comparisons find the same."""
    writable, url = dialect_db
    load(writable, celery_md(), {"celery_taskmeta": _rows()})
    new = _scan_json(url, capsys, True, monkeypatch)
    old = _scan_json(url, capsys, False, monkeypatch)
    assert _kinds(new) == WANT
    assert _kinds(old) == WANT
    # the whole document is the same, finding for finding (evidence, explanations, order)
    assert new["findings"] == old["findings"]
    keep = {k: v for k, v in new.items() if k not in ("findings", "counts")}
    assert keep == {k: v for k, v in old.items() if k not in ("findings", "counts")}
    dup2 = next(f for f in new["findings"] if f["key"] == "dup-2" and f["kind"] == "duplicate_intent")
    assert dup2["evidence"][0]["earlier_key"] == "dup-1" and dup2["evidence"][0]["keys_with_intent"] == 2
    dup3 = next(f for f in new["findings"] if f["key"] == "dup-3" and f["kind"] == "duplicate_intent")
    assert dup3["evidence"][0]["earlier_key"] == "dup-1" and dup3["evidence"][0]["keys_with_intent"] == 3


@pytest.mark.parametrize("by_parts", [True, False])
def test_a_group_of_many_records_is_read_in_one_pass(sqlite_db, capsys, monkeypatch, by_parts):
    """Many groups with two keys (SQLite once read the whole table per group): every later key found."""
    writable, path = sqlite_db
    rows = []
    for g in range(60):
        for j in range(2):
            rows.append(_r(len(rows) + 1, f"g{g}-{j}", "billing.charge", b'["c%d"]' % g, b"{}", ago=(10 - j) * M))
    load(writable, celery_md(), {"celery_taskmeta": rows})
    doc = _scan_json(path, capsys, by_parts, monkeypatch)
    assert _kinds(doc, ("duplicate_intent",)) == {("duplicate_intent", f"g{g}-1") for g in range(60)}


@pytest.mark.parametrize("hashed", [True, False])
def test_postgresql_groups_by_a_hash_first_and_finds_the_same(pg_url, capsys, monkeypatch, hashed):
    """PostgreSQL 14+ finds the groups by ``hash_record_extended`` of the columns first; without it (an
    older server) by the columns alone: the same findings either way."""
    from sqlalchemy import create_engine, event
    from sqlalchemy.engine import Engine

    writable = create_engine(pg_url)
    try:
        load(writable, celery_md(), {"celery_taskmeta": _rows()})
    finally:
        writable.dispose()
    if not hashed:
        monkeypatch.setattr(rules, "_parts_hash", lambda l, parts: None)
    stmts: list[str] = []

    def seen(conn, cursor, statement, *a):
        stmts.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        doc = _scan_json(pg_url, capsys, True, monkeypatch)
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert _kinds(doc) == WANT
    assert any("hash_record_extended" in s for s in stmts) is hashed
