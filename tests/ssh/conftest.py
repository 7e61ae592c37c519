"""SSH fixtures: a real sshd on loopback (tests/sshd.py) for the whole session, in front of the test
PostgreSQL, MariaDB and Redis; and a ``$HOME`` per test whose ``~/.ssh/known_hosts`` the test chooses.
sshd not installed: skipped on a developer's machine, failed with ``CI=true``."""

from __future__ import annotations

import pytest

from tests.conftest import ON_CI
from tests.redis.conftest import redis_db  # noqa: F401 - the Redis fixture, for the tunnel's Redis test
from tests.sshd import Sshd, start_sshd


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """The running :class:`tests.sshd.Sshd` (stopped at the end of the session)."""
    try:
        server = start_sshd(tmp_path_factory.mktemp("sshd"))
    except (FileNotFoundError, RuntimeError) as e:
        msg = f"sshd cannot run: {e}"
        if ON_CI:
            pytest.fail(msg + " (CI=true: server tests must run)")
        pytest.skip(msg)
    yield server
    server.stop()


@pytest.fixture
def ssh_home(sshd: Sshd, tmp_path, monkeypatch):
    """A ``$HOME`` whose known_hosts holds the server's host key (a test may rewrite it with
    ``sshd.write_home``); no SSH agent. Returns the home folder."""
    home = sshd.write_home(tmp_path / "home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home
