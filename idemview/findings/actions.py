"""Severity follows what the action does (DESIGN §5.1): the one post-step that gives every finding its
operation's action class, weighs the severity of the kinds where duplication matters, and marks
regulated decisions.

A rule reports what happened (two successful attempts, a replay after expiry) with §5's default
severity; :func:`weigh` then looks up the kind of each finding's operation (one query per batch of
:data:`~idemview.findings.common.EVIDENCE_BATCH` keys, through the key index), classifies each distinct
kind once (:class:`~idemview.domain.actions.Classifier`) and sets ``action``, ``severity`` and, for a
regulated class, ``regulated`` and the note in the explanation. Rules know nothing of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select

from idemview.domain.actions import REGULATED_NOTE, Classifier
from idemview.domain.model import LEDGER_KINDS, SEVERITY_ORDER, Finding, FindingKind, Severity
from idemview.findings.common import in_keys, key_batches

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy.engine import Connection

    from idemview.ledger.reader import Ledger

K = FindingKind

#: The kinds whose severity follows the class: a duplicate or a hidden success repeats the action.
WEIGHED = frozenset({K.DUPLICATE_EFFECT, K.HIDDEN_SUCCESS, K.REPLAY_AFTER_EXPIRY, K.DUPLICATE_INTENT})

#: Severity by class for :data:`WEIGHED` kinds; ``unknown`` keeps the rule's (§5) severity. A
#: ``replay_after_expiry`` that did not succeed (the rule's "high") is only ever lowered by its class.
CLASS_SEVERITY: dict[str, Severity] = {
    "money": Severity.CRITICAL,
    "access": Severity.CRITICAL,
    "approval": Severity.CRITICAL,
    "inventory": Severity.CRITICAL,
    "notification": Severity.HIGH,
    "record": Severity.HIGH,
    "downstream": Severity.HIGH,
    "read": Severity.LOW,
}


#: Above this many operations to look up, their kinds are read in one pass over the table.
WHOLE_PASS_KEYS = 5_000


def classifier_for(ledger: Ledger) -> Classifier:
    """The ledger's classifier (its layout's ``[actions]`` rules, the connection's merged in before
    them), made once per ledger object so its memo lasts as long as the ledger."""
    made = getattr(ledger, "action_classifier", None)  # Ledger.action_classifier (a wrapper may lack it)
    return made() if made is not None else Classifier(getattr(ledger.layout, "actions", None))


def operation_kinds(ledger: Ledger, c: Connection, keys, cache: dict | None = None) -> dict[tuple, object]:
    """``{(scope, key): kind}`` for ``keys`` (the first non-NULL kind among an operation's records),
    read in batches through the key index; ``cache`` (same shape) is consulted and filled."""
    cache = {} if cache is None else cache
    todo = [k for k in set(keys) if k not in cache]
    if not todo or ledger.layout.kind is None:
        for k in todo:
            cache[k] = None
        return cache
    s, kx, kd = ledger.scope_expr, ledger.key_expr, ledger.kind_expr
    if len(todo) > WHOLE_PASS_KEYS:
        # an aged ledger's hundred thousand expired keys: one streamed pass over (scope, key, kind)
        # beats hundreds of key look-ups; only the wanted keys are kept
        wanted = set(todo)
        for k in todo:
            cache.setdefault(k, None)
        q = select(s.label("scope"), kx.label("key"), kd.label("kind")).select_from(ledger.ops)
        res = c.execution_options(stream_results=True, yield_per=20_000).execute(q.where(kd.is_not(None)))
        try:
            for r in res:
                ref = (r.scope, r.key)
                if ref in wanted and cache.get(ref) is None:
                    cache[ref] = r.kind
        finally:
            res.close()
        return cache
    for batch in key_batches(todo):
        for k in batch:
            cache.setdefault(k, None)
        q = select(s.label("scope"), kx.label("key"), kd.label("kind")).select_from(ledger.ops)
        for r in c.execute(q.where(in_keys(s, kx, batch))):
            ref = (r.scope, r.key)
            if cache.get(ref) is None and r.kind is not None:
                cache[ref] = r.kind
    return cache


def weigh_one(f: Finding, action: str, classifier: Classifier) -> Finding:
    """Set ``f``'s action class, its class severity (for :data:`WEIGHED` kinds) and the regulated note."""
    f.action = action
    if f.kind in WEIGHED and action in CLASS_SEVERITY:
        sev = CLASS_SEVERITY[action]
        if f.kind == K.REPLAY_AFTER_EXPIRY and f.severity != Severity.CRITICAL:
            # a replay the ledger refused repeated nothing: the class may lower its severity, not raise it
            sev = max(sev, f.severity, key=lambda s: SEVERITY_ORDER[s])
        f.severity = sev
    if classifier.is_regulated(action) and not f.regulated:
        f.regulated = True
        f.explanation = f"{f.explanation} {REGULATED_NOTE}"
    return f


def weigh(ledger: Ledger, c: Connection, fs: list[Finding], cache: dict | None = None) -> list[Finding]:
    """Give each finding of ``fs`` its operation's action class and the class's severity (in place;
    returns ``fs``). A finding without an operation (``orphan_effect``, ledger findings) stays
    ``unknown``. ``cache`` carries the (scope, key) → kind look-ups across calls of one scan."""
    cl = classifier_for(ledger)
    ops = [f for f in fs if f.kind not in LEDGER_KINDS and f.kind != K.ORPHAN_EFFECT]
    if not ops:
        return fs
    kinds = operation_kinds(ledger, c, [(f.scope, f.key) for f in ops], cache)
    for f in ops:
        weigh_one(f, cl.classify(kinds.get((f.scope, f.key))), cl)
    return fs
