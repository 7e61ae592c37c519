"""Building layouts from a reflected schema (the core behind the GUI layout editor, DESIGN §4).

No Qt here: everything is plain data and SQLAlchemy, tested without a display.

- :func:`reflect_schema` lists a database's tables and columns with their types (every non-system
  schema; the default schema is reported as ``None``, the way layouts name it);
- :func:`sample_distinct` gives the most frequent values of a column with their counts (to map status
  values), :func:`sample_values` a few non-NULL values (to guess a time encoding);
- :func:`guess_time_encoding` and :func:`guess_status` suggest what a person then confirms;
- the **model** is a plain ``dict`` shaped exactly like the layout TOML (``{"layout": {...},
  "operations": {...}, "attempts": {...}, "expiry": {...}, "tunables": {...}}``, see
  :mod:`idemview.layouts.layout`); :func:`model_from_layout` turns a parsed :class:`Layout` (a preset) into one,
  :func:`layout_text` turns one into TOML text that is proven to parse (it is validated with
  :func:`parse_layout` before it is returned), and :func:`save_layout` writes it atomically, by default
  to :func:`layout_path_for` (``config_dir()/layouts/<connection id>.toml``, beside the connection).

Every name in a model is a table or column name chosen from the reflected schema; nothing here builds
SQL from text (samples are read with SQLAlchemy Core, identifiers quoted, on a read-only engine).
"""

from __future__ import annotations

import copy
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Iterable, Sequence

import tomli_w
from sqlalchemy import (
    JSON, Boolean, Date, DateTime, Float, Integer, LargeBinary, Numeric, String, func, inspect, select,
)
from sqlalchemy import column as sa_column, table as sa_table
from sqlalchemy.engine import Engine

from idemview.config import config_dir
from idemview.layouts.layout import (
    PAYLOAD_FIELDS, PREDICATE_OPS, AttemptsSpec, Layout, LayoutError, Predicate, StatusSource, TimeColumn, ValueSource,
    parse_layout,
)
from idemview.domain.model import Status
from idemview.ledger.dialects import POSTGRESQL, family

#: Schemas that hold the engine's own catalog, never a ledger.
SYSTEM_SCHEMAS = {"information_schema", "pg_catalog", "pg_toast", "mysql", "performance_schema", "sys"}

#: Epoch magnitudes: seconds since 1970 between 1973 and 5138 are 1e8..1e11; milliseconds 1e11..1e14.
_EPOCH_S = (1e8, 1e11)
_EPOCH_MS = (1e11, 1e14)
_ISO_RE = re.compile(r"^\s*\d{4}-\d\d-\d\d([ T]\d\d:\d\d(:\d\d(\.\d+)?)?)?\s*(Z|z|[+-]\d\d(:?\d\d)?)?\s*$")
_NUMERIC_RE = re.compile(r"^\s*[+-]?\d+(\.\d+)?\s*$")


# ------------------------------------------------------------------------------------ reflection

@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """A reflected column: ``name`` as the database spells it, ``type`` its SQL type as text
    (``"INTEGER"``, ``"TIMESTAMP WITH TIME ZONE"``), ``family`` one of ``datetime``, ``date``,
    ``integer``, ``number``, ``text``, ``binary``, ``json``, ``boolean``, ``other``; ``timezone``
    True for a timezone-aware datetime type."""

    name: str
    type: str
    family: str
    nullable: bool = True
    timezone: bool = False


@dataclass(slots=True)
class TableInfo:
    """A reflected table: ``schema`` (``None`` for the connection's default schema), ``name`` and its
    ``columns`` in table order."""

    schema: str | None
    name: str
    columns: list[ColumnInfo] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``schema.name``, or just ``name`` in the default schema."""
        return f"{self.schema}.{self.name}" if self.schema else self.name

    def column(self, name: str) -> ColumnInfo | None:
        """The column called ``name`` (exact spelling first, then case-insensitively), or ``None``."""
        for c in self.columns:
            if c.name == name:
                return c
        low = name.lower()
        return next((c for c in self.columns if c.name.lower() == low), None)

    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def _family(t: Any) -> tuple[str, bool]:
    """(family, timezone) of a SQLAlchemy type instance (see :class:`ColumnInfo`)."""
    if isinstance(t, DateTime):
        return "datetime", bool(getattr(t, "timezone", False))
    if isinstance(t, Date):
        return "date", False
    if isinstance(t, Boolean):
        return "boolean", False
    if isinstance(t, Integer):
        return "integer", False
    if isinstance(t, (Numeric, Float)):
        return "number", False
    if isinstance(t, JSON):
        return "json", False
    if isinstance(t, String):
        return "text", False
    if isinstance(t, LargeBinary):
        return "binary", False
    # Dialect types that subclass none of the above (PostgreSQL JSONB subclasses JSON; UUID, INTERVAL
    # do not): decide by the Python type where the dialect declares one.
    try:
        py = t.python_type
    except (NotImplementedError, AttributeError):
        return "other", False
    return {str: "text", int: "integer", float: "number", bytes: "binary", datetime: "datetime",
            date: "date", bool: "boolean", dict: "json"}.get(py, "other"), False


def _type_text(t: Any) -> str:
    try:
        return str(t)
    except Exception:  # noqa: BLE001 - some dialect types cannot render without a dialect
        return type(t).__name__.upper()


def reflect_schema(engine: Engine) -> list[TableInfo]:
    """Every table the connection can see, with its columns, sorted by (schema, name).

    Tables of the default schema have ``schema=None``; other non-system schemas are listed with their
    name (on MySQL/MariaDB a schema is another database, so only the connected one is read). Tables
    that cannot be reflected (no privilege) are left out rather than failing the whole listing."""
    insp = inspect(engine)
    try:
        default = insp.default_schema_name
    except NotImplementedError:
        default = None
    if family(engine) != POSTGRESQL:
        # SQLite's attached databases are not allowed on a read-only engine; MySQL: see above; an
        # unknown dialect's schemas may be other databases (issue #9, item 1).
        schemas: list[str | None] = [None]
    else:
        try:
            schemas = [s for s in insp.get_schema_names() if s.lower() not in SYSTEM_SCHEMAS
                       and not s.lower().startswith("pg_")]
        except NotImplementedError:
            schemas = [None]
    out: list[TableInfo] = []
    for s in schemas or [None]:
        sch = None if s == default else s
        try:
            names = insp.get_table_names(schema=sch)
        except Exception:  # noqa: BLE001 - a schema we may not read: skip it
            continue
        for name in names:
            try:
                cols = insp.get_columns(name, schema=sch)
            except Exception:  # noqa: BLE001
                continue
            infos = []
            for c in cols:
                fam, tz = _family(c["type"])
                infos.append(ColumnInfo(c["name"], _type_text(c["type"]), fam,
                                        bool(c.get("nullable", True)), tz))
            out.append(TableInfo(sch, name, infos))
    out.sort(key=lambda t: (t.schema or "", t.name))
    return out


def find_table(tables: Sequence[TableInfo], name: str, schema: str | None = None) -> TableInfo | None:
    """The table called ``name`` in ``schema`` (exact spelling first, then case-insensitively; with
    ``schema=None`` any schema matches, the default schema first), or ``None``."""
    cands = [t for t in tables if schema is None or (t.schema or "").lower() == schema.lower()]
    cands.sort(key=lambda t: t.schema is not None)
    for t in cands:
        if t.name == name:
            return t
    return next((t for t in cands if t.name.lower() == name.lower()), None)


# --------------------------------------------------------------------------------------- samples

def _lightweight(table: str, column: str, schema: str | None):
    # A lightweight table clause: the names are quoted by SQLAlchemy, no reflection round trip.
    t = sa_table(table, sa_column(column), schema=schema)
    return t, t.c[column]


def sample_distinct(engine: Engine, table: str, column: str, schema: str | None = None,
                    limit: int = 50) -> list[tuple[Any, int]]:
    """The ``limit`` most frequent values of ``table.column`` as ``[(value, count), ...]``, most
    frequent first (ties by value text), NULL included as ``None`` when present.

    Values come back as the driver returns them (``str``, ``int``...). Raises SQLAlchemy errors when
    the table or column does not exist."""
    _t, c = _lightweight(table, column, schema)
    n = func.count().label("n")
    q = select(c, n).group_by(c).order_by(n.desc()).limit(limit)
    with engine.connect() as conn:
        rows = [(r[0], int(r[1])) for r in conn.execute(q)]
    rows.sort(key=lambda r: (-r[1], r[0] is None, str(r[0])))
    return rows


def sample_values(engine: Engine, table: str, column: str, schema: str | None = None,
                  limit: int = 20) -> list[Any]:
    """Up to ``limit`` non-NULL values of ``table.column`` (the first rows the database returns)."""
    _t, c = _lightweight(table, column, schema)
    q = select(c).where(c.is_not(None)).limit(limit)
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(q)]


# ---------------------------------------------------------------------------------------- guesses

def _as_number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        from decimal import Decimal
        if isinstance(v, Decimal):
            return float(v)
    except ImportError:  # pragma: no cover
        pass
    if isinstance(v, str) and _NUMERIC_RE.match(v):
        return float(v)
    return None


def guess_time_encoding(column: ColumnInfo | None, samples: Iterable[Any] = ()) -> str | None:
    """The time encoding (:data:`idemview.layouts.layout.TIME_ENCODINGS`) a column most likely uses, or ``None``
    when it does not look like a time.

    - a datetime type → ``datetime`` (aware, or naive meaning UTC; choose ``naive`` + a zone by hand
      when the naive values were written in local time); a date type → ``datetime``;
    - numbers (or numeric text) whose magnitude is around 1e9 → ``epoch_s``, around 1e12 → ``epoch_ms``
      (every non-NULL sample must agree);
    - text that looks like ISO-8601 (``2026-11-30T12:00:00Z``, ``2026-11-30 12:00:00+01:00``) →
      ``iso_text``; SQLite stores SQLAlchemy datetimes as such text under a DATETIME type, which stays
      ``datetime``.
    ``samples`` are non-NULL values of the column (:func:`sample_values`)."""
    fam = column.family if column is not None else "other"
    if fam in ("datetime", "date"):
        return "datetime"
    vals = [v for v in samples if v is not None and v != ""]
    if not vals:
        return None
    if all(isinstance(v, (datetime, date)) for v in vals):
        return "datetime"
    nums = [_as_number(v) for v in vals]
    if all(n is not None for n in nums):
        mags = [abs(n) for n in nums]
        if all(_EPOCH_S[0] <= m < _EPOCH_S[1] for m in mags):
            return "epoch_s"
        if all(_EPOCH_MS[0] <= m < _EPOCH_MS[1] for m in mags):
            return "epoch_ms"
        return None
    if all(isinstance(v, (str, bytes)) for v in vals):
        texts = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in vals]
        if all(_ISO_RE.match(t) for t in texts):
            return "iso_text"
    return None


_STATUS_WORDS = {
    Status.COMPLETED: ("completed", "complete", "succeeded", "success", "successful", "done", "finished",
                       "ok", "processed", "delivered", "sent", "committed", "consumed"),
    Status.FAILED: ("failed", "failure", "fail", "error", "errored", "dead", "discarded", "cancelled",
                    "canceled", "revoked", "rejected", "aborted", "expired"),
    Status.IN_PROGRESS: ("in_progress", "inprogress", "running", "started", "processing", "executing",
                         "active", "locked", "claimed", "retry", "retrying"),
    Status.NEW: ("new", "pending", "queued", "scheduled", "available", "created", "received", "waiting",
                 "enqueued", "ready"),
}


def guess_status(raw: Any) -> str:
    """A normalized status (a :class:`Status` value) suggested for a raw status value by its words
    (``"PROCESSING"`` → ``in_progress``, ``"done"`` → ``completed``); ``unknown`` when unsure. A
    suggestion only: the person mapping the ledger decides."""
    if raw is None:
        return Status.UNKNOWN.value
    s = re.sub(r"[\s\-]+", "_", str(raw).strip().lower())
    for st, words in _STATUS_WORDS.items():
        if s in words or s.replace("_", "") in words:
            return st.value
    return Status.UNKNOWN.value


# ------------------------------------------------------------------------------------------ model

def blank_model(name: str = "custom", table: str = "", schema: str | None = None) -> dict:
    """A minimal model to start from scratch: a name, the operations table, no mapping yet (it does
    not validate until a key column is chosen)."""
    ops: dict[str, Any] = {"table": table, "key": []}
    if schema:
        ops["schema"] = schema
    return {"layout": {"name": name}, "operations": ops, "attempts": {"source": "none"}}


def _num_out(x: float | None) -> int | float | None:
    """Seconds as an int when whole (``259200`` reads better than ``259200.0`` in TOML)."""
    if x is None:
        return None
    return int(x) if float(x).is_integer() else float(x)


def _time_out(tc: TimeColumn) -> dict:
    d: dict[str, Any] = {"column": tc.column, "encoding": tc.encoding}
    if tc.encoding == "naive" or tc.zone != "UTC":
        d["zone"] = tc.zone
    return d


def _value_out(vs: ValueSource, payload: bool = False) -> Any:
    if vs.literal is not None:
        return {"value": vs.literal}
    if not payload and not vs.json_path and not vs.encoding:
        return vs.column
    d: dict[str, Any] = {"column": vs.column}
    if vs.json_path:
        d["json_path"] = vs.json_path
    if vs.encoding:
        d["encoding"] = vs.encoding
    return d


def _pred_out(p: Predicate) -> dict:
    if p.op == "any":
        return {"any": [_pred_out(q) for q in p.value]}
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
    d["default"] = s.default
    return d


def _attempts_out(a: AttemptsSpec) -> dict:
    d: dict[str, Any] = {"source": a.source}
    if a.source == "table":
        d.update(table=a.table, schema=a.schema, join=dict(a.join), number=a.number,
                 error=a.error, effect_ref=a.effect_ref, worker=a.worker, fingerprint=a.fingerprint)
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
        "table": layout.table, "schema": layout.schema, "row_id": layout.row_id,
        "key": list(layout.key), "scope": list(layout.scope), "key_fallback": layout.key_fallback,
        "optional": list(layout.optional),
    }
    if layout.kind is not None:
        ops["kind"] = _value_out(layout.kind)
    ops["status"] = _status_out(layout.status)
    ops["times"] = {k: _time_out(tc) for k, tc in layout.times.items()}
    ops["fields"] = {k: _value_out(v, payload=k in PAYLOAD_FIELDS) for k, v in layout.fields.items()}
    exp: dict[str, Any] = {
        "retention_seconds": _num_out(layout.retention_seconds),
        "lock_timeout_seconds": _num_out(layout.lock_timeout_seconds),
        "dedup_window_seconds": _num_out(layout.dedup_window_seconds),
    }
    if layout.retention_seconds is not None or layout.retention_from != "created_at":
        exp["retention_from"] = layout.retention_from
    model = {
        "layout": {"name": layout.name, "title": layout.title, "description": layout.description,
                   "source": layout.source},
        "operations": ops,
        "attempts": _attempts_out(layout.attempts),
        "expiry": exp,
        "tunables": {"retry_threshold": layout.retry_threshold},
    }
    if layout.detect:
        model["detect"] = copy.deepcopy(layout.detect)
    return model


# Empty lists that mean "nothing" and may be left out; elsewhere (a rule's ``when = []``, the catch-all
# rule) an empty list is meaningful and kept.
_DROPPABLE_EMPTY_LISTS = {"key", "scope", "optional", "where"}


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
    if isinstance(v, float) and math.isfinite(v) and v.is_integer() and key in (
            "retention_seconds", "lock_timeout_seconds", "dedup_window_seconds"):
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


# ------------------------------------------------------------------------------------------ saving

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def layout_path_for(connection_id: str) -> Path:
    """Where the layout of a saved connection lives: ``config_dir()/layouts/<connection_id>.toml``.

    Raises ``ValueError`` for an id that is not a plain file name (ids are uuid hex; this keeps a
    crafted id from escaping the directory)."""
    if not isinstance(connection_id, str) or not _SAFE_ID.match(connection_id) or ".." in connection_id:
        raise ValueError(f"not a connection id: {connection_id!r}")
    return config_dir() / "layouts" / f"{connection_id}.toml"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in the same directory, renamed over
    ``path`` only when complete: a crash never leaves a half-written layout."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def save_layout(model: dict, *, connection_id: str | None = None, path: str | Path | None = None) -> Path:
    """Validate ``model`` and write its TOML atomically; returns the path written.

    The target is ``path`` when given, else :func:`layout_path_for` ``(connection_id)``; the file then
    loads with ``load_layout(str(path))`` (a saved connection's ``layout`` may name it). Raises
    :class:`LayoutError` for an invalid model (nothing is written), ``ValueError`` when neither target
    is given, ``OSError`` when the file cannot be written."""
    if path is None:
        if connection_id is None:
            raise ValueError("save_layout needs a connection_id or a path")
        target = layout_path_for(connection_id)
    else:
        target = Path(path)
    text = layout_text(model, origin=str(target))
    write_atomic(target, text)
    return target
