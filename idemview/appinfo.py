"""The application's identity and its shipped desktop files, loaded through :mod:`importlib.resources`.

The files live in the repository's top-level ``resources/`` folder and are installed as the data package
``idemview.resources`` (``package-dir`` mapping in pyproject.toml), so a wheel, an editable install and the
PyInstaller bundle all read them the same way. Running from a bare checkout (``python -m idemview`` with
the repository on ``sys.path`` but nothing installed) falls back to the folder itself.

Pure Python: no Qt here (the window icon is built from these paths in :mod:`idemview.qt.app`).
"""

from __future__ import annotations

import importlib.resources
from importlib.resources.abc import Traversable
from pathlib import Path

#: Reverse-DNS application id: the .desktop file, AppStream component, icon name and D-Bus style name.
APP_ID = "io.github.idemview.Idemview"
#: Icon sizes rendered from the SVG (pixels, square), by packaging/render_icons.py.
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def resources_root() -> Traversable:
    """The folder holding the shipped resources (a :class:`Traversable`, usually a real directory).

    Raises FileNotFoundError when neither the installed package nor the checkout's folder exists."""
    try:
        return importlib.resources.files("idemview.resources")
    except ModuleNotFoundError:
        pass
    # A checkout run without installing has resources/ beside the idemview/ package; a PyInstaller bundle
    # has the files (data only) in idemview/resources/ next to this module.
    here = Path(__file__).resolve().parent
    for candidate in (here / "resources", here.parent / "resources"):
        if (candidate / f"{APP_ID}.svg").is_file():
            return candidate
    raise FileNotFoundError("idemview's resources are not installed (idemview.resources is missing)")


def resource(name: str) -> Traversable:
    """One shipped file by its path relative to resources/ (e.g. ``"io.github.idemview.Idemview.svg"``).

    Raises FileNotFoundError when it is not there."""
    node = resources_root()
    for part in name.split("/"):
        node = node.joinpath(part)
    if not node.is_file():
        raise FileNotFoundError(f"resource {name!r} is not shipped")
    return node


def icon_svg() -> Traversable:
    """The scalable app icon (the source the PNGs are rendered from)."""
    return resource(f"{APP_ID}.svg")


def icon_png(size: int) -> Traversable:
    """The app icon rendered at ``size`` × ``size`` pixels; ``size`` must be one of :data:`ICON_SIZES`.

    Raises ValueError for another size, FileNotFoundError when the file is missing."""
    if size not in ICON_SIZES:
        raise ValueError(f"no {size}px icon; sizes: {', '.join(map(str, ICON_SIZES))}")
    return resource(f"icon-{size}.png")


def desktop_entry() -> Traversable:
    """The freedesktop .desktop entry."""
    return resource(f"{APP_ID}.desktop")


def metainfo() -> Traversable:
    """The AppStream metainfo XML."""
    return resource(f"{APP_ID}.metainfo.xml")


def _desktop_quote(arg: str) -> str:
    # Desktop Entry spec, "The Exec key": an argument with reserved characters is double-quoted, and
    # inside the quotes ", `, $ and \ are backslash-escaped.
    if not any(c in arg for c in " \t\n\"'\\><~|&;$*?#()`"):
        return arg
    return '"' + "".join("\\" + c if c in '"`$\\' else c for c in arg) + '"'


def install_desktop_files(data_home: Path, command: list[str]) -> list[Path]:
    """Put the app into the desktop's menu for one user: write the .desktop entry (its ``Exec`` and
    ``TryExec`` set to ``command``, an argv list whose first item is an absolute path), the icons
    (``icons/hicolor/NxN/apps`` and ``scalable/apps``) and the AppStream metainfo under ``data_home``
    (normally ``$XDG_DATA_HOME``, i.e. ``~/.local/share``). Returns the written paths. Overwrites earlier
    copies; raises OSError when a file cannot be written."""
    data_home = Path(data_home)
    written: list[Path] = []

    def put(target: Path, data: bytes) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written.append(target)

    lines = []
    for line in desktop_entry().read_text(encoding="utf-8").splitlines():
        if line.startswith("Exec="):
            line = "Exec=" + " ".join(_desktop_quote(a) for a in command)
        elif line.startswith("TryExec="):
            line = "TryExec=" + command[0]
        lines.append(line)
    put(data_home / "applications" / f"{APP_ID}.desktop", ("\n".join(lines) + "\n").encode())
    for size in ICON_SIZES:
        put(data_home / "icons" / "hicolor" / f"{size}x{size}" / "apps" / f"{APP_ID}.png", icon_png(size).read_bytes())
    put(data_home / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg", icon_svg().read_bytes())
    put(data_home / "metainfo" / f"{APP_ID}.metainfo.xml", metainfo().read_bytes())
    return written
