"""What the main window does around opening a ledger tab (issue 20 §3 and §6), kept out of
``mainwindow.py``:

- a saved connection whose password nobody has (no keyring, none typed this session) asks for it
  before connecting (:mod:`idemview.qt.password`), on every path — start page, Connect, Reconnect —
  because the check sits in :meth:`LedgerTab.start`, which all of them call;
- a password typed is kept for the session only once the ledger opened with it; a wrong one is dropped
  and the next Reconnect asks again, saying why;
- only an open that succeeded moves the connection to "last opened";
- the log records each ledger opened or refused (its safe URL: no user name, no password).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

log = logging.getLogger("idemview.gui")


def _saved(conn_id: str | None):
    from idemview.config import ConnectionStore

    if not conn_id:
        return None
    try:
        return next((c for c in ConnectionStore().load() if c.id == conn_id), None)
    except Exception:  # noqa: BLE001 - a damaged file: nothing to ask about
        return None


def keyring_notice_matters() -> bool:
    """Whether the "no keyring" notice concerns this user: a saved connection to a server with a user
    name exists (a password may be asked for). The demo and SQLite files involve none."""
    from idemview.config import ConnectionStore

    try:
        conns = ConnectionStore().load()
    except Exception:  # noqa: BLE001 - a damaged file: say it, the notice is harmless
        return True
    return any(c.dialect != "sqlite" and c.user for c in conns)


def order_connections(conns: list) -> list:
    """Saved connections in the one order the start page and the connection dialog share: last opened
    first (the GUI settings' ``recent/ID``), never opened after, each group by name (case-insensitive)."""
    from idemview.qt.settings import gui_settings

    st = gui_settings()
    last = {c.id: str(st.value(f"recent/{c.id}", "") or "") for c in conns}
    by_name = sorted(conns, key=lambda c: (c.name.casefold(), c.id))
    return sorted(by_name, key=lambda c: last[c.id], reverse=True)


def watch_opening(window, tab) -> None:
    """Hook ``tab`` (a new :class:`~idemview.qt.ledgertab.LedgerTab`) into ``window``'s credentials,
    settings and log."""
    from idemview.services.session import password_needed

    creds = window.credentials

    def check(spec) -> bool:
        if creds.available:  # the keyring answers (a stored password, or none needed)
            return False
        return password_needed(spec, creds.get(spec.connection_id) if spec.connection_id else None)

    tab.password_check = check
    tab.password_wanted.connect(lambda note: _ask(window, tab, note))
    tab.opened_signal.connect(lambda: _opened(window, tab))
    tab.failed.connect(lambda msg: log.warning("could not open %s: %s", tab.spec.name, msg))


def _ask(window, tab, note: str) -> None:
    from idemview.qt.password import ask_password
    from idemview.qt.workers import JobError

    c = _saved(tab.spec.connection_id)
    user = c.user if c is not None else ""
    where = f"{c.dialect} {c.host or 'localhost'}/{c.database}" if c is not None else ""

    def given(pw: str) -> None:
        tab.spec.password = pw or None
        tab.start(asked=True)

    def cancelled() -> None:
        tab._on_open_error(JobError("not connected: no password given (Reconnect asks again)", connection_lost=True))

    window.password_prompt = ask_password(window, tab.spec.name, user, where, given, cancelled, note)


def _opened(window, tab) -> None:
    from idemview.qt.settings import gui_settings

    spec, o = tab.spec, tab.opened
    if spec.connection_id:
        gui_settings().setValue(f"recent/{spec.connection_id}", datetime.now(UTC).replace(microsecond=0).isoformat())
        if getattr(tab, "_asked", False) and spec.password:
            window.credentials.set(spec.connection_id, spec.password)  # this session only (no keyring)
    log.info(
        "opened %s: %s, layout %s, %s",
        spec.name,
        o.where if o else "?",
        o.ledger.layout.name if o else "?",
        "read-only session" if o and o.read_only else "session NOT read-only",
    )
