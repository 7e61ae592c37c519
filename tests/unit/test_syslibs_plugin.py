"""The GUI's start-up check covers every library Qt's xcb platform plugin links to (issue #19 item 17):
the list is read from the installed plugin's ELF ``DT_NEEDED`` entries at run time, not hard-coded.
A fresh Debian with Xvfb has libxcb-cursor but not libxcb-icccm4 / libxcb-keysyms1: the check must name
those packages in one line and stop before Qt aborts the process."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from idemview.qt.syslibs import (
    GuiUnavailable,
    check_gui_libraries,
    debian_package,
    elf_needed,
    plugin_libraries,
    xcb_plugin,
)

PLUGIN = Path(sysconfig.get_paths()["purelib"]) / "PySide6" / "Qt" / "plugins" / "platforms" / "libqxcb.so"
FRESH_DEBIAN_LACKS = {"libxcb-icccm.so.4", "libxcb-keysyms.so.1"}


def test_the_plugin_is_found_and_read():
    assert PLUGIN.is_file()
    assert xcb_plugin() == PLUGIN  # found on sys.path without importing PySide6
    needed = elf_needed(PLUGIN)
    assert "libQt6XcbQpa.so.6" in needed or "libxcb.so.1" in needed
    libs = plugin_libraries(PLUGIN)
    # through the bundled libQt6XcbQpa: the libraries pip cannot install, none of Qt's own
    assert FRESH_DEBIAN_LACKS | {"libxcb-cursor.so.0", "libxcb.so.1"} <= set(libs)
    assert not any(name.startswith("libQt6") for name in libs)


def test_elf_parser_reads_another_binary():
    needed = elf_needed(sys.executable)
    assert any(n.startswith("libc.so") for n in needed) or any(n.startswith("libpython") for n in needed)
    assert elf_needed(__file__) == []  # not ELF


def test_missing_icccm_and_keysyms_named_in_one_line():
    with pytest.raises(GuiUnavailable) as ei:
        check_gui_libraries("xcb", find=lambda so: so not in FRESH_DEBIAN_LACKS, plugin=PLUGIN)
    msg = str(ei.value)
    assert "\n" not in msg
    assert "sudo apt install libxcb-icccm4 libxcb-keysyms1" in msg
    check_gui_libraries("xcb", find=lambda so: True, plugin=PLUGIN)  # all present: no complaint
    check_gui_libraries("offscreen", find=lambda so: False, plugin=PLUGIN)


@pytest.mark.parametrize(
    "soname,package",
    [
        ("libxcb-icccm.so.4", "libxcb-icccm4"),
        ("libxcb-keysyms.so.1", "libxcb-keysyms1"),
        ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
        ("libX11-xcb.so.1", "libx11-xcb1"),
        ("libxcb-render-util.so.0", "libxcb-render-util0"),
        ("libglib-2.0.so.0", "libglib2.0-0"),
    ],
)
def test_debian_package_names(soname, package):
    assert debian_package(soname) == package


def test_gui_start_stops_cleanly_with_a_missing_library(tmp_path):
    """``idemview --demo`` on a desktop lacking libxcb-icccm4: exit 2, one line, nothing written."""
    code = (
        "import sys\n"
        "import idemview.qt.syslibs as s\n"
        "real = s.system_has\n"
        "s.system_has = lambda n: n != 'libxcb-icccm.so.4' and real(n)\n"
        "from idemview.cli import main\n"
        "sys.exit(main(['--demo']))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(QT_QPA_PLATFORM="xcb", IDEMVIEW_DATA_DIR=str(tmp_path), IDEMVIEW_CONFIG_DIR=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "libxcb-icccm4" in p.stderr
    assert not (tmp_path / "demo.db").exists()
