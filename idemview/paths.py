"""What a file path may name (issue #19 items 3, 4, 5): the one place each rule is kept.

- :func:`readable_file`: a path idemview is about to open for reading must be a regular file. A FIFO
  blocks ``open()`` until a writer appears (Ctrl-C cannot interrupt SQLite's open), a device or socket is
  no ledger; all are refused from ``os.stat``, which never blocks. Used by
  :func:`idemview.ledger.connect.open_engine` (every SQLite ledger and effects file) and
  :func:`idemview.layouts.layout.load_layout`.
- :func:`confined`: a path written *inside a layout* (shared data: an ``[effects] connection``, a SQLite
  URL) is resolved against the layout file's folder and may not leave it (``..``, an absolute path, a
  symlink pointing out). Opening anything else needs the user's own argument or a saved connection.
- :func:`check_write_target`: the one gate every writer passes (export, demo, layout save). It never
  lets a write replace a file idemview reads: a ledger or effects database (any SQLite file, and every
  file opened for reading in this process, :func:`note_source`), a layout (any TOML file with an
  ``[operations]`` table, loaded or not), or the saved-connections file, ``--force`` or not. Files are
  compared by identity (device, inode) as well as by resolved path, so a hard link is no way around it.

Layer 0: no idemview module below it but :mod:`idemview.errors`.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from idemview.errors import InputError, TargetExists, TargetRefused


class NotARegularFile(InputError):
    """A path to read is a FIFO, device, socket or folder: refused before it is opened (exit 2)."""


class PathOutsideLayout(InputError):
    """A path written in a layout leaves the layout's folder (exit 2); the user must name it himself."""


class ServerInLayout(PathOutsideLayout):
    """A layout file names a database server (``[effects] connection = "postgresql://…"``): a layout is
    shared data, and connecting with the user's own credentials (a keyring entry, ``~/.pgpass``) to a
    server the layout's author chose would read another database (exit 2). A saved connection's name,
    or the caller's own engine, is the way to name one."""


_KINDS = [
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
]


def special_kind(path: str | Path) -> str | None:
    """What ``path`` is when it exists and is not a regular file (``"a FIFO (named pipe)"``...), else
    ``None``. Follows symlinks; never opens the file (``os.stat`` does not block on a FIFO)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    for test, name in _KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def symlink_target(path: str | Path) -> Path | None:
    """The path a symlink ``path`` finally points to (absolute, every link in the chain followed;
    it may not exist), or ``None`` when ``path`` is no symlink. Never raises."""
    try:
        p = Path(path)
        return p.resolve() if p.is_symlink() else None
    except (OSError, RuntimeError, ValueError):  # a link loop, an unreadable folder
        return None


def readable_file(path: str | Path, what: str = "ledger") -> Path:
    """``path`` when it is not a FIFO/device/socket; raises :class:`NotARegularFile` (one line,
    naming what it is) otherwise. A missing path or a folder is returned as is (the caller says "no
    file" / "a folder", as it did before: a folder cannot block an open)."""
    kind = special_kind(path)
    if kind is not None and kind != "a folder":
        raise NotARegularFile(f"{path} is {kind}, not a {what} file; refusing to open it")
    return Path(path)


def confined(path: str | Path, base: str | Path | None, what: str = "path") -> Path:
    """``path`` (as written in a layout) resolved against ``base`` (the layout file's folder); raises
    :class:`PathOutsideLayout` when the result, symlinks resolved, is not inside ``base`` — or when
    there is no folder to confine it to (a layout that is not a file: a preset, a draft, an API object)."""
    if base is None:
        raise PathOutsideLayout(
            f"{what} {str(path)!r} in a layout that is not a file: give it as an argument or a saved connection"
        )
    root = Path(base).resolve()
    p = Path(path).expanduser()
    full = (p if p.is_absolute() else root / p).resolve()
    if not full.is_relative_to(root):
        raise PathOutsideLayout(
            f"{what} {str(path)!r} leaves the layout's folder {root}; a layout may only name files beside it "
            "(give another file as an argument or a saved connection)"
        )
    return full


# ----------------------------------------------------------------------------------- writes

_SOURCES: set[Path] = set()
#: The same files by identity (device, inode): a hard link is another name for a source.
_SOURCE_IDS: set[tuple[int, int]] = set()
_LOCK = threading.Lock()
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: Files that are always sources when they exist (the saved connections); set by idemview.config.
PROTECTED: list[Callable[[], Path]] = []


def note_source(path: str | Path) -> None:
    """Remember that this process reads ``path`` (a ledger, effects database or layout): no write may
    replace it (:func:`check_write_target`). Called where files are opened for reading."""
    try:
        p = Path(path).resolve()
    except (OSError, RuntimeError, ValueError):
        return
    fid = _file_id(p)
    with _LOCK:
        _SOURCES.add(p)
        if fid is not None:
            _SOURCE_IDS.add(fid)


def _file_id(p: Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of ``p`` (symlinks followed), ``None`` when it does not exist."""
    try:
        st = os.stat(p)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


def _is_layout(p: Path) -> bool:
    """A TOML file with an ``[operations]`` table: an idemview layout (idemview.layouts.layout), whether
    or not this process loaded it."""
    import tomllib

    try:
        if p.stat().st_size > 4 << 20:  # a layout is a few KB; a big file is not parsed to find out
            return False
        with open(p, "rb") as f:
            return isinstance(tomllib.load(f).get("operations"), dict)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False


def _is_sqlite(p: Path) -> bool:
    try:
        with open(p, "rb") as f:  # a regular file (checked before): opening does not block
            return f.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def source_kind(path: str | Path) -> str | None:
    """Why ``path`` is a file idemview reads (``"a SQLite database"``, ``"the saved connections file"``,
    ``"a file this process reads"``), or ``None``."""
    p = Path(path)
    try:
        r = p.resolve()
    except (OSError, RuntimeError):
        return None
    # By identity as well as by name: a hard link (or a bind mount) is the same file under another
    # path, and a writer that opens it in place would change the source itself.
    fid = _file_id(r)
    for f in PROTECTED:
        try:
            q = f().resolve()
        except (OSError, RuntimeError):
            continue
        if q == r or (fid is not None and _file_id(q) == fid):
            return "the saved connections file"
    with _LOCK:
        if r in _SOURCES or (fid is not None and fid in _SOURCE_IDS):
            return "a ledger, effects database or layout this process reads"
    if p.is_file() and _is_sqlite(p):
        return "a SQLite database (a ledger or effects source)"
    if p.is_file() and _is_layout(p):
        return "an idemview layout"
    return None


def check_write_target(
    path: str | Path,
    *,
    overwrite: bool = False,
    may_replace: Callable[[Path], bool] | None = None,
    also: tuple[str | Path, ...] = (),
) -> Path:
    """The one gate for every file idemview writes. ``path`` (and each of ``also``, e.g. a manifest
    written beside it) is refused with :class:`TargetRefused` when its folder does not exist, when it
    is a symlink or not a regular file, or when it is a file idemview reads (:func:`source_kind`)
    unless ``may_replace(path)`` says this writer made it (the demo replacing its own demo files).
    An existing file is :class:`TargetExists` unless ``overwrite`` or ``may_replace`` allows it.
    ``--force`` is ``overwrite``: it never unlocks a source. Returns ``Path(path)``."""
    out = Path(path).expanduser()
    targets = [out, *(Path(a).expanduser() for a in also)]
    if not out.parent.is_dir():
        raise TargetRefused(f"the folder {out.parent} does not exist")
    for p in targets:
        if p.is_symlink() or (p.exists() and not p.is_file()):
            raise TargetRefused(f"{p} exists and is not a regular file; choose another name")
        kind = source_kind(p) if p.exists() or p.resolve() in _SOURCES else None
        if kind is not None and not (may_replace is not None and p.exists() and may_replace(p)):
            raise TargetRefused(f"{p} is {kind}; idemview never writes over it (choose another file)")
    for p in targets:
        if p.exists() and not overwrite and not (may_replace is not None and may_replace(p)):
            raise TargetExists(f"{p} already exists")
    return out
