"""The JSON Schema of ``scan --format json`` (DESIGN §9) and a strict parser for it, shared by the CLI tests
of every source (SQL files, servers, Redis).

Strict means: a key written twice in one object, or a bare ``NaN``/``Infinity`` (not JSON, RFC 8259 §6),
is an error, where ``json.loads`` would keep one of the twins or read the constant silently."""

from __future__ import annotations

import json
from typing import Any

ISO = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$"
_COUNTS = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}

SCAN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["now", "layout", "operations", "attempts", "counts", "unmapped", "findings"],
    "properties": {
        "now": {"type": "string", "pattern": ISO},
        "layout": {"type": "string"},
        "operations": {"type": "integer", "minimum": 0},
        "attempts": {"type": "integer", "minimum": 0},
        "counts": {
            "type": "object",
            "additionalProperties": {"type": "integer", "minimum": 1},
        },
        "unmapped": {
            "type": "object",
            "required": ["status", "outcome"],
            "additionalProperties": False,
            "properties": {"status": _COUNTS, "outcome": _COUNTS},
        },
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["kind", "severity", "scope", "key", "explanation", "evidence"],
                "additionalProperties": False,
                "properties": {
                    "kind": {"type": "string"},
                    "severity": {"enum": ["critical", "high", "medium", "low", "info"]},
                    # another branch adds what the action does per finding, and secret_at_rest's column
                    "action": {"type": "string"},
                    "column": {"type": "string"},
                    "scope": {"type": ["string", "null"]},
                    "key": {"type": ["string", "null"]},
                    "explanation": {"type": "string", "minLength": 1},
                    "evidence": {"type": "array", "items": {"type": "object"}},
                },
            },
        },
        # beyond DESIGN §9: stored times that are no instant (per time field), why a kind cannot be
        # checked, the Redis snapshot, the effects source
        "unknown_times": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}},
        "not_checkable": {"type": "object", "additionalProperties": {"type": "string"}},
        "server_time": {"type": ["string", "null"], "pattern": ISO},
        "snapshot": {"type": "object"},
        "effects": {"type": "object"},
    },
    "additionalProperties": False,
}


class DuplicateKey(ValueError):
    """A JSON object carries one key twice."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKey(f"key {k!r} written twice in one object")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_loads(text: str) -> Any:
    """``json.loads`` that refuses duplicate keys (:class:`DuplicateKey`) and NaN/Infinity (ValueError)."""
    return json.loads(text, object_pairs_hook=_unique, parse_constant=_no_constant)


def check_scan_json(text: str) -> dict[str, Any]:
    """The parsed ``scan --format json`` output, after checking it is strict JSON and fits
    :data:`SCAN_SCHEMA`, and that ``counts`` agrees with the findings listed. Raises on any misfit."""
    import jsonschema

    doc = strict_loads(text)
    jsonschema.validate(doc, SCAN_SCHEMA, format_checker=jsonschema.FormatChecker())
    per_kind: dict[str, int] = {}
    for f in doc["findings"]:
        per_kind[f["kind"]] = per_kind.get(f["kind"], 0) + 1
    assert doc["counts"] == per_kind
    return doc
