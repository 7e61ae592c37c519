"""Finding filters as key sets: the operations carrying a finding of some kinds, as a WHERE clause over
the ledger's operations table. :func:`finding_clause` is what ``Ledger.filter_clause`` uses for a
filter's ``findings`` (installed by :mod:`idemview.findings.engine` through
:func:`idemview.ledger.filtering.use_finding_clause`; the ledger never imports the findings).

A kind's key set is its rule's :meth:`~idemview.findings.rules.FindingRule.selects` (SQL over the
ledger), and, for the kinds the effect reconciler computes (:data:`idemview.findings.effects.EFFECT_KINDS`),
the keys reconciled with the effect records (possibly in another database, so not SQL over the ledger
alone).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import false, or_, tuple_
from sqlalchemy.sql.expression import ColumnElement

from idemview.domain.model import FindingKind
from idemview.findings.effects import EFFECT_KINDS, Reconciler

if TYPE_CHECKING:  # pragma: no cover
    from idemview.findings.engine import FindingEngine
    from idemview.ledger.reader import Ledger


def finding_clause(fe: FindingEngine, kinds: Sequence[FindingKind]) -> ColumnElement:
    """A WHERE clause over ``fe.l.ops``: the operations with a finding of any of ``kinds`` at ``fe.now``.
    Kinds whose rule has no SQL key set (``key_source == "effects"``) come from the reconciler only. A
    kind this ledger cannot check (:func:`idemview.findings.engine.not_checkable`, the one list the scan
    runs by) selects no operation and is never queried: the scan reports it as not checkable, so a
    filter must not show it as found (a Redis snapshot's expired_key at a later ``now``)."""
    from idemview.findings import registry

    led = fe.l
    skip = fe.unsupported()
    kinds = [k for k in kinds if k not in skip]
    sql_kinds = [k for k in kinds if registry.rule(k).key_source == "sql"]
    ors = [led.ops_ref_in(fe.keys_with(sql_kinds, distinct=False))] if sql_kinds else []
    fx_keys = effect_finding_keys(led, kinds, fe.now)
    if fx_keys:
        ors.append(tuple_(led.scope_expr, led.key_expr).in_(sorted(fx_keys)))
    return or_(*ors) if ors else false()


def effect_finding_keys(ledger: Ledger, kinds: Iterable[FindingKind], now: datetime) -> set[tuple[str, str]]:
    """(scope, key) of operations with effect findings of ``kinds`` (reconciled with the effect
    records); empty without effects. Cached on the ledger per ``(kinds, now)``
    (:attr:`Ledger.finding_keys_cache`): a grid asks for every page."""
    wanted = frozenset(FindingKind(k) for k in kinds) & set(EFFECT_KINDS)
    if ledger.effects is None or not wanted:
        return set()
    cache = ledger.finding_keys_cache
    ck = (frozenset(k.value for k in wanted), now)
    if ck not in cache:
        fs = Reconciler(ledger, now).run(wanted)
        cache.clear()
        cache[ck] = {(f.scope, f.key) for f in fs if f.kind != FindingKind.ORPHAN_EFFECT}
    return cache[ck]
