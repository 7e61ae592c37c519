"""Start the GUI: ``idemview`` (saved connections) and ``idemview --demo``.

``--demo`` writes the demo ledger (:func:`idemview.services.demo.write_demo`) into the data directory, anchored
to the current hour so its planted incidents look recent, regenerating it when it is missing or older
than a day, and opens it; findings are computed for the real current time, which the hour anchor keeps
consistent with what was planted.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone
from pathlib import Path

UTC = timezone.utc
DEMO_MAX_AGE_S = 86400


def demo_path() -> Path:
    from idemview.config import data_dir
    return data_dir() / "demo.db"


def ensure_demo(path: Path | None = None) -> Path:
    """The demo ledger's path, (re)written when missing or older than a day."""
    from idemview.services.demo import write_demo
    p = path or demo_path()
    from idemview.services.demo_effects import layout_path_for
    if (not p.exists() or not layout_path_for(p).exists()
            or time.time() - p.stat().st_mtime > DEMO_MAX_AGE_S):
        anchor = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        write_demo(p, anchor=anchor)
    return p


def demo_spec(path: Path | None = None):
    from idemview.services.session import OpenSpec
    from idemview.services.demo_effects import layout_path_for
    p = ensure_demo(path)
    lay = layout_path_for(p)
    # the demo's layout reconciles with its charges file (hidden successes, double charges, orphans)
    return OpenSpec(url=str(p), name="demo ledger", layout=str(lay) if lay.exists() else "idemview")


def make_app(argv: list[str] | None = None):
    """The QApplication, styled for the system colour scheme (created once)."""
    from PySide6.QtWidgets import QApplication
    from idemview.qt import theme
    app = QApplication.instance()
    if app is None:
        from idemview.qt.syslibs import check_gui_libraries
        check_gui_libraries()       # before Qt loads its platform plugin (it aborts the process)
        app = QApplication(argv if argv is not None else sys.argv[:1])
        app.setApplicationName("idemview")
        app.setOrganizationName("idemview")
        theme.apply_scheme(app)
    return app


def run_gui(demo: bool = False) -> int:
    """Run the GUI until the window closes; returns the exit code. Raises
    :class:`idemview.qt.syslibs.GuiUnavailable` (one line) when a system library Qt needs is missing."""
    import logging
    from idemview.masking.masker import install_log_masking
    install_log_masking()       # every log record is masked in the GUI too (DESIGN §6)
    logging.getLogger("idemview").debug("starting the GUI")
    app = make_app()
    from idemview.qt.mainwindow import MainWindow
    w = MainWindow()
    w.show()
    if demo:
        w.open_demo()
    return app.exec()
