"""The real OS keyring: a connection's password goes through a real Secret Service (gnome-keyring-daemon,
unlocked, on a private ``dbus-run-session`` bus) — stored, read back by a fresh store, deleted — and no
byte of it reaches a file under the test's home, config or data directories.

Needs the Debian packages gnome-keyring and dbus (.ci/run installs them): skipped without them on a
developer's machine, failed on CI."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ON_CI

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("secret_service_child.py")

# The daemon reads the keyring's unlock password on stdin and puts itself in the background; exec
# then hands the bus to the child, and dbus-run-session ends the bus (and the daemon with it) after.
SCRIPT = 'gnome-keyring-daemon --unlock --components=secrets >/dev/null && exec "$@"'


def _require(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        msg = f"{', '.join(missing)} missing (Debian packages gnome-keyring, dbus)"
        if ON_CI:
            pytest.fail(msg + "; CI=true: .ci/run installs them")
        pytest.skip(msg)


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()]


def test_password_round_trips_through_gnome_keyring_and_never_reaches_a_file(tmp_path):
    _require("dbus-run-session", "gnome-keyring-daemon")
    secret = "pw-" + secrets.token_urlsafe(18)
    home, run = tmp_path / "home", tmp_path / "run"
    home.mkdir()
    run.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DBUS_", "XDG_", "IDEMVIEW_", "GNOME_KEYRING", "PYTHON_KEYRING"))}
    env.update(HOME=str(home), XDG_RUNTIME_DIR=str(run), XDG_DATA_HOME=str(home / ".local/share"),
               XDG_CONFIG_HOME=str(home / ".config"), IDEMVIEW_CONFIG_DIR=str(tmp_path / "idemview-config"),
               IDEMVIEW_TEST_SECRET=secret, PYTHONPATH=str(ROOT))
    r = subprocess.run(["dbus-run-session", "--", "sh", "-c", SCRIPT, "sh", sys.executable, str(CHILD)],
                       input="keyring-unlock-pw", capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"available": True, "notice": None, "backend": "SecretService Keyring",
                   "stored_in_keyring": True, "read_back": True, "after_delete": None}
    # The keyring file exists (encrypted) and the connection was saved; the password is in neither.
    assert list((home / ".local/share/keyrings").glob("*.keyring"))
    assert _files_containing(tmp_path / "idemview-config", b"payments-prod"), "the grep looks in the wrong place"
    assert _files_containing(tmp_path, secret.encode()) == []
    assert secret not in r.stdout + r.stderr
