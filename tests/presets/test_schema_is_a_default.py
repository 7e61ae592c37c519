"""A preset's schema is a default, not a requirement (issue 12, DESIGN §9): ``--layout NAME`` finds the
tables the way detection does when the preset's schema is not in the database, and ``--schema NAME``
(or a saved connection's ``schema``) says where they are. For every preset that names a schema."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import Column, DefaultClause, MetaData, Table, text

from idemview.cli import main
from idemview.config import Connection, ConnectionStore
from idemview.layouts.layout import all_presets
from tests.conftest import ANCHOR
from tests.ledgers import load
from tests.presets.systems import FLOWS, QUEUES, drop_system_schemas

M = timedelta(minutes=1)
NOW_ISO = "2026-11-30T12:00:00Z"
WITH_SCHEMA = sorted(l.name for l in all_presets() if l.schema)


@pytest.fixture(autouse=True)
def _system_schemas(request):
    """Each test starts and ends without the systems' PostgreSQL schemas (see drop_system_schemas)."""
    drop_system_schemas(request)
    yield
    drop_system_schemas(request)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("IDEMVIEW_CONFIG_DIR", str(tmp_path / "config"))


def engine_of(url: str) -> str:
    return "postgresql" if url.startswith("postgresql") else "mysql" if url.startswith("mysql") else "sqlite"


def moved(md: MetaData, schema: str | None) -> MetaData:
    """``md``'s tables (columns, types, keys and defaults; foreign keys left out: they name the old
    schema) in ``schema`` (None: the database's default schema)."""
    out = MetaData()
    for t in md.sorted_tables:
        Table(
            t.name,
            out,
            *[
                Column(
                    c.name,
                    c.type,
                    primary_key=c.primary_key,
                    nullable=c.nullable,
                    # an identity or generated column (Graphile) becomes a plain one: not a default
                    server_default=c.server_default.arg if isinstance(c.server_default, DefaultClause) else None,
                )
                for c in t.columns
            ],
            schema=schema,
        )
    return out


def fill(preset: str, writable, schema: str | None) -> int:
    """Write ``preset``'s system tables into ``schema``; returns the number of operations written."""
    if schema:
        with writable.begin() as c:
            c.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            c.execute(text(f'CREATE SCHEMA "{schema}"'))
    if preset == "dbos":
        b = FLOWS()
        load(
            writable,
            b.dbos_md(schema),
            {"workflow_status": [b.wf(f"wf-{i}", "SUCCESS", ANCHOR - i * M, done=ANCHOR - i * M) for i in range(3)]},
        )
        return 3
    if preset in ("hangfire", "hangfire-postgresql"):
        a = QUEUES()
        a.hf_load(
            writable,
            [(i, [("Enqueued", None, 0), ("Succeeded", None, 1)], ANCHOR - i * M) for i in (1, 2)],
            schema,
            preset == "hangfire-postgresql",
        )
        return 2
    if preset == "pg-boss":
        b = FLOWS()
        with writable.begin() as c:  # the job_state enum type lives in pgboss (as pg-boss creates it)
            c.execute(text("CREATE SCHEMA IF NOT EXISTS pgboss"))
        load(
            writable,
            moved(b.pgboss_md(), schema),
            {"job": [b.boss_row(i, "q", "completed", ANCHOR - i * M) for i in (1, 2, 3, 4)]},
        )
        return 4
    if preset == "convoy":
        b = FLOWS()
        c = b.Convoy()
        c.delivery("d-1", "ep-1", "Success", ANCHOR - M, [200], key="k-1")
        md = moved(b.convoy_md(), schema)
        load(writable, md, {"events": c.events, "event_deliveries": c.deliveries, "delivery_attempts": c.attempts})
        return 1
    if preset in ("graphile-worker", "graphile-worker-jobs"):
        from tests.presets import test_planted_graphile_worker as g

        legacy = preset == "graphile-worker-jobs"
        rows = [g.job(i, ANCHOR - i * M, key=f"k-{i}", legacy=legacy) for i in (1, 2, 3)]
        if not legacy:  # moved() keeps no generated column: the value Graphile computes
            rows = [{**r, "is_available": True} for r in rows]
        table = "jobs" if legacy else "_private_jobs"
        load(writable, moved(g.gw_md(legacy), schema), {table: rows})
        return 3
    raise AssertionError(f"no fixture for {preset}: add one (every preset naming a schema is tested)")


def scan_json(capsys, *argv):
    code = main(["scan", *argv, "--now", NOW_ISO, "--format", "json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


SERVER_ONLY = {"convoy", "hangfire-postgresql", "pg-boss", "graphile-worker", "graphile-worker-jobs"}


@pytest.mark.parametrize("preset", WITH_SCHEMA)
def test_layout_name_finds_tables_outside_the_presets_schema(db, capsys, preset):
    writable, url = db
    eng = engine_of(url)
    if preset in SERVER_ONLY and eng != "postgresql":
        pytest.skip(f"{preset} runs on PostgreSQL only")
    if preset == "dbos" and eng == "mysql":
        pytest.skip("DBOS has no MySQL system database")
    n = fill(preset, writable, None)  # the default schema, not the preset's
    code, doc, err = scan_json(capsys, url, "--layout", preset)
    assert code == 0, err
    assert doc["layout"] == preset and doc["operations"] == n


@pytest.mark.parametrize("preset", WITH_SCHEMA)
def test_schema_option_and_connection_setting_say_where_the_tables_are(db, capsys, preset):
    writable, url = db
    if engine_of(url) != "postgresql":
        pytest.skip("named schemas are a PostgreSQL feature here (MySQL schemas are databases)")
    n = fill(preset, writable, "elsewhere")
    try:
        code, doc, err = scan_json(capsys, url, "--layout", preset, "--schema", "elsewhere")
        assert code == 0, err
        assert doc["operations"] == n
        ConnectionStore().upsert(Connection.from_url("ledger", url)[0])
        c = ConnectionStore().find("ledger")
        c.layout, c.schema = preset, "elsewhere"
        ConnectionStore().upsert(c)
        code, doc, err = scan_json(capsys, "ledger")
        assert code == 0, err
        assert doc["operations"] == n
        code, _doc, err = scan_json(capsys, url, "--layout", preset, "--schema", "nowhere")
        assert code == 4 and "nowhere" in err
    finally:
        with writable.begin() as c:
            c.execute(text('DROP SCHEMA IF EXISTS "elsewhere" CASCADE'))


def test_two_schemas_holding_the_table_default_wins_and_detect_says_so(db, capsys, tmp_path):
    """Found by a tester: with Oban (no schema of its own) in public and in jobs, jobs (first by name)
    was read silently. The default schema wins, and detection names the other copy."""
    writable, url = db
    if engine_of(url) != "postgresql":
        pytest.skip("named schemas are a PostgreSQL feature here (MySQL schemas are databases)")
    q = QUEUES()
    load(writable, q.oban_md(), {"oban_jobs": [q.oban_row(i, "W", "completed", ANCHOR - i * M) for i in (1, 2, 3)]})
    with writable.begin() as c:
        c.execute(text('DROP SCHEMA IF EXISTS "aaa_jobs" CASCADE'))
        c.execute(text('CREATE SCHEMA "aaa_jobs"'))  # sorts before public
    try:
        with writable.begin() as c:  # a copy of one job (the same enum type, as a second install has)
            c.execute(text("CREATE TABLE aaa_jobs.oban_jobs (LIKE public.oban_jobs INCLUDING ALL)"))
            c.execute(text("INSERT INTO aaa_jobs.oban_jobs SELECT * FROM public.oban_jobs WHERE id = 1"))
        for argv in ((), ("--layout", "oban")):
            code, doc, err = scan_json(capsys, url, *argv)
            assert code == 0, err
            assert doc["layout"] == "oban" and doc["operations"] == 3, argv
        assert main(["detect", url]) == 0
        assert "also in schema aaa_jobs" in capsys.readouterr().out
        code, doc, err = scan_json(capsys, url, "--schema", "aaa_jobs")
        assert code == 0 and doc["operations"] == 1, err
        # the evidence says which copy was read, and the user's extra values (the layout hash cannot)
        out = tmp_path / "ev.csv"
        args = ["export", url, "--schema", "aaa_jobs", "--map-status", "paused=failed", "--out", str(out)]
        assert main(args) == 0, capsys.readouterr().err
        lay = json.loads(out.with_name("ev.csv.manifest.json").read_text())["layout"]
        assert lay["tables"] == {"operations": "aaa_jobs.oban_jobs"}
        assert lay["extra_values"] == {"status": {"paused": "failed"}, "outcome": {}}
    finally:
        with writable.begin() as c:
            c.execute(text('DROP SCHEMA IF EXISTS "aaa_jobs" CASCADE'))


def test_what_detect_offers_opens(db, capsys):
    """Found by a tester: on a Hangfire.PostgreSql database detect offered "also: hangfire (1.00)", and
    --layout hangfire then exited 4 (its schema "HangFire" is spelled "hangfire" there)."""
    writable, url = db
    if engine_of(url) != "postgresql":
        pytest.skip("Hangfire.PostgreSql runs on PostgreSQL")
    n = fill("hangfire-postgresql", writable, "hangfire")
    try:
        assert main(["detect", url]) == 0
        offered = {line.split()[1] for line in capsys.readouterr().out.splitlines() if line.startswith("  also:")}
        assert "hangfire" in offered
        for preset in ("hangfire-postgresql", "hangfire"):
            code, doc, err = scan_json(capsys, url, "--layout", preset)
            assert code == 0, (preset, err)
            assert doc["operations"] == n
    finally:
        with writable.begin() as c:
            c.execute(text('DROP SCHEMA IF EXISTS "hangfire" CASCADE'))
