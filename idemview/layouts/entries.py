"""Parsers of a layout's single entries: a time column, a value source, a predicate, a status source, a
list of columns, a number of seconds. Each raises :class:`~idemview.layouts.spec.LayoutError` naming the
layout (``where``) and the entry; :mod:`idemview.layouts.parse` composes them into sections."""

from __future__ import annotations

import re
from enum import Enum
from typing import Any, cast

from idemview.layouts.joins import parse_lookup
from idemview.layouts.spec import (
    PAYLOAD_ENCODINGS,
    PREDICATE_GROUPS,
    PREDICATE_OPS,
    TIME_ENCODINGS,
    LayoutError,
    Predicate,
    StatusRule,
    StatusSource,
    TimeColumn,
    ValueSource,
)

# A JSON path is compiled into each engine's own syntax: only plain member names are accepted.
_JSON_PATH = re.compile(r"\$(\.[A-Za-z0-9_\-]+)+")


def _err(where: str, msg: str) -> LayoutError:
    return LayoutError(f"layout {where}: {msg}")


def _time(where: str, name: str, v: Any) -> TimeColumn:
    if isinstance(v, str):
        return TimeColumn(v)
    if isinstance(v, dict) and isinstance(v.get("column"), str):
        enc = v.get("encoding", "datetime")
        if enc not in TIME_ENCODINGS:
            raise _err(where, f"{name}: encoding {enc!r} is not one of {', '.join(TIME_ENCODINGS)}")
        zone = v.get("zone", "UTC")
        try:
            from zoneinfo import ZoneInfo

            ZoneInfo(zone)
        except Exception:
            raise _err(where, f"{name}: zone {zone!r} is not an IANA time zone") from None
        unless = v.get("unless") or []
        if not isinstance(unless, list):
            raise _err(where, f"{name}: unless takes a list of predicates")
        extra = set(v) - {"column", "encoding", "zone", "unless"}
        if extra:
            raise _err(where, f"{name}: unknown entries {', '.join(sorted(extra))}")
        return TimeColumn(v["column"], enc, zone, tuple(_predicate(where, p) for p in unless))
    raise _err(where, f"{name}: expected a column name or {{column = ..., encoding = ...}}")


def _value(where: str, name: str, v: Any, payload: bool = False) -> ValueSource:
    if isinstance(v, str):
        return ValueSource(column=v, encoding=("text" if payload else None))
    if isinstance(v, dict):
        if "value" in v:
            return ValueSource(literal=v["value"])
        if "hash" in v:
            return _hash_source(where, name, v, payload)
        if not isinstance(v.get("column"), str):
            raise _err(where, f"{name}: needs a column")
        jp = v.get("json_path")
        if jp is not None and not (isinstance(jp, str) and _JSON_PATH.fullmatch(jp)):
            raise _err(where, f"{name}: json_path must look like $.a.b (names of letters, digits, _ and -)")
        enc = v.get("encoding")
        if not payload and enc not in (None, "hex"):
            raise _err(
                where,
                f'{name}: encoding {enc!r}: a reference takes only encoding = "hex" '
                f"(binary column shown as lowercase hex)",
            )
        if payload:
            enc = enc or "text"
            if enc not in PAYLOAD_ENCODINGS:
                raise _err(where, f"{name}: encoding {enc!r} is not one of {', '.join(PAYLOAD_ENCODINGS)}")
        unless = v.get("unless") or []
        if not isinstance(unless, list) or (unless and payload):
            raise _err(where, f"{name}: unless takes a list of predicates (references only)")
        extra = set(v) - {"column", "json_path", "encoding", "unless", "add", "lookup"}
        if extra:
            raise _err(where, f"{name}: unknown entries {', '.join(sorted(extra))}")
        lookup = parse_lookup(name, v["lookup"], lambda m: _err(where, m)) if "lookup" in v else None
        if lookup is not None and (jp is not None or enc is not None):
            raise _err(where, f"{name}: lookup takes the column's plain value (no json_path or encoding)")
        add = v.get("add", 0)
        if add and not name.endswith("attempt_count"):
            raise _err(where, f"{name}: add is for attempt_count only (a retry counter + 1 = attempts)")
        if not isinstance(add, int) or isinstance(add, bool):
            raise _err(where, f"{name}: add takes a whole number, e.g. add = 1")
        return ValueSource(
            column=v["column"],
            json_path=jp,
            encoding=enc,
            unless=tuple(_predicate(where, p) for p in unless),
            add=add,
            lookup=lookup,
        )
    raise _err(where, f"{name}: expected a column name or a table")


def _hash_source(where: str, name: str, v: dict, payload: bool) -> ValueSource:
    """``{hash = [columns], unless_empty = [columns], unless = [predicates]}`` (references only)."""
    extra = set(v) - {"hash", "unless_empty", "unless"}
    if extra:
        raise _err(where, f"{name}: unknown entries {', '.join(sorted(extra))} beside hash")
    if payload or name.endswith("attempt_count"):
        raise _err(where, f"{name}: hash is for references (intent_ref, fingerprint, effect_ref)")

    def names(k: str) -> tuple[str, ...]:
        x = v.get(k, [])
        if not isinstance(x, list) or not all(isinstance(c, str) and c for c in x):
            raise _err(where, f"{name}: {k} takes a list of column names")
        return tuple(x)

    cols, empty = names("hash"), names("unless_empty")
    if not cols:
        raise _err(where, f"{name}: hash needs at least one column")
    unless = v.get("unless") or []
    if not isinstance(unless, list):
        raise _err(where, f"{name}: unless takes a list of predicates")
    return ValueSource(hash=cols, unless_empty=empty, unless=tuple(_predicate(where, p) for p in unless))


def _predicate(where: str, d: Any) -> Predicate:
    if isinstance(d, dict) and len(d) == 1 and next(iter(d)) in PREDICATE_GROUPS:
        # {any = [pred, ...]}: holds when at least one member holds (an OR group); {all = [...]}: when
        # every member holds (an AND group, for an ``unless`` list whose entries are alternatives)
        op = next(iter(d))
        if not isinstance(d[op], list) or not d[op]:
            raise _err(where, f"{op} takes a non-empty list of predicates: {d!r}")
        return Predicate("", op, tuple(_predicate(where, p) for p in d[op]))
    if not isinstance(d, dict) or not isinstance(d.get("column"), str):
        raise _err(where, f"a predicate needs a column: {d!r}")
    ops = [k for k in d if k != "column"]
    if len(ops) != 1 or ops[0] not in PREDICATE_OPS:
        raise _err(where, f"a predicate takes exactly one of {', '.join(PREDICATE_OPS)}: {d!r}")
    op = ops[0]
    val = d[op]
    if op in ("in", "not_in") and not isinstance(val, list):
        raise _err(where, f"{op} takes a list: {d!r}")
    if op == "ge_column" and not (isinstance(val, str) and val):
        raise _err(where, f"ge_column takes another column's name: {d!r}")
    if op == "is_null" and not isinstance(val, bool):
        raise _err(where, f"is_null takes true or false: {d!r}")
    if op == "in_table" and not (
        isinstance(val, dict)
        and isinstance(val.get("table"), str)
        and isinstance(val.get("column"), str)
        and set(val) <= {"table", "column", "schema"}
    ):
        raise _err(where, f"in_table takes {{table = ..., column = ...}} (and optionally schema): {d!r}")
    return Predicate(d["column"], op, val)


def _status(where: str, name: str, d: Any, target: type[Enum]) -> StatusSource:
    allowed = {e.value for e in target}
    if isinstance(d, str):
        if d not in allowed:
            raise _err(where, f"{name}: {d!r} is not one of {', '.join(sorted(allowed))}")
        return StatusSource(literal=d, default=d)
    if not isinstance(d, dict):
        raise _err(where, f"{name}: expected a table")
    extra = set(d) - {"column", "map", "rules", "default", "raw", "null"}
    if extra:
        raise _err(
            where, f"{name}: unknown entries {', '.join(sorted(extra))} (known: column, map, rules, default, raw, null)"
        )
    s = StatusSource(column=d.get("column"), raw=d.get("raw"), default=d.get("default", "unknown"), null=d.get("null"))
    if s.null is not None and s.null not in allowed:
        raise _err(where, f"{name}.null: {s.null!r} is not one of {', '.join(sorted(allowed))}")
    for k, v in (d.get("map") or {}).items():
        if v not in allowed:
            raise _err(where, f"{name}.map: {k!r} maps to {v!r}, not one of {', '.join(sorted(allowed))}")
        s.map[str(k)] = v
    for i, r in enumerate(d.get("rules") or []):
        if not isinstance(r, dict) or "status" not in r:
            raise _err(where, f"{name}.rules[{i}]: needs when = [...] and status = ...")
        st = r.get("status") or r.get("outcome")
        if st not in allowed:
            raise _err(where, f"{name}.rules[{i}]: {st!r} is not one of {', '.join(sorted(allowed))}")
        s.rules.append(StatusRule(tuple(_predicate(where, p) for p in r.get("when", [])), cast(str, st)))
    if s.default not in allowed:
        raise _err(where, f"{name}.default: {s.default!r} is not one of {', '.join(sorted(allowed))}")
    if not s.column and not s.rules:
        raise _err(where, f"{name}: needs a column (with a map) or rules")
    return s


def _cols(where: str, name: str, v: Any, required: bool) -> list[str]:
    if v is None:
        if required:
            raise _err(where, f"{name} is required")
        return []
    if isinstance(v, str):
        return [v]
    if isinstance(v, list) and all(isinstance(c, str) for c in v) and (v or not required):
        return list(v)
    raise _err(where, f"{name}: expected a column name or a list of column names")


def _num(where: str, name: str, v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 <= v < float("inf")):
        raise _err(where, f"{name} must be a finite, non-negative number of seconds")
    return float(v)


def _threshold(where: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _err(where, f"tunables.retry_threshold must be a whole number >= 0, not {v!r}")
    return v
