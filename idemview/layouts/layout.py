"""Layouts: how a ledger's tables and columns map onto the normalized model (DESIGN §4).

A layout is declarative TOML — table and column names, value maps and structured predicates, never
code or raw SQL. :func:`load_layout` parses and validates its *form*; :func:`check_against_database`
(in :mod:`idemview.ledger.reader`) validates it against a live database's reflected schema.

Format (every key not marked required is optional)::

    [layout]
    name = "stripe-style"                 # required
    title = "..."; description = "..."; source = "where the schema comes from"

    [operations]
    table = "idempotency_keys"           # required
    schema = "public"
    row_id = "id"                        # row identity: tells literal duplicate rows apart, pages
    key = ["idempotency_key"]            # required, one or more columns
    scope = ["user_id"]                  # zero or more columns ("" scope when none)
    key_fallback = "id"                  # a record whose key columns are all NULL is keyed "#<id>"
    key_required = ["singleton_on"]      # ... and so is one where any of these key columns is NULL
    deletes_completed = "complete_jobs deletes the job's row"   # the system deletes completed records:
                                         # a key's absence is not evidence of success, and two
                                         # successes of one key cannot be seen (said, not guessed)
                                         # (a key that only holds with them: pg-boss throttle slots)
    optional = ["name", "worker"]        # columns that may be absent (fields using them are dropped)
    kind = "request_path"                # a column, or {value = "literal"}, or {column=..., json_path=...}
    # or a name looked up in another table (same schema unless given) by this column; the column's own
    # value where that table or row is missing (Graphile Worker v0.16: the task's identifier):
    # kind = {column = "task_id", lookup = {table = "_private_tasks", column = "id", value = "identifier"}}

    [operations.status]                  # either a value map ...
    column = "status"
    map = {succeeded = "completed", running = "in_progress"}
    null = "new"                         # the status of a NULL raw value (Airflow: not scheduled yet)
    default = "unknown"                  # values outside the map (counted as "unmapped" by scan)
    # ... or ordered rules (first match wins) over columns, for ledgers that derive state:
    # rules = [{when = [{column = "finished_at", is_null = false}], status = "completed"}, ...]
    # a predicate may test presence in another table (same schema unless given):
    #   {column = "id", in_table = {table = "failed_executions", column = "job_id"}}
    # raw = "recovery_point"             # a column shown as the raw status with rules

    [operations.times]                   # each: "column" (encoding datetime) or a table
    created_at = {column = "created_at", encoding = "datetime"}
    # encodings: datetime (aware), naive (zone = "UTC" by default), epoch_s, epoch_ms, iso_text
    # unless = [pred, ...]: the time is missing on records where any predicate holds (a deadline that
    # belongs to one state: Airflow's trigger_timeout only bounds a deferred task)

    [operations.fields]                  # each: "column" or {column=..., json_path="$.a.b"}
    attempt_count = "attempts"           # or {column = "arguments", json_path = "$.executions"}
                                         # or {column = "retry_count", add = 1}: retries + 1 = attempts
    fingerprint = "request_hash"
    intent_ref = {column = "request_params", json_path = "$.order_id"}
    # unless = [pred, ...]: the value is NULL on records where any predicate holds (intended repeats
    # such as cron runs carry no intent: {column = "cron_key", is_null = false})
    # a binary reference (River unique_key): {column = "unique_key", encoding = "hex"}
    # computed in SQL from several columns (Celery's name + args + kwargs; md5, on SQLite the plain
    # concatenation): {hash = ["name", "args", "kwargs"], unless_empty = ["args", "kwargs"]}: NULL where
    # every unless_empty column is empty (NULL, '', [], (), {}, null: a task with no arguments)
    effect_ref = "charge_id"
    request = {column = "request_params", encoding = "json"}    # json, text, binary, pickle

    [attempts]
    source = "table"                     # table | json_array | counter | none
    table = "attempts"
    join = {idempotency_key = "idempotency_key"}   # attempts column = operations column
    number = "attempt_no"
    outcome = {column = "outcome", map = {ok = "succeeded"}, default = "unknown"}
    started_at = "started_at"; finished_at = "finished_at"
    error = "error"; effect_ref = "charge_id"; worker = "worker"
    where = [{column = "Name", in = ["Succeeded", "Failed"]}]   # a state-history table: rows that are attempts
    # predicates: is_null, eq, ne, in, not_in, gt, ge, lt, le, like; {any = [pred, ...]} is an OR group,
    # {all = [pred, ...]} an AND group (inside an ``unless`` list, whose members are alternatives);
    # {column = "attempts", ge_column = "max_attempts"}: one column >= another of the same row (a
    # per-row limit: Graphile Worker's retries are exhausted when attempts >= the job's max_attempts)
    # source = "json_array": column = "errors"; element = {at = "at", number = "attempt",
    #   error = "error"}; outcome = "failed" (every element is one ended attempt)

    [expiry]
    retention_seconds = 259200           # expires_at = retention_from + retention (dedup window)
    retention_from = "created_at"        # a name from [operations.times]
    lock_timeout_seconds = 90            # stuck when locked_at + this <= now
    # lock_time_from = {table = "procrastinate_workers", on = {worker_id = "id"}, column = "last_heartbeat"}
    #   the lock time (locked_at) read from a joined table: the row's worker's heartbeat (procrastinate);
    #   a database without that table keeps no lock time (stuck_in_progress is then not checkable)
    lock_timeout_column = "expire_seconds"   # the row's own limit (seconds, an operations column);
                                         # lock_timeout_seconds is the fallback where it is NULL;
                                         # a PostgreSQL interval column is read as its seconds;
                                         # ["expire_seconds", "expire_in"]: one per version, the
                                         # first the table has (each listed in optional)
    lock_heartbeat = {column = "heartbeat_on", encoding = "datetime", seconds_column = "heartbeat_seconds"}
                                         # a heartbeat lease per row: where both are set the lock also
                                         # ends at heartbeat + seconds (the earlier end holds)
    dedup_window_seconds = 86400         # for duplicate_intent when there is no retention

    [tunables]
    retry_threshold = 5

    [effects]                            # downstream effect records (charges, sent e-mails, grants...)
    table = "rides"                      # required
    schema = "public"
    connection = "payments"              # another database: a saved connection's name, a URL or a SQLite
                                         # path (relative to the layout file, inside its folder: a layout
                                         # may not name other files); default: the ledger's own
    link = { effect = "idempotency_key_id", operation = "id" }
    # operation = "key" (the normalized idempotency key), "effect_ref" (the operation's effect
    # reference), or an operations-table column (e.g. its row id, for a foreign key)
    id = "id"                            # the effect record's identity (evidence)
    reference = "stripe_charge_id"       # the side effect's id in the other system (shown, exported)
    time = { column = "created_at", encoding = "datetime" }
    where = [{ column = "stripe_charge_id", is_null = false }]   # rows that are effects
    show = ["amount", "currency", "status"]                       # columns shown beside the records
    optional = true                      # a database without the table has no effect findings (presets)

    [actions]                            # what each kind does (DESIGN §5.1, docs/actions.md)
    rules = [{ match = "^billing\\.", action = "money" }]   # regex on the kind, first match wins
    regulated = ["money"]                # classes a person decides on (approval always is)

Errors: :class:`LayoutError` with a message naming the file and the offending entry.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any, cast

from idemview.domain.actions import ActionRuleError, ActionRules
from idemview.domain.model import Outcome, Status
from idemview.errors import InputError, InvalidLayout, LayoutMismatch
from idemview.layouts.joins import LockTimeFrom, Lookup, parse_lock_time_from, parse_lookup
from idemview.paths import note_source, readable_file

TIME_ENCODINGS = ("datetime", "naive", "epoch_s", "epoch_ms", "iso_text")
PAYLOAD_ENCODINGS = ("json", "text", "binary", "pickle")
TIME_FIELDS = (
    "created_at",
    "updated_at",
    "completed_at",
    "locked_at",
    "lock_expires_at",
    "expires_at",
    "last_attempt_at",
)
VALUE_FIELDS = ("attempt_count", "fingerprint", "intent_ref", "effect_ref")
PAYLOAD_FIELDS = ("request", "response", "error")
PREDICATE_OPS = (
    "is_null",
    "eq",
    "ne",
    "in",
    "not_in",
    "gt",
    "ge",
    "lt",
    "le",
    "like",
    "in_table",
    "ge_column",
    "any",
    "all",
)
#: Predicate groups: ``any`` holds when one member holds, ``all`` when every member does.
PREDICATE_GROUPS = ("any", "all")
ATTEMPT_SOURCES = ("table", "json_array", "counter", "none")


# A JSON path is compiled into each engine's own syntax: only plain member names are accepted.
_JSON_PATH = re.compile(r"\$(\.[A-Za-z0-9_\-]+)+")


class LayoutError(InvalidLayout):
    """A layout that is malformed, or that does not fit the database it is used on.

    ``missing`` names what the database lacks (``"table oban_jobs"``, ``"column jobs.state"``) when
    that is the reason: the error is then a :class:`LayoutMismatchError` (an
    :class:`idemview.errors.LayoutMismatch`, exit code 4); otherwise an
    :class:`idemview.errors.InvalidLayout` (exit code 2).
    """

    missing: list[str]

    def __new__(cls, message: str = "", missing: list[str] | None = None):
        # Raise sites say ``LayoutError(msg, missing)``; the type follows from ``missing`` so callers can
        # catch ``LayoutMismatch`` without every raise site choosing a class.
        if missing and cls is LayoutError:
            cls = LayoutMismatchError
        return super().__new__(cls, message)

    def __init__(self, message: str = "", missing: list[str] | None = None):
        super().__init__(message)
        self.missing = list(missing or [])


class LayoutMismatchError(LayoutError, LayoutMismatch):
    """A :class:`LayoutError` with ``missing``: the layout does not fit the database (exit code 4)."""


@dataclass(frozen=True, slots=True)
class TimeColumn:
    """A time column and how it is stored: ``encoding`` in :data:`TIME_ENCODINGS`; ``zone`` is the IANA
    zone naive values were written in (only for ``naive``)."""

    column: str
    encoding: str = "datetime"
    zone: str = "UTC"
    unless: tuple[Predicate, ...] = ()  # the time is missing on records where any of these holds


@dataclass(frozen=True, slots=True)
class LockHeartbeat:
    """A second lease kept per row: the worker's last heartbeat (``time``) and the row's own heartbeat
    limit in seconds (``seconds_column``). Where both are set the lock also ends at time + seconds, and the
    earlier of that and the lock's other end holds (pg-boss 12.12+ ``heartbeat_on`` + ``heartbeat_seconds``,
    src/plans.ts failJobsByHeartbeat); where either is NULL the row has no heartbeat lease."""

    time: TimeColumn
    seconds_column: str


@dataclass(frozen=True, slots=True)
class ValueSource:
    """A value read from a column, optionally through a JSON path (``$.a.b``), or a literal."""

    column: str | None = None
    json_path: str | None = None
    literal: Any = None
    encoding: str | None = None  # payload encoding for request/response/error
    unless: tuple[Predicate, ...] = ()  # the value is NULL where any of these holds
    add: int = 0  # attempt_count only: added to the stored number (a retry counter + 1 = attempts)
    #: references only: the value is computed in SQL from these columns (idemview.ledger.intent_sql:
    #: a hash of them; SQLite: their concatenation), e.g. Celery's task name + args + kwargs
    hash: tuple[str, ...] = ()
    #: with ``hash``: NULL where every one of these columns is empty (a task with no arguments)
    unless_empty: tuple[str, ...] = ()
    #: kind only: the name looked up in another table by ``column`` (see :class:`Lookup`)
    lookup: Lookup | None = None


@dataclass(frozen=True, slots=True)
class Predicate:
    """A structured predicate over one column: ``op`` in :data:`PREDICATE_OPS`."""

    column: str
    op: str
    value: Any

    def columns(self) -> set[str]:
        """The columns this predicate reads (an ``any``/``all`` group reads its members' columns)."""
        if self.op in PREDICATE_GROUPS:
            return {c for p in self.value for c in p.columns()}
        if self.op == "ge_column":
            return {self.column, self.value}
        return {self.column}


@dataclass(frozen=True, slots=True)
class StatusRule:
    """``status`` applies when every predicate in ``when`` holds (first matching rule wins)."""

    when: tuple[Predicate, ...]
    status: str


@dataclass(slots=True)
class StatusSource:
    """Where the normalized status comes from: a column with a value ``map`` or ordered ``rules``.

    ``target`` is the enum the values map into (:class:`Status` for operations, :class:`Outcome` for
    attempts); unmapped values become ``default`` (the system's own rule for values outside its list,
    ``unknown`` when it has none); ``null`` is the status of a NULL raw value (``None``: the default)."""

    column: str | None = None
    map: dict[str, str] = field(default_factory=dict)
    rules: list[StatusRule] = field(default_factory=list)
    default: str = "unknown"
    raw: str | None = None
    literal: str | None = None
    null: str | None = None

    def maps(self) -> bool:
        """True when the normalized value comes from a value map over a column (not rules/literal)."""
        return self.literal is None and not self.rules and bool(self.column)


@dataclass(slots=True)
class AttemptsSpec:
    """Where attempts come from (DESIGN §4): a joined ``table``, a ``json_array`` column on the
    operations table, only a ``counter`` (``operations.fields.attempt_count``), or ``none``."""

    source: str = "none"
    table: str | None = None
    schema: str | None = None
    join: dict[str, str] = field(default_factory=dict)
    number: str | None = None
    outcome: StatusSource | None = None
    started_at: TimeColumn | None = None
    finished_at: TimeColumn | None = None
    error: str | None = None
    effect_ref: str | None = None
    worker: str | None = None
    fingerprint: str | None = None
    where: tuple[Predicate, ...] = ()  # table: only rows matching these are attempts (state history)
    column: str | None = None  # json_array
    element: dict[str, str] = field(default_factory=dict)  # json_array: at/number/error/... keys
    element_time_encoding: str = "iso_text"


@dataclass(slots=True)
class EffectsSpec:
    """Where a ledger's downstream effect records live and how they link to operations (DESIGN §4, §5).

    ``link_effect`` is the effect table's column; ``link_operation`` is ``"key"`` (the operation's
    normalized idempotency key), ``"effect_ref"`` (the operation's effect reference) or the name of an
    operations-table column (a foreign key to the row id, say). Links are compared as exact text on both
    sides, so an integer foreign key matches an integer row id across engines. ``connection`` names
    another database (a saved connection, a URL, or a SQLite path relative to the layout file); ``None``
    means the ledger's own database, where reconciliation runs as SQL joins."""

    table: str
    link_effect: str
    link_operation: str
    schema: str | None = None
    connection: str | None = None
    id: str | None = None
    reference: str | None = None
    time: TimeColumn | None = None
    where: tuple[Predicate, ...] = ()
    show: list[str] = field(default_factory=list)
    optional: bool = False

    def columns(self) -> set[str]:
        """Every effect-table column the section names (to check against the database)."""
        cols = {self.link_effect} | set(self.show)
        for c in (self.id, self.reference):
            if c:
                cols.add(c)
        if self.time:
            cols.add(self.time.column)
        cols |= {c for p in self.where for c in p.columns()}
        return cols


@dataclass(slots=True)
class Layout:
    """A parsed, form-validated layout. ``text`` is the TOML it came from; ``hash`` its SHA-256."""

    name: str
    title: str
    description: str
    source: str
    table: str
    schema: str | None
    row_id: str | None
    key: list[str]
    scope: list[str]
    kind: ValueSource | None
    status: StatusSource
    times: dict[str, TimeColumn]
    fields: dict[str, ValueSource]
    attempts: AttemptsSpec
    retention_seconds: float | None = None
    retention_from: str = "created_at"
    lock_timeout_seconds: float | None = None
    #: An operations column holding the row's own lock/active-time limit in seconds (pg-boss
    #: ``expire_seconds``) or as a PostgreSQL interval (pg-boss v10 ``expire_in``); a list names one
    #: column per version of the system, the first the table has (each must be ``optional``).
    #: ``lock_timeout_seconds`` is the fallback where it is NULL.
    lock_timeout_column: str | list[str] | None = None
    lock_time_from: LockTimeFrom | None = None
    #: A heartbeat lease per row (:class:`LockHeartbeat`), besides ``locked_at`` + the limit.
    lock_heartbeat: LockHeartbeat | None = None
    dedup_window_seconds: float | None = None
    retry_threshold: int = 5
    optional: list[str] = field(default_factory=list)
    detect: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    origin: str = ""
    key_fallback: str | None = None
    key_required: list[str] = field(default_factory=list)
    #: The system deletes a record when its work completes (Graphile Worker's complete_jobs, Laravel's
    #: DatabaseQueue): what does it, in words. A key's absence is then not evidence of success, and two
    #: successes of one key leave no rows: the ledger says so (``ledger.source.not_checkable``).
    deletes_completed: str | None = None
    effects: EffectsSpec | None = None
    #: The layout's own ``[actions]`` rules (regex -> action class, regulated classes; DESIGN §5.1).
    actions: ActionRules = field(default_factory=ActionRules)
    #: The user's extra raw values merged in by :func:`with_value_maps` (``{"status": {RAW: STATUS},
    #: "outcome": {...}}``): not in ``text``/``hash``, so a manifest records them beside the hash.
    extra_values: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def expiry_mode(self) -> str | None:
        """``"column"`` when an ``expires_at`` column exists, ``"retention"`` when a retention is added
        to a time column, else ``None`` (the ledger says nothing about its dedup window)."""
        if "expires_at" in self.times:
            return "column"
        if self.retention_seconds is not None and self.retention_from in self.times:
            return "retention"
        return None

    def without_columns(self, missing: set[str]) -> Layout:
        """A copy that no longer reads the operations columns in ``missing`` (optional columns the
        database lacks, e.g. Celery's extended result columns): fields, times and kind using them go."""
        from dataclasses import replace

        times = {k: v for k, v in self.times.items() if v.column not in missing}
        fields_ = {
            k: v
            for k, v in self.fields.items()
            if v.column not in missing and not (set(v.hash) | set(v.unless_empty)) & missing
        }
        kind = self.kind if not (self.kind and self.kind.column in missing) else None
        ltc: str | list[str] | None = self.lock_timeout_column
        if isinstance(ltc, list):
            ltc = [c for c in ltc if c not in missing] or None
        elif ltc in missing:
            ltc = None
        ltf = self.lock_time_from
        if ltf is not None and {c for c, _o in ltf.on} & missing:
            ltf = None
        hb = self.lock_heartbeat
        if hb is not None and {hb.time.column, hb.seconds_column} & missing:
            hb = None  # an older version without the heartbeat columns (pg-boss v10, v11)
        return replace(
            self,
            times=times,
            fields=fields_,
            kind=kind,
            scope=[c for c in self.scope if c not in missing],
            lock_timeout_column=ltc,
            lock_time_from=ltf,
            lock_heartbeat=hb,
        )

    def window_seconds(self) -> float | None:
        """The dedup window used for ``duplicate_intent``: retention, else the declared window."""
        return self.retention_seconds if self.retention_seconds is not None else self.dedup_window_seconds

    def tables(self) -> list[tuple[str | None, str]]:
        out = [(self.schema, self.table)]
        if self.attempts.source == "table" and self.attempts.table:
            out.append((self.attempts.schema if self.attempts.schema is not None else self.schema, self.attempts.table))
        return out

    def operations_columns(self) -> set[str]:
        """Every operations-table column the layout names (to check against the database)."""
        cols = set(self.key) | set(self.scope)
        if self.key_fallback:
            cols.add(self.key_fallback)
        cols |= set(self.key_required)
        if self.row_id:
            cols.add(self.row_id)
        if self.kind and self.kind.column:
            cols.add(self.kind.column)
        cols |= _status_columns(self.status)
        cols |= {t.column for t in self.times.values()}
        cols |= {c for t in self.times.values() for p in t.unless for c in p.columns()}
        cols |= {v.column for v in self.fields.values() if v.column}
        cols |= {c for v in self.fields.values() for c in v.hash + v.unless_empty}
        cols |= {c for v in self.fields.values() for p in v.unless for c in p.columns()}
        if self.attempts.source == "json_array" and self.attempts.column:
            cols.add(self.attempts.column)
        if isinstance(self.lock_timeout_column, list):
            cols |= set(self.lock_timeout_column)
        elif self.lock_timeout_column:
            cols.add(self.lock_timeout_column)
        if self.lock_time_from is not None:
            cols |= {c for c, _o in self.lock_time_from.on}
        if self.lock_heartbeat is not None:
            cols |= {self.lock_heartbeat.time.column, self.lock_heartbeat.seconds_column}
        return cols

    def attempts_columns(self) -> set[str]:
        a = self.attempts
        if a.source != "table":
            return set()
        cols = set(a.join.keys())
        for c in (a.number, a.error, a.effect_ref, a.worker, a.fingerprint):
            if c:
                cols.add(c)
        for t in (a.started_at, a.finished_at):
            if t:
                cols.add(t.column)
                cols |= {c for p in t.unless for c in p.columns()}
        if a.outcome:
            cols |= _status_columns(a.outcome)
        cols |= {c for p in a.where for c in p.columns()}
        return cols


def _status_columns(s: StatusSource) -> set[str]:
    cols = set()
    if s.column:
        cols.add(s.column)
    if s.raw:
        cols.add(s.raw)
    for r in s.rules:
        cols |= {c for p in r.when for c in p.columns()}
    return cols


# ---------------------------------------------------------------------------------------- parsing


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


def parse_layout(text: str, origin: str = "<string>") -> Layout:
    """Parse and form-validate layout TOML. Raises :class:`LayoutError` with a clear message."""
    try:
        d = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _err(origin, f"not valid TOML: {e}") from None
    meta = d.get("layout") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise _err(origin, "[layout] name is required")
    if not name.isprintable() or len(name) > 100:
        raise _err(origin, "[layout] name must be printable text of at most 100 characters")
    unknown = set(d) - {"layout", "operations", "attempts", "expiry", "tunables", "detect", "effects", "actions"}
    if unknown:
        raise _err(
            origin,
            f"unknown sections: {', '.join(sorted(unknown))} (known: layout, operations, "
            "attempts, expiry, tunables, effects, actions)",
        )
    for sect, keys in (
        (
            "expiry",
            {
                "retention_seconds",
                "retention_from",
                "lock_timeout_seconds",
                "lock_timeout_column",
                "lock_time_from",
                "lock_heartbeat",
                "dedup_window_seconds",
            },
        ),
        ("tunables", {"retry_threshold"}),
    ):
        extra = set(d.get(sect) or {}) - keys
        if extra:
            raise _err(origin, f"[{sect}] has unknown entries: {', '.join(sorted(extra))}")
    where = f"{name!r} ({origin})"
    ops = d.get("operations")
    if not isinstance(ops, dict) or not isinstance(ops.get("table"), str):
        raise _err(where, "[operations] table is required")
    unknown = set(ops) - {
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
    if unknown:
        raise _err(where, f"[operations] has unknown entries: {', '.join(sorted(unknown))}")
    times = {}
    for k, v in (ops.get("times") or {}).items():
        if k not in TIME_FIELDS:
            raise _err(where, f"[operations.times] {k!r} is not one of {', '.join(TIME_FIELDS)}")
        times[k] = _time(where, f"operations.times.{k}", v)
    fields = {}
    for k, v in (ops.get("fields") or {}).items():
        if k not in VALUE_FIELDS + PAYLOAD_FIELDS:
            raise _err(where, f"[operations.fields] {k!r} is not one of {', '.join(VALUE_FIELDS + PAYLOAD_FIELDS)}")
        fields[k] = _value(where, f"operations.fields.{k}", v, payload=k in PAYLOAD_FIELDS)
    status = _status(where, "operations.status", ops.get("status", "unknown"), Status)

    a = d.get("attempts") or {}
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

    exp = d.get("expiry") or {}
    tun = d.get("tunables") or {}
    lay = Layout(
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
            parse_lock_time_from(exp["lock_time_from"], times, TIME_ENCODINGS, lambda m: _err(where, m))
            if "lock_time_from" in exp
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
    if lay.deletes_completed is not None and not (isinstance(lay.deletes_completed, str) and lay.deletes_completed):
        raise _err(where, "operations.deletes_completed says, in words, what deletes a completed record")
    if lay.key_fallback is not None and not isinstance(lay.key_fallback, str):
        raise _err(where, "operations.key_fallback is a column name")
    if lay.key_required and (lay.key_fallback is None or not set(lay.key_required) <= set(lay.key)):
        raise _err(where, "operations.key_required names key columns, and needs key_fallback")
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
    return lay


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


# ------------------------------------------------------------------------------ user value maps


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


# ---------------------------------------------------------------------------------------- presets


def shipped_names(package: str) -> list[str]:
    """Names of the TOML data files shipped in ``package`` (e.g. ``idemview.layouts.presets``), sorted."""
    return sorted(p.name[:-5] for p in resources.files(package).iterdir() if p.name.endswith(".toml"))


def shipped_text(package: str, name: str) -> str | None:
    """The text of ``package``'s ``<name>.toml``, or ``None`` when it ships no such file."""
    res = resources.files(package) / f"{name}.toml"
    return res.read_text("utf-8") if res.is_file() else None


def preset_names() -> list[str]:
    """Names of the shipped layouts (TOML data files in ``idemview/layouts/presets``), sorted."""
    return shipped_names("idemview.layouts.presets")


def load_preset(name: str) -> Layout:
    """Load a shipped layout by name. Raises :class:`LayoutError` naming the known presets."""
    text = shipped_text("idemview.layouts.presets", name)
    if text is None:
        raise LayoutError(f"no preset named {name!r}; known presets: {', '.join(preset_names())}")
    return parse_layout(text, origin=f"preset {name}")


def load_layout(spec: str) -> Layout:
    """A preset name, or a path to a layout TOML file. Raises :class:`LayoutError`.

    A shipped preset's name means the preset, even where a file or folder of that name exists in the
    working directory ("idemview" is the repo's own folder); a path ending ``.toml`` is always a file."""
    if not spec.endswith(".toml") and spec in preset_names():
        return load_preset(spec)
    p = Path(spec)
    if spec.endswith(".toml") or p.is_file():
        try:
            readable_file(p, "layout")
        except InputError as e:
            raise LayoutError(str(e)) from None
        note_source(p)  # a layout is never written over by an export or the demo
        try:
            text = p.read_text("utf-8")
        except OSError as e:
            raise LayoutError(f"cannot read layout file {spec}: {e.strerror}") from None
        return parse_layout(text, origin=str(p))
    return load_preset(spec)


def all_presets() -> list[Layout]:
    return [load_preset(n) for n in preset_names()]
