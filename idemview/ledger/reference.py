"""The tables of idemview's reference ledger (preset ``idemview``): ``operations`` and ``attempts``.

One definition for the two places that create them: the demo ledger (:mod:`idemview.services.demo`,
written to SQLite, PostgreSQL or MariaDB) and a Redis snapshot's in-memory SQLite database
(:mod:`idemview.ledger.redis_snapshot`), which reads as the reference layout unchanged.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, Index, Integer, MetaData, String, Table, Text

_TIMES = ("created_at", "updated_at", "completed_at", "locked_at", "lock_expires_at", "expires_at")


def add_reference_tables(md: MetaData, *, snapshot: bool = False) -> None:
    """Add ``operations`` and ``attempts`` to ``md``.

    Times are ``DateTime`` holding UTC (naive in the database). For a ledger (default), (scope,
    idempotency_key) is indexed but deliberately not unique (a replay after the record was purged, or
    a bug, can add a second record) and ``attempt_count`` is required. For a Redis ``snapshot`` the
    (scope, key) index is unique (SCAN may return a key twice: the load keeps the first) and
    ``attempt_count`` may be missing (a record may lack the count)."""
    ident = BigInteger().with_variant(Integer, "sqlite")
    Table(
        "operations",
        md,
        Column("id", ident, primary_key=True, autoincrement=False),
        Column("scope", String(64), nullable=False, default=""),
        Column("idempotency_key", String(128), nullable=False),
        Column("kind", String(64)),
        Column("status", String(16), nullable=False),
        Column("request_hash", String(64)),
        Column("intent_ref", String(64)),
        Column("effect_ref", String(64)),
        Column("attempt_count", Integer, nullable=snapshot, default=None if snapshot else 0),
        *[Column(t, DateTime) for t in _TIMES],
        Column("request_body", Text),
        Column("response_body", Text),
        Column("error", Text),
        Index(
            "ux_operations_scope_key" if snapshot else "ix_operations_scope_key",
            "scope",
            "idempotency_key",
            unique=snapshot,
        ),
        Index("ix_operations_created_at", "created_at"),
        Index("ix_operations_expires_at", "expires_at"),
        Index("ix_operations_intent_ref", "intent_ref"),
        Index("ix_operations_status", "status"),
    )
    Table(
        "attempts",
        md,
        Column("id", ident, primary_key=True, autoincrement=False),
        Column("scope", String(64), nullable=False, default=""),
        Column("idempotency_key", String(128), nullable=False),
        Column("attempt_no", Integer, nullable=False),
        Column("started_at", DateTime),
        Column("finished_at", DateTime),
        Column("outcome", String(16), nullable=False),
        Column("request_hash", String(64)),
        Column("effect_ref", String(64)),
        Column("worker", String(64)),
        Column("error", Text),
        Index("ix_attempts_scope_key", "scope", "idempotency_key"),
        Index("ix_attempts_started_at", "started_at"),
    )
