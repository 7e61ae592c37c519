"""Decoding and mapping one Redis value (a key-value layout's per-key work).

:func:`decode_value` turns a raw value (``GET`` bytes or an ``HGETALL`` dict) into what the layout
reads: a dict for ``json``/``hash`` values, text for ``plain``. :func:`map_record` is the layout's field
mapping written plainly (the reference a test compares against); :func:`compile_layout` is the same
mapping compiled once per layout into closures, which the snapshots (Redis and DynamoDB) run per key:
no walk over the layout's configuration, no per-field dispatch and no intermediate dict per key. Times
become the reference tables' naive UTC text (:func:`sql_time`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from operator import methodcaller
from typing import Any

from idemview.domain import jsontext
from idemview.domain.model import Status
from idemview.layouts.kv import KvLayout


def _word(x) -> str:
    # a hash field name that is not bytes, as text (client._word's rule; not imported from there, so
    # that the snapshot's worker process does not load the connection code and SQLAlchemy: ~20 MB)
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x).decode("latin-1")
    return str(x)


def decode_value(kv: KvLayout, raw) -> Any:
    """The value as the layout reads it: a dict for ``json``/``hash``, text for ``plain``; ``None``
    when it cannot be decoded (counted as undecodable)."""
    if raw is None:
        return None
    if raw.__class__ is dict and kv.encoding == "json":  # a [members] record, built by redis_kv.members
        return raw
    if kv.encoding == "hash":
        if not isinstance(raw, dict):
            return None
        out = {
            _word(k) if not isinstance(k, (bytes, bytearray)) else bytes(k).decode("utf-8", "replace"): bytes(v).decode(
                "utf-8", "replace"
            )
            if isinstance(v, (bytes, bytearray))
            else v
            for k, v in raw.items()
        }
        if kv.protobuf_field is not None:  # a protobuf message, read from its raw bytes (Asynq's msg)
            _protobuf_field(kv, raw, out)
        return out
    if kv.encoding == "json" and _orjson is not None and isinstance(raw, bytes):
        try:  # straight from the bytes (the common case)
            v = jsontext.loads(raw, _orjson.loads)
            return v if isinstance(v, dict) else None
        except jsontext.JSONTooDeep:
            return None  # counted undecodable, the rest of the snapshot is read
        except _orjson.JSONDecodeError:
            pass  # not UTF-8, NaN...: decoded leniently below
    text = bytes(raw).decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else str(raw)
    if kv.encoding == "plain":
        return text
    try:
        v = _loads(text)
    except ValueError:
        return None
    return v if isinstance(v, dict) else None


def _protobuf_field(kv: KvLayout, raw: dict, out: dict) -> None:
    """``out[field]`` = the declared fields of the protobuf message in the raw hash field (``[protobuf]``),
    or ``{"unreadable": why}``; nothing is executed (idemview.ledger.redis_kv.protobuf)."""
    from idemview.ledger.redis_kv.protobuf import decode_message

    name = kv.protobuf_field or ""
    v = raw.get(name.encode("utf-8"), raw.get(name))
    if v is None and name not in out:
        return  # no such field: the record simply lacks it
    out[name] = decode_message(v, kv.protobuf_fields)


_orjson: Any
try:  # orjson: the snapshot's JSON work (a parse and three encodings per key) several times faster
    import orjson as _orjson
except ImportError:  # pragma: no cover - a dependency; stdlib json gives the same results
    _orjson = None
_SORTED = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str).encode


def _loads(text):
    if _orjson is not None:
        try:
            return jsontext.loads(text, _orjson.loads)
        except jsontext.JSONTooDeep:
            raise
        except _orjson.JSONDecodeError:
            pass  # orjson is stricter (NaN, lone surrogates): the stdlib decides
    return jsontext.loads(text)


def _dumps_sorted(v) -> str:
    """Canonical JSON text (sorted keys, UTF-8 kept) of a decoded value."""
    if _orjson is not None:
        try:
            return _orjson.dumps(v, option=_orjson.OPT_SORT_KEYS | _orjson.OPT_NON_STR_KEYS, default=str).decode(
                "utf-8"
            )
        except (TypeError, _orjson.JSONEncodeError):
            pass  # e.g. an integer beyond 64 bits: the stdlib writes it
    return _SORTED(v)


def _text(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, (dict, list)):
        return _dumps_sorted(v)
    return str(v)


def _canonical_hash(values: list) -> str | None:
    if all(v is None for v in values):
        return None
    return hashlib.sha256(_dumps_sorted(values).encode("utf-8")).hexdigest()[:32]


def sql_time(v, enc: str) -> str | None:
    """A stored time (``iso_text``, ``epoch_s``, ``epoch_ms``, ``epoch_s_or_ms``) as the reference tables keep it: naive
    UTC text ``YYYY-MM-DD HH:MM:SS.ffffff``. ``None`` when missing or unparsable (shown as missing,
    never invented). Naive ISO text is taken as UTC. Runs several times per key: C parsers only."""
    if v is None or v == "":
        return None
    try:
        if enc == "iso_text":
            if not isinstance(v, str):
                v = v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else str(v)
            if v[-1:] in ("Z", "z"):
                v = v[:-1] + "+00:00"
            t = datetime.fromisoformat(v.strip())
            if t.tzinfo is not None:
                if t.utcoffset():
                    t = t.astimezone(UTC)
                t = t.replace(tzinfo=None)
        else:
            x = float(v)
            ms = enc == "epoch_ms" or (enc == "epoch_s_or_ms" and abs(x) >= 1e11)  # see KV_TIME_ENCODINGS
            t = datetime.fromtimestamp(x / 1000.0 if ms else x, UTC).replace(tzinfo=None)
        return t.isoformat(" ", "microseconds")
    except (ValueError, OverflowError, OSError, TypeError, AttributeError):
        return None


_PLANS: dict[int, tuple] = {}


def _plan(kv: KvLayout) -> list[tuple]:
    """The field mapping of ``kv`` compiled once: (name, action, source, encoding, add) tuples."""
    hit = _PLANS.get(id(kv))
    if hit is not None and hit[0] is kv:
        return hit[1]
    plan: list[tuple[str, str, Any, str | None, int]] = []
    for name, f in kv.fields.items():
        if f.hash_of:
            plan.append((name, "hash", f.hash_of, None, 0))
        elif f.gather:
            plan.append((name, "gather", f.fields, f.encoding, 0))
        elif name in _TIME_NAMES:
            plan.append((name, "time", _src(f), f.encoding or "iso_text", 0))
        elif name == "attempt_count":
            plan.append((name, "int", _src(f), None, f.add))
        elif name in ("request", "response", "error"):
            plan.append((name, "json" if f.encoding == "json" else "text", _src(f), None, 0))
        else:
            plan.append((name, "text", _src(f), None, 0))
    _PLANS[id(kv)] = (kv, plan)
    return plan


def map_record(kv: KvLayout, value: Any) -> dict[str, Any]:
    """Normalized fields of one decoded value: times as the reference tables' naive UTC text (see
    :func:`sql_time`), payloads as text (JSON text for ``json`` payloads), ``attempt_count`` as int
    (or None). Runs once per key: the mapping is compiled once per layout (:func:`_plan`)."""
    out: dict[str, Any] = {}
    d = value if isinstance(value, dict) else {}
    get = kv.get
    seen_t: dict = {}
    for name, action, src, enc, add in _plan(kv):
        if action == "hash":
            empty = kv.fields[name].unless_empty
            no_intent = bool(empty) and all(_is_empty(get(d, n)) for n in empty)
            out[name] = None if no_intent else _canonical_hash([get(d, n) for n in src])
            continue
        if action == "gather":
            got = {n: get(d, n) for n in src}
            v = got if any(x is not None for x in got.values()) else None
            out[name] = None if v is None else _dumps_sorted(v) if enc == "json" else _text(v)
            continue
        v = get(d, src) if src.__class__ is str else next((x for n in src if (x := get(d, n)) is not None), None)
        if action == "time":
            k = (src, enc)
            if k not in seen_t:  # Celery's date_done feeds three times: parse it once
                seen_t[k] = sql_time(v, enc)
            out[name] = seen_t[k]
        elif action == "int":
            try:
                out[name] = int(v) + add if v is not None and v != "" else None
            except (TypeError, ValueError):
                out[name] = None
        elif action == "json":
            if v is None:
                out[name] = None
            elif isinstance(v, str):  # a hash field or a JSON-in-a-string response (Powertools data)
                try:
                    _loads(v)
                    out[name] = v
                except ValueError:
                    out[name] = json.dumps(v, ensure_ascii=False)
            else:
                out[name] = _dumps_sorted(v)
        else:
            out[name] = _text(v)
    return out


_TIME_NAMES = frozenset(("created_at", "updated_at", "completed_at", "locked_at", "lock_expires_at"))


# ------------------------------------------------------------------------- the compiled mapping

_fromisoformat = datetime.fromisoformat
_fromtimestamp = datetime.fromtimestamp
_COLUMN = {"fingerprint": "request_hash", "request": "request_body", "response": "response_body"}


def _iso_time(v) -> str | None:
    """:func:`sql_time` of ``iso_text``: text that ``fromisoformat`` reads as it is (Celery's
    ``date_done``) is parsed straight away; anything else goes the general way (same result)."""
    if v.__class__ is str:
        try:
            t = _fromisoformat(v)
        except ValueError:
            return sql_time(v, "iso_text")
        if t.tzinfo is not None:
            if t.utcoffset():
                t = t.astimezone(UTC)
            t = t.replace(tzinfo=None)
        return t.isoformat(" ", "microseconds")
    return sql_time(v, "iso_text")


def _getter(path: str) -> Callable[[dict], Any]:
    """``kv.get(d, path)`` for a decoded dict ``d`` as one call (a C call for a plain field name)."""
    if "." not in path:
        return methodcaller("get", path)
    parts = tuple(path.split("."))

    def walk(d: dict) -> Any:
        cur: Any = d
        for part in parts:
            if not isinstance(cur, dict) or part not in cur:
                return None
            cur = cur[part]
        return cur

    return walk


def _src(f) -> Any:
    """A field's source: its one value field, or the tuple of ``first_of`` names (the first present)."""
    return f.fields if f.first_of else f.fields[0]


def _field_getter(f) -> Callable[[dict], Any]:
    """The value of a :class:`~idemview.layouts.kv.KvField` in a decoded dict: its field, or the first
    of its ``first_of`` fields that is present and not null."""
    if not f.first_of:
        return _getter(f.fields[0])
    gets = tuple(_getter(n) for n in f.fields)

    def first(d: dict) -> Any:
        for g in gets:
            v = g(d)
            if v is not None:
                return v
        return None

    return first


def _text_of(g: Callable[[dict], Any]) -> Callable[[dict], Any]:
    def f(d):
        v = g(d)
        return v if v.__class__ is str else _text(v)

    return f


def _int_of(g: Callable[[dict], Any], add: int) -> Callable[[dict], Any]:
    def f(d):
        v = g(d)
        try:
            return int(v) + add if v is not None and v != "" else None
        except (TypeError, ValueError):
            return None

    return f


def _json_of(g: Callable[[dict], Any]) -> Callable[[dict], Any]:
    def f(d):
        v = g(d)
        if v is None:
            return None
        if isinstance(v, str):  # a hash field or a JSON-in-a-string response (Powertools data)
            try:
                _loads(v)
                return v
            except ValueError:
                return json.dumps(v, ensure_ascii=False)
        return _dumps_sorted(v)

    return f


def _gather_of(names: tuple[str, ...]) -> Callable[[dict], Any]:
    gets = tuple((n, _getter(n)) for n in names)

    def f(d):
        got = {n: g(d) for n, g in gets}
        for x in got.values():
            if x is not None:
                return _dumps_sorted(got)  # json or text: the text of a dict is its canonical JSON
        return None

    return f


def _hash_of(names: tuple[str, ...]) -> Callable[[dict], Any]:
    gets = tuple(_getter(n) for n in names)
    sha = hashlib.sha256

    def f(d):
        vals = [g(d) for g in gets]
        for x in vals:
            if x is not None:
                return sha(_dumps_sorted_bytes(vals)).hexdigest()[:32]
        return None

    return f


def _is_empty(v: Any) -> bool:
    """Missing, null, "" or an empty list/object (a Celery task's ``args`` ``[]``, ``kwargs`` ``{}``)."""
    return v is None or v == "" or (isinstance(v, list | dict) and not v)


def _unless_empty(fn: Callable[[dict], Any], names: tuple[str, ...]) -> Callable[[dict], Any]:
    """``fn``, but ``None`` where every field of ``names`` is empty (see ``KvField.unless_empty``)."""
    gets = tuple(_getter(n) for n in names)

    def f(d):
        if all(_is_empty(g(d)) for g in gets):
            return None
        return fn(d)

    return f


def _dumps_sorted_bytes(v) -> bytes:
    """:func:`_dumps_sorted` as UTF-8 bytes (for a hash: no decode and encode again)."""
    if _orjson is not None:
        try:
            return _orjson.dumps(v, option=_orjson.OPT_SORT_KEYS | _orjson.OPT_NON_STR_KEYS, default=str)
        except (TypeError, _orjson.JSONEncodeError):
            pass  # e.g. an integer beyond 64 bits: the stdlib writes it
    return _SORTED(v).encode("utf-8")


@dataclass(frozen=True)
class CompiledLayout:
    """A key-value layout's per-key mapping, compiled once (:func:`compile_layout`).

    For a decoded value ``value`` and ``d`` (``value`` when it is a dict, else ``{}``):
    ``values(d)`` lists the mapped ``operations`` columns named by ``columns``, in that order;
    ``kind(d)`` is the kind the value names (``None`` when the layout maps none); ``status(value)``
    the raw status; ``attempt(raw_status, d, kind, vals)`` the attempt row's columns from
    ``attempt_no`` to ``error`` (``None`` when the layout derives no attempt)."""

    columns: tuple[str, ...]
    values: Callable[[dict], list]
    kind: Callable[[dict], Any] | None
    status: Callable[[Any], str | None]
    attempt: Callable[[Any, dict, Any, list], tuple] | None
    #: indexes into ``values(d)`` of the time columns that take the write time read from the TTL when
    #: the record holds none (``[expiry] write_time_fields``)
    write_slots: tuple[int, ...] = ()


_COMPILED: dict[int, tuple[KvLayout, CompiledLayout]] = {}


def compile_layout(kv: KvLayout) -> CompiledLayout:
    """The mapping of :func:`map_record` (plus the raw status and the attempt) for ``kv`` as closures,
    built once per layout: the same results, a fraction of the per-key work."""
    hit = _COMPILED.get(id(kv))
    if hit is not None and hit[0] is kv:
        return hit[1]
    time_slot: dict[tuple[str, str], int] = {}  # (value field, encoding) -> slot: parsed once per key
    time_src: list[tuple[Callable, Callable]] = []
    cols: list[tuple[str, str, Any]] = []  # (normalized name, column, time slot or function of d)
    kind_fn = None
    for name, f in kv.fields.items():
        fn: Any
        if f.hash_of:
            fn = _hash_of(f.hash_of)
            if f.unless_empty:
                fn = _unless_empty(fn, f.unless_empty)
        elif f.gather:
            fn = _gather_of(f.fields)
        elif name in _TIME_NAMES:
            enc = f.encoding or "iso_text"
            k = (_src(f), enc)
            if k not in time_slot:
                time_slot[k] = len(time_src)
                parse = _iso_time if enc == "iso_text" else partial(sql_time, enc=enc)
                time_src.append((_field_getter(f), parse))
            fn = time_slot[k]
        elif name == "attempt_count":
            fn = _int_of(_field_getter(f), f.add)
        elif name in ("request", "response", "error") and f.encoding == "json":
            fn = _json_of(_field_getter(f))
        else:
            fn = _text_of(_field_getter(f))
        if name == "kind":
            kind_fn = fn
        else:
            cols.append((name, _COLUMN.get(name, name), fn))
    for name in kv.write_time_fields:  # a time the layout maps no field for: the write time only
        if name not in kv.fields:
            cols.append((name, name, _none))
    plan = tuple(fn for _n, _c, fn in cols)
    if time_src:
        srcs = tuple(time_src)
        steps = tuple((fn, -1) if callable(fn) else (None, fn) for fn in plan)

        def values(d):
            ts = [p(g(d)) for g, p in srcs]
            return [ts[s] if fn is None else fn(d) for fn, s in steps]

    else:

        def values(d):
            return [fn(d) for fn in plan]

    status = _compile_status(kv)
    attempt = _compile_attempt(kv, [n for n, _c, _f in cols], kind_fn) if kv.attempt else None
    if kv.group_field:  # the dedup id, loaded beside the record until redis_joins groups by it
        from idemview.ledger.redis_joins import GROUP_COLUMN

        gfn = _text_of(_getter(kv.group_field))
        if kv.holds:
            gfn = _holders_only(kv, gfn)
        values = partial(_and_group, values, gfn)
        cols.append(("", GROUP_COLUMN, gfn))
        if kv.limit_field:  # how many holders the dedup id admits (redis_joins._group compares)
            from idemview.ledger.redis_joins import LIMIT_COLUMN

            lfn = _limit_of(_getter(kv.limit_field))
            values = partial(_and_group, values, lfn)
            cols.append(("", LIMIT_COLUMN, lfn))
    slots = tuple(i for i, (n, _c, _f) in enumerate(cols) if n in kv.write_time_fields)
    out = CompiledLayout(tuple(c for _n, c, _f in cols), values, kind_fn, status, attempt, slots)
    if len(_COMPILED) >= 64:  # layouts edited and reopened in one session: keep it bounded
        _COMPILED.clear()
    _COMPILED[id(kv)] = (kv, out)
    return out


def _none(d: dict) -> None:
    return None


def _compile_status(kv: KvLayout) -> Callable[[Any], str | None]:
    """The raw status of a decoded value: the text itself (``plain``), the status field as text, or
    ``None`` (no status field, or a value that is not a dict)."""
    if kv.encoding == "plain":

        def status(value):
            return value if isinstance(value, str) else None

    elif kv.status_field is None:

        def status(value):
            return None

    else:
        sget = _getter(kv.status_field)

        def status(value):
            if not isinstance(value, dict):
                return None
            v = sget(value)
            return v if v is None or v.__class__ is str else str(v)

    return status


def _holders_only(kv: KvLayout, group: Callable[[dict], Any]) -> Callable[[dict], Any]:
    """``group``, but ``None`` for a record that does not hold its dedup id's lock: its raw state is not
    among ``kv.holds`` of its lock type (nor of ``"*"``). A record that holds none is keyed by itself,
    so what the system allows (a second ``while_executing`` job queued) groups with nothing."""
    lget = _getter(kv.lock_type_field or "")
    sget = _getter(kv.status_field or "")
    any_type = kv.holds.get("*", frozenset())
    holds = kv.holds

    def f(d):
        st = sget(d)
        lt = lget(d)
        if st in any_type or st in holds.get(lt if lt.__class__ is str else "", ()):
            return group(d)
        return None

    return f


def _limit_of(get: Callable[[dict], Any]) -> Callable[[dict], int | None]:
    """A holder limit as a positive int (``None``: absent, or not a positive whole number)."""

    def f(d):
        v = get(d)
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        return v if v.__class__ is int and 0 < v < 2**31 else None

    return f


def _and_group(values, group, d):
    """The mapped values of ``d`` followed by its dedup id (``[duplicates] group_field``)."""
    out = values(d)
    out.append(group(d))
    return out


def _compile_attempt(kv: KvLayout, names: list[str], kind_fn) -> Callable[[Any, dict, Any, list], tuple]:
    """The attempt a record proves: (attempt_no, started_at, finished_at, outcome, request_hash,
    effect_ref, worker, error), from the raw status, ``d``, the value's kind and the mapped values."""
    idx = {n: i for i, n in enumerate(names)}
    outcome_of = {Status.COMPLETED: "succeeded", Status.FAILED: "failed", Status.IN_PROGRESS: "running"}
    by_raw: dict[Any, tuple[str, bool]] = {}

    def judged(raw):  # (outcome, failed) of a raw status: a handful of distinct ones
        hit = by_raw.get(raw)
        if hit is None:
            st = kv.status(raw)
            hit = by_raw[raw] = (outcome_of.get(st, "unknown"), st == Status.FAILED)
        return hit

    def when(which: str):
        src = kv.attempt.get(which)
        if src is None:
            return lambda d, kind, vals: None
        if src == "kind" and "kind" in kv.fields:
            return lambda d, kind, vals: kind
        if src in idx:
            i = idx[src]
            return lambda d, kind, vals: vals[i]
        g = _getter(src)
        return lambda d, kind, vals: sql_time(g(d), "iso_text")

    started, finished = when("started_at"), when("finished_at")
    i_n, i_fp, i_eff, i_err = (idx.get(n) for n in ("attempt_count", "fingerprint", "effect_ref", "error"))
    wget = _getter(kv.attempt["worker"]) if "worker" in kv.attempt else None

    def attempt(raw, d, kind, vals):
        outcome, failed = judged(raw)
        return (
            (vals[i_n] if i_n is not None else None) or 1,
            started(d, kind, vals),
            finished(d, kind, vals),
            outcome,
            vals[i_fp] if i_fp is not None else None,
            vals[i_eff] if i_eff is not None else None,
            _text(wget(d)) if wget is not None else None,
            vals[i_err] if failed and i_err is not None else None,
        )

    return attempt
