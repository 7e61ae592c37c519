"""System libraries the GUI needs that pip cannot install, checked before Qt starts.

Qt loads its X11 (``xcb``) platform plugin only when every library the plugin links to is installed
(Qt 6.5+ added ``libxcb-cursor``; a fresh Debian with Xvfb lacks ``libxcb-icccm4``,
``libxcb-keysyms1``...); otherwise Qt prints a multi-line plugin message and aborts the process.
idemview reads the plugin's own ``DT_NEEDED`` list (and that of the Qt libraries bundled beside it) at
run time, checks each library, and says in one line which system packages to install. Nothing here
imports Qt (the check runs before Qt loads).
"""

from __future__ import annotations

import ctypes.util
import os
import sys
from functools import lru_cache
from pathlib import Path

#: Fallback when the xcb plugin file cannot be found (a PySide6 laid out differently): soname ->
#: (Debian/Ubuntu package, Fedora package).
XCB_LIBRARIES = {"libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor")}

#: Debian packages whose name does not follow the soname rule (Debian Policy §8.1, see
#: :func:`debian_package`).
_DEBIAN_EXCEPTIONS = {
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libgobject-2.0.so.0": "libglib2.0-0",
    "libdbus-1.so.3": "libdbus-1-3",
    "libz.so.1": "zlib1g",
    "libc.so.6": "libc6",
    "libm.so.6": "libc6",
    "libgcc_s.so.1": "libgcc-s1",
    "libpthread.so.0": "libc6",
    "libdl.so.2": "libc6",
    "librt.so.1": "libc6",
    "ld-linux-x86-64.so.2": "libc6",
    "ld-linux-aarch64.so.1": "libc6",
    "libstdc++.so.6": "libstdc++6",
}


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


def elf_needed(path: str | os.PathLike) -> list[str]:
    """The ``DT_NEEDED`` entries (sonames, e.g. ``"libxcb-icccm.so.4"``) of the ELF file at ``path``,
    read from its ``SHT_DYNAMIC`` section and the string table it links to (System V ABI, "Dynamic
    Section"); 32/64-bit, either byte order. ``[]`` for a file that is not ELF or has no dynamic
    section. Raises ``OSError`` when it cannot be read."""
    import struct

    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or len(data) < 64:
        return []
    is64, end = data[4] == 2, "<" if data[5] == 1 else ">"
    if is64:
        shoff, shentsize, shnum = (
            struct.unpack_from(end + "Q", data, 0x28)[0],
            *struct.unpack_from(end + "HH", data, 0x3A),
        )
        sh_fmt, dyn_fmt = end + "IIQQQQIIQQ", end + "qQ"
    else:
        shoff, shentsize, shnum = (
            struct.unpack_from(end + "I", data, 0x20)[0],
            *struct.unpack_from(end + "HH", data, 0x2E),
        )
        sh_fmt, dyn_fmt = end + "IIIIIIIIII", end + "iI"
    sections = []
    for i in range(shnum):
        off = shoff + i * shentsize
        if off + struct.calcsize(sh_fmt) > len(data):
            return []
        _n, typ, _fl, _addr, offset, size, link, _info, _al, _es = struct.unpack_from(sh_fmt, data, off)
        sections.append((typ, offset, size, link))
    needed = []
    for typ, offset, size, link in sections:
        if typ != 6 or link >= len(sections):  # SHT_DYNAMIC
            continue
        str_off = sections[link][1]
        step = struct.calcsize(dyn_fmt)
        for pos in range(offset, min(offset + size, len(data) - step + 1), step):
            tag, val = struct.unpack_from(dyn_fmt, data, pos)
            if tag == 0:  # DT_NULL
                break
            if tag == 1:  # DT_NEEDED
                s_end = data.find(b"\0", str_off + val)
                needed.append(data[str_off + val : s_end].decode("ascii", "replace"))
    return needed


def xcb_plugin() -> Path | None:
    """The ``libqxcb.so`` platform plugin of the installed PySide6, found on ``sys.path`` without
    importing PySide6 (importing it would load Qt)."""
    for root in sys.path:
        p = Path(root or ".") / "PySide6" / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        try:
            if p.is_file():
                return p
        except OSError:
            continue
    return None


@lru_cache(maxsize=1)
def _ldconfig_sonames() -> frozenset[str] | None:
    import subprocess

    for exe in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"):
        try:
            out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        names = {line.split()[0] for line in out.splitlines()[1:] if line.strip()}
        if names:
            return frozenset(names)
    return None


def system_has(soname: str) -> bool:
    """True when the dynamic loader can find ``soname``: the ``ldconfig`` cache, ``LD_LIBRARY_PATH``,
    else ``ctypes.util.find_library`` on its short name."""
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if d and (Path(d) / soname).exists():
            return True
    cache = _ldconfig_sonames()
    if cache is not None:
        return soname in cache
    short = soname.removeprefix("lib").split(".so", 1)[0]
    return ctypes.util.find_library(short) is not None


def debian_package(soname: str) -> str:
    """The Debian/Ubuntu package shipping ``soname``: by Debian Policy §8.1, ``libfoo.so.N`` is in
    ``libfooN`` (``libfoo-N`` when the name ends in a digit), lower-cased; a few exceptions listed."""
    if soname in _DEBIAN_EXCEPTIONS:
        return _DEBIAN_EXCEPTIONS[soname]
    base, _, ver = soname.partition(".so.")
    base = base.lower()
    ver = ver.split(".")[0]
    if not ver:
        return base
    return f"{base}-{ver}" if base[-1:].isdigit() else f"{base}{ver}"


def plugin_libraries(plugin: Path) -> list[str]:
    """Every system library ``plugin`` needs: its ``DT_NEEDED`` sonames and, through the Qt libraries
    bundled beside PySide6 (``Qt/lib``), theirs — the libraries pip does not install."""
    bundled = plugin.parents[2] / "lib"
    out: list[str] = []
    seen: set[str] = set()
    todo = [plugin]
    while todo:
        try:
            names = elf_needed(todo.pop())
        except OSError:
            continue
        for name in names:
            if name in seen:
                continue
            seen.add(name)
            if (bundled / name).is_file():
                todo.append(bundled / name)
            else:
                out.append(name)
    return out


def missing_libraries(platform: str | None = None, find=None, plugin: Path | None = None) -> list[tuple[str, str, str]]:
    """``[(library, debian_package, fedora_package), ...]`` the given (default: detected) Qt platform
    needs and this system lacks. Only ``xcb`` has such a requirement: every library its plugin links
    to (:func:`plugin_libraries`, read from the installed plugin at run time), each checked with
    ``find(soname)`` (default :func:`system_has`). ``library`` is the soname, the Fedora package the
    RPM capability that provides it. Without the plugin file, the known :data:`XCB_LIBRARIES`."""
    if (platform or qt_platform()) != "xcb":
        return []
    plugin = plugin or xcb_plugin()
    find = find or system_has
    if plugin is None:
        return [(so, deb, fed) for so, (deb, fed) in XCB_LIBRARIES.items() if not find(so)]
    arch = "()(64bit)" if sys.maxsize > 2**32 else ""
    return [(so, debian_package(so), f"'{so}{arch}'") for so in plugin_libraries(plugin) if not find(so)]


def check_gui_libraries(platform: str | None = None, find=None, plugin: Path | None = None) -> None:
    """Raise :class:`GuiUnavailable` with one line naming the packages to install when the Qt
    platform in use lacks a system library (:func:`missing_libraries`)."""
    missing = missing_libraries(platform, find, plugin)
    if missing:
        libs = ", ".join(m[0] for m in missing)
        deb = " ".join(dict.fromkeys(m[1] for m in missing))
        fed = " ".join(dict.fromkeys(m[2] for m in missing))
        raise GuiUnavailable(
            f"the GUI needs the system libraries {libs} for Qt's X11 (xcb) platform: install them with "
            f"`sudo apt install {deb}` (Debian/Ubuntu) or `sudo dnf install {fed}` (Fedora)"
        )
