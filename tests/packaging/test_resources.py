"""The shipped desktop files: icon, .desktop entry and AppStream metainfo, loaded as the app loads them.

The freedesktop validators (desktop-file-validate from desktop-file-utils, appstreamcli from appstream) run
on the real files; without them the check is skipped on a developer's machine and fails on CI (.ci/run
installs them)."""

from __future__ import annotations

import configparser
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from idemview import appinfo
from tests.conftest import ON_CI

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        msg = f"{name} is missing (Debian package {package})"
        if ON_CI:
            pytest.fail(msg + "; CI=true: .ci/run installs it")
        pytest.skip(msg)
    return path


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_icon_pngs_exist_at_every_size_with_alpha():
    for size in appinfo.ICON_SIZES:
        data = appinfo.icon_png(size).read_bytes()
        assert _png_size(data) == (size, size)
        assert data[25] == 6, f"{size}px icon is not RGBA"  # colour type 6: truecolour with alpha


def test_icon_svg_is_the_square_source():
    root = ET.fromstring(appinfo.icon_svg().read_bytes())
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.get("viewBox") == "0 0 128 128"


def test_unknown_icon_size_and_missing_resource_are_clear_errors():
    with pytest.raises(ValueError, match="no 20px icon"):
        appinfo.icon_png(20)
    with pytest.raises(FileNotFoundError, match="not shipped"):
        appinfo.resource("nope.txt")


def test_one_application_id_everywhere():
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read_string(appinfo.desktop_entry().read_text(encoding="utf-8"))
    d = entry["Desktop Entry"]
    assert d["Icon"] == appinfo.APP_ID
    assert d["Exec"].split()[0] == "idemview"
    meta = ET.fromstring(appinfo.metainfo().read_bytes())
    assert meta.findtext("id") == appinfo.APP_ID
    assert meta.find("launchable").text == f"{appinfo.APP_ID}.desktop"
    assert meta.find("icon").text == appinfo.APP_ID
    assert meta.find("provides/binary").text == "idemview"


def test_metainfo_release_is_the_package_version_and_screenshots_exist_in_docs():
    from idemview import __version__

    meta = ET.fromstring(appinfo.metainfo().read_bytes())
    assert meta.find("releases/release").get("version") == __version__
    shots = [img.text for img in meta.iter("image")]
    assert shots
    for url in shots:
        assert "/docs/" in url
        assert (ROOT / "docs" / url.rsplit("/docs/", 1)[1]).is_file(), url


def test_desktop_entry_validates():
    tool = _tool("desktop-file-validate", "desktop-file-utils")
    r = subprocess.run([tool, str(appinfo.desktop_entry())], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stdout.strip(), r.stdout + r.stderr


def test_metainfo_validates():
    tool = _tool("appstreamcli", "appstream")
    r = subprocess.run([tool, "validate", "--no-net", str(appinfo.metainfo())], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_window_icon_carries_every_size(qapp):
    from idemview.qt.app import app_icon

    sizes = {s.width() for s in app_icon().availableSizes()}
    assert sizes == set(appinfo.ICON_SIZES)


def test_a_checkout_without_install_reads_resources_beside_the_package(monkeypatch):
    import importlib.resources

    def not_installed(name):
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(importlib.resources, "files", not_installed)
    assert Path(str(appinfo.resources_root())) == ROOT / "resources"
    assert _png_size(appinfo.icon_png(48).read_bytes()) == (48, 48)


def _desktop(path: Path) -> configparser.SectionProxy:
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read_string(path.read_text(encoding="utf-8"))
    return entry["Desktop Entry"]


def test_install_desktop_files_writes_a_valid_menu_entry_that_runs_the_given_command(tmp_path):
    cmd = ["/opt/my apps/idemview/idemview"]  # a space: the Exec key must quote it
    written = appinfo.install_desktop_files(tmp_path, cmd)
    entry = tmp_path / "applications" / f"{appinfo.APP_ID}.desktop"
    assert written[0] == entry and len(written) == 1 + len(appinfo.ICON_SIZES) + 2
    d = _desktop(entry)
    assert d["Exec"] == '"/opt/my apps/idemview/idemview"'
    assert d["TryExec"] == cmd[0]
    assert d["Icon"] == appinfo.APP_ID
    for size in appinfo.ICON_SIZES:
        png = tmp_path / f"icons/hicolor/{size}x{size}/apps/{appinfo.APP_ID}.png"
        assert _png_size(png.read_bytes()) == (size, size)
    assert (tmp_path / f"icons/hicolor/scalable/apps/{appinfo.APP_ID}.svg").is_file()
    assert (tmp_path / f"metainfo/{appinfo.APP_ID}.metainfo.xml").read_bytes() == appinfo.metainfo().read_bytes()
    tool = _tool("desktop-file-validate", "desktop-file-utils")
    r = subprocess.run([tool, str(entry)], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stdout.strip(), r.stdout + r.stderr


def test_install_desktop_command_line(tmp_path, capsys):
    from idemview.cli import main

    assert main(["install-desktop", "--data-home", str(tmp_path)]) == 0
    d = _desktop(tmp_path / "applications" / f"{appinfo.APP_ID}.desktop")
    exe = d["Exec"].strip('"').split('" "')[0]
    assert Path(exe).is_absolute() and Path(exe).exists()
    assert "installed" in capsys.readouterr().out
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["install-desktop", "--data-home", str(blocker)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("idemview: cannot write the desktop files") and err.count("\n") == 1
