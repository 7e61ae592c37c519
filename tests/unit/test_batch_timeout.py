"""Batch work is not an interactive query (issue 11): a whole scan or export is not cut by the
interactive statement timeout; ``timeout_s`` / ``--timeout`` bounds it instead."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from idemview.cli import main
from idemview.evidence.plan import export_evidence
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.batch import for_batch
from idemview.ledger.connect import batch_engine, open_engine
from idemview.ledger.reader import Ledger
from idemview.services.demo import generate
from tests.conftest import ANCHOR

SLOW_SQLITE = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT count(*) FROM c"


def test_sqlite_batch_engine_lifts_and_sets_the_limit(sqlite_db):
    writable, url = sqlite_db
    with writable.begin() as c:
        c.execute(text("CREATE TABLE t (x INTEGER)"))
    eng = open_engine(url, statement_timeout_s=0.0)
    try:
        with pytest.raises(OperationalError):
            with eng.connect() as c:
                c.exec_driver_sql(SLOW_SQLITE).scalar()
        with batch_engine(eng, None).connect() as c:
            assert c.exec_driver_sql(SLOW_SQLITE).scalar() == 3000000
        with pytest.raises(OperationalError):
            with batch_engine(eng, 0.0).connect() as c:
                c.exec_driver_sql(SLOW_SQLITE).scalar()
        with eng.connect() as c:  # back in the pool: the interactive limit again
            assert c.connection.dbapi_connection._idem_deadline == [0.0]
    finally:
        eng.dispose()


def test_postgresql_batch_engine_lifts_and_restores_the_limit(pg_url):
    eng = open_engine(pg_url, statement_timeout_s=0.05)
    try:
        with pytest.raises(OperationalError, match="statement timeout"):
            with eng.connect() as c:
                c.exec_driver_sql("SELECT pg_sleep(0.3)").all()
        with batch_engine(eng, None).connect() as c:
            c.exec_driver_sql("SELECT pg_sleep(0.3)").all()
            assert c.exec_driver_sql("SHOW statement_timeout").scalar() == "0"
        with batch_engine(eng, 2.5).connect() as c:
            assert c.exec_driver_sql("SHOW statement_timeout").scalar() == "2500ms"
        with eng.connect() as c:
            assert c.exec_driver_sql("SHOW statement_timeout").scalar() == "50ms"
    finally:
        eng.dispose()


@pytest.mark.parametrize("family", ["mysql", "mariadb"])
def test_mysql_family_batch_engine_sets_the_session_limit(mysql_url, family):
    url = mysql_url.replace("mysql+pymysql", f"{family}+pymysql", 1)
    eng = open_engine(url, statement_timeout_s=5)
    try:
        with eng.connect() as c:
            maria = "mariadb" in c.exec_driver_sql("SELECT VERSION()").scalar().lower()
        var = "@@max_statement_time" if maria else "@@max_execution_time"
        scale = 1 if maria else 1000
        with batch_engine(eng, None).connect() as c:
            assert float(c.exec_driver_sql(f"SELECT {var}").scalar()) == 0
        with batch_engine(eng, 2.5).connect() as c:
            assert float(c.exec_driver_sql(f"SELECT {var}").scalar()) == 2.5 * scale
        with eng.connect() as c:
            assert float(c.exec_driver_sql(f"SELECT {var}").scalar()) == 5 * scale
    finally:
        eng.dispose()


def _tiny_interactive_limit(url):
    """A ledger whose interactive statement limit is (almost) zero: any real statement is cut."""
    eng = open_engine(url)
    led = Ledger(eng, load_preset("idemview"))
    eng._idem_statement_timeout_s = 0.0 if eng.dialect.name == "sqlite" else 0.001
    return eng, led


def test_export_and_scan_are_not_cut_by_the_interactive_limit(db, tmp_path):
    writable, url = db
    generate(writable, operations=2000, seed=5)
    eng, led = _tiny_interactive_limit(url)
    try:
        if eng.dialect.name in ("sqlite", "postgresql"):  # the limit is real: interactively it is cut
            with pytest.raises(OperationalError):
                FindingEngine(led, ANCHOR).run()
        res = export_evidence(led, None, tmp_path / "ops.csv", now=ANCHOR)
        # the reference count is batch work too: under the 1 ms interactive limit it is itself cut (flaky)
        assert res.rows == for_batch(led, None).counts()[0]
        fs = FindingEngine(led, ANCHOR).run(timeout_s=None)
        assert {f.kind.value for f in fs} >= {"duplicate_effect", "expired_key"}
        assert FindingEngine(for_batch(led, None), ANCHOR).run() == fs
    finally:
        eng.dispose()


def test_cli_scan_takes_timeout_and_progress(tmp_path, capsys):
    from sqlalchemy import create_engine

    path = tmp_path / "demo.db"
    w = create_engine(f"sqlite:///{path}")
    generate(w, operations=300, seed=2)
    w.dispose()
    rc = main(
        [
            "scan",
            str(path),
            "--layout",
            "idemview",
            "--now",
            "2026-11-30T12:00:00Z",
            "--format",
            "json",
            "--timeout",
            "600",
            "--progress",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 0
    doc = json.loads(out)
    assert doc["counts"]["duplicate_effect"] == sum(1 for f in doc["findings"] if f["kind"] == "duplicate_effect")
    assert "idemview: scan: duplicate_effect:" in err
    with pytest.raises(SystemExit) as e:
        main(["scan", str(path), "--timeout", "-1"])
    assert e.value.code == 2
