"""Read-only by construction (issue #19 items 1, 2): one allow-list decides what a connection URL may
carry (``idemview.ledger.driver_options``), checked by ``open_engine`` before anything connects, on
every path that makes an engine (URL, ``idemview open`` link, saved connection, a layout's
``[effects]``); LOCAL INFILE is off at the driver level whatever the URL says."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from idemview.cli import main
from idemview.errors import EXIT_USAGE, InputError
from idemview.ledger.connect import ConnectError, open_engine
from idemview.ledger.driver_options import ConnectionOptionRefused, check_url_options
from idemview.ledger.effects import open_effects_engine
from idemview.paths import ServerInLayout
from idemview.services.cancel import CancelToken
from idemview.services.session import open_ledger, spec_for_target
from tests.unit.fake_mysql import CLIENT_LOCAL_FILES, FakeMySQL

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not-really-a-key 4f1c9a"


@pytest.fixture
def secret_file(tmp_path):
    p = tmp_path / "id_ed25519"
    p.write_text(SECRET)
    return p


# ------------------------------------------------------------------ item 1: LOCAL INFILE, real socket


@pytest.mark.parametrize("name", ["mysql+pymysql", "mariadb+pymysql"])
@pytest.mark.parametrize("query", ["local_infile=1", "local_infile=true&charset=utf8mb4", "client_flag=128"])
def test_local_infile_in_url_is_refused_before_any_connection(secret_file, name, query):
    with FakeMySQL(str(secret_file)) as srv:
        with pytest.raises(ConnectionOptionRefused) as ei:
            open_engine(f"{name}://root@127.0.0.1:{srv.port}/ledger?{query}")
    assert ei.value.option in ("local_infile", "client_flag")
    assert ei.value.exit_code == EXIT_USAGE
    assert srv.connections == 0
    assert SECRET.encode() not in srv.received


@pytest.mark.parametrize("name", ["mysql+pymysql", "mariadb+pymysql", "mysql", "mariadb"])
def test_server_asking_for_a_file_gets_nothing(secret_file, name):
    """A server that asks for a local file anyway (it may: the request is the server's) gets no byte
    of it, and the client never offers CLIENT_LOCAL_FILES in its handshake."""
    with FakeMySQL(str(secret_file)) as srv:
        with pytest.raises(ConnectError):
            open_engine(f"{name}://root@127.0.0.1:{srv.port}/ledger?charset=utf8mb4&connect_timeout=5")
    assert srv.connections >= 1
    assert srv.client_flags and all(not f & CLIENT_LOCAL_FILES for f in srv.client_flags)
    assert srv.requests >= 1 and srv.received == b""


def test_effects_connection_with_local_infile_is_refused(secret_file, tmp_path):
    with FakeMySQL(str(secret_file)) as srv:
        with pytest.raises(ConnectionOptionRefused):
            open_effects_engine(f"mysql+pymysql://root@127.0.0.1:{srv.port}/pay?local_infile=1")
        with pytest.raises(ConnectError):  # and without it, nothing is sent either
            open_effects_engine(f"mariadb+pymysql://root@127.0.0.1:{srv.port}/pay")
        # written in a layout file (a folder to resolve against), a server is refused before any
        # connection: shared data may not choose where the user's credentials go
        with pytest.raises(ServerInLayout):
            open_effects_engine(f"mariadb+pymysql://root@127.0.0.1:{srv.port}/pay", tmp_path)
    assert srv.connections == 1
    assert srv.requests >= 1 and srv.received == b""


# ------------------------------------------------------------------ item 2: init_command, real MariaDB


def _ops_table(url: str) -> None:
    eng = create_engine(url)
    with eng.begin() as c:
        c.execute(text("DROP TABLE IF EXISTS operations"))
        c.execute(text("CREATE TABLE operations (id INT PRIMARY KEY, k VARCHAR(20))"))
        c.execute(text("INSERT INTO operations VALUES (1, 'a')"))
    eng.dispose()


def _has_ops(url: str) -> bool:
    eng = create_engine(url)
    try:
        return "operations" in inspect(eng).get_table_names()
    finally:
        eng.dispose()


@pytest.mark.mysql
@pytest.mark.parametrize("name", ["mysql+pymysql", "mariadb+pymysql"])
@pytest.mark.parametrize(
    "query",
    [
        "init_command=DROP TABLE operations",
        "init_command=DROP%20TABLE%20operations&charset=utf8mb4",
        "read_default_file=/etc/mysql/my.cnf",
        "autocommit=1",
        "charset=utf8mb4&sql_mode=ANSI_QUOTES",
    ],
)
def test_init_command_never_runs_and_inserts_fail(mysql_url, name, query):
    url = make_url(mysql_url).set(drivername=name).render_as_string(hide_password=False)
    _ops_table(url)
    with pytest.raises(ConnectionOptionRefused):
        open_engine(f"{url}?{query}")
    assert _has_ops(url)
    # the CLI, the GUI's "idemview open" link (the session service its tab runs) and a layout's
    # [effects] go through the same gate
    assert main(["scan", f"{url}?{query}"]) == EXIT_USAGE
    with pytest.raises(ConnectionOptionRefused):
        open_ledger(spec_for_target(f"{url}?{query}"), CancelToken())
    with pytest.raises(ConnectionOptionRefused):
        open_effects_engine(f"{url}?{query}")
    assert _has_ops(url)
    # a session idemview opened refuses writes
    eng = open_engine(f"{url}?charset=utf8mb4&connect_timeout=5")
    try:
        with pytest.raises(DBAPIError), eng.connect() as c:
            c.execute(text("INSERT INTO operations VALUES (2, 'b')"))
        with eng.connect() as c:
            assert c.execute(text("SELECT count(*) FROM operations")).scalar() == 1
    finally:
        eng.dispose()


@pytest.mark.postgres
def test_postgresql_options_cannot_undo_read_only(pg_url):
    eng = create_engine(pg_url)
    with eng.begin() as c:
        c.execute(text("DROP TABLE IF EXISTS operations"))
        c.execute(text("CREATE TABLE operations (id INT PRIMARY KEY)"))
    eng.dispose()
    for q in ("options=-c%20default_transaction_read_only%3Doff", "service=x", "passfile=/etc/passwd"):
        with pytest.raises(ConnectionOptionRefused):
            open_engine(f"{pg_url}?{q}")
    ro = open_engine(f"{pg_url}?sslmode=disable&application_name=idemview-test&connect_timeout=5")
    try:
        with pytest.raises(DBAPIError), ro.connect() as c:
            c.execute(text("INSERT INTO operations VALUES (1)"))
    finally:
        ro.dispose()


def test_refusal_names_the_option_not_its_value():
    with pytest.raises(ConnectionOptionRefused) as ei:
        check_url_options(make_url("mysql+pymysql://u@h/db?init_command=SET%20PASSWORD%3D'hunter2x'"))
    msg = str(ei.value)
    assert "'init_command'" in msg and "hunter2x" not in msg
    assert isinstance(ei.value, InputError)


def test_sqlite_url_may_only_say_read_only(tmp_path):
    db = tmp_path / "l.db"
    create_engine(f"sqlite:///{db}").connect().close()
    with pytest.raises(ConnectionOptionRefused):
        open_engine(f"sqlite:///{db}?mode=rwc")
    open_engine(f"sqlite:///{db}?mode=ro").dispose()
