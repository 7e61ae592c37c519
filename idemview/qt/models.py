"""Qt item models. The operations model is lazy: it asks the database for the next page (keyset paging,
:meth:`idemview.ledger.reader.Ledger.page`) on ``fetchMore``, on a worker thread, and holds no result set:
only the pages most recently looked at, at most :data:`CACHE_PAGES` of them (an LRU; issue 27 item 3),
and for every page fetched the keyset cursors of its first and last row. A page that fell out of the
cache is read again between those two rows when the view paints it. Sorting is a new database query, never a
proxy model over rows in memory — a 10-million row ledger sorts the same way a 10-row one does.
"""

from __future__ import annotations

import gc
from collections import OrderedDict
from datetime import datetime
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QFont

from idemview.domain.filters import Filter
from idemview.domain.model import DEFAULT_SEVERITY, SEVERITY_ORDER, Attempt, FindingKind, Severity
from idemview.qt import theme
from idemview.qt.workers import JobError, Runner
from idemview.services.compact import compact_findings
from idemview.services.session import (
    EffectCounts,
    FindingsResult,
    GridPage,
    OpRow,
    SearchHit,
    SharedMasker,
    effect_counts,
    effects_where,
    fetch_grid_page,
    kind_summary,
)

Index = QModelIndex | QPersistentModelIndex


def _probe_none_leak() -> bool:
    """True when this PySide6 drops a reference to ``None`` each time C++ calls a Python ``data()``
    override that returns ``None`` (seen with PySide6 6.12 on Python 3.11, where ``None`` is not yet
    immortal: after enough calls the interpreter aborts with "deallocating None")."""
    import sys

    class _M(QAbstractTableModel):
        def rowCount(self, parent=QModelIndex()):
            return 1

        def columnCount(self, parent=QModelIndex()):
            return 1

        def data(self, index, role=Qt.ItemDataRole.DisplayRole):
            return None

    m = _M()
    before = sys.getrefcount(None)
    for _ in range(64):
        m.index(0, 0).data(Qt.ItemDataRole.ToolTipRole)
    return sys.getrefcount(None) < before - 32


if _probe_none_leak():
    # PySide6 6.12.0 drops a reference to None each time C++ calls a data() override that returns None;
    # the interpreter then aborts ("deallocating None"). pyproject.toml pins PySide6 below 6.12; this
    # catches an environment that installed it anyway, with a clear message instead of a later abort.
    import PySide6

    raise ImportError(
        f"PySide6 {PySide6.__version__} loses references to None (a known binding bug); "
        "install PySide6-Essentials<6.12 (pip install -e . does)"
    )


# (header, sort key in Ledger.SORTABLE or None)
#: Columns whose first sort click sorts descending (Qt.InitialSortOrderRole).
FIRST_DESCENDING = frozenset({"attempt_count", "created_at", "expires_at"})
OP_COLUMNS = [
    ("Idempotency key", "key"),
    ("Scope", "scope"),
    ("Kind", "kind"),
    ("Status", "status"),
    ("Created", "created_at"),
    ("Expires", "expires_at"),
    ("Attempts", "attempt_count"),
    ("Effects", None),
    ("Findings", None),
]
(COL_KEY, COL_SCOPE, COL_KIND, COL_STATUS, COL_CREATED, COL_EXPIRES, COL_ATTEMPTS, COL_EFFECTS, COL_FINDINGS) = range(9)
#: From this many effect records an operation's side effect happened more than once: highlighted.
EFFECTS_WARN = 2

#: Pages of rows the operations model keeps (LRU): with 500-row pages at most 5,000 rows are held
#: however far the grid scrolls; the visible page is always the most recently used one.
CACHE_PAGES = 10

#: Role carrying the row's findings (list[Finding]) for the badge delegate.
FindingsRole = Qt.ItemDataRole.UserRole + 1
#: Role carrying the row's :class:`~idemview.services.findstate.OpFindings` (pending / none / these).
FindingStateRole = Qt.ItemDataRole.UserRole + 7
#: Role carrying the OpRow itself.
RowRole = Qt.ItemDataRole.UserRole + 2


class OperationsModel(QAbstractTableModel):
    """Lazy model over ``Ledger.page()``; ``fetchMore`` loads the next page on a worker thread.

    ``set_query(filter, now, findings)`` restarts from the first page. ``loading_changed`` tells the
    view to show a "loading…" hint; ``error`` carries a :class:`JobError` (rows already shown stay)."""

    loading_changed = Signal(bool)
    error = Signal(object)
    page_loaded = Signal(int)  # total rows now loaded
    effects_error = Signal(object)  # JobError of an effect count (the rows stay; the column stays blank)

    def __init__(self, runner: Runner, masker: SharedMasker, page_size: int = 500, parent=None):
        super().__init__(parent)
        self.runner, self.masker, self.page_size = runner, masker, page_size
        self.ledger = None
        self.flt = Filter()
        self.now: datetime | None = None
        self.by_ref: dict | None = None
        self.scanned: FindingsResult | None = None  # the tab's scan: a finding filter uses its answer
        self._sql_findings = False  # the page in flight runs the findings' SQL (the scan had no answer)
        self.sort_key, self.descending = "created_at", True
        # the pages held (page number -> rows, least recently used first) and, for every page fetched,
        # the cursors of its first and last row and its length: rows are never kept beyond CACHE_PAGES
        self._pages: OrderedDict[int, list[OpRow]] = OrderedDict()
        self._bounds: list[tuple[tuple | None, tuple | None]] = []
        self._lens: list[int] = []
        self._n = 0  # rows fetched so far (the grid's row count)
        self._refetching: set[int] = set()
        self._cursor: tuple | None = None
        self._started = False  # first page requested
        self._loading = False
        self._exhausted = True
        self._revealed: dict[tuple[int, int], str] = {}  # (row, column) -> value revealed on request
        # Effect records per operation (issue #16 §4), counted per page on a worker after the page is in
        self._fx_counts: dict[tuple[str, str], int] = {}
        self._fx_where = ""  # where they are counted, masked ("" without [effects])
        self._query_gen = 0  # bumped by set_query: a late count of an older query is dropped
        self._fx_pages = 0  # effect counts asked for the current query (one channel each)

    # ------------------------------------------------------------------------------ queries

    def set_ledger(self, ledger) -> None:
        self.ledger = ledger
        where = effects_where(ledger) if ledger is not None else ""
        self._fx_where = self.masker.free_text(where) if where else ""
        self.headerDataChanged.emit(Qt.Orientation.Horizontal, COL_EFFECTS, COL_EFFECTS)

    def has_effects(self) -> bool:
        """The layout's ``[effects]`` section is bound: the grid shows the Effects column."""
        return self.ledger is not None and getattr(self.ledger, "effects", None) is not None

    def effect_count(self, row: int) -> int | None:
        """Effect records of row ``row``'s operation (None: not counted yet, or no effects)."""
        r = self._row_or_none(row)
        return None if r is None else self._fx_counts.get((r.scope_raw, r.key_raw))

    def set_query(
        self, flt: Filter | None = None, now: datetime | None = None, findings: FindingsResult | None = None
    ) -> None:
        """Restart from the first page with a new filter (the old answer is dropped even if late)."""
        if flt is not None:
            self.flt = flt
        if now is not None:
            self.now = now
        if findings is not None:
            self.by_ref = findings.by_ref
            self.scanned = findings
        self._cancel_effect_counts()
        self.beginResetModel()
        self._pages, self._bounds, self._lens, self._n, self._cursor = OrderedDict(), [], [], 0, None
        self._refetching = set()
        self._revealed = {}
        self._fx_counts = {}
        self._exhausted = self.ledger is None
        self._started = False
        self.endResetModel()
        if self.ledger is not None:
            self._request(None)

    #: the tab's FindingBoard (set by the tab): the one answer for a row's findings and their state
    board = None

    def _state(self, r: OpRow):
        return self.board.state_of((r.scope_raw, r.key_raw)) if self.board is not None else None

    def _fs(self, r: OpRow) -> list:
        if self.board is not None:
            return list(self._state(r).findings)
        if self.by_ref is not None:
            ref = (r.scope_raw, r.key_raw)
            fs = self.by_ref.get(ref, [])
            compact = getattr(self.scanned, "compact", None)
            if compact:  # kinds sent as keys (issue 11 §3): a badge from the key set
                more = [f for f in compact_findings(compact, ref) if all(g.kind != f.kind for g in fs)]
                if more:
                    fs = sorted(fs + more, key=lambda f: SEVERITY_ORDER[f.severity])
            return fs
        return r.findings

    def scanned_for(self, flt: Filter) -> FindingsResult | None:
        """The scan a query of ``flt`` may take its finding filter's key list from: None when ``flt``
        chooses a kind the scan kept as keys beyond its first findings (then the kind's SQL answers)."""
        res = self.scanned
        compact = getattr(res, "compact", None)
        if compact and any(k in compact for k in flt.findings):
            return None
        return res

    def refresh_findings(self, findings: FindingsResult) -> None:
        """New findings for the rows already shown (badge column only; no re-query)."""
        # Badges are looked up at paint time (_fs), so new findings cost O(1) here however many rows
        # are loaded: no loop over tens of thousands of rows on the GUI thread.
        self.by_ref = findings.by_ref
        self.scanned = findings
        if self._n:
            self.dataChanged.emit(self.index(0, COL_FINDINGS), self.index(self._n - 1, COL_FINDINGS))

    def _request(self, after):
        ledger, masker, flt, sort, desc = self.ledger, self.masker, self.flt, self.sort_key, self.descending
        now, by_ref, limit, scanned = self.now, self.by_ref, self.page_size, self.scanned_for(flt)
        self._started = True
        self._sql_findings = bool(flt.findings) and not self.scan_answers(flt)
        self._set_loading(True)
        self.runner.submit(
            "page",
            lambda tok: fetch_grid_page(
                ledger, masker, flt, sort, desc, after, limit, now or datetime.now(theme.UTC), by_ref, scanned
            ),
            self._on_page,
            self._on_error,
        )

    def scan_answers(self, flt: Filter, res: FindingsResult | None = None) -> bool:
        """The scan ``res`` (default the model's) has answered every finding kind ``flt`` chooses, for
        this query's ``now`` (cheap: no loop over findings)."""
        res = res if res is not None else self.scanned
        compact = getattr(res, "compact", None)
        return (
            res is not None
            and not (compact and any(k in compact for k in flt.findings))
            and self.now is not None
            and res.now == self.now
            and not any(k in res.unsupported for k in flt.findings)
        )

    def waits_on_finding_sql(self) -> bool:
        """The first page of a finding filter is being asked in SQL (the scan had not answered yet)."""
        return self._loading and self._sql_findings and not self._n

    def _on_page(self, result: GridPage):
        rows, cursor = result.rows, result.cursor
        # The cursor moves before any signal is emitted and "loading" ends only after the rows are in:
        # a view or model tester reacting to rowsAboutToBeInserted / loading_changed by calling
        # fetchMore must see either "still loading" or the new cursor. (It used to see loading=False
        # with the old cursor, asked for the same page again, and the grid showed every page twice.)
        self._cursor = cursor if rows else None
        self._exhausted = self._cursor is None
        if rows:
            first, page = self._n, len(self._lens)
            self.beginInsertRows(QModelIndex(), first, first + len(rows) - 1)
            self._bounds.append((result.first, result.last))
            self._lens.append(len(rows))
            self._n += len(rows)
            self._keep(page, rows)
            self.endInsertRows()
            if self.has_effects():
                self._count_effects(rows, first)
            # Held rows are few (CACHE_PAGES pages) but live a while: out of the cyclic GC's
            # generations (no cycles; refcounting still frees them), so full collections stay short.
            gc.freeze()
        self._set_loading(False)
        self.page_loaded.emit(self._n)

    # ------------------------------------------------------------------------- the page cache

    def _keep(self, page: int, rows: list[OpRow]) -> None:
        """Hold ``rows`` as page ``page`` (most recently used); the least recently used pages beyond
        :data:`CACHE_PAGES` are dropped, with what was kept per row of them (effect counts, reveals)."""
        self._pages[page] = rows
        self._pages.move_to_end(page)
        while len(self._pages) > CACHE_PAGES:
            gone, old = self._pages.popitem(last=False)
            for r in old:
                self._fx_counts.pop((r.scope_raw, r.key_raw), None)
            # a value revealed on request is never kept beyond its page (a page read again could hold
            # another operation at that row number)
            lo, hi = gone * self.page_size, gone * self.page_size + len(old)
            if self._revealed:
                self._revealed = {rc: v for rc, v in self._revealed.items() if not lo <= rc[0] < hi}

    def _locate(self, i: int) -> tuple[int, int]:
        """(page, offset) of row ``i``: pages are ``page_size`` long except the last fetched."""
        ps = self.page_size
        page = min(i // ps, len(self._lens) - 1)
        return page, i - page * ps

    def _row_or_none(self, i: int) -> OpRow | None:
        """Row ``i`` when its page is held (touching it: most recently used), else None and the page is
        read again on a worker (the view repaints the rows when it lands)."""
        if not 0 <= i < self._n:
            return None
        page, off = self._locate(i)
        rows = self._pages.get(page)
        if rows is None:
            self._refetch(page)
            return None
        self._pages.move_to_end(page)
        return rows[off] if off < len(rows) else None

    def _refetch(self, page: int) -> None:
        if page in self._refetching or self.ledger is None:
            return
        self._refetching.add(page)
        ledger, masker, flt, sort, desc = self.ledger, self.masker, self.flt, self.sort_key, self.descending
        now, by_ref, limit, scanned = self.now, self.by_ref, self._lens[page], self.scanned_for(self.flt)
        (start, end), gen = self._bounds[page], self._query_gen

        def landed(result: GridPage) -> None:
            self._refetching.discard(page)
            if gen != self._query_gen:
                return
            rows = result.rows
            self._keep(page, rows)
            first = page * self.page_size
            last = min(first + self._lens[page], self._n) - 1
            if last >= first:
                self.dataChanged.emit(self.index(first, 0), self.index(last, len(OP_COLUMNS) - 1))
                if self.has_effects():
                    self._count_effects(rows, first)

        def failed(err: JobError) -> None:
            self._refetching.discard(page)
            if gen == self._query_gen and not err.cancelled:
                self.error.emit(err)

        # Read again from the page's first row to its last, both included, never by its start and length
        # alone: rows written since that sort outside the page never shift into it (nor push its last
        # rows out of view into no page at all). Rows written since *inside* it do appear (the database
        # as it is now) and push as many of its last rows out of this read; no other page moves.
        self.runner.submit(
            f"repage:{page}",
            lambda tok: fetch_grid_page(
                ledger,
                masker,
                flt,
                sort,
                desc,
                None,
                limit,
                now or datetime.now(theme.UTC),
                by_ref,
                scanned,
                start=start,
                end=end,
            ),
            landed,
            failed,
        )

    def held_rows(self) -> int:
        """Rows held in memory now (at most ``CACHE_PAGES * page_size``)."""
        return sum(len(r) for r in self._pages.values())

    def cached(self) -> list[tuple[int, OpRow]]:
        """(row number, row) of every row held, in row order (finding a row without fetching any)."""
        out = []
        for page in sorted(self._pages):
            base = page * self.page_size
            out.extend((base + j, r) for j, r in enumerate(self._pages[page]))
        return out

    def _cancel_effect_counts(self) -> None:
        self._query_gen += 1
        self._fx_pages = 0
        for ch in self.runner.pending():
            if ch.startswith(("effects:", "repage:")):
                self.runner.cancel(ch)

    def _count_effects(self, rows: list[OpRow], first: int) -> None:
        """Count the effect records of a page's operations on a worker (one grouped query per page);
        the column fills in when the answer arrives. Each page has its own channel, so counting page 2
        does not drop page 1's answer; a new query (``set_query``) drops them all."""
        ledger, gen = self.ledger, self._query_gen
        refs = [(r.scope_raw, r.key_raw) for r in rows]
        page = self._fx_pages
        self._fx_pages += 1

        def done(res: EffectCounts):
            if gen != self._query_gen:
                return
            self._fx_counts.update(res.counts)
            last = min(first + len(rows), self._n) - 1
            if last >= first:
                self.dataChanged.emit(self.index(first, COL_EFFECTS), self.index(last, COL_EFFECTS))

        def failed(err: JobError):
            if gen == self._query_gen and not err.cancelled:
                self.effects_error.emit(err)

        self.runner.submit(f"effects:{page}", lambda tok: effect_counts(ledger, refs, tok), done, failed)

    def _on_error(self, err: JobError):
        self._set_loading(False)
        if not err.cancelled:
            self._exhausted = True  # stop asking until the user refreshes
            self.error.emit(err)

    def _set_loading(self, v: bool):
        if v != self._loading:
            self._loading = v
            self.loading_changed.emit(v)

    def is_loading(self) -> bool:
        return self._loading

    def is_exhausted(self) -> bool:
        return self._exhausted and not self._loading

    # ------------------------------------------------------------------------- Qt interface

    def canFetchMore(self, parent: Index = QModelIndex()) -> bool:
        if parent.isValid():
            return False
        return not self._exhausted and not self._loading and self._cursor is not None

    def fetchMore(self, parent: Index = QModelIndex()) -> None:
        if self.canFetchMore(parent):
            self._request(self._cursor)

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else self._n

    def columnCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(OP_COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):
        if orientation != Qt.Orientation.Horizontal or not (0 <= section < len(OP_COLUMNS)):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            name = OP_COLUMNS[section][0]
            if section in (COL_CREATED, COL_EXPIRES):
                return f"{name} ({theme.TIME.zone()})"
            return name
        if role == Qt.ItemDataRole.ToolTipRole:
            if section == COL_EFFECTS:
                return (
                    f"Effect records of each operation, counted in {self._fx_where or 'the effects table'}: "
                    "downstream rows (charges, e-mails…) whose link matches the operation's. "
                    f"{EFFECTS_WARN} or more (⚠) means the side effect happened more than once. "
                    "Not sortable: counted per page of rows, after the rows are shown."
                )
            if OP_COLUMNS[section][1] is None:
                return "Findings of this operation, most severe first (not sortable: computed by the scan)"
            return "Click to sort by this column (the database sorts; nothing is sorted in memory)"
        if role == Qt.ItemDataRole.InitialSortOrderRole:
            # the first click shows what an incident needs first: most attempts, newest, latest expiry
            return (
                Qt.SortOrder.DescendingOrder
                if OP_COLUMNS[section][1] in FIRST_DESCENDING
                else Qt.SortOrder.AscendingOrder
            )
        return None

    def row(self, i: int) -> OpRow:
        """Row ``i``; IndexError when it is not held (its page is being read again)."""
        r = self._row_or_none(i)
        if r is None:
            raise IndexError(i)
        return r

    #: grid column -> Operation field that "Reveal this value" re-reads
    REVEALABLE = {COL_KEY: "key", COL_SCOPE: "scope", COL_KIND: "kind"}

    def set_revealed(self, row: int, column: int, value: str) -> None:
        """Show ``value`` (revealed on the user's explicit request) instead of the masked cell."""
        if 0 <= row < self._n:
            self._revealed[(row, column)] = value
            ix = self.index(row, column)
            self.dataChanged.emit(ix, ix)

    def is_revealed(self, row: int, column: int) -> bool:
        return (row, column) in self._revealed

    def rows(self) -> list[OpRow]:
        """The rows held, in row order (every row fetched while they fit the cache)."""
        return [r for _i, r in self.cached()]

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= self._n:
            return None
        r, c = self._row_or_none(index.row()), index.column()
        if r is None:  # its page is being read again: a placeholder, never a stale or guessed value
            return "…" if role == Qt.ItemDataRole.DisplayRole and c in (COL_KEY, COL_SCOPE) else None
        if self._revealed and role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            rv = self._revealed.get((index.row(), c))
            if rv is not None:
                return rv if role == Qt.ItemDataRole.DisplayRole else "revealed on request"
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(r, c)
        elif role == Qt.ItemDataRole.ToolTipRole:
            if c == COL_STATUS:
                return f"{theme.STATUS_WORDS[r.status]} (ledger says: {r.raw_status})"
            if c == COL_EFFECTS and self.has_effects():
                n = self._fx_counts.get((r.scope_raw, r.key_raw))
                if n is None:
                    return f"counting effect records in {self._fx_where}…"
                rec = "effect record" if n == 1 else "effect records"
                more = "\nmore than one: the side effect happened more than once" if n >= EFFECTS_WARN else ""
                return f"{n} {rec} of this operation in {self._fx_where}{more}"
            if c == COL_FINDINGS and self._fs(r):
                more = "\n(still scanning other kinds…)" if self.board is not None and self.board.pending else ""
                return "\n".join(f"{f.severity.value}: {theme.KIND_WORDS[f.kind]}" for f in self._fs(r)) + more
            if c == COL_FINDINGS and self.board is not None:
                pend = self._state(r).state.value == "pending"
                return "Findings: still scanning…" if pend else "No findings"

            if c == COL_KEY:
                return r.key + (f"\nintent: {r.intent}" if r.intent else "")
        elif role == Qt.ItemDataRole.ForegroundRole:
            if c == COL_STATUS:
                return QBrush(theme.colour(theme.STATUS_COLOURS, r.status))
            if c == COL_EXPIRES and r.expires_at is not None and self.now and r.expires_at <= self.now:
                return QBrush(theme.colour(theme.SEVERITY_COLOURS, Severity.INFO))
            if c == COL_EFFECTS:
                n = self._fx_counts.get((r.scope_raw, r.key_raw))
                if n is not None and n >= EFFECTS_WARN:
                    return QBrush(theme.colour(theme.SEVERITY_COLOURS, DEFAULT_SEVERITY[FindingKind.DUPLICATE_EFFECT]))
                if n == 0:
                    return QBrush(theme.colour(theme.SEVERITY_COLOURS, Severity.INFO))
        elif role == Qt.ItemDataRole.TextAlignmentRole:
            if c in (COL_ATTEMPTS, COL_EFFECTS):
                return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        elif role == Qt.ItemDataRole.FontRole:
            if c == COL_KEY:
                f = QFont("DejaVu Sans Mono")
                f.setStyleHint(QFont.StyleHint.Monospace)
                return f
            if c == COL_EFFECTS:
                n = self._fx_counts.get((r.scope_raw, r.key_raw))
                if n is not None and n >= EFFECTS_WARN:
                    f = QFont()
                    f.setBold(True)
                    return f
        elif role == FindingsRole:
            return self._fs(r)
        elif role == FindingStateRole:
            return self._state(r)
        elif role == RowRole:
            return r
        return None

    def _display(self, r: OpRow, c: int) -> Any:
        """The text of column ``c`` of row ``r`` (masked values, times in the chosen zone)."""
        if c == COL_KEY:
            return r.key
        if c == COL_SCOPE:
            return r.scope
        if c == COL_KIND:
            return r.kind
        if c == COL_STATUS:
            return f"{theme.STATUS_GLYPHS[r.status]} {theme.STATUS_WORDS[r.status]}"
        if c == COL_CREATED:
            return theme.TIME.fmt(r.created_at)
        if c == COL_EXPIRES:
            return theme.TIME.fmt(r.expires_at)
        if c == COL_ATTEMPTS:
            return "—" if r.attempts is None else str(r.attempts)
        if c == COL_EFFECTS:
            n = self._fx_counts.get((r.scope_raw, r.key_raw))
            if n is None or not self.has_effects():
                return ""
            return f"{n} ⚠" if n >= EFFECTS_WARN else str(n)
        if c == COL_FINDINGS:
            # plain-text form (the delegate paints badges; this is for copy and accessibility)
            return ", ".join(f"{theme.SEVERITY_GLYPHS[f.severity]} {theme.KIND_WORDS[f.kind]}" for f in self._fs(r))
        return None

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        if not (0 <= column < len(OP_COLUMNS)):
            return
        key = OP_COLUMNS[column][1]
        if key is None:
            return
        self.sort_key, self.descending = key, order == Qt.SortOrder.DescendingOrder
        if self.ledger is not None:
            self.set_query()


class AttemptsModel(QAbstractTableModel):
    """The attempts of the operation in the detail pane (already masked)."""

    HEADERS = ["#", "Outcome", "Started", "Finished", "Took", "Worker", "Effect", "Error"]

    def __init__(self, parent=None):
        super().__init__(parent)
        self._rows: list[Attempt] = []
        self._after_expiry: set[int] = set()
        self._revealed: dict[tuple[int, str], str] = {}

    def set_attempts(
        self,
        atts: list[Attempt],
        after_expiry: set[int] | None = None,
        revealed: dict[tuple[int, str], str] | None = None,
    ):
        """``revealed``: (row, field) -> a value the user chose to reveal (shown instead of the mask)."""
        self.beginResetModel()
        self._rows = list(atts)
        self._after_expiry = set(after_expiry or ())
        self._revealed = dict(revealed or {})
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if (
            orientation == Qt.Orientation.Horizontal
            and role == Qt.ItemDataRole.DisplayRole
            and 0 <= section < len(self.HEADERS)
        ):
            h = self.HEADERS[section]
            return f"{h} ({theme.TIME.zone()})" if h in ("Started", "Finished") else h
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or index.row() >= len(self._rows):
            return None
        a, c = self._rows[index.row()], index.column()
        rv = self._revealed.get((index.row(), {5: "worker", 6: "effect_ref", 7: "error"}.get(c, "")))
        if rv is not None and role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            return (
                rv.splitlines()[0][:200]
                if role == Qt.ItemDataRole.DisplayRole and c == 7 and rv
                else (rv if role == Qt.ItemDataRole.DisplayRole else "revealed on request:\n" + rv)
            )
        if role == Qt.ItemDataRole.DisplayRole:
            if c == 0:
                return "—" if a.number is None else str(a.number)
            if c == 1:
                s = f"{theme.outcome_glyph(a.outcome)} {theme.OUTCOME_WORDS[a.outcome]}"
                return s + ("  ⚠ after expiry" if index.row() in self._after_expiry else "")
            if c == 2:
                return theme.TIME.fmt(a.started_at)
            if c == 3:
                return theme.TIME.fmt(a.finished_at)
            if c == 4:
                if a.started_at and a.finished_at:
                    return theme.duration((a.finished_at - a.started_at).total_seconds())
                return "—"
            if c == 5:
                return a.worker or "—"
            if c == 6:
                return a.effect_ref or "—"
            if c == 7:
                return (a.error or "").splitlines()[0][:200] if a.error else ""
        elif role == Qt.ItemDataRole.ForegroundRole and c == 1:
            return QBrush(theme.colour(theme.OUTCOME_COLOURS, a.outcome))
        elif role == Qt.ItemDataRole.ToolTipRole and c == 7 and a.error:
            return a.error
        elif role == Qt.ItemDataRole.ToolTipRole and c == 1:
            return f"ledger says: {a.raw_outcome}"
        return None


class FindingsModel(QAbstractTableModel):
    """Counts per finding kind and severity; kinds the layout cannot check are listed with why."""

    HEADERS = ["Severity", "Finding", "Operations"]

    def __init__(self, parent=None):
        super().__init__(parent)
        self._rows: list[tuple[FindingKind, Severity, int, str | None]] = []
        self._totals: dict[FindingKind, int] | None = None
        #: grouped by action class (DESIGN §5.1): rows are (kind, action) pairs of the whole scan
        self.by_action = False
        self._actions: list[str | None] = []

    def set_result(self, res: FindingsResult | None, narrowed=None):
        """Rows per kind of ``res``; with ``narrowed`` (a :class:`FilteredFindings`) the operations of
        the filtered set, shown as "7 of 63" when the filter narrows more than finding kinds. Grouped
        by action class (:attr:`by_action`), one row per kind and class of the whole scan."""
        self.beginResetModel()
        rows = []
        self._totals = None
        self._actions = []
        if res is not None and self.by_action:
            from idemview.services.actions_view import action_rows

            for k, a, sev_k, n in action_rows(res.findings, getattr(res, "compact", None)):
                rows.append((k, sev_k, n, None))
                self._actions.append(a)
            self._rows = rows
            self.endResetModel()
            return
        if res is not None:
            src = narrowed.kind_rows if narrowed is not None else (res.kind_rows or kind_summary(res.findings))
            for k, sev_k, n in src:
                rows.append((k, sev_k, n, res.unsupported.get(k)))
            if narrowed is not None and narrowed.base_filtered:
                self._totals = dict(narrowed.total_ops)
                rows.sort(key=lambda r: (r[3] is not None, self._totals.get(r[0], 0) == 0, SEVERITY_ORDER[r[1]]))
            else:
                rows.sort(key=lambda r: (r[3] is not None, r[2] == 0, SEVERITY_ORDER[r[1]]))
        self._rows = rows
        self.endResetModel()

    def count_text(self, row: int) -> str:
        """What the Operations column shows for ``row`` ("7 of 63" when filtered)."""
        return str(self.data(self.index(row, 2)))

    def kind_at(self, row: int) -> FindingKind | None:
        return self._rows[row][0] if 0 <= row < len(self._rows) else None

    def action_at(self, row: int) -> str | None:
        """The action class of a grouped row (``None`` when not grouped)."""
        return self._actions[row] if 0 <= row < len(self._actions) else None

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else 3

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole and 0 <= section < 3:
            return self.HEADERS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or index.row() >= len(self._rows):
            return None
        kind, sev, n, why = self._rows[index.row()]
        c = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if c == 0:
                return f"{theme.SEVERITY_GLYPHS[sev]} {sev.value}"
            if c == 1:
                a = self.action_at(index.row())
                return f"{theme.KIND_SHORT[kind]} · {a}" if a else theme.KIND_WORDS[kind]
            if c == 2:
                if why and why.startswith("still scanning"):
                    return "…"
                if why and why.startswith("the check failed"):  # Esc is no failure (tester: "failed" after Esc)
                    return "cancelled" if why.endswith(": cancelled") else "failed"
                if why:
                    return "n/a"
                return f"{n} of {self._totals.get(kind, 0)}" if self._totals is not None else str(n)
        elif role == Qt.ItemDataRole.ForegroundRole:
            if why or n == 0:
                return QBrush(theme.colour(theme.SEVERITY_COLOURS, Severity.INFO))
            if c == 0:
                return QBrush(theme.colour(theme.SEVERITY_COLOURS, sev))
        elif role == Qt.ItemDataRole.ToolTipRole:
            if why and (why.startswith("still") or why.startswith("the check")):
                return why
            if why:
                return f"Not checkable with this layout: {why}"
            a = self.action_at(index.row())
            if a:
                from idemview.services.actions_view import group_sentence

                tip = group_sentence(theme.KIND_WORDS[kind], a, n) + "; click to show only those operations"
                return tip + (" (a person decides whether anything is repeated or reversed)" if a == "approval" else "")
            return f"Click to show only operations with {theme.a_an(theme.KIND_WORDS[kind])}"
        elif role == Qt.ItemDataRole.TextAlignmentRole and c == 2:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        elif role == Qt.ItemDataRole.FontRole and n and not why:
            f = QFont()
            f.setBold(sev in (Severity.CRITICAL, Severity.HIGH))
            return f
        return None


class SearchModel(QAbstractTableModel):
    """Hits of the search across every open ledger: where an idempotency key or intent appears."""

    HEADERS = ["Ledger", "Idempotency key", "Scope", "Status", "Findings", "Kind", "Intent", "Created"]
    COL_FINDINGS = 4

    def __init__(self, parent=None):
        super().__init__(parent)
        self._hits: list[SearchHit] = []

    def clear(self):
        self.beginResetModel()
        self._hits = []
        self.endResetModel()

    def add(self, hits: list[SearchHit]):
        if not hits:
            return
        n = len(self._hits)
        self.beginInsertRows(QModelIndex(), n, n + len(hits) - 1)
        self._hits.extend(hits)
        self.endInsertRows()
        for h in hits:  # each hit's ledger tells when its findings change
            board = getattr(h, "board", None)
            if board is not None and self._boards_changed not in board._listeners:
                board.subscribe(self._boards_changed)

    def _boards_changed(self):
        if self._hits:
            self.dataChanged.emit(self.index(0, self.COL_FINDINGS), self.index(len(self._hits) - 1, self.COL_FINDINGS))

    @staticmethod
    def state_of(h: SearchHit):
        """The hit's finding state, asked live of its tab's board (a hit found mid-scan follows the scan)."""
        board = getattr(h, "board", None)
        return board.state_of((h.scope_raw, h.key_raw)) if board is not None else None

    @classmethod
    def hit_findings(cls, h: SearchHit) -> list:
        st = cls.state_of(h)
        return list(st.findings) if st is not None else list(h.findings)

    @classmethod
    def findings_text(cls, h: SearchHit) -> str:
        """The hit's finding kinds as glyph + short word, most severe first ("scanning…" while its
        ledger's scan has not answered; "" when none)."""
        st = cls.state_of(h)
        if st is not None and st.state.value == "pending":
            return "scanning…"
        seen, out = set(), []
        for f in cls.hit_findings(h):
            if f.kind not in seen:
                seen.add(f.kind)
                out.append(f"{theme.SEVERITY_GLYPHS[f.severity]} {theme.KIND_SHORT[f.kind]}")
        return ", ".join(out)

    def hit(self, row: int) -> SearchHit:
        return self._hits[row]

    def hits(self) -> list[SearchHit]:
        return list(self._hits)

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._hits)

    def columnCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if (
            orientation == Qt.Orientation.Horizontal
            and role == Qt.ItemDataRole.DisplayRole
            and 0 <= section < len(self.HEADERS)
        ):
            h = self.HEADERS[section]
            return f"{h} ({theme.TIME.zone()})" if h == "Created" else h
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or index.row() >= len(self._hits):
            return None
        h, c = self._hits[index.row()], index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return [
                h.ledger_name,
                h.key,
                h.scope,
                f"{theme.STATUS_GLYPHS[h.status]} {theme.STATUS_WORDS[h.status]}",
                self.findings_text(h),
                h.kind,
                h.intent,
                theme.TIME.fmt(h.created_at),
            ][c]
        if role == FindingsRole and c == self.COL_FINDINGS:
            return self.hit_findings(h)
        if role == FindingStateRole and c == self.COL_FINDINGS:
            return self.state_of(h)
        if role == Qt.ItemDataRole.ForegroundRole and c == 3:
            return QBrush(theme.colour(theme.STATUS_COLOURS, h.status))
        if role == Qt.ItemDataRole.ToolTipRole:
            return "Double-click to open this operation in its ledger's tab"
        return None
