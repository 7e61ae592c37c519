"""The wheel: every package under idemview/ is listed in pyproject.toml, and the built wheel installs into
a fresh virtual environment where ``idemview --version``, ``python -m idemview --version`` and the resources
work.

The install check takes ~40 s (a venv and the dependencies from pip's cache), so it runs on CI
(``CI=true``) and with ``make wheel-check`` (``IDEMVIEW_WHEEL_CHECK=1``), and is skipped otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from idemview import __version__
from tests.conftest import ON_CI

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_lists_every_package_under_idemview():
    # packages are listed, not discovered (resources/ maps onto idemview.resources), so a new
    # sub-package left out of the list would silently be missing from the wheel.
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "idemview").rglob("__init__.py")}
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert cfg["package-dir"]["idemview.resources"] == "resources"
    assert listed - on_disk == {"idemview.resources"}


needs_wheel_check = pytest.mark.skipif(
    not (ON_CI or os.environ.get("IDEMVIEW_WHEEL_CHECK")), reason="slow (~40 s): runs on CI and with `make wheel-check`"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (whl,) = out.glob("idemview-*.whl")
    return whl


@needs_wheel_check
def test_wheel_carries_resources_presets_and_entry_points(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for n in (
        "idemview/__main__.py",
        "idemview/resources/io.github.idemview.Idemview.desktop",
        "idemview/resources/io.github.idemview.Idemview.metainfo.xml",
        "idemview/resources/io.github.idemview.Idemview.svg",
        "idemview/resources/icon-512.png",
        "idemview/layouts/presets/idemview.toml",
    ):
        assert n in names, n
    assert not any(n.startswith(("resources/", "tests/", "packaging/")) for n in names)
    ep = zipfile.ZipFile(wheel).read(f"idemview-{__version__}.dist-info/entry_points.txt").decode()
    assert "[console_scripts]\nidemview = idemview.cli:main" in ep
    assert "[gui_scripts]\nidemview-gui = idemview.cli:gui_main" in ep
    meta = zipfile.ZipFile(wheel).read(f"idemview-{__version__}.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in meta


@needs_wheel_check
def test_wheel_installs_into_a_fresh_venv(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_ = env_dir / "bin"
    # Outside the test harness's settings: no PYTHONPATH to the checkout (pip would take its egg-info for
    # an installed idemview), no test keyring backend, and pip's own cache (XDG_CACHE_HOME unset).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "XDG_", "IDEMVIEW_"))}
    r = subprocess.run([bin_ / "pip", "install", "-q", str(wheel)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    # Run from an empty folder so the checkout is not what gets imported.
    run = dict(capture_output=True, text=True, cwd=tmp_path, env=env)
    for cmd in ([bin_ / "idemview", "--version"], [bin_ / "python", "-m", "idemview", "--version"]):
        r = subprocess.run(cmd, **run)
        assert (r.returncode, r.stdout.strip()) == (0, f"idemview {__version__}"), r.stderr
    assert (bin_ / "idemview-gui").is_file()
    r = subprocess.run([bin_ / "python", "-c", "from idemview import appinfo; print(appinfo.icon_png(512))"], **run)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).is_relative_to(env_dir), r.stdout  # the installed copy, not the checkout
