"""Findings weighed by what the action does (DESIGN §5.1) and the ledger audit ``secret_at_rest`` (§5),
on every engine (SQLite, PostgreSQL, MariaDB under both ``mysql`` and ``mariadb`` names).

The fixture is the reference layout (preset ``idemview``) with one duplicate effect per action class and
a request column that keeps a card number, a bearer token and an e-mail address in plain text. Those
planted values must never appear in scan output, JSON or CSV.
"""

from __future__ import annotations

import csv
import json
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, insert
from sqlalchemy.engine import make_url

from idemview.cli import main
from idemview.domain.filters import Filter
from idemview.domain.model import FindingKind, Severity
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.services.demo import reference_metadata
from tests.conftest import ANCHOR

K = FindingKind
CARD = "4111111111111111"  # a public test number (passes Luhn)
TOKEN = "sk_live_" + "9f" * 12
EMAIL = "ada.lovelace@example.org"
T0 = ANCHOR.replace(tzinfo=None) - timedelta(hours=2)

#: kind -> expected (action, severity of its duplicate effect)
DOUBLES = {
    "billing.tasks.refund_order": ("money", "critical"),
    "MyApp.Workers.SendWelcomeEmail": ("notification", "high"),
    "GrantAccessCommand": ("access", "critical"),
    "reports.render_monthly": ("read", "low"),
    "loans.approve_application": ("approval", "critical"),
    "HardWorker": ("unknown", "critical"),
}


def _fill(engine, n_clean: int = 30) -> None:
    md = reference_metadata()
    md.drop_all(engine)
    md.create_all(engine)
    ops, atts = [], []
    i = 0
    for kind in DOUBLES:
        i += 1
        key = f"dup-{i}"
        ops.append(_op(i, key, kind, {"note": "ok"}))
        for n in (1, 2):
            atts.append(_att(len(atts) + 1, key, n, f"eff-{i}-{n}"))
    for j in range(n_clean):
        i += 1
        body = {"amount": 100 + j, "customer": {"id": f"cus_{j}"}}
        if j % 3 == 0:  # a third of the newest rows keep a card, a token and an address in plain text
            body = {"card": {"number": CARD}, "headers": {"Authorization": f"Bearer {TOKEN}"}, "to": EMAIL}
        ops.append(_op(i, f"op-{j}", "payment.capture", body, minutes=j))
        atts.append(_att(len(atts) + 1, f"op-{j}", 1, f"ch-{j}"))
    t = md.tables
    with engine.begin() as c:
        c.execute(insert(t["operations"]), ops)
        c.execute(insert(t["attempts"]), atts)


def _op(i, key, kind, body, minutes=0):
    at = T0 + timedelta(minutes=minutes)
    return {
        "id": i,
        "scope": "acme",
        "idempotency_key": key,
        "kind": kind,
        "status": "succeeded",
        "request_hash": f"h{i}",
        "intent_ref": None,
        "effect_ref": None,
        "attempt_count": 1,
        "created_at": at,
        "updated_at": at,
        "completed_at": at,
        "locked_at": None,
        "lock_expires_at": None,
        "expires_at": at + timedelta(days=1),
        "request_body": json.dumps(body),
        "response_body": None,
        "error": None,
    }


def _att(i, key, n, eff):
    at = T0 + timedelta(seconds=10 * n)
    return {
        "id": i,
        "scope": "acme",
        "idempotency_key": key,
        "attempt_no": n,
        "started_at": at,
        "finished_at": at + timedelta(seconds=1),
        "outcome": "succeeded",
        "effect_ref": eff,
        "worker": "w1",
        "error": None,
    }


@pytest.fixture(params=["sqlite", "postgresql", "mysql", "mariadb"])
def ledger_url(request, tmp_path):
    """URL of the fixture ledger on each engine; MariaDB under both SQLAlchemy dialect names."""
    name = request.param
    if name == "sqlite":
        path = tmp_path / "l.db"
        eng = create_engine(f"sqlite:///{path}")
        _fill(eng)
        eng.dispose()
        yield str(path)
        return
    url = request.getfixturevalue("pg_url" if name == "postgresql" else "mysql_url")
    eng = create_engine(url)
    _fill(eng)
    eng.dispose()
    if name == "mariadb":
        url = make_url(url).set(drivername="mariadb+pymysql").render_as_string(hide_password=False)
    yield url
    eng = create_engine(url)
    reference_metadata().drop_all(eng)
    eng.dispose()


def _scan(url, **kw):
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("idemview"))
        fe = FindingEngine(led, ANCHOR)
        for k, v in kw.items():
            setattr(fe, k, v)
        return fe.run(), led
    finally:
        eng.dispose()


def test_severity_follows_the_class_on_every_engine(ledger_url):
    fs, _ = _scan(ledger_url)
    dups = {f.key: (f.action, f.severity.value) for f in fs if f.kind == K.DUPLICATE_EFFECT}
    assert dups == {f"dup-{i}": v for i, v in enumerate(DOUBLES.values(), start=1)}
    # other kinds keep their severity, and still carry the action
    assert all(f.action == "money" for f in fs if f.kind == K.EXPIRED_KEY)


def test_regulated_decisions_say_a_person_decides(ledger_url):
    fs, _ = _scan(ledger_url)
    appr = next(f for f in fs if f.kind == K.DUPLICATE_EFFECT and f.action == "approval")
    assert appr.regulated and "a person decides whether anything is repeated or reversed" in appr.explanation
    money = next(f for f in fs if f.kind == K.DUPLICATE_EFFECT and f.action == "money")
    assert not money.regulated and "a person decides" not in money.explanation
    assert appr.to_json()["regulated"] is True and "regulated" not in money.to_json()


def test_user_rules_and_regulated_classes_from_the_layout(tmp_path, sqlite_db):
    from dataclasses import replace

    from idemview.domain.actions import ActionRules

    writable, path = sqlite_db
    _fill(writable)
    lay = load_preset("idemview")
    rules = ActionRules.from_dict(
        {"rules": [{"match": "^reports\\.", "action": "money"}], "regulated": ["notification"]}
    )
    eng = open_engine(path)
    try:
        led = Ledger(eng, replace(lay, actions=rules))
        fs = FindingEngine(led, ANCHOR).run([K.DUPLICATE_EFFECT])
    finally:
        eng.dispose()
    by = {f.key: f for f in fs}
    assert (by["dup-4"].action, by["dup-4"].severity) == ("money", Severity.CRITICAL)  # the rule beat "render"
    assert by["dup-2"].regulated and "a person decides" in by["dup-2"].explanation
    assert not by["dup-1"].regulated


def test_action_filter_narrows_operations_and_reads_out(sqlite_db):
    writable, path = sqlite_db
    _fill(writable)
    eng = open_engine(path)
    try:
        led = Ledger(eng, load_preset("idemview"))
        flt = Filter(findings=[K.DUPLICATE_EFFECT], actions=["money"])
        keys = {o.key for o in led.iter_operations(flt, now=ANCHOR)}
        assert keys == {"dup-1"}
        unknown = {o.key for o in led.iter_operations(Filter(actions=["unknown"]))}
        assert unknown == {"dup-6"}
    finally:
        eng.dispose()
    assert flt.sentence() == "Operations with a duplicate effect that moved money"
    assert Filter.from_dict(flt.to_dict()) == flt
    with pytest.raises(ValueError):
        Filter(actions=["cash"])


def test_secret_at_rest_on_every_engine_never_shows_the_value(ledger_url, capsys, tmp_path):
    fs, _ = _scan(ledger_url)
    sec = [f for f in fs if f.kind == K.SECRET_AT_REST]
    cols = {f.column: f for f in sec}
    assert set(cols) == {
        "request_body $.card.number",
        "request_body $.headers.Authorization",
        "request_body $.to",
    }
    card = cols["request_body $.card.number"]
    ev = card.evidence[0]
    assert (ev["rows_read"], ev["rows_with"], ev["sample"]) == (36, 10, True)
    assert ev["kinds"] == [{"kind": "card", "values": 10}]
    assert card.severity == Severity.HIGH and (card.scope, card.key) == ("", "")
    assert "10 of the 36 newest rows read (a sample" in card.explanation
    assert "store a hash of the request (or the payment provider's token)" in card.explanation
    assert set(ev["example_keys"]) <= {f"op-{j}" for j in range(0, 30, 3)} and ev["example_keys"]
    for f in sec:
        blob = json.dumps(f.to_json()) + f.explanation
        assert CARD not in blob and TOKEN not in blob and EMAIL not in blob

    # the command line: JSON has "column" and null scope and key; no planted value in stdout, JSON or CSV
    assert main(["scan", ledger_url, "--layout", "idemview", "--now", ANCHOR.isoformat(), "--format", "json"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    js = [f for f in doc["findings"] if f["kind"] == "secret_at_rest"]
    assert {f["column"] for f in js} == set(cols) and all(f["scope"] is None and f["key"] is None for f in js)
    assert main(["scan", ledger_url, "--layout", "idemview", "--now", ANCHOR.isoformat()]) == 0
    out += capsys.readouterr().out
    csv_path = tmp_path / "f.csv"
    argv = ["export", ledger_url, "--layout", "idemview", "--now", ANCHOR.isoformat(), "--rows", "findings"]
    assert main([*argv, "--out", str(csv_path)]) == 0
    out += capsys.readouterr().out
    text = csv_path.read_text(encoding="utf-8")
    for blob in (out, text):
        assert CARD not in blob and TOKEN not in blob and EMAIL not in blob
    rows = list(csv.DictReader(text.splitlines()))
    assert "action" in rows[0]
    assert {r["action"] for r in rows if r["kind"] == "duplicate_effect"} == {a for a, _s in DOUBLES.values()}
    assert sum(r["kind"] == "secret_at_rest" for r in rows) == 3


def test_audit_sample_is_bounded_and_can_be_switched_off(sqlite_db):
    writable, path = sqlite_db
    _fill(writable)
    fs, _ = _scan(path, audit_rows=6)
    card = next(f for f in fs if f.kind == K.SECRET_AT_REST and f.column == "request_body $.card.number")
    # newest 6 operations by created_at: op-29 … op-24, of which op-27 and op-24 keep a card
    assert (card.evidence[0]["rows_read"], card.evidence[0]["rows_with"]) == (6, 2)
    assert "at most 6 rows" in card.explanation
    fs, _ = _scan(path, audit_rows=0)
    assert not [f for f in fs if f.kind == K.SECRET_AT_REST]


def test_a_clean_ledger_has_no_secret_at_rest(sqlite_db):
    writable, path = sqlite_db
    _fill(writable, n_clean=2)  # op-0 keeps a card: drop it
    with writable.begin() as c:
        c.exec_driver_sql("DELETE FROM operations WHERE idempotency_key = 'op-0'")
    fs, _ = _scan(path)
    assert [f for f in fs if f.kind == K.SECRET_AT_REST] == []


def test_many_findings_read_their_kinds_in_one_pass(sqlite_db, monkeypatch):
    """Above WHOLE_PASS_KEYS operations the kinds come from one streamed pass: same classes."""
    import idemview.findings.actions as fa

    writable, path = sqlite_db
    _fill(writable)
    few, _ = _scan(path)
    monkeypatch.setattr(fa, "WHOLE_PASS_KEYS", 0)
    many, _ = _scan(path)
    assert [(f.kind, f.key, f.action, f.severity) for f in many] == [(f.kind, f.key, f.action, f.severity) for f in few]
    assert {f.action for f in many if f.kind == K.DUPLICATE_EFFECT} == {a for a, _s in DOUBLES.values()}
