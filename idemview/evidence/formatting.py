"""Cell formatting of evidence CSV (DESIGN §7): mask, format per column kind, guard formulas.

Split out of :mod:`idemview.evidence.writer` (issue 25 item 6). Every cell goes through
``masker.mask_value(value, column_name)`` (or the Masker's precomputed ``for_column``) before it is
formatted; the shortcuts here (memo per distinct value, plain ints and datetimes, texts the masker proves
unchanged) each give the same text as that per-cell path (tests/evidence/test_masking_fast_path.py).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal
from operator import attrgetter
from typing import Any
from uuid import UUID

from idemview.domain.model import Payload
from idemview.evidence import cells
from idemview.evidence.pages import PagedCell, format_paged
from idemview.masking.masker import Masker
from idemview.masking.stream import JsonText, mask_json_text

COLUMN_KINDS = ("text", "integer", "number", "instant", "naive_instant", "boolean", "json")
# The formula starters and the guard live in cells.py (reversible; issue 19, items 15-16).
FORMULA_STARTERS = cells.FORMULA_STARTERS
# A plain number: sign, digits, decimal point, exponent. Spreadsheets read it as a number, never as a
# formula, so it is written unchanged (OWASP CSV injection concerns text that starts a formula:
# "-1+2", "+A1", "=1" stay guarded).
_NUMERIC_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INT_TEXT_RE = re.compile(r"[+-]?\d+")


@dataclass(frozen=True)
class ColumnSpec:
    """One CSV column: its header ``name`` and how cells are written (``kind``):

    ``text`` (masked text), ``integer`` (exact), ``number`` (int/Decimal exact, float shortest
    round-trip repr), ``instant`` (aware datetime → ISO-8601 in UTC with ``+00:00``),
    ``naive_instant`` (naive datetime → ISO-8601 without offset), ``boolean`` (``true``/``false``),
    ``json`` (dict/list → compact JSON after masking; a bare JSON number such as ``-7`` is a
    number, not a formula, and is not prefixed). Raises ``ValueError`` on an unknown kind.
    ``description``: what the column holds, for a reader of the evidence (in the manifest when given).
    """

    name: str
    kind: str = "text"
    description: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ValueError(f"column name must be text, not {self.name!r}")
        if self.kind not in COLUMN_KINDS:
            raise ValueError(f"column {self.name!r}: unknown kind {self.kind!r} (one of {COLUMN_KINDS})")


def guard_formula(s: str) -> str:
    """OWASP CSV-injection guard: prefix ``'`` to text starting with ``= + - @`` TAB CR or NUL (or
    ``'``), unless the whole text is a plain number (``-42``, ``+15``, ``-1250.5``, ``1e-5``, ``-.5``),
    which no spreadsheet evaluates as a formula; ``-1+2``, ``+A1``, ``=1`` are guarded. A formula start
    after ``;``, CR or LF inside the text gets a ``'`` too. Undone exactly by
    :func:`idemview.evidence.cells.decode` (see that module)."""
    return cells.encode(s)


class _Bare(str):
    """A cell the CSV writer leaves unquoted under ``QUOTE_NONNUMERIC`` (it counts as a number: the
    ``__float__`` slot): NULL, integers and plain numbers. Quoted anyway if it holds a delimiter."""

    __slots__ = ()

    def __float__(self) -> float:  # pragma: no cover - never called; its presence is the point
        return float("nan")


class _BareColumn(list):  # type: ignore[type-arg]
    """A column's cells (``list[str]``) every one written bare, none holding a delimiter, quote, CR or
    LF: ``str(int)``, digits-first ISO-8601 and a NULL cell without those characters. The mark is on
    the column, not on each cell (a :class:`_Bare` object per cell cost ~0.14 µs; issue 27 item 2).
    :func:`bare_cell` gives a cell of either kind as the per-cell path marks it."""

    __slots__ = ()


def bare_cell(col: Sequence[str], i: int) -> str:
    """Cell ``i`` of a formatted column as the per-cell path gives it: a :class:`_Bare` when its
    column is a :class:`_BareColumn`, else the cell as it is."""
    c = col[i]
    return _Bare(c) if type(col) is _BareColumn else c


def _decode_bytes(b: bytes | bytearray | memoryview) -> str:
    """Bytes in a text column: UTF-8 text if it decodes, else ``0x`` + hex (nothing is lost)."""
    raw = bytes(b)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + raw.hex()


def _iso(v: datetime | date | time) -> str:
    """Aware datetime → ISO-8601 in UTC with ``+00:00``; naive or date/time → as is (no offset
    invented)."""
    tz = getattr(v, "tzinfo", None)
    if tz is None or tz is UTC or not isinstance(v, datetime):
        return v.isoformat()
    if v.utcoffset() is None:
        return v.isoformat()
    return v.astimezone(UTC).isoformat()


def _json_default(o: Any) -> Any:
    if isinstance(o, (datetime, date, time)):
        return _iso(o)
    if isinstance(o, (Decimal, UUID)):
        return str(o)
    if isinstance(o, (bytes, bytearray, memoryview)):
        return _decode_bytes(o)
    if isinstance(o, enum.Enum):
        return o.value
    if isinstance(o, (set, frozenset)):
        return sorted(o, key=str)
    if isinstance(o, Payload):
        return _payload_plain(o)
    if hasattr(o, "to_dict"):
        return o.to_dict()
    return str(o)


def _payload_plain(p: Payload) -> Any:
    if p.encoding == "pickle" and p.value is None:
        return f"pickled, not decoded ({p.size} bytes)" if p.size is not None else "pickled, not decoded"
    return p.value


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_json_default)
_dumps = _ENCODER.encode


def _as_text(v: Any) -> str:
    """Text form of an (already masked) value."""
    if type(v) is str:
        return v
    if isinstance(v, str):
        return str(v.value) if isinstance(v, enum.Enum) else str(v)
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, (datetime, date, time)):
        return _iso(v)
    if isinstance(v, (dict, list, tuple)):
        return _dumps(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, enum.Enum):
        return str(v.value)
    return str(v)


@dataclass(frozen=True)
class _Cell:
    """What every kind's formatter of one column needs, worked out once (:func:`_make_formatter`)."""

    mask: Callable[[Any], Any]  # masker.mask_value(v, name), or its precomputed for_column(name)
    enc: Callable[[str], str]  # a non-NULL text cell: guarded, and told apart from the NULL literal
    null: str  # the NULL cell
    plain: bool  # the column is not sensitive by name: ints and datetimes pass the masker unchanged
    streamable: bool  # a real Masker on a plain column: large JSON cells may be masked as a stream
    masker: Masker


_BYTES_TYPES = (bytes, bytearray, memoryview)


def _pre(v: Any) -> Any:
    """Bytes and payloads become what a person would read before masking sees them."""
    if isinstance(v, _BYTES_TYPES):
        return _decode_bytes(v)
    if isinstance(v, Payload):
        return _payload_plain(v)
    return v


def _make_formatter(col: ColumnSpec, masker: Masker, null: str) -> Callable[[Any], str]:
    """One closure per column: mask, then format, then guard. Specialised per kind for speed.
    Masking is ``masker.mask_value(v, name)`` (or its precomputed equivalent ``for_column``)."""
    name = col.name
    codec = cells.CellCodec(null)
    for_column = getattr(masker, "for_column", None)
    mask = for_column(name) if for_column is not None else (lambda v: masker.mask_value(v, name))
    # Columns not sensitive by name pass ints and datetimes through unchanged (mask_value's rule),
    # so the formatter may skip the call for those exact types. Unknown maskers: always call.
    column_kind = getattr(masker, "column_kind", None)
    plain = column_kind is not None and column_kind(name) is None
    # The stream masker is the Masker's own walk: only for a real Masker, on a column not sensitive by name.
    ctx = _Cell(mask, codec.text, codec.null_cell, plain, plain and isinstance(masker, Masker), masker)
    if col.kind in ("instant", "naive_instant"):
        return _instant_formatter(ctx, col.kind)
    return _FORMATTERS[col.kind](ctx)


def _text_formatter(ctx: _Cell) -> Callable[[Any], str]:
    mask, enc, null = ctx.mask, ctx.enc, ctx.null

    def fmt(v: Any) -> str:
        if v is None:
            return null
        if type(v) is str:
            s = mask(v)
        else:
            if type(v) is PagedCell:  # a cell read in pages (evidence/pages.py): masked as it is written
                return _paged(ctx, v, fmt, False)
            v = _pre(v)
            if v is None:
                return null
            s = mask(v)
        if type(s) is not str:
            s = _as_text(s)
        return enc(s)

    return fmt


def _integer_formatter(ctx: _Cell) -> Callable[[Any], str]:
    mask, enc, null, plain = ctx.mask, ctx.enc, ctx.null, ctx.plain

    def fmt(v: Any) -> str:
        if v is None:
            return null
        if type(v) is int:
            if plain:
                return str(v)
            m = mask(v)
        else:
            m = mask(_pre(v))
        t = type(m)
        if t is int:
            return str(m)
        if m is True or m is False:
            return "1" if m else "0"
        if t is Decimal or isinstance(m, Decimal):
            if m.is_finite() and m == m.to_integral_value():
                return str(int(m))
            return enc(str(m))
        if isinstance(m, int):
            return str(int(m))
        if isinstance(m, float):
            # A float cannot hold a long id exactly; say so by writing its exact repr.
            if m.is_integer() and abs(m) < 2**53:
                return str(int(m))
            return enc(repr(m))
        s = _as_text(m)
        if _INT_TEXT_RE.fullmatch(s.strip()):
            return s.strip().lstrip("+")
        return enc(s)

    return fmt


def _number_formatter(ctx: _Cell) -> Callable[[Any], str]:
    mask, enc, null = ctx.mask, ctx.enc, ctx.null

    def fmt(v: Any) -> str:
        if v is None:
            return null
        m = mask(_pre(v))
        if m is True or m is False:
            return "1" if m else "0"
        if isinstance(m, float):
            return enc(repr(m))
        if isinstance(m, (int, Decimal)):
            return enc(str(m))
        s = _as_text(m)
        return s if _NUMERIC_RE.fullmatch(s) else enc(s)

    return fmt


def _instant_formatter(ctx: _Cell, kind: str) -> Callable[[Any], str]:
    mask, enc, null, plain = ctx.mask, ctx.enc, ctx.null, ctx.plain

    def fmt(v: Any) -> str:
        if v is None:
            return null
        if type(v) is datetime:
            if plain:
                tz = v.tzinfo
                if tz is None:
                    return v.isoformat()
                if tz is UTC and kind == "instant":
                    return v.isoformat()
            m = mask(v)
        else:
            m = mask(_pre(v))
        if isinstance(m, (datetime, date, time)):
            if kind == "naive_instant" and isinstance(m, datetime) and m.tzinfo is not None:
                return m.isoformat()  # keep the offset it has; do not convert
            return _iso(m)
        return enc(_as_text(m))

    return fmt


def _boolean_formatter(ctx: _Cell) -> Callable[[Any], str]:
    mask, enc, null = ctx.mask, ctx.enc, ctx.null

    def fmt(v: Any) -> str:
        if v is None:
            return null
        m = mask(_pre(v))
        if m is True or m is False:
            return "true" if m else "false"
        if type(m) is int and m in (0, 1):
            return "true" if m else "false"
        return enc(_as_text(m))

    return fmt


def _json_formatter(ctx: _Cell) -> Callable[[Any], str]:
    mask, enc, null, streamable, masker = ctx.mask, ctx.enc, ctx.null, ctx.streamable, ctx.masker

    def fmt_json(v: Any) -> str:
        if v is None:
            return null
        if type(v) is PagedCell:  # a cell read in pages (evidence/pages.py): masked as it is written
            return _paged(ctx, v, fmt_json, True)
        if type(v) is JsonText:
            # a large JSON cell masked as a stream, never parsed whole (issue 27); same text as below
            s = mask_json_text(masker, v.text, _dumps) if streamable else None
            if s is not None:
                return enc(s)
            v = v.fallback()
            if v is None:
                return null
        if type(v) is not dict:
            v = _pre(v)
            if v is None:
                return null
        m = mask(v)
        if isinstance(m, str):
            return enc(m)
        return enc(_dumps(m))

    return fmt_json


def _paged(ctx: _Cell, v: PagedCell, fmt: Callable[[Any], str], json_kind: bool) -> str:
    """A paged cell as a :class:`~idemview.evidence.pages.CellStream` (the writer writes it piece by
    piece), or, when the masker cannot stream it (not a real Masker, or a column sensitive by name),
    ``fmt`` of its whole value."""
    if not ctx.streamable:
        return fmt(v.value())
    mask = ctx.mask

    def unguarded(x: Any) -> str:  # the JSON formatter's text of a whole value, before the guard
        m = mask(x if type(x) is dict else _pre(x))
        return m if isinstance(m, str) else _dumps(m)

    return format_paged(v, ctx.masker, json_kind, _dumps, unguarded, fmt)  # type: ignore[return-value]


_FORMATTERS: dict[str, Callable[[_Cell], Callable[[Any], str]]] = {
    "text": _text_formatter,
    "integer": _integer_formatter,
    "number": _number_formatter,
    "boolean": _boolean_formatter,
    "json": _json_formatter,
}


_NONE_TYPE = type(None)
_SHAREABLE = frozenset({"integer", "number", "boolean", "instant", "naive_instant"})
_STR_OR_NONE = frozenset({str, _NONE_TYPE})
_STR_ONLY = frozenset({str})
_NONE_ONLY = frozenset({_NONE_TYPE})
_TZINFO = attrgetter("tzinfo")
_INT_OR_NONE = frozenset({int, _NONE_TYPE})
_DATETIME_OR_NONE = frozenset({datetime, _NONE_TYPE})


class _Memo(dict):
    """Formatted text of each distinct value of one column in one chunk, computed once. Tags are keyed
    per Masker (one per export or session), so equal values give equal text and reusing it is exact.
    A value whose formatting masked something is remembered with what it masked (kind → values), and
    each reuse adds that to the Masker's counts (``add``): the export's masking counts stay one per
    cell, as if every cell had been formatted. ``counts()`` is a copy of the Masker's counts."""

    __slots__ = ("fn", "total", "counts", "add", "snap", "snap_total")

    def __init__(
        self,
        fn: Callable[[Any], str],
        total: Callable[[], int],
        counts: Callable[[], dict[str, int]] | None = None,
        add: Callable[[Mapping[str, int]], None] | None = None,
    ) -> None:
        super().__init__()
        self.fn, self.total, self.counts, self.add = fn, total, counts, add
        self.snap: dict[str, int] | None = None
        self.snap_total = -1

    def __missing__(self, v: Any) -> str:
        before = self.total()
        out = self.fn(v)
        after = self.total()
        if after == before:
            self[v] = out
            return out
        if self.counts is None or self.add is None:
            return out  # cannot replay the counts: format such a value again each time
        now = self.counts()
        snap = self.snap if self.snap is not None and self.snap_total == before else None
        self.snap, self.snap_total = now, after
        if snap is not None:  # else no snapshot from just before this call: not remembered this time
            delta = {k: n - snap.get(k, 0) for k, n in now.items() if n != snap.get(k, 0)}
            dict.__setitem__(self, v, _Counted(out, delta))
        return out

    def begin(self) -> _Memo:
        """Take the counts snapshot the first masking miss is measured against; returns ``self``."""
        if self.counts is not None:
            self.snap, self.snap_total = self.counts(), self.total()
        return self

    def get_text(self, v: Any) -> str:
        """The formatted text of ``v`` (counted again when its formatting masked something)."""
        out = self[v]
        if type(out) is _Counted:
            d = out.delta
            self.add(d)  # type: ignore[misc]
            snap = self.snap
            if snap is not None:  # the snapshot moves with the counts, so it stays comparable
                for k, n in d.items():
                    snap[k] = snap.get(k, 0) + n
                self.snap_total += sum(d.values())
            return out.text
        return out


def _per_distinct(values: Sequence[Any], distinct: dict, memo: _Memo, total: Callable[[], int]) -> list[str]:
    """``list(map(memo.get_text, values))``, formatting each distinct value once and then mapping the
    cells through a dict (no Python call per cell). Where formatting a value masked something, each
    later occurrence is counted again through ``memo.get_text`` (as the per-cell path counts it), so
    the masking counts stay one per cell; the texts are the memo's either way."""
    t0 = total()
    get = memo.get_text
    for v in distinct:
        distinct[v] = get(v)
    out = list(map(distinct.__getitem__, values))
    if total() != t0:  # rare: a masked value in a repeated column; count its other cells
        seen: set = set()
        for v in values:
            if v in seen:
                get(v)
            else:
                seen.add(v)
    return out


class _Counted:
    """A memoised output whose formatting masked ``delta`` (kind → values)."""

    __slots__ = ("text", "delta")

    def __init__(self, text: str, delta: dict[str, int]) -> None:
        self.text, self.delta = text, delta


#: A typed cell (integer, number, boolean, instant) that is safe unquoted in any locale: a plain number,
#: ``true``/``false``, or digits-first ISO-8601 (no ``;``, quote or line break that could start a cell).
_SAFE_BARE_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|true|false|\d[\dT:.+\-Z ]*")


def _bare_cells(col: ColumnSpec, null: str) -> Callable[[list[str]], list[str]]:
    """A column's formatted cells with those written unquoted marked :class:`_Bare`: the NULL cell, and
    in typed columns (integer, number, boolean, instants) the cells in the kind's own form. Text and
    JSON cells are always quoted, as is a masked tag in a typed column."""
    null_cell = cells.CellCodec(null).null_cell
    bare_null = _Bare(null_cell)
    if col.kind in ("integer", "number", "boolean", "instant", "naive_instant"):
        safe = _SAFE_BARE_RE.fullmatch

        def typed(out: list[str]) -> list[str]:
            return [bare_null if c == null_cell else _Bare(c) if safe(c) else c for c in out]

        return typed

    def texts(out: list[str]) -> list[str]:
        if null_cell in out:
            return [bare_null if c == null_cell else c for c in out]
        return out

    return texts


def _make_column_formatter(col: ColumnSpec, masker: Masker, null: str) -> Callable[[Sequence[Any]], list[str]]:
    """One function per column, chosen once: the column's values of a chunk → their CSV texts, equal
    to ``[fmt(v) for v in values]`` with ``fmt`` from :func:`_make_formatter`. Shortcuts, each giving
    the same text: repeated ``str``/``int`` values are formatted once per chunk (only when the masker
    can tell whether formatting masked something, see :class:`_Memo`); plain ints and naive or UTC
    datetimes of columns not sensitive by name skip the masker (it passes them through unchanged)."""
    fmt = _make_formatter(col, masker, null)
    null_text = null  # a text equal to the literal is not "unchanged": it is told apart from NULL
    null = cells.CellCodec(null).null_cell
    total = getattr(masker, "count_total", None)
    add = getattr(masker, "add_counts", None)
    counts = (lambda: masker.counts) if add is not None else None
    column_kind = getattr(masker, "column_kind", None)
    plain = column_kind is not None and column_kind(col.name) is None
    kind = col.kind
    utc = UTC
    # Texts the masker proves it leaves unchanged (unique ids, hex) are written as they are: they
    # start with a hex digit, never with a formula character, so the guard leaves them too.
    check = getattr(masker, "unchanged_check", None)
    unchanged = check() if check is not None and plain and kind == "text" else None
    # ...and a chunk of UUIDs is proven so by one pass over the chunk, not one call per text
    chunk_check = getattr(masker, "unchanged_chunk_check", None)
    unchanged_chunk = chunk_check() if chunk_check is not None and unchanged is not None else None
    none_cell: list[str] = []  # fmt(None), computed once: a column chunk of NULLs only

    # Long because: one branch per proven shortcut, each with the reason it gives fmt's text.
    def vec(values: Sequence[Any]) -> list[str]:
        types = set(map(type, values))
        if types == _NONE_ONLY:  # nothing to mask in NULL: the same cell, without a call per cell
            if not none_cell:
                none_cell.append(fmt(None))
            return [none_cell[0]] * len(values)
        if plain:
            if kind == "integer" and types <= _INT_OR_NONE:
                if _NONE_TYPE in types:
                    return [null if v is None else str(v) for v in values]
                return list(map(str, values))
            if kind in ("instant", "naive_instant") and types <= _DATETIME_OR_NONE:
                return [
                    null
                    if v is None
                    else v.isoformat()
                    if v.tzinfo is None or v.tzinfo is utc  # what fmt writes for these, unmasked
                    else fmt(v)
                    for v in values
                ]
        if total is not None and (types <= _STR_OR_NONE or types <= _INT_OR_NONE):
            n = len(values)
            if n < 4:
                return list(map(_Memo(fmt, total, counts, add).begin().get_text, values))
            distinct = dict.fromkeys(values)
            if len(distinct) * 2 <= n:  # repeated values: format each one once
                return _per_distinct(values, distinct, _Memo(fmt, total, counts, add).begin(), total)
            if unchanged_chunk is not None and types == _STR_ONLY and null_text not in distinct:
                todo = unchanged_chunk(values)  # type: ignore[arg-type]
                if todo is not None:
                    out = list(values)
                    for i in todo:  # not proven by the chunk: the per-text proof, else the formatter
                        v = values[i]
                        out[i] = v if unchanged(v) else fmt(v)  # type: ignore[misc]
                    return out
            if unchanged is not None and str in types:
                return [
                    v if v is not None and type(v) is str and v != null_text and unchanged(v) else fmt(v)
                    for v in values
                ]
        return list(map(fmt, values))

    return vec


def _make_column_cells(col: ColumnSpec, masker: Masker, null: str) -> Callable[[Sequence[Any]], list[str]]:
    """The writer's per-column function: a chunk's values → their CSV cells, equal to
    ``_bare_cells(col, null)(_make_column_formatter(col, masker, null)(values))``.

    Shortcut, same cells: in integer and instant columns not sensitive by name, a chunk of plain
    ``int`` (or naive / UTC ``datetime``) values and NULLs is written without the masker (it passes
    them through unchanged) and marked bare without the ``_SAFE_BARE_RE`` test: ``str(int)`` is a
    plain number and ``isoformat()`` of those datetimes is digits-first ISO-8601, which the test
    always accepts (issue 27 item 2: these were 0.3–2.7 µs a cell)."""
    vec = _make_column_formatter(col, masker, null)
    bare = _bare_cells(col, null)
    column_kind = getattr(masker, "column_kind", None)
    plain = column_kind is not None and column_kind(col.name) is None
    kind = col.kind
    if not plain or kind not in ("integer", "instant", "naive_instant"):
        return lambda values: bare(vec(values))
    null_cell = cells.CellCodec(null).null_cell
    bare_null = _Bare(null_cell)
    # the NULL cell in a _BareColumn: only one the csv module writes bare too (the whole column is
    # then written without a look at its cells); else each cell is marked as before
    null_safe = re.search('[,"\r\n]', null_cell) is None
    bare_str = _Bare
    utc = UTC

    def integers(values: Sequence[Any]) -> list[str]:
        types = set(map(type, values))
        if not types <= _INT_OR_NONE:
            return bare(vec(values))
        if _NONE_TYPE in types:
            if null_safe:
                return _BareColumn([null_cell if v is None else str(v) for v in values])
            return [bare_null if v is None else bare_str(str(v)) for v in values]
        return _BareColumn(map(str, values))

    def instants(values: Sequence[Any]) -> list[str]:
        types = set(map(type, values))
        if not types <= _DATETIME_OR_NONE:
            return bare(vec(values))
        if _NONE_TYPE not in types and all(z is None or z is utc for z in set(map(_TZINFO, values))):
            return _BareColumn(map(datetime.isoformat, values))  # no Python call per cell
        for v in values:
            if v is not None and v.tzinfo is not None and v.tzinfo is not utc:
                return bare(vec(values))  # an offset to convert: the formatter's own path
        if null_safe:
            return _BareColumn([null_cell if v is None else v.isoformat() for v in values])
        return [bare_null if v is None else bare_str(v.isoformat()) for v in values]

    return integers if kind == "integer" else instants
