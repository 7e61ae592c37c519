"""idemview: an inspector for operation ledgers (idempotency keys, attempts, outcomes).

The Python API for notebooks and scripts (DESIGN §9) is loaded on first use, so ``import idemview`` stays
cheap (no pandas, no SQLAlchemy): ``idemview.open(url, layout=None)``, ``idemview.read_evidence(path)``
and ``idemview.read_report(path)`` (see :mod:`idemview.api`).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_API = ("open", "read_evidence", "read_report", "LedgerFrames")
__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    # PEP 562 lazy attribute: the API module (pandas, SQLAlchemy) loads when first asked for.
    if name in _API:
        return getattr(importlib.import_module("idemview.api"), name)
    raise AttributeError(f"module 'idemview' has no attribute {name!r}")
