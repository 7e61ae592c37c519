"""Where a filter on finding kinds comes from: the ledger compiles statuses, kinds, text and times of a
:class:`~idemview.domain.filters.Filter` itself, but a filter on finding kinds is a *key set* that only
the findings know how to build. The findings hand their compiler in with :func:`use_finding_clause`
(``idemview.findings.engine`` does, when it is imported), so no ledger module imports the findings
(the layers point one way: ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from idemview.domain.model import FindingKind

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy.sql.expression import ColumnElement

#: ``(ledger, kinds, now) -> WHERE clause over the operations table`` (see :func:`use_finding_clause`).
FindingClause = Callable[[Any, Sequence[FindingKind], datetime], "ColumnElement"]

_compiler: list[FindingClause] = []


def use_finding_clause(fn: FindingClause) -> None:
    """Install ``fn`` as the compiler of finding filters: ``fn(ledger, kinds, now)`` returns a WHERE
    clause over ``ledger.ops`` true for the operations carrying a finding of any of ``kinds`` (``now``
    aware, UTC). The last one installed wins."""
    _compiler[:] = [fn]


def finding_clause(ledger: Any, kinds: Sequence[FindingKind], now: datetime) -> ColumnElement:
    """The installed compiler's clause for ``kinds`` on ``ledger`` at ``now``. Raises ``LookupError``
    when no compiler is installed (``idemview.findings.engine`` was never imported)."""
    if not _compiler:
        raise LookupError("a filter on finding kinds needs the findings engine: import idemview.findings.engine")
    return _compiler[0](ledger, kinds, now)
