"""An operation with no created time and no attempt rows (found by a tester): the detail says the
times were not recorded (not "— UTC") and the timeline says there are no attempts, not that no
operation is open."""

from __future__ import annotations

from sqlalchemy import create_engine, insert

from idemview.services.demo import reference_metadata
from idemview.services.session import OpenSpec
from tests.gui.conftest import open_and_wait


def test_operation_without_times_or_attempts(qtbot, window, tmp_path):
    p = tmp_path / "ledger.db"
    eng = create_engine(f"sqlite:///{p}")
    md = reference_metadata()
    md.create_all(eng)
    with eng.begin() as c:
        c.execute(
            insert(md.tables["operations"]),
            [{"id": 1, "scope": "s", "idempotency_key": "k-no-times", "status": "failed", "attempt_count": 0}],
        )
    eng.dispose()
    tab = open_and_wait(qtbot, window, OpenSpec(url=str(p), name="t", layout="idemview"))
    tab.open_operation("s", "k-no-times")
    qtbot.waitUntil(lambda: tab.detail.detail is not None, timeout=20000)
    header = tab.detail.header.text()
    assert "(not recorded)" in header and "— UTC" not in header
    assert tab.detail.timeline.is_open and not tab.detail.timeline.lanes
