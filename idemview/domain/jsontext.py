"""The one place JSON read from a ledger is parsed, with its nesting bounded (issue 19 item 11).

Python's ``json`` decoder and encoder recurse once per level: a document nested a few thousand levels
deep raises ``RecursionError`` in the parser, and any recursive walk over the parsed value (masking,
re-encoding, pretty-printing) fails the same way further on. Ledger payloads are data an attacker or a
bug may shape, so every parse of ledger JSON goes through :func:`loads`, which refuses a document
nested deeper than :data:`MAX_JSON_DEPTH` with :class:`JSONTooDeep` (a ``ValueError``: callers already
treat it as broken JSON and keep the raw text, which is then masked as text). No code here recurses on
the data: the depth is measured by a loop over the bracket characters.

The SQLAlchemy engines use :func:`loads_or_text` as their ``json_deserializer`` (PostgreSQL ``json`` /
``jsonb``, MySQL ``JSON`` columns): a too-deep document comes back as its text instead of failing the
whole page.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "JSONTooDeep", "json_depth", "loads", "loads_or_text"]

#: Deepest nesting (arrays and objects) parsed; deeper documents are kept as text. Far above any real
#: payload (Stripe's deepest documented objects are under 10 levels) and far below the interpreter's
#: recursion limit, so the stdlib parser, the masker and ``json.dumps`` never come near it.
MAX_JSON_DEPTH = 100


class JSONTooDeep(ValueError):
    """A JSON document nested deeper than :data:`MAX_JSON_DEPTH` levels (``depth`` is how deep)."""

    def __init__(self, depth: int):
        super().__init__(f"JSON nested {depth} levels deep (more than {MAX_JSON_DEPTH}); kept as text")
        self.depth = depth


# JSON string literals (RFC 8259 §7): brackets inside them do not nest.
_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS_RE = re.compile(r"[^\[\]{}]+")


def json_depth(text: str | bytes) -> int:
    """Deepest nesting of arrays/objects in a JSON text (0 for a scalar), by a loop, never recursion.
    Unbalanced text is measured as far as it goes (the parser reports it as broken)."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "replace")
    depth = deepest = 0
    for ch in _BRACKETS_RE.sub("", _STRING_RE.sub("", text)):
        if ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        else:
            depth -= 1
    return deepest


def _check(text: str | bytes) -> None:
    # Fast path in C: fewer opening brackets than the bound cannot nest deeper than it.
    if isinstance(text, str):
        opening = text.count("[") + text.count("{")
    else:
        b = bytes(text)
        opening = b.count(b"[") + b.count(b"{")
    if opening > MAX_JSON_DEPTH:
        d = json_depth(text)
        if d > MAX_JSON_DEPTH:
            raise JSONTooDeep(d)


def loads(text: str | bytes, parse: Callable[[Any], Any] = json.loads) -> Any:
    """``parse(text)`` (``json.loads`` by default; the Redis snapshot passes ``orjson.loads``) after
    checking the nesting. Raises :class:`JSONTooDeep` beyond :data:`MAX_JSON_DEPTH`, and whatever
    ``parse`` raises on malformed JSON (``ValueError`` for both stdlib json and orjson)."""
    _check(text)
    return parse(text)


def loads_or_text(text: str | bytes) -> Any:
    """:func:`loads`, or the text itself (``str``) when it is nested too deep: a driver's JSON column
    deserializer that never fails a whole result set on one document."""
    try:
        return loads(text)
    except JSONTooDeep:
        return text if isinstance(text, str) else bytes(text).decode("utf-8", "replace")
