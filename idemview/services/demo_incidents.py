"""The planted incidents of the demo ledger (:func:`idemview.services.demo.generate`): one builder per
finding kind, each drawing from the generator's seeded random source in turn. :data:`INCIDENTS` is their
order, which is part of the demo's contract: the same seed gives the same keys and rows only while each
builder draws what it drew, in this order."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from idemview.services.demo import _Gen


def plant_duplicate_effects(g: _Gen) -> None:
    """duplicate_effect: the first attempt timed out on our side but charged; the retry charged again."""
    for _ in range(4):
        scope, key, created, body, fp = g.plant_base()
        atts = g.attempt_chain(created, ["succeeded", "succeeded"], "ch")
        atts[0]["outcome"] = "succeeded"
        atts[0]["error"] = (
            f"ReadTimeout: POST https://api.payments.example.com/v1/charges gave no answer "
            f"within 30.0 s (Authorization: Bearer sk_live_{g._hex(key, 'sk')}); the provider "
            f"captured {atts[0]['effect']} anyway"
        )
        g.op(
            scope=scope,
            key=key,
            kind="payment.capture",
            status="succeeded",
            created=created,
            attempts=atts,
            intent=g.ref("ord"),
            effect=atts[1]["effect"],
            fp=fp,
            body=body,
            completed=atts[1]["finished_at"],
            response=g.charge(key, body, atts[1]["effect"], created),
        )
        g.planted.add("duplicate_effect", scope, key)


def plant_replays_after_expiry(g: _Gen) -> None:
    """replay_after_expiry: a client retried 2 days later; the key had expired and it charged again (the
    third replay was rejected)."""
    r, A = g.r, g.anchor
    for i in range(3):
        scope, key, created, body, fp = g.plant_base(hours_ago=50 + i)
        atts = g.attempt_chain(created, ["succeeded"], "ch")
        replay_at = (A - timedelta(minutes=r.randint(20, 200))).replace(microsecond=0)
        outcome = "succeeded" if i < 2 else "rejected"
        atts.append(
            {
                "started_at": replay_at,
                "finished_at": replay_at + timedelta(seconds=3),
                "outcome": outcome,
                "effect": g.ref("ch") if outcome == "succeeded" else None,
                "error": None
                if outcome == "succeeded"
                else json.dumps(
                    {
                        "error": {
                            "type": "invalid_request_error",
                            "code": "charge_already_captured",
                            "message": "This charge was already captured; the retry was refused.",
                            "request_id": f"req_{g._hex(key, 'rq', 14)}",
                        }
                    }
                ),
            }
        )
        g.op(
            scope=scope,
            key=key,
            kind="payment.capture",
            status="succeeded",
            created=created,
            attempts=atts,
            intent=g.ref("ord"),
            effect=atts[0]["effect"],
            fp=fp,
            body=body,
            completed=atts[0]["finished_at"],
            response=g.charge(key, body, atts[0]["effect"], created),
        )
        g.planted.add("replay_after_expiry", scope, key)
        g.planted.add("expired_key", scope, key)
        if outcome == "succeeded":
            g.planted.add("duplicate_effect", scope, key)


def plant_key_conflicts(g: _Gen) -> None:
    """key_conflict: the same key reused for a different request (rejected by the API)."""
    r = g.r
    for _ in range(3):
        scope, key, created, body, fp = g.plant_base("refund.create")
        atts = g.attempt_chain(created, ["succeeded"], "re")
        t = atts[0]["finished_at"] + timedelta(minutes=r.randint(1, 30))
        atts.append(
            {
                "started_at": t,
                "finished_at": t + timedelta(seconds=1),
                "outcome": "rejected",
                "fp": hashlib.sha256(f"other-{key}".encode()).hexdigest()[:32],
                "error": "422 key reused with different parameters: "
                + json.dumps(
                    {
                        "error": {
                            "type": "idempotency_error",
                            "message": "Keys for idempotent requests can only be used with the same parameters "
                            "they were first used with.",
                            "request_id": f"req_{g._hex(key, 'rq', 14)}",
                        }
                    }
                ),
            }
        )
        g.op(
            scope=scope,
            key=key,
            kind="refund.create",
            status="succeeded",
            created=created,
            attempts=atts,
            intent=g.ref("ord"),
            effect=atts[0]["effect"],
            fp=fp,
            body=body,
            completed=atts[0]["finished_at"],
            response=g.charge(key, body, atts[0]["effect"], created, obj="refund"),
        )
        g.planted.add("key_conflict", scope, key)


def plant_duplicate_intents(g: _Gen) -> None:
    """duplicate_intent: the client minted a fresh key for its retry of the same order."""
    r = g.r
    for _ in range(3):
        scope, key1, created, body, fp = g.plant_base()
        intent = g.ref("ord")
        a1 = g.attempt_chain(created, ["succeeded"], "ch")
        g.op(
            scope=scope,
            key=key1,
            kind="payment.capture",
            status="succeeded",
            created=created,
            attempts=a1,
            intent=intent,
            effect=a1[0]["effect"],
            fp=fp,
            body=body,
            completed=a1[0]["finished_at"],
        )
        key2 = g.key()
        c2 = created + timedelta(minutes=r.randint(2, 40))
        a2 = g.attempt_chain(c2, ["succeeded"], "ch")
        g.op(
            scope=scope,
            key=key2,
            kind="payment.capture",
            status="succeeded",
            created=c2,
            attempts=a2,
            intent=intent,
            effect=a2[0]["effect"],
            fp=fp,
            body=body,
            completed=a2[0]["finished_at"],
        )
        g.planted.add("duplicate_intent", scope, key2)


def plant_stuck(g: _Gen) -> None:
    """stuck_in_progress: the worker died holding the lock; and one in-progress operation whose lock is
    still valid (not stuck)."""
    A = g.anchor
    for _ in range(3):
        scope, key, created, body, fp = g.plant_base("invoice.create")
        atts = [{"started_at": created, "finished_at": None, "outcome": "running"}]
        row = g.op(
            scope=scope,
            key=key,
            kind="invoice.create",
            status="running",
            created=created,
            attempts=atts,
            intent=g.ref("inv"),
            fp=fp,
            body=body,
            locked=created,
        )
        row["error"] = (
            f"worker stopped heart-beating while rendering the invoice PDF (OOMKilled: container "
            f"exceeded 512Mi); last log line: uploading to s3://invoices-{scope}/"
            f"{g._hex(key, 'pdf', 12)}.pdf?X-Amz-Signature={g._hex(key, 'sig', 64)}"
        )
        g.planted.add("stuck_in_progress", scope, key)
    # an in-progress operation whose lock is still valid: not stuck
    scope, key, _c, body, fp = g.plant_base("invoice.create")
    recent = (A - timedelta(seconds=60)).replace(microsecond=0)
    g.op(
        scope=scope,
        key=key,
        kind="invoice.create",
        status="running",
        created=recent,
        attempts=[{"started_at": recent, "finished_at": None, "outcome": "running"}],
        intent=g.ref("inv"),
        fp=fp,
        body=body,
        locked=recent,
    )


def plant_unresolved_failures(g: _Gen) -> None:
    """unresolved_failure: failed for good, nothing completed it; and one failure that a later operation
    for the same intent resolved (not a finding)."""
    for i in range(3):
        scope, key, created, body, fp = g.plant_base("email.send")
        atts = g.attempt_chain(created, ["failed", "failed"], "em")
        email = body["customer"]["email"]
        if i == 0:  # the mail service's own database refused it: the driver's words, kept readable
            atts[-1]["error"] = (
                '(pymysql.err.OperationalError) (1045, "Access denied for user '
                "'mailer'@'10.0.3.7' (using password: YES)\")"
            )
        else:
            atts[-1]["error"] = f"550 5.1.1 <{email}>: Recipient address rejected: User unknown"
        response = {
            "provider": "smtp.example.net",
            "smtp": {
                "code": 550 if i else None,
                "enhanced": "5.1.1" if i else None,
                "recipient": email,
                "message": atts[-1]["error"],
            },
            "api_key": f"pm_live_{g._hex(key, 'pm', 32)}",
            "attempts": len(atts),
        }
        g.op(
            scope=scope,
            key=key,
            kind="email.send",
            status="failed",
            created=created,
            attempts=atts,
            intent=g.ref("msg"),
            fp=fp,
            body=body,
            error=atts[-1]["error"],
            response=response,
        )
        g.planted.add("unresolved_failure", scope, key)
    # a failure that a later operation for the same intent resolved: not a finding
    scope, key, created, body, fp = g.plant_base("email.send")
    intent = g.ref("msg")
    atts = g.attempt_chain(created, ["failed"], "em")
    g.op(
        scope=scope,
        key=key,
        kind="email.send",
        status="failed",
        created=created,
        attempts=atts,
        intent=intent,
        fp=fp,
        body=body,
        error=atts[-1]["error"],
    )
    c2 = created + timedelta(minutes=5)
    a2 = g.attempt_chain(c2, ["succeeded"], "em")
    g.op(
        scope=scope,
        key=g.key(),
        kind="email.send",
        status="succeeded",
        created=c2,
        attempts=a2,
        intent=intent,
        effect=a2[0]["effect"],
        fp=fp,
        body=body,
        completed=a2[0]["finished_at"],
    )


def plant_retry_storms(g: _Gen) -> None:
    """retry_storm: 7 failures then a success."""
    for _ in range(3):
        scope, key, created, body, fp = g.plant_base("webhook.deliver")
        atts = g.attempt_chain(created, ["failed"] * 7 + ["succeeded"], "wh")
        for a in atts[:-1]:
            a["error"] = f"HTTP 502 Bad Gateway from {body['url']} after {a['finished_at'] - a['started_at']}"
        g.op(
            scope=scope,
            key=key,
            kind="webhook.deliver",
            status="succeeded",
            created=created,
            attempts=atts,
            intent=g.ref("evt"),
            effect=atts[-1]["effect"],
            fp=fp,
            body=body,
            completed=atts[-1]["finished_at"],
            response={
                "status": 200,
                "headers": {
                    "Set-Cookie": f"session={g._hex(key, 'ck', 32)}; Path=/; HttpOnly",
                    "X-Request-Id": g._hex(key, "xr", 16),
                },
                "body": {"accepted": True, "delivery": atts[-1]["effect"]},
            },
        )
        g.planted.add("retry_storm", scope, key)


def plant_damaged_row(g: _Gen) -> None:
    """Damaged data that must not crash anything: NULL times, broken JSON."""
    scope, key, created, body, fp = g.plant_base("email.send")
    atts = g.attempt_chain(created, ["succeeded"], "em")
    row = g.op(
        scope=scope,
        key=key,
        kind="email.send",
        status="succeeded",
        created=created,
        attempts=atts,
        intent=g.ref("msg"),
        effect=atts[0]["effect"],
        fp=fp,
        body=body,
        completed=atts[0]["finished_at"],
    )
    row["request_body"] = '{"customer": {"email": "broken@example.com", '  # truncated JSON
    row["created_at"] = None
    row["expires_at"] = None


#: The builders in the order :func:`~idemview.services.demo.generate` runs them.
INCIDENTS = (
    plant_duplicate_effects,
    plant_replays_after_expiry,
    plant_key_conflicts,
    plant_duplicate_intents,
    plant_stuck,
    plant_unresolved_failures,
    plant_retry_storms,
    plant_damaged_row,
)
