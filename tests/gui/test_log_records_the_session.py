"""Issue 20 §6: after a scripted session the log file (idemview.log) holds the version, each ledger
opened or refused (no secret), each export with its SHA-256, and an error with its traceback, masked."""

from __future__ import annotations

import hashlib
import logging

import pytest

from tests.gui.conftest import open_and_wait, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def test_the_log_tells_what_happened(qtbot, window, demo_db, tmp_path):
    from idemview import __version__
    from idemview.qt.applog import install_log, uninstall_log
    from idemview.services.session import OpenSpec

    path, _ = demo_db
    log = install_log()
    try:
        tab = open_and_wait(qtbot, window, spec_for(path))
        secret = "hunter2-" + "x" * 6
        bad = window.open_spec(
            OpenSpec(url=f"postgresql+psycopg://app:{secret}@127.0.0.1:1/nowhere", name="prod payments")
        )
        qtbot.waitUntil(lambda: bad.banner.isVisible(), timeout=30000)
        window.tabs.setCurrentWidget(tab)
        out = tmp_path / "evidence.csv"
        window.export_done_box = None
        window.export_current()
        window.export_dialog.path.setText(str(out))
        window.export_dialog.export_btn.click()
        qtbot.waitUntil(lambda: getattr(window, "export_done_box", None) is not None, timeout=60000)

        # a job that fails unexpectedly: its traceback (with a card number in it) goes to the log, masked
        def boom(tok):
            raise ValueError("card 4111 1111 1111 1111 rejected")

        errors = []
        tab.runner.submit("boom", boom, None, errors.append)
        qtbot.waitUntil(lambda: bool(errors), timeout=10000)
        for h in logging.getLogger().handlers:
            h.flush()
        text = log.read_text(encoding="utf-8")
    finally:
        uninstall_log()
    assert f"idemview {__version__} started" in text and "SQLAlchemy" in text and "Qt " in text
    assert "opened demo ledger" in text and "layout" in text
    assert "could not open prod payments" in text
    sha = hashlib.sha256(out.read_bytes()).hexdigest()
    assert f"SHA-256 {sha}" in text and str(out) in text
    assert "background job boom failed" in text and "Traceback" in text and "in boom" in text
    assert secret not in text and "4111 1111 1111 1111" not in text and "4111111111111111" not in text
