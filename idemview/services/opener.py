"""The one opener (issue 25 item 1): saved connection or target → backend → SSH tunnel → layout → fit →
:class:`~idemview.ledger.reader.Ledger`, for the CLI, the GUI and the Python API alike.

- :func:`spec_for_connection` / :func:`spec_for_target` make an :class:`OpenSpec` from a saved
  :class:`~idemview.config.Connection` or from what a user typed (a URL, a file, a dump folder, a saved
  connection's name); every field of a saved connection reaches every path because this is the only
  place a connection becomes something to open.
- :func:`open_source` finds the backend (:func:`idemview.backends.backend_for`), attaches the SSH tunnel
  (any network backend: :meth:`Backend.through`), asks the backend to open read-only, and installs the
  cancel listeners on the engine. No other module calls a backend's ``open``.
- :func:`detect_layouts` and :func:`test_connection` do the same for ``idemview detect`` and the
  connection dialog's Test.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import URL

from idemview.backends import Backend, Match, OpenRequest, Tunables, backend_for, backend_for_dialect, backends
from idemview.errors import CannotConnect, InputError
from idemview.layouts.layout import Layout
from idemview.services.cancel import watch_engine

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy.engine import Engine

    from idemview.config import Connection
    from idemview.ledger.reader import Ledger

#: What the GUI says after "no preset fits this database" (the CLI and the API name their own option).
GUI_NO_FIT = ": choose or build a layout"


@dataclass
class OpenSpec:
    """What to open: a URL (with optional password), a display name and a layout (name/file/object,
    empty: detect). ``colour`` tints the tab."""

    url: str | URL
    name: str
    layout: str | Layout | None = None
    password: str | None = None
    colour: str = ""
    connection_id: str | None = None
    naive_zone: str | None = None  # IANA zone of the ledger's naive timestamps (a saved connection's)
    schema: str | None = None  # where the layout's tables are (a saved connection's; empty: found)
    status_map: dict[str, str] = field(default_factory=dict)  # extra raw status -> status
    outcome_map: dict[str, str] = field(default_factory=dict)  # extra raw outcome -> outcome
    # the instant the first scan computes findings for (a Copy link's ``--now``); None: the current time
    now: datetime | None = None
    actions: dict = field(default_factory=dict)  # the connection's own [actions] rules (DESIGN §5.1)
    ssh: str = ""  # USER@HOST[:PORT]: reach the ledger through this SSH host (DESIGN §5.3); empty: direct
    ssh_key: str = ""  # private key file for ``ssh`` (its passphrase from the keyring)


def password_needed(spec: OpenSpec, known: str | None = None) -> bool:
    """Whether opening ``spec`` must first ask for a password (issue 20 §3): a saved connection whose
    backend says so (a server with a user name, and no password in ``spec``, in its URL or ``known``:
    the keyring's or this session's). SQLite files, dumps and DynamoDB have none to ask."""
    if not spec.connection_id or spec.password or known:
        return False
    try:
        return backend_for(spec.url).needs_password(spec.url)
    except InputError:
        return False


def spec_for_connection(c: Connection, password: str | None = None) -> OpenSpec:
    """The :class:`OpenSpec` of a saved :class:`~idemview.config.Connection` ``c`` (DESIGN §8), with
    ``password`` (from the keyring or typed for this session; never stored here). The one place a
    saved connection becomes something to open: the connection dialog, the start page, Reconnect,
    ``idemview open NAME``, the CLI's commands and ``idemview.open(NAME)`` all call it, so every field
    (layout, zone, schema, value maps, colour, action rules, SSH, backend options) reaches every path."""
    return OpenSpec(
        url=backend_for_dialect(c.dialect).target(c),
        name=c.name,
        layout=c.layout or None,
        password=password or None,
        colour=c.colour,
        connection_id=c.id,
        naive_zone=c.naive_zone or None,
        schema=c.schema or None,
        status_map=dict(c.status_map),
        outcome_map=dict(c.outcome_map),
        actions=dict(c.actions or {}),
        ssh=c.ssh or "",
        ssh_key=c.ssh_key or "",
    )


def saved_connection(target: str) -> Connection | None:
    """The saved connection ``target`` names (its name or id) when ``target`` is no URL and no existing
    path, else ``None``."""
    from pathlib import Path

    if "://" in target or Path(target).exists():
        return None
    from idemview.config import ConnectionStore

    return ConnectionStore().find(target)


def spec_for_target(target: str, credentials=None) -> OpenSpec:
    """An :class:`OpenSpec` for what ``idemview open TARGET`` or a Copy link names: a saved connection's
    name (all its fields, and its password from ``credentials``, a :class:`~idemview.config.CredentialStore`,
    when given), else a URL, a SQLite file or a dump (layout detected). Raises ``ConnectError`` for a
    malformed URL."""
    import os

    c = saved_connection(target)
    if c is not None:
        pw = credentials.get(c.id) if credentials is not None else None
        return spec_for_connection(c, pw)
    from idemview.ledger.connect import parse_url, safe_url

    if target.startswith("~"):  # a link's portable path (see services.links): the reader's own home
        target = os.path.expanduser(target)
    if backend_for(target).name != "sql" and "://" in target:
        return OpenSpec(url=target, name=_display_name(target))
    u = parse_url(target)
    name = u.database.rsplit("/", 1)[-1] if u.get_backend_name() == "sqlite" and u.database else safe_url(u)
    return OpenSpec(url=target, name=name)


def _display_name(target: str) -> str:
    from idemview.ledger.connect import parse_url, safe_url

    try:
        return safe_url(parse_url(target))
    except Exception:  # noqa: BLE001 - a URL SQLAlchemy cannot parse (dynamodb://T?endpoint_url=…)
        return target.split("?", 1)[0]


@dataclass
class Opening:
    """A ledger opened by :func:`open_source`: the ``backend`` that opened it, the ``ledger`` (its
    ``source`` declared), the ``engine`` it reads through, ``detection`` (how the layout was chosen, in
    words), ``where`` (a URL safe to show), ``warnings`` (lines to show) and the SSH ``tunnel`` (``None``:
    direct). :meth:`close` releases both."""

    backend: Backend
    ledger: Ledger
    engine: Engine
    detection: str
    where: str
    warnings: list[str] = field(default_factory=list)
    tunnel: Any = None

    def close(self) -> None:
        """Release the connections and close the SSH tunnel."""
        self.engine.dispose()
        if self.tunnel is not None:
            self.tunnel.close()


def _route(spec: OpenSpec, secret: str | None = None) -> tuple[Backend, Any, Any]:
    """``(backend, target, tunnel or None)``: the backend of ``spec.url`` and the target through the
    SSH tunnel ``spec.ssh`` asks for (``secret``: a passphrase typed, else the keyring's)."""
    backend = backend_for(spec.url)
    if not spec.ssh:
        return backend, spec.url, None
    from idemview.ledger.tunnel import SshSpec

    ssh = SshSpec.parse(spec.ssh, spec.ssh_key or None)
    target, tunnel = backend.through(spec.url, ssh, spec.connection_id, secret)
    return backend, target, tunnel


def _through_tunnel_error(tunnel: Any, e: BaseException) -> BaseException:
    """A clearer error when the store behind ``tunnel`` could not be reached through it, else ``e``."""
    if tunnel is not None and isinstance(e, CannotConnect):
        from idemview.ledger.tunnel import explain_failure

        return explain_failure(tunnel, e) or e
    return e


def open_source(
    spec: OpenSpec,
    token: Any = None,
    *,
    tunables: Tunables | None = None,
    progress: Callable[[int, int], None] | None = None,
    no_fit_hint: str = GUI_NO_FIT,
) -> Opening:
    """Open ``spec`` read-only: its backend, through its SSH tunnel if any, with its layout (given or
    detected) fitted to the connection (schema, value maps, action rules, naive zone) and ``tunables``.
    ``token``: a cancel token (``check()`` raises ``Cancelled``); ``progress(scanned, loaded)``: a
    snapshot's progress; ``no_fit_hint``: what follows "no preset fits this database" in this front end.
    Raises the typed errors of :mod:`idemview.errors` (``InputError`` 2, ``CannotConnect`` 3 — a
    ``TunnelError`` naming both ends when the SSH host could not reach the store —, ``LayoutMismatch`` 4,
    ``Cancelled``; ``InputError`` too for a backend-specific tunable the backend does not honour, e.g. a
    write TTL for a SQL database); an SSH tunnel opened here is closed on any error."""
    tunables = tunables or Tunables()
    _check_tunables(backend_for(spec.url), tunables)
    backend, target, tunnel = _route(spec)
    req = OpenRequest(
        target,
        password=spec.password,
        layout=spec.layout,
        name=spec.name or None,
        naive_zone=spec.naive_zone,
        schema=spec.schema,
        status_map=dict(spec.status_map or {}),
        outcome_map=dict(spec.outcome_map or {}),
        actions=dict(spec.actions or {}),
        tunables=tunables,
        progress=progress,
        token=token,
        no_fit_hint=no_fit_hint,
        on_engine=watch_engine,
    )
    try:
        src = backend.open(req)
    except BaseException as e:
        if tunnel is not None:
            tunnel.close()
        better = _through_tunnel_error(tunnel, e)
        if better is not e:
            raise better from None
        raise
    watch_engine(src.engine)  # a snapshot's engine, made inside its module (idempotent for the others)
    try:
        _check_applied(backend, src.ledger, tunables)
    except InputError:
        src.engine.dispose()
        if tunnel is not None:
            tunnel.close()
        raise
    return Opening(backend, src.ledger, src.engine, src.detection, src.where, list(src.warnings), tunnel)


#: How a backend-specific tunable is named in messages (what the CLI's flag and the API's argument set).
_TUNABLE_WORDS = {"write_ttl_s": "a write TTL (the TTL a key-value store sets at every write)"}


def _check_tunables(backend: Backend, tunables: Tunables) -> None:
    """Raise :class:`InputError` (exit 2) when ``tunables`` sets one ``backend`` does not honour
    (:attr:`Backend.tunables`): silently ignoring it would read the ledger other than asked."""
    refused = sorted(tunables.backend_specific() - set(backend.tunables))
    if refused:
        name = refused[0]
        only = " or ".join(b.title for b in backends() if name in b.tunables) or "no registered backend"
        raise InputError(
            f"{_TUNABLE_WORDS.get(name, name)} does not apply to this ledger ({backend.title}; only {only} takes it)"
        )


def _check_applied(backend: Backend, ledger: Ledger, tunables: Tunables) -> None:
    """Raise :class:`InputError` (exit 2) when ``backend`` built ``ledger`` without a threshold every
    ledger takes (a lock timeout, retry threshold or retention given: :meth:`Tunables.as_kwargs`, which
    its ``open`` passes to the :class:`~idemview.ledger.reader.Ledger`): a third party's backend that
    drops them would read the ledger other than asked, silently."""
    t = tunables
    dropped = [
        words
        for given, applied, words in (
            (t.lock_timeout_s, ledger.lock_timeout_override, "a lock timeout"),
            (t.retry_threshold, ledger.retry_threshold, "a retry threshold"),
            (t.retention_s, ledger.retention_s, "a retention"),
        )
        if given is not None and applied != given
    ]
    if dropped:
        raise InputError(
            f"the {backend.title} backend ({backend.name}) did not apply {' and '.join(dropped)} given: its "
            "open() must pass OpenRequest.tunables.as_kwargs() to the Ledger; nothing was read"
        )


def detect_layouts(spec: OpenSpec) -> tuple[Backend, list[Match]]:
    """``(backend, layouts that fit best first)`` for ``idemview detect``: through the SSH tunnel when
    ``spec`` asks for one (closed before returning). Raises what :func:`open_source` raises."""
    backend, target, tunnel = _route(spec)
    try:
        return backend, backend.detect(target, spec.password)
    except BaseException as e:
        better = _through_tunnel_error(tunnel, e)
        if better is not e:
            raise better from None
        raise
    finally:
        if tunnel is not None:
            tunnel.close()


def test_connection(conn: Connection, password: str | None, layout: str, ssh_secret: str | None = None) -> str:
    """The connection dialog's Test for the connection as its fields describe it: through its SSH tunnel
    if any (``ssh_secret``: the key passphrase or SSH password typed, else the keyring's), reach the store
    read-only and detect or check ``layout``. One line of plain words (run on a worker thread)."""
    backend = backend_for_dialect(conn.dialect)
    spec = replace(spec_for_connection(conn, password), ssh=conn.ssh if backend.network else "")
    target = backend.target(conn, password)
    _b, through, tunnel = _route(replace(spec, url=target), ssh_secret)
    if tunnel is None:
        return backend.test(target, password, layout)
    try:
        head = f"✓ SSH {tunnel.spec.host}:{tunnel.spec.port} host key known · "
        return head + backend.test(through, password, layout)
    finally:
        tunnel.close()


test_connection.__test__ = False  # type: ignore[attr-defined]  # a function of the dialog, not a test


def editor_engine(conn: Connection, password: str | None) -> Engine:
    """A read-only engine on a SQL connection for the layout editor (which maps SQL tables). Raises
    :class:`InputError` for a connection of another backend."""
    from idemview.backends.sql import SqlBackend

    backend = backend_for_dialect(conn.dialect)
    if not isinstance(backend, SqlBackend):
        raise InputError(f"the layout editor maps SQL tables; a {backend.title} ledger uses its own layouts")
    return backend.engine(backend.target(conn, password), password)
