"""The structured filter shared by the GUI, ``idemview export`` and the evidence manifest.

A :class:`Filter` is plain data: it is compiled to SQL by :mod:`idemview.ledger.reader`, written into the
manifest by :meth:`Filter.to_dict`, and read out to a person by :meth:`Filter.sentence`. The GUI's
filter bar and the manifest use the same sentence, so what an investigator saw is what the evidence says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from idemview.domain.actions import ACTION_WORDS, ACTIONS
from idemview.domain.kinds import KIND_PHRASES
from idemview.domain.model import FindingKind, Status

_STATUS_WORDS = {
    Status.NEW: "new",
    Status.IN_PROGRESS: "in-progress",
    Status.COMPLETED: "completed",
    Status.FAILED: "failed",
    Status.UNKNOWN: "unknown-status",
}

#: How the sentence names operations with a kind: derived from the kinds (FindingKind.phrase).
_FINDING_WORDS = KIND_PHRASES


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass(slots=True)
class Filter:
    """What an investigator narrowed the ledger to.

    - ``findings``: operations that carry at least one finding of these kinds (OR);
    - ``statuses``: normalized statuses (OR);
    - ``kinds``: operation kinds (task / endpoint / message type), exact (OR);
    - ``key``, ``intent``, ``scope``: case-sensitive substring match on the idempotency key, intent
      reference and scope;
    - ``since`` / ``until``: aware instants (UTC after normalisation) bounding ``created_at``,
      ``since`` inclusive and ``until`` exclusive;
    - ``unmapped_status``: only records whose raw status no entry of the layout maps (DESIGN §9);
    - ``actions``: action classes of the operation's kind (DESIGN §5.1: ``money``, ``access`` ...,
      ``unknown`` includes operations without a kind), OR.

    An empty filter matches every operation.
    """

    findings: list[FindingKind] = field(default_factory=list)
    statuses: list[Status] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    key: str | None = None
    intent: str | None = None
    scope: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    unmapped_status: bool = False
    actions: list[str] = field(default_factory=list)

    def __post_init__(self):
        for a in self.actions:
            if a not in ACTIONS:
                raise ValueError(f"unknown action class {a!r} (one of {', '.join(ACTIONS)})")

    def without(self, *, findings: bool = False, times: bool = False) -> Filter:
        """A copy without its finding kinds (``findings``) or its created-at bounds (``times``), every
        other condition kept (``unmapped_status`` included): what narrows the operations a finding
        count or the overview is computed over."""
        from dataclasses import replace

        return replace(
            self,
            findings=[] if findings else list(self.findings),
            statuses=list(self.statuses),
            kinds=list(self.kinds),
            actions=list(self.actions),
            since=None if times else self.since,
            until=None if times else self.until,
        )

    def is_empty(self) -> bool:
        return not (
            self.findings
            or self.statuses
            or self.kinds
            or self.key
            or self.intent
            or self.scope
            or self.since
            or self.until
            or self.unmapped_status
            or self.actions
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able structured form (for the manifest); instants as ISO-8601 UTC with ``Z``."""
        return {
            "findings": [k.value for k in self.findings],
            "statuses": [s.value for s in self.statuses],
            "kinds": list(self.kinds),
            "key": self.key,
            "intent": self.intent,
            "scope": self.scope,
            "since": _iso(self.since) if self.since else None,
            "until": _iso(self.until) if self.until else None,
            "unmapped_status": self.unmapped_status,
            "actions": list(self.actions),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Filter:
        """Inverse of :meth:`to_dict`. Raises ``ValueError`` on an unknown kind or status."""

        def t(v):
            if not v:
                return None
            return datetime.fromisoformat(v.replace("Z", "+00:00"))

        return cls(
            findings=[FindingKind(k) for k in d.get("findings") or []],
            statuses=[Status(s) for s in d.get("statuses") or []],
            kinds=list(d.get("kinds") or []),
            key=d.get("key"),
            intent=d.get("intent"),
            scope=d.get("scope"),
            since=t(d.get("since")),
            until=t(d.get("until")),
            unmapped_status=bool(d.get("unmapped_status", False)),
            actions=[str(a) for a in d.get("actions") or []],
        )

    def sentence(self, zone_label: str = "UTC", tz=None) -> str:
        """The filter read out in plain words, e.g.
        ``"failed or stuck in progress payment.capture operations created between 2024-05-01 10:00 and
        2024-05-01 12:00 UTC"``. Instants are shown in UTC, or in ``tz`` (a ``tzinfo``; the GUI passes the
        zone its times are shown in) with ``zone_label`` naming it."""
        parts: list[str] = []
        status_words = [_STATUS_WORDS[s] for s in self.statuses]
        if status_words:
            parts.append(" or ".join(status_words))
        noun = "operations"
        if self.kinds:
            noun = " or ".join(self.kinds) + " operations"
        parts.append(noun)
        if self.unmapped_status:
            parts.append("with a status the layout does not map")
        if self.findings:
            parts.append(" or ".join(_FINDING_WORDS[k] for k in self.findings))
        if self.actions:
            parts.append("that " + " or ".join(ACTION_WORDS[a] for a in self.actions))
        if self.scope:
            parts.append(f'in scopes containing "{self.scope}"')
        if self.key:
            parts.append(f'whose idempotency key contains "{self.key}"')
        if self.intent:
            parts.append(f'whose intent reference contains "{self.intent}"')

        def fmt(t: datetime) -> str:
            return t.astimezone(tz or UTC).strftime("%Y-%m-%d %H:%M:%S")

        if self.since and self.until:
            parts.append(f"created between {fmt(self.since)} and {fmt(self.until)} {zone_label}")
        elif self.since:
            parts.append(f"created from {fmt(self.since)} {zone_label}")
        elif self.until:
            parts.append(f"created before {fmt(self.until)} {zone_label}")
        text = " ".join(parts)
        if self.is_empty():
            text = "all operations"
        return text[0].upper() + text[1:]
