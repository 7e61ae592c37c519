"""A typed, editable draft of a layout (what the layout editor and scripts edit before a layout exists).

A :class:`Layout` is frozen and validated; a :class:`LayoutDraft` is mutable and may be incomplete (no key
column chosen yet). It converts both ways with the TOML-shaped ``dict`` of :mod:`idemview.ledger.builder`
(``from_model`` / ``to_model``), is built from a parsed layout with :meth:`LayoutDraft.from_layout`, and
becomes TOML text with :meth:`LayoutDraft.to_toml` (validated by ``parse_layout``; raises
:class:`~idemview.layouts.layout.LayoutError` when the draft is not a valid layout yet).

What a draft does not model field by field (status ``rules``, attempt ``where`` predicates, JSON array
``element`` keys, ``detect`` hints, keys a newer layout format adds) is kept verbatim in the ``extra``
mappings and written back unchanged, so ``from_model(m).to_model()`` loses nothing.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import tomli_w

from idemview.layouts.layout import (
    PAYLOAD_FIELDS,
    PREDICATE_OPS,
    AttemptsSpec,
    EffectsSpec,
    Layout,
    LayoutError,
    Predicate,
    StatusSource,
    TimeColumn,
    ValueSource,
    parse_layout,
)

__all__ = [
    "AttemptsDraft",
    "ExpiryDraft",
    "LayoutDraft",
    "OperationsDraft",
    "StatusDraft",
    "TimeDraft",
    "ValueDraft",
    "build_layout",
    "layout_text",
    "model_from_layout",
]


@dataclass
class TimeDraft:
    """A time column: ``encoding`` in ``TIME_ENCODINGS``; ``zone`` (IANA) the zone naive values were
    written in."""

    column: str
    encoding: str = "datetime"
    zone: str = "UTC"
    unless: list[dict[str, Any]] = field(default_factory=list)  # predicates under which it is missing

    @classmethod
    def from_model(cls, d: Any) -> TimeDraft | None:
        if not d:
            return None
        if isinstance(d, str):
            return cls(d)
        return cls(
            d.get("column", ""),
            d.get("encoding", "datetime"),
            d.get("zone", "UTC"),
            copy.deepcopy(list(d.get("unless") or [])),
        )

    def to_model(self) -> dict[str, Any]:
        d: dict[str, Any] = {"column": self.column, "encoding": self.encoding}
        if self.encoding == "naive" or self.zone != "UTC":
            d["zone"] = self.zone
        if self.unless:
            d["unless"] = copy.deepcopy(self.unless)
        return d


@dataclass
class ValueDraft:
    """A value from ``column`` (optionally through ``json_path``, ``$.a.b``), or a ``literal``;
    ``encoding`` for payloads (request/response/error)."""

    column: str | None = None
    json_path: str | None = None
    encoding: str | None = None
    literal: Any = None
    payload: bool = False  # payload fields are always written as a table (with their encoding)
    unless: list[dict[str, Any]] = field(default_factory=list)  # predicates under which it is missing
    add: int = 0  # attempt_count only: added to the stored number (retries + 1 = attempts)
    #: references computed from several columns ({hash = [...], unless_empty = [...]}, issue #26)
    hash: list[str] = field(default_factory=list)
    unless_empty: list[str] = field(default_factory=list)
    #: the kind's name looked up in another table ({table, column, value, schema}, Graphile v0.16)
    lookup: dict[str, Any] | None = None

    @classmethod
    def from_model(cls, d: Any, payload: bool = False) -> ValueDraft | None:
        if d is None or d == "":
            return None
        if isinstance(d, str):
            return cls(column=d, payload=payload)
        if "value" in d:
            return cls(literal=d["value"], payload=payload)
        if "hash" in d:
            return cls(
                payload=payload,
                unless=copy.deepcopy(list(d.get("unless") or [])),
                hash=list(d["hash"]),
                unless_empty=list(d.get("unless_empty") or []),
            )
        return cls(
            d.get("column"),
            d.get("json_path"),
            d.get("encoding"),
            payload=payload,
            unless=copy.deepcopy(list(d.get("unless") or [])),
            add=int(d.get("add") or 0),
            lookup=dict(d["lookup"]) if d.get("lookup") else None,
        )

    def to_model(self) -> Any:
        if self.literal is not None:
            return {"value": self.literal}
        if self.hash:
            h: dict[str, Any] = {"hash": list(self.hash)}
            if self.unless_empty:
                h["unless_empty"] = list(self.unless_empty)
            if self.unless:
                h["unless"] = copy.deepcopy(self.unless)
            return h
        if self.lookup:
            return {"column": self.column, "lookup": dict(self.lookup)}
        if not self.payload and not self.json_path and not self.encoding and not self.unless and not self.add:
            return self.column
        d: dict[str, Any] = {"column": self.column}
        if self.json_path:
            d["json_path"] = self.json_path
        if self.encoding:
            d["encoding"] = self.encoding
        if self.unless:
            d["unless"] = copy.deepcopy(self.unless)
        if self.add:
            d["add"] = self.add
        return d


@dataclass
class StatusDraft:
    """How the normalized status (or an attempt's outcome) is read: a ``literal``, a ``column`` with a
    ``map`` of raw value → status, or ordered ``rules`` (kept as TOML-shaped dicts); ``default`` for
    what nothing maps; ``raw`` the column shown as the raw value."""

    column: str | None = None
    map: dict[str, str] = field(default_factory=dict)
    default: str = "unknown"
    rules: list[dict[str, Any]] = field(default_factory=list)
    raw: str | None = None
    literal: str | None = None
    null: str | None = None  # the status of a NULL raw value (e.g. Airflow's NULL state: new)

    @classmethod
    def from_model(cls, d: Any) -> StatusDraft:
        if d is None:
            return cls()
        if isinstance(d, str):
            return cls(default=d, literal=d)
        return cls(
            d.get("column"),
            dict(d.get("map") or {}),
            d.get("default", "unknown"),
            copy.deepcopy(list(d.get("rules") or [])),
            d.get("raw"),
            null=d.get("null"),
        )

    def to_model(self) -> Any:
        if self.literal is not None and not self.column and not self.rules:
            return self.literal
        d: dict[str, Any] = {}
        if self.column:
            d["column"] = self.column
        if self.map:
            d["map"] = dict(self.map)
        if self.rules:
            d["rules"] = copy.deepcopy(self.rules)
        if self.raw:
            d["raw"] = self.raw
        if self.null is not None:
            d["null"] = self.null
        d["default"] = self.default
        return d


_ATT_TABLE_COLS = ("number", "error", "effect_ref", "worker", "fingerprint")


@dataclass
class AttemptsDraft:
    """Where attempts come from: ``source`` ``none`` / ``counter`` / ``table`` (``table``, ``schema``,
    ``join`` attempts column → operations column, and the attempt columns) / ``json_array``
    (``column`` holding the array; ``extra`` keeps ``element`` and ``element_time_encoding``)."""

    source: str = "none"
    table: str | None = None
    schema: str | None = None
    join: dict[str, str] = field(default_factory=dict)
    number: str | None = None
    error: str | None = None
    effect_ref: str | None = None
    worker: str | None = None
    fingerprint: str | None = None
    outcome: StatusDraft | None = None
    started_at: TimeDraft | None = None
    finished_at: TimeDraft | None = None
    column: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # where, element, element_time_encoding, ...

    @classmethod
    def from_model(cls, d: dict[str, Any] | None) -> AttemptsDraft:
        d = dict(d or {"source": "none"})
        known = {
            "source",
            "table",
            "schema",
            "join",
            "outcome",
            "started_at",
            "finished_at",
            "column",
            *_ATT_TABLE_COLS,
        }
        return cls(
            source=d.get("source", "none"),
            table=d.get("table"),
            schema=d.get("schema"),
            join=dict(d.get("join") or {}),
            number=d.get("number"),
            error=d.get("error"),
            effect_ref=d.get("effect_ref"),
            worker=d.get("worker"),
            fingerprint=d.get("fingerprint"),
            outcome=StatusDraft.from_model(d["outcome"]) if "outcome" in d else None,
            started_at=TimeDraft.from_model(d.get("started_at")),
            finished_at=TimeDraft.from_model(d.get("finished_at")),
            column=d.get("column"),
            extra={k: copy.deepcopy(v) for k, v in d.items() if k not in known},
        )

    def to_model(self) -> dict[str, Any]:
        d: dict[str, Any] = {"source": self.source}
        if self.source == "table":
            d.update(table=self.table, schema=self.schema, join=dict(self.join))
            d.update({k: getattr(self, k) for k in _ATT_TABLE_COLS})
            if self.outcome is not None:
                d["outcome"] = self.outcome.to_model()
            for k in ("started_at", "finished_at"):
                tc = getattr(self, k)
                if tc is not None:
                    d[k] = tc.to_model()
        elif self.source == "json_array":
            d["column"] = self.column
            if "element" in self.extra:
                d["element"] = copy.deepcopy(self.extra["element"])
            if self.outcome is not None:
                d["outcome"] = self.outcome.to_model()
        d.update({k: copy.deepcopy(v) for k, v in self.extra.items() if k not in d})
        return d


@dataclass
class OperationsDraft:
    """The operations table: where it is, its identity (``key`` columns, ``scope`` columns,
    ``key_fallback``, ``row_id``), ``kind``, ``status``, ``times`` (name → column) and ``fields``
    (name → value). ``optional`` columns may be absent from the database."""

    table: str = ""
    schema: str | None = None
    row_id: str | None = None
    key: list[str] = field(default_factory=list)
    scope: list[str] = field(default_factory=list)
    key_fallback: str | None = None
    optional: list[str] = field(default_factory=list)
    kind: ValueDraft | None = None
    status: StatusDraft = field(default_factory=lambda: StatusDraft(literal="unknown"))  # no status column yet
    times: dict[str, TimeDraft] = field(default_factory=dict)
    fields: dict[str, ValueDraft] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExpiryDraft:
    """Expiry and tunables, in seconds (``None``: not set)."""

    retention_seconds: float | None = None
    retention_from: str = "created_at"
    lock_timeout_seconds: float | None = None
    dedup_window_seconds: float | None = None
    #: the row's own limit (pg-boss expire_seconds); a list: one column per version, the first present
    lock_timeout_column: str | list[str] | None = None
    #: the lock time from a joined table ({table, on, column, encoding, schema}: procrastinate's heartbeat)
    lock_time_from: dict[str, Any] | None = None
    #: a heartbeat lease per row ({column, encoding, seconds_column}: pg-boss 12's heartbeat_on/_seconds)
    lock_heartbeat: dict[str, Any] | None = None
    #: the lock's end from a joined table (lock_time_from's form: Hatchet's v1_task_runtime.timeout_at)
    lock_expires_from: dict[str, Any] | None = None


_PAYLOADS = ("request", "response", "error")


@dataclass
class LayoutDraft:
    """A whole layout being edited. See the module docstring."""

    name: str = "custom"
    title: str = ""
    description: str = ""
    source: str = ""
    operations: OperationsDraft = field(default_factory=OperationsDraft)
    attempts: AttemptsDraft = field(default_factory=AttemptsDraft)
    expiry: ExpiryDraft = field(default_factory=ExpiryDraft)
    retry_threshold: int | None = None
    detect: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # unknown top-level sections, kept verbatim

    # ------------------------------------------------------------------------------ conversions

    @classmethod
    def from_model(cls, m: dict[str, Any]) -> LayoutDraft:
        """A draft of a TOML-shaped layout dict (as :func:`idemview.ledger.builder.model_from_layout`
        makes, or ``tomllib.loads`` of a layout file)."""
        meta, ops = dict(m.get("layout") or {}), dict(m.get("operations") or {})
        exp, tun = dict(m.get("expiry") or {}), dict(m.get("tunables") or {})
        fields = {
            k: v
            for k, v in (
                (k, ValueDraft.from_model(v, payload=k in _PAYLOADS)) for k, v in (ops.get("fields") or {}).items()
            )
            if v is not None
        }
        times = {
            k: v
            for k, v in ((k, TimeDraft.from_model(v)) for k, v in (ops.get("times") or {}).items())
            if v is not None
        }
        known_ops = {
            "table",
            "schema",
            "row_id",
            "key",
            "scope",
            "key_fallback",
            "optional",
            "kind",
            "status",
            "times",
            "fields",
        }
        return cls(
            name=meta.get("name", "custom"),
            title=meta.get("title", ""),
            description=meta.get("description", ""),
            source=meta.get("source", ""),
            operations=OperationsDraft(
                table=ops.get("table", ""),
                schema=ops.get("schema"),
                row_id=ops.get("row_id"),
                key=list(ops.get("key") or []),
                scope=list(ops.get("scope") or []),
                key_fallback=ops.get("key_fallback"),
                optional=list(ops.get("optional") or []),
                kind=ValueDraft.from_model(ops.get("kind")),
                status=StatusDraft.from_model(ops.get("status", "unknown")),
                times=times,
                fields=fields,
                extra={k: copy.deepcopy(v) for k, v in ops.items() if k not in known_ops},
            ),
            attempts=AttemptsDraft.from_model(m.get("attempts")),
            expiry=ExpiryDraft(
                exp.get("retention_seconds"),
                exp.get("retention_from") or "created_at",
                exp.get("lock_timeout_seconds"),
                exp.get("dedup_window_seconds"),
                exp.get("lock_timeout_column"),
                copy.deepcopy(exp.get("lock_time_from")),
                copy.deepcopy(exp.get("lock_heartbeat")),
                copy.deepcopy(exp.get("lock_expires_from")),
            ),
            retry_threshold=tun.get("retry_threshold"),
            detect=copy.deepcopy(dict(m.get("detect") or {})),
            extra={
                k: copy.deepcopy(v)
                for k, v in m.items()
                if k not in ("layout", "operations", "attempts", "expiry", "tunables", "detect")
            },
        )

    @classmethod
    def from_layout(cls, layout: Layout) -> LayoutDraft:
        """A draft of a parsed :class:`~idemview.layouts.layout.Layout` (e.g. a preset to start from)."""
        return cls.from_model(model_from_layout(layout))

    def to_model(self) -> dict[str, Any]:
        """The TOML-shaped dict (``None`` entries are dropped when written as TOML)."""
        o = self.operations
        ops: dict[str, Any] = {
            "table": o.table,
            "schema": o.schema,
            "row_id": o.row_id,
            "key": list(o.key),
            "scope": list(o.scope),
            "key_fallback": o.key_fallback,
            "optional": list(o.optional),
        }
        if o.kind is not None:
            ops["kind"] = o.kind.to_model()
        ops["status"] = o.status.to_model()
        ops["times"] = {k: t.to_model() for k, t in o.times.items()}
        ops["fields"] = {k: v.to_model() for k, v in o.fields.items()}
        ops.update({k: copy.deepcopy(v) for k, v in o.extra.items() if k not in ops})
        e = self.expiry
        exp: dict[str, Any] = {
            "retention_seconds": _num(e.retention_seconds),
            "lock_timeout_seconds": _num(e.lock_timeout_seconds),
            "dedup_window_seconds": _num(e.dedup_window_seconds),
            "lock_timeout_column": copy.deepcopy(e.lock_timeout_column) or None,
            "lock_time_from": copy.deepcopy(e.lock_time_from) or None,
            "lock_heartbeat": copy.deepcopy(e.lock_heartbeat) or None,
            "lock_expires_from": copy.deepcopy(e.lock_expires_from) or None,
        }
        if e.retention_seconds is not None or e.retention_from != "created_at":
            exp["retention_from"] = e.retention_from
        m: dict[str, Any] = {
            "layout": {"name": self.name, "title": self.title, "description": self.description, "source": self.source},
            "operations": ops,
            "attempts": self.attempts.to_model(),
            "expiry": exp,
        }
        if self.retry_threshold is not None:
            m["tunables"] = {"retry_threshold": self.retry_threshold}
        if self.detect:
            m["detect"] = copy.deepcopy(self.detect)
        m.update({k: copy.deepcopy(v) for k, v in self.extra.items() if k not in m})
        return m

    def to_toml(self, origin: str = "<draft>") -> str:
        """TOML text proven to parse (see :func:`idemview.ledger.builder.layout_text`). Raises
        :class:`~idemview.layouts.layout.LayoutError` when the draft is not a valid layout yet."""
        return layout_text(self.to_model(), origin)

    def to_layout(self, origin: str = "<draft>") -> Layout:
        """The validated, frozen :class:`~idemview.layouts.layout.Layout`. Raises ``LayoutError``."""
        return parse_layout(self.to_toml(origin), origin=origin)


def _num(x: float | None) -> int | float | None:
    """Seconds as an int when whole (``259200`` reads better than ``259200.0`` in TOML)."""
    if x is None:
        return None
    return int(x) if float(x).is_integer() else float(x)


# --------------------------------------------------------- Layout → TOML-shaped dict → TOML text
# (used by the draft and re-exported by idemview.ledger.builder, whose names they were)


def _num_out(x: float | None) -> int | float | None:
    """Seconds as an int when whole (``259200`` reads better than ``259200.0`` in TOML)."""
    if x is None:
        return None
    return int(x) if float(x).is_integer() else float(x)


def _time_out(tc: TimeColumn) -> dict:
    d: dict[str, Any] = {"column": tc.column, "encoding": tc.encoding}
    if tc.encoding == "naive" or tc.zone != "UTC":
        d["zone"] = tc.zone
    if tc.unless:
        d["unless"] = [_pred_out(p) for p in tc.unless]
    return d


def _value_out(vs: ValueSource, payload: bool = False) -> Any:
    if vs.literal is not None:
        return {"value": vs.literal}
    if vs.hash:  # an intent computed from several columns (issue #26)
        h: dict[str, Any] = {"hash": list(vs.hash)}
        if vs.unless_empty:
            h["unless_empty"] = list(vs.unless_empty)
        if vs.unless:
            h["unless"] = [_pred_out(p) for p in vs.unless]
        return h
    if vs.lookup is not None:
        lk = vs.lookup
        table = {"table": lk.table, "column": lk.column, "value": lk.value}
        return {"column": vs.column, "lookup": table | ({"schema": lk.schema} if lk.schema else {})}
    if not payload and not vs.json_path and not vs.encoding and not vs.unless and not vs.add:
        return vs.column
    d: dict[str, Any] = {"column": vs.column}
    if vs.json_path:
        d["json_path"] = vs.json_path
    if vs.encoding:
        d["encoding"] = vs.encoding
    if vs.unless:
        d["unless"] = [_pred_out(p) for p in vs.unless]
    if vs.add:
        d["add"] = vs.add
    return d


def _lock_time_from_out(ltf) -> dict[str, Any] | None:
    if ltf is None:
        return None
    d: dict[str, Any] = {"table": ltf.table, "on": dict(ltf.on), "column": ltf.column, "encoding": ltf.encoding}
    if ltf.schema is not None:
        d["schema"] = ltf.schema
    if ltf.via is not None:
        d["via"] = {"table": ltf.via.table, "on": dict(ltf.via.on)}
        if ltf.via.schema is not None:
            d["via"]["schema"] = ltf.via.schema
        if ltf.via.column is not None:
            d["via"]["column"] = ltf.via.column
    if ltf.where:
        d["where"] = [_pred_out(p) for p in ltf.where]
    if ltf.seconds is not None:
        d["seconds"] = ltf.seconds
    return d


def _pred_out(p: Predicate) -> dict:
    if p.op in ("any", "all"):
        return {p.op: [_pred_out(q) for q in p.value]}
    v = p.value
    return {"column": p.column, p.op: copy.deepcopy(v) if isinstance(v, (list, dict)) else v}


def _status_out(s: StatusSource) -> Any:
    if s.literal is not None and not s.column and not s.rules:
        return s.literal
    d: dict[str, Any] = {}
    if s.column:
        d["column"] = s.column
    if s.map:
        d["map"] = dict(s.map)
    if s.rules:
        d["rules"] = [{"when": [_pred_out(p) for p in r.when], "status": r.status} for r in s.rules]
    if s.raw:
        d["raw"] = s.raw
    if s.null is not None:
        d["null"] = s.null
    d["default"] = s.default
    return d


def _attempts_out(a: AttemptsSpec) -> dict:
    d: dict[str, Any] = {"source": a.source}
    if a.source == "table":
        d.update(
            table=a.table,
            schema=a.schema,
            join=dict(a.join),
            number=a.number,
            error=a.error,
            effect_ref=a.effect_ref,
            worker=a.worker,
            fingerprint=a.fingerprint,
        )
        if a.outcome is not None:
            d["outcome"] = _status_out(a.outcome)
        for k in ("started_at", "finished_at"):
            tc = getattr(a, k)
            if tc is not None:
                d[k] = _time_out(tc)
        if a.where:
            d["where"] = [_pred_out(p) for p in a.where]
    elif a.source == "json_array":
        d["column"] = a.column
        if a.element:
            d["element"] = dict(a.element)
        if a.outcome is not None:
            d["outcome"] = _status_out(a.outcome)
        d["element_time_encoding"] = a.element_time_encoding
    return d


def model_from_layout(layout: Layout) -> dict:
    """The editable model (a TOML-shaped dict) of a parsed layout, e.g. a preset to start from.

    Everything the layout says is kept, including what the GUI shows but does not edit (status rules,
    JSON paths, attempt ``where`` predicates, ``detect`` hints), so ``parse_layout(layout_text(
    model_from_layout(x)))`` describes the same mapping as ``x``. The result is a fresh copy: edit
    freely."""
    ops: dict[str, Any] = {
        "table": layout.table,
        "schema": layout.schema,
        "row_id": layout.row_id,
        "key": list(layout.key),
        "scope": list(layout.scope),
        "key_fallback": layout.key_fallback,
        "key_required": list(layout.key_required),
        "optional": list(layout.optional),
    }
    if layout.deletes_completed:
        ops["deletes_completed"] = layout.deletes_completed
    if layout.kind is not None:
        ops["kind"] = _value_out(layout.kind)
    ops["status"] = _status_out(layout.status)
    ops["times"] = {k: _time_out(tc) for k, tc in layout.times.items()}
    ops["fields"] = {k: _value_out(v, payload=k in PAYLOAD_FIELDS) for k, v in layout.fields.items()}
    exp: dict[str, Any] = {
        "retention_seconds": _num_out(layout.retention_seconds),
        "lock_timeout_seconds": _num_out(layout.lock_timeout_seconds),
        "dedup_window_seconds": _num_out(layout.dedup_window_seconds),
        "lock_timeout_column": layout.lock_timeout_column,
        "lock_time_from": _lock_time_from_out(layout.lock_time_from),
        "lock_expires_from": _lock_time_from_out(layout.lock_expires_from),
        "lock_heartbeat": (
            {
                "column": layout.lock_heartbeat.time.column,
                "encoding": layout.lock_heartbeat.time.encoding,
                "seconds_column": layout.lock_heartbeat.seconds_column,
            }
            if layout.lock_heartbeat is not None
            else None
        ),
    }
    if layout.retention_seconds is not None or layout.retention_from != "created_at":
        exp["retention_from"] = layout.retention_from
    model = {
        "layout": {
            "name": layout.name,
            "title": layout.title,
            "description": layout.description,
            "source": layout.source,
        },
        "operations": ops,
        "attempts": _attempts_out(layout.attempts),
        "expiry": exp,
        "tunables": {"retry_threshold": layout.retry_threshold},
    }
    if layout.detect:
        model["detect"] = copy.deepcopy(layout.detect)
    if layout.effects is not None:
        model["effects"] = effects_model(layout.effects)
    if layout.actions:
        model["actions"] = layout.actions.to_dict()
    return model


def effects_model(fx: EffectsSpec) -> dict[str, Any]:
    """The TOML-shaped ``[effects]`` section of an :class:`~idemview.layouts.layout.EffectsSpec`
    (a :class:`LayoutDraft` keeps it verbatim among its ``extra`` sections)."""
    d: dict[str, Any] = {
        "table": fx.table,
        "schema": fx.schema,
        "connection": fx.connection,
        "link": {"effect": fx.link_effect, "operation": fx.link_operation},
        "id": fx.id,
        "reference": fx.reference,
    }
    if fx.time is not None:
        d["time"] = _time_out(fx.time)
    if fx.where:
        d["where"] = [_pred_out(p) for p in fx.where]
    if fx.show:
        d["show"] = list(fx.show)
    if fx.optional:
        d["optional"] = True
    return d


# Empty lists that mean "nothing" and may be left out; elsewhere (a rule's ``when = []``, the catch-all
# rule) an empty list is meaningful and kept.
_DROPPABLE_EMPTY_LISTS = {"key", "scope", "optional", "where", "key_required"}


def _clean(v: Any, key: str | None = None) -> Any:
    """A copy without ``None``/``""`` entries and empty tables (TOML has no null), floats that are whole
    seconds written as ints, and tuples as lists. Returns ``None`` when nothing is left."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            c = _clean(x, str(k))
            if c is None:
                continue
            if isinstance(c, list) and not c and str(k) in _DROPPABLE_EMPTY_LISTS:
                continue
            out[str(k)] = c
        return out or None
    if isinstance(v, (list, tuple)):
        return [c for c in (_clean(x) for x in v) if c is not None]
    # "" is "not chosen" for a name (a column, a schema); a predicate may compare with "" on purpose.
    if v is None or (isinstance(v, str) and v == "" and key is not None and key not in PREDICATE_OPS):
        return None
    if (
        isinstance(v, float)
        and math.isfinite(v)
        and v.is_integer()
        and key in ("retention_seconds", "lock_timeout_seconds", "dedup_window_seconds")
    ):
        return int(v)
    return v


_SECTION_ORDER = ("layout", "operations", "attempts", "expiry", "tunables", "detect")


def layout_text(model: dict, origin: str = "<editor>") -> str:
    """TOML text of ``model`` that is proven to parse: it is written with ``tomli_w`` and validated with
    :func:`parse_layout` before being returned.

    ``None`` and empty-string entries are left out (TOML has no null). Raises :class:`LayoutError` with
    parse_layout's message when the model is not a valid layout (e.g. no key column chosen yet), or
    when a value cannot be written as TOML."""
    cleaned = _clean(model) or {}
    ordered = {k: cleaned[k] for k in _SECTION_ORDER if k in cleaned}
    ordered.update({k: v for k, v in cleaned.items() if k not in ordered})
    try:
        text = tomli_w.dumps(ordered)
    except (TypeError, ValueError) as e:
        raise LayoutError(f"layout {origin}: cannot be written as TOML: {e}") from None
    parse_layout(text, origin=origin)
    return text


def build_layout(model: dict, origin: str = "<editor>") -> Layout:
    """The parsed :class:`Layout` of ``model`` (via :func:`layout_text`). Raises :class:`LayoutError`."""
    return parse_layout(layout_text(model, origin), origin=origin)
