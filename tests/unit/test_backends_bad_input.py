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
