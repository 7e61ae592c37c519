"""The Redis connection idemview reads through: read-only by construction.

Every command idemview sends goes through one allowlist (:data:`ALLOWED`), enforced in the command
packer of idemview's own connection classes (:class:`_ReadOnlyPacker`): single commands, pipelines and
the connection handshake all pass through it, and anything else raises :class:`RedisWriteRefused`
before a byte is sent. ``CLIENT SETINFO`` is switched off. On top, the server is asked whether the
connection's user could write (:func:`write_rights`: ``ACL WHOAMI`` + ``ACL DRYRUN <user> SET …``,
Redis >= 7). (Reads still refresh the keys' LRU/LFU access clocks; Redis offers no read that does not.)
Also here: the URLs (``redis[s]://``), the server's clock (:func:`server_time`) and the permission
probe a connection test runs (:func:`snapshot_permissions`).
"""

from __future__ import annotations

import inspect as _inspect
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from idemview.ledger.connect import ConnectError, redact

if TYPE_CHECKING:
    from idemview.layouts.kv import KvLayout

UTC = UTC
SCAN_COUNT = 1000  # keys per SCAN call (a hint to the server) and per pipeline

#: The only commands idemview sends to Redis (upper case; "ACL" only with the listed subcommands).
ALLOWED = frozenset(
    {
        "GET",
        "MGET",
        "HGETALL",
        "PTTL",
        "PEXPIRETIME",  # a key's expiry itself (Redis >= 7): write times read from TTLs
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
        "XRANGE",  # an events stream (BullMQ's bull:<queue>:events), read in pages
    }
)
ALLOWED_SUB = {"ACL": frozenset({"WHOAMI", "DRYRUN"})}
_FAST_OK = frozenset({"PTTL", "PEXPIRETIME", "GET", "MGET", "HGETALL", "SCAN", "TIME"})


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
    against the allowlist before it is encoded (:func:`per_key_reads`, which packs a snapshot's batch
    itself, calls the same :func:`check_command`)."""

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
    each of :data:`SNAPSHOT_COMMANDS` (and LRANGE/ZRANGE for a ``[members]`` or ``[states]`` layout, whose
    records or states are members of lists and sorted sets, XRANGE for an ``[events]`` stream, ZRANGE on
    the lock set of a ``[lock] zset`` layout) run once on a sampled (or absent) key. ``TIME`` refused is not
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
    if kv is not None and (kv.members or kv.states):  # members of lists and sorted sets; job states
        probes["LRANGE"] = lambda: client.execute_command("LRANGE", key, 0, 0)
        probes["ZRANGE"] = lambda: client.execute_command("ZRANGE", key, 0, 0)
    if kv is not None and kv.events_key:  # an events stream (BullMQ's completions)
        probes["XRANGE"] = lambda: client.execute_command("XRANGE", key, "-", "+", "COUNT", 1)
    if kv is not None and kv.lock_zset:  # [lock] zset (asynq:{q}:lease): ZRANGE on that set itself
        probes["ZRANGE"] = _lock_zset_probe(client, kv, key, probes.get("ZRANGE"))
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


def _lock_zset_probe(client, kv: KvLayout, key, before=None):
    """The ZRANGE probe of a ``[lock] zset`` layout: on the lock set of the sampled record's scope (a
    key-pattern ACL may allow the records and not the set: Redis refuses per key), after ``before`` (the
    states' ZRANGE probe, if any); on the sampled key when it names no scope."""
    parts = kv.split_key(bytes(key).decode("utf-8", "backslashreplace") if isinstance(key, bytes) else str(key))
    zkey = kv.lock_zset.format(scope=parts[0]) if parts is not None else key

    def run():
        if before is not None:
            before()
        client.execute_command("ZRANGE", zkey, 0, 0)

    return run


def refused_line(missing: list[str]) -> str:
    """One line for a snapshot refused before reading: the commands (``missing``, upper case, from
    :func:`snapshot_permissions`) this Redis user may not run and what to grant."""
    grant = " ".join("+" + c.lower() for c in missing)
    names = ", ".join(repr(c.lower()) for c in missing)
    return f"this Redis user may not run {names}, which this snapshot reads: grant {grant}; nothing was read"


def _reads_of(kv: KvLayout) -> tuple[str, ...]:
    if kv.members:
        return ("HGETALL",) if any(m.type == "hash" for m in kv.members) else ()
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


def raise_refused(answers) -> None:
    """Raise the first ``NoPermissionError`` (NOPERM: the Redis user may not run a command) among a
    pipeline's ``answers`` (``execute(raise_on_error=False)``): a refused read is not a value, and a
    snapshot that took it for one would count the keys as unreadable and report short. Its message
    names the command (Redis: "this user has no permissions to run the 'mget' command"); the CLI
    says it in one line. Other errors (WRONGTYPE) stay answers, counted by the snapshot."""
    import redis

    for a in answers:
        if isinstance(a, redis.exceptions.NoPermissionError):
            raise a


def _bulk(a) -> bytes:
    """One RESP bulk string (``$<len>\\r\\n<bytes>\\r\\n``) of a key (bytes), a word (str) or a number."""
    if a.__class__ is not bytes:
        a = a.encode("utf-8") if isinstance(a, str) else str(a).encode("ascii") if isinstance(a, int) else bytes(a)
    return b"$%d\r\n%s\r\n" % (len(a), a)


def _packed(cmd: tuple) -> bytes:
    return b"*%d\r\n" % len(cmd) + b"".join(_bulk(a) for a in cmd)


def per_key_reads(client, before: list[tuple], per_key: tuple[str, ...], keys: list) -> list:
    """The answers of one pipeline: the whole commands ``before`` (``("TIME",)``, ``("MGET", *keys)``),
    then for each key of ``keys`` each command of ``per_key`` (``"PTTL"``...) with the key as its one
    argument, in that order; an error reply (``WRONGTYPE``, ``NOPERM``) is its answer, as
    ``pipeline.execute(raise_on_error=False)`` gives it. redis-py's response callbacks are applied
    (``TIME`` -> ``(s, us)``, ``HGETALL`` -> dict).

    The same commands and bytes on the wire as redis-py's pipeline, packed here a batch at a time
    (redis-py packs command by command: ~4 µs a key on a million PTTLs, the largest share of a 1M-key
    snapshot's reading). Every command name passes :func:`check_command` first, as in
    :class:`_ReadOnlyPacker`: nothing outside :data:`ALLOWED` is sent. Raises ``redis.ConnectionError``
    / ``redis.TimeoutError`` as redis-py does (the connection is dropped, not reused)."""
    import redis

    for cmd in before:
        check_command(tuple(cmd))
    for name in per_key:
        check_command((name, keys[0] if keys else b""))
    parts = [_packed(cmd) for cmd in before]
    heads = [b"*2\r\n" + _bulk(name) for name in per_key]
    if len(heads) == 1:
        h = heads[0]
        parts += [h + _bulk(k) for k in keys]
    else:
        for k in keys:
            bk = _bulk(k)
            parts += [h + bk for h in heads]
    n = len(before) + len(per_key) * len(keys)
    pool = client.connection_pool
    conn = pool.get_connection()
    try:
        conn.send_packed_command([b"".join(parts)])
        read, error = conn.read_response, redis.exceptions.ResponseError
        out: list = []
        for _ in range(n):
            try:
                out.append(read())
            except error as e:
                out.append(e)
    finally:
        pool.release(conn)
    callbacks = client.response_callbacks
    for i, cmd in enumerate(before):
        cb = callbacks.get(str(cmd[0]).upper())
        if cb is not None and not isinstance(out[i], Exception):
            out[i] = cb(out[i])
    for j, name in enumerate(per_key):
        cb = callbacks.get(name.upper())
        if cb is not None:
            for i in range(len(before) + j, n, len(per_key)):
                if not isinstance(out[i], Exception):
                    out[i] = cb(out[i])
    return out


def _scan_batches(client, pattern: str, count: int, token=None):
    """The keys of ``SCAN … MATCH pattern COUNT count``, one list per call; ``token`` checked before each."""
    cursor = 0
    while True:
        if token is not None:
            token.check()
        cursor, keys = client.scan(cursor=cursor, match=pattern, count=count)
        if keys:
            yield keys
        if int(cursor) == 0:
            return
