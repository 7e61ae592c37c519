"""Keys compare exactly in every join and filter, on every engine (issue #9, item 7).

MariaDB's default collation (utf8mb4_general_ci) is case-insensitive and ignores trailing spaces:
``Order-77`` = ``order-77`` and ``ord-88`` = ``ord-88 ``. With one attempt each, a filtered
``export --rows attempts`` used to join every attempt to both operations (8 rows for 4, and a manifest
saying 8)."""

from __future__ import annotations

import csv
import json
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, insert
from sqlalchemy.engine import make_url

from idemview.cli import main
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger, histogram
from idemview.services.demo import reference_metadata
from tests.conftest import ANCHOR, _clear

NOW = ANCHOR
KEYS = ["Order-77", "order-77", "ord-88", "ord-88 "]
naive = lambda t: t.replace(tzinfo=None)  # noqa: E731


def _rows():
    ops, atts = [], []
    for i, k in enumerate(KEYS, 1):
        t = NOW - timedelta(minutes=10 * i)
        ops.append(
            {
                "id": i,
                "scope": "shop",
                "idempotency_key": k,
                "kind": "charge",
                "status": "succeeded",
                "attempt_count": 1,
                "created_at": naive(t),
                "effect_ref": f"ch_{i}",
            }
        )
        atts.append(
            {
                "id": i,
                "scope": "shop",
                "idempotency_key": k,
                "attempt_no": 1,
                "started_at": naive(t),
                "finished_at": naive(t + timedelta(seconds=2)),
                "outcome": "succeeded",
                "effect_ref": f"ch_{i}",
                "worker": "w1",
            }
        )
    return ops, atts


@pytest.fixture(params=["sqlite", "postgresql+psycopg", "mysql+pymysql", "mariadb+pymysql"])
def ledger_url(request, tmp_path):
    name = request.param
    if name == "sqlite":
        url = str(tmp_path / "l.db")
        w = create_engine(f"sqlite:///{url}")
    else:
        base = request.getfixturevalue("pg_url" if name.startswith("postgresql") else "mysql_url")
        w = create_engine(base)
        _clear(w)
        url = make_url(base).set(drivername=name).render_as_string(hide_password=False)
    md = reference_metadata()
    md.create_all(w)
    ops, atts = _rows()
    with w.begin() as c:
        c.execute(insert(md.tables["operations"]), ops)
        c.execute(insert(md.tables["attempts"]), atts)
    w.dispose()
    return url


@pytest.mark.parametrize(
    "flt,want",
    [
        (["--scope", "shop"], KEYS),
        (["--status", "completed"], KEYS),
        (["--key", "-"], KEYS),
        (["--key", "rder"], KEYS[:2]),
        (["--key", "8 "], KEYS[3:]),
        (["--finding", "duplicate_effect", "--scope", "s"], []),
        ([], KEYS),
    ],
)
def test_filtered_attempts_export_writes_each_attempt_once(ledger_url, flt, want, tmp_path, capsys):
    out = tmp_path / "att.csv"
    assert (
        main(
            [
                "export",
                ledger_url,
                "--layout",
                "idemview",
                "--rows",
                "attempts",
                "--now",
                "2026-11-30T12:00:00Z",
                "--out",
                str(out),
                *flt,
            ]
        )
        == 0
    )
    capsys.readouterr()
    with open(out, newline="", encoding="utf-8") as f:
        got = [(r["idempotency_key"], r["effect_ref"]) for r in csv.DictReader(f)]
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    want = sorted((k, f"ch_{i}") for i, k in enumerate(KEYS, 1) if k in want)
    assert sorted(got) == want
    assert manifest["row_count"] == len(want)


def test_no_finding_and_one_timeline_per_key(ledger_url):
    """Four operations with one success each: no duplicate effect, each detail shows its own attempt,
    and the overview counts four attempts."""
    eng = open_engine(ledger_url)
    try:
        led = Ledger(eng, load_preset("idemview"))
        assert [f for f in FindingEngine(led, NOW).run() if f.kind.value == "duplicate_effect"] == []
        for i, k in enumerate(KEYS, 1):
            assert [r.row_id for r in led.records("shop", k)] == [i], k
            assert [a.effect_ref for a in led.attempts("shop", k)] == [f"ch_{i}"], k
        from idemview.domain.filters import Filter

        h = histogram(led, NOW - timedelta(hours=2), NOW, buckets=4, flt=Filter(scope="shop"))
        assert sum(sum(v) for v in h.counts.values()) == 4
        assert led.counts() == (4, 4)
    finally:
        eng.dispose()


def test_sqlite_nocase_and_rtrim_columns_compare_exactly(tmp_path, capsys):
    """SQLite columns declared COLLATE NOCASE / RTRIM behave like MariaDB's default collation: keys are
    still compared byte for byte in the attempts join, the filters and the findings."""
    from sqlalchemy import text

    path = tmp_path / "nocase.db"
    w = create_engine(f"sqlite:///{path}")
    reference_metadata().create_all(w)
    with w.begin() as c:
        for t in ("operations", "attempts"):
            # same table, keys now declared case- and trailing-space-insensitive
            cols = [r[1] for r in c.execute(text(f"PRAGMA table_info({t})"))]
            c.execute(text(f"ALTER TABLE {t} RENAME TO {t}_old"))
            ddl = ", ".join(
                f"{n} TEXT COLLATE NOCASE"
                if n == "idempotency_key"
                else f"{n} TEXT COLLATE RTRIM"
                if n == "scope"
                else n
                for n in cols
            )
            c.execute(text(f"CREATE TABLE {t} ({ddl})"))
            c.execute(text(f"DROP TABLE {t}_old"))
        ops, atts = _rows()
        md = reference_metadata()
        c.execute(insert(md.tables["operations"]), ops)
        c.execute(insert(md.tables["attempts"]), atts)
    w.dispose()
    out = tmp_path / "att.csv"
    assert (
        main(
            [
                "export",
                str(path),
                "--layout",
                "idemview",
                "--rows",
                "attempts",
                "--scope",
                "shop",
                "--now",
                "2026-11-30T12:00:00Z",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    capsys.readouterr()
    with open(out, newline="", encoding="utf-8") as f:
        assert sorted(r["idempotency_key"] for r in csv.DictReader(f)) == sorted(KEYS)
    eng = open_engine(str(path))
    try:
        led = Ledger(eng, load_preset("idemview"))
        assert [f for f in FindingEngine(led, NOW).run() if f.kind.value == "duplicate_effect"] == []
        for i, k in enumerate(KEYS, 1):
            assert [r.row_id for r in led.records("shop", k)] == [i], k
    finally:
        eng.dispose()


def test_postgresql_citext_keys_compare_exactly(pg_url, tmp_path, capsys):
    """PostgreSQL's ``citext`` is case-insensitive by design: keys in citext columns are compared as
    ``text`` (exactly) in the attempts join, filters and findings."""
    from sqlalchemy import text

    w = create_engine(pg_url)
    _clear(w)
    md = reference_metadata()
    md.create_all(w)
    with w.begin() as c:
        c.execute(text("CREATE EXTENSION IF NOT EXISTS citext"))
        for t in ("operations", "attempts"):
            c.execute(text(f"ALTER TABLE {t} ALTER COLUMN idempotency_key TYPE citext"))
        ops, atts = _rows()
        c.execute(insert(md.tables["operations"]), ops)
        c.execute(insert(md.tables["attempts"]), atts)
    w.dispose()
    out = tmp_path / "att.csv"
    assert (
        main(
            [
                "export",
                pg_url,
                "--layout",
                "idemview",
                "--rows",
                "attempts",
                "--key",
                "rder",
                "--now",
                "2026-11-30T12:00:00Z",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    capsys.readouterr()
    with open(out, newline="", encoding="utf-8") as f:
        assert sorted(r["idempotency_key"] for r in csv.DictReader(f)) == sorted(KEYS[:2])
    eng = open_engine(pg_url)
    try:
        led = Ledger(eng, load_preset("idemview"))
        assert [f for f in FindingEngine(led, NOW).run() if f.kind.value == "duplicate_effect"] == []
        for i, k in enumerate(KEYS, 1):
            assert [r.row_id for r in led.records("shop", k)] == [i], k
            assert [a.effect_ref for a in led.attempts("shop", k)] == [f"ch_{i}"], k
    finally:
        eng.dispose()
