"""Values a layout reads from another table of the ledger's database, joined on the operations row:
the lock time from a worker's heartbeat (``[expiry] lock_time_from``) and a kind looked up by id
(``kind = {column = ..., lookup = {...}}``). The form is parsed here; :mod:`idemview.ledger.reader`
builds the SQL (a scalar subquery each)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Builds the exception raised for a malformed entry (the layout module's LayoutError, with its file).
Fail = Callable[[str], Exception]


@dataclass(frozen=True, slots=True)
class LockTimeFrom:
    """``[expiry] lock_time_from``: the record's lock time (``locked_at``) is ``column`` of the row of
    ``table`` (in ``schema``, default the layout's) whose columns match the operations row as ``on``
    says (operations column -> that table's column), stored as ``encoding``. Procrastinate: a ``doing``
    job's worker heartbeat (``procrastinate_workers.last_heartbeat``)."""

    table: str
    on: tuple[tuple[str, str], ...]
    column: str
    encoding: str = "datetime"
    schema: str | None = None


@dataclass(frozen=True, slots=True)
class Lookup:
    """``kind = {column = ..., lookup = {...}}``: the value is ``value`` of the row of ``table`` (in
    ``schema``, default the layout's) whose ``column`` equals the operations column; where that table,
    or the row, is missing, the operations column's own value (as text). Graphile Worker v0.16+:
    ``_private_jobs.task_id`` -> ``_private_tasks.identifier`` (graphile/worker sql/000011.sql,
    sql/000016.sql)."""

    table: str
    column: str
    value: str
    schema: str | None = None


def parse_lock_time_from(v: Any, times: dict, encodings: tuple[str, ...], fail: Fail) -> LockTimeFrom:
    """Parse ``[expiry] lock_time_from`` (see :class:`LockTimeFrom`); ``times`` are the layout's
    [operations.times], ``encodings`` the time encodings. Raises ``fail(message)``."""
    if not isinstance(v, dict) or set(v) - {"table", "schema", "on", "column", "encoding"}:
        raise fail("expiry.lock_time_from takes {table, on = {column = other_column}, column, encoding, schema}")
    on = v.get("on")
    if not isinstance(on, dict) or not on or not all(isinstance(a, str) and isinstance(b, str) for a, b in on.items()):
        raise fail("expiry.lock_time_from.on maps operations columns to the joined table's columns")
    if not all(isinstance(v.get(k), str) and v[k] for k in ("table", "column")):
        raise fail("expiry.lock_time_from needs table and column")
    enc = v.get("encoding", "datetime")
    if enc not in encodings:
        raise fail(f"expiry.lock_time_from.encoding {enc!r} is not one of {', '.join(encodings)}")
    if "locked_at" in times:
        raise fail("expiry.lock_time_from replaces a locked_at time: give one or the other")
    return LockTimeFrom(v["table"], tuple(on.items()), v["column"], enc, v.get("schema"))


def parse_lookup(name: str, v: Any, fail: Fail) -> Lookup:
    """Parse a ``lookup`` table (see :class:`Lookup`); only the kind takes one. Raises ``fail(message)``."""
    if name != "operations.kind":
        raise fail(f"{name}: lookup is for operations.kind only")
    if not isinstance(v, dict) or set(v) - {"table", "column", "value", "schema"}:
        raise fail(f"{name}.lookup takes {{table, column, value, schema}}")
    if not all(isinstance(v.get(k), str) and v.get(k) for k in ("table", "column", "value")):
        raise fail(f"{name}.lookup needs table, column (matched to the operations column) and value")
    schema = v.get("schema")
    if schema is not None and not isinstance(schema, str):
        raise fail(f"{name}.lookup.schema must be a schema name")
    return Lookup(v["table"], v["column"], v["value"], schema)
