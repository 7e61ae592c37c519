"""SQL databases through SQLAlchemy: SQLite files, PostgreSQL, MySQL, MariaDB and any other installed
dialect (the catch-all backend, asked last). Read-only by :func:`idemview.ledger.connect.open_engine`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import URL

from idemview.backends.base import (
    Backend,
    Choice,
    Field,
    Match,
    OpenRequest,
    Source,
    Target,
    fit_layout,
    known_schemes,
)
from idemview.errors import InputError
from idemview.layouts.layout import LayoutError, LayoutMismatchError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from idemview.config import Connection


class ConnectionSettingsError(LayoutError):
    """The connection's own settings (value maps, action rules) are malformed: exit code 2 whether the
    layout was chosen or detected (the user wrote them, not the database)."""


class NoLayoutFits(LayoutMismatchError):
    """Detection found no shipped preset for the database (exit code 4)."""


def choose_layout(engine: Engine, layout: Any, no_fit_hint: str) -> tuple[Any, str, bool]:
    """``(layout, detection in words, detected?)``: ``layout`` (a :class:`Layout`, a preset name or a
    file) as given, else the best detected preset. Raises :class:`NoLayoutFits` (the message ends with
    ``no_fit_hint``), :class:`InvalidLayout` for a bad layout file."""
    from idemview.layouts.layout import Layout, load_layout

    if isinstance(layout, Layout):
        return layout, f"layout {layout.name} (chosen)", False
    if layout:
        lay = load_layout(layout)  # a preset's name means the preset (see load_layout)
        return lay, f"layout {lay.name} (chosen)", False
    from idemview.ledger.detect import detect

    matches = detect(engine)
    if not matches:
        raise NoLayoutFits("no preset fits this database" + no_fit_hint, ["a known ledger table"])
    m = matches[0]
    return m.layout, f"detected {m.layout.name} ({m.confidence:.0%}): {m.reason}", True


def engine_name(engine: Engine) -> str:
    """A name for an unsaved ledger: the SQLite file's name, or the database name on a server."""
    from idemview.ledger.dialects import SQLITE, family

    db = engine.url.database or ""
    return Path(db).name if family(engine) == SQLITE else (db or engine.dialect.name)


class SqlBackend(Backend):
    """SQLAlchemy databases (see the module docstring). Matches any SQLAlchemy URL and any other path
    (a SQLite file); the other backends are asked first."""

    name = "sql"
    title = "SQL database"
    choices: tuple[Choice, ...] = (
        Choice("SQLite file", "sqlite"),
        Choice("PostgreSQL", "postgresql"),
        Choice("MySQL", "mysql"),
        Choice("MariaDB", "mariadb"),
    )
    network = True
    priority = -100
    no_fit_detect = (
        "no preset fits this database (no known ledger table found); build a layout file and pass it with --layout"
    )
    # idemview/ledger/connect.py: SQLite mode=ro + query_only, PostgreSQL default_transaction_read_only,
    # MySQL/MariaDB SET SESSION TRANSACTION READ ONLY
    read_only_note = "Every connection is opened read-only, enforced by the database session."

    def matches(self, target: Target) -> bool:
        return True  # the catch-all: parse_url says what is wrong with anything else

    def owns_dialect(self, dialect: str) -> bool:
        return True  # any installed SQLAlchemy dialect (registry.backend_for_dialect asks the others first)

    def target(self, conn: Connection, password: str | None = None) -> Target:
        return conn.url(password)

    def fields(self, dialect: str) -> tuple[Field, ...]:
        if dialect == "sqlite":
            return (
                Field(
                    "database",
                    "File",
                    "file",
                    "/path/to/ledger.db",
                    filter="SQLite (*.db *.sqlite *.sqlite3);;All files (*)",
                ),
            )
        out = [
            Field("host", "Host", placeholder="db.internal"),
            Field("port", "Port", "port"),
            Field("database", "Database"),
            Field("user", "User"),
            Field("password", "Password", "password"),
        ]
        if dialect == "postgresql":
            out.append(
                Field(
                    "tls.sslmode",
                    "TLS (sslmode)",
                    "choice",
                    choices=("", "disable", "prefer", "require", "verify-ca", "verify-full"),
                )
            )
        out.append(Field("ssh", "SSH tunnel", "ssh"))
        return tuple(out)

    def connection_from(self, name: str, text: str) -> tuple[Connection, str | None]:
        """:meth:`Backend.connection_from`, refusing a scheme SQLAlchemy does not know (a typo such as
        ``postgresq://``, or ``http://``) instead of filling the fields as another type. Raises
        ``ValueError`` (:class:`InputError`; no secret in the message)."""
        c, pw = super().connection_from(name, text)
        self.known_dialect(URL.create(c.dialect))
        return c, pw

    def needs_password(self, target: Target) -> bool:
        from sqlalchemy.engine import make_url

        try:
            u = target if isinstance(target, URL) else make_url(target)
        except Exception:  # noqa: BLE001 - a path or something parse_url rejects later: nothing to ask
            return False
        if u.get_backend_name() == "sqlite":
            return False
        return bool(u.username) and not u.password

    def url(self, target: Target) -> URL:
        """``target`` as a SQLAlchemy URL (a path: a SQLite file or a dump). Raises :class:`InputError`
        (exit 2) for a malformed URL."""
        from idemview.ledger.connect import ConnectError, parse_url

        if isinstance(target, URL):
            return self.known_dialect(target)
        if not target.strip():  # parse_url would read "" as the working directory
            raise InputError("no database given: name a SQLAlchemy URL, a SQLite file, a dump or a saved connection")
        try:
            u = parse_url(target)
        except ConnectError as e:  # a malformed URL is an input error (exit 2), not a failed connection
            raise InputError(str(e)) from None
        return self.known_dialect(u)

    def known_dialect(self, u: URL) -> URL:
        """``u`` when SQLAlchemy knows its dialect (a missing driver package is said later, at connect).
        An unknown scheme is a typo or a kind of store no backend claims: :class:`InputError` (exit 2),
        naming the closest known scheme, before anything connects."""
        from sqlalchemy.exc import NoSuchModuleError

        try:
            u.get_dialect()
        except NoSuchModuleError:
            name = u.get_backend_name()
            raise InputError(f"unknown kind of database {name!r}{_did_you_mean(name)}") from None
        return u

    def engine(self, target: Target, password: str | None, statement_timeout_s: float | None = 20) -> Engine:
        """A read-only engine on ``target`` (:func:`idemview.ledger.connect.open_engine`) with a short
        statement timeout (seconds; ``None``: open_engine's default), for Test, detection and the layout
        editor."""
        from idemview.ledger.connect import open_engine

        if statement_timeout_s is None:
            return open_engine(self.url(target), password=password)
        return open_engine(self.url(target), password=password, statement_timeout_s=statement_timeout_s)

    def tunnel_form(self, target: Target) -> Target:
        return self.url(target)

    def open(self, req: OpenRequest) -> Source:
        from idemview.ledger.connect import open_engine, safe_url
        from idemview.ledger.reader import Ledger
        from idemview.ledger.source import LedgerSource

        engine = open_engine(self.url(req.target), password=req.password)
        try:
            req.engine_made(engine)
            req.check()
            layout, detection, detected = choose_layout(engine, req.layout, req.no_fit_hint)
            try:
                layout = fit_layout(
                    engine,
                    layout,
                    schema=req.schema,
                    status_map=req.status_map,
                    outcome_map=req.outcome_map,
                    located=detected,
                    actions=req.actions,
                )
            except LayoutError as e:
                raise ConnectionSettingsError(str(e)) from None
            ledger = Ledger(
                engine,
                layout,
                name=req.name or engine_name(engine),
                naive_zone=req.naive_zone,
                **req.tunables.as_kwargs(),
            )
            ledger.source = LedgerSource(self.name, None, self.not_checkable(ledger))
            req.check()
            return Source(ledger, engine, detection, safe_url(engine.url))
        except BaseException:
            engine.dispose()
            raise

    def test(self, target: Target, password: str | None, layout: str) -> str:
        from idemview.layouts.layout import load_layout
        from idemview.ledger.connect import session_is_read_only
        from idemview.ledger.detect import detect
        from idemview.ledger.reader import Ledger

        engine = self.engine(target, password)
        try:
            ro = session_is_read_only(engine)
            parts = ["✓ reachable", "read-only session confirmed" if ro else "⚠ session NOT confirmed read-only"]
            if layout:
                lay = load_layout(layout)
                Ledger(engine, lay)
                parts.append(f"layout {lay.name} fits")
            else:
                m = detect(engine)
                if m:
                    parts.append(f"detected {m[0].layout.name} — confidence {m[0].confidence:.0%}: {m[0].reason}")
                else:
                    parts.append("⚠ no preset fits: choose a layout")
            return " · ".join(parts)
        finally:
            engine.dispose()

    def detect(self, target: Target, password: str | None) -> list[Match]:
        from idemview.ledger.detect import detect

        engine = self.engine(target, password, None)
        try:
            return [Match(m.layout.name, m.confidence, m.reason) for m in detect(engine)]
        finally:
            engine.dispose()


def _did_you_mean(name: str) -> str:
    """``": did you mean X?"`` for the known scheme (:func:`~idemview.backends.base.known_schemes`)
    closest to ``name``, else the list of known ones."""
    import difflib

    known = known_schemes()
    close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.6)
    if close:
        return f": did you mean {close[0]}?"
    return f" (idemview opens {', '.join(known)} URLs, SQLite files and dump files or folders)"


BACKEND = SqlBackend()
