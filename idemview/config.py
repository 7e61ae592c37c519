"""Saved connections and their credentials (DESIGN §8).

Connections live as TOML in the user config directory (``platformdirs.user_config_dir("idemview")``,
overridable with ``IDEMVIEW_CONFIG_DIR``), one table per connection, with **no secret** in them. The
password lives in the OS keyring under service ``idemview``, keyed by the connection id. When no
keyring backend works, or it is locked, :class:`CredentialStore` says so and keeps the password in
memory for this session only: it is never written to disk or logged.
"""

from __future__ import annotations

import logging
import os
import sys
import tomllib
import uuid
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs
import tomli_w
from sqlalchemy.engine import URL

from idemview.errors import InputError
from idemview.masking import masker as _masker
from idemview.paths import PROTECTED, note_source

if TYPE_CHECKING:
    from idemview.masking.masker import Masker, MaskRules

log = logging.getLogger(__name__)

KEYRING_SERVICE = "idemview"
DIALECTS = {
    "sqlite": "sqlite",
    "postgresql": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}


def config_dir() -> Path:
    """Where idemview keeps its settings (created on first use)."""
    d = os.environ.get("IDEMVIEW_CONFIG_DIR")
    p = Path(d) if d else Path(platformdirs.user_config_dir("idemview", appauthor=False))
    p.mkdir(parents=True, exist_ok=True)
    return p


def data_dir() -> Path:
    """Where idemview keeps generated data (the demo ledger)."""
    d = os.environ.get("IDEMVIEW_DATA_DIR")
    p = Path(d) if d else Path(platformdirs.user_data_dir("idemview", appauthor=False))
    p.mkdir(parents=True, exist_ok=True)
    return p


#: The user's settings file beside ``connections.toml``; its ``[masking]`` table extends the masking rules
#: (:meth:`idemview.masking.masker.MaskRules.from_config`).
SETTINGS_FILE = "settings.toml"
_RULES_CACHE: dict[str, Any] = {}


def settings_path() -> Path:
    """``config_dir()/settings.toml`` (``IDEMVIEW_SETTINGS`` names another file)."""
    p = os.environ.get("IDEMVIEW_SETTINGS")
    return Path(p) if p else config_dir() / SETTINGS_FILE


def masking_rules() -> MaskRules:
    """The masking rules in force: the shipped ones extended by the ``[masking]`` table of
    :func:`settings_path` (absent file or table: the shipped rules). Re-read when the file changes
    (its mtime and size), else cached. Raises :class:`~idemview.errors.InputError` naming the file for
    unreadable TOML or a bad ``[masking]`` entry (unknown key, bad regex, a credential detector
    disabled): masking is never silently weaker than the user asked."""
    from idemview.masking.masker import MaskRules

    path = settings_path()
    try:
        st = path.stat()
        stamp: tuple = (str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = (str(path), None, None)
    if _RULES_CACHE.get("stamp") == stamp:
        return _RULES_CACHE["rules"]
    if stamp[1] is None:
        rules = MaskRules.default()
    else:
        try:
            with open(path, "rb") as f:
                doc = tomllib.load(f)
            table = doc.get("masking")
            rules = MaskRules.from_config(table, source=str(path)) if table is not None else MaskRules.default()
        except (OSError, tomllib.TOMLDecodeError, ValueError, TypeError) as e:
            raise InputError(f"settings {path}: [masking]: {e}") from None
    _RULES_CACHE.update(stamp=stamp, rules=rules)
    return rules


def new_masker(key: bytes | None = None, *, without: frozenset[str] = frozenset()) -> Masker:
    """The one way idemview makes a :class:`~idemview.masking.masker.Masker`: with :func:`masking_rules`
    (so the user's ``[masking]`` settings apply to the GUI, the CLI, the API, exports and logs alike)
    and ``key`` (bytes; default random per Masker). ``without`` names detectors left out (the ledger
    audit leaves out ``named_value``, which errs on the safe side in free text). Raises what
    :func:`masking_rules` raises."""
    from dataclasses import replace

    from idemview.masking.masker import Masker

    rules = masking_rules()
    if without:
        rules = replace(rules, detectors=rules.detectors - without)
    return Masker(rules, key=key)


@dataclass
class Connection:
    """A saved connection: everything but the password.

    ``dialect`` is a SQLAlchemy backend name (``sqlite``, ``postgresql``, ``mysql``, ``mariadb`` or any
    other installed dialect), ``driver`` optional (``psycopg``, ``pymysql``...). For SQLite, ``database``
    is the file path. ``layout`` is a preset name or a layout file path (empty: detect). ``naive_zone``
    is the IANA zone naive timestamps were written in. ``tls`` holds driver TLS options (``sslmode``...).
    ``schema`` says where the layout's tables are when not in the preset's schema (empty: the preset's,
    else found as detection finds them). ``status_map`` / ``outcome_map`` map raw values the layout
    does not know (``{"RETRIES_EXCEEDED" = "failed"}``) without editing the preset. ``actions`` is the
    connection's own ``[actions]`` section (``{"rules": [{"match": REGEX, "action": CLASS}],
    "regulated": [CLASS]}``, DESIGN §5.1), tried before the layout's rules and the shipped vocabulary.
    ``ssh`` (``USER@HOST[:PORT]``, empty: direct) and ``ssh_key`` (a private key file's path) reach the
    database through an SSH tunnel (DESIGN §5.3, :mod:`idemview.ledger.tunnel`); ``host``/``port`` are then
    as seen from the SSH host. The key passphrase or SSH password lives in the keyring under
    ``<id>:ssh``, never here. ``tls`` is the URL's query options: a driver's TLS options, and a backend's
    own (DynamoDB's ``region``, ``endpoint_url``, ``profile``: :mod:`idemview.backends.dynamodb`, whose
    ``dialect`` is ``dynamodb`` and ``database`` the table; a dump's ``dialect`` is ``duckdb`` and
    ``database`` its file or folder)."""

    name: str
    dialect: str = "sqlite"
    driver: str = ""
    host: str = ""
    port: int | None = None
    database: str = ""
    user: str = ""
    tls: dict = field(default_factory=dict)
    layout: str = ""
    naive_zone: str = "UTC"
    colour: str = ""
    schema: str = ""
    status_map: dict = field(default_factory=dict)
    outcome_map: dict = field(default_factory=dict)
    actions: dict = field(default_factory=dict)
    ssh: str = ""
    ssh_key: str = ""
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def url(self, password: str | None = None) -> URL:
        """The SQLAlchemy URL (built with ``URL.create``, so no character needs escaping)."""
        drivername = self.dialect + (f"+{self.driver}" if self.driver else "")
        if not self.driver and self.dialect in DIALECTS:
            drivername = DIALECTS[self.dialect]
        if self.dialect == "sqlite":
            return URL.create(drivername, database=self.database)
        return URL.create(
            drivername,
            username=self.user or None,
            password=password or None,
            host=self.host or None,
            port=self.port,
            database=self.database or None,
            query={k: str(v) for k, v in self.tls.items()},
        )

    @classmethod
    def from_url(cls, name: str, url: str) -> tuple[Connection, str | None]:
        """Split a pasted SQLAlchemy URL into fields; returns (connection, password or None).

        The user info ends at the last ``@`` before the host (libpq's reading,
        :func:`idemview.ledger.connect.split_url`), so no fragment of a password lands in the host.
        Query parameters that carry a secret (``password=``, ``sslpassword=``, ``token=``...) are never
        kept in the connection (it is saved to disk); a ``password=`` parameter is returned as the
        password when the user info has none. Raises ``ValueError`` on a malformed URL (message
        without the password)."""
        from idemview.masking.masker import MaskRules, register_secret, url_password_candidates
        from idemview.urls import split_url

        for pw in url_password_candidates(url):
            register_secret(pw)  # never echoed by any message from here on
        try:
            u = split_url(url)
            u.port  # noqa: B018 - a non-numeric port raises here
        except Exception:
            raise ValueError("not a SQLAlchemy URL (expected e.g. postgresql://user@host:5432/db)") from None
        rules = MaskRules.default()
        secret_params = {
            k: v
            for k, v in u.query.items()
            if rules.classify_url_param(k) is not None or rules.classify_name(k) is not None
        }
        password = u.password
        given = secret_params.get("password")
        if password is None and isinstance(given, str):
            password = given
        for v in secret_params.values():
            for x in v if isinstance(v, tuple) else (v,):
                register_secret(x)
        backend = u.get_backend_name()
        driver = u.get_driver_name() if "+" in u.drivername else ""
        c = cls(
            name=name,
            dialect=backend,
            driver=driver,
            host=u.host or "",
            port=u.port,
            database=u.database or "",
            user=u.username or "",
            tls={k: v for k, v in u.query.items() if isinstance(v, str) and k not in secret_params},
        )
        register_secret(password)
        return c, password


PROTECTED.append(lambda: config_dir() / "connections.toml")


class ConnectionStore:
    """Saved connections in ``connections.toml`` (no secrets). Writes are atomic (temp + rename)."""

    def __init__(self, path: Path | None = None):
        self.path = path or (config_dir() / "connections.toml")
        note_source(self.path)  # no export, demo or layout save ever writes over it (idemview.paths)

    def load(self) -> list[Connection]:
        """The saved connections; a damaged file is reported in the log and read as empty (never
        overwritten until the user saves)."""
        if not self.path.exists():
            return []
        try:
            d = tomllib.loads(self.path.read_text("utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            log.warning("cannot read %s: %s", self.path, e)
            return []
        names = {f.name for f in fields(Connection)}
        out = []
        for cid, entry in (d.get("connections") or {}).items():
            if not isinstance(entry, dict) or "name" not in entry:
                continue
            kw = {k: v for k, v in entry.items() if k in names and k != "password"}
            kw["id"] = cid
            out.append(Connection(**kw))
        return out

    def save(self, conns: list[Connection]) -> None:
        d: dict[str, dict] = {"connections": {}}
        for c in conns:
            e = {k: v for k, v in asdict(c).items() if k != "id" and v not in (None, "", {})}
            d["connections"][c.id] = e
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(tomli_w.dumps(d), "utf-8")
        os.replace(tmp, self.path)

    def find(self, name_or_id: str) -> Connection | None:
        for c in self.load():
            if c.name == name_or_id or c.id == name_or_id:
                return c
        return None

    def upsert(self, conn: Connection) -> None:
        conns = [c for c in self.load() if c.id != conn.id]
        conns.append(conn)
        self.save(conns)

    def delete(self, conn_id: str) -> None:
        self.save([c for c in self.load() if c.id != conn_id])


def keyring_backend_name() -> str:
    """The keyring backend ``keyring.get_keyring()`` chose, in words (``SecretService Keyring``,
    ``fail Keyring``; a chainer lists the backends it chains)."""
    try:
        import keyring

        kr = keyring.get_keyring()
    except Exception as e:  # a broken backend must not stop the app
        return f"none ({type(e).__name__})"
    subs = getattr(kr, "backends", None)
    if subs:
        return " + ".join(str(getattr(b, "name", type(b).__name__)) for b in subs)
    return str(getattr(kr, "name", type(kr).__name__))


def _keyring_advice() -> str:
    if sys.platform.startswith("linux") or "bsd" in sys.platform:
        return (
            "To remember passwords, run and unlock a Secret Service keyring (e.g. gnome-keyring) "
            "or KWallet, then restart idemview."
        )
    return "To remember passwords, unlock the system keychain, then restart idemview."


class CredentialStore:
    """Passwords in the OS keyring (service ``idemview``, user name = connection id).

    ``available`` is False when no keyring backend works (or it is locked); ``notice`` then says so in
    plain words — the backend tried (``backend``) and how to get one — and passwords are kept in this
    object's memory only, for this session. The one notice is shown everywhere (connection dialog and
    main window); ``listeners`` (callables without arguments) are called when it changes, e.g. when a
    keyring that looked usable turns out to be locked on first use."""

    def __init__(self):
        self._memory: dict[str, str] = {}
        self.notice: str | None = None
        self.listeners: list = []
        self.backend = keyring_backend_name()
        self.available = self._probe()

    def _probe(self) -> bool:
        try:
            import keyring
            from keyring.backends import fail

            kr = keyring.get_keyring()
            if isinstance(kr, fail.Keyring):
                # keyring's "fail Keyring" is its placeholder for "none found": not a backend to name
                self.notice = (
                    "No OS keyring is available (no keyring backend is installed or running): passwords are "
                    f"kept for this session only. {_keyring_advice()}"
                )
                return False
            return True
        except Exception as e:  # a broken backend must not stop the app
            self.notice = (
                f"The OS keyring cannot be used ({self.backend}: {type(e).__name__}): passwords "
                f"are kept for this session only. {_keyring_advice()}"
            )
            return False

    def get(self, conn_id: str) -> str | None:
        if conn_id in self._memory:
            return self._memory[conn_id]
        if not self.available:
            return None
        try:
            import keyring

            pw = keyring.get_password(KEYRING_SERVICE, conn_id)
            from idemview.masking.masker import register_secret

            register_secret(pw)  # a password read from the keyring is never echoed either
            return pw
        except Exception as e:
            self._degrade(e)
            return None

    def set(self, conn_id: str, password: str) -> bool:
        """Store the password; True when it went to the keyring, False when kept for the session."""
        from idemview.masking.masker import register_secret

        register_secret(password)
        if self.available:
            try:
                import keyring

                keyring.set_password(KEYRING_SERVICE, conn_id, password)
                self._memory.pop(conn_id, None)
                return True
            except Exception as e:
                self._degrade(e)
        self._memory[conn_id] = password
        return False

    def delete(self, conn_id: str) -> None:
        self._memory.pop(conn_id, None)
        if self.available:
            try:
                import keyring

                keyring.delete_password(KEYRING_SERVICE, conn_id)
            except Exception:
                pass

    def _degrade(self, e: Exception) -> None:
        # Locked or broken keyring: say so once, never include the password or the exception's args.
        was = self.available
        self.available = False
        why = "it is locked" if type(e).__name__ == "KeyringLocked" else type(e).__name__
        self.notice = (
            f"The OS keyring refused access ({self.backend}: {why}): passwords are kept for "
            f"this session only. {_keyring_advice()}"
        )
        if was:
            log.warning("%s", self.notice)  # the same words as the GUI's notice (no secret in them)
            for fn in list(self.listeners):
                try:
                    fn()
                except Exception:  # a closed window's listener must not break the store
                    log.debug("keyring notice listener failed", exc_info=True)


# Messages (errors, banners, logs) are masked with the configured rules too.
_masker.set_rules_source(masking_rules)
