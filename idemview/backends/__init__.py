"""Backends: the kinds of store a ledger lives in, behind one contract (:mod:`idemview.backends.base`),
found through the ``idemview.backends`` entry point group (:mod:`idemview.backends.registry`). Built in:
SQL (SQLAlchemy, SQLite files included), dump files (DuckDB), Redis and DynamoDB. Only the opener
(:mod:`idemview.services.opener`) opens a ledger through them."""

from idemview.backends.base import Backend, Choice, Field, Match, OpenRequest, Source, Tunables
from idemview.backends.registry import backend_for, backend_for_dialect, backend_named, backends, register

__all__ = [
    "Backend",
    "Choice",
    "Field",
    "Match",
    "OpenRequest",
    "Source",
    "Tunables",
    "backend_for",
    "backend_for_dialect",
    "backend_named",
    "backends",
    "register",
]
