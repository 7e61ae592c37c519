"""What a :class:`~idemview.ledger.reader.Ledger` is read from (issue 25 item 1).

Every ledger declares its source: :data:`LIVE` (a database read live through SQL, the default) or what a
backend (:mod:`idemview.backends`) says when it opens one: its name and, for a snapshot (Redis, DynamoDB),
the snapshot's facts (``SnapshotInfo``: when, how many records, which clock). Front ends ask
``ledger.source.snapshot is not None`` instead of probing a ledger for attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LedgerSource:
    """``backend``: the registered backend's name (``sql``, ``dump``, ``redis``, ``dynamodb`` or a
    third party's); ``snapshot``: the snapshot's information when the ledger is a copy taken at one
    instant (its ``server_time`` in UTC, ``loaded`` records, ``to_json()`` for manifests), ``None`` when
    every query reads the database as it is now; ``not_checkable``: the finding kinds this store cannot
    show on this ledger, each with the reason (the backend's ``Backend.not_checkable``; empty for SQL)."""

    backend: str = "sql"
    snapshot: Any = None
    not_checkable: dict = field(default_factory=dict)

    @property
    def is_snapshot(self) -> bool:
        """True when the ledger is a copy taken at one instant (F5 takes a new one)."""
        return self.snapshot is not None


#: The source of a ledger nobody declared otherwise: a SQL database read live.
LIVE = LedgerSource()
