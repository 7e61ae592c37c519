"""Start the GUI: ``idemview`` (saved connections) and ``idemview --demo``.

``--demo`` opens the demo ledger (:mod:`idemview.services.demo_ledger`: written into the data directory on
a worker thread when missing or older than a day, anchored to the current hour so its planted incidents
look recent); findings are computed for the real current time, which the hour anchor keeps consistent
with what was planted.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from idemview.appinfo import APP_ID

# The demo's place and freshness live in the core (written off the GUI thread, issue 25); kept importable
# from here for callers of the old names.
from idemview.services.demo_ledger import DEMO_MAX_AGE_S, demo_path, demo_spec, ensure_demo  # noqa: E402,F401


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
