"""What a connection URL may carry: one allow-list of query options per driver (issue #19 items 1, 2).

A URL's query options reach the DBAPI driver's ``connect()`` as keyword arguments (SQLAlchemy's
``create_connect_args``: ``opts.update(url.query)`` for MySQLdb/PyMySQL, libpq conninfo keywords for
psycopg). Several of them run statements or read files before idemview can make the session
read-only: MySQL ``init_command`` (any SQL, e.g. ``DROP TABLE``), ``local_infile``/``client_flag``
(``LOAD DATA LOCAL``: the server may ask for any client file), ``read_default_file`` (an option file
with its own ``init-command``), ``autocommit``, ``conv``; PostgreSQL ``options`` (``-c
default_transaction_read_only=off``), ``service``/``passfile`` (settings read from other files). Rather
than list what is dangerous (the list of driver keywords grows with every release), this module lists
what is harmless and needed to *reach* a server: TLS material, character set, timeouts, host/socket,
an application name. Anything else is refused with :class:`ConnectionOptionRefused` before any
connection is made.

:func:`check_url_options` is called by :func:`idemview.ledger.connect.open_engine`, the one function
every engine of idemview is made by (CLI URL, ``idemview open`` link, saved connection, a layout's
``[effects]`` connection, the Python API, the GUI). :func:`driver_connect_args` gives the driver-level
settings idemview always passes (they override the URL's): LOCAL INFILE off and the session made
read-only by the driver's own ``init_command`` on the MySQL family.

Sources read for the keyword names: PyMySQL ``connections.py`` (``Connection.__init__``), SQLAlchemy
``dialects/mysql/mysqldb.py`` (``create_connect_args``: which query keys it coerces or folds into
``ssl``), libpq's "Parameter Key Words" (PostgreSQL 16 docs, §34.1.2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlalchemy.engine import URL

from idemview.errors import InputError
from idemview.ledger.dialects import MYSQL, POSTGRESQL, SQLITE, family

#: A value check: returns a reason when the value is refused, else ``None``.
Check = Callable[[str], "str | None"]


def _any(_v: str) -> str | None:
    return None


def _whole_seconds(v: str) -> str | None:
    return None if v.strip().isdigit() else "must be a whole number of seconds"


def _only(*allowed: str) -> Check:
    def check(v: str) -> str | None:
        return None if v in allowed else f"must be {' or '.join(map(repr, allowed))}"

    return check


_MYSQL_TLS = {k: _any for k in ("ssl_ca", "ssl_cert", "ssl_key", "ssl_capath", "ssl_cipher")}
_MYSQL_COMMON: dict[str, Check] = {
    "charset": _any,  # a bad one is refused by the driver, before the handshake
    "connect_timeout": _whole_seconds,
    "read_timeout": _whole_seconds,
    "write_timeout": _whole_seconds,
    "unix_socket": _any,
    "ssl_check_hostname": _only("true", "false", "1", "0"),
    **_MYSQL_TLS,
}
_LIBPQ: dict[str, Check] = {
    # where the server is (SQLAlchemy 2's multi-host form: ?host=a:5432&host=b:5432)
    **{k: _any for k in ("host", "hostaddr", "port")},
    # TLS and authentication policy (each only makes the connection stricter or names a file of keys)
    **{
        k: _any
        for k in (
            "sslmode",
            "sslrootcert",
            "sslcert",
            "sslkey",
            "sslpassword",
            "sslcrl",
            "sslcrldir",
            "sslsni",
            "sslnegotiation",
            "sslcertmode",
            "ssl_min_protocol_version",
            "ssl_max_protocol_version",
            "gssencmode",
            "krbsrvname",
            "gsslib",
            "channel_binding",
            "require_auth",
            "requirepeer",
        )
    },
    "connect_timeout": _whole_seconds,
    "tcp_user_timeout": _whole_seconds,
    **{k: _any for k in ("keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count")},
    "application_name": _any,  # a label in pg_stat_activity, never executed
    "fallback_application_name": _any,
    "target_session_attrs": _any,
    "load_balance_hosts": _any,
}

#: Query options allowed per (family, driver). A driver not listed may take no option at all.
ALLOWED: Mapping[tuple[str, str], Mapping[str, Check]] = {
    (SQLITE, "pysqlite"): {"mode": _only("ro")},  # the file is always opened read-only anyway
    (MYSQL, "pymysql"): _MYSQL_COMMON,
    (MYSQL, "mysqldb"): _MYSQL_COMMON,
    (MYSQL, "mariadbconnector"): {k: v for k, v in _MYSQL_COMMON.items() if k != "ssl_check_hostname"},
    (POSTGRESQL, "psycopg"): _LIBPQ,
    (POSTGRESQL, "psycopg2"): _LIBPQ,
    (POSTGRESQL, "pg8000"): {"application_name": _any, "timeout": _whole_seconds},
    (POSTGRESQL, "asyncpg"): {"ssl": _any, "timeout": _whole_seconds},
}

#: The driver SQLAlchemy picks for a URL without ``+driver`` (and the one idemview installs).
DEFAULT_DRIVER = {SQLITE: "pysqlite", MYSQL: "pymysql", POSTGRESQL: "psycopg"}

#: Where a URL's ``?query`` is passed to ``connect()`` unchanged, multi-valued keys are refused except these.
_MULTI_OK = {"host", "hostaddr", "port"}


class ConnectionOptionRefused(InputError):
    """A connection URL carries a query option idemview does not pass to the driver (it could run a
    statement, read a local file or undo read-only before idemview's own settings apply): exit code 2.
    ``option`` names it; nothing was connected."""

    option: str = ""


def driver_of(u: URL) -> tuple[str, str]:
    """``(family, driver)`` of ``u``: ``mariadb+pymysql`` is ``("mysql", "pymysql")``; a URL without a
    driver has the one :data:`DEFAULT_DRIVER` names (``postgresql://`` is psycopg: idemview's choice)."""
    backend, _, driver = u.drivername.partition("+")
    if backend == "postgres":
        backend = "postgresql"
    fam = family(backend)
    return fam, driver or DEFAULT_DRIVER.get(fam, "")


def check_url_options(u: URL) -> None:
    """Refuse ``u`` when its query carries an option not in :data:`ALLOWED` for its driver, or an
    allowed option with a value refused by its check. Raises :class:`ConnectionOptionRefused` naming
    the option (never its value: it could be a secret). Makes no connection."""
    fam, driver = driver_of(u)
    allowed = ALLOWED.get((fam, driver), {})
    for key in sorted(u.query):
        raw = u.query[key]
        values = raw if isinstance(raw, tuple) else (raw,)
        check = allowed.get(key)
        why: str | None
        if check is None:
            hint = f" (allowed: {', '.join(sorted(allowed))})" if allowed else " (it takes none)"
            why = f"is not an option idemview passes to {u.drivername.partition('+')[0]}+{driver}{hint}"
        elif len(values) > 1 and key not in _MULTI_OK:
            why = "is given more than once"
        else:
            why = next((r for r in map(check, values) if r), None)
        if why:
            err = ConnectionOptionRefused(f"connection option {key!r} refused: it {why}; nothing was connected")
            err.option = key
            raise err


#: Read-only as the first statement of every MySQL-family session, run by the driver itself while
#: connecting (PyMySQL/MySQLdb/MariaDB Connector ``init_command``), before SQLAlchemy or anyone else
#: sends a statement on it.
MYSQL_INIT = "SET SESSION TRANSACTION READ ONLY"


def driver_connect_args(u: URL) -> dict:
    """Keyword arguments idemview always passes to the driver's ``connect()`` (they override any URL
    option of the same name). MySQL family: ``local_infile`` off (PyMySQL then never sets
    ``CLIENT_LOCAL_FILES`` and refuses a server's LOAD LOCAL request) and :data:`MYSQL_INIT`."""
    fam, driver = driver_of(u)
    if fam == MYSQL and driver in ("pymysql", "mysqldb", "mariadbconnector"):
        return {"local_infile": False if driver != "mysqldb" else 0, "init_command": MYSQL_INIT}
    return {}
