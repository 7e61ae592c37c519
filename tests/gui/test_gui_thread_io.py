"""No blocking I/O on the GUI thread (issue 25, "GUI thread I/O"): closing a tab closes its connections
(``engine.dispose()``) on a worker thread, and the demo ledger is written on a worker thread, its tab
opened when the write is done."""

from __future__ import annotations

import threading

from tests.gui.conftest import open_and_wait, spec_for


def test_close_tab_disposes_off_the_gui_thread(qtbot, window, demo_db):
    path, _planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    engine = tab.opened.engine
    real = engine.dispose
    threads: list[threading.Thread] = []

    def recording_dispose(*a, **kw):
        threads.append(threading.current_thread())
        return real(*a, **kw)

    engine.dispose = recording_dispose
    window.close_tab(window.tabs.indexOf(tab))
    assert window.tabs.count() == 0
    qtbot.waitUntil(lambda: len(threads) == 1, timeout=10000)
    assert threads[0] is not threading.main_thread()
    # a page or count cancelled by the close may still be returning its connection to the pool
    qtbot.waitUntil(lambda: engine.pool.checkedout() == 0, timeout=10000)


def test_demo_is_written_off_the_gui_thread(qtbot, window, monkeypatch):
    import idemview.services.demo as demo
    from idemview.services.demo_ledger import demo_is_current, demo_path

    real = demo.write_demo
    threads: list[threading.Thread] = []

    def recording_write(*a, **kw):
        threads.append(threading.current_thread())
        return real(*a, **kw)

    monkeypatch.setattr(demo, "write_demo", recording_write)
    assert not demo_path().exists()
    window.open_demo()
    assert window.tabs.count() == 0  # open_demo returned before the demo was written
    window.open_demo()  # a second click while it is written does not start a second writer
    qtbot.waitUntil(lambda: window.tabs.count() == 1, timeout=120000)
    assert len(threads) == 1 and threads[0] is not threading.main_thread()
    assert demo_is_current(demo_path())
    tab = window.tabs.widget(0)
    assert tab.spec.url == str(demo_path()) and tab.spec.name == "demo ledger"
    qtbot.waitUntil(lambda: tab.opened is not None, timeout=60000)
    # the demo now being current, opening it again opens a second tab at once (nothing written)
    window.open_demo()
    assert window.tabs.count() == 2 and len(threads) == 1
