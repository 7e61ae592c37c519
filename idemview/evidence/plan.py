"""Evidence export from a ledger (DESIGN §7, issue "masking and evidence"): exactly what a filter
shows, streamed page by page from the database, masked, with a manifest.

Four kinds of rows: the filtered ``operations``; all ``attempts`` of the filtered operations; the
``findings`` of the filtered operations; the ``effects`` (downstream effect records, possibly in another
database) of the filtered operations. Rows are streamed from a server-side cursor (memory does not
grow with the row count) into :func:`idemview.evidence.writer.write_evidence`, which masks, formats, writes
under a temporary name and renames only when complete.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Column, Text, cast, select, type_coerce
from sqlalchemy.sql import sqltypes
from sqlalchemy.sql.elements import Null

from idemview.config import new_masker
from idemview.domain.filters import Filter
from idemview.domain.model import LEDGER_KINDS, FindingKind, Status
from idemview.errors import InputError, TargetRefused
from idemview.evidence import timecols
from idemview.evidence.pages import PageReader, paged_columns
from idemview.evidence.writer import ColumnBatches, ColumnSpec, ExportResult, write_evidence
from idemview.findings.actions import classifier_for
from idemview.findings.engine import FindingEngine
from idemview.ledger.batch import for_batch
from idemview.ledger.connect import describe
from idemview.ledger.reader import Ledger, _json_list, decode_payload, json_array_attempts, stored_number
from idemview.ledger.times import decode_time, from_epoch, iso
from idemview.masking.masker import Masker
from idemview.masking.stream import STREAM_MIN, JsonText
from idemview.paths import check_write_target

UTC = UTC
ROW_KINDS = ("operations", "attempts", "findings", "effects")
STREAM_BATCH = 5000
#: Bytes of large cells (payloads, errors) fetched per round trip: the row count of a fetch adapts to
#: it, so memory stays flat whether cells hold 100 bytes or 5 MB (issue 11).
FETCH_BYTES = 8 << 20
FIRST_FETCH = 1  # the first row tells the size of the next fetch

#: The manifest's description of the operations export's ``attempt_effect_refs`` column (issue #20, 11b).
ATTEMPT_EFFECT_REFS_NOTE = (
    "every distinct effect reference the operation's attempts carry, a JSON array in the order the "
    "attempts first carried them (lowest attempt number first): two or more, or one other than effect_ref, "
    "means the operation had more than one effect (a double charge); empty when the attempts carry none "
    "or the ledger's attempts record no reference"
)
#: Operations whose attempts' effect references are read in one grouped query (bounded: an OR of
#: this many (scope, key) pairs per statement).
EFFECT_REFS_BATCH = 500

OP_TIMES = ("created_at", "updated_at", "completed_at", "locked_at", "lock_expires_at", "expires_at", "last_attempt_at")


@dataclass
class ExportPlan:
    """Columns and a row iterator for one export (built by :func:`plan_export`)."""

    columns: list[ColumnSpec]
    rows: Iterator[tuple]  # a ColumnBatches for operations: write_evidence takes its columns as they are
    description: str


def _time_kind(ledger: Ledger, name: str) -> str:
    tc = ledger.layout.times.get(name)
    return "naive_instant" if tc is not None and tc.encoding == "naive" else "instant"


def _as_stored(t: datetime | None, ledger: Ledger, name: str):
    """A ``naive`` column is exported as the wall time it stored (no invented offset); others in UTC."""
    if t is None:
        return None
    tc = ledger.layout.times.get(name)
    if tc is not None and tc.encoding == "naive":
        return t.astimezone(ZoneInfo(tc.zone)).replace(tzinfo=None)
    return t


def stream_rows(conn, q, big: list[int], batch_bytes: int = FETCH_BYTES, max_rows: int = STREAM_BATCH):
    """Rows of ``q`` streamed from a server-side cursor where the driver has one, fetched in batches
    sized by bytes: after each batch the next one's row count is ``batch_bytes`` divided by the mean
    size of the large cells at positions ``big`` (text, bytes), between 1 and ``max_rows``."""
    for rows in stream_batches(conn, q, big, batch_bytes, max_rows):
        yield from rows


def stream_batches(conn, q, big: list[int], batch_bytes: int = FETCH_BYTES, max_rows: int = STREAM_BATCH):
    """:func:`stream_rows` a fetched batch (a list of rows) at a time."""
    if conn.engine.dialect.name == "sqlite":
        # One sequential pass: pages are never read again, so a smaller cache than the batch engine's
        # (ledger/connect.py SQLITE_CACHE_KB) is enough, and no memory map. Restored below.
        conn.exec_driver_sql("PRAGMA mmap_size = 0")
        conn.exec_driver_sql("PRAGMA cache_size = -16384")
        try:
            yield from _stream(conn, q, big, batch_bytes, max_rows)
        finally:
            from idemview.ledger.connect import SQLITE_CACHE_KB, SQLITE_MMAP_BYTES

            try:
                conn.exec_driver_sql(f"PRAGMA cache_size = -{SQLITE_CACHE_KB}")
                conn.exec_driver_sql(f"PRAGMA mmap_size = {SQLITE_MMAP_BYTES}")
            except Exception:  # noqa: BLE001 - a failed restore only costs speed on this connection
                pass
        return
    yield from _stream(conn, q, big, batch_bytes, max_rows)


def _stream(conn, q, big, batch_bytes, max_rows):
    res = conn.execution_options(stream_results=True, yield_per=FIRST_FETCH).execute(q)
    n = FIRST_FETCH
    while True:
        rows = res.fetchmany(n)
        if not rows:
            return
        size = 64 * len(rows)
        for i in big:
            for v in [r[i] for r in rows]:
                if isinstance(v, (str, bytes, bytearray, memoryview)):
                    size += len(v)
                elif isinstance(v, (dict, list, tuple)):
                    # JSON the driver parsed (the export reads big JSON columns as text, see _as_text):
                    # len() is an element count, not bytes; ~256 bytes per element of Python objects
                    size += 256 * len(v) + 64
        n = max(1, min(max_rows, int(batch_bytes * len(rows) / size)))
        res.yield_per(n)
        yield rows
        del rows


class _PerValue(dict):
    """``fn`` of each distinct value, computed once (a cache for one fetched batch)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, v: Any) -> Any:
        out = self[v] = self.fn(v)
        return out


_NONE_TYPE = type(None)


def _status_value(v: Any) -> str:
    try:
        return Status(v).value
    except ValueError:
        return Status.UNKNOWN.value


def _fetched_once(sel: list) -> tuple[list, dict[str, str]]:
    """``sel`` (labelled select columns) without the labels of a stored column or NULL selected
    already (Celery's ``date_done`` is both ``updated_at`` and ``locked_at``; absent fields are NULL):
    (the columns to select, {dropped label: the label selected for it}). The driver reads and
    decodes such a column once a row instead of twice (issue 27 item 2). Payload labels and ``rid`` are
    always kept: a paged payload's cell is filled after conversion, by record id."""
    kept: list = []
    aliases: dict[str, str] = {}
    first: dict[int, str] = {}
    for c in sel:
        e = getattr(c, "element", None)
        # payload cells may be read in pages and the record id finds them (evidence/pages.py): never aliased
        if isinstance(e, (Column, Null)) and c.name != "rid" and not c.name.startswith(("p_", "j_")):
            if id(e) in first:
                aliases[c.name] = first[id(e)]
                continue
            first[id(e)] = c.name
        kept.append(c)
    return kept, aliases


def _operation_columns(
    ledger: Ledger,
    names: list[str],
    times: list[str],
    payloads: list[str],
    findings: dict,
    aliases: Mapping[str, str] | None = None,
):
    """A function from a fetched batch of ``Ledger.op_columns()`` rows to the export's columns of
    the operations rows (lists, one per export column), equal to what ``Ledger.row_to_operation``
    and the Operation's fields give, computed column by column: a time or status is decoded once
    per distinct stored value of the batch. ``names``: the batch's column labels; ``aliases``: labels
    not fetched → the fetched label holding their values (:func:`_fetched_once`)."""
    pos = {n: i for i, n in enumerate(names)}
    pos.update({a: pos[b] for a, b in (aliases or {}).items()})
    name = ledger.name
    i_scope, i_key, i_status, i_ac = pos["scope"], pos["key"], pos["status"], pos["attempt_count"]
    as_is = [pos[k] for k in ("kind",)]
    tail_as_is = [pos[k] for k in ("fingerprint", "intent_ref", "effect_ref")]
    i_rid, i_raw = pos["rid"], pos["raw_status"]
    i_json = pos.get("j_attempts")

    tdefs = _time_defs(ledger, times, pos)
    pdefs = [
        (pos[f"p_{p}"], _payload_converter(enc), timecols.payload_bulk(enc))
        for p in payloads
        for enc in [ledger.layout.fields[p].encoding]
    ]
    classify = classifier_for(ledger).classify  # memoised per distinct kind (DESIGN §5.1)
    att = ledger.layout.attempts
    with_refs = att.source == "table" and bool(att.effect_ref)

    def convert(batch: list) -> list:
        n = len(batch)
        cols: list[Sequence[Any]] = list(zip(*batch, strict=False))
        scope: Sequence[Any] = cols[i_scope]
        if not set(map(type, scope)) <= {str}:
            scope = [x or "" for x in scope]
        key: Sequence[Any] = cols[i_key]
        if _NONE_TYPE in set(map(type, key)):
            key = ["" if x is None else x for x in key]
        out: list = [[name] * n, cols[i_rid], scope, key]
        out += [cols[i] for i in as_is]
        out.append(list(map(classify, cols[pos["kind"]])))
        out.append(list(map(_PerValue(_status_value).__getitem__, cols[i_status])))
        out.append(cols[i_raw])
        out += _time_columns(tdefs, cols, n)
        out.append(_attempt_counts(cols[i_ac], cols[i_json] if i_json is not None else None))
        out += [cols[i] for i in tail_as_is]
        out.append(_attempt_effect_refs(ledger, scope, key) if with_refs else [None] * n)
        for i, fn, bulk in pdefs:
            got = bulk(cols[i]) if bulk is not None else None  # a column of bytes at once (timecols)
            out.append(got if got is not None else list(map(fn, cols[i])))
        if findings:
            out.append([(" ".join(f) if (f := findings.get(sk)) else None) for sk in zip(scope, key, strict=False)])
        else:
            out.append([None] * n)
        return out

    return convert


def _time_defs(ledger: Ledger, times: list[str], pos: dict[str, int]) -> list:
    """Time columns of :func:`_operation_columns`: (position, cache key, function of the stored
    value, whole-column function or None: :mod:`idemview.evidence.timecols`), or (None, None, None,
    None) for a time the layout lacks. Columns reading the same stored column with the same decoding
    (Celery's updated_at and locked_at) share their cache key."""
    tdefs: list[tuple[int | None, Any, Callable[[Any], Any] | None, Callable | None]] = []
    for t in times:
        if t == "expires_at" and "e_expires_at" in pos:
            naive = _time_kind(ledger, t) == "naive_instant"
            bulk = None if naive else timecols.epoch_floats
            tdefs.append((pos["e_expires_at"], ("epoch", t), _epoch_converter(ledger, t), bulk))
        elif t in ledger.time_cols:
            col, tc = ledger.time_cols[t]
            lt = ledger.layout.times.get(t)
            stored_zone = lt.zone if lt is not None and lt.encoding == "naive" else None
            key = (id(col), tc.encoding, tc.zone, stored_zone)
            bulk = timecols.bulk_for(tc.encoding, tc.zone, stored_zone)
            tdefs.append((pos[f"t_{t}"], key, _time_converter(tc, stored_zone), bulk))
        else:
            tdefs.append((None, None, None, None))
    return tdefs


def _time_columns(tdefs: list, cols: list[Sequence[Any]], n: int) -> list:
    """The decoded time columns of one batch (``cols``: its stored columns, ``n`` rows), each time
    decoded once per distinct stored value."""
    out: list = []
    caches: dict = {}
    done: dict = {}  # (stored column position, cache key) -> its decoded list, shared as is
    for i, ck, fn, bulk in tdefs:
        if i is None or fn is None:
            out.append([None] * n)
            continue
        same = done.get((i, ck))
        if same is not None:
            # the same stored column decoded alike (Celery's updated_at and locked_at): the same
            # list object, which the writer formats once (write_evidence's shared columns)
            out.append(same)
            continue
        got = bulk(cols[i]) if bulk is not None else None  # the column at once where that is exact
        if got is None:
            cache = caches.get(ck)
            if cache is None:
                cache = caches[ck] = _PerValue(fn)
            got = list(map(cache.__getitem__, cols[i]))
        out.append(done.setdefault((i, ck), got))
    return out


def _attempt_counts(ac: Sequence[Any], arrs: Sequence[Any] | None) -> Sequence[Any]:
    """The ``attempt_count`` column of one batch: stored numbers as ints; where none is stored and
    the layout keeps a JSON array of attempts (``arrs``), that array's length."""
    if not set(map(type, ac)) <= {int, _NONE_TYPE} or (arrs is not None and None in ac):
        counts = [stored_number(x) for x in ac]
        if arrs is not None:
            for j, x in enumerate(counts):
                if x is None:
                    arr = _json_list(arrs[j])
                    counts[j] = len(arr) if arr is not None else None
        return counts
    return ac


def _attempt_effect_refs(ledger: Ledger, scope: Sequence[Any], key: Sequence[Any]) -> list[list[str] | None]:
    """The ``attempt_effect_refs`` cells of one fetched batch of operations (``scope``/``key`` its
    columns): :meth:`Ledger.attempt_effect_refs` once per :data:`EFFECT_REFS_BATCH` distinct keys."""
    pairs = list(zip(scope, key, strict=True))
    distinct = list(dict.fromkeys(pairs))
    found: dict[tuple[str, str], list[str]] = {}
    for i in range(0, len(distinct), EFFECT_REFS_BATCH):
        found.update(ledger.attempt_effect_refs(distinct[i : i + EFFECT_REFS_BATCH]))
    return [found.get(p) for p in pairs]


def _time_converter(tc, stored_zone: str | None) -> Callable[[Any], Any]:
    """decode_time, then a ``naive`` column's wall time as stored (see :func:`_as_stored`)."""
    zone = ZoneInfo(stored_zone) if stored_zone is not None else None

    def conv(x: Any) -> Any:
        t = decode_time(x, tc)
        if t is None or zone is None:
            return t
        return t.astimezone(zone).replace(tzinfo=None)

    return conv


def _epoch_converter(ledger: Ledger, name: str) -> Callable[[Any], Any]:
    return lambda x: _as_stored(from_epoch(x), ledger, name)


def _payload_converter(encoding: str | None) -> Callable[[Any], Any]:
    """``_payload_cell(decode_payload(x, encoding))``, with the pickle and binary cases of ``bytes``
    written out directly (the same text)."""

    def general(x: Any) -> Any:
        return _payload_cell(decode_payload(x, encoding))

    if encoding == "json":

        def json_cell(x: Any) -> Any:
            # a large JSON text is masked as a stream by the writer, never parsed whole here
            if type(x) is str and len(x) >= STREAM_MIN:
                return JsonText(x, lambda: general(x))
            return general(x)

        return json_cell

    if encoding == "pickle":

        def pickled(x: Any) -> Any:
            if type(x) is bytes:
                return f"pickled, not decoded ({len(x)} bytes)"
            return general(x)

        return pickled
    if encoding == "binary":

        def binary(x: Any) -> Any:
            if type(x) is bytes:
                return x.hex()
            return general(x)

        return binary
    return general


#: Kinds whose findings are exactly the distinct (scope, key) rows of their row filter: for the export's
#: findings column their keys are read in SQL, without building a Finding with its explanation and
#: evidence per key (on an aged Celery ledger expired_key is ~half the rows: 460k objects at 1M rows).
_KEYS_ONLY_KINDS = (FindingKind.EXPIRED_KEY,)


def _tables_read(ledger: Ledger) -> dict[str, dict[str, str]]:
    """``{"tables": {"operations": "schema.table", "attempts": ...}}`` as read (empty for a ledger
    without SQLAlchemy tables, e.g. a Redis snapshot, whose ``describe`` says what was read)."""
    out: dict[str, str] = {}
    for role, t in (("operations", getattr(ledger, "ops", None)), ("attempts", getattr(ledger, "att", None))):
        if t is not None and getattr(t, "name", None):
            out[role] = f"{t.schema}.{t.name}" if t.schema else t.name
    if ledger.source.is_snapshot or not out:
        return {}
    return {"tables": out}


def _finding_index(ledger: Ledger, now: datetime, kinds=None) -> dict[tuple[str, str], list[str]]:
    """(scope, key) -> the kinds found for it, in report order (the export's ``findings`` column)."""
    from idemview.findings import registry

    fe = FindingEngine(ledger, now)
    wanted = list(kinds) if kinds is not None else [r.kind for r in registry.rules()]
    wanted = [k for k in wanted if k not in LEDGER_KINDS]  # about the ledger's columns, no operation
    skip = fe.unsupported()
    fast = [k for k in wanted if k in _KEYS_ONLY_KINDS and k not in skip]
    per_kind: dict[FindingKind, list[tuple[str, str]]] = {}
    for k in fast:
        rf = registry.rule(k).row_filter(fe)
        if rf is None:
            continue
        q = rf.select(ledger).subquery()
        with ledger.engine.connect() as c:
            per_kind[k] = [(r[0], r[1]) for r in c.execute(select(q.c.scope, q.c.key).distinct())]
    slow = [k for k in wanted if k not in per_kind]
    if slow:
        for f in fe.run(slow):
            per_kind.setdefault(f.kind, []).append((f.scope, f.key))
    idx: dict[tuple[str, str], list[str]] = {}
    for r in registry.rules():
        for ref in per_kind.get(r.kind, ()):
            idx.setdefault(ref, []).append(r.kind.value)
    return idx


def _operations(ledger: Ledger, flt: Filter, now: datetime) -> ExportPlan:
    times = [t for t in OP_TIMES if t in ledger.layout.times or (t == "expires_at" and "expires_at" in ledger.epoch)]
    cols = [
        ColumnSpec("ledger", "text"),
        ColumnSpec("record_id", "integer" if _int_rid(ledger) else "text"),
        ColumnSpec("scope", "text"),
        ColumnSpec("idempotency_key", "text"),
        ColumnSpec("kind", "text"),
        ColumnSpec("action", "text"),
        ColumnSpec("status", "text"),
        ColumnSpec("raw_status", "text"),
    ]
    cols += [ColumnSpec(t, _time_kind(ledger, t)) for t in times]
    cols += [
        ColumnSpec("attempt_count", "integer"),
        ColumnSpec("fingerprint", "text"),
        ColumnSpec("intent_ref", "text"),
        ColumnSpec("effect_ref", "text", "the effect reference the operation's own record keeps"),
        ColumnSpec("attempt_effect_refs", "json", ATTEMPT_EFFECT_REFS_NOTE),
    ]
    payloads: list[str] = [p for p in ("request", "response", "error") if p in ledger.layout.fields]
    cols += [ColumnSpec(p, "json" if ledger.layout.fields[p].encoding == "json" else "text") for p in payloads]
    cols.append(ColumnSpec("findings", "text"))
    findings = _finding_index(ledger, now)

    def rows():
        # Ledger.iter_operations' select, fetched by bytes (payload cells can be megabytes each), and
        # turned into export rows a fetched batch at a time, column by column, with what
        # Ledger.row_to_operation and the Operation fields would give (no object per row).
        sel, aliases = _fetched_once([_as_text(c, ledger.engine.dialect.name) for c in ledger.op_columns()])
        sel, paged = _paged_payloads(ledger, sel, cols)
        q = select(*sel).select_from(ledger.ops).where(ledger.filter_clause(flt, now))
        q = q.order_by(ledger.rid if ledger.rid is not None else ledger.key_expr)
        # payload cells can be large, also one fetched under another label
        large = {b for a, b in aliases.items() if a.startswith(("p_", "j_"))}
        big = [i for i, c in enumerate(sel) if c.name.startswith(("p_", "j_")) or c.name in large]
        convert = _operation_columns(ledger, [c.name for c in sel], times, payloads, findings, aliases)
        with ledger.engine.connect() as c:
            try:
                for batch in stream_batches(c, q, big):
                    out = convert(batch)
                    if paged is not None:
                        paged(out, batch)
                    yield out
            finally:
                if paged is not None:
                    paged.reader.close()

    return ExportPlan(cols, ColumnBatches(rows()), "the filtered operations, one row per record")


class _Paged:
    """Puts a :class:`~idemview.evidence.pages.PagedCell` in the converted batch where a payload cell
    was too long to select (its value came NULL and its ``n_p_*`` length did not)."""

    def __init__(self, reader: PageReader, specs: list[tuple[int, int, int, int, str, Callable[[Any], Any]]]) -> None:
        self.reader, self.specs = reader, specs

    def __call__(self, out: list, batch: list) -> None:
        for ci, i_rid, i_val, i_len, name, conv in self.specs:
            vals = list(map(itemgetter(i_val), batch))
            if None not in vals:
                continue
            col = None
            for r, (v, n) in enumerate(zip(vals, map(itemgetter(i_len), batch), strict=True)):
                if v is None and n is not None:
                    if col is None:
                        col = out[ci] = list(out[ci])
                    col[r] = self.reader.cell(name, batch[r][i_rid], n, conv)


def _paged_payloads(ledger: Ledger, sel: list, cols: list[ColumnSpec]) -> tuple[list, _Paged | None]:
    """The select list with long text payload cells read in pages (:mod:`idemview.evidence.pages`),
    and what puts them in the converted batches (``None``: nothing paged, e.g. no record id)."""
    if ledger.rid is None:
        return sel, None
    enc = {p: f.encoding for p, f in ledger.layout.fields.items()}
    sel, exprs = paged_columns(sel, enc, ledger.engine.dialect.name)
    if not exprs:
        return sel, None
    pos = {c.name: i for i, c in enumerate(sel)}
    names = [c.name for c in cols]
    specs: list[tuple[int, int, int, int, str, Callable[[Any], Any]]] = []
    for name in exprs:
        e = enc[name[2:]]

        def whole(x: Any, e: str | None = e) -> Any:
            return _payload_cell(decode_payload(x, e))

        specs.append((names.index(name[2:]), pos["rid"], pos[name], pos["n_" + name], name, whole))
    return sel, _Paged(PageReader(ledger.engine, ledger.ops, ledger.rid, exprs), specs)


def _as_text(c: Any, dialect: str) -> Any:
    """A payload column (``p_*``) of a JSON type read as its text: the driver would otherwise parse each
    cell whole (a 5 MB document is ~60 MB of Python objects) before the fetch can be sized by bytes, and
    the export masks JSON text as a stream (:mod:`idemview.masking.stream`). PostgreSQL's json/jsonb are
    cast in SQL (its driver parses them by type); other engines send JSON as text already."""
    name = getattr(c, "name", "") or ""
    inner = getattr(c, "element", c)
    if not name.startswith("p_") or not isinstance(getattr(inner, "type", None), sqltypes.JSON):
        return c
    if dialect == "postgresql":
        return cast(inner, Text).label(name)
    return type_coerce(inner, Text).label(name)


def _int_rid(ledger: Ledger) -> bool:
    if ledger.rid is None:
        return False
    try:
        return ledger.rid.type.python_type is int
    except NotImplementedError:
        return False


def _payload_cell(pl):
    if pl is None:
        return None
    if pl.encoding == "pickle":
        return f"pickled, not decoded ({pl.size} bytes)"
    if pl.encoding == "binary":
        return pl.value.hex() if isinstance(pl.value, (bytes, bytearray)) else pl.value
    return pl.value


def _attempts(ledger: Ledger, flt: Filter, now: datetime) -> ExportPlan:
    a = ledger.layout.attempts
    cols = [
        ColumnSpec("ledger", "text"),
        ColumnSpec("scope", "text"),
        ColumnSpec("idempotency_key", "text"),
        ColumnSpec("attempt", "integer"),
        ColumnSpec("started_at", "instant"),
        ColumnSpec("finished_at", "instant"),
        ColumnSpec("outcome", "text"),
        ColumnSpec("raw_outcome", "text"),
        ColumnSpec("effect_ref", "text"),
        ColumnSpec("worker", "text"),
        ColumnSpec("error", "text"),
    ]
    for i, k in ((4, "started_at"), (5, "finished_at")):
        tc = getattr(a, k, None)
        if tc is not None and tc.encoding == "naive":
            cols[i] = ColumnSpec(k, "naive_instant")

    if a.source == "table":
        return ExportPlan(cols, _attempt_table_rows(ledger, flt, now, cols), "every attempt of the filtered operations")
    if a.source == "json_array":
        return ExportPlan(
            cols, _attempt_json_rows(ledger, flt, now), "every attempt (from the JSON array) of the filtered operations"
        )
    return ExportPlan(cols, iter(()), "this ledger records no individual attempts (counter only)")


def _attempt_table_rows(ledger: Ledger, flt: Filter, now: datetime, cols: list[ColumnSpec]):
    """Rows of :func:`_attempts` from an attempts table (``cols``: its columns, naive times marked)."""
    att = ledger.att
    assert att is not None  # a.source == "table": the ledger reflected it
    q = ledger.attempts_select()
    tcols = [c.label(f"t_{k}") for k, (c, _tc) in ledger.att_time.items()]
    q = select(
        ledger.att_scope_expr.label("scope"),
        ledger.att_key_expr.label("key"),
        ledger.att_number_raw.label("number"),
        ledger.att_outcome.label("outcome"),
        ledger.att_raw_outcome.label("raw_outcome"),
        ledger.att_effect.label("effect_ref"),
        ledger.att_worker.label("worker"),
        ledger.att_error.label("error"),
        *tcols,
    ).where(ledger.att_where)
    clause = ledger.filter_clause(flt, now) if not flt.is_empty() else None
    if clause is not None or ledger.att_needs_join:
        q = q.select_from(att.join(ledger.ops, ledger.att_join))
        if clause is not None:
            q = q.where(clause)
    else:
        q = q.select_from(att)
    tdefs = list(ledger.att_time.items())
    tcs = [tc for _k, (_c, tc) in tdefs]
    pos = {k: 8 + i for i, (k, _v) in enumerate(tdefs)}
    i_st, i_fi = pos.get("started_at"), pos.get("finished_at")
    tc_st = tcs[i_st - 8] if i_st is not None else None
    tc_fi = tcs[i_fi - 8] if i_fi is not None else None
    naive_st, naive_fi = cols[4].kind == "naive_instant", cols[5].kind == "naive_instant"
    name = ledger.name
    bytes_types = (bytes, bytearray, memoryview)
    with ledger.engine.connect() as c:
        # Positional access: this loop runs once per exported row. Column 7 is the error text.
        for r in stream_rows(c, q, [7]):
            # tc_st is None exactly when i_st is (and tc_st is a.started_at: ledger.att_time)
            st = decode_time(r[i_st], tc_st) if tc_st is not None else None
            fi = decode_time(r[i_fi], tc_fi) if tc_fi is not None else None
            if naive_st and st is not None and tc_st is not None:
                st = st.astimezone(ZoneInfo(tc_st.zone)).replace(tzinfo=None)
            if naive_fi and fi is not None and tc_fi is not None:
                fi = fi.astimezone(ZoneInfo(tc_fi.zone)).replace(tzinfo=None)
            err = r[7]
            if isinstance(err, bytes_types):
                err = bytes(err).decode("utf-8", "replace")
            yield (name, r[0], r[1], r[2], st, fi, r[3], r[4], r[5], r[6], err)


def _attempt_json_rows(ledger: Ledger, flt: Filter, now: datetime):
    """Rows of :func:`_attempts` from the operations' JSON array of attempts."""
    a = ledger.layout.attempts
    assert a.column is not None  # a.source == "json_array": the layout names the column
    col = ledger.ops.c[a.column]
    q = (
        select(ledger.scope_expr.label("scope"), ledger.key_expr.label("key"), col.label("arr"))
        .select_from(ledger.ops)
        .where(ledger.filter_clause(flt, now))
    )
    with ledger.engine.connect() as c:
        for r in stream_rows(c, q, [2]):
            for at in json_array_attempts([r.arr], r.scope or "", r.key, a):
                yield (
                    ledger.name,
                    at.scope,
                    at.key,
                    at.number,
                    at.started_at,
                    at.finished_at,
                    at.outcome.value,
                    at.raw_outcome,
                    at.effect_ref,
                    at.worker,
                    at.error,
                )


def _findings(ledger: Ledger, flt: Filter, now: datetime) -> ExportPlan:
    cols = [
        ColumnSpec("ledger", "text"),
        ColumnSpec("kind", "text"),
        ColumnSpec("severity", "text"),
        ColumnSpec("action", "text"),
        ColumnSpec("scope", "text"),
        ColumnSpec("idempotency_key", "text"),
        ColumnSpec("at", "instant"),
        ColumnSpec("explanation", "text"),
        ColumnSpec("evidence", "json"),
    ]
    kinds = flt.findings or None
    rest = flt.without(findings=True)

    def rows():
        fs = FindingEngine(ledger, now).run(kinds)
        allowed = None
        if not rest.is_empty():
            # Findings of the operations the rest of the filter shows: the keys come from SQL.
            q = (
                select(ledger.scope_expr.label("scope"), ledger.key_expr.label("key"))
                .select_from(ledger.ops)
                .where(ledger.filter_clause(rest, now))
                .distinct()
            )
            with ledger.engine.connect() as c:
                allowed = {(r.scope or "", r.key) for r in c.execute(q)}
        for f in fs:
            if allowed is not None and (f.scope, f.key) not in allowed:
                continue
            yield (
                ledger.name,
                f.kind.value,
                f.severity.value,
                f.action,
                f.scope,
                f.key,
                f.at,
                f.explanation,
                f.evidence,
            )

    return ExportPlan(cols, rows(), "the findings of the filtered operations")


def _effects(ledger: Ledger, flt: Filter, now: datetime) -> ExportPlan:
    """The effect records of the filtered operations: the operations' links are streamed from the
    ledger and looked up in the effect table a batch of links at a time (memory holds one batch)."""
    fx = ledger.effects
    if fx is None:
        raise InputError(f"this ledger has no effect records to export: {ledger.effects_problem}")
    from idemview.ledger.effects import LINK_BATCH

    cols = [
        ColumnSpec("ledger", "text"),
        ColumnSpec("scope", "text"),
        ColumnSpec("idempotency_key", "text"),
        ColumnSpec("link", "text"),
        ColumnSpec("effect_record", "text"),
        ColumnSpec("reference", "text"),
        ColumnSpec("at", "instant"),
    ]
    cols += [ColumnSpec(c, "text") for c in fx.spec.show]

    def rows():
        q = (
            select(ledger.scope_expr.label("scope"), ledger.key_expr.label("key"), fx.operation_link.label("link"))
            .select_from(ledger.ops)
            .where(ledger.filter_clause(flt, now), fx.operation_link.is_not(None))
            .distinct()
        )

        def flush(batch):
            recs = fx.records_for({x[2] for x in batch})
            for scope, key, link in batch:
                for e in recs.get(link, []):
                    yield (
                        ledger.name,
                        scope,
                        key,
                        link,
                        e.record_id,
                        e.reference,
                        e.at,
                        *[e.shown.get(c) for c in fx.spec.show],
                    )

        batch: list = []
        with ledger.engine.connect() as c:
            for r in c.execution_options(stream_results=True, yield_per=STREAM_BATCH).execute(q):
                batch.append((r.scope or "", r.key, r.link))
                if len(batch) >= LINK_BATCH:
                    yield from flush(batch)
                    batch = []
        if batch:
            yield from flush(batch)

    src = fx.describe()
    return ExportPlan(
        cols,
        rows(),
        f"the effect records ({src['table']}, {src['dialect']}"
        f"{' ' + src['database'] if src['database'] else ''}) of the filtered operations",
    )


def plan_export(ledger: Ledger, flt: Filter, rows: str, now: datetime) -> ExportPlan:
    """Columns and streamed rows for ``rows`` in :data:`ROW_KINDS`. Raises ``ValueError`` otherwise."""
    if rows == "operations":
        return _operations(ledger, flt, now)
    if rows == "attempts":
        return _attempts(ledger, flt, now)
    if rows == "findings":
        return _findings(ledger, flt, now)
    if rows == "effects":
        return _effects(ledger, flt, now)
    raise ValueError(f"rows must be one of {', '.join(ROW_KINDS)}, not {rows!r}")


def check_target(out_path: str | Path, ledger: Ledger | None = None, *, overwrite: bool = False) -> Path:
    """Refuse an export target that would lose something: the ledger file itself (a SQLite ledger is a
    file too), a path that exists and is not a regular file (a device, FIFO, folder), an existing file
    unless ``overwrite``, or a folder that does not exist. Returns the resolved path; raises
    :class:`~idemview.errors.TargetExists` or :class:`~idemview.errors.TargetRefused` (both
    ``ValueError``) with a one-line reason."""
    out = Path(out_path).expanduser()
    manifest = Path(str(out) + ".manifest.json")
    if not out.parent.is_dir():
        raise TargetRefused(f"the folder {out.parent} does not exist")
    if ledger is not None and ledger.dialect == "sqlite" and ledger.engine.url.database:
        db = Path(ledger.engine.url.database).resolve()
        for p in (out, manifest):
            if p.resolve() == db:
                raise TargetRefused(f"{p} is the ledger being read; choose another file")
    # The one write gate (idemview.paths): never a ledger, effects database, layout or the saved
    # connections, --force or not; every refusal before "replace it?" (TargetExists).
    return check_write_target(out, overwrite=overwrite, also=(manifest,))


#: What the manifest says about the key behind the masked tags (``export_evidence(masking_key=...)``).
MASKING_KEYS = {
    "export": {
        "scope": "export",
        "note": "a random key made for this export alone: its tags match no other export and no screen",
    },
    "session": {
        "scope": "session",
        "note": "the key of the idemview window this export was started from: its tags match the tags on that screen",
    },
}


_GC_LOCK = threading.Lock()
_GC_USERS = 0
_GC_SAVED: tuple[int, ...] | None = None
#: Allocations between young-generation collections while an export runs. An export allocates
#: millions of short-lived rows and cells that reference counting frees; the collector's default
#: (700) ran every few rows and cost about a fifth of the export's time (issue 11). Only cyclic
#: garbage waits longer; the other generations' settings are kept.
EXPORT_GC_THRESHOLD = 20000


@contextmanager
def _fewer_collections():
    """Raise the collector's first threshold for the duration (process-wide; restored when the last
    concurrent export ends)."""
    global _GC_USERS, _GC_SAVED
    with _GC_LOCK:
        if _GC_USERS == 0:
            _GC_SAVED = gc.get_threshold()
            if _GC_SAVED[0] and _GC_SAVED[0] < EXPORT_GC_THRESHOLD:
                gc.set_threshold(EXPORT_GC_THRESHOLD, *_GC_SAVED[1:])
        _GC_USERS += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_USERS -= 1
            if _GC_USERS == 0 and _GC_SAVED is not None:
                if gc.get_threshold()[0] == EXPORT_GC_THRESHOLD:  # unless someone changed it meanwhile
                    gc.set_threshold(*_GC_SAVED)
                _GC_SAVED = None


def ledger_description(ledger: Ledger, connection_name: str | None = None) -> dict[str, Any]:
    """The ledger as a manifest (and the incident report) names it: ``connection`` (the saved
    connection's name, else the ledger's), ``dialect``, ``host``, ``database`` (never a user name or
    password; the writer drops such fields again). A Redis ledger is read from its snapshot: then the
    snapshot's own description (Redis, the snapshot instant, the server's TIME, the key pattern)."""
    ident = ledger.source.identity or describe(ledger.engine)
    return {"connection": connection_name or ledger.name, **ident}


def export_evidence(
    ledger: Ledger,
    flt: Filter | None,
    out_path: str | Path,
    *,
    rows: str = "operations",
    now: datetime | None = None,
    excel: bool = False,
    null_literal: str = "",
    connection_name: str | None = None,
    masker: Masker | None = None,
    progress: Callable[[int], Any] | None = None,
    cancel: Callable[[], bool] | None = None,
    overwrite: bool = False,
    masking_key: str = "export",
    sentence_shown: str | None = None,
    timeout_s: float | None = None,
) -> ExportResult:
    """Export what ``flt`` shows of ``ledger`` to ``out_path`` (CSV) plus its manifest.

    ``now`` (aware; default the current time) is the instant findings are computed for and is
    recorded in the manifest. ``masker`` defaults to a fresh one (a new random key per export).
    ``masking_key`` says whose key the tags come from and is recorded: ``"export"`` (a key made for
    this export, the CLI's) or ``"session"`` (the GUI window's, so tags match the screen).
    ``sentence_shown``: the filter sentence in the zone the GUI showed (recorded beside the UTC one).
    ``progress(rows_written)`` and ``cancel()`` are polled while streaming. Raises
    :class:`~idemview.evidence.writer.ExportCancelled` on cancel, ``ValueError`` for a target
    :func:`check_target` refuses (an existing file needs ``overwrite``); database errors propagate; in
    every failure no file is left under the final name.

    An export is batch work, not an interactive query: the ledger's interactive statement timeout
    does not cut it (issue 11); ``timeout_s`` seconds bound each statement instead (``None``: no bound;
    ``cancel`` and Ctrl-C still stop it)."""
    check_target(out_path, ledger, overwrite=overwrite)
    ledger = for_batch(ledger, timeout_s)
    flt = flt or Filter()
    now = (now or datetime.now(UTC)).astimezone(UTC)
    masker = masker or new_masker()
    with _fewer_collections():
        plan = plan_export(ledger, flt, rows, now)
        manifest = {
            "ledger": ledger_description(ledger, connection_name),
            "layout": {
                "name": ledger.layout.name,
                "sha256": ledger.layout.hash,
                # which tables were read (a schema may hold a second copy), and the user's extra raw
                # values (--map-status, a connection's status_map): not in the layout text the hash covers
                **_tables_read(ledger),
                **({"extra_values": ledger.layout.extra_values} if any(ledger.layout.extra_values.values()) else {}),
            },
            "filter": {
                "structured": flt.to_dict(),
                "sentence": flt.sentence(),
                **({"sentence_shown": sentence_shown} if sentence_shown else {}),
            },
            "now": iso(now),
            "masking_key": MASKING_KEYS[masking_key],
            "rows": {"kind": rows, "description": plan.description},
        }
        if ledger.effects is not None:
            # the second source the findings (and an effects export) were reconciled with
            manifest["effects"] = ledger.effects.describe()
        return write_evidence(
            out_path,
            plan.columns,
            plan.rows,
            masker=masker,
            manifest=manifest,
            excel=excel,
            null_literal=null_literal,
            progress=progress,
            cancel=cancel,
            overwrite=overwrite,
        )
