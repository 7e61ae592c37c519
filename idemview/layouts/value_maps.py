"""The user's extra raw values (``--map-status``, a connection's ``status_map`` / ``outcome_map``)
merged into a parsed layout's value maps, without editing the layout."""

from __future__ import annotations

from idemview.domain.model import Outcome, Status
from idemview.layouts.spec import Layout, LayoutError, Predicate, StatusRule, StatusSource


def parse_value_map(
    items: list[str] | dict[str, str] | None, target: type[Status] | type[Outcome] = Status, what: str = "status"
) -> dict[str, str]:
    """``["RAW=STATUS", ...]`` (the CLI's ``--map-status``) or a ``{RAW: STATUS}`` table (a saved
    connection's ``status_map``) as a dict, checked against ``target`` (:class:`Status` or
    :class:`Outcome`). Raises :class:`LayoutError` with a one-line message on a malformed entry."""
    if not items:
        return {}
    allowed = {e.value for e in target}
    pairs = items.items() if isinstance(items, dict) else []
    if not isinstance(items, dict):
        out = []
        for it in items:
            raw, sep, val = str(it).rpartition("=")
            if not sep or not raw:
                raise LayoutError(f"--map-{what} {it!r}: expected RAW={what.upper()}, e.g. RETRIES_EXCEEDED=failed")
            out.append((raw, val))
        pairs = out
    res = {}
    for raw, val in pairs:
        val = str(val).strip()
        if val not in allowed:
            raise LayoutError(f"{what} map {raw!r} -> {val!r}: not one of {', '.join(sorted(allowed))}")
        res[str(raw)] = val
    return res


def _merge_map(s: StatusSource, extra: dict[str, str], where: str) -> StatusSource:
    from dataclasses import replace

    if not extra:
        return s
    if s.maps():
        return replace(s, map={**s.map, **extra})
    raw = s.raw or s.column
    if s.rules and raw:
        # Derived states: the user's entries go first, as rules over the raw column.
        rules = [StatusRule((Predicate(raw, "eq", k),), v) for k, v in extra.items()] + list(s.rules)
        return replace(s, rules=rules)
    raise LayoutError(f"{where} has no raw value column to map: --map-status/--map-outcome cannot apply")


def with_value_maps(
    layout: Layout, status: dict[str, str] | None = None, outcome: dict[str, str] | None = None
) -> Layout:
    """A copy of ``layout`` whose status (and attempt outcome) maps also map the user's extra raw
    values (a connection's ``status_map`` / ``outcome_map``, ``--map-status`` / ``--map-outcome``):
    values the preset does not know, without editing the preset. The user's entry wins over the
    preset's for the same raw value. Raises :class:`LayoutError` when the layout has no raw column."""
    from dataclasses import replace

    if not status and not outcome:
        return layout
    out = replace(layout, status=_merge_map(layout.status, status or {}, f"layout {layout.name!r} status"))
    out.extra_values = {
        "status": {**layout.extra_values.get("status", {}), **(status or {})},
        "outcome": {**layout.extra_values.get("outcome", {}), **(outcome or {})},
    }
    if outcome:
        if layout.attempts.outcome is None or layout.attempts.source != "table":
            raise LayoutError(f"layout {layout.name!r} reads no raw attempt outcome to map")
        out.attempts = replace(
            layout.attempts,
            outcome=_merge_map(layout.attempts.outcome, outcome, f"layout {layout.name!r} attempt outcome"),
        )
    return out
