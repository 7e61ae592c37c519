"""The real OS keyring: a connection's password goes through a real Secret Service (gnome-keyring-daemon,
unlocked, on a private ``dbus-run-session`` bus) — stored, read back by a fresh store, deleted — and no
byte of it reaches a file under the test's home, config or data directories.

Needs the Debian packages gnome-keyring and dbus (.ci/run installs them): skipped without them on a
developer's machine, failed on CI."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

from tests.packaging.secret_service import UNLOCK_INPUT, in_secret_service, private_env, require_secret_service

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("secret_service_child.py")


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()]


def test_password_round_trips_through_gnome_keyring_and_never_reaches_a_file(tmp_path):
    require_secret_service()
    secret = "pw-" + secrets.token_urlsafe(18)
    env = private_env(tmp_path)
    env.update(IDEMVIEW_TEST_SECRET=secret, PYTHONPATH=str(ROOT))
    home = Path(env["HOME"])
    r = subprocess.run(
        in_secret_service([sys.executable, CHILD]),
        input=UNLOCK_INPUT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {
        "available": True,
        "notice": None,
        "backend": "SecretService Keyring",
        "stored_in_keyring": True,
        "read_back": True,
        "after_delete": None,
    }
    # The keyring file exists (encrypted) and the connection was saved; the password is in neither.
    assert list((home / ".local/share/keyrings").glob("*.keyring"))
    assert _files_containing(tmp_path / "idemview-config", b"payments-prod"), "the grep looks in the wrong place"
    assert _files_containing(tmp_path, secret.encode()) == []
    assert secret not in r.stdout + r.stderr
