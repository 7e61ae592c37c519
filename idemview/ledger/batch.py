"""Batch use of a ledger: a whole scan or export is not an interactive query (issue 11)."""

from __future__ import annotations

import copy

from idemview.ledger.connect import batch_engine
from idemview.ledger.reader import Ledger


def for_batch(ledger: Ledger, timeout_s: float | None = None) -> Ledger:
    """A view of ``ledger`` whose statements are not cut by the interactive statement timeout:
    ``timeout_s`` seconds bound each statement instead (``None``: no bound; cancel still works). The
    view shares the ledger's tables, expressions and connection pool; the original is unchanged."""
    view = copy.copy(ledger)
    view.engine = batch_engine(ledger.engine, timeout_s)
    fx = getattr(ledger, "effects", None)
    if fx is not None:  # the effect records are batch work too (same database or another one)
        fx = copy.copy(fx)
        fx.engine = view.engine if fx.same_database else batch_engine(fx.engine, timeout_s)
        fx.ledger = view
        view.effects = fx
    return view
