"""System libraries the GUI needs that pip cannot install, checked before Qt starts.

Qt 6.5+ loads its X11 (``xcb``) platform plugin only when ``libxcb-cursor`` is installed; without it
Qt prints a multi-line plugin message and aborts the process. idemview checks first and says in one
line which system package to install. Nothing here imports Qt (the check runs before Qt loads).
"""

from __future__ import annotations

import ctypes.util
import os
import sys

#: library name (as ``ctypes.util.find_library`` takes it) -> (Debian/Ubuntu package, Fedora package)
XCB_LIBRARIES = {"xcb-cursor": ("libxcb-cursor0", "xcb-util-cursor")}


class GuiUnavailable(RuntimeError):
    """The GUI cannot start on this desktop; the message is one line saying what to install."""


def qt_platform(environ=None) -> str:
    """The Qt platform plugin that will be used: ``QT_QPA_PLATFORM`` (first entry, without options)
    if set; otherwise ``xcb`` on Linux/BSD outside a Wayland session, ``wayland`` inside one, and the
    native plugin elsewhere (``cocoa``, ``windows``)."""
    env = os.environ if environ is None else environ
    forced = env.get("QT_QPA_PLATFORM", "").strip()
    if forced:
        return forced.split(";")[0].split(":")[0].strip()
    if sys.platform == "darwin":
        return "cocoa"
    if sys.platform.startswith("win"):
        return "windows"
    if env.get("WAYLAND_DISPLAY") and env.get("XDG_SESSION_TYPE", "").lower() == "wayland":
        return "wayland"
    return "xcb"


def missing_libraries(platform: str | None = None, find=None) -> list[tuple[str, str, str]]:
    """``[(library, debian_package, fedora_package), ...]`` the given (default: detected) Qt platform
    needs and this system lacks. Only ``xcb`` has such a requirement."""
    if (platform or qt_platform()) != "xcb":
        return []
    find = find or ctypes.util.find_library
    return [(lib, deb, fed) for lib, (deb, fed) in XCB_LIBRARIES.items() if not find(lib)]


def check_gui_libraries(platform: str | None = None) -> None:
    """Raise :class:`GuiUnavailable` with one line naming the packages to install when the Qt
    platform in use lacks a system library."""
    missing = missing_libraries(platform)
    if missing:
        libs = ", ".join(f"lib{m[0]}" for m in missing)
        deb = " ".join(m[1] for m in missing)
        fed = " ".join(m[2] for m in missing)
        raise GuiUnavailable(
            f"the GUI needs the system library {libs} for Qt's X11 (xcb) platform: install it with "
            f"`sudo apt install {deb}` (Debian/Ubuntu) or `sudo dnf install {fed}` (Fedora)"
        )
