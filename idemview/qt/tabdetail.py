"""The operation side of a ledger tab: the detail pane, the grid's selection, links and revealing a value.

A mixin of :class:`~idemview.qt.ledgertab.LedgerTab` (the attributes it reads are the tab's). Every read
runs on the tab's :class:`~idemview.qt.workers.Runner`; an operation's findings and their state come
from the tab's :class:`~idemview.services.findstate.FindingBoard`.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QModelIndex
from PySide6.QtGui import QAction, QGuiApplication

from idemview.domain.model import SEVERITY_ORDER
from idemview.qt.models import OP_COLUMNS, OperationsModel, RowRole
from idemview.qt.workers import JobError
from idemview.services.compact import compact_kinds_of, findings_of
from idemview.services.session import load_detail, reveal_state, reveal_value


class DetailViews:
    """Opening operations in the detail pane, keeping the grid's selection on it, links, reveal."""

    # the tab's (LedgerTab.__init__ / _build)
    runner: Any
    board: Any
    model: Any
    grid: Any
    detail: Any
    detail_scroll: Any
    masker: Any
    spec: Any
    ledger: Any
    now: Any
    filterbar: Any
    message: Any
    copy_action: Any
    _current_timer: Any
    _ordered: Any
    _finding_pos: int

    def _grid_open(self, idx: QModelIndex):
        r = self.model.data(idx, RowRole)
        if r is not None:
            self.open_operation(r.scope_raw, r.key_raw)

    def open_operation(self, scope: str, key: str, *, reload: bool = False):
        """Show the operation (scope, key) in the detail pane (read on a worker). Its findings and
        their state come from :attr:`board`; ``reload``: the same operation again because its finding
        state changed (the pane keeps its scroll position; a new operation starts at the top)."""
        if self.ledger is None:
            return
        ledger, masker = self.ledger, self.masker
        state = self.board.state_of((scope, key))
        res = self.board.result
        fs = list(res.by_ref.get((scope, key), [])) if res else []
        expl = res.explanations if res else {}
        # kinds the scan sent as keys (issue 11 §3): this operation's findings of them, computed now
        compact = getattr(res, "compact", None)
        more = [k for k in compact_kinds_of(compact, (scope, key)) if all(f.kind != k for f in fs)]
        now = res.now if res else None

        def job(tok):
            if not more or now is None:
                return load_detail(ledger, masker, scope, key, fs, expl, state)
            extra, extra_expl = findings_of(ledger, masker, now, scope, key, more)
            allf = sorted(fs + extra, key=lambda f: SEVERITY_ORDER[f.severity])
            ex = {id(f): expl[id(f)] for f in fs if id(f) in expl}
            ex.update(extra_expl)
            return load_detail(ledger, masker, scope, key, allf, ex, state)

        def shown(d):
            self._unfold_detail()  # type: ignore[attr-defined]
            self.detail.set_detail(d, now or self.now)
            self._update_footer()  # type: ignore[attr-defined]
            if not reload:  # F8, a search hit, a click: the new operation is read from its top
                self.detail_scroll.verticalScrollBar().setValue(0)

        self.runner.submit("detail", job, shown, self.show_error)
        self._shown_ref = (scope, key)
        if not reload:
            self._select_shown(scroll=True)

    def _board_changed(self):
        """The scan published: views that show a finding state follow without being re-opened."""
        self.filterbar.set_board(self.board)
        d = self.detail.detail
        if d is None or self.ledger is None:
            return
        new = self.board.state_of((d.scope_raw, d.key_raw))
        old = getattr(d, "state", None)
        if old is None or old.signature != new.signature:
            if (d.scope_raw, d.key_raw) == getattr(self, "_shown_ref", None):
                self.open_operation(d.scope_raw, d.key_raw, reload=True)

    def _select_shown(self, scroll: bool = False):
        """Select the operation the detail shows in the grid when it is loaded there, else select
        nothing: the grid never highlights one operation while the detail shows another."""
        self._rows_seen = self.model.rowCount()
        self._open_waiting = -1  # a new query or another operation opened: a "…" click is moot
        ref = getattr(self, "_shown_ref", None)
        sm = self.grid.selectionModel()
        self._syncing = True
        try:
            for i, row in self.model.cached():  # the rows held (an operation not held is not selected)
                if ref is not None and (row.scope_raw, row.key_raw) == ref:
                    if self.grid.currentIndex().row() != i or not sm.isRowSelected(i):
                        self.grid.selectRow(i)
                    if scroll:
                        self.grid.scrollTo(self.model.index(i, 0))
                    return
            sm.clearSelection()
            sm.setCurrentIndex(QModelIndex(), sm.SelectionFlag.NoUpdate)
        finally:
            self._syncing = False

    def _page_loaded_select(self, n: int):
        # only the rows this page added are looked at (a loop over 20,000 loaded rows per page would
        # be GUI-thread time for nothing): the shown operation may have just arrived
        ref = getattr(self, "_shown_ref", None)
        start = getattr(self, "_rows_seen", 0)
        self._rows_seen = n
        if ref is None or self.grid.selectionModel().hasSelection():
            return
        for i, row in self.model.cached():
            if i >= start and (row.scope_raw, row.key_raw) == ref:
                self._syncing = True
                try:
                    self.grid.selectRow(i)
                finally:
                    self._syncing = False
                return

    def _grid_selection_changed(self, *_):
        # a row selected by click or arrow keys opens in the detail (debounced: holding an arrow key
        # asks once when it stops)
        if getattr(self, "_syncing", False):
            return
        rows = self.grid.selectionModel().selectedRows()
        if len(rows) != 1:
            return
        self._pending_current = rows[0].row()
        self._current_timer.start()

    def _open_current(self):
        i = getattr(self, "_pending_current", -1)
        r = self.model._row_or_none(i)
        # None: its page fell out of the cache and is being read again; the row opens when it lands
        # (_open_when_held), so a click on a "…" row is never lost
        self._open_waiting = i if r is None else -1
        if r is not None and (r.scope_raw, r.key_raw) != getattr(self, "_shown_ref", None):
            self.open_operation(r.scope_raw, r.key_raw)

    def _open_when_held(self, top: QModelIndex, bottom: QModelIndex, *_roles):
        """A page read again landed (``dataChanged``): open the row selected while it showed "…", if it
        is in the page and still the selected one."""
        i = getattr(self, "_open_waiting", -1)
        if i < 0 or not top.row() <= i <= bottom.row():
            return
        self._open_waiting = -1
        if getattr(self, "_pending_current", -1) == i and self.grid.selectionModel().isRowSelected(i):
            self._open_current()

    def copy_link(self) -> str | None:
        """ "Copy link": the ``idemview open …`` command for the operation in the detail, with the layout
        and the `now` of the findings on screen (:mod:`idemview.services.links`; no password; the raw key,
        since a masked one would find nothing — refused when the key is a credential)."""
        from idemview.services.session import deep_link

        d = self.detail.detail
        if d is None:
            return None
        if self.masker.is_credential("idempotency_key", d.key_raw):
            self.message.emit("Not copied: this idempotency key looks like a credential")
            return None
        res = self.board.result
        link = deep_link(self.spec, d.scope_raw, d.key_raw, layout=self.ledger.layout, now=res.now if res else self.now)
        QGuiApplication.clipboard().setText(link)
        self.message.emit("Copied a link to this operation: " + self.masker.free_text(link))
        return link

    def open_key(self, key: str, scope: str | None = None):
        """Open the operation with exactly this idempotency key (a deep link): filter the grid to it and
        open it in the detail; without ``scope`` the ledger is asked which scope holds it."""
        self.filterbar.set_key(key)
        if scope is not None:
            self.open_operation(scope, key)
            return
        from idemview.ledger.reader import find_operations

        ledger = self.ledger

        def find(tok):
            return [(o.scope, o.key) for o in find_operations(ledger, key, limit=50) if o.key == key]

        def found(refs):
            if refs:
                self.open_operation(*refs[0])
            else:
                self.message.emit("No operation with that idempotency key in this ledger")

        self.runner.submit("link", find, found, self.show_error)

    def copy_selection(self):
        """Copy the selected row as shown (masked values stay masked on the clipboard)."""
        idx = self.grid.currentIndex()
        if not idx.isValid():
            return
        if self.model._row_or_none(idx.row()) is None:  # its page is being read again: cells show "…"
            self.message.emit("That row is still loading; copy it again in a moment")
            return
        vals = [
            str(self.model.data(self.model.index(idx.row(), c)) or "")
            for c in range(len(OP_COLUMNS))
            if not self.grid.isColumnHidden(c)
        ]
        QGuiApplication.clipboard().setText("\t".join(vals))

    def grid_reveal_action(self, index: QModelIndex, parent=None) -> QAction | None:
        """ "Reveal this value" for a grid cell: enabled for a masked non-credential value, disabled with
        "credentials are never revealed" otherwise. The value is re-read on a worker (never kept)."""
        field = OperationsModel.REVEALABLE.get(index.column()) if index.isValid() else None
        if field is None:
            return None
        a = QAction("Reveal this value", parent or self.grid)
        if self.model.is_revealed(index.row(), index.column()):
            a.setEnabled(False)
            a.setToolTip("already revealed")
            return a
        ok, tip = reveal_state(str(index.data() or ""))
        a.setEnabled(ok)
        a.setToolTip(tip)
        r, row, col = self.model._row_or_none(index.row()), index.row(), index.column()
        if r is None:
            return None

        def go():
            self.reveal(
                r.scope_raw,
                r.key_raw,
                ("op", field),
                r.row_id,
                lambda v: self.model.set_revealed(row, col, v) if self.model._row_or_none(row) is r else None,
            )

        a.triggered.connect(go)
        return a

    def _grid_menu(self, pos):
        from PySide6.QtWidgets import QMenu

        menu = QMenu(self.grid)
        menu.setToolTipsVisible(True)
        menu.addAction(self.copy_action)
        a = self.grid_reveal_action(self.grid.indexAt(pos), menu)
        if a is not None:
            menu.addAction(a)
        menu.popup(self.grid.viewport().mapToGlobal(pos))

    def _detail_reveal(self, req):
        scope, key, where = req
        self.reveal(scope, key, where, None, lambda v: self.detail.show_revealed(scope, key, where, v))

    def reveal(self, scope, key, where, row_id, on_value):
        """Re-read one value unmasked on a worker; a refusal (credential) goes to the status bar."""
        if self.ledger is None:
            return
        ledger, masker = self.ledger, self.masker

        def refused(err: JobError):
            msg = (
                err.message.split(": ", 1)[1]
                if err.message.startswith("RevealRefused: ")
                else self.masker.free_text(err.message)
            )
            self.last_reveal_refusal = msg
            self.message.emit(f"Not revealed: {msg}")

        self.runner.submit(
            "reveal", lambda tok: reveal_value(ledger, masker, scope, key, where, row_id), on_value, refused
        )
