"""A PostgreSQL ledger in a ``SQL_ASCII`` database opens and is read (issue #19 item 6): bytes that are
not UTF-8 are kept and shown escaped, exactly as for SQLite (``idemview.ledger.rawtext``), and a key read
can be looked up again (detail, export by key)."""

from __future__ import annotations

import csv
import json

import pytest
from sqlalchemy import create_engine, event, select, text
from sqlalchemy.engine import make_url

from idemview.cli import main
from idemview.ledger.connect import open_engine
from idemview.ledger.rawtext import RawText
from idemview.services.demo import DEFAULT_ANCHOR, reference_metadata, write_demo
from tests.conftest import DBNAME, PG_ADMIN, _unavailable

NOW = DEFAULT_ANCHOR.isoformat().replace("+00:00", "Z")
BAD_KEY_SQL = "E'order-\\xe9\\xff-1'"  # Latin-1 é and a byte no encoding uses


class _Url(str):
    """The SQL_ASCII database's URL, with ``src``: the SQLite demo it was copied from."""

    def __new__(cls, url: str, src):
        self = super().__new__(cls, url)
        self.src = src
        return self


def _adapted(conn):
    from idemview.ledger.pg_sqlascii import adapt

    adapt(conn)
    return conn


@pytest.fixture(scope="module")
def sql_ascii_url(tmp_path_factory):
    name = f"{DBNAME}_sqlascii"
    try:
        admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
            c.execute(
                text(f"CREATE DATABASE \"{name}\" ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'")
            )
    except Exception as e:  # noqa: BLE001 - no server
        _unavailable("PostgreSQL", e)
    url = make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)
    # the demo's reference ledger, copied into the SQL_ASCII database
    src = tmp_path_factory.mktemp("sqlascii") / "demo.db"
    write_demo(src, operations=80, seed=4)
    md = reference_metadata()
    lite, pg = create_engine(f"sqlite:///{src}"), create_engine(url)
    # a plain SQLAlchemy engine cannot even start on SQL_ASCII (its version query gets bytes)
    event.listen(pg, "do_connect", lambda d, _r, a, kw: _adapted(d.loaded_dbapi.connect(*a, **kw)))
    md.create_all(pg)
    with lite.connect() as r, pg.begin() as w:
        for t in md.sorted_tables:
            rows = [dict(m) for m in r.execute(select(t)).mappings()]
            if rows:
                w.execute(t.insert(), rows)
        first = w.execute(text("SELECT scope, idempotency_key FROM operations ORDER BY id LIMIT 1")).one()
        for table in ("operations", "attempts"):
            w.execute(
                text(f"UPDATE {table} SET idempotency_key = {BAD_KEY_SQL} WHERE scope = :s AND idempotency_key = :k"),
                {"s": first[0], "k": first[1]},
            )
    lite.dispose()
    pg.dispose()
    yield _Url(url, src)
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.mark.postgres
def test_sql_ascii_ledger_opens_and_keeps_bytes(sql_ascii_url):
    eng = open_engine(sql_ascii_url)
    try:
        with eng.connect() as c:
            keys = c.execute(text("SELECT idempotency_key FROM operations ORDER BY id")).scalars().all()
            bad = keys[0]
            assert isinstance(bad, RawText) and bad.raw == b"order-\xe9\xff-1"
            assert str(bad) == "order-\\xe9\\xff-1"
            assert all(type(k) is str for k in keys[1:])  # valid text stays plain str
            # bound back, the stored bytes are sent: the row is found again
            n = c.execute(text("SELECT count(*) FROM operations WHERE idempotency_key = :k"), {"k": bad}).scalar()
            assert n == 1
    finally:
        eng.dispose()


@pytest.mark.postgres
def test_sql_ascii_scan_and_export(sql_ascii_url, tmp_path, capsys):
    assert main(["scan", sql_ascii_url, "--layout", "idemview", "--now", NOW, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # the same ledger as the SQLite original it was copied from: every row read, the same findings
    src = str(sql_ascii_url.src)
    assert main(["scan", src, "--layout", "idemview", "--now", NOW, "--format", "json"]) == 0
    orig = json.loads(capsys.readouterr().out)
    assert doc["operations"] == orig["operations"] > 80
    assert doc["counts"] == orig["counts"] and doc["findings"]
    out = tmp_path / "bad.csv"
    code = main(["export", sql_ascii_url, "--layout", "idemview", "--now", NOW, "--key", "order-", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    with open(out, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    assert [r["idempotency_key"] for r in rows] == ["order-\\xe9\\xff-1"]
