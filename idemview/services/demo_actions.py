"""Demo incidents in several action classes (DESIGN §5.1, issue 21): the same duplicate effect weighs
differently by what the action does, so the demo shows a critical double refund and a double access
grant, a high double welcome e-mail and a low double report render side by side.

Planted after every other incident of :func:`idemview.services.demo.generate`, so the keys and rows the
other incidents draw from a seed stay what they were.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: (kind, effect reference prefix, what the request body adds): one double effect each.
DOUBLES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("refund.create", "re", {}),  # money: critical
    ("email.send", "em", {"template": "welcome"}),  # notification: high
    ("access.grant", "gr", {"role": "admin", "resource": "billing-console"}),  # access: critical
    ("report.render", "rp", {"report": "monthly-usage", "format": "pdf"}),  # read: low
)


def plant_action_doubles(g: Any, plant_base: Callable[..., tuple]) -> None:
    """One duplicate effect per entry of :data:`DOUBLES` into the demo generator ``g`` (two attempts
    that both succeeded with distinct effect references), registered as planted ``duplicate_effect``."""
    for kind, prefix, extra in DOUBLES:
        scope, key, created, body, fp = plant_base(kind)
        body.update(extra)
        atts = g.attempt_chain(created, ["succeeded", "succeeded"], prefix)
        atts[0]["error"] = "worker lost its lease after the side effect; the job was run again"
        g.op(
            scope=scope,
            key=key,
            kind=kind,
            status="succeeded",
            created=created,
            attempts=atts,
            intent=g.ref("act"),
            effect=atts[1]["effect"],
            fp=fp,
            body=body,
            completed=atts[1]["finished_at"],
            response={"id": atts[1]["effect"], "status": "ok"},
        )
        g.planted.add("duplicate_effect", scope, key)
