"""The GUI's log file: rotating, masked, in the platform's user log folder.

``platformdirs.user_log_dir("idemview")`` (``IDEMVIEW_LOG_DIR`` overrides it, e.g. in tests), file
``idemview.log``, 1 MB × 3 backups. Every line goes through the masker (free-text detectors: URLs with
passwords, tokens, e-mail addresses, card numbers…) after formatting, so a message, its arguments and a
traceback are all masked; DESIGN §6 lists logs among the places masking covers.
"""

from __future__ import annotations

import logging
import os
from logging.handlers import RotatingFileHandler
from pathlib import Path

LOG_NAME = "idemview.log"
MAX_BYTES = 1_000_000
BACKUPS = 3


def log_dir() -> Path:
    """The folder of the log file (created on first use)."""
    d = os.environ.get("IDEMVIEW_LOG_DIR")
    if d:
        p = Path(d)
    else:
        import platformdirs

        p = Path(platformdirs.user_log_dir("idemview", appauthor=False))
    p.mkdir(parents=True, exist_ok=True)
    return p


class MaskingFormatter(logging.Formatter):
    """Formats as usual, then masks the whole line (message, arguments and traceback)."""

    def __init__(self, fmt: str, masker=None):
        super().__init__(fmt)
        if masker is None:
            from idemview.config import new_masker

            masker = new_masker()
        self._m = masker

    def format(self, record: logging.LogRecord) -> str:
        return self._m.mask_text(super().format(record))


_handler: RotatingFileHandler | None = None


def install_log(level: int = logging.INFO) -> Path:
    """Attach the rotating, masked file handler to the root logger (once); returns the file's path."""
    global _handler
    path = log_dir() / LOG_NAME
    if _handler is not None and Path(_handler.baseFilename) == path:
        return path
    if _handler is not None:
        logging.getLogger().removeHandler(_handler)
        _handler.close()
    h = RotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8", delay=True)
    h.setFormatter(MaskingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    h.setLevel(level)
    root = logging.getLogger()
    root.addHandler(h)
    if root.level > level or root.level == logging.NOTSET:
        root.setLevel(level)
    _handler = h
    logging.getLogger("idemview").info("%s; log file %s", _versions(), path)
    _log_uncaught()
    return path


def _versions() -> str:
    """ "idemview 1.2.3 started (Python 3.11.9, Qt 6.7.2, PySide6 6.7.2, SQLAlchemy 2.0.31)"."""
    import platform

    import sqlalchemy

    from idemview import __version__

    try:
        import PySide6
        from PySide6.QtCore import qVersion

        qt = f"Qt {qVersion()}, PySide6 {PySide6.__version__}"
    except ImportError:  # pragma: no cover - the GUI log without Qt (a test of the core)
        qt = "no Qt"
    py = platform.python_version()
    return f"idemview {__version__} started (Python {py}, {qt}, SQLAlchemy {sqlalchemy.__version__})"


def _log_uncaught() -> None:
    """An exception nobody caught (in a slot, a timer) goes to the log with its traceback, then to the
    previous hook (Qt's, pytest-qt's): the file attached to a ticket holds it (masked by the formatter)."""
    import sys

    prev = sys.excepthook
    if getattr(prev, "_idemview", False):
        return

    def hook(tp, value, tb):
        logging.getLogger("idemview").error("uncaught error", exc_info=(tp, value, tb))
        prev(tp, value, tb)

    hook._idemview = True  # type: ignore[attr-defined]
    sys.excepthook = hook


def uninstall_log() -> None:
    """Detach the handler (tests)."""
    global _handler
    if _handler is not None:
        logging.getLogger().removeHandler(_handler)
        _handler.close()
        _handler = None
