"""Regenerate the screenshots in docs/ (light and dark): main window on the demo ledger (sized for a
1600×1000 screen, and main-window-1280 for a 1280×800 one), the detail of a duplicate_effect operation
with its response payload, the start page with saved connections, the connection dialog and the
evidence export dialog.

    QT_QPA_PLATFORM=offscreen python packaging/screenshots.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("IDEMVIEW_CONFIG_DIR", tempfile.mkdtemp())
os.environ.setdefault("IDEMVIEW_LOG_DIR", tempfile.mkdtemp())


def main() -> int:
    from PySide6.QtCore import Qt
    from idemview.services.demo import write_demo
    from idemview.domain.model import FindingKind
    from idemview.qt import theme
    from idemview.qt.app import make_app
    from idemview.services.session import OpenSpec

    app = make_app()
    docs = ROOT / "docs"
    db = Path(tempfile.mkdtemp()) / "demo.db"
    planted = write_demo(db, anchor=datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0))
    import sqlite3

    from idemview.services.demo_effects import layout_path_for

    with sqlite3.connect(db) as c:
        ledger_only = set(c.execute("SELECT scope, idempotency_key FROM idemview_demo_planted"))

    def pump(cond=lambda: True, timeout=30.0, settle=0.4):
        t0 = time.time()
        while not cond() and time.time() - t0 < timeout:
            app.processEvents()
            time.sleep(0.01)
        t1 = time.time()
        while time.time() - t1 < settle:
            app.processEvents()
            time.sleep(0.01)

    from idemview.qt.mainwindow import MainWindow
    from idemview.qt.connections import ConnectionDialog
    from PySide6.QtCore import QRect
    from idemview.config import Connection, ConnectionStore
    from idemview.qt.settings import gui_settings

    store = ConnectionStore()
    for name, dialect, host, dbname, ago in (
        ("payments (prod replica)", "postgresql", "db-replica.internal", "payments", 2),
        ("celery results", "mysql", "mysql.internal", "celery", 30),
        ("demo ledger", "sqlite", "", str(db), None),
    ):
        c = Connection(
            name=name,
            dialect=dialect,
            host=host,
            database=dbname,
            user="ledger_reader",
            layout="idemview" if dialect == "sqlite" else "",
        )
        store.upsert(c)
        if ago is not None:
            from datetime import timedelta

            gui_settings().setValue(
                f"recent/{c.id}", (datetime.now(timezone.utc) - timedelta(hours=ago)).replace(microsecond=0).isoformat()
            )
    for scheme, suffix in ((Qt.ColorScheme.Light, ""), (Qt.ColorScheme.Dark, "-dark")):
        theme.apply_scheme(app, scheme)
        w = MainWindow()
        w.fit_to(QRect(0, 0, 1600, 1000))
        w.show()
        pump(settle=0.2)
        w.refresh_start_page()
        pump(settle=0.2)
        w.grab().save(str(docs / f"start-page{suffix}.png"))
        # as `idemview --demo` opens it: with the layout that reconciles with the demo's charges file
        tab = w.open_spec(OpenSpec(url=str(db), name="demo ledger", layout=str(layout_path_for(db))))
        pump(lambda: tab.scan_complete() and tab.model.rowCount() > 0 and not tab.model.is_loading())
        # a double charge: two charges at the provider for one operation (the Effects column says 2 ⚠)
        scope, key = sorted(set(planted.incidents["duplicate_effect"]) - ledger_only)[0]
        tab.open_operation(scope, key)
        pump(lambda: tab.detail.detail is not None)
        w.grab().save(str(docs / f"main-window{suffix}.png"))
        if not suffix:
            w.fit_to(QRect(0, 0, 1280, 800))
            pump(settle=0.5)
            w.grab().save(str(docs / "main-window-1280.png"))
            w.fit_to(QRect(0, 0, 1600, 1000))
            pump(settle=0.3)
        tab.filter_by_finding(FindingKind.DUPLICATE_EFFECT)
        pump(
            lambda: (
                tab.flt.findings == [FindingKind.DUPLICATE_EFFECT]
                and not tab.model.is_loading()
                and tab.findings_settled()
            )
        )
        tab.detail.payloads.setCurrentIndex(1)  # the provider's response, masked
        pump(settle=0.2)
        w.grab().save(str(docs / f"operation-detail{suffix}.png"))
        tab.detail.grab().save(str(docs / f"detail-payloads{suffix}.png"))
        dlg = ConnectionDialog(w.credentials, w.masker, w)
        dlg.url.setText("postgresql+psycopg://ledger_reader@db.internal:5432/payments?sslmode=require")
        dlg.name.setText("payments (prod replica)")
        dlg.split_btn.click()
        dlg.resize(880, 600)
        dlg.show()
        pump()
        dlg.grab().save(str(docs / f"connection-dialog{suffix}.png"))
        dlg.close()
        w.export_current()
        ex = w.export_dialog
        ex.path.setText(str(Path.home() / "evidence" / "duplicate-effects.csv"))
        ex.null_literal.setText("NULL")
        ex._set_problem(f"the folder {Path.home() / 'evidence'} does not exist")
        pump()
        ex.grab().save(str(docs / f"export-dialog{suffix}.png"))
        ex.reject()
        for t in w.ledger_tabs():
            t.close_tab()
        w.close()
        pump(settle=0.2)
    print("wrote", ", ".join(sorted(p.name for p in docs.glob("*.png"))))
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
