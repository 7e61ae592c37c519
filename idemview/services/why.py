"""Why dedup failed, not only that it did (issue 20 §8): sentences computed from one operation's
evidence (its records, attempts and effect records) for the detail of a ``duplicate_effect``.

"Attempt #2 started 5 s after #1 succeeded, inside the 24 h dedup window, under the same key": the
idempotency key was there and should have answered #2 with #1's outcome (a replay), yet #2 ran the
side effect again. The timing says which guard failed: inside the window (the check did not see #1's
success: no atomic claim, or the lookup missed), concurrently (no lock held while #1 ran), or after the
window (the key had expired: a dedup window too short for the retry schedule).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from idemview.domain.model import Outcome, Status


def span_words(seconds: float) -> str:
    """A duration in the largest fitting unit: "5 s", "3 min", "24 h", "2 d" (rounded)."""
    s = abs(seconds)
    if s < 90:
        return f"{s:.0f} s" if s >= 1 else f"{s * 1000:.0f} ms"
    if s < 90 * 60:
        return f"{s / 60:.0f} min"
    if s < 48 * 3600:
        return f"{s / 3600:.0f} h" if s % 3600 < 60 or s >= 3 * 3600 else f"{s / 3600:.1f} h"
    return f"{s / 86400:.0f} d"


def _window(detail: Any) -> tuple[datetime | None, float | None]:
    """(instant the key expired, window length in seconds) from the first record (expires_at - created_at)
    or the layout's dedup window."""
    recs = detail.records or []
    rec = recs[0] if recs else None
    if rec is not None and rec.expires_at is not None:
        length = (rec.expires_at - rec.created_at).total_seconds() if rec.created_at else None
        return rec.expires_at, length
    w = detail.window_s
    if w is not None and rec is not None and rec.created_at is not None:
        return rec.created_at + timedelta(seconds=w), w
    return None, w


def why_duplicate(detail: Any) -> list[str]:
    """Plain sentences explaining why the operation of ``detail`` (a :class:`~idemview.services.session.
    Detail`) took effect more than once; [] when the evidence shows no second success. Times are UTC
    instants from the ledger; durations are rounded for reading."""
    out: list[str] = []
    expiry, length = _window(detail)
    win = f"the {span_words(length)} dedup window" if length else "the dedup window"
    ok = sorted(
        (a for a in detail.attempts if a.outcome == Outcome.SUCCEEDED and a.started_at is not None),
        key=lambda a: a.started_at,
    )
    for first, again in zip(ok, ok[1:], strict=False):
        n1 = f"#{first.number}" if first.number is not None else "the first"
        n2 = f"#{again.number}" if again.number is not None else "a later attempt"
        end = first.finished_at
        if end is not None and again.started_at < end:
            early = span_words((end - again.started_at).total_seconds())
            out.append(
                f"Attempt {n2} started while {n1} was still running ({early} before it finished), under the same "
                "key: nothing held the key while it ran (no lock or atomic claim)."
            )
            continue
        ref, verb = (end, "succeeded") if end is not None else (first.started_at, "started")
        gap = span_words((again.started_at - ref).total_seconds())
        if expiry is not None and again.started_at >= expiry:
            past = span_words((again.started_at - expiry).total_seconds())
            where = f"after {win} had ended (the key expired {past} before)"
            cause = "a retry outlived the key: the window is shorter than the retry schedule."
        else:
            where = f"inside {win}" if (expiry is not None or length) else "with no dedup window known"
            cause = "the key was there, yet its earlier success was not replayed: the lookup did not see it."
        out.append(f"Attempt {n2} started {gap} after {n1} {verb}, {where}, under the same key: {cause}")
    done = sorted(
        (r for r in detail.records if r.status == Status.COMPLETED and r.created_at is not None),
        key=lambda r: r.created_at,
    )
    if len(done) >= 2:
        a, b = done[0], done[1]
        since = a.completed_at or a.created_at
        out.append(
            f"A second completed record for this key was created {span_words((b.created_at - since).total_seconds())} "
            "after the first: the ledger let two records share one (scope, key) — no unique constraint held."
        )
    fx = getattr(detail, "effects", None) or []
    if len(fx) >= 2 and len(ok) < 2:
        out.append(
            f"{len(fx)} effect records downstream for {len(ok) or 'no'} succeeded attempt"
            f"{'s' if len(ok) != 1 else ''}: the side effect was repeated where the ledger did not see it "
            "(a retry inside the worker or of the downstream call, under the same key)."
        )
    return out
