"""Dialect families (issue #9, item 1): the ``mariadb`` dialect name is MySQL-family everywhere, an
unknown dialect never gets another engine's SQL, and detection, reflection and scans stay in the
database the URL names, with a decoy ledger in another database on the same server."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, literal_column, select, text
from sqlalchemy.dialects import mssql, mysql, postgresql, sqlite
from sqlalchemy.engine import make_url

from idemview.cli import main
from idemview.layouts.layout import LayoutError, TimeColumn, load_preset
from idemview.ledger.connect import open_engine, session_is_read_only
from idemview.ledger.detect import detect
from idemview.ledger.dialects import DialectNotSupported, family
from idemview.ledger.reader import Ledger
from idemview.ledger.sqlx import epoch_seconds, exact_text, json_text, stored_int, time_before
from idemview.services.demo import reference_metadata
from tests.conftest import ANCHOR, MY_ADMIN, _clear
from tests.ledgers import load
from tests.presets.test_planted_stripe_powertools_celery import cel_clean, cel_row, celery_md

NOW = ANCHOR
DIALECT_NAMES = ("mysql+pymysql", "mariadb+pymysql")


# ------------------------------------------------------------------------------------ family()


@pytest.mark.parametrize(
    "x,fam",
    [
        ("sqlite", "sqlite"),
        ("postgresql", "postgresql"),
        ("mysql", "mysql"),
        ("mariadb", "mysql"),
        ("mariadb+pymysql://root@127.0.0.1/ncledger", "mysql"),
        ("mysql+pymysql://h/db", "mysql"),
        ("postgresql+psycopg://h/db", "postgresql"),
        ("sqlite:///x.db", "sqlite"),
        ("mssql", "other"),
        ("oracle+oracledb://h/db", "other"),
        (make_url("mariadb://h/db"), "mysql"),
        (mysql.dialect(), "mysql"),
        (postgresql.dialect(), "postgresql"),
        (sqlite.dialect(), "sqlite"),
        (mssql.dialect(), "other"),
    ],
)
def test_family(x, fam):
    assert family(x) == fam


def test_mariadb_dialect_object_is_mysql_family():
    from sqlalchemy.dialects.mysql.mariadb import MariaDBDialect

    d = MariaDBDialect()
    assert d.name == "mariadb" and family(d) == "mysql"


def _sql(expr, dialect) -> str:
    return str(expr.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))


def test_mariadb_compiles_mysql_sql_not_postgresql():
    """The old @compiles(..., "mysql") handlers never applied to the "mariadb" name: MariaDB got the
    PostgreSQL-style EXTRACT(EPOCH FROM ...) and no exact (binary) key comparison."""
    from sqlalchemy.dialects.mysql.mariadb import MariaDBDialect

    maria, my = MariaDBDialect(), mysql.dialect()
    col = literal_column("date_done")
    for dialect in (maria, my):
        e = _sql(epoch_seconds(col, TimeColumn("date_done", "datetime"), family(dialect)), dialect)
        assert "TIMESTAMPDIFF" in e and "EXTRACT" not in e
        assert "AS BINARY" in _sql(exact_text(literal_column("k")), dialect)
        assert "JSON_EXTRACT" in _sql(json_text(literal_column("j"), "$.a"), dialect)
    assert _sql(epoch_seconds(col, TimeColumn("d", "datetime"), "mariadb"), maria) == _sql(
        epoch_seconds(col, TimeColumn("d", "datetime"), "mysql"), my
    )


def test_unknown_dialect_gets_portable_sql_or_a_clear_error():
    d = mssql.dialect()
    col = literal_column("created_at")
    with pytest.raises(DialectNotSupported) as ei:
        _sql(epoch_seconds(col, TimeColumn("created_at", "datetime"), family(d)), d)
    msg = str(ei.value)
    assert "'mssql'" in msg and "not supported" in msg and "\n" not in msg
    # a time comparison in the column's own encoding needs no engine-specific SQL
    assert "EXTRACT" not in _sql(time_before(col, TimeColumn("created_at", "datetime"), NOW, family(d)), d)
    # no MySQL, PostgreSQL or SQLite spelling leaks into an unknown dialect
    assert "JSON_VALUE" in _sql(json_text(literal_column("j"), "$.a"), d)
    assert _sql(exact_text(literal_column("k")), d) == "k"
    for s in (_sql(stored_int(literal_column("n"), "other"), d),):
        assert "REGEXP" not in s and "typeof" not in s and "~" not in s


# -------------------------------------------------------------------- a server with a decoy


@pytest.fixture
def maria_with_decoy(mysql_url):
    """The test database holds a Celery ledger; a second database on the same server holds idemview's
    reference ledger (the decoy: detection, reflection and scans must never read it)."""
    decoy_db = make_url(mysql_url).database + "_decoy"
    admin = create_engine(MY_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"DROP DATABASE IF EXISTS `{decoy_db}`"))
        c.execute(text(f"CREATE DATABASE `{decoy_db}` CHARACTER SET utf8mb4"))
    w = create_engine(mysql_url)
    _clear(w)
    h = timedelta(hours=1)
    load(
        w,
        celery_md(),
        {"celery_taskmeta": cel_clean() + [cel_row(10, "stuck-0000-4000-8000-000000000010", "STARTED", NOW - 3 * h)]},
    )
    w.dispose()
    dw = create_engine(make_url(mysql_url).set(database=decoy_db))
    reference_metadata().create_all(dw)
    dw.dispose()
    yield mysql_url, decoy_db
    with admin.connect() as c:
        c.execute(text(f"DROP DATABASE IF EXISTS `{decoy_db}`"))
    admin.dispose()


def _as(url: str, drivername: str) -> str:
    return make_url(url).set(drivername=drivername).render_as_string(hide_password=False)


@pytest.mark.parametrize("drivername", DIALECT_NAMES)
def test_detect_stays_in_the_named_database(maria_with_decoy, drivername, capsys):
    url, decoy = maria_with_decoy
    u = _as(url, drivername)
    eng = open_engine(u)
    try:
        matches = detect(eng)
    finally:
        eng.dispose()
    assert [m.layout.name for m in matches][:1] == ["celery"]
    assert all(m.layout.schema is None for m in matches)
    assert not any(decoy in m.reason or m.layout.name == "idemview" for m in matches)
    assert main(["detect", u]) == 0
    out = capsys.readouterr().out
    assert out.startswith("celery") and decoy not in out and "idemview" not in out


@pytest.mark.parametrize("drivername", DIALECT_NAMES)
def test_reflection_does_not_reach_another_database(maria_with_decoy, drivername):
    url, _decoy = maria_with_decoy
    eng = open_engine(_as(url, drivername))
    try:
        with pytest.raises(LayoutError):
            Ledger(eng, load_preset("idemview"))  # its tables exist only in the decoy database
    finally:
        eng.dispose()


@pytest.mark.parametrize("drivername", DIALECT_NAMES)
def test_scan_and_read_only_check_under_both_names(maria_with_decoy, drivername, capsys):
    url, _decoy = maria_with_decoy
    u = _as(url, drivername)
    assert main(["scan", u, "--now", "2026-11-30T12:00:00Z", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["layout"] == "celery" and doc["operations"] == 4
    assert {(f["kind"], f["key"]) for f in doc["findings"]} == {
        ("stuck_in_progress", "stuck-0000-4000-8000-000000000010")
    }
    eng = open_engine(u)
    try:
        assert eng.dialect.name == drivername.split("+")[0]
        assert session_is_read_only(eng) is True
        with eng.connect() as c:
            assert c.execute(select(literal_column("DATABASE()"))).scalar() == make_url(url).database
    finally:
        eng.dispose()


@pytest.mark.parametrize("drivername", DIALECT_NAMES)
def test_preset_schema_is_not_another_database(maria_with_decoy, drivername):
    """pg-boss's preset names the PostgreSQL schema ``pgboss``; on MySQL/MariaDB that would be another
    database on the server. The tables are read from the database the URL names."""
    from sqlalchemy import JSON, Column, DateTime, Integer, MetaData, String, Table

    url, _decoy = maria_with_decoy
    md = MetaData()
    Table(
        "job",
        md,
        Column("id", String(36), primary_key=True),
        Column("name", String(64)),
        Column("singleton_key", String(64)),
        Column("singleton_on", DateTime),
        Column("state", String(16)),
        Column("created_on", DateTime),
        Column("started_on", DateTime),
        Column("completed_on", DateTime),
        Column("retry_count", Integer),
        Column("data", JSON),
        Column("output", JSON),
    )
    w = create_engine(url)
    n = NOW.replace(tzinfo=None)
    base = {
        "name": "mail",
        "singleton_key": None,
        "singleton_on": None,
        "state": "completed",
        "created_on": n,
        "started_on": None,
        "retry_count": 0,
    }
    load(
        w,
        md,
        {
            "job": [
                {**base, "id": "j1", "singleton_key": "Order-1", "singleton_on": n},
                {**base, "id": "j2", "singleton_key": "order-1", "singleton_on": n},
                {**base, "id": "j3", "state": "active", "started_on": n - timedelta(hours=1)},
            ]
        },
    )
    w.dispose()
    eng = open_engine(_as(url, drivername))
    try:
        led = Ledger(eng, load_preset("pg-boss"))
        assert led.layout.schema is None
        keys = sorted(str(o.key) for o in led.page(limit=10).rows)
        assert keys[0] == "#j3" and [k.split("/")[0] for k in keys[1:]] == ["Order-1", "order-1"]
        from idemview.findings.engine import FindingEngine

        got = {(f.kind.value, f.key) for f in FindingEngine(led, NOW).run()}
        assert not any(k == "duplicate_effect" for k, _ in got)  # keys differing in case: two operations
        # a schema the user wrote into their own layout is theirs to name
        from dataclasses import replace

        from idemview.ledger.reader import _stay_in_database

        mine = replace(load_preset("pg-boss"), name="my-boss")
        assert _stay_in_database(mine).schema == "pgboss"
    finally:
        eng.dispose()


def test_cli_says_not_supported_in_one_line(monkeypatch, capsys):
    import idemview.cli as cli
    from idemview.ledger.dialects import not_supported

    def boom(args):
        raise not_supported(mssql.dialect(), "computing times in SQL")

    monkeypatch.setattr(cli, "cmd_scan", boom)
    assert main(["scan", "whatever.db"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "idemview: computing times in SQL is not supported on the 'mssql' dialect "
        "(idemview speaks SQLite, PostgreSQL and MySQL/MariaDB)\n"
    )
