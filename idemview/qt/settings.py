"""The GUI's remembered state (window geometry, splitters, open tabs, recent connections).

Stored with ``QSettings`` as an INI file in idemview's config folder (``IDEMVIEW_CONFIG_DIR`` in tests,
so a test never reads or writes the user's own). Nothing secret is ever written here.
"""

from __future__ import annotations

from PySide6.QtCore import QSettings


def gui_settings() -> QSettings:
    """``<config dir>/gui.ini`` (created on first write)."""
    from idemview.config import config_dir

    return QSettings(str(config_dir() / "gui.ini"), QSettings.Format.IniFormat)
