"""Building layouts from a reflected schema (the core behind the GUI layout editor, DESIGN §4).

No Qt here: everything is plain data and SQLAlchemy, tested without a display.

- :func:`reflect_schema` lists a database's tables and columns with their types (every non-system
  schema; the default schema is reported as ``None``, the way layouts name it);
- :func:`sample_distinct` gives the most frequent values of a column with their counts (to map status
  values), :func:`sample_values` a few non-NULL values (to guess a time encoding);
- :func:`guess_time_encoding` and :func:`guess_status` suggest what a person then confirms;
- the **model** is a plain ``dict`` shaped exactly like the layout TOML (``{"layout": {...},
  "operations": {...}, "attempts": {...}, "expiry": {...}, "tunables": {...}}``), and its typed form is a
  :class:`~idemview.layouts.draft.LayoutDraft`; :func:`model_from_layout` turns a parsed :class:`Layout`
  (a preset) into one and :func:`layout_text` turns one into TOML text that is proven to parse (both live
  in :mod:`idemview.layouts.draft` and are re-exported here); :func:`save_layout` writes a model or a
  draft atomically, by default to :func:`layout_path_for` (``config_dir()/layouts/<connection id>.toml``,
  beside the connection).

Every name in a model is a table or column name chosen from the reflected schema; nothing here builds
SQL from text (samples are read with SQLAlchemy Core, identifiers quoted, on a read-only engine).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Date,
    DateTime,
    Float,
    Integer,
    LargeBinary,
    Numeric,
    String,
    func,
    inspect,
    select,
)
from sqlalchemy import column as sa_column
from sqlalchemy import table as sa_table
from sqlalchemy.engine import Engine

from idemview.config import config_dir
from idemview.domain.model import Status
from idemview.layouts.draft import LayoutDraft, build_layout, layout_text, model_from_layout
from idemview.ledger.dialects import POSTGRESQL, family
from idemview.paths import check_write_target

__all__ = [
    "ColumnInfo",
    "LayoutDraft",
    "TableInfo",
    "blank_model",
    "build_layout",
    "find_table",
    "guess_status",
    "guess_time_encoding",
    "layout_path_for",
    "layout_text",
    "model_from_layout",
    "reflect_schema",
    "sample_distinct",
    "sample_values",
    "save_layout",
    "write_atomic",
]

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
    return {
        str: "text",
        int: "integer",
        float: "number",
        bytes: "binary",
        datetime: "datetime",
        date: "date",
        bool: "boolean",
        dict: "json",
    }.get(py, "other"), False


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
            schemas = [
                s
                for s in insp.get_schema_names()
                if s.lower() not in SYSTEM_SCHEMAS and not s.lower().startswith("pg_")
            ]
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
                infos.append(ColumnInfo(c["name"], _type_text(c["type"]), fam, bool(c.get("nullable", True)), tz))
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


def sample_distinct(
    engine: Engine, table: str, column: str, schema: str | None = None, limit: int = 50
) -> list[tuple[Any, int]]:
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


def sample_values(engine: Engine, table: str, column: str, schema: str | None = None, limit: int = 20) -> list[Any]:
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
        mags = [abs(n) for n in nums if n is not None]
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
    Status.COMPLETED: (
        "completed",
        "complete",
        "succeeded",
        "success",
        "successful",
        "done",
        "finished",
        "ok",
        "processed",
        "delivered",
        "sent",
        "committed",
        "consumed",
    ),
    Status.FAILED: (
        "failed",
        "failure",
        "fail",
        "error",
        "errored",
        "dead",
        "discarded",
        "cancelled",
        "canceled",
        "revoked",
        "rejected",
        "aborted",
        "expired",
    ),
    Status.IN_PROGRESS: (
        "in_progress",
        "inprogress",
        "running",
        "started",
        "processing",
        "executing",
        "active",
        "locked",
        "claimed",
        "retry",
        "retrying",
    ),
    Status.NEW: (
        "new",
        "pending",
        "queued",
        "scheduled",
        "available",
        "created",
        "received",
        "waiting",
        "enqueued",
        "ready",
    ),
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


def _is_layout_file(p: Path) -> bool:
    """True for a TOML file with an ``[operations]`` table (a layout, not the saved connections)."""
    import tomllib

    try:
        return p.suffix == ".toml" and isinstance(tomllib.loads(p.read_text("utf-8")).get("operations"), dict)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False


def save_layout(model: dict | LayoutDraft, *, connection_id: str | None = None, path: str | Path | None = None) -> Path:
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
    if isinstance(model, LayoutDraft):
        model = model.to_model()
    text = layout_text(model, origin=str(target))
    # the write gate: saving may replace a layout (that is its job), never a database or the saved
    # connections file
    target.parent.mkdir(parents=True, exist_ok=True)
    check_write_target(target, overwrite=True, may_replace=_is_layout_file)
    write_atomic(target, text)
    return target
