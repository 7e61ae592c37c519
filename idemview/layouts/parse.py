"""Parse and form-validate a layout's TOML (the format: :mod:`idemview.layouts.layout`) into a
:class:`~idemview.layouts.spec.Layout`: one parser per section, composed by :func:`parse_layout`. Entry
parsers (times, values, predicates, statuses) are in :mod:`idemview.layouts.entries`."""

from __future__ import annotations

import tomllib
from typing import Any

from idemview.domain.actions import ActionRuleError, ActionRules
from idemview.domain.model import Outcome, Status
from idemview.layouts.entries import _cols, _err, _num, _predicate, _status, _threshold, _time, _value
from idemview.layouts.joins import parse_lock_time_from
from idemview.layouts.spec import (
    ATTEMPT_SOURCES,
    PAYLOAD_FIELDS,
    TIME_ENCODINGS,
    TIME_FIELDS,
    VALUE_FIELDS,
    AttemptsSpec,
    EffectsSpec,
    Layout,
    LockHeartbeat,
    StatusSource,
    TimeColumn,
    ValueSource,
)

SECTIONS = ("layout", "operations", "attempts", "expiry", "tunables", "detect", "effects", "actions")
EXPIRY_KEYS = {
    "retention_seconds",
    "retention_from",
    "lock_timeout_seconds",
    "lock_timeout_column",
    "lock_time_from",
    "lock_expires_from",
    "lock_heartbeat",
    "dedup_window_seconds",
}
OPERATIONS_KEYS = {
    "table",
    "schema",
    "row_id",
    "key",
    "scope",
    "kind",
    "status",
    "times",
    "fields",
    "optional",
    "key_fallback",
    "key_required",
    "deletes_completed",
}


def parse_layout(text: str, origin: str = "<string>") -> Layout:
    """Parse and form-validate layout TOML. Raises :class:`LayoutError` with a clear message.

    Sections are checked in a fixed order (the document, ``[operations]``, its times, fields and
    status, ``[attempts]``, the remaining sections, then the rules across sections), so a layout with
    several mistakes always reports the same one first."""
    d = _toml(text, origin)
    name = _layout_name(d, origin)
    _check_sections(d, origin)
    where = f"{name!r} ({origin})"
    ops = _operations_table(where, d)
    times = _times(where, ops)
    fields = _fields(where, ops)
    status = _status(where, "operations.status", ops.get("status", "unknown"), Status)
    att = _attempts(where, d.get("attempts") or {}, fields)
    lay = _assemble(where, d, name, ops, times, fields, status, att, text, origin)
    _check_operations(where, lay)
    _check_expiry(where, lay)
    return lay


def _toml(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _err(origin, f"not valid TOML: {e}") from None


def _layout_name(d: dict[str, Any], origin: str) -> str:
    meta = d.get("layout") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise _err(origin, "[layout] name is required")
    if not name.isprintable() or len(name) > 100:
        raise _err(origin, "[layout] name must be printable text of at most 100 characters")
    return name


def _check_sections(d: dict[str, Any], origin: str) -> None:
    """Unknown sections, and unknown entries in ``[expiry]`` and ``[tunables]``."""
    unknown = set(d) - set(SECTIONS)
    if unknown:
        raise _err(
            origin,
            f"unknown sections: {', '.join(sorted(unknown))} (known: layout, operations, "
            "attempts, expiry, tunables, effects, actions)",
        )
    for sect, keys in (("expiry", EXPIRY_KEYS), ("tunables", {"retry_threshold"})):
        extra = set(d.get(sect) or {}) - keys
        if extra:
            raise _err(origin, f"[{sect}] has unknown entries: {', '.join(sorted(extra))}")


def _operations_table(where: str, d: dict[str, Any]) -> dict[str, Any]:
    ops = d.get("operations")
    if not isinstance(ops, dict) or not isinstance(ops.get("table"), str):
        raise _err(where, "[operations] table is required")
    unknown = set(ops) - OPERATIONS_KEYS
    if unknown:
        raise _err(where, f"[operations] has unknown entries: {', '.join(sorted(unknown))}")
    return ops


def _times(where: str, ops: dict[str, Any]) -> dict[str, TimeColumn]:
    times = {}
    for k, v in (ops.get("times") or {}).items():
        if k not in TIME_FIELDS:
            raise _err(where, f"[operations.times] {k!r} is not one of {', '.join(TIME_FIELDS)}")
        times[k] = _time(where, f"operations.times.{k}", v)
    return times


def _fields(where: str, ops: dict[str, Any]) -> dict[str, ValueSource]:
    fields = {}
    for k, v in (ops.get("fields") or {}).items():
        if k not in VALUE_FIELDS + PAYLOAD_FIELDS:
            raise _err(where, f"[operations.fields] {k!r} is not one of {', '.join(VALUE_FIELDS + PAYLOAD_FIELDS)}")
        fields[k] = _value(where, f"operations.fields.{k}", v, payload=k in PAYLOAD_FIELDS)
    return fields


def _attempts(where: str, a: dict[str, Any], fields: dict[str, ValueSource]) -> AttemptsSpec:
    """``[attempts]``: the source defaults to ``counter`` when there is an ``attempt_count`` field."""
    src = a.get("source", "counter" if "attempt_count" in fields else "none")
    if src not in ATTEMPT_SOURCES:
        raise _err(where, f"[attempts] source {src!r} is not one of {', '.join(ATTEMPT_SOURCES)}")
    att = AttemptsSpec(source=src)
    if src == "table":
        if not isinstance(a.get("table"), str) or not isinstance(a.get("join"), dict) or not a["join"]:
            raise _err(where, '[attempts] source = "table" needs table and join')
        att.table, att.schema = a["table"], a.get("schema")
        att.join = {str(k): str(v) for k, v in a["join"].items()}
        att.number = a.get("number")
        att.outcome = _status(where, "attempts.outcome", a.get("outcome", "unknown"), Outcome)
        att.started_at = _time(where, "attempts.started_at", a["started_at"]) if a.get("started_at") else None
        att.finished_at = _time(where, "attempts.finished_at", a["finished_at"]) if a.get("finished_at") else None
        att.error, att.effect_ref, att.worker = a.get("error"), a.get("effect_ref"), a.get("worker")
        att.fingerprint = a.get("fingerprint")
        att.where = tuple(_predicate(where, p) for p in a.get("where") or [])
    elif src == "json_array":
        if not isinstance(a.get("column"), str):
            raise _err(where, '[attempts] source = "json_array" needs column')
        att.column = a["column"]
        att.element = {str(k): str(v) for k, v in (a.get("element") or {}).items()}
        att.outcome = _status(where, "attempts.outcome", a.get("outcome", "failed"), Outcome)
        att.element_time_encoding = a.get("element_time_encoding", "iso_text")
    elif src == "counter" and "attempt_count" not in fields:
        raise _err(where, '[attempts] source = "counter" needs operations.fields.attempt_count')
    return att


def _assemble(
    where: str,
    d: dict[str, Any],
    name: str,
    ops: dict[str, Any],
    times: dict[str, TimeColumn],
    fields: dict[str, ValueSource],
    status: StatusSource,
    att: AttemptsSpec,
    text: str,
    origin: str,
) -> Layout:
    """The :class:`Layout`, parsing the remaining entries in the order the keywords are listed."""
    meta = d.get("layout") or {}
    exp = d.get("expiry") or {}
    tun = d.get("tunables") or {}
    return Layout(
        name=name,
        title=meta.get("title", name),
        description=meta.get("description", ""),
        source=meta.get("source", ""),
        table=ops["table"],
        schema=ops.get("schema"),
        row_id=ops.get("row_id"),
        key=_cols(where, "operations.key", ops.get("key"), True),
        scope=_cols(where, "operations.scope", ops.get("scope"), False),
        kind=_value(where, "operations.kind", ops["kind"]) if "kind" in ops else None,
        status=status,
        times=times,
        fields=fields,
        attempts=att,
        retention_seconds=_num(where, "expiry.retention_seconds", exp.get("retention_seconds")),
        retention_from=exp.get("retention_from", "created_at"),
        lock_timeout_seconds=_num(where, "expiry.lock_timeout_seconds", exp.get("lock_timeout_seconds")),
        lock_timeout_column=exp.get("lock_timeout_column"),
        lock_time_from=(
            parse_lock_time_from(
                exp["lock_time_from"], times, TIME_ENCODINGS, lambda m: _err(where, m), lambda p: _predicate(where, p)
            )
            if "lock_time_from" in exp
            else None
        ),
        lock_expires_from=(
            parse_lock_time_from(
                exp["lock_expires_from"],
                times,
                TIME_ENCODINGS,
                lambda m: _err(where, m),
                lambda p: _predicate(where, p),
                "lock_expires_from",
            )
            if "lock_expires_from" in exp
            else None
        ),
        lock_heartbeat=_lock_heartbeat(where, exp["lock_heartbeat"]) if "lock_heartbeat" in exp else None,
        dedup_window_seconds=_num(where, "expiry.dedup_window_seconds", exp.get("dedup_window_seconds")),
        retry_threshold=_threshold(where, tun.get("retry_threshold", 5)),
        optional=_cols(where, "operations.optional", ops.get("optional"), False),
        detect=d.get("detect") or {},
        text=text,
        origin=origin,
        key_fallback=ops.get("key_fallback"),
        key_required=_cols(where, "operations.key_required", ops.get("key_required"), False),
        deletes_completed=ops.get("deletes_completed"),
        effects=_effects(where, d["effects"]) if "effects" in d else None,
        actions=_actions(where, d.get("actions")),
    )


def _check_operations(where: str, lay: Layout) -> None:
    if lay.deletes_completed is not None and not (isinstance(lay.deletes_completed, str) and lay.deletes_completed):
        raise _err(where, "operations.deletes_completed says, in words, what deletes a completed record")
    if lay.key_fallback is not None and not isinstance(lay.key_fallback, str):
        raise _err(where, "operations.key_fallback is a column name")
    if lay.key_required and (lay.key_fallback is None or not set(lay.key_required) <= set(lay.key)):
        raise _err(where, "operations.key_required names key columns, and needs key_fallback")


def _check_expiry(where: str, lay: Layout) -> None:
    """``[expiry]`` entries that depend on other sections (the times the layout reads, its optional
    columns)."""
    times = lay.times
    ltc = lay.lock_timeout_column
    if ltc is not None and not (
        (
            (isinstance(ltc, str) and ltc)
            or (isinstance(ltc, list) and ltc and all(isinstance(c, str) and c for c in ltc))
        )
        and "locked_at" in times
    ):
        raise _err(
            where,
            "expiry.lock_timeout_column names a column of seconds (or a list of them, one per version), "
            "and needs a locked_at time",
        )
    if isinstance(ltc, list) and len(ltc) > 1 and not set(ltc) <= set(lay.optional):
        raise _err(where, "expiry.lock_timeout_column: a list names alternatives, each in operations.optional")
    if lay.lock_heartbeat is not None and "locked_at" not in times:
        raise _err(where, "expiry.lock_heartbeat needs a locked_at time")
    if lay.retention_seconds is not None and lay.retention_from not in times:
        raise _err(where, f"expiry.retention_from {lay.retention_from!r} is not in [operations.times]")


def _lock_heartbeat(where: str, d: Any) -> LockHeartbeat:
    # {column = "heartbeat_on", encoding = "datetime", seconds_column = "heartbeat_seconds"}
    ok = isinstance(d, dict) and not set(d) - {"column", "encoding", "seconds_column"}
    enc = d.get("encoding", "datetime") if isinstance(d, dict) else None
    if not (
        ok
        and isinstance(d.get("column"), str)
        and d["column"]
        and isinstance(d.get("seconds_column"), str)
        and d["seconds_column"]
        and enc in TIME_ENCODINGS
    ):
        raise _err(
            where,
            "expiry.lock_heartbeat is {column = TIME COLUMN, encoding = ..., seconds_column = COLUMN OF SECONDS}",
        )
    return LockHeartbeat(TimeColumn(d["column"], enc), d["seconds_column"])


def _actions(where: str, d: Any) -> ActionRules:
    try:
        return ActionRules.from_dict(d, "[actions]")
    except ActionRuleError as e:
        raise _err(where, str(e)) from None


EFFECT_KEYS = {"table", "schema", "connection", "link", "id", "reference", "time", "where", "show", "optional"}


def _effects(where: str, e: Any) -> EffectsSpec:
    if not isinstance(e, dict) or not isinstance(e.get("table"), str) or not e["table"]:
        raise _err(where, "[effects] table is required")
    extra = set(e) - EFFECT_KEYS
    if extra:
        raise _err(where, f"[effects] has unknown entries: {', '.join(sorted(extra))}")
    link = e.get("link")
    if not (
        isinstance(link, dict)
        and set(link) == {"effect", "operation"}
        and all(isinstance(v, str) and v for v in link.values())
    ):
        raise _err(
            where,
            '[effects] link = {effect = "<effect column>", operation = "key" | '
            '"effect_ref" | "<operations column>"} is required',
        )
    if not isinstance(e.get("optional", False), bool):
        raise _err(where, "[effects] optional takes true or false")
    for k in ("schema", "connection", "id", "reference"):
        if e.get(k) is not None and not (isinstance(e[k], str) and e[k]):
            raise _err(where, f"[effects] {k} must be a non-empty string")
    return EffectsSpec(
        table=e["table"],
        link_effect=link["effect"],
        link_operation=link["operation"],
        schema=e.get("schema"),
        connection=e.get("connection"),
        id=e.get("id"),
        reference=e.get("reference"),
        time=_time(where, "effects.time", e["time"]) if e.get("time") is not None else None,
        where=tuple(_predicate(where, p) for p in e.get("where") or []),
        show=_cols(where, "effects.show", e.get("show"), False),
        optional=e.get("optional", False),
    )
