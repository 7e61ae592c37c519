"""The one-sentence explanation of each finding kind (DESIGN §5), written from the finding's evidence rows
and nothing else (issue 19, item 19).

A rule first builds the evidence it ships (a list of dicts, times as ISO-8601 text), then calls the
function of its kind here. Every number, outcome and time a sentence states is read from those rows (a
count of rows, a field's value, or the difference of two of their times, or of one and ``now``), so an
explanation cannot say "attempt 3 ... succeeded" while its evidence shows attempt 3 failed. The property
test ``tests/unit/test_explanations_from_evidence.py`` checks this over generated ledgers.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from idemview.findings.common import dur, parse_iso, who
from idemview.ledger.rawtext import decode_text

Evidence = Sequence[dict[str, Any]]

#: The words an outcome value is said with.
_OUTCOME_WORDS = {"succeeded": "succeeded", "failed": "failed", "timed_out": "timed out", "running": "was running"}


def _gap(later: str | None, earlier: str | None) -> float | None:
    a, b = parse_iso(later), parse_iso(earlier)
    return (a - b).total_seconds() if a is not None and b is not None else None


def _ago(now: datetime, t: str | None) -> float | None:
    x = parse_iso(t)
    return (now - x).total_seconds() if x is not None else None


def _ref_text(v: Any) -> str:
    """A stored reference as text for a sentence: a number column's value as its digits, a BLOB (SQLite
    keeps whatever type a row was written with) as its UTF-8 text or the escaped form the grid shows;
    mixed types could be neither ordered nor joined (a crash of the whole scan)."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return decode_text(bytes(v))
    return v if isinstance(v, str) else str(v)


def duplicate_effect(scope, key, ev: Evidence) -> str:
    """``duplicate_effect`` from its record and attempt rows: how many attempts succeeded, which
    distinct effect references, how many records are completed."""
    n_succ = sum(1 for x in ev if x.get("outcome") == "succeeded")
    n_comp = sum(1 for x in ev if x.get("status") == "completed")
    effects = sorted({_ref_text(x["effect_ref"]) for x in ev if x.get("effect_ref")})
    reasons = []
    if n_succ >= 2:
        reasons.append(f"{n_succ} attempts succeeded")
    if len(effects) >= 2:
        reasons.append(f"{len(effects)} distinct side effects were recorded ({', '.join(effects[:4])})")
    if n_comp >= 2:
        reasons.append(f"{n_comp} records are completed")
    return (
        f"The operation with {who(scope, key)} took effect more than once: "
        + "; ".join(reasons or ["several effects"])
        + "."
    )


def _replay_subject(x: dict[str, Any]) -> str:
    what = x.get("replay")
    if what == "record":
        return "a new record"
    if what == "last_run":
        return "the last run"
    return f"attempt {x['attempt']}" if x.get("attempt") is not None else "an attempt"


def _replay_clause(x: dict[str, Any], first: bool) -> str:
    late = _gap(x.get("started_at"), x.get("key_expired_at"))
    s = f"{_replay_subject(x)} started {dur(late)} after the key had expired"
    if first:
        s += f" ({x.get('key_expired_at')})"
    said = _OUTCOME_WORDS.get(x.get("outcome") or "")
    return s + (f" and {said}" if said else "")


def replay_after_expiry(scope, key, ev: Evidence) -> str:
    """``replay_after_expiry`` from its replay rows (in time order): the first replay with its own
    outcome, and the first one that succeeded when that is a later one."""
    first = ev[0]
    parts = [_replay_clause(first, True)]
    won = next((x for x in ev if x.get("outcome") == "succeeded"), None)
    if won is not None and won is not first:
        parts.append(_replay_clause(won, False))
    if len(ev) > 1:
        parts.append(f"{len(ev)} replays in all")
    tail = ": the dedup window no longer protected it." if won is not None else "."
    return f"For {who(scope, key)}, " + "; ".join(parts) + tail


def key_conflict(scope, key, ev: Evidence) -> str:
    """``key_conflict`` from its fingerprint rows."""
    n = len({x.get("fingerprint") for x in ev})
    return (
        f"The {who(scope, key)} was reused with {n} different request fingerprints: the same key was sent "
        f"for different requests."
    )


def duplicate_intent(scope, key, ev: Evidence) -> str:
    """``duplicate_intent`` from its row (intent, earlier key and both creation times, keys counted)."""
    x = ev[0]
    gap = _gap(x.get("created_at"), x.get("earlier_created_at"))
    return (
        f"Intent {x.get('intent_ref')!r} completed under {x.get('keys_with_intent')} keys: {who(scope, key)} was "
        f"created {dur(gap)} after key {x.get('earlier_key')!r} completed the same intent — a fresh key was "
        f"minted for a retry."
    )


def stuck_in_progress(scope, key, ev: Evidence, now: datetime) -> str:
    """``stuck_in_progress`` from its row (when the lock expired) and ``now``."""
    overdue = _ago(now, ev[0].get("lock_expired_at"))
    return (
        f"The operation with {who(scope, key)} is still in progress but its lock expired {dur(overdue)} ago: "
        f"the worker that held it probably died."
    )


def unresolved_failure(scope, key, ev: Evidence) -> str:
    """``unresolved_failure`` from its row (the raw status when it says more than ``failed``)."""
    raw = ev[0].get("raw_status")
    return (
        f"The operation with {who(scope, key)} failed"
        + (f" ({raw})" if raw not in (None, "", "failed") else "")
        + " and nothing completed it afterwards, under this key or its intent."
    )


def retry_storm(scope, key, ev: Evidence) -> str:
    """``retry_storm`` from its row (attempts and threshold)."""
    x = ev[0]
    n, thr = x.get("attempts"), x.get("threshold")
    return f"The operation with {who(scope, key)} was attempted {n} times (threshold {thr})."


def expired_key(scope, key, ev: Evidence, now: datetime) -> str:
    """``expired_key`` from its row (the expiry) and ``now``."""
    at = ev[0].get("expires_at")
    return (
        f"The {who(scope, key)} expired {dur(_ago(now, at))} ago ({at}) and its record is still kept; a new "
        f"request with this key would no longer be deduplicated."
    )


# Effect kinds (idemview/findings/effects.py): the evidence lists the effect records, then one summary row
# {"effect_records": N, "table": name, "ledger_says": why, "first_effect_at": ISO} (at most 20 records
# are listed; the count is the summary's).

_SAID = {"failed": "failed", "stuck": "is stuck in progress (its lock expired)", "timed out": "timed out"}


def _records(n) -> str:
    return f"{n} effect record" + ("" if n == 1 else "s")


def effect_reason(ev: Evidence) -> str:
    """The clause a ledger ``duplicate_effect`` gains from the effect records: ``"2 effect records in charges"``."""
    x = ev[-1]
    return f"{_records(x.get('effect_records'))} in {x.get('table')}"


def effect_duplicate(whom: str, ev: Evidence) -> str:
    """``duplicate_effect`` found downstream: as many effect records as the summary row counts."""
    x = ev[-1]
    n = x.get("effect_records")
    return f"The operation with {whom} has {n} effect records in {x.get('table')}: it took effect {n} times."


def hidden_success(whom: str, ev: Evidence) -> str:
    """``hidden_success``: what the ledger says (the summary's ``ledger_says``), yet effect records exist."""
    x = ev[-1]
    n = x.get("effect_records")
    at = x.get("first_effect_at")
    return (
        f"The ledger says the operation with {whom} {_SAID.get(x.get('ledger_says') or '', 'did not complete')}, "
        f"yet {_records(n)} in {x.get('table')} {'shows' if n == 1 else 'show'} it took effect"
        + (f" ({at})" if at else "")
        + ": a timeout hid a success, and a retry would repeat it."
    )


def orphan_effect(link, ev: Evidence) -> str:
    """``orphan_effect``: the summary's count of records linking to ``link``."""
    x = ev[-1]
    n = x.get("effect_records")
    return (
        f"{_records(n).capitalize()} in {x.get('table')} {'links' if n == 1 else 'link'} to {link!r}, which no "
        f"operation in the ledger accounts for."
    )
