"""A finding filter answered from the tab's scan (issue 11 §3: the findings' SQL may walk a whole table
for every page) shows exactly the operations the findings' SQL shows, and its count is the same."""

from __future__ import annotations

import pytest

from tests.gui.conftest import load_all, open_and_wait, settle, spec_for

pytestmark = [pytest.mark.gui, pytest.mark.qt_log_ignore("propagateSizeHints")]


def test_finding_filter_uses_the_scan_and_matches_the_sql(qtbot, window, demo_db):
    from idemview.domain.filters import Filter
    from idemview.domain.model import FindingKind
    from idemview.services.session import SCANNED_REFS_MAX, count_matching, scanned_refs

    path, _planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    res, now = tab.findings, tab.now
    assert res is not None and res.now == now
    for kind in (FindingKind.RETRY_STORM, FindingKind.DUPLICATE_EFFECT, FindingKind.EXPIRED_KEY):
        tab.filter_by_finding(kind)
        settle(qtbot, tab)
        load_all(qtbot, tab)
        flt = Filter(findings=[kind])
        refs = scanned_refs(res, flt, now)
        assert refs is not None and 0 < len(refs) <= SCANNED_REFS_MAX, kind
        shown = {(r.scope_raw, r.key_raw, r.row_id) for r in tab.model.rows()}
        # the same question asked in SQL (what the grid does before the scan has answered)
        by_sql, after = set(), None
        while True:
            page = tab.ledger.page(flt, after=after, limit=500, now=now, payloads=False)
            by_sql |= {(o.scope, o.key, o.row_id) for o in page.rows}
            if page.cursor is None:
                break
            after = page.cursor
        assert shown == by_sql, kind
        assert count_matching(tab.ledger, flt, now, res) == count_matching(tab.ledger, flt, now, None) == len(by_sql)
    # a kind the scan has not answered (another `now`) is asked in SQL
    assert scanned_refs(res, Filter(findings=[FindingKind.RETRY_STORM]), None) is None
