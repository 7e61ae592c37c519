"""Helpers for tests that need a real Secret Service: a private ``dbus-run-session`` bus with
gnome-keyring-daemon started unlocked on it (Debian packages gnome-keyring and dbus; .ci/run installs
them). Without them the test is skipped on a developer's machine and fails on CI."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import ON_CI

# The daemon reads the keyring's unlock password on stdin and puts itself in the background; exec then
# hands the bus to the command, and dbus-run-session ends the bus (and the daemon with it) afterwards.
_SCRIPT = 'gnome-keyring-daemon --unlock --components=secrets >/dev/null && exec "$@"'
UNLOCK_INPUT = "keyring-unlock-pw"


def require_secret_service() -> None:
    missing = [t for t in ("dbus-run-session", "gnome-keyring-daemon") if shutil.which(t) is None]
    if missing:
        msg = f"{', '.join(missing)} missing (Debian packages gnome-keyring, dbus)"
        if ON_CI:
            pytest.fail(msg + "; CI=true: .ci/run installs them")
        pytest.skip(msg)


def in_secret_service(cmd: list) -> list:
    """``cmd`` wrapped to run on a private bus with an unlocked gnome-keyring (pass UNLOCK_INPUT on stdin)."""
    return ["dbus-run-session", "--", "sh", "-c", _SCRIPT, "sh", *map(str, cmd)]


def private_env(tmp_path: Path) -> dict:
    """The environment without the caller's bus, keyring, XDG and idemview settings, with a home,
    runtime, config and data directory of its own under ``tmp_path``."""
    home, run = tmp_path / "home", tmp_path / "run"
    home.mkdir(exist_ok=True)
    run.mkdir(mode=0o700, exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DBUS_", "XDG_", "IDEMVIEW_", "GNOME_KEYRING", "PYTHON"))
    }
    env.update(
        HOME=str(home),
        XDG_RUNTIME_DIR=str(run),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        IDEMVIEW_CONFIG_DIR=str(tmp_path / "idemview-config"),
        QT_QPA_PLATFORM="offscreen",
    )
    return env
