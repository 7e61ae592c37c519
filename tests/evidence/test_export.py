"""Evidence export from a ledger (issue 4): exactly what the filter shows, masked, with a manifest
that proves what was exported; no planted secret (nor any 6-character piece of one) anywhere."""

import csv
import hashlib
import json
import logging
import sqlite3
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, insert

from idemview.cli import main
from idemview.domain.filters import Filter
from idemview.domain.model import FindingKind, Status
from idemview.evidence.plan import export_evidence
from idemview.evidence.writer import verify_evidence
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.masking.masker import Masker
from idemview.services.demo import generate, reference_metadata, write_demo
from tests.conftest import ANCHOR

NOW = "2026-11-30T12:00:00Z"


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    p = tmp_path_factory.mktemp("demo") / "demo.db"
    write_demo(p, operations=300, seed=21)
    return p


def planted(path, kind):
    with sqlite3.connect(path) as c:
        return {
            (s, k)
            for s, k in c.execute("SELECT scope, idempotency_key FROM idemview_demo_planted WHERE kind = ?", (kind,))
        }


def test_cli_export_duplicate_effect_gives_exactly_the_planted_operations(demo, tmp_path, capsys):
    out = tmp_path / "dup.csv"
    code = main(["export", str(demo), "--now", NOW, "--finding", "duplicate_effect", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    rows = read_csv(out)
    assert {(r["scope"], r["idempotency_key"]) for r in rows} == planted(demo, "duplicate_effect")
    assert all("duplicate_effect" in r["findings"].split() for r in rows)
    manifest = json.loads((tmp_path / "dup.csv.manifest.json").read_text())
    assert manifest["csv"]["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert manifest["row_count"] == len(rows)
    assert manifest["filter"]["structured"]["findings"] == ["duplicate_effect"]
    assert manifest["filter"]["sentence"] == Filter(findings=[FindingKind.DUPLICATE_EFFECT]).sentence()
    assert manifest["now"] == NOW
    assert manifest["layout"]["name"] == "idemview" and len(manifest["layout"]["sha256"]) == 64
    assert verify_evidence(out)


def test_attempts_and_findings_rows(demo, tmp_path):
    eng = open_engine(str(demo))
    led = Ledger(eng, load_preset("idemview"))
    flt = Filter(findings=[FindingKind.RETRY_STORM])
    res = export_evidence(led, flt, tmp_path / "att.csv", rows="attempts", now=ANCHOR)
    rows = read_csv(res.path)
    keys = planted(demo, "retry_storm")
    assert {(r["scope"], r["idempotency_key"]) for r in rows} == keys
    assert len(rows) == 8 * len(keys)  # 7 failures and a success each
    assert sorted({r["outcome"] for r in rows}) == ["failed", "succeeded"]
    res = export_evidence(led, Filter(statuses=[Status.FAILED]), tmp_path / "f.csv", rows="findings", now=ANCHOR)
    rows = read_csv(res.path)
    assert {r["kind"] for r in rows} == {"unresolved_failure"}
    assert {(r["scope"], r["idempotency_key"]) for r in rows} == planted(demo, "unresolved_failure")
    eng.dispose()


def test_export_on_postgres_streams_the_same_rows(pg_url, tmp_path):
    w = create_engine(pg_url)
    generate(w, operations=200, seed=4)
    w.dispose()
    sq = tmp_path / "s.db"
    write_demo(sq, operations=200, seed=4)
    outs = []
    for url in (pg_url, str(sq)):
        eng = open_engine(url)
        led = Ledger(eng, load_preset("idemview"))
        r = export_evidence(
            led,
            Filter(statuses=[Status.COMPLETED]),
            tmp_path / f"o{len(outs)}.csv",
            rows="attempts",
            now=ANCHOR,
            masker=Masker(key=b"k" * 32),
        )
        outs.append(sorted(tuple((k, v) for k, v in row.items() if k != "ledger") for row in read_csv(r.path)))
        eng.dispose()
    assert outs[0] == outs[1] and len(outs[0]) > 200


# ------------------------------------------------------------------------------ planted secrets

SECRETS = {
    "card": "4111111111111111",
    "card_spaced": "5105 1051 0510 5100",
    "iban": "DE89370400440532013000",
    "email": "marguerite.okafor@zyxwvut.org",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIiwicm9sZSI6ImFkbWluIn0.Qm9ndXNTaWduYXR1cmVWYWx1ZQ",
    "bearer": "Zm9vYmFyYmF6cXV4cXV1eGNvcmdl",
    "aws": "AKIAQWERTYUIOPASDFGH",
    "stripe": "sk_live_51HqLyjWDarjtT1zdp7dc",
    "dsn_password": "Tr0ub4dor-and-3",
    "url_token": "tkn9f8e7d6c5b4a3",
}
LOOKALIKES = {
    "order": "ORD-3141592653589793",  # 16 digits that fail Luhn
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "ts": "2026-11-30T11:59:59Z",
    "ms": "1764503999000",
}


def secrets_ledger(path):
    eng = create_engine(f"sqlite:///{path}")
    md = reference_metadata()
    md.create_all(eng)
    t0 = ANCHOR.replace(tzinfo=None) - timedelta(hours=1)
    body = {
        "customer": {"email": SECRETS["email"], "iban": "see notes"},
        "payment": {"card": SECRETS["card"], "notes": f"backup card {SECRETS['card_spaced']}, IBAN {SECRETS['iban']}"},
        "headers": {"Authorization": f"Bearer {SECRETS['bearer']}", "X-Trace": LOOKALIKES["uuid"]},
        "order": LOOKALIKES["order"],
        "at": LOOKALIKES["ts"],
        "ms": LOOKALIKES["ms"],
        "session_jwt": SECRETS["jwt"],
    }
    err = (
        f"POST https://api.example.net/v1/charge?access_token={SECRETS['url_token']} failed; "
        f"db postgresql://svc:{SECRETS['dsn_password']}@db.internal/pay; key {SECRETS['aws']}; "
        f"stripe {SECRETS['stripe']}; order {LOOKALIKES['order']}"
    )
    ops = []
    for i in range(2):
        ops.append(
            {
                "id": i + 1,
                "scope": "acme",
                "idempotency_key": f"k-{i}",
                "kind": "payment.capture",
                "status": "failed",
                "request_hash": "h",
                "intent_ref": LOOKALIKES["order"],
                "effect_ref": None,
                "attempt_count": 1,
                "created_at": t0,
                "updated_at": t0,
                "expires_at": t0 + timedelta(days=1),
                "request_body": json.dumps(body),
                "response_body": json.dumps({"email": SECRETS["email"]}),
                "error": err,
            }
        )
    atts = [
        {
            "id": i + 1,
            "scope": "acme",
            "idempotency_key": f"k-{i}",
            "attempt_no": 1,
            "started_at": t0,
            "finished_at": t0,
            "outcome": "failed",
            "request_hash": "h",
            "worker": "w1",
            "error": err,
        }
        for i in range(2)
    ]
    with eng.begin() as c:
        c.execute(insert(md.tables["operations"]), ops)
        c.execute(insert(md.tables["attempts"]), atts)
    eng.dispose()


def pieces(secret, n=6):
    s = secret
    return {s[i : i + n] for i in range(len(s) - n + 1)}


@pytest.mark.parametrize("rows", ["operations", "attempts", "findings"])
def test_no_planted_secret_leaves_in_csv_manifest_or_log(tmp_path, rows, caplog):
    db = tmp_path / "secrets.db"
    secrets_ledger(db)
    caplog.set_level(logging.DEBUG)
    eng = open_engine(str(db))
    led = Ledger(eng, load_preset("idemview"))
    res = export_evidence(
        led,
        Filter(),
        tmp_path / "e.csv",
        rows=rows,
        now=ANCHOR,
        masker=Masker(key=b"fixed-key-for-a-deterministic-test"),
    )
    eng.dispose()
    blob = "\n".join([open(res.path, encoding="utf-8").read(), open(res.manifest_path).read(), caplog.text])
    for name, secret in SECRETS.items():
        for p in pieces(secret.replace(" ", "")) | pieces(secret):
            if name.startswith("card") and p == secret.replace(" ", "")[-4:]:
                continue
            assert p not in blob, f"a piece of the planted {name} leaked: {p!r}"
    if rows != "findings":
        for name, look in LOOKALIKES.items():
            if rows == "attempts" and name != "order":
                continue
            assert look in blob, f"look-alike {name} was masked"


@pytest.mark.parametrize("bad", ["not a date", "2026-13-45 10:00:00", "", "0000-00-00 00:00:00"])
def test_a_malformed_time_is_exported_empty_not_fatal(tmp_path, bad):
    p = tmp_path / "d.db"
    write_demo(p, operations=20, seed=1)
    with sqlite3.connect(p) as c:
        c.execute("UPDATE operations SET created_at = ?, locked_at = ? WHERE id = 1", (bad, bad))
        c.execute("UPDATE attempts SET started_at = ? WHERE id = 1", (bad,))
    eng = open_engine(str(p))
    led = Ledger(eng, load_preset("idemview"))
    for rows in ("operations", "attempts"):
        res = export_evidence(led, Filter(), tmp_path / f"{rows}.csv", rows=rows, now=ANCHOR)
        got = read_csv(res.path)
        assert len(got) == res.rows > 20
        first = got[0]
        assert first["created_at" if rows == "operations" else "started_at"] == ""
    eng.dispose()
