"""Broken data inside a ledger is read, never fatal (issue #9, items 5, 6, 8; DESIGN §9).

- bytes that are not UTF-8 in SQLite text columns are read, shown escaped (``\\xff\\xfeA``), compared
  exactly (never equal to the text spelling those escapes) and bound back into SQL (a detail lookup
  finds the row);
- MariaDB zero dates are unknown times, like NULL, in SQL and in Python;
- a value that does not fit the column's type is shown as stored, never as a number a CAST made up.
"""

from __future__ import annotations

import copy
import csv
import json
import pickle
from datetime import datetime, timedelta

import pytest
from sqlalchemy import create_engine, text

from idemview.cli import main
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.services.demo import reference_metadata
from tests.conftest import ANCHOR, _clear

NOW = ANCHOR
BAD = "X'FFFE41'"  # b'\xff\xfeA': not UTF-8
SHOWN = "\\xff\\xfeA"  # how it is shown: the bytes escaped


def _ts(t: datetime) -> str:
    return t.replace(tzinfo=None).isoformat(sep=" ")


def _op_sql(i, key, *, scope="'shop'", status="'succeeded'", count="1", created=None, kind="'charge'", effect="NULL"):
    created = created or NOW - timedelta(hours=1)
    return (
        f"INSERT INTO operations (id, scope, idempotency_key, kind, status, attempt_count, created_at, "
        f"effect_ref) VALUES ({i}, {scope}, {key}, {kind}, {status}, {count}, '{_ts(created)}', {effect})"
    )


def _att_sql(i, key, n, *, scope="'shop'", outcome="'succeeded'", effect="NULL"):
    started = _ts(NOW - timedelta(minutes=50 - i))
    return (
        f"INSERT INTO attempts (id, scope, idempotency_key, attempt_no, started_at, outcome, effect_ref) "
        f"VALUES ({i}, {scope}, {key}, {n}, '{started}', {outcome}, {effect})"
    )


@pytest.fixture
def bad_utf8(sqlite_db):
    """The reference ledger with undecodable bytes in a key, a scope, a status and an attempt outcome,
    beside an operation whose key is the *text* ``\\xff\\xfeA`` (backslashes): a different key."""
    w, path = sqlite_db
    reference_metadata().create_all(w)
    bad = f"CAST({BAD} AS TEXT)"
    with w.begin() as c:
        for sql in [
            _op_sql(1, "'ok-1'"),
            _op_sql(2, bad),  # undecodable key
            _op_sql(3, "'text-key'", scope=bad),  # undecodable scope
            _op_sql(4, "'odd-status'", status=bad),  # undecodable status
            _op_sql(5, "'" + SHOWN + "'"),  # the escapes as plain text
            _att_sql(1, bad, 1, effect="'ch_1'"),
            _att_sql(2, bad, 2, effect="'ch_2'"),  # two successes: duplicate_effect
            _att_sql(3, "'text-key'", 1, scope=bad),
            _att_sql(4, "'odd-status'", 1, outcome=bad),
            _att_sql(5, "'" + SHOWN + "'", 1),
        ]:
            c.execute(text(sql))
    return path


def test_undecodable_text_is_read_shown_escaped_and_looked_up(bad_utf8):
    eng = open_engine(bad_utf8)
    try:
        led = Ledger(eng, load_preset("idemview"))
        page = led.page(limit=50, sort="key")
        assert len(page.rows) == 5  # used to be 0: the whole page failed
        keys = {str(o.key) for o in page.rows}
        assert keys == {"ok-1", SHOWN, "text-key", "odd-status"}  # two keys show the same text...
        raw = next(o for o in page.rows if o.row_id == 2)
        plain = next(o for o in page.rows if o.row_id == 5)
        assert raw.key != plain.key and len({raw.key, plain.key}) == 2  # ...and are different keys
        assert str(next(o for o in page.rows if o.row_id == 3).scope) == SHOWN
        odd = next(o for o in page.rows if o.row_id == 4)
        assert str(odd.raw_status) == SHOWN and odd.status.value == "unknown"
        # the key round-trips to SQL: the detail lookup finds exactly its own row and attempts
        assert [r.row_id for r in led.records(raw.scope, raw.key)] == [2]
        assert [r.row_id for r in led.records(plain.scope, plain.key)] == [5]
        assert [a.effect_ref for a in led.attempts(raw.scope, raw.key)] == ["ch_1", "ch_2"]
        scoped = next(o for o in page.rows if o.row_id == 3)
        assert [a.number for a in led.attempts(scoped.scope, scoped.key)] == [1]
        assert led.counts() == (5, 5)
        # pickling (worker processes) and copying keep the exact bytes
        assert pickle.loads(pickle.dumps(raw.key)) == raw.key != plain.key
        assert copy.deepcopy(raw.key) == raw.key
        # keyset paging over the undecodable key neither repeats nor loses a row
        seen, after = [], None
        while True:
            p = led.page(limit=1, sort="key", after=after)
            seen += [o.row_id for o in p.rows]
            if p.cursor is None:
                break
            after = p.cursor
        assert sorted(seen) == [1, 2, 3, 4, 5]
        fs = FindingEngine(led, NOW).run()
        dup = [f for f in fs if f.kind.value == "duplicate_effect"]
        assert [(str(f.key), f.key == raw.key) for f in dup] == [(SHOWN, True)]
    finally:
        eng.dispose()


def test_undecodable_text_scan_and_export(bad_utf8, tmp_path, capsys):
    assert main(["scan", bad_utf8, "--layout", "idemview", "--now", "2026-11-30T12:00:00Z", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["operations"] == 5 and doc["attempts"] == 5
    dup = [f for f in doc["findings"] if f["kind"] == "duplicate_effect"]
    assert [f["key"] for f in dup] == [SHOWN]
    # the explanation quotes the key as the grid shows it, not as Python's RawText(b'...') constructor
    assert f"key '{SHOWN}'" in dup[0]["explanation"] and "RawText" not in dup[0]["explanation"]
    for rows, n in (("operations", 5), ("attempts", 5), ("findings", None)):
        out = tmp_path / f"{rows}.csv"
        assert (
            main(
                [
                    "export",
                    bad_utf8,
                    "--layout",
                    "idemview",
                    "--now",
                    "2026-11-30T12:00:00Z",
                    "--rows",
                    rows,
                    "--out",
                    str(out),
                ]
            )
            == 0
        ), capsys.readouterr().err
        capsys.readouterr()
        with open(out, newline="", encoding="utf-8") as f:
            got = list(csv.DictReader(f))
        if n is not None:
            assert len(got) == n
        assert any(SHOWN in (r.get("idempotency_key") or "") or SHOWN in (r.get("scope") or "") for r in got)
        manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
        assert manifest["row_count"] == len(got)
    # a filtered attempts export (the join of attempts to operations) keeps undecodable keys exact
    out = tmp_path / "one.csv"
    assert (
        main(["export", bad_utf8, "--layout", "idemview", "--rows", "attempts", "--key", "-", "--out", str(out)]) == 0
    )
    capsys.readouterr()
    with open(out, newline="", encoding="utf-8") as f:
        assert sorted(r["idempotency_key"] for r in csv.DictReader(f)) == ["odd-status", "text-key"]


# ------------------------------------------------------------------------- values of a wrong type


def test_attempt_count_is_shown_as_stored(sqlite_db, tmp_path, capsys):
    """SQLite keeps 'many' and 1e20 in an INTEGER column; CAST made them 0 and 9223372036854775807."""
    w, path = sqlite_db
    reference_metadata().create_all(w)
    with w.begin() as c:
        c.execute(text(_op_sql(1, "'k-many'", count="'many'")))
        c.execute(text(_op_sql(2, "'k-huge'", count="1e20")))
        c.execute(text(_op_sql(3, "'k-seven'", count="7")))
        c.execute(text(_att_sql(1, "'k-many'", "'first'")))
    eng = open_engine(path)
    try:
        led = Ledger(eng, load_preset("idemview"))
        by = {o.key: o for o in led.page(limit=10).rows}
        assert by["k-many"].attempt_count == "many"
        assert by["k-huge"].attempt_count == 1e20 and isinstance(by["k-huge"].attempt_count, float)
        assert by["k-seven"].attempt_count == 7
        assert [a.number for a in led.attempts("shop", "k-many")] == ["first"]
        storms = {f.key for f in FindingEngine(led, NOW).run() if f.kind.value == "retry_storm"}
        assert storms == {"k-seven"}  # an unknown count is no storm; 7 > 5 is
        assert led.page(limit=10, sort="attempt_count").rows  # sorting by a mixed column works
    finally:
        eng.dispose()
    out = tmp_path / "ops.csv"
    assert main(["export", path, "--layout", "idemview", "--out", str(out), "--now", "2026-11-30T12:00:00Z"]) == 0
    with open(out, newline="", encoding="utf-8") as f:
        cells = {r["idempotency_key"]: r["attempt_count"] for r in csv.DictReader(f)}
    assert cells["k-many"] == "many"
    assert cells["k-huge"] not in ("0", "9223372036854775807") and float(cells["k-huge"]) == 1e20
    assert cells["k-seven"] == "7"
    out = tmp_path / "att.csv"
    assert main(["export", path, "--layout", "idemview", "--rows", "attempts", "--out", str(out)]) == 0
    with open(out, newline="", encoding="utf-8") as f:
        assert [r["attempt"] for r in csv.DictReader(f)] == ["first"]


# ------------------------------------------------------------------------------- MariaDB zero dates


@pytest.mark.parametrize("drivername", ["mysql+pymysql", "mariadb+pymysql"])
def test_zero_dates_are_unknown_times(mysql_url, drivername, capsys):
    """``0000-00-00 00:00:00`` in Celery's date_done (sql_mode=''): no stuck or expired finding, no
    "(None)" in any explanation, and Python reads no value, exactly as for NULL."""
    from sqlalchemy.engine import make_url

    from tests.presets.test_planted_stripe_powertools_celery import cel_row, celery_md

    w = create_engine(mysql_url)
    _clear(w)
    celery_md().create_all(w)
    rows = [
        cel_row(1, "zero-date-started", "STARTED", NOW),
        cel_row(2, "zero-date-success", "SUCCESS", NOW),
        cel_row(3, "zero-month", "STARTED", NOW),
        cel_row(4, "real-stuck", "STARTED", NOW - timedelta(hours=3)),
        cel_row(5, "null-date", "STARTED", NOW),
    ]
    with w.connect() as c:
        c.execute(text("SET SESSION sql_mode = ''"))
        from sqlalchemy import insert

        c.execute(insert(celery_md().tables["celery_taskmeta"]), rows)
        c.execute(text("UPDATE celery_taskmeta SET date_done = '0000-00-00 00:00:00' WHERE id IN (1, 2)"))
        c.execute(text("UPDATE celery_taskmeta SET date_done = '2026-00-00 00:00:00' WHERE id = 3"))
        c.execute(text("UPDATE celery_taskmeta SET date_done = NULL WHERE id = 5"))
        c.commit()
        assert c.execute(text("SELECT count(*) FROM celery_taskmeta WHERE date_done LIKE '%-00%'")).scalar() == 3
    w.dispose()
    url = make_url(mysql_url).set(drivername=drivername).render_as_string(hide_password=False)
    assert main(["scan", url, "--layout", "celery", "--now", "2026-11-30T12:00:00Z", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {(f["kind"], f["key"]) for f in doc["findings"]} == {("stuck_in_progress", "real-stuck")}
    assert "None" not in json.dumps(doc["findings"])
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("celery"))
        for key in ("zero-date-started", "zero-date-success", "zero-month", "null-date"):
            (op,) = led.records("", key)
            assert op.updated_at is None and op.expires_at is None, key
        # ten days later every real date has expired; a zero date still has no known expiry
        later = FindingEngine(led, NOW + timedelta(days=10)).run()
        assert {f.key for f in later if f.kind.value == "expired_key"} == {"real-stuck"}
        assert all("None" not in f.explanation for f in later)
        assert len(led.page(limit=10, sort="updated_at").rows) == 5
    finally:
        eng.dispose()


@pytest.mark.parametrize("drivername", ["mysql+pymysql", "mariadb+pymysql"])
def test_binary_key_that_is_not_utf8_on_mysql(mysql_url, drivername):
    """A VARBINARY key holding bytes that are not UTF-8 is shown escaped and found again exactly (it
    used to be decoded with U+FFFD replacement characters, so no lookup could match it)."""
    from sqlalchemy.engine import make_url

    w = create_engine(mysql_url)
    _clear(w)
    reference_metadata().create_all(w)
    with w.begin() as c:
        for t in ("operations", "attempts"):
            c.execute(text(f"ALTER TABLE {t} MODIFY idempotency_key VARBINARY(128) NOT NULL"))
        c.execute(text(_op_sql(1, BAD)))
        c.execute(text(_op_sql(2, "X'FFFE42'")))
        c.execute(text(_att_sql(1, BAD, 1, effect="'ch_1'")))
        c.execute(text(_att_sql(2, "X'FFFE42'", 1, effect="'ch_2'")))
    w.dispose()
    eng = open_engine(make_url(mysql_url).set(drivername=drivername))
    try:
        led = Ledger(eng, load_preset("idemview"))
        rows = led.page(limit=10, sort="key").rows
        assert [str(o.key) for o in rows] == [SHOWN, "\\xff\\xfeB"]
        assert [r.row_id for r in led.records("shop", rows[0].key)] == [1]
        assert [a.effect_ref for a in led.attempts("shop", rows[1].key)] == ["ch_2"]
        assert not [f for f in FindingEngine(led, NOW).run() if f.kind.value == "duplicate_effect"]
    finally:
        eng.dispose()
