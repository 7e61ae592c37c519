"""Shared fixtures: real SQLite files, and real PostgreSQL and MariaDB/MySQL databases.

Server tests use a database of their own per test process (``idemview_t_<pid>``), created at the start
and dropped at the end, so parallel runs do not collide. Where a server is unreachable the test is
skipped on a developer's machine and **fails** when ``CI=true`` (CI must run them, not skip them).
Override the servers with ``IDEMVIEW_PG_ADMIN_URL`` and ``IDEMVIEW_MYSQL_ADMIN_URL``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Tests never touch the developer's OS keyring: keyring's fail backend unless a test sets its own
# (keyring.set_keyring, e.g. tests/gui/test_keyring_notice.py).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")

PG_ADMIN = os.environ.get("IDEMVIEW_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
MY_ADMIN = os.environ.get("IDEMVIEW_MYSQL_ADMIN_URL", "mysql+pymysql://root@127.0.0.1:3306/")
DBNAME = f"idemview_t_{os.getpid()}"
ON_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

ANCHOR = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)

# On CI, property tests explore the same examples every run (a red CI must be reproducible); on a
# developer's machine they keep searching new ones.
try:
    from hypothesis import settings as _hyp_settings

    _hyp_settings.register_profile("ci", derandomize=True, print_blob=True)
    if ON_CI:
        _hyp_settings.load_profile("ci")
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    pass


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory, monkeypatch):
    """Every test runs with its own config and data folders and an in-memory keyring.

    idemview's settings (``IDEMVIEW_CONFIG_DIR``), generated data (``IDEMVIEW_DATA_DIR``) and anything
    platformdirs would place under the user's home (``XDG_*``) go to a temporary folder; the keyring is a
    fresh :class:`tests.memkeyring.MemoryKeyring`, also for subprocesses (``PYTHON_KEYRING_BACKEND``), so
    no test reads or writes the developer's real settings or probes the OS keyring. A test may still
    point ``IDEMVIEW_CONFIG_DIR`` elsewhere with its own ``monkeypatch.setenv``.
    """
    import keyring

    from tests.memkeyring import MemoryKeyring

    home = tmp_path_factory.mktemp("home")
    for var, sub in (
        ("IDEMVIEW_CONFIG_DIR", "config/idemview"),
        ("IDEMVIEW_DATA_DIR", "data/idemview"),
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_STATE_HOME", "state"),
    ):
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "tests.memkeyring.MemoryKeyring")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), ROOT) if p))
    keyring.set_keyring(MemoryKeyring())
    yield


# Set before any test (or import) asks keyring for its default backend, which would probe the OS keyring.
os.environ["PYTHON_KEYRING_BACKEND"] = "tests.memkeyring.MemoryKeyring"


def _unavailable(what: str, err: Exception):
    msg = f"{what} is not reachable: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    if ON_CI:
        pytest.fail(msg + " (CI=true: server tests must run)")
    pytest.skip(msg)


@pytest.fixture(scope="session")
def pg_url():
    """URL of a fresh PostgreSQL database for this test process (dropped afterwards)."""
    try:
        admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{DBNAME}"'))
            c.execute(text(f'CREATE DATABASE "{DBNAME}"'))
    except Exception as e:  # noqa: BLE001 - any failure means "no server"
        _unavailable("PostgreSQL", e)
    url = make_url(PG_ADMIN).set(database=DBNAME)
    yield url.render_as_string(hide_password=False)
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{DBNAME}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def mysql_url():
    """URL of a fresh MariaDB/MySQL database for this test process (dropped afterwards)."""
    try:
        admin = create_engine(MY_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f"DROP DATABASE IF EXISTS `{DBNAME}`"))
            c.execute(text(f"CREATE DATABASE `{DBNAME}` CHARACTER SET utf8mb4"))
    except Exception as e:  # noqa: BLE001
        _unavailable("MariaDB/MySQL", e)
    url = make_url(MY_ADMIN).set(database=DBNAME)
    yield url.render_as_string(hide_password=False)
    with admin.connect() as c:
        c.execute(text(f"DROP DATABASE IF EXISTS `{DBNAME}`"))
    admin.dispose()


def _clear(engine):
    """Drop every table (fixtures recreate what they need)."""
    from sqlalchemy import MetaData

    md = MetaData()
    md.reflect(engine)
    md.drop_all(engine)


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def db(request, tmp_path):
    """(writable engine, URL string) of an empty database on each engine. The test writes its fixture
    with the writable engine, then opens the URL read-only the way idemview does."""
    name = request.param
    if name == "sqlite":
        path = tmp_path / "ledger.db"
        url = f"sqlite:///{path}"
        eng = create_engine(url)
        yield eng, str(path)
        eng.dispose()
        return
    url = request.getfixturevalue("pg_url" if name == "postgresql" else "mysql_url")
    eng = create_engine(url)
    _clear(eng)
    yield eng, url
    eng.dispose()


@pytest.fixture
def sqlite_db(tmp_path):
    path = tmp_path / "ledger.db"
    eng = create_engine(f"sqlite:///{path}")
    yield eng, str(path)
    eng.dispose()


def _installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a dotted name whose parent package is missing
        return False


#: Every SQLAlchemy dialect name (with each installed driver) idemview must speak: SQLite, PostgreSQL,
#: and MySQL-family under both the ``mysql`` and the ``mariadb`` names (issue #9). Drivers that are not
#: installed are left out; the ones this project installs (psycopg, PyMySQL) always run.
DIALECT_NAMES = ["sqlite"] + [
    name
    for name, module in (
        ("postgresql+psycopg", "psycopg"),
        ("postgresql+psycopg2", "psycopg2"),
        ("postgresql+pg8000", "pg8000"),
        ("mysql+pymysql", "pymysql"),
        ("mariadb+pymysql", "pymysql"),
        ("mysql+mysqldb", "MySQLdb"),
        ("mariadb+mysqldb", "MySQLdb"),
        ("mysql+mysqlconnector", "mysql.connector"),
        ("mariadb+mariadbconnector", "mariadb"),
    )
    if _installed(module)
]


@pytest.fixture(params=DIALECT_NAMES)
def dialect_db(request, tmp_path):
    """Like :func:`db`, once per dialect name in :data:`DIALECT_NAMES`: (writable engine, URL string
    spelled with that dialect name and driver)."""
    name = request.param
    if name == "sqlite":
        path = tmp_path / "ledger.db"
        eng = create_engine(f"sqlite:///{path}")
        yield eng, str(path)
        eng.dispose()
        return
    base = request.getfixturevalue("pg_url" if name.startswith("postgresql") else "mysql_url")
    url = make_url(base).set(drivername=name).render_as_string(hide_password=False)
    eng = create_engine(url)
    _clear(eng)
    yield eng, url
    eng.dispose()
