"""What each finding kind means, in DESIGN §5's words: its definition, its severity rule and the fields
of the normalized model it rests on. The one place these words live; the GUI's help (chips, findings
panel, detail) and anything else that explains a kind read them from here (issue 20 §7).

Source: the project's DESIGN.md §5 (table of kinds; §5.1 for the severity that follows the action
class). A rule's default severity is its registry rule's (:mod:`idemview.findings.registry`), so the
two cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from idemview.domain.model import FindingKind as K


@dataclass(frozen=True)
class KindDefinition:
    """``definition``: when an operation has this finding; ``severity_rule``: how its severity is set;
    ``fields``: the normalized fields (DESIGN §3) the check reads — a layout that lacks them cannot
    check the kind."""

    kind: K
    definition: str
    severity_rule: str
    fields: tuple[str, ...]


_CLASS_RULE = (
    "; with an action class: critical for money, access, approval and inventory, high for notification, "
    "record and downstream, low for read (DESIGN §5.1)"
)

DEFINITIONS: dict[K, KindDefinition] = {
    d.kind: d
    for d in (
        KindDefinition(
            K.DUPLICATE_EFFECT,
            "one (scope, key) has ≥2 attempts with outcome succeeded, or ≥2 distinct non-empty effect "
            "references, or ≥2 operation records of which ≥2 are completed; with an [effects] section "
            "also ≥2 effect records for one operation",
            "critical" + _CLASS_RULE,
            ("scope", "idempotency key", "attempt outcome", "effect reference", "status", "effect records"),
        ),
        KindDefinition(
            K.REPLAY_AFTER_EXPIRY,
            "an attempt, or a new record for the same (scope, key), started after the key had expired",
            "high (critical if the replay succeeded)" + _CLASS_RULE,
            ("expires_at (or created_at + retention)", "attempt started_at", "attempt outcome"),
        ),
        KindDefinition(
            K.KEY_CONFLICT,
            "one (scope, key) carries ≥2 distinct non-empty fingerprints (the same key reused for another request)",
            "high",
            ("scope", "idempotency key", "fingerprint"),
        ),
        KindDefinition(
            K.DUPLICATE_INTENT,
            "one intent reference under ≥2 distinct keys in the same scope, ≥2 of them completed, created "
            "within one dedup window of each other: a fresh key was minted for a retry",
            "high" + _CLASS_RULE,
            ("intent reference", "scope", "status", "created_at", "dedup window"),
        ),
        KindDefinition(
            K.STUCK_IN_PROGRESS,
            "status in_progress and its lock expired (lock_expires_at ≤ now, or locked_at + lock timeout ≤ now)",
            "medium",
            ("status", "lock_expires_at or locked_at + lock timeout"),
        ),
        KindDefinition(
            K.UNRESOLVED_FAILURE,
            "status failed and no later completed record for the same key or intent",
            "medium",
            ("status", "idempotency key", "intent reference", "created_at"),
        ),
        KindDefinition(
            K.RETRY_STORM,
            "attempt count above a threshold (default 5)",
            "low",
            ("attempt count or attempt rows",),
        ),
        KindDefinition(
            K.EXPIRED_KEY,
            "expires_at ≤ now and the record is still present",
            "info",
            ("expires_at (or created_at + retention)",),
        ),
        KindDefinition(
            K.HIDDEN_SUCCESS,
            "the ledger says failed, in_progress (lock expired) or the last attempt timed out, yet an effect "
            "record exists downstream: a timeout hid a success, and a retry would repeat it (needs an "
            "[effects] section)",
            "critical" + _CLASS_RULE,
            ("status", "attempt outcome", "effect records"),
        ),
        KindDefinition(
            K.ORPHAN_EFFECT,
            "an effect record that no operation in the ledger accounts for (its reference matches no "
            "operation, or none that completed)",
            "medium",
            ("effect records", "effect reference", "status"),
        ),
    )
}

if hasattr(K, "SECRET_AT_REST"):  # a kind another branch adds (DESIGN §5)
    DEFINITIONS[K.SECRET_AT_REST] = KindDefinition(  # type: ignore[attr-defined]
        K.SECRET_AT_REST,  # type: ignore[attr-defined]
        "the ledger itself stores a credential, card number or other secret in plain text: one finding per "
        "column (and JSON path), with how many of the rows read carry it and which kinds; never the value",
        "high",
        ("every text and payload column",),
    )


def definition(kind: K) -> KindDefinition | None:
    """The definition of ``kind`` (None for a kind registered without one)."""
    return DEFINITIONS.get(K(kind))
