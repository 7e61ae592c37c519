"""The demo's hidden successes are payments whose effect record is a charge (issue #20, item 13): the
effects file charges operations of a charging kind the ledger says failed, timed out or stuck, and a
scan with the demo's layout finds exactly those, each on a charging kind. Before, the planted hidden
success was an ``email.send`` charged by the payment provider (the demo planted no payment the ledger
did not see complete, so the effects file picked failed e-mails)."""

from __future__ import annotations

import sqlite3

import pytest

from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_layout
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.services.demo import write_demo
from idemview.services.demo_effects import CHARGING, effects_path_for, layout_path_for
from tests.conftest import ANCHOR


@pytest.mark.parametrize(("operations", "seed"), [(2000, 7), (300, 11)])  # the shipped demo, and a variant
def test_hidden_successes_are_charges_of_payments(tmp_path, operations, seed):
    db = tmp_path / "demo.db"
    planted = write_demo(db, operations=operations, seed=seed, anchor=ANCHOR)
    hidden = set(planted.incidents["hidden_success"])
    assert len(hidden) == 3

    with sqlite3.connect(db) as c:
        rows = {
            (s, k): (kind, status)
            for s, k, kind, status in c.execute("SELECT scope, idempotency_key, kind, status FROM operations")
        }
        timed = {tuple(x) for x in c.execute("SELECT scope, idempotency_key FROM attempts WHERE outcome='timed_out'")}
    assert all(rows[sk][0] in CHARGING for sk in hidden), {sk: rows[sk] for sk in hidden}
    # one of each way the ledger misses a charge: failed, timed out (then failed), stuck in progress
    assert sorted(rows[sk][1] for sk in hidden) == ["failed", "failed", "running"]
    assert len(hidden & timed) == 1
    with sqlite3.connect(effects_path_for(db)) as c:
        charged = {k: ref for ref, k in c.execute("SELECT charge_id, idempotency_key FROM charges")}
    assert all(charged[k].startswith("ch_") for _s, k in hidden)

    eng = open_engine(str(db))
    try:
        led = Ledger(eng, load_layout(str(layout_path_for(db))), name="demo")
        found = FindingEngine(led, ANCHOR).run(["hidden_success"])
    finally:
        eng.dispose()
    assert {(f.scope, f.key) for f in found} == hidden
    assert {rows[(f.scope, f.key)][0] for f in found} <= set(CHARGING)
    assert all(f.action == "money" for f in found)
