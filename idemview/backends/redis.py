"""Redis keyspaces (``redis://`` / ``rediss://``), read as a snapshot through the key-value layouts
(:mod:`idemview.ledger.redis_snapshot`: allowlisted read commands only, bounded memory, the server's
clock). Reachable through an SSH tunnel."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlalchemy.engine import URL

from idemview.backends.base import Backend, Choice, Field, Match, OpenRequest, Source, Target
from idemview.errors import CannotConnect, InputError

if TYPE_CHECKING:
    from idemview.config import Connection
    from idemview.domain.model import FindingKind
    from idemview.ledger.reader import Ledger


#: The URL query options idemview passes to redis-py: the database, and on ``rediss://`` the TLS files
#: and checks (redis-py 8 ``SSLConnection.__init__``). Any other option would reach redis-py's
#: connection as a keyword: a TypeError, a clash with idemview's own settings (``protocol=2``, timeouts),
#: or a command sent on connect that is not a read (``client_name``: CLIENT SETNAME).
OPTIONS = frozenset({"db"})
TLS_OPTIONS = frozenset(
    {
        "ssl_cert_reqs",
        "ssl_ca_certs",
        "ssl_ca_path",
        "ssl_certfile",
        "ssl_keyfile",
        "ssl_check_hostname",
        "ssl_min_version",
        "ssl_ciphers",
    }
)


#: idemview's own URL options, taken out of the URL before redis-py sees it: ``write_ttl`` (seconds), the
#: TTL the store sets at every write (Celery's ``result_expires``; a saved connection's "Write TTL"), in
#: place of the layout's ``[expiry] write_ttl_seconds``.
IDEMVIEW_OPTIONS = frozenset({"write_ttl"})


def redis_text(target: Target) -> str:
    """``target`` as a ``redis[s]://`` URL string (a saved connection's SQLAlchemy URL converted), its
    query options checked against :data:`OPTIONS` / :data:`TLS_OPTIONS` / :data:`IDEMVIEW_OPTIONS`.
    Every path (open, Test, detect, the SSH tunnel) goes through here. Raises :class:`InputError` (exit
    2) naming a refused option, before anything connects."""
    from urllib.parse import parse_qsl, urlsplit

    from idemview.ledger.redis_snapshot import redis_url_from_sqlalchemy

    url = target if isinstance(target, str) else redis_url_from_sqlalchemy(target)
    try:
        p = urlsplit(url)
    except ValueError:
        return url  # connect_redis says what is wrong with it
    tls = p.scheme.lower() == "rediss"
    allowed = (OPTIONS | TLS_OPTIONS if tls else OPTIONS) | IDEMVIEW_OPTIONS
    for name, _ in parse_qsl(p.query, keep_blank_values=True):
        if name not in allowed:
            hint = " (TLS options need rediss://)" if name in TLS_OPTIONS else ""
            raise InputError(
                f"connection option {name!r} refused: it is not an option idemview passes to {p.scheme.lower()}"
                f"{hint} (allowed: {', '.join(sorted(allowed))}); nothing was connected"
            )
    return url


def own_options(url: str) -> tuple[str, float | None]:
    """``(url without idemview's own options, write TTL in seconds or None)`` (:data:`IDEMVIEW_OPTIONS`):
    what redis-py is given, and the URL's ``write_ttl``. An empty ``write_ttl`` is none. Raises
    :class:`InputError` (exit 2) for a ``write_ttl`` that is no number of seconds above 0
    (:func:`idemview.ledger.inputs.write_ttl_value`)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    from idemview.ledger.inputs import write_ttl_value

    try:
        p = urlsplit(url)
    except ValueError:
        return url, None
    pairs = parse_qsl(p.query, keep_blank_values=True)
    ours = [v for k, v in pairs if k == "write_ttl" and v.strip()]
    if not any(k in IDEMVIEW_OPTIONS for k, _ in pairs):
        return url, None
    rest = urlencode([(k, v) for k, v in pairs if k not in IDEMVIEW_OPTIONS])
    ttl = write_ttl_value(ours[-1], "write_ttl") if ours else None
    return urlunsplit((p.scheme, p.netloc, p.path, rest, p.fragment)), ttl


class RedisBackend(Backend):
    """Redis (see the module docstring)."""

    name = "redis"
    title = "Redis"
    choices = (Choice("Redis", "redis"), Choice("Redis (TLS)", "rediss"))
    network = True
    priority = 20
    layout_kinds = ("kv",)
    tunables = frozenset({"write_ttl_s"})
    # idemview/ledger/redis_kv/client.py: the command packer's allowlist (ALLOWED)
    read_only_note = (
        "Read-only: every command passes an allowlist of read commands, and any other is refused before it is sent."
    )
    no_fit_detect = (
        "no key-value preset fits the sampled keys; write a key-value layout (see idem-generic) "
        "and pass it with --layout"
    )

    def matches(self, target: Target) -> bool:
        from idemview.ledger.redis_snapshot import is_redis_url

        return is_redis_url(target)

    def target(self, conn: Connection, password: str | None = None) -> Target:
        return conn.url(password)

    def fields(self, dialect: str) -> tuple[Field, ...]:
        tls = (
            (
                Field("tls.ssl_ca_certs", "CA certificate", placeholder="empty: the system's CAs"),
                Field("tls.ssl_certfile", "Client certificate", placeholder="empty: none"),
                Field("tls.ssl_keyfile", "Client key", placeholder="empty: none"),
            )
            if dialect == "rediss"  # a saved rediss connection keeps its TLS files (TLS_OPTIONS)
            else ()
        )
        return (
            Field("host", "Host", placeholder="redis.internal"),
            Field("port", "Port", "port"),
            Field("database", "Database", placeholder="0 (the database number)"),
            Field("user", "User", placeholder="an ACL user (empty: default)"),
            Field("password", "Password", "password"),
            *tls,
            Field(
                "tls.write_ttl",
                "Write TTL (s)",
                placeholder="empty: the layout's (Celery: 86400)",
                help="The TTL in seconds the store sets at every write (Celery's result_expires): a record "
                "without a time of its own is dated read time - (this - its remaining TTL)",
                section="reading",  # how records are dated, not how to reach the server (nor TLS)
            ),
            Field("ssh", "SSH tunnel", "ssh"),
        )

    def needs_password(self, target: Target) -> bool:
        from urllib.parse import urlsplit

        if isinstance(target, URL):
            return bool(target.username) and not target.password
        try:
            p = urlsplit(target)
            return bool(p.username) and not p.password
        except ValueError:
            return False

    def tunnel_form(self, target: Target) -> Target:
        return redis_text(target)

    def open(self, req: OpenRequest) -> Source:
        from dataclasses import replace

        from idemview.layouts.layout import Layout
        from idemview.ledger.redis_kv.ledger import unused_write_ttl
        from idemview.ledger.redis_snapshot import LOCAL_CLOCK_NOTE, open_redis_ledger

        url, ttl = own_options(redis_text(req.target))
        if req.tunables.write_ttl_s is not None:  # the command line's, over the connection's
            ttl = req.tunables.write_ttl_s
        lay = req.layout if not isinstance(req.layout, Layout) else None  # SQL layouts do not apply
        with _typed_errors(url):
            ledger = open_redis_ledger(
                url, layout=lay or None, password=req.password, write_ttl_s=ttl, **req.snapshot_kwargs()
            )
        ledger.source = replace(ledger.source, backend=self.name, not_checkable=self.not_checkable(ledger))
        info = ledger.snapshot
        at = f"{info.server_time:%Y-%m-%d %H:%M:%S} UTC"
        detection = ledger.detection + (
            f"; snapshot of {info.loaded} records at server time {at}"
            if info.clock == "server"
            else f"; snapshot of {info.loaded} records at {at}; {LOCAL_CLOCK_NOTE}"
        )
        warnings = [info.write_warning] if info.write_warning else []
        unused = unused_write_ttl(ledger.source.store_layout, ttl)  # also in the snapshot's notes
        if unused:
            warnings.append(unused)
        if info.write_warning:
            detection += f"; warning: {info.write_warning}"
        return Source(ledger, ledger.engine, detection, info.url, warnings)

    def test(self, target: Target, password: str | None, layout: str) -> str:
        from idemview.ledger.redis_snapshot import test_redis

        url, _ttl = own_options(redis_text(target))
        return test_redis(_with_password(url, password), layout)

    def detect(self, target: Target, password: str | None) -> list[Match]:
        from idemview.ledger.redis_kv.detect import choice_name
        from idemview.ledger.redis_snapshot import connect_redis, detect_kv

        url, _ttl = own_options(redis_text(target))
        with _typed_errors(url):
            client = connect_redis(url, password)
            try:
                # a preset found under another key prefix is named NAME@PREFIX: the name opens it again
                return [Match(choice_name(m.layout), m.confidence, m.reason) for m in detect_kv(client)]
            finally:
                client.connection_pool.disconnect()

    def not_checkable(self, ledger: Ledger) -> dict[FindingKind, str]:
        """What a Redis snapshot cannot show (:func:`~idemview.ledger.redis_kv.ledger.redis_not_checkable`:
        from the key-value layout, what the snapshot read and a lock timeout given); none for a ledger
        that is no Redis snapshot."""
        from idemview.layouts.kv import KvLayout
        from idemview.ledger.redis_kv.ledger import redis_not_checkable
        from idemview.ledger.redis_kv.snapshot import SnapshotInfo

        src = ledger.source
        if not isinstance(src.store_layout, KvLayout) or not isinstance(src.snapshot, SnapshotInfo):
            return {}
        return redis_not_checkable(src.store_layout, src.snapshot, ledger.lock_timeout_override)


def _with_password(url: str, password: str | None) -> str:
    """``url`` with ``password`` in its user info (the dialog's typed password), kept as given otherwise."""
    if not password:
        return url
    from urllib.parse import quote, urlsplit, urlunsplit

    p = urlsplit(url)
    host = p.netloc.rpartition("@")[2]
    auth = f"{quote(p.username or '', safe='')}:{quote(password, safe='')}@"
    return urlunsplit((p.scheme, auth + host, p.path, p.query, p.fragment))


@contextmanager
def _typed_errors(url: str) -> Iterator[None]:
    """A malformed Redis URL is an input error (exit 2), any other Redis failure a :class:`CannotConnect`
    naming the server (exit 3), whichever front end asked."""
    import redis

    from idemview.ledger.redis_snapshot import RedisUrlError, safe_redis_url

    try:
        yield
    except RedisUrlError as e:
        raise InputError(str(e)) from None
    except redis.exceptions.RedisError as e:
        raise CannotConnect(f"Redis at {safe_redis_url(url)} failed: {str(e)[:200]}") from None


BACKEND = RedisBackend()
