"""Regenerate the screenshots in docs/ (light and dark): main window on the demo ledger, the detail of
a duplicate_effect operation, the connection dialog and the evidence export dialog.

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
    for scheme, suffix in ((Qt.ColorScheme.Light, ""), (Qt.ColorScheme.Dark, "-dark")):
        theme.apply_scheme(app, scheme)
        w = MainWindow()
        w.resize(1400, 900)
        w.show()
        tab = w.open_spec(OpenSpec(url=str(db), name="demo ledger", layout="idemview"))
        pump(lambda: tab.scan_complete() and tab.model.rowCount() > 0 and not tab.model.is_loading())
        scope, key = sorted(set(planted.incidents["duplicate_effect"]))[0]
        tab.open_operation(scope, key)
        pump(lambda: tab.detail.detail is not None)
        w.grab().save(str(docs / f"main-window{suffix}.png"))
        tab.filter_by_finding(FindingKind.DUPLICATE_EFFECT)
        pump(lambda: tab.flt.findings == [FindingKind.DUPLICATE_EFFECT] and not tab.model.is_loading())
        w.grab().save(str(docs / f"operation-detail{suffix}.png"))
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
