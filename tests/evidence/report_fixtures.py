"""A small reference ledger with planted secrets and hostile text, for the incident report's tests
(the core tests in test_report.py and the headless Chromium test in test_report_browser.py)."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import create_engine, insert

from idemview.services.demo import reference_metadata
from tests.conftest import ANCHOR

#: Secrets the report must never carry, not even a 6-character piece (the last four digits of a
#: card may stay: DESIGN §6).
SECRETS = {
    "card": "4111111111111111",
    "card_in_key": "5105105105105100",
    "bearer": "Zm9vYmFyYmF6cXV4cXV1eGNvcmdl",
    "json_password": "hunter2-Correct-Horse",
    "dsn_password": "Tr0ub4dor-and-3",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIiwicm9sZSI6ImFkbWluIn0.Qm9ndXNTaWduYXR1cmVWYWx1ZQ",
}
#: An idempotency key holding markup: it must appear as text, never as an element.
SCRIPT_KEY = '<script>alert("k")</script>&<marquee>bold</marquee>'
#: Text that must stay readable (not a secret): an order id failing Luhn.
LOOKALIKE = "ORD-3141592653589793"


def pieces(secret: str, n: int = 6) -> set[str]:
    return {secret[i : i + n] for i in range(len(secret) - n + 1)}


def leaked(blob: str) -> list[str]:
    """The planted secrets (by name) of which some 6-character piece occurs in ``blob``."""
    out = []
    for name, secret in SECRETS.items():
        for p in pieces(secret):
            if name.startswith("card") and p == secret[-4:]:
                continue
            if p in blob:
                out.append(f"{name}: {p!r}")
                break
    return out


def secrets_ledger(target, operations: int = 3, hostile_key: str = SCRIPT_KEY) -> list[tuple[str, str]]:
    """Write a reference-layout ledger into ``target`` (a writable engine, or a path for a new SQLite
    file): ``operations`` failed payment operations
    (each an ``unresolved_failure``) whose keys, attempt errors and workers carry the planted secrets,
    the last with ``hostile_key`` (markup) as its key, and one operation charged twice (``duplicate_effect``).
    Returns the (scope, key) of every operation, in insertion order."""
    own = not hasattr(target, "begin")
    eng = create_engine(f"sqlite:///{target}") if own else target
    md = reference_metadata()
    md.create_all(eng)
    t0 = ANCHOR.replace(tzinfo=None) - timedelta(hours=2)
    err = (
        f'ReadTimeout (Authorization: Bearer {SECRETS["bearer"]}); body {{"password": "{SECRETS["json_password"]}", '
        f'"card": "{SECRETS["card"]}"}}; db postgresql://svc:{SECRETS["dsn_password"]}@db.internal/pay; '
        f"session {SECRETS['jwt']}; order {LOOKALIKE}"
    )
    keys = [f"pay-{SECRETS['card_in_key']}-{i}" for i in range(operations - 1)] + [hostile_key]
    ops, atts = [], []
    for i, key in enumerate(keys):
        ops.append(
            {
                "id": i + 1,
                "scope": "acme",
                "idempotency_key": key,
                "kind": "payment.capture",
                "status": "failed",
                "request_hash": "h",
                "intent_ref": LOOKALIKE,
                "effect_ref": None,
                "attempt_count": 2,
                "created_at": t0 + timedelta(minutes=i),
                "updated_at": t0 + timedelta(minutes=i),
                "expires_at": t0 + timedelta(minutes=i, hours=1),
                "request_body": json.dumps({"card": SECRETS["card"], "password": SECRETS["json_password"]}),
                "error": err,
            }
        )
        for n, outcome in ((1, "timed_out"), (2, "failed")):
            atts.append(
                {
                    "id": len(atts) + 1,
                    "scope": "acme",
                    "idempotency_key": key,
                    "attempt_no": n,
                    "started_at": t0 + timedelta(minutes=i, seconds=10 * n),
                    "finished_at": t0 + timedelta(minutes=i, seconds=10 * n + 5),
                    "outcome": outcome,
                    "request_hash": "h",
                    "worker": f"w{n} token={SECRETS['bearer']}",
                    "error": err,
                }
            )
    # charged twice: two succeeded attempts with distinct effect references
    dup = f"dup-{SECRETS['card_in_key']}"
    ops.append(
        {
            "id": len(ops) + 1,
            "scope": "acme",
            "idempotency_key": dup,
            "kind": "payment.capture",
            "status": "completed",
            "request_hash": "h",
            "intent_ref": "ord-dup",
            "effect_ref": "ch_2",
            "attempt_count": 2,
            "created_at": t0,
            "updated_at": t0,
            "completed_at": t0 + timedelta(seconds=40),
            "expires_at": t0 + timedelta(hours=24),
        }
    )
    for n in (1, 2):
        atts.append(
            {
                "id": len(atts) + 1,
                "scope": "acme",
                "idempotency_key": dup,
                "attempt_no": n,
                "started_at": t0 + timedelta(seconds=20 * n),
                "finished_at": t0 + timedelta(seconds=20 * n + 9),
                "outcome": "succeeded",
                "request_hash": "h",
                "effect_ref": f"ch_{n}",
                "worker": "w1",
            }
        )
    with eng.begin() as c:
        for table, rows in (("operations", ops), ("attempts", atts)):
            cols = {k for r in rows for k in r}  # one executemany needs the same keys in every row
            c.execute(insert(md.tables[table]), [{k: r.get(k) for k in cols} for r in rows])
    if own:
        eng.dispose()
    return [("acme", k) for k in keys] + [("acme", dup)]
