"""One pass shared by ``duplicate_intent`` and ``unresolved_failure`` (issue 27 item 4): the candidate
intents of both kinds, found in one read of the operations table.

Both kinds compare records by intent (:class:`~idemview.findings.rules.IntentKey`) and group by the
same thing: ``duplicate_intent`` needs an intent with two completed records, ``unresolved_failure``
needs, for each failure, a completed record of its intent. On a ledger where an intent is computed
from several columns no index serves (Celery's ``name``, ``args``, ``kwargs``), each kind's grouping
of every record is the scan's largest cost on PostgreSQL: a ``GROUP BY`` of 2M distinct intents is
3.4-4.5 s of server time whatever its plan (sort-based with the parallel workers' sorted groups merged
by the leader, or a hash aggregate of 2M groups: 4.1 s at the default ``work_mem``, 5.0 s with 128 MB),
where hashing the rows alone takes 0.5 s.

So the database is asked only for each record's 64-bit intent hash (``hash_record_extended`` of the
scope and the parts, PostgreSQL 14+), packed into one ``bytea`` per status (``string_agg`` of
``int8send``: 8 bytes a record, two values in one row, no per-row protocol or Python object), and the
groups are found by sorting those integers in numpy (2M hashes: ~0.1 s). Equal intents have equal
hashes, so the hashes seen twice (``dup``) and the failures' hashes that a completed record shares
(``resolvable``) hold every candidate: each rule then runs its exact SQL (by the parts, as before) on
those hashes' records only, and skips it when there are none (the usual ledger). A hash collision only
adds a candidate the exact SQL rejects.

Used by a whole scan only (no filter: a filtered run asks the rules' own SQL), on PostgreSQL 14+, where
the intent is hashed (:attr:`IntentKey.hashed`) and the table's estimated size (``pg_class.reltuples``,
set by ``ANALYZE``/autovacuum) is known and at most :data:`MAX_ROWS`: the two values then stay below
~64 MB together (server and client). Elsewhere the rules group in SQL as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import bindparam, func, literal_column, select, text
from sqlalchemy.sql.expression import ColumnElement

if TYPE_CHECKING:  # pragma: no cover
    from idemview.findings.engine import FindingEngine

#: Largest estimated operations table for the packed pass (8 bytes a completed or failed record).
MAX_ROWS = 8_000_000


@dataclass(frozen=True)
class IntentCandidates:
    """The scoped intent hashes (signed 64-bit ints) worth an exact look: ``dup``, seen on two or
    more completed records; ``resolvable``, of a failed record and of at least one completed record."""

    dup: list[int]
    resolvable: list[int]


def scoped_hash(ik, sub):
    """The 64-bit hash of a record's scope and intent parts, over subquery ``sub`` of
    :meth:`IntentKey.subquery` (PostgreSQL 14+)."""
    return func.hash_record_extended(func.row(sub.c.scope, *ik.cols(sub)), literal_column("0"))


def usable(e: FindingEngine, c, ik) -> bool:
    """The packed pass applies to this run of ``e`` with :class:`IntentKey` ``ik`` (see the module
    docstring; ``ik`` from :func:`idemview.findings.rules.packed_intent_key`, ``None``: it does not)."""
    l = e.l
    if e.flt is not None or ik is None or ik.hashed is None:
        return False
    t = l.ops
    name = "format('%I.%I', CAST(:s AS text), CAST(:t AS text))" if t.schema else "format('%I', CAST(:t AS text))"
    q = text(f"SELECT reltuples FROM pg_class WHERE oid = to_regclass({name})")
    n = c.execute(q, {"s": t.schema, "t": t.name} if t.schema else {"t": t.name}).scalar()
    return n is not None and 0 <= float(n) <= MAX_ROWS


def candidates(e: FindingEngine, c, ik) -> IntentCandidates:
    """Run the packed pass on connection ``c`` for :class:`IntentKey` ``ik`` (see the module
    docstring). Raises what the database raises."""
    import numpy as np

    l = e.l
    o = ik.subquery("o")
    h = func.int8send(scoped_hash(ik, o))
    comp, fail = l.status_in(["completed"], o), l.status_in(["failed"], o)
    empty: ColumnElement = literal_column("''::bytea")
    q = select(
        func.coalesce(func.string_agg(h, empty).filter(comp), empty).label("c"),
        func.coalesce(func.string_agg(h, empty).filter(fail), empty).label("f"),
    ).where(o.c.ik_ok == 1, comp | fail)
    row = c.execute(q).one()
    done = np.sort(np.frombuffer(bytes(row.c), dtype=">i8").astype(np.int64))
    failed = np.frombuffer(bytes(row.f), dtype=">i8").astype(np.int64)
    # sorted-array operations only: numpy's unique/intersect1d hash every value (4.8 s for 2M here)
    dup = sorted({int(x) for x in done[1:][done[1:] == done[:-1]]})
    at = np.minimum(np.searchsorted(done, failed), max(len(done) - 1, 0))
    resolvable = sorted({int(x) for x in failed[done[at] == failed]}) if len(done) else []
    return IntentCandidates(dup, resolvable)


def restrict(ik, sub, hashes: list[int]):
    """``sub``'s records whose scoped intent hash is one of ``hashes`` (``= ANY(array)``: one bound
    value however many)."""
    from sqlalchemy import BigInteger, any_
    from sqlalchemy.dialects.postgresql import ARRAY

    return scoped_hash(ik, sub) == any_(bindparam(None, hashes, type_=ARRAY(BigInteger())))
