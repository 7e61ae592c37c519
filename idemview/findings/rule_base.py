"""The contract every finding rule implements (:class:`FindingRule`), the row-filter form a rule may
take to share one pass over the operations table (:class:`RowFilter`), and the small SQL helpers the
built-in rules share. The rules themselves, grouped by what they judge, are in
:mod:`idemview.findings.rules_effects` (effects), :mod:`idemview.findings.rules_expiry` (keys and
expiry), :mod:`idemview.findings.rules_stuck` (stuck work and retries) and
:mod:`idemview.findings.rules` (intents; every name importable from there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from sqlalchemy import select
from sqlalchemy.sql.expression import Select

from idemview.domain.model import Finding, FindingKind, Severity
from idemview.ledger.reader import Ledger

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy.engine import Connection

    from idemview.findings.engine import FindingEngine


class FindingRule:
    """One finding kind.

    - ``kind``: the :class:`~idemview.domain.kinds.FindingKind` it reports (its words, labels, hints);
    - ``severity``: how bad it is by default, taken from ``kind.severity`` unless the class sets it (a
      rule may raise it per finding, as ``replay_after_expiry`` does when the replay succeeded);
    - ``profile_flag``: the flag of the shared one-pass key profile
      (:meth:`FindingEngine.q_key_profile`) that lists this kind's candidate keys, or ``None``;
    - :meth:`not_checkable`: why a ledger cannot have or show this kind (``None``: checkable);
    - :meth:`selects`: the SQL, selects of at least ``scope, key`` (used as key sets by filters);
    - :meth:`run`: executes it on a connection and shapes the rows into findings.
    """

    kind: ClassVar[FindingKind]
    severity: ClassVar[Severity]
    profile_flag: ClassVar[str | None] = None
    #: Where a finding filter gets this kind's operations: ``"sql"`` (:meth:`selects`) or ``"effects"``
    #: (only the effect reconciler knows them: :mod:`idemview.findings.keysets`).
    key_source: ClassVar[str] = "sql"

    def __init_subclass__(cls, **kw):
        # The default severity is the kind's (FindingKind.severity): one place, DEFAULT_SEVERITY agrees.
        super().__init_subclass__(**kw)
        if "kind" in cls.__dict__ and "severity" not in cls.__dict__:
            cls.severity = cls.kind.severity

    def not_checkable(self, ledger: Ledger) -> str | None:
        """Why this kind cannot be checked (or cannot occur) on ``ledger``, in plain words; ``None``
        when it can."""
        return None

    def selects(self, e: FindingEngine) -> list[Select]:
        """The selects whose ``scope, key`` rows are the operations with this kind (empty when the
        layout cannot express it)."""
        raise NotImplementedError

    def run(self, e: FindingEngine, c: Connection) -> list[Finding]:
        """The findings of this kind, read on connection ``c``."""
        raise NotImplementedError

    # A kind that is a plain row filter over the operations table can share one pass with the other
    # such kinds (FindingEngine.run folds their conditions into one scan, issue 11).

    def row_filter(self, e: FindingEngine) -> RowFilter | None:
        """This kind as a filter over the operations table (``None``: it is not one)."""
        return None

    def shape(self, e: FindingEngine, rows) -> list[Finding]:
        """Findings from the rows of :meth:`row_filter` (objects with its columns as attributes)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind.value}>"


class RowFilterRule(FindingRule):
    """A kind that is only a :meth:`FindingRule.row_filter`: its own select is that filter's
    (:meth:`RowFilter.select`; none when the layout cannot express it), and :meth:`run` shapes the rows of
    that select. The shared pass (``FindingEngine.run``) folds the same filter into one scan instead."""

    def selects(self, e: FindingEngine) -> list[Select]:
        rf = self.row_filter(e)
        return [rf.select(e.l)] if rf is not None else []

    def run(self, e: FindingEngine, c: Connection) -> list[Finding]:
        return self.shape(e, fetch_all(c, e.restrict(self.selects(e)), e))


class RowFilter:
    """A kind as "rows of the operations table where ``cond``": ``cols`` (label -> expression) are the
    columns its :meth:`FindingRule.shape` reads; ``index_cols`` the columns whose index would serve
    ``cond`` on its own (such a kind is better run alone than folded into a whole-table pass)."""

    __slots__ = ("cond", "cols", "index_cols")

    def __init__(self, cond, cols: dict, index_cols: list[str]):
        self.cond, self.cols, self.index_cols = cond, cols, index_cols

    def select(self, l: Ledger) -> Select:
        """The kind's own select (scope, key and ``cols``) over the operations table."""
        return (
            select(
                l.scope_expr.label("scope"),
                l.key_expr.label("key"),
                l.kind_expr.label("op_kind"),
                *[x.label(n) for n, x in self.cols.items()],
            )
            .select_from(l.ops)
            .where(self.cond)
        )


def status_cols(l: Ledger) -> list[str]:
    """The status column whose index serves a filter on the status (none when the status is
    derived by rules or a literal)."""
    s = l.layout.status
    return [s.column] if s.column and not s.rules and s.literal is None else []


def fetch_all(c, qs: list[Select], e: FindingEngine | None = None) -> list:
    """Every row of the selects ``qs``, executed one after the other on connection ``c``.

    With the engine ``e``, rows that carry their record's kind (``op_kind``) note it in ``e.op_kinds``
    (the operation kinds weighing reads, :func:`~idemview.findings.actions.operation_kinds`): the kind
    of an operation is the first non-NULL kind among its records, so a non-NULL one is noted, and a
    NULL one too where the record is the whole operation (``key_unique``). Weighing then looks none of
    them up again: 2,000 failures + 4,000 expired keys were 30 look-up statements at 2M Celery rows,
    and 62,302 expired keys of the 2M-operation reference ledger a streamed pass over all 2M records."""
    out: list = []
    kinds = getattr(e, "op_kinds", None) if e is not None else None
    for q in qs:
        rows = c.execute(q).fetchall()
        out.extend(rows)
        if kinds is not None and e is not None and rows and "op_kind" in rows[0]._mapping:
            _note_kinds(kinds, rows, bool(e.l.key_unique))
    return out


def _note_kinds(kinds: dict, rows, whole: bool) -> None:
    for r in rows:
        m = r._mapping
        ref, k = (m["scope"], m["key"]), m["op_kind"]
        if k is not None:
            if kinds.get(ref) is None:
                kinds[ref] = k
        elif whole:
            kinds.setdefault(ref, None)
