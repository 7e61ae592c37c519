"""The demo ledger: every planted incident is found with the right kind and key, on every engine,
and the same content gives identical findings on SQLite, PostgreSQL and MariaDB."""

import json
from collections import Counter

from idemview.domain.model import FindingKind
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.services.demo import generate, write_demo
from tests.conftest import ANCHOR


def _scan(url, now=ANCHOR):
    eng = open_engine(url)
    led = Ledger(eng, load_preset("idemview"))
    fs = FindingEngine(led, now).run()
    counts = led.counts()
    eng.dispose()
    return fs, counts


def test_demo_planted_incidents_are_found_exactly(db):
    writable, url = db
    planted = generate(writable, operations=600, seed=11)
    fs, (n_ops, n_att) = _scan(url)
    got = {(f.kind.value, f.scope, f.key) for f in fs}
    want = {(k, s, key) for k, refs in planted.incidents.items() for s, key in refs}
    assert got == want
    ledger_kinds = {k.value for k in FindingKind} - {"hidden_success", "orphan_effect"}  # need [effects]
    assert ledger_kinds <= {f.kind.value for f in fs}, "every ledger-only kind is planted"
    assert n_ops == planted.operations and n_att == planted.attempts


def test_same_content_gives_identical_findings_on_every_engine(tmp_path, pg_url, mysql_url):
    from sqlalchemy import create_engine

    outputs = {}
    sqlite_path = tmp_path / "l.db"
    for name, url in (("sqlite", str(sqlite_path)), ("postgresql", pg_url), ("mysql", mysql_url)):
        w = create_engine(f"sqlite:///{sqlite_path}" if name == "sqlite" else url)
        generate(w, operations=300, seed=5)
        w.dispose()
        fs, counts = _scan(url)
        outputs[name] = json.dumps({"counts": counts, "findings": [f.to_json() for f in fs]}, sort_keys=True)
    assert outputs["sqlite"] == outputs["postgresql"] == outputs["mysql"]


def test_same_seed_same_file(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    write_demo(a, operations=200, seed=3)
    write_demo(b, operations=200, seed=3)
    assert a.read_bytes() == b.read_bytes()
    write_demo(b, operations=200, seed=4)
    assert a.read_bytes() != b.read_bytes()


def test_demo_severities_and_replay_escalation(tmp_path):
    path = tmp_path / "d.db"
    write_demo(path, operations=100, seed=1)
    fs, _ = _scan(str(path))
    sev = Counter((f.kind.value, f.severity.value) for f in fs)
    # two planted replays succeeded (critical), one was rejected (high)
    assert sev[("replay_after_expiry", "critical")] == 2
    assert sev[("replay_after_expiry", "high")] == 1
    # a duplicate effect weighs by what the action did (DESIGN §5.1): the double charges, refund and
    # access grant are critical, the double welcome e-mail high, the double report render low
    dups = Counter((f.action, f.severity.value) for f in fs if f.kind == FindingKind.DUPLICATE_EFFECT)
    assert dups == {
        ("money", "critical"): 7,
        ("access", "critical"): 1,
        ("notification", "high"): 1,
        ("read", "low"): 1,
    }
    assert {f.action for f in fs if f.kind == FindingKind.REPLAY_AFTER_EXPIRY} == {"money"}
    dup = next(f for f in fs if f.kind == FindingKind.DUPLICATE_EFFECT)
    succeeded = [e for e in dup.evidence if e.get("outcome") == "succeeded"]
    assert len(succeeded) >= 2 and len({e["effect_ref"] for e in succeeded}) >= 2


def test_findings_depend_on_now(tmp_path):
    """Half a day later the traffic's keys are not yet expired; three days later they all are."""
    from datetime import timedelta

    path = tmp_path / "d.db"
    planted = write_demo(path, operations=100, seed=2)
    early, _ = _scan(str(path), ANCHOR)
    late, _ = _scan(str(path), ANCHOR + timedelta(days=3))
    n_early = sum(1 for f in early if f.kind == FindingKind.EXPIRED_KEY)
    n_late = sum(1 for f in late if f.kind == FindingKind.EXPIRED_KEY)
    assert n_early == len(planted.incidents["expired_key"])
    assert n_late == planted.operations - 1  # all but the record whose expires_at is NULL


def test_keys_differing_only_in_case_accent_or_trailing_space_stay_apart(db):
    """MariaDB's default collation would merge these keys into false duplicate effects."""
    from datetime import timedelta

    from sqlalchemy import insert

    from idemview.services.demo import reference_metadata

    writable, url = db
    md = reference_metadata()
    md.drop_all(writable)
    md.create_all(writable)
    t0 = ANCHOR.replace(tzinfo=None) - timedelta(minutes=30)
    keys = ["Order-ABC", "order-abc", "café", "cafe", "trail ", "trail"]
    ops = [
        {
            "id": i + 1,
            "scope": "s",
            "idempotency_key": k,
            "kind": "payment.capture",
            "status": "succeeded",
            "request_hash": f"h{i}",
            "intent_ref": f"ord-{i}",
            "effect_ref": f"ch_{i}",
            "attempt_count": 1,
            "created_at": t0,
            "expires_at": t0 + timedelta(days=1),
        }
        for i, k in enumerate(keys)
    ]
    with writable.begin() as c:
        c.execute(insert(md.tables["operations"]), ops)
    fs, (n_ops, _n) = _scan(url)
    assert n_ops == 6
    assert fs == []
    eng = open_engine(url)
    led = Ledger(eng, load_preset("idemview"))
    assert [op.key for op in led.records("s", "trail ")] == ["trail "]
    assert [op.key for op in led.records("s", "Order-ABC")] == ["Order-ABC"]
    eng.dispose()
