"""The parsed form of a layout (DESIGN §4): its dataclasses, the vocabularies a layout's entries are
checked against, and :class:`LayoutError`. The TOML format is described in :mod:`idemview.layouts.layout`;
:mod:`idemview.layouts.parse` builds these objects from it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from idemview.domain.actions import ActionRules
from idemview.errors import InvalidLayout, LayoutMismatch
from idemview.layouts.joins import LockTimeFrom, Lookup

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
    #: their md5 on every engine), e.g. Celery's task name + args + kwargs
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
    #: The lock's end read from a joined table (``[expiry] lock_expires_from``: Hatchet's
    #: ``v1_task_runtime.timeout_at``, each task's own timeout), where the record has no such column.
    lock_expires_from: LockTimeFrom | None = None
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
        if ltf is not None and ltf.operations_columns() & missing:
            ltf = None
        lef = self.lock_expires_from
        if lef is not None and lef.operations_columns() & missing:
            lef = None
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
            lock_expires_from=lef,
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
        for joined in (self.lock_time_from, self.lock_expires_from):
            if joined is not None:
                cols |= joined.operations_columns()
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
