"""The cross-database merge of effect records (issue 27, effects round 3) finds exactly what the SQL
joins find in one database, whatever the chunk boundaries: a generated ledger with keys shared by
several scopes, several records per key, multi-byte keys and double charges, its charges once in the
ledger's own SQLite file (SQL joins) and once in a second file (the merge, read a few rows per fetch
so that runs of equal links cross fetches), with the records behind doubled links found by their
primary key and, as for a table without one, by their links."""

import random
from datetime import timedelta

import pytest
from sqlalchemy import create_engine

from idemview.findings import effects as fx_mod
from idemview.findings.effects import Reconciler
from idemview.ledger import effects as ledger_fx
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load
from tests.presets.test_effects import charge, charges_md, load_reference, op, reference_layout

NOW = ANCHOR
H = timedelta(hours=1)


def _generated(seed: int = 27):
    r = random.Random(seed)
    keys = [f"k-{i:03d}" for i in range(60)] + ["ключ-1", "ключ-2", "Zeta", "zeta", "k-é", "k-e"]
    ops, charges = [], []
    oid = cid = 0
    for key in keys:
        for scope in r.sample(["s1", "s2", "s3"], r.choice([1, 1, 2, 3])):
            for _ in range(r.choice([1, 1, 1, 2, 3])):
                oid += 1
                status = r.choice(["succeeded", "succeeded", "failed", "running"])
                stuck = status == "running" and r.random() < 0.5
                ops.append(
                    op(
                        oid,
                        key,
                        status,
                        scope=scope,
                        locked=NOW - 2 * H if status == "running" else None,
                        lock_exp=(NOW - H if stuck else NOW + H) if status == "running" else None,
                    )
                )
        for _ in range(r.choice([0, 1, 1, 1, 2, 3])):
            cid += 1
            charges.append(charge(cid, key, at=NOW - timedelta(minutes=r.randint(1, 600))))
    for j in range(7):  # orphans, one of them charged twice
        for _ in range(2 if j == 3 else 1):
            cid += 1
            charges.append(charge(cid, f"lost-{j}"))
    return ops, charges


def _summary(findings) -> list:
    return sorted(
        (f.kind.value, f.scope, f.key, f.evidence[-1]["effect_records"], f.evidence[-1].get("first_effect_at"))
        for f in findings
    )


@pytest.mark.parametrize("by_rid", [True, False])
def test_merge_equals_sql_joins_across_fetches(tmp_path, monkeypatch, by_rid):
    ops, charges = _generated()
    same, ledger_only, fx_file = tmp_path / "same.db", tmp_path / "ledger.db", tmp_path / "charges.db"
    for path in (same, ledger_only):
        w = create_engine(f"sqlite:///{path}")
        load_reference(w, ops, [])
        if path == same:
            load(w, charges_md(), {"charges": charges})
        w.dispose()
    w = create_engine(f"sqlite:///{fx_file}")
    load(w, charges_md(), {"charges": charges})
    w.dispose()

    eng = open_engine(str(same))
    try:
        expected = _summary(Reconciler(Ledger(eng, reference_layout()), NOW).run())
    finally:
        eng.dispose()
    kinds = {k for k, *_ in expected}
    assert kinds == {"duplicate_effect", "hidden_success", "orphan_effect"}  # the data plants each

    monkeypatch.setattr(ledger_fx, "STREAM_BATCH", 3)  # runs of one link cross fetches
    if not by_rid:
        monkeypatch.setattr(fx_mod.Reconciler, "_rid_key", lambda self: None)
    eng, fx = open_engine(str(ledger_only)), open_engine(str(fx_file))
    try:
        rec = Reconciler(Ledger(eng, reference_layout(connection="x"), effects_engine=fx), NOW)
        assert not rec.fx.same_database
        assert (rec._rid_key() is not None) is by_rid
        assert _summary(rec.run()) == expected
    finally:
        eng.dispose()
        fx.dispose()


def test_started_stream_raises_in_the_consumer_and_returns_its_connection(tmp_path):
    """A statement that fails in the stream's thread fails where the rows are read; the connection
    goes back to the pool either way."""
    from sqlalchemy import text

    path = tmp_path / "x.db"
    w = create_engine(f"sqlite:///{path}")
    with w.begin() as c:
        c.execute(text("CREATE TABLE t (a TEXT)"))
        c.execute(text("INSERT INTO t VALUES ('b'), ('a'), ('c')"))
    w.dispose()
    eng = open_engine(str(path))
    try:
        rows = [r for chunk in ledger_fx.StartedStream(eng, text("SELECT a FROM t ORDER BY a")) for r in chunk]
        assert rows == [(b"a",), (b"b",), (b"c",)]
        bad = ledger_fx.StartedStream(eng, text("SELECT nope FROM t"))
        with pytest.raises(Exception, match="nope"):
            list(bad)
        assert eng.pool.checkedout() == 0
        unread = ledger_fx.StartedStream(eng, text("SELECT a FROM t"))
        unread.close()
        assert eng.pool.checkedout() == 0
    finally:
        eng.dispose()
