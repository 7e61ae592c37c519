"""Smoke test of the PyInstaller bundle dist/idemview/ (built by ``make package``; ``make package-check``
builds it and runs this file). Skipped when the bundle has not been built.

The bundle must answer ``--version``, write the demo ledger and scan it to the same JSON as the source
tree, and open its main window offscreen and quit cleanly (IDEMVIEW_QUIT_AFTER_MS hook in idemview.qt.app)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from idemview import __version__
from tests.packaging.secret_service import UNLOCK_INPUT, in_secret_service, private_env, require_secret_service

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = Path(os.environ.get("IDEMVIEW_BUNDLE", ROOT / "dist" / "idemview" / "idemview"))

pytestmark = [
    pytest.mark.bundle,
    pytest.mark.skipif(not BUNDLE.is_file(), reason=f"no bundle at {BUNDLE} (make package-check builds it)"),
]


def _env(tmp_path: Path) -> dict:
    # A private home, config and data directory: the bundle must not read or write the developer's.
    return private_env(tmp_path)


def test_version(tmp_path):
    r = subprocess.run([BUNDLE, "--version"], capture_output=True, text=True, env=_env(tmp_path), timeout=120)
    assert (r.returncode, r.stdout.strip()) == (0, f"idemview {__version__}"), r.stderr


def test_install_desktop_points_the_menu_entry_at_the_bundle(tmp_path):
    r = subprocess.run(
        [BUNDLE, "install-desktop", "--data-home", str(tmp_path / "share")],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    entry = (tmp_path / "share/applications/io.github.idemview.Idemview.desktop").read_text()
    assert f"\nExec={BUNDLE.resolve()}\n" in entry
    assert (tmp_path / "share/icons/hicolor/512x512/apps/io.github.idemview.Idemview.png").is_file()


def test_demo_then_scan_json_equals_the_source_tree(tmp_path):
    env = _env(tmp_path)
    db = tmp_path / "demo.db"
    r = subprocess.run([BUNDLE, "demo", str(db)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    scan = ["scan", str(db), "--now", "2026-11-30T12:00:00Z", "--format", "json"]
    frozen = subprocess.run([BUNDLE, *scan], capture_output=True, text=True, env=env, timeout=300)
    source = subprocess.run(
        [sys.executable, "-m", "idemview", *scan],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=300,
    )
    assert frozen.returncode == source.returncode == 0, frozen.stderr + source.stderr
    out = json.loads(frozen.stdout)
    assert out == json.loads(source.stdout), "the bundle differs from the source tree (stale? run make package)"
    assert out["counts"]["duplicate_effect"] > 0  # the planted incidents were found, not an empty scan


def test_gui_opens_offscreen_with_the_icon_and_the_os_keyring_and_quits_cleanly(tmp_path):
    # Run on a private bus with an unlocked gnome-keyring: the bundle must find the Secret Service
    # (keyring's backend needs secretstorage, jeepney and cryptography, all loaded by name).
    require_secret_service()
    shown = tmp_path / "shown.json"
    env = {**_env(tmp_path), "IDEMVIEW_QUIT_AFTER_MS": "300", "IDEMVIEW_SHOWN_FILE": str(shown)}
    r = subprocess.run(
        in_secret_service([BUNDLE, "--demo"]), input=UNLOCK_INPUT, capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    seen = json.loads(shown.read_text())
    assert seen["shown"] > 0
    assert seen["icon_sizes"] == 8  # every PNG of resources/ loaded from inside the bundle
    assert seen["keyring"] == "SecretService Keyring"
