"""What a :class:`~idemview.ledger.reader.Ledger` is read from (issue 25 item 1).

Every ledger declares its source: :data:`LIVE` (a database read live through SQL, the default) or what a
backend (:mod:`idemview.backends`) says when it opens one: its name, the name of the store for people
(``redis``, ``dynamodb``; empty: the SQL dialect), how its layout was chosen, the manifest's identity of
the ledger and, for a snapshot (Redis, DynamoDB), the snapshot's facts (:class:`SnapshotFacts`: when, how
many records, which clock). Front ends ask ``ledger.source`` instead of probing a ledger for attributes.

The finding kinds a ledger cannot show are **one list**, ``ledger.source.not_checkable``: what the backend
declares (:meth:`idemview.backends.base.Backend.not_checkable`, e.g. a key-value store keeps one record
per key) merged, by :attr:`Ledger.source`'s setter, with what the layout itself rules out
(:func:`layout_not_checkable`: a system that deletes its completed records). The findings engine adds each
kind's own needs (:meth:`idemview.findings.rules.FindingRule.not_checkable`: the fields it reads, the
schema's UNIQUE constraint) in one function, :func:`idemview.findings.engine.not_checkable`; nothing
else decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from idemview.domain.kinds import FindingKind


class SnapshotFacts(Protocol):
    """What every snapshot's information tells (Redis's ``SnapshotInfo`` and DynamoDB's
    ``DynamoSnapshotInfo``, both :class:`~idemview.ledger.memory_snapshot.MemorySnapshotInfo`):
    ``url`` (no credential), ``server_time`` (the "as of", aware UTC), ``loaded`` records, ``clock``
    (``server``, or ``local`` when the server's clock could not be read)."""

    url: str
    server_time: datetime | None
    loaded: int
    clock: str

    def to_json(self) -> dict:
        """The facts as a JSON-ready dict (the scan JSON's ``snapshot``, a manifest's)."""
        ...

    def server_line(self) -> str:
        """The text scan report's ``server`` line (and a ``note`` line per limit of this snapshot)."""
        ...


@dataclass(frozen=True)
class LedgerSource:
    """Where a ledger is read from.

    ``backend``: the registered backend's name (``sql``, ``dump``, ``redis``, ``dynamodb`` or a third
    party's); ``snapshot``: the snapshot's facts when the ledger is a copy taken at one instant
    (:class:`SnapshotFacts`), ``None`` when every query reads the database as it is now;
    ``not_checkable``: the finding kinds this ledger cannot show, each with the reason (see the module
    docstring: the backend's declaration and the layout's, merged when the source is set on a ledger);
    ``dialect``: what the store is called in reports (``redis``; empty: the SQL dialect family);
    ``detection``: how the layout was chosen, in words (empty: not said); ``identity``: the manifest's
    ``ledger`` entry (dialect, host, database, snapshot; never a credential), ``None``: described from
    the engine; ``store_layout``: the backend's own layout the ledger's SQL layout was made from (a
    :class:`~idemview.layouts.kv.KvLayout`, a :class:`~idemview.layouts.dynamodb.DynamoLayout`),
    ``None`` for SQL."""

    backend: str = "sql"
    snapshot: SnapshotFacts | None = None
    not_checkable: Mapping[FindingKind, str] = field(default_factory=dict)
    dialect: str = ""
    detection: str = ""
    identity: dict | None = None
    store_layout: Any = None

    @property
    def is_snapshot(self) -> bool:
        """True when the ledger is a copy taken at one instant (F5 takes a new one)."""
        return self.snapshot is not None

    def declaring(self, reasons: Mapping[FindingKind, str]) -> LedgerSource:
        """This source with ``reasons`` (kind -> why) added to :attr:`not_checkable`; a kind declared
        already keeps its reason (the backend's is the more specific)."""
        return replace(self, not_checkable={**reasons, **self.not_checkable})


#: The source of a ledger nobody declared otherwise: a SQL database read live.
LIVE = LedgerSource()


def layout_not_checkable(deletes_completed: str | None, has_effects: bool) -> dict[FindingKind, str]:
    """The kinds a SQL layout itself rules out, with the reason: a system that deletes its completed
    records (the layout's ``deletes_completed``, the words saying how) leaves no trace of a success, so
    two successes of one intent cannot be seen, nor of one key unless effect records downstream
    (``has_effects``: the layout's ``[effects]`` is bound) still show them. Empty otherwise."""
    if not deletes_completed:
        return {}
    gone = f"completed records are deleted ({deletes_completed}): a key's absence is not evidence of success"
    out = {}
    if not has_effects:
        out[FindingKind.DUPLICATE_EFFECT] = f"{gone}, and a key that succeeded twice leaves no row"
    out[FindingKind.DUPLICATE_INTENT] = f"{gone}, and no two completed records of one intent remain"
    return out
