"""Start the GUI: ``idemview`` (saved connections) and ``idemview --demo``.

``--demo`` writes the demo ledger (:func:`idemview.services.demo.write_demo`) into the data directory, anchored
to the current hour so its planted incidents look recent, regenerating it when it is missing or older
than a day, and opens it; findings are computed for the real current time, which the hour anchor keeps
consistent with what was planted.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from idemview.appinfo import APP_ID

UTC = UTC
DEMO_MAX_AGE_S = 86400


def demo_path() -> Path:
    from idemview.config import data_dir

    return data_dir() / "demo.db"


def ensure_demo(path: Path | None = None) -> Path:
    """The demo ledger's path, (re)written when missing or older than a day."""
    from idemview.services.demo import write_demo

    p = path or demo_path()
    from idemview.services.demo_effects import layout_path_for

    if not p.exists() or not layout_path_for(p).exists() or time.time() - p.stat().st_mtime > DEMO_MAX_AGE_S:
        anchor = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        write_demo(p, anchor=anchor)
    return p


def demo_spec(path: Path | None = None):
    from idemview.services.demo_effects import layout_path_for
    from idemview.services.session import OpenSpec

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

        check_gui_libraries()  # before Qt loads its platform plugin (it aborts the process)
        app = QApplication(argv if argv is not None else sys.argv[:1])
        app.setApplicationName("idemview")
        app.setOrganizationName("idemview")
        app.setDesktopFileName(APP_ID)  # Wayland/X11 match the window to the installed .desktop entry
        app.setWindowIcon(app_icon())  # every window inherits it
        theme.apply_scheme(app)
    return app


def app_icon():
    """The app icon as a QIcon with every shipped PNG size (an empty icon when the files are missing)."""
    from PySide6.QtGui import QIcon

    from idemview import appinfo

    icon = QIcon()
    for size in appinfo.ICON_SIZES:
        try:
            icon.addFile(str(appinfo.icon_png(size)))
        except FileNotFoundError:  # a broken install shows Qt's default icon rather than failing
            continue
    return icon


def _quit_after(app) -> None:
    """Test hook for the bundle smoke test and the start-up measurement: with env IDEMVIEW_QUIT_AFTER_MS=N
    the event loop quits N ms after its first pass (the window shown and painted); IDEMVIEW_SHOWN_FILE,
    if set, then receives one JSON object: ``shown`` (that instant, Unix time in seconds), ``icon_sizes``
    (window icon sizes loaded) and ``keyring`` (CredentialStore.backend, probed after that instant)."""
    import os

    try:
        ms = int(os.environ.get("IDEMVIEW_QUIT_AFTER_MS", ""))
    except ValueError:
        return
    from PySide6.QtCore import QTimer

    def shown():
        now = time.time()
        target = os.environ.get("IDEMVIEW_SHOWN_FILE")
        if target:
            import json

            from idemview.config import CredentialStore

            Path(target).write_text(
                json.dumps(
                    {
                        "shown": now,
                        "icon_sizes": len(app.windowIcon().availableSizes()),
                        "keyring": CredentialStore().backend,
                    }
                )
            )
        QTimer.singleShot(max(0, ms), app.quit)

    QTimer.singleShot(0, shown)


def run_gui(demo: bool = False, link=None) -> int:
    """Run the GUI until the window closes; returns the exit code. ``link``: the
    :class:`~idemview.services.links.DeepLink` of ``idemview open`` (or a (target, key, scope) tuple). Raises
    :class:`idemview.qt.syslibs.GuiUnavailable` (one line) when a system library Qt needs is missing."""
    import logging

    from idemview.masking.masker import install_log_masking

    install_log_masking()  # every log record is masked in the GUI too (DESIGN §6)
    logging.getLogger("idemview").debug("starting the GUI")
    app = make_app()
    from idemview.qt.applog import install_log

    install_log()
    from idemview.qt.mainwindow import MainWindow

    w = MainWindow()
    w.show()
    if demo:
        w.open_demo()
    if isinstance(link, tuple):
        w.open_link(*link)
    elif link is not None:  # a services.links.DeepLink (idemview open …)
        w.open_link(link.target, link.key, link.scope, layout=link.layout, schema=link.schema, now=link.now)
    _quit_after(app)
    return app.exec()
