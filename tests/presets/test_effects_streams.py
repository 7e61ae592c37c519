"""The merge's link streams (issue 27, effects round 4): the ledger's links read per scope in the order
of its (scope, key) index — no sort — in exact byte order whatever the keys (non-ASCII, case-differing,
prefixes, a NULL scope); the database sorts when no index serves the order (too many scopes, a NOCASE
key); a server's stream fetched ahead in its thread stops, fails and returns its connection like the
plain one; and the merge against PostgreSQL (bytea in binary results) and MySQL/MariaDB under both
dialect names finds what the SQL joins find in one database, chunk boundaries anywhere."""

import pytest
from sqlalchemy import Column, Index, Integer, MetaData, String, Table, create_engine, text
from sqlalchemy.engine import make_url

from idemview.findings.effects import Reconciler
from idemview.layouts.layout import load_preset, parse_layout
from idemview.ledger import effects as ledger_fx
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.ledgers import load
from tests.presets.test_effects import charges_md, load_reference, op, reference_layout
from tests.presets.test_effects_merge_chunks import NOW, _generated, _summary

KEYS = ["Zeta", "zeta", "ZETA", "ключ-1", "ключ-10", "k-é", "k-e", "k-f", "k", "k-", "a", "B", "~", "€"]


def _ledger(path, rows):
    w = create_engine(f"sqlite:///{path}")
    load_reference(w, rows, [])
    w.dispose()


def _links(stream) -> list:
    return [r[0] for chunk in stream for r in chunk]


def _open(led, batch=None):
    scope = (led.scope_expr, led.ops.c.scope)
    return ledger_fx.IndexOrderedStream.open(led.engine, led.ops, [led.key_expr], led.key_expr, scope, batch)


def test_per_scope_streams_merge_in_byte_order(tmp_path):
    rows, i = [], 0
    for n, key in enumerate(KEYS):
        for scope in ["s1", "s2", "S1", "é"][: 1 + n % 4]:
            i += 1
            rows.append(op(i, key, "succeeded", scope=scope))
    _ledger(tmp_path / "l.db", rows)
    eng = open_engine(str(tmp_path / "l.db"))
    try:
        led = Ledger(eng, load_preset("idemview"))
        stream = _open(led, batch=2)  # chunks of 2: the merged scopes cross every fetch
        assert stream is not None and len(stream.groups) == 4
        got = _links(stream)
        assert got == sorted(r["idempotency_key"].encode() for r in rows)
        assert eng.pool.checkedout() == 0
    finally:
        eng.dispose()


def test_order_not_served_lets_the_database_sort(tmp_path, monkeypatch):
    rows = [op(i + 1, k, "succeeded", scope=f"s{i % 3}") for i, k in enumerate(KEYS)]
    _ledger(tmp_path / "l.db", rows)
    eng = open_engine(str(tmp_path / "l.db"))
    try:
        led = Ledger(eng, load_preset("idemview"))
        monkeypatch.setattr(ledger_fx, "MAX_SCOPE_STREAMS", 2)  # three scopes: too many
        assert _open(led) is None
        monkeypatch.setattr(ledger_fx, "MAX_SCOPE_STREAMS", 3)
        assert _links(_open(led)) == sorted(k.encode() for k in KEYS)
        assert eng.pool.checkedout() == 0
    finally:
        eng.dispose()


def _loose_table(path, nocase: bool, rows) -> None:
    md = MetaData()
    t = Table(
        "operations",
        md,
        Column("id", Integer, primary_key=True),
        Column("scope", String(64), nullable=True),
        Column("idempotency_key", String(128, collation="NOCASE" if nocase else None), nullable=False),
        Column("status", String(16), nullable=False),
    )
    Index("ix_sk", t.c.scope, t.c.idempotency_key)
    w = create_engine(f"sqlite:///{path}")
    load(w, md, {"operations": rows})
    w.dispose()


LOOSE_LAYOUT = """
[layout]
name = "loose"

[operations]
table = "operations"
row_id = "id"
key = ["idempotency_key"]
scope = ["scope"]

[operations.status]
column = "status"
map = { succeeded = "completed" }
default = "unknown"

[attempts]
source = "none"
"""


@pytest.mark.parametrize("nocase", [False, True])
def test_null_scope_and_nocase_key(tmp_path, nocase):
    """A NULL scope is read as a stream of its own; a NOCASE key's index does not give byte order, so
    the database sorts (and 'Zeta' and 'zeta' stay apart either way)."""
    rows = [
        {"id": i + 1, "scope": [None, "s1", "s2"][i % 3], "idempotency_key": k, "status": "succeeded"}
        for i, k in enumerate(KEYS)
    ]
    _loose_table(tmp_path / "l.db", nocase, rows)
    eng = open_engine(str(tmp_path / "l.db"))
    try:
        led = Ledger(eng, parse_layout(LOOSE_LAYOUT, "test"))
        stream = _open(led)
        if nocase:
            assert stream is None
        else:
            assert stream is not None and len(stream.groups) == 3  # s1, s2 and NULL
            assert _links(stream) == sorted(k.encode() for k in KEYS)
    finally:
        eng.dispose()


def test_started_stream_reading_ahead(tmp_path):
    path = tmp_path / "x.db"
    w = create_engine(f"sqlite:///{path}")
    with w.begin() as c:
        c.execute(text("CREATE TABLE t (a TEXT)"))
        c.execute(text("INSERT INTO t VALUES " + ", ".join(f"('k{i:03d}')" for i in range(50))))
    w.dispose()
    eng = open_engine(str(path))
    try:
        q = text("SELECT a FROM t ORDER BY a")
        rows = [r for chunk in ledger_fx.StartedStream(eng, q, batch=3, read_ahead=2) for r in chunk]
        assert rows == [(f"k{i:03d}".encode(),) for i in range(50)]
        with pytest.raises(Exception, match="nope"):
            list(ledger_fx.StartedStream(eng, text("SELECT nope FROM t"), read_ahead=2))
        early = ledger_fx.StartedStream(eng, q, batch=3, read_ahead=1)
        it = iter(early)
        assert next(it) == [(b"k000",), (b"k001",), (b"k002",)]
        early.close()  # the thread waits on a full queue: it stops
        assert eng.pool.checkedout() == 0
    finally:
        eng.dispose()


def _merge_against(tmp_path, monkeypatch, fx_url: str, writable_url: str):
    ops, charges = _generated()
    same, ledger_only = tmp_path / "same.db", tmp_path / "ledger.db"
    for path in (same, ledger_only):
        w = create_engine(f"sqlite:///{path}")
        load_reference(w, ops, [])
        if path == same:
            load(w, charges_md(), {"charges": charges})
        w.dispose()
    w = create_engine(writable_url)
    load(w, charges_md(), {"charges": charges})
    w.dispose()
    eng = open_engine(str(same))
    try:
        expected = _summary(Reconciler(Ledger(eng, reference_layout()), NOW).run())
    finally:
        eng.dispose()
    monkeypatch.setattr(ledger_fx, "STREAM_BATCH", 3)  # runs of one link cross fetches on both sides
    eng, fx = open_engine(str(ledger_only)), open_engine(fx_url)
    try:
        rec = Reconciler(Ledger(eng, reference_layout(connection="x"), effects_engine=fx), NOW)
        assert _summary(rec.run()) == expected
        assert eng.pool.checkedout() == 0 and fx.pool.checkedout() == 0
    finally:
        eng.dispose()
        fx.dispose()
    return expected


@pytest.mark.postgres
def test_merge_with_postgresql_effects_equals_sql_joins(tmp_path, monkeypatch, pg_url):
    expected = _merge_against(tmp_path, monkeypatch, pg_url, pg_url)
    assert {k for k, *_ in expected} == {"duplicate_effect", "hidden_success", "orphan_effect"}


@pytest.mark.mysql
@pytest.mark.parametrize("dialect", ["mysql", "mariadb"])
def test_merge_with_mysql_family_effects_equals_sql_joins(tmp_path, monkeypatch, mysql_url, dialect):
    fx_url = make_url(mysql_url).set(drivername=f"{dialect}+pymysql").render_as_string(hide_password=False)
    expected = _merge_against(tmp_path, monkeypatch, fx_url, mysql_url)
    assert {k for k, *_ in expected} == {"duplicate_effect", "hidden_success", "orphan_effect"}


def _naive_merge(fx_rows, op_rows, has_recent):
    """The reference: sets and dicts over both sides whole."""
    ops = {}
    for link, *rid in op_rows:
        ops.setdefault(link, []).append(rid[0] if rid else None)
    orphans, dups, rids = {}, {}, []
    for link, n, *recent in fx_rows:
        if link in ops:
            if n >= 2:
                dups[link.decode()] = n
                rids += ops[link]
        elif (recent[0] if has_recent else n) > 0:
            orphans[link.decode()] = recent[0] if has_recent else n
    return orphans, dups, rids


@pytest.mark.parametrize("seed", range(12))
def test_block_merge_equals_naive_merge(monkeypatch, seed):
    """merge_links, whatever the block size and the chunks of either side, finds what sets find:
    runs of one link over several ledger records, links on one side only, either side ending first."""
    import random

    from idemview.findings import effects as fx_mod

    r = random.Random(seed)
    universe = sorted(
        {f"{r.choice('abcXYZ')}{r.randint(0, 400):03d}{r.choice(['', 'é', 'ю'])}".encode() for _ in range(600)}
    )
    op_rows, fx_rows, rid = [], [], 0
    for link in universe:
        roll = r.random()
        if roll < 0.8:  # in the ledger, once or several times
            for _ in range(r.choice([1, 1, 1, 2, 3])):
                rid += 1
                op_rows.append((link, rid))
        if roll > 0.1:  # effect records
            n = r.choice([1, 1, 1, 1, 2, 3])
            fx_rows.append((link, n, r.choice([0, n])))
    if seed % 3 == 0:
        fx_rows = fx_rows[: len(fx_rows) // 2]  # the effect side ends first
    if seed % 3 == 1:
        op_rows = op_rows[: len(op_rows) // 2]  # the ledger ends first

    def chunks(rows):
        out, i = [], 0
        while i < len(rows):
            k = r.choice([1, 2, 3, 7, 64, 200])
            out.append(rows[i : i + k])
            i += k
        return out

    monkeypatch.setattr(fx_mod, "MERGE_BLOCK", r.choice([1, 2, 5, 64]))
    for has_recent in (False, True):
        for with_rid in (False, True):
            ops = op_rows if with_rid else [(link,) for link, _ in op_rows]
            got = fx_mod.merge_links(chunks(fx_rows), chunks(ops), has_recent, with_rid)
            orphans, dups, rids = _naive_merge(fx_rows, ops, has_recent)
            assert got[0] == orphans and got[1] == dups
            assert got[2] == (rids if with_rid else None)


def test_statement_without_a_plan_counts_as_sorted(tmp_path):
    """A statement SQLite cannot explain with placeholder values (an expanding IN list) is not taken
    for an index-served one: the database sorts, nothing fails."""
    from sqlalchemy import select

    _ledger(tmp_path / "l.db", [op(1, "k", "succeeded")])
    eng = open_engine(str(tmp_path / "l.db"))
    try:
        led = Ledger(eng, load_preset("idemview"))
        with eng.connect() as c:
            q = select(led.key_expr).where(led.scope_expr == "s1", led.key_expr.in_(["a", "b"]))
            assert ledger_fx._plan(c, q) == ["USE TEMP B-TREE (no plan)"]
            assert not ledger_fx._served(c, q.order_by(led.key_expr))
            assert ledger_fx._served(c, select(led.key_expr).where(led.scope_expr == "s1").order_by(led.key_expr))
    finally:
        eng.dispose()
