"""Redis ledgers (issue #15): a read-only snapshot of a keyspace, loaded into in-memory SQLite.

Why a snapshot in SQLite, not findings written for Redis
    Redis cannot group, join or compare across keys, so every finding would need its own client-side
    pass. Instead the keys a key-value layout (:mod:`idemview.layouts.kv`) selects are read once and
    loaded into an in-memory SQLite database in idemview's reference layout (``operations`` +
    ``attempts``, preset ``idemview``). The normal :class:`~idemview.ledger.reader.Ledger` then serves
    the grid, detail, search, findings and export unchanged: the same SQL, the same eight definitions.
    The database is a named shared-cache memory database (``file:…?mode=memory&cache=shared``), so the
    values (customer data) never touch the disk and the GUI's worker threads each get their own
    read-only connection (``PRAGMA query_only`` + an authorizer denying ATTACH); it lives as long as
    the engine holds its keeper connection.

A consistent snapshot, bounded
    ``SCAN`` with ``MATCH`` in batches (``COUNT``; never ``KEYS``, which blocks the server), and for each
    batch one pipeline of ``GET``/``HGETALL`` + ``PTTL`` per key. SCAN guarantees every key present for
    the whole scan is returned (possibly twice: the twin is dropped when the unique (scope, key) index
    is built, after the load); a key that expires between SCAN and GET is counted as gone. The next
    batch is read on a thread while this one is decoded and loaded (the socket wait releases the
    GIL). From :data:`WORKER_MIN_KEYS` keys the decoding and mapping run in a second process
    (:func:`_rows_in_worker`, which never talks to Redis) while this one reads and loads SQLite, so
    both cores work; the rows are the same. The layout's mapping is compiled once into closures
    (:func:`compile_layout`). Progress is reported per batch and a
    :class:`~idemview.services.cancel.CancelToken` stops it between batches. The server's own clock
    (``TIME``) is read before and after; ``expires_at`` = server time at the read + PTTL, so the TTL is
    exact whatever the local clock says, and the server time is shown beside ``now``.

Read-only by construction
    Every command idemview sends goes through one allowlist (:data:`ALLOWED`), enforced in the command
    packer of idemview's own connection classes (:class:`_ReadOnlyPacker`): single commands, pipelines
    and the connection handshake all pass through it, and anything else raises
    :class:`RedisWriteRefused` before a byte is sent. ``CLIENT SETINFO`` is switched off. On top, the
    server is asked whether the connection's user could write (``ACL WHOAMI`` + ``ACL DRYRUN <user>
    SET …``, Redis >= 7) and a warning is kept in :attr:`SnapshotInfo.write_warning`. (Reads still
    refresh the keys' LRU/LFU access clocks; Redis offers no read that does not.)

What a key-value store cannot show
    An expired Redis key is gone: ``expired_key`` and ``replay_after_expiry`` cannot be seen; a key
    holds one value, so ``duplicate_effect`` and ``key_conflict`` (two records or fingerprints under one
    key) cannot either. Those kinds, and those the layout maps no field for, are listed in
    ``ledger.not_checkable`` with the reason; the findings engine skips and reports them.
"""

from __future__ import annotations

import gc
import hashlib
import inspect as _inspect
import json
import pickle
import re
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from functools import partial
from operator import methodcaller
from typing import Any
from urllib.parse import quote, urlsplit

from idemview.domain import jsontext
from idemview.domain.model import FindingKind, Status
from idemview.layouts.kv import NOT_CHECKABLE, KvLayout, all_kv_presets, load_kv_layout
from idemview.layouts.layout import AttemptsSpec, Layout, LayoutError, StatusSource, load_preset
from idemview.ledger.connect import ConnectError, redact
from idemview.ledger.reader import Ledger

UTC = UTC
SCAN_COUNT = 1000  # keys per SCAN call (a hint to the server) and per pipeline
DETECT_SAMPLE = 500  # keys sampled by detection
DETECT_SCANS = 50  # at most this many SCAN calls while sampling

#: The only commands idemview sends to Redis (upper case; "ACL" only with the listed subcommands).
ALLOWED = frozenset(
    {
        "GET",
        "MGET",
        "HGETALL",
        "PTTL",
        "TYPE",
        "SCAN",
        "TIME",
        "PING",
        "INFO",
        "DBSIZE",
        "AUTH",
        "HELLO",
        "SELECT",
        "ECHO",
        "LRANGE",  # a job queue's state lists and sorted sets (redis_joins), read in pages
        "ZRANGE",
    }
)
ALLOWED_SUB = {"ACL": frozenset({"WHOAMI", "DRYRUN"})}
_FAST_OK = frozenset({"PTTL", "GET", "MGET", "HGETALL", "SCAN", "TIME"})


class RedisUrlError(ConnectError):
    """The URL is malformed (an input error, not a connection failure)."""


class RedisWriteRefused(RuntimeError):
    """A command outside :data:`ALLOWED` was about to be sent; nothing was sent."""


def _word(x) -> str:
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x).decode("latin-1")
    return str(x)


def check_command(args: tuple) -> None:
    """Raise :class:`RedisWriteRefused` unless ``args`` (a command as the client packs it) is allowed.

    The first argument may carry the subcommand after a space (``"ACL WHOAMI"``), as redis-py splits it."""
    if args and args[0] in _FAST_OK:  # the per-key commands, as redis-py passes them: no parsing
        return
    if not args:
        raise RedisWriteRefused("empty command")
    words = _word(args[0]).split() + [_word(a) for a in args[1:2]]
    name = words[0].upper() if words else ""
    if name in ALLOWED:
        return
    if name in ALLOWED_SUB and len(words) > 1 and words[1].upper() in ALLOWED_SUB[name]:
        return
    raise RedisWriteRefused(
        f"idemview refuses to send {name or '?'!r} to Redis: only read commands "
        f"({', '.join(sorted(ALLOWED))}, ACL WHOAMI/DRYRUN) are allowed"
    )


class _ReadOnlyPacker:
    """Wraps a connection's command packer: every command (single, pipelined, handshake) is checked
    against the allowlist before it is encoded. The one place the read-only rule is enforced."""

    def __init__(self, inner):
        self._inner = inner

    def pack(self, *args):
        check_command(args)
        return self._inner.pack(*args)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _connection_classes():
    import redis
    from redis.connection import Connection, SSLConnection

    class ReadOnlyConnection(Connection):
        def _construct_command_packer(self, packer):
            return _ReadOnlyPacker(super()._construct_command_packer(packer))

    class ReadOnlySSLConnection(SSLConnection):
        def _construct_command_packer(self, packer):
            return _ReadOnlyPacker(super()._construct_command_packer(packer))

    return redis, ReadOnlyConnection, ReadOnlySSLConnection


def is_redis_url(url) -> bool:
    """True for ``redis://`` and ``rediss://`` URLs (strings or SQLAlchemy URL objects)."""
    s = url if isinstance(url, str) else getattr(url, "drivername", "") + "://"
    return s.split("://", 1)[0].lower() in ("redis", "rediss") if "://" in s else False


def safe_redis_url(url: str) -> str:
    """``redis[s]://host:port/db`` without user name and password (for messages and manifests)."""
    try:
        p = urlsplit(url)
        host = p.hostname or "localhost"
        host = f"[{host}]" if ":" in host else host
        return f"{p.scheme}://{host}:{p.port or 6379}/{_db(p)}"
    except ValueError:
        return redact(url)


def _db(p) -> int:
    path = (p.path or "/").strip("/")
    if path:
        return int(path)
    m = re.search(r"(?:^|&)db=(\d+)", p.query or "")
    return int(m.group(1)) if m else 0


def redis_url_from_sqlalchemy(u) -> str:
    """A ``redis[s]://`` URL string from a SQLAlchemy :class:`URL` (saved connections build those),
    password included (for connecting only; never shown)."""
    scheme = (
        "rediss"
        if u.drivername.startswith("rediss") or str(u.query.get("ssl", "")).lower() in ("1", "true", "yes")
        else "redis"
    )
    auth = ""
    if u.username or u.password:
        auth = quote(u.username or "", safe="") + (":" + quote(u.password, safe="") if u.password else "") + "@"
    host = u.host or "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    q = "&".join(f"{k}={quote(str(v))}" for k, v in u.query.items() if k != "ssl")
    return f"{scheme}://{auth}{host}:{u.port or 6379}/{u.database or 0}" + (f"?{q}" if q else "")


def connect_redis(url: str, password: str | None = None, *, timeout_s: float = 10.0):
    """A read-only :class:`redis.Redis` client for ``url`` (``redis://[user[:pw]@]host[:port][/db]``,
    ``rediss://`` for TLS, with redis-py's ``ssl_*`` query options). ``password`` (e.g. from the
    keyring) replaces the URL's. Raises :class:`ConnectError` (bad URL, unreachable, auth refused)."""
    redis, RO, ROS = _connection_classes()
    from redis.connection import parse_url

    try:
        p = urlsplit(url)
        if p.scheme.lower() not in ("redis", "rediss"):
            raise ValueError("scheme")
        _db(p), p.port  # noqa: B018 - malformed db or port raise here
        opts = parse_url(url)
    except (ValueError, TypeError):
        raise RedisUrlError(
            f"not a Redis URL: {redact(url)!r} (expected redis://host:6379/0 or rediss://host:6380/0)"
        ) from None
    opts["connection_class"] = ROS if p.scheme.lower() == "rediss" else RO
    if password is not None:
        opts["password"] = password
    opts.setdefault("db", 0)
    # RESP2: no HELLO handshake and no maintenance-notification subscription (CLIENT ...), which are
    # not reads; idemview needs nothing RESP3 adds.
    kw: dict[str, Any] = dict(
        socket_timeout=timeout_s, socket_connect_timeout=timeout_s, decode_responses=False, protocol=2
    )
    # CLIENT SETINFO (sent on connect by redis-py >= 5) is not a read: switch it off.
    sig = _inspect.signature(redis.connection.AbstractConnection.__init__).parameters
    if "driver_info" in sig:
        kw["driver_info"] = None
    else:
        kw.update(lib_name=None, lib_version=None)
    pool = redis.ConnectionPool(**opts, **kw)
    client = redis.Redis(connection_pool=pool)
    try:
        client.ping()
    except redis.exceptions.AuthenticationError as e:
        pool.disconnect()
        raise ConnectError(
            f"cannot connect to {safe_redis_url(url)}: authentication refused ({redact(str(e))[:120]})"
        ) from None
    except (redis.exceptions.RedisError, OSError) as e:
        pool.disconnect()
        raise ConnectError(f"cannot connect to {safe_redis_url(url)}: {redact(str(e)).splitlines()[0][:200]}") from None
    return client


#: what the snapshot says when the Redis user may not run TIME (issue 20 §4)
LOCAL_CLOCK_NOTE = (
    "this Redis user may not run TIME: expiry times use idemview's local clock (grant +time to use the server's clock)"
)


def server_time(client) -> datetime:
    """The server's clock (``TIME``), aware UTC. A user refused ``TIME`` (an ACL without ``+time``,
    e.g. ``+@read``) gets idemview's local clock instead, and ``client._idem_local_clock`` is set so
    the snapshot says so (:data:`LOCAL_CLOCK_NOTE`) and its batches stop asking."""
    import redis

    if not getattr(client, "_idem_local_clock", False):
        try:
            s, us = client.time()
            return datetime.fromtimestamp(int(s) + int(us) / 1e6, UTC)
        except redis.exceptions.NoPermissionError:
            client._idem_local_clock = True
    return datetime.now(UTC)


#: every command a snapshot sends, with an argument shape that cannot change anything (TIME last: a
#: user without it is told, and the snapshot uses the local clock)
SNAPSHOT_COMMANDS = ("SCAN", "TYPE", "GET", "MGET", "HGETALL", "PTTL", "TIME")


def snapshot_permissions(client, kv: KvLayout | None = None) -> tuple[list[str], bool]:
    """(commands the snapshot needs that this Redis user may not run, whether ``TIME`` is refused):
    each of :data:`SNAPSHOT_COMMANDS` run once on a sampled (or absent) key. ``TIME`` refused is not
    fatal (the local clock is used, see :func:`server_time`); any other refused command is."""
    import redis

    key = b"idemview:permission-probe"
    try:
        _cur, keys = client.scan(0, match=(kv.match if kv is not None else "*"), count=10)
        key = keys[0] if keys else key
    except redis.exceptions.NoPermissionError:
        return ["SCAN"], False
    missing, no_time = [], False
    probes = {
        "TYPE": lambda: client.execute_command("TYPE", key),
        "GET": lambda: client.execute_command("GET", key),
        "MGET": lambda: client.execute_command("MGET", key),
        "HGETALL": lambda: client.execute_command("HGETALL", key),
        "PTTL": lambda: client.execute_command("PTTL", key),
        "TIME": lambda: client.execute_command("TIME"),
    }
    for name, run in probes.items():
        try:
            run()
        except redis.exceptions.NoPermissionError:
            if name == "TIME":
                no_time = True
            elif not (kv is not None and name in ("GET", "MGET", "HGETALL") and name not in _reads_of(kv)):
                missing.append(name)
        except redis.exceptions.ResponseError:  # WRONGTYPE on a sampled key: the command is allowed
            pass
    return missing, no_time


def _reads_of(kv: KvLayout) -> tuple[str, ...]:
    return ("HGETALL",) if kv.encoding == "hash" else ("GET", "MGET")


def write_rights(client) -> str | None:
    """A warning when this connection's Redis user could write, else ``None``.

    Asks ``ACL WHOAMI`` and ``ACL DRYRUN <user> SET`` / ``DEL`` (Redis >= 7). When the server cannot
    answer (Redis < 7, or the user may not run ACL: a sign it is restricted) the warning says the rights
    could not be checked."""
    import redis

    try:
        user = _word(client.execute_command("ACL WHOAMI"))
    except redis.exceptions.RedisError as e:
        return f"could not check whether this Redis user can write (ACL WHOAMI: {str(e)[:80]})"
    can = []
    for cmd in (("SET", "idemview:probe", "x"), ("DEL", "idemview:probe")):
        try:
            # OK when the user may run it; a sentence ("This user has no permissions ...") when not.
            r = client.execute_command("ACL DRYRUN", user, *cmd)
        except redis.exceptions.ResponseError as e:
            low = str(e).lower()
            if "unknown subcommand" in low or "unknown command" in low:
                return "could not check whether this Redis user can write (ACL DRYRUN needs Redis 7)"
            if "noperm" in low or "permission" in low:
                return (
                    f"could not verify that Redis user {user!r} is read-only (it may not run ACL DRYRUN; "
                    "a restricted user, probably)"
                )
            continue
        except redis.exceptions.RedisError:
            continue
        if _word(r).upper() == "OK":
            can.append(cmd[0])
    if can:
        return (
            f"Redis user {user!r} can write ({', '.join(can)} allowed): idemview sends only read "
            "commands, but a read-only ACL user is safer (see README, Redis ledgers)"
        )
    return None


# ------------------------------------------------------------------------------------ decoding


def decode_value(kv: KvLayout, raw) -> Any:
    """The value as the layout reads it: a dict for ``json``/``hash``, text for ``plain``; ``None``
    when it cannot be decoded (counted as undecodable)."""
    if raw is None:
        return None
    if kv.encoding == "hash":
        if not isinstance(raw, dict):
            return None
        return {
            _word(k) if not isinstance(k, (bytes, bytearray)) else bytes(k).decode("utf-8", "replace"): bytes(v).decode(
                "utf-8", "replace"
            )
            if isinstance(v, (bytes, bytearray))
            else v
            for k, v in raw.items()
        }
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
    """A stored time (``iso_text``, ``epoch_s``, ``epoch_ms``) as the reference tables keep it: naive
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
            t = datetime.fromtimestamp(x / 1000.0 if enc == "epoch_ms" else x, UTC).replace(tzinfo=None)
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
            plan.append((name, "time", f.fields[0], f.encoding or "iso_text", 0))
        elif name == "attempt_count":
            plan.append((name, "int", f.fields[0], None, f.add))
        elif name in ("request", "response", "error"):
            plan.append((name, "json" if f.encoding == "json" else "text", f.fields[0], None, 0))
        else:
            plan.append((name, "text", f.fields[0], None, 0))
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
        v = get(d, src)
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
#
# map_record above is the mapping written plainly (and the reference a test compares against); the
# snapshot runs the same mapping compiled once per layout into closures (compile_layout): no walk over
# the layout's configuration, no per-field dispatch and no intermediate dict per key.

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
            k = (f.fields[0], enc)
            if k not in time_slot:
                time_slot[k] = len(time_src)
                parse = _iso_time if enc == "iso_text" else partial(sql_time, enc=enc)
                time_src.append((_getter(f.fields[0]), parse))
            fn = time_slot[k]
        elif name == "attempt_count":
            fn = _int_of(_getter(f.fields[0]), f.add)
        elif name in ("request", "response", "error") and f.encoding == "json":
            fn = _json_of(_getter(f.fields[0]))
        else:
            fn = _text_of(_getter(f.fields[0]))
        if name == "kind":
            kind_fn = fn
        else:
            cols.append((name, _COLUMN.get(name, name), fn))
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

    status: Callable[[Any], str | None]
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

    attempt = _compile_attempt(kv, [n for n, _c, _f in cols], kind_fn) if kv.attempt else None
    if kv.group_field:  # the dedup id, loaded beside the record until redis_joins groups by it
        from idemview.ledger.redis_joins import GROUP_COLUMN

        gfn = _text_of(_getter(kv.group_field))
        values = partial(_and_group, values, gfn)
        cols.append(("", GROUP_COLUMN, gfn))
    out = CompiledLayout(tuple(c for _n, c, _f in cols), values, kind_fn, status, attempt)
    if len(_COMPILED) >= 64:  # layouts edited and reopened in one session: keep it bounded
        _COMPILED.clear()
    _COMPILED[id(kv)] = (kv, out)
    return out


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


# ---------------------------------------------------------------------------------- the snapshot


@dataclass
class SnapshotInfo:
    """What a snapshot read: where (``url`` without credentials, ``db``), the ``pattern`` (SCAN MATCH)
    and layout, when (``started_at``/``finished_at`` on idemview's clock, ``server_time`` = the
    server's ``TIME`` at the start, all UTC; ``clock_skew_s`` = server - local in seconds), and counts:
    ``scanned`` keys SCAN returned, ``loaded`` records, ``not_matching`` keys the key regex rejected,
    ``gone`` keys deleted or expired between SCAN and read, ``wrong_type``/``undecodable`` values."""

    url: str
    db: int
    pattern: str
    layout: str
    started_at: datetime
    finished_at: datetime | None = None
    server_time: datetime | None = None
    server_time_end: datetime | None = None
    clock_skew_s: float | None = None
    scanned: int = 0
    loaded: int = 0
    not_matching: int = 0
    gone: int = 0
    wrong_type: int = 0
    undecodable: int = 0
    without_ttl: int = 0
    redis_version: str = ""
    write_warning: str | None = None
    clock: str = "server"  # "local" when the Redis user may not run TIME (LOCAL_CLOCK_NOTE)
    #: counts of :func:`idemview.ledger.redis_joins.join_keys` (states, locks, dedup groups), if any
    joined: dict | None = None

    def to_json(self) -> dict:
        from idemview.ledger.times import iso

        d = asdict(self)
        for k in ("started_at", "finished_at", "server_time", "server_time_end"):
            d[k] = iso(getattr(self, k))
        return d


def snapshot_metadata():
    """The snapshot's tables: the reference ``idemview`` layout's ``operations`` and ``attempts``
    (:func:`idemview.ledger.reference.add_reference_tables`), with ``attempt_count`` nullable (a record
    may lack the count) and a unique (scope, key) index (SCAN may return a key twice)."""
    from sqlalchemy import MetaData

    from idemview.ledger.reference import add_reference_tables

    md = MetaData()
    add_reference_tables(md, snapshot=True)
    return md


def _ddl() -> tuple[list[str], list[str]]:
    """(CREATE TABLE statements, CREATE INDEX statements, the unique (scope, key) index first) of
    :func:`snapshot_metadata`; the indexes are built after the bulk load (one sort each instead of a
    B-tree insert per row)."""
    from sqlalchemy.dialects import sqlite as sqlite_dialect
    from sqlalchemy.schema import CreateIndex, CreateTable

    md = snapshot_metadata()
    first: list[str] = []
    later: list[str] = []
    d = sqlite_dialect.dialect()
    for name in ("operations", "attempts"):
        t = md.tables[name]
        first.append(str(CreateTable(t).compile(dialect=d)))
        for ix in sorted(t.indexes, key=lambda ix: (not ix.unique, str(ix.name))):
            later.append(str(CreateIndex(ix).compile(dialect=d)))
    return first, later


def _ro_authorizer(action, arg1, arg2, dbname, source):
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def memory_engine(uri: str, keeper: sqlite3.Connection):
    """A SQLAlchemy engine over the named shared-cache memory database ``uri``; each pooled connection
    is read-only (``query_only`` + ATTACH denied). The ``keeper`` connection keeps the database alive
    as long as the engine lives."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import QueuePool

    def creator():
        c = sqlite3.connect(uri, uri=True, check_same_thread=False)
        c.execute("PRAGMA query_only = ON")
        c.execute("PRAGMA temp_store = MEMORY")
        c.set_authorizer(_ro_authorizer)
        return c

    # QueuePool, not the SingletonThreadPool SQLAlchemy picks for a memory URL: that one closes a
    # thread's connection when more threads than its size have used it, under a running query.
    eng = create_engine("sqlite+pysqlite://", creator=creator, poolclass=QueuePool, pool_size=4, max_overflow=16)
    eng._idemview_keeper = keeper  # type: ignore[attr-defined]  # lifetime of the memory database
    return eng


def _scan_batches(client, pattern: str, count: int, token=None):
    cursor = 0
    while True:
        if token is not None:
            token.check()
        cursor, keys = client.scan(cursor=cursor, match=pattern, count=count)
        if keys:
            yield keys
        if int(cursor) == 0:
            return


def _read_batches(client, kv: KvLayout, read: str, batch: int, token):
    """(keys scanned, keys skipped, [(key, (scope, key, kind))], server time at the read (epoch s),
    values, PTTLs) per SCAN batch: one pipeline of MGET (or HGETALL per key) + PTTL per key."""
    for keys in _scan_batches(client, kv.match, batch, token):
        wanted = []
        for k in keys:
            parts = kv.split_key(bytes(k).decode("utf-8", "backslashreplace"))
            if parts is not None:
                wanted.append((k, parts))
        if not wanted:
            yield len(keys), len(keys), [], 0.0, [], []
            continue
        # Read time of this batch on the server's clock: PTTL is relative to it.
        pipe = client.pipeline(transaction=False)
        server_clock = not getattr(client, "_idem_local_clock", False)
        if server_clock:
            pipe.time()
        if read == "GET":  # one MGET per batch (a wrong-type key reads as nil there)
            pipe.execute_command("MGET", *[k for k, _p in wanted])
            for k, _parts in wanted:
                pipe.execute_command("PTTL", k)
        else:
            for k, _parts in wanted:
                pipe.execute_command(read, k)
                pipe.execute_command("PTTL", k)
        local_at = time.time()
        res = pipe.execute(raise_on_error=False)
        if not server_clock:  # a user refused TIME (see server_time): the local clock at the read
            res = [None, *res]
        if server_clock and isinstance(res[0], Exception):
            client._idem_local_clock = True
            at = local_at
        elif server_clock:
            now_s, now_us = res[0]
            at = int(now_s) + int(now_us) / 1e6
        else:
            at = local_at
        if read == "GET":
            values, pttls = res[1], res[2:]
        else:
            values, pttls = res[1::2], res[2::2]
        yield len(keys), len(keys) - len(wanted), wanted, at, values, pttls


def _prefetched(batches, token, depth: int = 2):
    """Iterate ``batches`` one step ahead on a thread: the next batch's SCAN and pipeline wait on
    Redis (the GIL is released on the socket) while this one is decoded and loaded. Errors and
    cancellation reach the consumer; leaving the loop early stops the reader."""
    import queue

    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def run():
        try:
            for item in batches:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(end)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
            q.put(e)

    th = threading.Thread(target=run, name="idemview-redis-read", daemon=True)
    th.start()
    try:
        while True:
            item = q.get()
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            if token is not None:
                token.check()
            yield item
    finally:
        stop.set()
        th.join(timeout=30)


#: What converting one record's values may raise (ValueError covers UnicodeError; ArithmeticError covers
#: OverflowError): that record is unreadable, the snapshot goes on.
_CONVERSION_ERRORS = (ValueError, TypeError, ArithmeticError)


class _Mapper:
    """Rows of the reference tables from read batches: ``batch(...)`` -> ``(counts, ops, atts)``, the
    ``operations`` and ``attempts`` rows (ids numbered from 1 in reading order, across batches) and
    ``counts`` = (scanned, not matching, gone, wrong type, undecodable, without TTL)."""

    def __init__(self, kv: KvLayout):
        import redis

        self.kv = kv
        self.comp = compile_layout(kv)
        self.rid = 0
        self.error_type = redis.exceptions.ResponseError

    def batch(self, n_scanned: int, n_skipped: int, parts: list, at: float, values: list, pttls: list):
        kv, ResponseError = self.kv, self.error_type
        values_of, kind_of, status_of, attempt_of = (
            self.comp.values,
            self.comp.kind,
            self.comp.status,
            self.comp.attempt,
        )
        hashed = kv.encoding == "hash"
        empty: dict = {}
        rid = self.rid
        gone = wrong_type = undecodable = without_ttl = 0
        ops: list[tuple] = []
        atts: list[tuple] = []
        for (scope, key, kind), raw, pttl in zip(parts, values, pttls, strict=True):
            if raw is None or raw == {} or pttl == -2 or isinstance(raw, ResponseError):
                if isinstance(raw, ResponseError):
                    wrong_type += 1
                elif not hashed and raw is None and isinstance(pttl, int) and pttl != -2:
                    wrong_type += 1  # MGET reads a key of another type as nil; it exists
                else:
                    gone += 1
                continue
            # One record's values, converted as a whole: a value no conversion can take (Infinity
            # retries, a time beyond year 9999 once in UTC...) makes this record unreadable, counted,
            # never the snapshot (issue 19, item 12). The try costs nothing when nothing is raised.
            try:
                value = decode_value(kv, raw)
                if value is None:
                    undecodable += 1
                    continue
                d = value if isinstance(value, dict) else empty
                vals = values_of(d)
                raw_status = status_of(value)
                vkind = kind_of(d) if kind_of is not None else None
                att = attempt_of(raw_status, d, vkind, vals) if attempt_of is not None else None
            except _CONVERSION_ERRORS:
                undecodable += 1
                continue
            if pttl.__class__ is int and pttl >= 0:
                expires = _fromtimestamp(at + pttl / 1000.0, UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
            else:
                expires = None
                without_ttl += 1
            rid += 1
            ops.append((rid, scope, key, vkind or kind, raw_status if raw_status is not None else "", expires, *vals))
            if att is not None:
                atts.append((rid, scope, key, *att))
        self.rid = rid
        return (n_scanned, n_skipped, gone, wrong_type, undecodable, without_ttl), ops, atts


def _reads(client, kv: KvLayout, batch: int, token):
    """``(keys scanned, keys skipped, [(scope, key, kind)], read time, values, PTTLs)`` per SCAN batch."""
    read = "HGETALL" if kv.encoding == "hash" else "GET"
    for n_scanned, n_skipped, wanted, at, values, pttls in _read_batches(client, kv, read, batch, token):
        yield n_scanned, n_skipped, [p for _k, p in wanted], at, values, pttls


def _rows(client, kv: KvLayout, batch: int, token):
    """:meth:`_Mapper.batch` of every batch, in this process; the next batch read on a thread
    (:func:`_prefetched`) while this one is mapped and loaded."""
    m = _Mapper(kv)
    for item in _prefetched(_reads(client, kv, batch, token), token):
        yield m.batch(*item)


#: The database size (DBSIZE) from which the snapshot maps keys in a second process by default: measured
#: to shorten the snapshot at 1M keys, to lengthen it at 100k and 200k (the process's start, the pickling).
WORKER_MIN_KEYS = 500_000


def _dbsize(client) -> int:
    import redis

    try:
        return int(client.dbsize())
    except redis.exceptions.RedisError:
        return 0


def _send(out, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(len(data).to_bytes(8, "little"))
    out.write(data)
    out.flush()


def _recv(inp):
    head = inp.read(8)
    if len(head) < 8:
        raise EOFError
    n = int.from_bytes(head, "little")
    data = inp.read(n)
    if len(data) < n:
        raise EOFError
    return pickle.loads(data)  # noqa: S301 - between idemview and its own worker process


def _worker_main() -> None:
    """The second process of a snapshot (``python -c``, see :func:`_rows_in_worker`): reads the layout,
    then read batches from stdin and writes :meth:`_Mapper.batch` of each to stdout, until ``None``
    (answered with ``None``); an error is written instead and ends it. It never talks to Redis."""
    gc.disable()  # as in the parent's load: no reference cycles are made
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the pipe
    try:
        m = _Mapper(_recv(inp))
        while (item := _recv(inp)) is not None:
            _send(out, m.batch(*item))
        _send(out, None)
    except BaseException as e:  # noqa: BLE001 - handed to the parent, raised there
        try:
            _send(out, e)
        except Exception:  # noqa: BLE001 - an exception that does not pickle: its words
            _send(out, RuntimeError(f"{type(e).__name__}: {e}"))


def _rows_in_worker(client, kv: KvLayout, batch: int, token):
    """:func:`_rows` with the decoding and mapping in a second process: a thread here reads the
    batches from Redis and hands them to the process through its stdin, the rows come back through
    its stdout while this thread loads them (pipes: at most a few batches in flight, the memory stays
    bounded). The process is a fresh interpreter running :func:`_worker_main`, not multiprocessing
    (which would import the caller's ``__main__`` again; fork is unsafe beside Qt's threads). The token
    is checked between batches; leaving early (cancel, an error) kills the process."""
    import os
    import subprocess

    import idemview

    root = os.path.dirname(os.path.dirname(os.path.abspath(idemview.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen(
        [sys.executable, "-c", "from idemview.ledger.redis_snapshot import _worker_main; _worker_main()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    to_worker, from_worker = proc.stdin, proc.stdout
    failed: list[BaseException] = []
    stop = threading.Event()

    def feed():
        try:
            _send(to_worker, kv)
            for item in _reads(client, kv, batch, None):
                if stop.is_set():
                    return
                _send(to_worker, item)
            _send(to_worker, None)
        except BaseException as e:  # noqa: BLE001 - a Redis error: raised by the consumer
            failed.append(e)
        finally:
            try:
                to_worker.close()  # the worker sees the end: it answers None, or stops
            except OSError:
                pass

    feeder = threading.Thread(target=feed, name="idemview-redis-read", daemon=True)
    feeder.start()
    done = False
    try:
        while True:
            if token is not None:
                token.check()
            try:
                item = _recv(from_worker)
            except EOFError:
                done = True
                if failed:
                    raise failed[0] from None
                raise RuntimeError(
                    f"the Redis snapshot's worker process ended unexpectedly (exit code {proc.poll()})"
                ) from None
            if item is None or isinstance(item, BaseException):
                done = True
                feeder.join()
                if failed:  # the reading failed (the worker saw a truncated stream)
                    raise failed[0]
                if item is None:
                    return
                raise item
            yield item
    finally:
        stop.set()
        if not done:
            proc.kill()  # left early: stopped (a blocked feeder write fails and ends it)
        from_worker.close()
        feeder.join(timeout=30)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _load(keeper: sqlite3.Connection, op_sql: str, att_sql: str, ops: list[tuple], atts: list[tuple]) -> int:
    """Insert one batch's ``operations`` and ``attempts`` rows; returns how many records SQLite could not
    take (an integer beyond 64 bits, a lone surrogate in a text): those are dropped with their attempt
    and counted unreadable by the caller. The bulk insert is tried first; only a batch that fails is
    loaded again row by row (after removing what the failed bulk insert had written: ids are this
    batch's own)."""
    try:
        keeper.executemany(op_sql, ops)
        if atts:
            keeper.executemany(att_sql, atts)
        return 0
    except (*_CONVERSION_ERRORS, sqlite3.InterfaceError, sqlite3.DataError):
        pass
    lo, hi = ops[0][0], ops[-1][0]
    keeper.execute("DELETE FROM attempts WHERE id BETWEEN ? AND ?", (lo, hi))
    keeper.execute("DELETE FROM operations WHERE id BETWEEN ? AND ?", (lo, hi))
    att_of = {a[0]: a for a in atts}
    bad = 0
    for op in ops:
        a = att_of.get(op[0])
        try:
            keeper.execute(op_sql, op)
        except (*_CONVERSION_ERRORS, sqlite3.InterfaceError, sqlite3.DataError):
            bad += 1
            continue
        if a is not None:
            try:
                keeper.execute(att_sql, a)
            except (*_CONVERSION_ERRORS, sqlite3.InterfaceError, sqlite3.DataError):
                keeper.execute("DELETE FROM operations WHERE id = ?", (op[0],))
                bad += 1
    return bad


def snapshot(
    client,
    kv: KvLayout,
    *,
    url: str = "",
    batch: int = SCAN_COUNT,
    progress: Callable[[int, int], Any] | None = None,
    token=None,
    check_rights: bool = True,
    worker: bool | None = None,
):
    """Read every key of ``kv`` into a fresh in-memory SQLite database in the reference layout.

    Returns ``(engine, info)``: a read-only SQLAlchemy engine and a :class:`SnapshotInfo`.
    ``progress(scanned, loaded)`` is called after each batch; ``token`` (a
    :class:`~idemview.services.cancel.CancelToken`) is checked between batches and raises
    :class:`~idemview.services.cancel.Cancelled`. Redis errors propagate as ``redis.RedisError``.

    ``worker``: decode and map the values in a second process while this one reads Redis and loads
    SQLite, so two cores work; ``None`` (default) does so when the database holds at least
    :data:`WORKER_MIN_KEYS` keys. The rows are the same either way."""
    import redis

    info = SnapshotInfo(
        url=safe_redis_url(url) if url else "",
        db=int(client.connection_pool.connection_kwargs.get("db") or 0),
        pattern=kv.match,
        layout=kv.name,
        started_at=datetime.now(UTC),
    )
    try:
        info.redis_version = str((client.info("server") or {}).get("redis_version", ""))
    except redis.exceptions.RedisError:
        pass  # INFO may be denied to a restricted user: the version is only informative
    if check_rights:
        info.write_warning = write_rights(client)
    uri = f"file:idemview-redis-{uuid.uuid4().hex}?mode=memory&cache=shared"
    keeper = sqlite3.connect(uri, uri=True, check_same_thread=False)
    # A fresh memory database that nobody else sees until it is complete: no rollback journal, one
    # transaction for the whole load (a cancel or error discards the database with the keeper).
    keeper.execute("PRAGMA journal_mode = OFF")
    keeper.execute("PRAGMA synchronous = OFF")
    tables, indexes = _ddl()
    for stmt in tables:
        keeper.execute(stmt)
    if kv.group_field:
        from idemview.ledger.redis_joins import GROUP_COLUMN

        keeper.execute(f"ALTER TABLE operations ADD COLUMN {GROUP_COLUMN} TEXT")
    t0 = server_time(client)
    info.server_time = t0
    info.clock_skew_s = round((t0 - datetime.now(UTC)).total_seconds(), 3)
    comp = compile_layout(kv)
    op_cols = ("id", "scope", "idempotency_key", "kind", "status", "expires_at", *comp.columns)
    # the columns the layout does not map stay NULL
    op_sql = f"INSERT INTO operations ({', '.join(op_cols)}) VALUES ({','.join('?' * len(op_cols))})"
    att_sql = (
        "INSERT INTO attempts (id, scope, idempotency_key, attempt_no, started_at, finished_at, "
        "outcome, request_hash, effect_ref, worker, error) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
    )
    if worker is None:  # a second process pays off on a large keyspace only (it starts in ~1 s)
        worker = not getattr(sys, "frozen", False) and _dbsize(client) >= WORKER_MIN_KEYS
    rows = _rows_in_worker(client, kv, batch, token) if worker else _rows(client, kv, batch, token)
    paused = gc.isenabled()
    gc.disable()  # see _rows: the load makes no reference cycles
    try:
        for counts, ops, atts in rows:
            info.scanned += counts[0]
            info.not_matching += counts[1]
            info.gone += counts[2]
            info.wrong_type += counts[3]
            info.undecodable += counts[4]
            info.without_ttl += counts[5]
            if ops:
                n_bad = _load(keeper, op_sql, att_sql, ops, atts)
                info.loaded += len(ops) - n_bad
                info.undecodable += n_bad
            if progress:
                progress(info.scanned, info.loaded)
        # SCAN may return a key twice: keep the first read (the lower id), drop the twin and its
        # attempt. The unique (scope, key) index is built after the load (a sort, not a B-tree insert
        # per row) in a statement of its own with a journal, so that a twin fails it cleanly.
        keeper.commit()
        keeper.execute("PRAGMA journal_mode = MEMORY")
        try:
            keeper.execute(indexes[0])
        except sqlite3.IntegrityError:
            cur = keeper.execute(
                "DELETE FROM operations WHERE id NOT IN "
                "(SELECT min(id) FROM operations GROUP BY scope, idempotency_key)"
            )
            info.loaded -= cur.rowcount
            keeper.execute("DELETE FROM attempts WHERE id NOT IN (SELECT id FROM operations)")
            keeper.execute(indexes[0])
        if kv.states or kv.lock_key or kv.group_field:  # the keys beside the records
            from idemview.ledger.redis_joins import join_keys

            info.joined = join_keys(client, keeper, kv, indexes[0], server_time, token)
        for stmt in indexes[1:]:
            keeper.execute(stmt)
        # Statistics let SQLite pick the key and intent indexes over the status index in the
        # findings' anti-joins (without them unresolved_failure took 27 s on 100k keys, not 0.1 s).
        keeper.execute("ANALYZE")
        keeper.commit()
        info.server_time_end = server_time(client)
        info.finished_at = datetime.now(UTC)
        if getattr(client, "_idem_local_clock", False):
            info.clock, info.clock_skew_s = "local", None
    except BaseException:
        keeper.close()
        raise
    finally:
        if paused:
            gc.enable()
    return memory_engine(uri, keeper), info


def snapshot_layout(kv: KvLayout) -> Layout:
    """The reference ``idemview`` layout narrowed to what ``kv`` maps, with its raw-status map, name,
    source text and tunables: the layout the snapshot's :class:`Ledger` reads."""
    ref = load_preset("idemview")
    times = {
        k: v
        for k, v in ref.times.items()
        if k in kv.fields or k == "expires_at" or (k == "lock_expires_at" and kv.lock_key)
    }
    fields = {k: v for k, v in ref.fields.items() if k in kv.fields}
    kind = ref.kind if ("kind" in kv.fields or "kind" in kv.key_regex.groupindex) else None
    att = ref.attempts if kv.attempt else AttemptsSpec(source="counter" if "attempt_count" in fields else "none")
    return replace(
        ref,
        name=kv.name,
        title=kv.title,
        description=kv.description,
        source=kv.source,
        status=StatusSource(column="status", map=dict(kv.status_map), default=kv.status_default),
        times=times,
        fields=fields,
        kind=kind,
        attempts=att,
        retention_seconds=None,
        lock_timeout_seconds=kv.lock_timeout_seconds,
        dedup_window_seconds=kv.dedup_window_seconds,
        retry_threshold=kv.retry_threshold,
        text=kv.text,
        origin=kv.origin,
    )


def not_checkable(kv: KvLayout) -> dict[FindingKind, str]:
    """Finding kinds this key-value layout cannot show, with the reason in plain words."""
    out = dict(NOT_CHECKABLE)
    K = FindingKind
    if kv.group_field:  # records sharing a dedup id are one key: two of them can both be completed
        out.pop(K.DUPLICATE_EFFECT, None)
    if "intent_ref" not in kv.fields:
        out[K.DUPLICATE_INTENT] = "the layout maps no intent reference"
    if (
        "lock_expires_at" not in kv.fields
        and not kv.lock_key
        and not ("locked_at" in kv.fields and kv.lock_timeout_seconds)
    ):
        out[K.STUCK_IN_PROGRESS] = "the records keep no lock time (and the layout sets no lock timeout)"
    if "attempt_count" not in kv.fields:
        out[K.RETRY_STORM] = "the records keep no attempt count"
    if "failed" not in kv.status_map.values() and kv.status_default != "failed":
        out[K.UNRESOLVED_FAILURE] = "the store keeps no failed records (a failure deletes the key)"
    return out


# ----------------------------------------------------------------------------------- detection


@dataclass
class KvMatch:
    """A key-value preset that fits a sample: ``confidence`` in [0, 1] and the reason in words."""

    layout: KvLayout
    confidence: float
    reason: str
    keys: int


def sample_keys(client, limit: int = DETECT_SAMPLE, scans: int = DETECT_SCANS) -> list[bytes]:
    """At most ``limit`` keys from at most ``scans`` SCAN calls (bounded on any keyspace size)."""
    out: list[bytes] = []
    cursor = 0
    for _ in range(scans):
        cursor, keys = client.scan(cursor=cursor, count=SCAN_COUNT)
        out.extend(keys)
        if int(cursor) == 0 or len(out) >= limit:
            break
    return out[:limit]


def detect_kv(client, presets: list[KvLayout] | None = None, sample: list[bytes] | None = None) -> list[KvMatch]:
    """Rank key-value presets by a bounded sample of keys: a preset fits when some sampled keys match
    its key pattern; its values (up to 20, read with the layout's command) must decode and carry the
    fields the preset's ``[detect]`` names. Best first; empty when nothing fits."""
    from fnmatch import fnmatchcase  # SCAN MATCH's glob, applied to the sample

    import redis

    keys = [
        bytes(k).decode("utf-8", "backslashreplace") for k in (sample if sample is not None else sample_keys(client))
    ]
    out = []
    for kv in presets if presets is not None else all_kv_presets():
        mine = [k for k in keys if fnmatchcase(k, kv.match) and kv.split_key(k) is not None]
        if not mine:
            continue
        probe = mine[:20]
        pipe = client.pipeline(transaction=False)
        for k in probe:
            pipe.execute_command("HGETALL" if kv.encoding == "hash" else "GET", k)
        vals = pipe.execute(raise_on_error=False)
        need = kv.required_fields()
        good = 0
        for v in vals:
            if isinstance(v, redis.exceptions.ResponseError) or v is None:
                continue
            d = decode_value(kv, v)
            if d is None:
                continue
            if kv.encoding == "plain" or all(kv.get(d, f) is not None or f in d for f in need):
                good += 1
        if good == 0:
            continue
        conf = good / len(probe)
        out.append(
            KvMatch(
                kv,
                conf,
                f"{len(mine)} of {len(keys)} sampled keys match {kv.match!r}; "
                f"{good} of {len(probe)} values have {', '.join(sorted(need)) or 'a value'}",
                len(mine),
            )
        )
    # More specific presets (more fields required) win ties: celery-redis-extended over celery-redis.
    out.sort(key=lambda m: (-m.confidence, -len(m.layout.required_fields()), -m.keys, m.layout.name))
    return out


# ----------------------------------------------------------------------------------- opening


def open_redis_ledger(
    url: str,
    *,
    layout: str | KvLayout | None = None,
    password: str | None = None,
    name: str | None = None,
    progress=None,
    token=None,
    batch: int = SCAN_COUNT,
    lock_timeout_s=None,
    retry_threshold=None,
    retention_s=None,
    worker: bool | None = None,
):
    """Connect read-only, choose the key-value layout (given, else detected from a key sample), take a
    snapshot and return a :class:`~idemview.ledger.reader.Ledger` on it. The ledger carries
    ``not_checkable`` (kind -> reason), ``snapshot`` (:class:`SnapshotInfo`), ``kv_layout``,
    ``source_dialect`` ("redis") and ``detection`` (how the layout was chosen).

    ``worker``: see :func:`snapshot`. Raises :class:`ConnectError` (cannot connect),
    :class:`LayoutError` (no layout fits, bad layout)."""

    client = connect_redis(url, password)
    try:
        if isinstance(layout, KvLayout):
            kv, detection = layout, f"layout {layout.name} (chosen)"
        elif layout:
            kv = load_kv_layout(layout)
            detection = f"layout {kv.name} (chosen)"
        else:
            matches = detect_kv(client)
            if not matches:
                raise LayoutError(
                    "no key-value preset fits the sampled keys of this Redis database; pass "
                    "--layout NAME|FILE (bullmq, celery-redis, celery-redis-extended, "
                    "powertools-redis, idem-generic or your own)",
                    ["keys"],
                )
            kv = matches[0].layout
            detection = f"detected {kv.name} ({matches[0].confidence:.0%}): {matches[0].reason}"
        engine, info = snapshot(client, kv, url=url, batch=batch, progress=progress, token=token, worker=worker)
    finally:
        client.connection_pool.disconnect()
    ledger = RedisLedger(
        engine,
        snapshot_layout(kv),
        name=name or f"redis {info.url.split('://', 1)[-1]}",
        lock_timeout_s=lock_timeout_s,
        retry_threshold=retry_threshold,
        retention_s=retention_s,
    )
    ledger.not_checkable = not_checkable(kv)
    if lock_timeout_s is not None and "locked_at" in kv.fields:
        ledger.not_checkable.pop(FindingKind.STUCK_IN_PROGRESS, None)
    if kv.group_field and info.joined is not None and not info.joined.get("completed"):
        ledger.not_checkable[FindingKind.DUPLICATE_EFFECT] = kv.absent_reason or (
            "no completed record is present: a dedup id that ran twice leaves no second record"
        )
    ledger.snapshot = info
    ledger.kv_layout = kv
    ledger.source_dialect = "redis"
    ledger.detection = detection
    ledger.describe = describe_snapshot(ledger)
    return ledger


class RedisLedger(Ledger):
    """A :class:`~idemview.ledger.reader.Ledger` over a Redis snapshot, with what it carries beside:
    ``not_checkable`` (kind -> reason, honoured by the findings engine), ``snapshot``
    (:class:`SnapshotInfo`), ``kv_layout``, ``source_dialect`` ("redis"), ``detection`` (how the layout
    was chosen) and ``describe`` (the manifest's ledger identity)."""

    not_checkable: dict[FindingKind, str]
    snapshot: SnapshotInfo
    kv_layout: KvLayout
    source_dialect: str
    detection: str
    describe: dict | None


def describe_snapshot(ledger) -> dict | None:
    """Manifest identity of a Redis ledger (dialect, host, database, snapshot), else ``None``."""
    info = getattr(ledger, "snapshot", None)
    if info is None:
        return None
    p = urlsplit(info.url) if info.url else None
    return {
        "dialect": "redis",
        "host": (p.hostname or "") if p else "",
        "database": str(info.db),
        "snapshot": info.to_json(),
    }


def test_redis(url, layout: str = "") -> str:
    """The connection dialog's Test for a Redis connection: reachable, write rights, layout detected or
    checked against a key sample. One line of plain words (run on a worker thread)."""
    s = url if isinstance(url, str) else redis_url_from_sqlalchemy(url)
    client = connect_redis(s)
    try:
        warn = write_rights(client)
        parts = ["✓ reachable", "read commands only (allowlist)" + (f" · ⚠ {warn}" if warn else "")]
        presets = [load_kv_layout(layout)] if layout else None
        m = detect_kv(client, presets)
        # Test runs every command Connect's snapshot will run: Test passing means Connect can read
        missing, no_time = snapshot_permissions(client, m[0].layout if m else None)
        if missing:
            grant = " ".join("+" + c.lower() for c in missing)
            return (
                f"✗ reachable, but this Redis user may not run {', '.join(missing)}, which reading a "
                f"snapshot needs: grant {grant} (ACL SETUSER <user> {grant})"
            )
        if no_time:
            parts.append("⚠ " + LOCAL_CLOCK_NOTE)
        if m:
            parts.append(
                f"{'layout' if layout else 'detected'} {m[0].layout.name} — confidence "
                f"{m[0].confidence:.0%}: {m[0].reason}"
            )
        else:
            parts.append("⚠ no key-value preset fits the sampled keys: choose or write a layout")
        return " · ".join(parts)
    finally:
        client.connection_pool.disconnect()
