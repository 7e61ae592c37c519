"""GUI error banners (qt.workers.describe_error): ledger data in an error is masked (issue 9 item 4), and a
taken final name or a full disk reads as one plain sentence. Moved here from the core folders, which run
without Qt (so these never ran there)."""

from __future__ import annotations

import errno
import os
import sqlite3

from idemview.evidence.writer import FinalNameTaken
from idemview.ledger.connect import ConnectError
from tests.unit.test_secrets import EMAIL, ERROR_TEXT, PW, _leaks


def test_gui_banner_masks_ledger_data():
    from sqlalchemy.exc import OperationalError

    from idemview.qt.workers import describe_error

    for e in (
        OperationalError("SELECT 1", {}, sqlite3.OperationalError(ERROR_TEXT)),
        RuntimeError(ERROR_TEXT),
        ConnectError(f"cannot connect: ops:{PW}@127.0.0.1:1 {EMAIL}"),
    ):
        err = describe_error(e)
        assert not _leaks(err.message + err.detail) and PW not in err.message + err.detail


def test_gui_banner_for_a_taken_name_and_a_full_disk():
    from idemview.qt.workers import describe_error

    err = describe_error(FinalNameTaken("/x/out.csv", ["/x/.out.csv.1.part", "/x/.out.csv.manifest.json.2.part"]))
    assert err.message.startswith("/x/out.csv appeared") and "/x/.out.csv.1.part" in err.message
    err = describe_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/x/.out.csv.1.part"))
    assert err.message == f"cannot write /x/.out.csv.1.part: {os.strerror(errno.ENOSPC)}"
