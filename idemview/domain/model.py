"""The normalized model of an operation ledger (DESIGN.md §2, §3, §5).

Every ledger, whatever its schema, is read into these shapes. All instants are timezone-aware
``datetime`` objects in UTC; a time the ledger does not have, or that cannot be parsed, is ``None``
(never invented).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

# Severity and the finding kinds live in their own modules (a kind is one object: idemview.domain.kinds);
# re-exported here, where every caller has always imported them from.
from idemview.domain.kinds import DEFAULT_SEVERITY, LEDGER_KINDS, FindingKind
from idemview.domain.severity import SEVERITY_ORDER, Severity


class Status(str, Enum):
    """State of an operation (DESIGN §2); the ledger's own value is kept beside it as ``raw_status``."""

    NEW = "new"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    UNKNOWN = "unknown"


class Outcome(str, Enum):
    """How one attempt ended (DESIGN §2). ``rejected`` means the dedup check refused it."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    REJECTED = "rejected"
    IN_PROGRESS = "in_progress"
    UNKNOWN = "unknown"


__all__ = [
    "DEFAULT_SEVERITY",
    "LEDGER_KINDS",
    "SEVERITY_ORDER",
    "Attempt",
    "EffectRecord",
    "Finding",
    "FindingKind",
    "Operation",
    "OperationRef",
    "Outcome",
    "Payload",
    "Severity",
    "Status",
]


@dataclass(frozen=True, slots=True)
class OperationRef:
    """Identity of an operation: (scope, idempotency key). ``scope`` is ``""`` when the ledger has none."""

    scope: str
    key: str


@dataclass(slots=True)
class Operation:
    """One operation record, normalized (DESIGN §3).

    ``row_id`` is the ledger's own row identity when it has one (used for keyset paging and to tell
    literal duplicate rows apart). Payload fields hold :class:`Payload` objects, already decoded.
    """

    scope: str
    key: str
    kind: str | None = None
    status: Status = Status.UNKNOWN
    raw_status: Any = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    completed_at: datetime | None = None
    locked_at: datetime | None = None
    lock_expires_at: datetime | None = None
    expires_at: datetime | None = None
    last_attempt_at: datetime | None = None
    attempt_count: int | None = None
    fingerprint: str | None = None
    intent_ref: str | None = None
    effect_ref: str | None = None
    request: Payload | None = None
    response: Payload | None = None
    error: Payload | None = None
    row_id: Any = None


@dataclass(slots=True)
class Attempt:
    """One attempt at an operation, numbered from 1 (DESIGN §3)."""

    scope: str
    key: str
    number: int | None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    outcome: Outcome = Outcome.UNKNOWN
    raw_outcome: Any = None
    error: str | None = None
    effect_ref: str | None = None
    worker: str | None = None


@dataclass(slots=True)
class Payload:
    """A decoded payload cell (request, response, error).

    ``encoding`` is the layout's declared encoding (``json``, ``text``, ``binary``, ``pickle``);
    ``value`` is the decoded value: parsed JSON, a string, bytes, or ``None`` for pickle (never
    unpickled: only ``size`` is known). ``problem`` says, in plain words, why a value could not be
    decoded (e.g. broken JSON); the raw text is then kept in ``value`` as a string so nothing is lost.
    """

    encoding: str
    value: Any
    size: int | None = None
    problem: str | None = None


@dataclass(slots=True)
class Finding:
    """One finding (DESIGN §5): evidence for a human decision, not a verdict.

    ``evidence`` is a list of small JSON-able dicts (attempts or records that show the problem), with
    instants as ISO-8601 strings in UTC. ``at`` is the instant the finding is anchored to on a
    timeline (the offending attempt's start, the expiry, ...), UTC, or ``None``.

    ``action`` is the operation's action class (DESIGN §5.1: ``money``, ``access`` ... ``unknown``),
    set by the engine from the operation's kind; ``regulated`` says a person decides whether anything
    is repeated or reversed (``approval``, or a class the user marks regulated). ``column`` names the
    ledger column (and JSON path) of a :data:`LEDGER_KINDS` finding, whose scope and key are empty.
    """

    kind: FindingKind
    severity: Severity
    scope: str
    key: str
    explanation: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    at: datetime | None = None
    action: str = "unknown"
    regulated: bool = False
    column: str | None = None

    @property
    def ref(self) -> OperationRef:
        return OperationRef(self.scope, self.key)

    def to_json(self) -> dict[str, Any]:
        """The JSON shape of DESIGN §9 (``scan --format json``); a ledger finding (``secret_at_rest``)
        has ``"column"`` and null scope and key."""
        ledger = FindingKind(self.kind).about_ledger
        out: dict[str, Any] = {
            "kind": self.kind.value,
            "severity": self.severity.value,
            "action": self.action,
            "scope": None if ledger else self.scope,
            "key": None if ledger else self.key,
            "explanation": self.explanation,
            "evidence": self.evidence,
        }
        if ledger:
            out["column"] = self.column
        if self.regulated:
            out["regulated"] = True
        return out


@dataclass(slots=True)
class EffectRecord:
    """One downstream effect record (a charge, a sent message, a grant) linked to an operation through
    the layout's ``[effects]`` section. ``link`` is the linking value as text; ``record_id`` the row's
    identity; ``reference`` the side effect's id in the other system; ``at`` an aware UTC instant (or
    ``None`` when missing); ``shown`` the extra columns the layout names, by column name."""

    link: str
    record_id: Any = None
    reference: str | None = None
    at: datetime | None = None
    shown: dict[str, Any] = field(default_factory=dict)
