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
~64 MB together (server and client).

SQLite has no hash function; there the shared pass is one ``GROUP BY`` scope and parts over the
completed and failed records together, naming the groups either kind needs (at most
:data:`MAX_GROUPS`; more, and each rule groups by itself as before). Elsewhere (MySQL/MariaDB, an
intent an index serves, a filtered run) the rules group in SQL as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import bindparam, func, literal_column, select, text
from sqlalchemy.sql.expression import ColumnElement

from idemview.ledger.dialects import SQLITE, family

if TYPE_CHECKING:  # pragma: no cover
    from idemview.findings.engine import FindingEngine

#: Largest estimated operations table for the packed pass (8 bytes a completed or failed record).
MAX_ROWS = 8_000_000


@dataclass(frozen=True)
class IntentCandidates:
    """The intents worth an exact look, as scoped intent hashes (signed 64-bit ints; PostgreSQL) or
    (scope, parts...) tuples (SQLite): ``dup``, seen on two or more completed records;
    ``resolvable``, of a failed record and of at least one completed record."""

    dup: list
    resolvable: list


def scoped_hash(ik, sub):
    """The 64-bit hash of a record's scope and intent parts, over subquery ``sub`` of
    :meth:`IntentKey.subquery` (PostgreSQL 14+)."""
    return func.hash_record_extended(func.row(sub.c.scope, *ik.cols(sub)), literal_column("0"))


def usable(e: FindingEngine, c, ik) -> bool:
    """The packed pass applies to this run of ``e`` with :class:`IntentKey` ``ik`` (see the module
    docstring; ``ik`` from :func:`idemview.findings.rules.packed_intent_key`, ``None``: it does not)."""
    l = e.l
    if e.flt is not None or ik is None:
        return False
    if ik.hashed is None:
        return family(l.dialect) == SQLITE and len(ik.parts) > 1
    t = l.ops
    name = "format('%I.%I', CAST(:s AS text), CAST(:t AS text))" if t.schema else "format('%I', CAST(:t AS text))"
    q = text(f"SELECT reltuples FROM pg_class WHERE oid = to_regclass({name})")
    n = c.execute(q, {"s": t.schema, "t": t.name} if t.schema else {"t": t.name}).scalar()
    return n is not None and 0 <= float(n) <= MAX_ROWS


def candidates(e: FindingEngine, c, ik) -> IntentCandidates | None:
    """Run the packed pass on connection ``c`` for :class:`IntentKey` ``ik`` (see the module
    docstring); on SQLite the shared grouping (:func:`_grouped_candidates`), ``None`` when it found
    too many groups to name. Raises what the database raises."""
    import numpy as np

    l = e.l
    if ik.hashed is None:
        return _grouped_candidates(e, c, ik)
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


#: Most groups the SQLite shared grouping names (beyond: each rule groups by itself, as before).
MAX_GROUPS = 1_000


def _grouped_candidates(e: FindingEngine, c, ik) -> IntentCandidates | None:
    """SQLite (no hash function): one ``GROUP BY`` scope and intent parts over the completed and failed
    records together, keeping the groups either kind needs (two completed records; a failure and a
    completed record), in place of one grouping per kind (2M Celery rows: ``unresolved_failure``'s own
    grouping was 1.65 s CPU beside ``duplicate_intent``'s 2.44 s). The candidates are (scope, parts)
    tuples; ``None`` above :data:`MAX_GROUPS` of them."""
    from sqlalchemy import case

    l = e.l
    o = ik.subquery("o")
    comp, fail = l.status_in(["completed"], o), l.status_in(["failed"], o)
    nc = func.sum(case((comp, literal_column("1")), else_=literal_column("0")))
    nf = func.sum(case((fail, literal_column("1")), else_=literal_column("0")))
    q = (
        select(o.c.scope, *ik.cols(o), nc.label("nc"), nf.label("nf"))
        .where(o.c.ik_ok == 1, comp | fail)
        .group_by(o.c.scope, *ik.cols(o))
        .having((nc >= 2) | ((nc >= 1) & (nf >= 1)))
        .limit(MAX_GROUPS + 1)
    )
    rows = c.execute(q).fetchall()
    if len(rows) > MAX_GROUPS:
        return None
    n = len(ik.parts) + 1
    dup = [tuple(r[:n]) for r in rows if r.nc >= 2]
    res = [tuple(r[:n]) for r in rows if r.nc >= 1 and r.nf >= 1]
    return IntentCandidates(dup, res)  # type: ignore[arg-type]


def restrict(ik, sub, cands: list):
    """``sub``'s records whose intent is one of ``cands``: scoped hashes (``= ANY(array)``: one bound
    value however many) or, from the SQLite grouping, (scope, parts...) tuples (``IN``)."""
    from sqlalchemy import BigInteger, any_, tuple_
    from sqlalchemy.dialects.postgresql import ARRAY

    if ik.hashed is None:
        return tuple_(sub.c.scope, *ik.cols(sub)).in_(cands)
    return scoped_hash(ik, sub) == any_(bindparam(None, cands, type_=ARRAY(BigInteger())))
