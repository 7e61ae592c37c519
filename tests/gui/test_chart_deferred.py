"""Issue 27: the incident overview builds its pyqtgraph chart a turn after the tab (the open was the GUI
thread's longest stall on the 2M-row Celery ledger); what it is asked meanwhile is kept and replayed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from idemview.domain.model import Finding, FindingKind, Severity
from idemview.ledger.queries import Histogram


def test_what_the_chart_is_asked_before_it_exists_is_replayed(qtbot):
    from idemview.qt.overview import IncidentOverview

    ov = IncidentOverview()
    qtbot.addWidget(ov)
    assert ov.plot is None, "built in a later event-loop turn, not in the constructor"
    t = datetime(2026, 11, 30, 12, tzinfo=UTC)
    ov.set_span(t - timedelta(hours=2), t)
    ov.set_histogram(
        Histogram([t - timedelta(minutes=2), t - timedelta(minutes=1), t], {"failed": [1, 4]}, "operations")
    )
    f = Finding(FindingKind.STUCK_IN_PROGRESS, Severity.HIGH, "s", "k", "stuck", at=t - timedelta(minutes=30))
    ov.set_findings([f], {})
    ov.show_window(t - timedelta(minutes=50), t - timedelta(minutes=20))
    before = ov.view_range()
    assert before == (t - timedelta(hours=2) - timedelta(minutes=10), t + timedelta(minutes=10))
    assert ov.window_shown() == ((t - timedelta(minutes=50)).timestamp(), (t - timedelta(minutes=20)).timestamp())
    qtbot.waitUntil(lambda: ov.plot is not None, timeout=3000)
    got = ov.view_range()
    assert abs((got[0] - before[0]).total_seconds()) < 1 and abs((got[1] - before[1]).total_seconds()) < 1
    assert len(ov._bars) == 1 and len(ov._markers.data) == 1
    assert ov.window_shown() == ((t - timedelta(minutes=50)).timestamp(), (t - timedelta(minutes=20)).timestamp())
    assert ov.axes_show_values("bottom") and ov.axes_show_values("left")


def test_closing_before_the_chart_is_built_does_not_crash(qtbot):
    from PySide6.QtWidgets import QWidget

    from idemview.qt.overview import IncidentOverview

    holder = QWidget()
    qtbot.addWidget(holder)
    ov = IncidentOverview(holder)
    ov.deleteLater()
    qtbot.wait(100)  # past the chart's delay: the timer died with the widget
    ok = IncidentOverview(holder)
    ok.ensure_chart()  # built at once when asked (e.g. a screenshot), and only once
    assert ok.ensure_chart() is ok.plot is not None
