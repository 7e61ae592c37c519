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
    # computed in SQL from several columns (Celery's name + args + kwargs; their md5 on every engine,
    # ledger/intent_sql.py): {hash = ["name", "args", "kwargs"], unless_empty = ["args", "kwargs"]}: NULL where
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
    #   a database without that table keeps no lock time (stuck_in_progress is then not checkable);
    #   via = {table = "solid_queue_claimed_executions", on = {id = "job_id"}}: two joins (operations
    #   row -> via rows -> the table, whose `on` then maps via columns; via's column = "created_at": the
    #   via row's own time where the joined row is missing, an orphaned claim); where = [pred, ...]:
    #   predicates on the joined row (only rows where all hold)
    # lock_expires_from = {table = "v1_task_runtime", on = {id = "task_id"}, column = "timeout_at"}
    #   the lock's END from a joined table (Hatchet: each task's own timeout), same form; with
    #   seconds = 300 the column is a heartbeat the lock ends that long after (GoodJob's process), and
    #   records without the joined row keep locked_at + lock_timeout_seconds
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

This module is the layouts' public face: every name below is importable from here. The code lives by
concern in :mod:`~idemview.layouts.spec` (the parsed form and its vocabularies),
:mod:`~idemview.layouts.entries` (single-entry parsers), :mod:`~idemview.layouts.parse` (sections,
:func:`parse_layout`), :mod:`~idemview.layouts.value_maps` (the user's extra raw values) and
:mod:`~idemview.layouts.shipped` (presets, :func:`load_layout`).
"""

from __future__ import annotations

from idemview.layouts.joins import LockTimeFrom, Lookup
from idemview.layouts.parse import EFFECT_KEYS, parse_layout
from idemview.layouts.shipped import (
    all_presets,
    load_layout,
    load_preset,
    preset_names,
    shipped_names,
    shipped_text,
)
from idemview.layouts.spec import (
    ATTEMPT_SOURCES,
    PAYLOAD_ENCODINGS,
    PAYLOAD_FIELDS,
    PREDICATE_GROUPS,
    PREDICATE_OPS,
    TIME_ENCODINGS,
    TIME_FIELDS,
    VALUE_FIELDS,
    AttemptsSpec,
    EffectsSpec,
    Layout,
    LayoutError,
    LayoutMismatchError,
    LockHeartbeat,
    Predicate,
    StatusRule,
    StatusSource,
    TimeColumn,
    ValueSource,
)
from idemview.layouts.value_maps import parse_value_map, with_value_maps

__all__ = [
    "ATTEMPT_SOURCES",
    "EFFECT_KEYS",
    "PAYLOAD_ENCODINGS",
    "PAYLOAD_FIELDS",
    "PREDICATE_GROUPS",
    "PREDICATE_OPS",
    "TIME_ENCODINGS",
    "TIME_FIELDS",
    "VALUE_FIELDS",
    "AttemptsSpec",
    "EffectsSpec",
    "Layout",
    "LayoutError",
    "LayoutMismatchError",
    "LockHeartbeat",
    "LockTimeFrom",
    "Lookup",
    "Predicate",
    "StatusRule",
    "StatusSource",
    "TimeColumn",
    "ValueSource",
    "all_presets",
    "load_layout",
    "load_preset",
    "parse_layout",
    "parse_value_map",
    "preset_names",
    "shipped_names",
    "shipped_text",
    "with_value_maps",
]
