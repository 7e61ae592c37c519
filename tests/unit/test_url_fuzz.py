"""Fuzz suite (issue #19): connection URLs of every dialect name and driver with arbitrary query
options. Each one either fails with a clear typed error before anything is written (an
``IdemviewError``: exit 2 for a refused option, 3 for a connection failure), or gives a session that
refuses writes — never a write, never another exception. Runs against real SQLite, PostgreSQL and
MariaDB (both the ``mysql`` and ``mariadb`` dialect names).

Host-like options (``host``, ``hostaddr``, ``port``, ``unix_socket``) only ever get loopback values:
the fuzzer must not send traffic anywhere else.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError

from idemview.errors import IdemviewError
from idemview.ledger.connect import open_engine
from idemview.ledger.driver_options import ALLOWED

SQLITE_NAMES = ["sqlite", "sqlite+pysqlite", "sqlite+aiosqlite", "sqlite+pysqlcipher"]
PG_NAMES = ["postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2", "postgresql+pg8000"]
PG_NAMES += ["postgresql+asyncpg", "postgresql+psycopg2cffi"]
MY_NAMES = [f"{b}+{d}" for b in ("mysql", "mariadb") for d in ("pymysql", "mysqldb", "mariadbconnector")]
MY_NAMES += ["mysql", "mariadb", "mysql+mysqlconnector", "mysql+aiomysql", "mariadb+asyncmy"]

#: Options that run SQL, read files or change what the session may do, by driver documentation.
HOSTILE = [
    "init_command",
    "local_infile",
    "client_flag",
    "read_default_file",
    "read_default_group",
    "autocommit",
    "conv",
    "sql_mode",
    "program_name",
    "options",
    "service",
    "passfile",
    "default_transaction_read_only",
    "isolation_level",
    "uri",
    "mode",
    "immutable",
    "check_same_thread",
    "timeout",
    "cursorclass",
    "defer_connect",
    "auth_plugin_map",
    "server_public_key",
    "multi_statements",
]
LOOPBACK = {"host": ["127.0.0.1", "localhost"], "hostaddr": ["127.0.0.1"], "port": ["5432", "3306", "1"]}
ALL_ALLOWED = sorted({k for opts in ALLOWED.values() for k in opts})
NAMED_KEYS = sorted(set(ALL_ALLOWED) | set(HOSTILE))
VALUES = st.one_of(
    st.sampled_from(
        [
            "1",
            "0",
            "true",
            "ro",
            "rwc",
            "utf8mb4",
            "latin1",
            "disable",
            "require",
            "DROP TABLE sentinel",
            "INSERT INTO sentinel VALUES (99)",
            "-c default_transaction_read_only=off",
            "/etc/passwd",
            "128",
            "5",
            "",
        ]
    ),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
)


#: Values a driver accepts for some allowed options (so that many examples do connect).
PLAUSIBLE = {
    "charset": ["utf8mb4", "utf8", "latin1"],
    "connect_timeout": ["5", "10"],
    "read_timeout": ["30"],
    "write_timeout": ["30"],
    "sslmode": ["disable", "prefer", "allow"],
    "application_name": ["idemview-fuzz", "x; DROP TABLE sentinel"],
    "fallback_application_name": ["fuzz"],
    "keepalives": ["1", "0"],
    "keepalives_idle": ["30"],
    "target_session_attrs": ["any", "read-write", "read-only"],
    "mode": ["ro"],
    "ssl_check_hostname": ["false"],
    "gssencmode": ["disable"],
}


def _query(keys, plausible: bool = False):
    def value_for(k):
        if k in LOOPBACK:
            return st.sampled_from(LOOPBACK[k])
        if k == "unix_socket":
            return st.just("/nonexistent/mysqld.sock")
        if plausible and k in PLAUSIBLE:
            return st.sampled_from(PLAUSIBLE[k])
        return VALUES

    key = st.sampled_from(keys)
    if not plausible:
        key = st.one_of(key, st.text(st.characters(codec="ascii", categories=("Ll", "Nd")), min_size=1))
    return st.dictionaries(key, st.just(None), max_size=4).flatmap(
        lambda d: st.fixed_dictionaries({k: value_for(k) for k in d})
    )


def _refuses_writes(engine) -> bool:
    """True when the session refuses both DDL and an INSERT into the sentinel table."""
    for stmt in ("CREATE TABLE fuzz_written (x INT)", "INSERT INTO sentinel VALUES (2)"):
        try:
            with engine.connect() as c:
                c.execute(text(stmt))
                c.commit()
        except DBAPIError:
            continue
        return False
    return True


def _check(url: URL, writable, names_before: set[str]) -> None:
    try:
        eng = open_engine(url)
    except IdemviewError as e:
        event(f"refused: exit {e.exit_code}")  # a clear, typed error (option: 2; cannot connect: 3)
    else:
        event("opened read-only")
        try:
            assert _refuses_writes(eng), url.render_as_string()
        finally:
            eng.dispose()
    # never a write: the sentinel row is alone and no table appeared or vanished
    with writable.connect() as c:
        assert c.execute(text("SELECT count(*) FROM sentinel")).scalar() == 1
    assert set(inspect(writable).get_table_names()) == names_before


def _sentinel(writable) -> set[str]:
    with writable.begin() as c:
        c.execute(text("DROP TABLE IF EXISTS fuzz_written"))
        c.execute(text("DROP TABLE IF EXISTS sentinel"))
        c.execute(text("CREATE TABLE sentinel (x INT)"))
        c.execute(text("INSERT INTO sentinel VALUES (1)"))
    return set(inspect(writable).get_table_names())


def queries(name: str):
    """No option, options this driver takes (plausible values), any allowed option, or anything."""
    from idemview.ledger.driver_options import driver_of

    own = sorted(set(ALLOWED.get(driver_of(make_url(f"{name}://")), {})) & set(PLAUSIBLE)) or ["mode"]
    return st.one_of(st.just({}), _query(own, plausible=True), _query(ALL_ALLOWED), _query(NAMED_KEYS))


def named(names):
    return st.sampled_from(names).flatmap(lambda n: st.tuples(st.just(n), queries(n)))


FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def sqlite_target(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "ledger.db"
    eng = create_engine(f"sqlite:///{path}")
    names = _sentinel(eng)
    yield path, eng, names
    eng.dispose()


@given(case=named(SQLITE_NAMES))
@FUZZ
def test_fuzz_sqlite(sqlite_target, case):
    name, query = case
    path, eng, names = sqlite_target
    _check(URL.create(name, database=str(path), query=query), eng, names)


@pytest.fixture(scope="module")
def pg_target(pg_url):
    eng = create_engine(pg_url)
    names = _sentinel(eng)
    yield make_url(pg_url), eng, names
    eng.dispose()


@pytest.mark.postgres
@given(case=named(PG_NAMES))
@FUZZ
def test_fuzz_postgresql(pg_target, case):
    name, query = case
    base, eng, names = pg_target
    _check(base.set(drivername=name, query=query), eng, names)


@pytest.fixture(scope="module")
def mysql_target(mysql_url):
    eng = create_engine(mysql_url)
    names = _sentinel(eng)
    yield make_url(mysql_url), eng, names
    eng.dispose()


@pytest.mark.mysql
@given(case=named(MY_NAMES))
@FUZZ
def test_fuzz_mysql_family(mysql_target, case):
    name, query = case
    base, eng, names = mysql_target
    _check(base.set(drivername=name, query=query), eng, names)


def _hostile_pairs():
    from idemview.ledger.driver_options import driver_of

    for name in MY_NAMES + PG_NAMES + SQLITE_NAMES:
        allowed = ALLOWED.get(driver_of(make_url(f"{name}://")), {})
        for option in HOSTILE:
            if option not in allowed:  # pg8000's and asyncpg's `timeout` is a connect timeout
                yield name, option


@pytest.mark.parametrize("name,option", list(_hostile_pairs()))
def test_every_hostile_option_is_refused_before_connecting(name, option):
    """Checked without a server: the refusal comes before any connection (port 1 has no listener)."""
    from idemview.ledger.driver_options import ConnectionOptionRefused

    if name.startswith("sqlite"):
        url = URL.create(name, database="/nonexistent/x.db", query={option: "1"})
    else:
        url = URL.create(name, username="u", host="127.0.0.1", port=1, database="d", query={option: "1"})
    with pytest.raises(ConnectionOptionRefused) as ei:
        open_engine(url)
    assert ei.value.option == option
