"""Values a layout reads from another table of the ledger's database, joined on the operations row:
the lock time from a worker's heartbeat (``[expiry] lock_time_from``), the lock's end kept per row in
another table (``[expiry] lock_expires_from``) and a kind looked up by id (``kind = {column = ...,
lookup = {...}}``). The form is parsed here; :mod:`idemview.ledger.schema` builds the SQL (a scalar
subquery each)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Builds the exception raised for a malformed entry (the layout module's LayoutError, with its file).
Fail = Callable[[str], Exception]


@dataclass(frozen=True, slots=True)
class JoinVia:
    """``via = {table, on, schema, column}``: a table between the operations row and the joined one: its
    rows whose columns match the operations row as ``on`` says (operations column -> this table's column).
    Solid Queue: a job's claim (``solid_queue_claimed_executions.job_id``) names its process. ``column``
    (optional): this row's own time, read where the joined row is missing (stored as the joined column
    is): a claim whose process row is gone is orphaned, and Solid Queue fails it (ClaimedExecution.orphaned,
    ProcessMissingError, lib/solid_queue/supervisor/maintenance.rb): its lock time is its claim's
    ``created_at``."""

    table: str
    on: tuple[tuple[str, str], ...]
    schema: str | None = None
    column: str | None = None


@dataclass(frozen=True, slots=True)
class LockTimeFrom:
    """``[expiry] lock_time_from``: the record's lock time (``locked_at``) is ``column`` of the row of
    ``table`` (in ``schema``, default the layout's) whose columns match the operations row as ``on``
    says (operations column -> that table's column), stored as ``encoding``. Procrastinate: a ``doing``
    job's worker heartbeat (``procrastinate_workers.last_heartbeat``).

    With ``via`` (:class:`JoinVia`) the operations row reaches ``table`` in two steps: ``on`` then maps
    the ``via`` table's columns to ``table``'s (Solid Queue: job -> claimed execution -> its process's
    ``last_heartbeat_at``). ``where``: predicates (the layout's form) on ``table``'s row: only rows where
    all hold count (Hatchet: a runtime not evicted). The same form gives ``[expiry] lock_expires_from``:
    ``column`` is then the lock's end itself (Hatchet's ``v1_task_runtime.timeout_at``), or with
    ``seconds`` a heartbeat the lock ends ``seconds`` after (GoodJob: the locking process's
    ``good_job_processes.updated_at`` + 5 min); a record whose joined row is missing then falls back to
    its ``locked_at`` + the layout's lock timeout."""

    table: str
    on: tuple[tuple[str, str], ...]
    column: str
    encoding: str = "datetime"
    schema: str | None = None
    via: JoinVia | None = None
    where: tuple[Any, ...] = ()
    #: lock_expires_from only: the lock ends this many seconds after ``column`` (a heartbeat); None:
    #: ``column`` is the end itself
    seconds: float | None = None

    def operations_columns(self) -> set[str]:
        """The operations columns the join starts from."""
        return {c for c, _o in (self.via.on if self.via is not None else self.on)}


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


def _on(v: Any, name: str, fail: Fail) -> tuple[tuple[str, str], ...]:
    if not isinstance(v, dict) or not v or not all(isinstance(a, str) and isinstance(b, str) for a, b in v.items()):
        raise fail(f"{name}.on maps columns to the joined table's columns")
    return tuple(v.items())


def parse_lock_time_from(
    v: Any,
    times: dict,
    encodings: tuple[str, ...],
    fail: Fail,
    predicate: Callable[[Any], Any] | None = None,
    entry: str = "lock_time_from",
) -> LockTimeFrom:
    """Parse ``[expiry] lock_time_from`` (or, ``entry = "lock_expires_from"``, the lock's end; see
    :class:`LockTimeFrom`); ``times`` are the layout's [operations.times], ``encodings`` the time
    encodings, ``predicate`` parses one ``where`` predicate. Raises ``fail(message)``."""
    name = f"expiry.{entry}"
    known = {"table", "schema", "on", "column", "encoding", "via", "where"}
    if entry == "lock_expires_from":
        known.add("seconds")
    if not isinstance(v, dict) or set(v) - known:
        raise fail(f"{name} takes {{{', '.join(sorted(known))}}}")
    secs = v.get("seconds")
    if secs is not None and (isinstance(secs, bool) or not isinstance(secs, (int, float)) or secs < 0):
        raise fail(f"{name}.seconds must be a non-negative number of seconds")
    on = _on(v.get("on"), name, fail)
    if not all(isinstance(v.get(k), str) and v[k] for k in ("table", "column")):
        raise fail(f"{name} needs table and column")
    enc = v.get("encoding", "datetime")
    if enc not in encodings:
        raise fail(f"{name}.encoding {enc!r} is not one of {', '.join(encodings)}")
    replaced = "locked_at" if entry == "lock_time_from" else "lock_expires_at"
    if replaced in times:
        raise fail(f"{name} replaces a {replaced} time: give one or the other")
    via = None
    if "via" in v:
        w = v["via"]
        if (
            not isinstance(w, dict)
            or set(w) - {"table", "on", "schema", "column"}
            or not isinstance(w.get("table"), str)
            or not isinstance(w.get("column", ""), str)
        ):
            raise fail(f"{name}.via takes {{table, on = {{operations_column = via_column}}, schema, column}}")
        via = JoinVia(w["table"], _on(w.get("on"), f"{name}.via", fail), w.get("schema"), w.get("column") or None)
    where = v.get("where") or []
    if not isinstance(where, list) or (where and predicate is None):
        raise fail(f"{name}.where takes a list of predicates on the joined table")
    preds = tuple(predicate(p) for p in where) if predicate is not None else ()
    return LockTimeFrom(
        v["table"], on, v["column"], enc, v.get("schema"), via, preds, float(secs) if secs is not None else None
    )


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
