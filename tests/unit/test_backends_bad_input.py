"""Bad input on every open path, tried as a new user would (issue 25 item 1, issue 23 item 5): each gives
one line and its exit code (DESIGN §9), opens nothing it was not asked to open, prints no secret."""

from __future__ import annotations

import pytest

from idemview.cli import main
from idemview.config import Connection, ConnectionStore

NOW = "2026-11-30T12:00:00Z"


@pytest.fixture
def dump_in_cwd(tmp_path, monkeypatch):
    """A valid one-file dump in the working directory: what an empty path would silently open."""
    (tmp_path / "operations.csv").write_text("idempotency_key,status\nk1,succeeded\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    return ConnectionStore()


@pytest.mark.parametrize("target", ["duckdb://", "duckdb:///", "duckdb:///%20"])
def test_a_dump_url_naming_no_file_is_refused_not_read_from_the_working_directory(target, dump_in_cwd, capsys):
    assert main(["detect", target]) == 2
    err = capsys.readouterr().err
    assert "names no file or folder" in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_saved_dump_connection_with_an_empty_path_is_refused(config, dump_in_cwd, capsys):
    config.upsert(Connection(name="empty dump", dialect="duckdb", database=""))
    assert main(["detect", "empty dump"]) == 2
    assert "names no file or folder" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["", "   "])
def test_an_empty_target_is_an_input_error(target, dump_in_cwd, capsys):
    assert main(["detect", target]) == 2
    err = capsys.readouterr().err
    assert ("no database given" in err or "is neither a database URL" in err) and err.count("\n") == 1
    assert "folder" not in err  # not read as the working directory


@pytest.mark.parametrize(
    "query",
    [
        "ssl_certfile=/etc/passwd",  # a TLS option on a plain connection: redis-py raised TypeError
        "protocol=3",  # collides with idemview's own RESP2 setting
        "client_name=x",  # CLIENT SETNAME on connect: not a read
        "socket_timeout=0",  # idemview sets its own
        "redis_connect_func=os.system",
    ],
)
def test_a_redis_url_option_idemview_does_not_pass_is_refused_before_connecting(query, capsys):
    # port 1: nothing listens; a refusal must come before any connection attempt (not "cannot connect")
    assert main(["detect", f"redis://:hunter2@127.0.0.1:1/12?{query}"]) == 2
    err = capsys.readouterr().err
    name = query.split("=")[0]
    assert f"option {name!r} refused" in err and err.count("\n") == 1
    assert "hunter2" not in err and "unexpected error" not in err


def test_rediss_takes_its_tls_options(capsys):
    # accepted (then refused by the closed port: exit 3, the options were not the problem)
    assert main(["detect", "rediss://127.0.0.1:1/12?ssl_cert_reqs=none&ssl_ca_certs=/nonexistent"]) == 3
    assert "option" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("target", "meant"),
    [
        ("postgresq://postgres@127.0.0.1/x", "postgresql"),
        ("dynamo://idempotency?region=eu-west-1", "dynamodb"),
        ("mariadbb+pymysql://root@127.0.0.1/x", "mariadb"),
    ],
)
def test_a_typo_in_the_scheme_is_an_input_error_naming_what_was_meant(target, meant, capsys):
    assert main(["detect", target]) == 2
    err = capsys.readouterr().err
    assert "unknown kind of database" in err and f"did you mean {meant}" in err and err.count("\n") == 1


def test_a_saved_connection_whose_kind_no_backend_claims_is_an_input_error(config, capsys):
    config.upsert(Connection(name="wide column", dialect="cassandra", host="127.0.0.1", database="ks"))
    assert main(["scan", "wide column", "--now", NOW]) == 2
    err = capsys.readouterr().err
    assert "unknown kind of database 'cassandra'" in err and err.count("\n") == 1


def test_the_api_refuses_an_ssh_key_without_an_ssh_host_as_the_cli_does(tmp_path, capsys):
    import idemview
    from idemview.errors import InputError

    db = tmp_path / "d.db"
    assert main(["demo", str(db), "--operations", "50", "--seed", "3"]) == 0
    capsys.readouterr()
    assert main(["detect", str(db), "--ssh-key", str(tmp_path / "id_ed25519")]) == 2
    assert "--ssh-key needs --ssh" in capsys.readouterr().err
    with pytest.raises(InputError, match="ssh_key needs ssh="):
        idemview.open(str(db), ssh_key=str(tmp_path / "id_ed25519"))
