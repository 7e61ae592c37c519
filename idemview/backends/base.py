"""The backend contract (issue 25 item 1): what a kind of ledger store tells the rest of idemview.

A **backend** is one kind of place a ledger lives: a SQL database (SQLAlchemy, SQLite files included),
a dump of files read through DuckDB, a Redis keyspace, a DynamoDB table, or a third party's. It says

- whether a target is its own (:meth:`Backend.matches`: a URL string, a SQLAlchemy ``URL`` or a path);
- how a saved connection becomes a target (:meth:`Backend.target`) and which fields the connection
  dialog shows for it (:meth:`Backend.fields`, :attr:`Backend.choices`, :meth:`Backend.needs_password`);
- how to open it read-only as a :class:`~idemview.ledger.reader.Ledger` (:meth:`Backend.open`, called only
  by the one opener, :mod:`idemview.services.opener`), test it (:meth:`Backend.test`) and detect its
  layout (:meth:`Backend.detect`);
- which finding kinds it can never check, and why (:meth:`Backend.not_checkable`);
- whether an SSH tunnel can carry it (:attr:`Backend.network`, :meth:`Backend.through`).

The idea is harlequin's adapter contract (``HarlequinAdapter``: declared options from which the UI is
built, a ``connect()`` returning a connection object, adapters found through an entry point group), not
its code. Backends are registered in :mod:`idemview.backends.registry` through the ``idemview.backends``
entry point group.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import URL

from idemview.errors import InputError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from idemview.config import Connection
    from idemview.domain.model import FindingKind
    from idemview.layouts.layout import Layout
    from idemview.ledger.reader import Ledger

#: A ledger target: a URL string (``redis://…``, ``dynamodb://…``), a SQLAlchemy ``URL`` or a path text.
Target = str | URL


@dataclass(frozen=True)
class Field:
    """One field of the connection dialog for a backend.

    ``key``: the :class:`~idemview.config.Connection` attribute it edits (``host``, ``port``,
    ``database``, ``user``, ``password`` — never saved, it goes to the keyring —, or ``tls.NAME`` for an
    entry of the URL's query options: ``tls.sslmode``, DynamoDB's ``tls.region``). ``kind``:
    ``text``, ``port``, ``password``, ``file`` (a file picker), ``path`` (a file *or* folder picker),
    ``choice`` (one of ``choices``), ``ssh`` (the SSH tunnel rows), or ``note`` (a line of text, no
    value: ``label`` is the text). ``label`` is what the dialog shows; ``placeholder`` and ``help`` (tool
    tip) explain the value; ``filter`` is a file dialog's name filter. ``section``: ``server`` (the
    dialog's box of where the store is and how to reach it) or ``reading`` (how its records are read,
    shown beside the layout and the zone of naive times, e.g. Redis's write TTL)."""

    key: str
    label: str
    kind: str = "text"
    placeholder: str = ""
    help: str = ""
    choices: tuple[str, ...] = ()
    filter: str = ""
    section: str = "server"


#: The schemes (``Choice.dialect``) of every registered backend, kept by the registry
#: (:func:`idemview.backends.registry.register`): what an unknown scheme's message suggests instead.
_SCHEMES: set[str] = set()


def set_known_schemes(schemes: set[str]) -> None:
    """Replace the registered backends' schemes (the registry calls this on every change)."""
    _SCHEMES.clear()
    _SCHEMES.update(schemes)


def known_schemes() -> list[str]:
    """The schemes idemview opens: the registered backends' and SQLAlchemy's built-in SQL ones, sorted."""
    return sorted(_SCHEMES | {"sqlite", "postgresql", "mysql", "mariadb"})


@dataclass(frozen=True)
class Choice:
    """One entry of the dialog's "Database" list: ``label`` (``"PostgreSQL"``) and ``dialect`` (the value
    a saved :class:`~idemview.config.Connection` keeps in ``dialect``: ``postgresql``, ``redis``, …)."""

    label: str
    dialect: str


@dataclass(frozen=True)
class Tunables:
    """The thresholds a caller may override for one open (the CLI's ``--lock-timeout`` in seconds,
    ``--retry-threshold`` attempts, ``--retention`` seconds, ``--write-ttl`` seconds); ``None``: the
    layout's own (or the connection's). The first three apply to every ledger; ``write_ttl_s`` (the TTL
    a key-value store sets at every write, Celery's ``result_expires``) only to a backend listing it in
    :attr:`Backend.tunables` (the opener refuses it elsewhere)."""

    lock_timeout_s: float | None = None
    retry_threshold: int | None = None
    retention_s: float | None = None
    write_ttl_s: float | None = None

    def backend_specific(self) -> set[str]:
        """The names of the backend-specific tunables set here (``write_ttl_s``)."""
        return {"write_ttl_s"} if self.write_ttl_s is not None else set()

    def as_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :class:`~idemview.ledger.reader.Ledger` (and every ledger opener)
        these set: ``lock_timeout_s``, ``retry_threshold``, ``retention_s``."""
        return {
            "lock_timeout_s": self.lock_timeout_s,
            "retry_threshold": self.retry_threshold,
            "retention_s": self.retention_s,
        }


@dataclass
class OpenRequest:
    """What the opener asks a backend to open: the ``target`` (tunnel already applied), the
    ``password`` (from the keyring or typed; never stored), the ``layout`` (a preset name, a file, a
    :class:`Layout`; ``None``: detect), the connection's ``schema``, value maps and action rules, the
    naive zone, the display ``name`` (``None``: the backend's default), :class:`Tunables`, a ``progress``
    callback ``(scanned, loaded)`` for snapshots, a cancel ``token`` (``check()`` raises),
    ``no_fit_hint``, the words after "no preset fits …;" that say what to do in this front end, and
    ``on_engine``, called with each engine the backend makes before its first statement (the opener
    installs the cancel listeners there, so detection and reflection can be interrupted)."""

    target: Target
    password: str | None = None
    layout: Any = None
    name: str | None = None
    naive_zone: str | None = None
    schema: str | None = None
    status_map: dict = field(default_factory=dict)
    outcome_map: dict = field(default_factory=dict)
    actions: dict = field(default_factory=dict)
    tunables: Tunables = field(default_factory=Tunables)
    progress: Callable[[int, int], None] | None = None
    token: Any = None
    no_fit_hint: str = "choose or build a layout"
    on_engine: Callable[[Any], None] | None = None

    def engine_made(self, engine: Any) -> None:
        """Tell the opener about a new engine (``on_engine``), before any statement runs on it."""
        if self.on_engine is not None:
            self.on_engine(engine)

    def snapshot_kwargs(self) -> dict[str, Any]:
        """The keyword arguments a snapshot opener (``open_redis_ledger``, ``open_dynamodb_ledger``) takes
        from the request: ``name``, ``progress``, ``token`` and the :class:`Tunables`."""
        return {"name": self.name, "progress": self.progress, "token": self.token, **self.tunables.as_kwargs()}

    def check(self) -> None:
        """Raise if the caller cancelled (the token's ``check``); nothing without a token."""
        if self.token is not None:
            self.token.check()


@dataclass
class Source:
    """An opened ledger as a backend hands it back: the ``ledger`` (its ``source`` declared), the
    ``engine`` it reads through (a snapshot's in-memory SQLite for Redis and DynamoDB), ``detection`` (how
    the layout was chosen, in words), ``where`` (a URL safe to show: no user name, no password) and
    ``warnings`` (lines a front end shows, e.g. "this Redis user may write")."""

    ledger: Ledger
    engine: Engine
    detection: str
    where: str
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Match:
    """A detected layout: its ``name``, ``confidence`` (0..1) and ``reason`` in words."""

    name: str
    confidence: float
    reason: str


class Backend(ABC):
    """One kind of ledger store (see the module's docstring). Subclass it and register an instance
    through the ``idemview.backends`` entry point group (:mod:`idemview.backends.registry`).

    Class attributes: ``name`` (the registry's key, also :attr:`~idemview.ledger.source.LedgerSource.backend`),
    ``title`` (for people), ``choices`` (the dialog's "Database" entries; their dialects are the values
    a saved connection keeps), ``network`` (an SSH tunnel can carry it: it has a host and a port),
    ``priority`` (asked before backends of lower priority when several could match: the catch-all SQL
    backend asks last), ``layout_kinds`` (which layouts apply, for the dialog's layout list: ``sql``,
    ``kv``, ``dynamodb``), ``tunables`` (the backend-specific :class:`Tunables` it honours, e.g.
    ``write_ttl_s``), ``no_fit_detect``, ``read_only_note`` (one sentence for people: how this backend
    keeps every connection read-only; the connection dialog shows it)."""

    name: str = ""
    title: str = ""
    choices: tuple[Choice, ...] = ()
    network: bool = False
    priority: int = 0
    layout_kinds: tuple[str, ...] = ("sql",)
    tunables: frozenset[str] = frozenset()
    #: What ``idemview detect`` says when no layout fits (one line: what to do).
    no_fit_detect: str = "no layout fits this ledger; write a layout and pass it with --layout"
    #: How a connection of this backend is kept read-only, in one sentence (the connection dialog's).
    read_only_note: str = "Every connection is opened read-only."

    # ------------------------------------------------------------------------------ matching

    @abstractmethod
    def matches(self, target: Target) -> bool:
        """Whether ``target`` (a URL string, a SQLAlchemy ``URL`` or a path text) is this backend's.
        Must not touch the network or the file's contents (names and file kinds only)."""

    def owns_dialect(self, dialect: str) -> bool:
        """Whether a saved connection whose ``dialect`` is this value is this backend's."""
        return any(c.dialect == dialect for c in self.choices)

    # ----------------------------------------------------------------------- saved connections

    @abstractmethod
    def target(self, conn: Connection, password: str | None = None) -> Target:
        """The target a saved connection names (``password`` included where the target carries one)."""

    @abstractmethod
    def fields(self, dialect: str) -> tuple[Field, ...]:
        """The connection dialog's fields for a connection of this ``dialect`` (one of :attr:`choices`),
        in the order shown."""

    def connection_from(self, name: str, text: str) -> tuple[Connection, str | None]:
        """A :class:`~idemview.config.Connection` (and the password, never saved) from a URL or path a user
        pasted into the dialog. Default: a SQLAlchemy-shaped URL split into fields
        (:meth:`Connection.from_url`). Raises ``ValueError`` (message without a secret)."""
        from idemview.config import Connection

        return Connection.from_url(name, text)

    def needs_password(self, target: Target) -> bool:
        """Whether opening ``target`` without a password must first ask for one (a server with a user
        name and no password in the target). Default: never."""
        return False

    # ---------------------------------------------------------------------------------- work

    @abstractmethod
    def open(self, req: OpenRequest) -> Source:
        """Open ``req.target`` read-only and build its :class:`Ledger` (layout given or detected, fitted to
        the connection). Called by :func:`idemview.services.opener.open_source` only. Raises typed
        errors (:mod:`idemview.errors`): ``InputError`` (exit 2), ``CannotConnect`` (3),
        ``LayoutMismatch`` (4), ``Cancelled``."""

    @abstractmethod
    def test(self, target: Target, password: str | None, layout: str) -> str:
        """The connection dialog's Test: reach the store read-only and detect or check ``layout``. One
        line of plain words (run on a worker thread). Raises what :meth:`open` raises before reading."""

    @abstractmethod
    def detect(self, target: Target, password: str | None) -> list[Match]:
        """Layouts that fit ``target``, best first (``idemview detect``)."""

    def not_checkable(self, ledger: Ledger) -> dict[FindingKind, str]:
        """The finding kinds this backend cannot check on ``ledger``, each with the reason (e.g. a
        key-value store keeps one record per key: no duplicate effect). :meth:`open` declares them as
        ``ledger.source = LedgerSource(name, …, self.not_checkable(ledger))``; the ledger adds its
        layout's own (:func:`~idemview.ledger.source.layout_not_checkable`) and the findings engine never
        runs a kind listed there (:func:`idemview.findings.engine.not_checkable`). Default: none."""
        return {}

    # ---------------------------------------------------------------------------------- SSH

    def through(
        self, target: Target, spec: Any, connection_id: str | None, secret: str | None = None
    ) -> tuple[Target, Any]:
        """``(target through an SSH tunnel, Tunnel)`` for a :attr:`network` backend: the tunnel's local
        end replaces host and port (:func:`idemview.ledger.tunnel.tunnel_target`; ``spec`` a
        :class:`~idemview.ledger.tunnel.SshSpec`, ``secret`` the key passphrase or SSH password, else the
        keyring's for ``connection_id``). Raises :class:`InputError` (exit 2) for a backend no SSH tunnel
        can carry, what the tunnel raises otherwise (``TunnelError``, exit 3)."""
        if not self.network:
            raise InputError(f"--ssh does not apply to a {self.title} (it is not reached at a host and port)")
        from idemview.ledger.tunnel import tunnel_target

        return tunnel_target(self.tunnel_form(target), spec, connection_id, secret=secret)

    def tunnel_form(self, target: Target) -> Target:
        """``target`` as :func:`~idemview.ledger.tunnel.tunnel_target` takes it (a SQLAlchemy URL, or a
        URL string it rewrites verbatim)."""
        return target

    def __repr__(self) -> str:
        return f"<backend {self.name}>"


def fit_layout(
    engine: Engine,
    layout: Layout,
    *,
    schema: str | None = None,
    status_map: dict[str, str] | None = None,
    outcome_map: dict[str, str] | None = None,
    located: bool = False,
    actions: dict | None = None,
) -> Layout:
    """The layout as it applies to this database and connection: its tables looked up where they are
    (``schema``, else the preset's schema, else found as detection finds them: DESIGN §9; skipped when
    ``located``, i.e. detection already placed it) and the connection's extra raw-value maps merged in;
    the connection's ``actions`` rules (``{"rules": [...], "regulated": [...]}``) come before the
    layout's own. Raises :class:`LayoutError` on a malformed map or action rule."""
    from idemview.domain.model import Outcome
    from idemview.layouts.layout import parse_value_map, with_value_maps
    from idemview.ledger.detect import locate

    if schema or not located:
        layout = locate(engine, layout, schema=schema or None)
    layout = with_value_maps(
        layout, parse_value_map(status_map or {}), parse_value_map(outcome_map or {}, Outcome, "outcome")
    )
    if actions:
        from dataclasses import replace

        from idemview.domain.actions import ActionRuleError, ActionRules
        from idemview.layouts.layout import LayoutError

        try:
            own = ActionRules.from_dict(actions, "the connection's [actions]")
        except ActionRuleError as e:
            raise LayoutError(str(e)) from None
        layout = replace(layout, actions=own.then(layout.actions))
    return layout
