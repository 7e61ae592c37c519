"""The grid holds pages, not a result set (issue 27 item 3): scrolled through the whole demo ledger with
small pages, it holds at most CACHE_PAGES of them; a page that fell out is read again by its keyset
cursor when it is looked at, with the same rows, and shows a placeholder (never a guess) meanwhile."""

from __future__ import annotations

import pytest

from tests.gui.conftest import open_and_wait, settle, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


@pytest.mark.parametrize("cache_pages,page_size", [(3, 100), (2, 137)])
def test_the_grid_holds_a_bounded_number_of_pages(qtbot, window, demo_db, monkeypatch, cache_pages, page_size):
    from idemview.qt import models
    from idemview.qt.models import COL_KEY, RowRole

    monkeypatch.setattr(models, "CACHE_PAGES", cache_pages)
    path, planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    m = tab.model
    m.page_size = page_size
    tab._requery()
    settle(qtbot, tab)
    first_page = [(r.scope_raw, r.key_raw) for r in m.rows()]
    assert len(first_page) == page_size

    def scrolled_to_the_end():  # as a person does: the view follows the newest page
        tab.grid.scrollToBottom()
        if m.canFetchMore():
            m.fetchMore()
        return m.is_exhausted() and not tab.runner.is_pending("page")

    qtbot.waitUntil(scrolled_to_the_end, timeout=60000)
    assert m.rowCount() == planted.operations, "every operation was fetched once, page after page"
    assert m.held_rows() <= cache_pages * page_size and len(m.rows()) == m.held_rows()
    assert 0 not in dict(m.cached()), "the first page fell out of the cache"

    # looked at again: a placeholder first, then the same rows read again by the page's cursor
    tab.grid.scrollToTop()
    assert m.data(m.index(0, COL_KEY)) == "…" and m.data(m.index(0, COL_KEY), RowRole) is None
    qtbot.waitUntil(lambda: m.data(m.index(0, 0), RowRole) is not None, timeout=30000)
    again = [
        (m.data(m.index(i, 0), RowRole).scope_raw, m.data(m.index(i, 0), RowRole).key_raw) for i in range(page_size)
    ]
    assert again == first_page
    assert m.held_rows() <= cache_pages * page_size

    # the last row is where it was: a page in the middle read again does not shift the others
    last = m.rowCount() - 1
    qtbot.waitUntil(lambda: m.data(m.index(last, 0), RowRole) is not None, timeout=30000)
    assert m.data(m.index(last, COL_KEY)) not in (None, "…")


def test_the_windows_sqlite_connections_are_lean(qtbot, window, demo_db):
    from sqlalchemy import text

    from idemview.services.leanengine import LEAN_CACHE_KB

    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    engine = tab.opened.engine

    def pragmas(tok):
        with engine.connect() as c:
            return [c.execute(text(f"PRAGMA {p}")).scalar() for p in ("cache_size", "mmap_size", "temp_store")]

    got = []
    tab.runner.submit("probe", pragmas, got.append)  # on a worker: no database call on the GUI thread
    qtbot.waitUntil(lambda: bool(got), timeout=20000)
    assert got[0] == [-LEAN_CACHE_KB, 0, 1]
