"""Payments the demo ledger does not see complete (issue #20, item 13): the operations on which the
demo's effects file (:mod:`idemview.services.demo_effects`) plants its hidden successes, so a hidden
success is a ``payment.capture`` whose effect record is a charge, not an e-mail whose effect is one.

Three captures, one per way the ledger can miss a charge that went through at the provider:
- **failed**: the provider answered 502 after capturing; the service marked the operation failed;
- **timed out**: the request got no answer within 30 s; the service gave up and marked it failed;
- **stuck**: the worker died after sending the capture, holding the lock (its lease has expired).

Each is also what the ledger alone shows (``unresolved_failure`` for the first two,
``stuck_in_progress`` for the third) and is registered so. Planted after every other incident of
:func:`idemview.services.demo.generate`, so the keys and rows the other incidents draw from a seed stay
what they were.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: (what happened to the last attempt, the attempts' outcomes, the operation's status).
CASES: tuple[tuple[str, list[str], str], ...] = (
    ("failed", ["failed", "failed"], "failed"),
    ("timed_out", ["timed_out"], "failed"),
    ("stuck", ["running"], "running"),
)


def plant_charge_failures(g: Any, plant_base: Callable[..., tuple]) -> None:
    """One ``payment.capture`` per entry of :data:`CASES` into the demo generator ``g``, whose outcome
    the ledger does not know to be a charge (see the module docstring)."""
    for how, outcomes, status in CASES:
        scope, key, created, body, fp = plant_base("payment.capture")
        if how == "stuck":
            atts = [{"started_at": created, "finished_at": None, "outcome": "running"}]
        else:
            atts = g.attempt_chain(created, outcomes, "ch")
        if how == "failed":
            atts[-1]["error"] = (
                "502 Bad Gateway from POST https://api.payments.example.com/v1/charges/capture "
                f"(request id req_{g._hex(key, 'req', 16)}); marked failed, not retried"
            )
        elif how == "timed_out":
            atts[-1]["error"] = (
                "ReadTimeout: POST https://api.payments.example.com/v1/charges/capture gave no answer within "
                f"30.0 s (Authorization: Bearer sk_live_{g._hex(key, 'sk')}); marked failed"
            )
        row = g.op(
            scope=scope,
            key=key,
            kind="payment.capture",
            status=status,
            created=created,
            attempts=atts,
            intent=g.ref("ord"),
            fp=fp,
            body=body,
            error=atts[-1].get("error"),
            locked=created if how == "stuck" else None,
        )
        if how == "stuck":
            row["error"] = "worker pay-7 lost its lease after sending the capture; no answer was recorded"
        g.planted.add("stuck_in_progress" if how == "stuck" else "unresolved_failure", scope, key)
