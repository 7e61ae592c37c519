"""A layout's tables are resolved in one schema (issue #19 item 7): on PostgreSQL a schema named after
the login role (first on the default ``search_path``, ``"$user", public``) holding its own
``operations`` used to shadow ``public.operations`` while ``attempts`` still came from ``public``.
Now the operations table decides the schema once; attempts are read from the same schema; ``scan``
says which on stderr and, as ``detect`` does, names the other copy."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, select, text

from idemview.cli import main
from idemview.errors import EXIT_LAYOUT, EXIT_OK
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.services.demo import DEFAULT_ANCHOR, reference_metadata, write_demo

NOW = DEFAULT_ANCHOR.isoformat().replace("+00:00", "Z")


@pytest.fixture
def shadowed(pg_url, tmp_path):
    """The demo ledger in ``public``, and a schema named after the login role holding 9 operations of
    its own (no attempts table yet). Yields (url, writable engine, role schema, public op count)."""
    src = tmp_path / "demo.db"
    write_demo(src, operations=60, seed=3)
    md = reference_metadata()
    lite, pg = create_engine(f"sqlite:///{src}"), create_engine(pg_url)
    md.drop_all(pg)
    md.create_all(pg)
    with lite.connect() as r, pg.begin() as w:
        for t in md.sorted_tables:
            rows = [dict(m) for m in r.execute(select(t)).mappings()]
            if rows:
                w.execute(t.insert(), rows)
        role = w.execute(text("SELECT current_user")).scalar()
        w.execute(text(f'DROP SCHEMA IF EXISTS "{role}" CASCADE'))
        w.execute(text(f'CREATE SCHEMA "{role}"'))
        w.execute(text(f'CREATE TABLE "{role}".operations (LIKE public.operations INCLUDING ALL)'))
        w.execute(text(f'INSERT INTO "{role}".operations SELECT * FROM public.operations WHERE id < 10'))
        n_public = w.execute(text("SELECT count(*) FROM public.operations")).scalar()
    lite.dispose()
    try:
        yield pg_url, pg, role, n_public
    finally:
        with pg.begin() as w:
            w.execute(text(f'DROP SCHEMA IF EXISTS "{role}" CASCADE'))
        md.drop_all(pg)
        pg.dispose()


@pytest.mark.postgres
def test_never_operations_from_one_schema_and_attempts_from_another(shadowed, capsys):
    url, pg, role, n_public = shadowed
    code = main(["scan", url, "--layout", "idemview", "--now", NOW, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == EXIT_LAYOUT and out == ""
    assert f"attempts table {role}.attempts" in err and "also in schema public" in err
    # with the role's own attempts table, its ledger is read whole, and scan says so
    with pg.begin() as w:
        w.execute(text(f'CREATE TABLE "{role}".attempts (LIKE public.attempts INCLUDING ALL)'))
        w.execute(
            text(
                f'INSERT INTO "{role}".attempts SELECT a.* FROM public.attempts a JOIN "{role}".operations o '
                "ON o.scope = a.scope AND o.idempotency_key = a.idempotency_key"
            )
        )
        n_att = w.execute(text(f'SELECT count(*) FROM "{role}".attempts')).scalar()
    assert main(["scan", url, "--layout", "idemview", "--now", NOW, "--format", "json"]) == EXIT_OK
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert (doc["operations"], doc["attempts"]) == (9, n_att)
    assert f"read from schema {role}" in err and "also in schema public" in err
    assert len(err.strip().splitlines()) == 1
    # --schema picks the other copy, whole
    assert main(["scan", url, "--layout", "idemview", "--schema", "public", "--now", NOW, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["operations"] == n_public > 9


@pytest.mark.postgres
def test_ledger_pins_one_schema_for_every_table(shadowed):
    url, pg, role, _n = shadowed
    with pg.begin() as w:
        w.execute(text(f'CREATE TABLE "{role}".attempts (LIKE public.attempts INCLUDING ALL)'))
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("idemview"))
        assert led.ops.schema == led.att.schema == role
        assert led.layout.schema == role
        assert "also in schema public" in (led.schema_note or "")
        with pg.begin() as w:
            w.execute(text(f'DROP SCHEMA "{role}" CASCADE'))
        led = Ledger(eng, load_preset("idemview"))  # no shadow: public, and no other copy to warn of
        assert led.ops.schema == led.att.schema == "public"
        assert led.schema_note is None
    finally:
        eng.dispose()
