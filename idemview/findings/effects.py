"""Reconciliation of operations with their downstream effect records (DESIGN §5, issue #16).

Three findings come from the effect records of a layout's ``[effects]`` section:

- ``duplicate_effect`` (critical): one operation (scope, key) has >= 2 effect records (over all its
  records' links): it took effect more than once;
- ``hidden_success`` (critical): the ledger says the operation failed, is stuck (in progress with its
  lock expired) or its attempt timed out — and no record of it completed — yet an effect record exists:
  a timeout hid a success, and a retry would repeat it;
- ``orphan_effect`` (medium): an effect record whose link matches no operation record. When the effect
  table has a time column and the ledger a retention, only effects inside the retention are judged (an
  older one may belong to an operation the ledger already purged).

Same database: three grouped SQL statements run in the database. Different databases: the ledger's
links and the effect table's per-link counts are streamed in byte order of the link and merged; memory
holds only the operations that have several records (decided after the merge), never either side whole.
Nothing is written to either database.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

from sqlalchemy import and_, case, exists, false, func, literal, or_, select
from sqlalchemy.sql.expression import ColumnElement
from sqlalchemy.sql.util import ClauseAdapter

from idemview.domain.model import EffectRecord, Finding, FindingKind, Severity
from idemview.findings import explain as explain_fx
from idemview.findings.common import in_keys, who
from idemview.ledger.dialects import family
from idemview.ledger.effects import (
    LINK_BATCH,
    EffectSource,
    IndexOrderedStream,
    StartedStream,
    byte_order,
    link_from_bytes,
    links_as_bytes,
    sequential_pass,
)
from idemview.ledger.times import from_epoch, iso

UTC = UTC
K = FindingKind
#: Effect records listed as evidence per finding (the count is always exact).
EVIDENCE_RECORDS = 20
EFFECT_KINDS = (K.DUPLICATE_EFFECT, K.HIDDEN_SUCCESS, K.ORPHAN_EFFECT)
#: Links per IN list when the ledger is asked for the records behind effect links.
LEDGER_IN_BATCH = 5000
_first, _second = itemgetter(0), itemgetter(1)


def lock_expired(ledger, now: datetime) -> ColumnElement | None:
    """SQL: the operation's lock expired at ``now`` (:meth:`Ledger.lock_expired`), or ``None`` when the
    ledger keeps no lock time."""
    return ledger.lock_expired(now)


@dataclass
class _KeyState:
    """What the reconciliation knows of one operation (scope, key)."""

    n_effects: int = 0
    links: set = field(default_factory=set)
    first_e: float | None = None
    bad: bool = False  # failed, stuck or timed out
    completed: bool = False
    why: str = ""


class Reconciler:
    """Effect findings of ``ledger`` (which must have ``ledger.effects``) for ``now`` (aware)."""

    def __init__(self, ledger, now: datetime):
        if ledger.effects is None:
            raise ValueError(ledger.effects_problem or "the ledger has no effect records")
        self.l = ledger
        self.fx: EffectSource = ledger.effects
        self.now = now.astimezone(UTC)
        #: (scope, key) -> "2 effect records in charges", for the duplicate_effect findings of :meth:`run`
        self.dup_reasons: dict = {}
        # only the ledger's own retention (its purge), not a dedup window guess
        ret = ledger.retention_s
        self.orphans_since_e = (self.now.timestamp() - ret) if (ret is not None and self.fx.at_e is not None) else None
        # Effect records already read (the merge reads the candidates' while the databases sort):
        # link -> evidence records, the links asked for (also those without a record), link -> earliest
        self._read: dict = {}
        self._read_links: set = set()
        self._earliest: dict = {}

    # ---------------------------------------------------------------------------- ledger side

    def _flags(self, with_timeouts: bool = True) -> tuple[ColumnElement, ColumnElement, ColumnElement]:
        """(bad, completed, why) per operations row: ``bad`` is 1 when the record failed, is stuck or
        (``with_timeouts``) has a timed-out attempt; ``why`` says which, in words."""
        l = self.l
        failed = l.status_in(["failed"])
        stuck = l.status_in(["in_progress"])
        le = lock_expired(l, self.now)
        stuck = and_(stuck, le) if le is not None else false()
        timed: ColumnElement = false()
        a = l.attempts_select() if with_timeouts else None
        if a is not None:
            s = a.subquery("ta")
            timed = exists(
                select(literal(1))
                .select_from(s)
                .where(s.c.outcome == "timed_out", s.c.scope == l.scope_expr, s.c.key == l.key_expr)
            )
        completed = l.status_in(["completed"])
        bad = case((failed, 1), (stuck, 1), (and_(timed, ~completed), 1), else_=0)
        why = case(
            (failed, literal("failed")),
            (stuck, literal("stuck")),
            (and_(timed, ~completed), literal("timed out")),
            else_=literal(""),
        )
        return bad, case((completed, 1), else_=0), why

    def _ops(self, with_timeouts: bool = True):
        l = self.l
        bad, comp, why = self._flags(with_timeouts)
        return select(
            l.scope_expr.label("scope"),
            l.key_expr.label("key"),
            self.fx.operation_link.label("link"),
            bad.label("bad"),
            comp.label("comp"),
            why.label("why"),
        ).select_from(l.ops)

    # ----------------------------------------------------------------------------- running

    def run(self, kinds: Iterable[FindingKind] | None = None) -> list[Finding]:
        """Findings of ``kinds`` (default: the three effect kinds), ordered by kind, scope and key."""
        kinds = set(kinds) if kinds is not None else set(EFFECT_KINDS)
        if not kinds & set(EFFECT_KINDS):
            return []
        states, orphans = self._sql() if self.fx.same_database else self._merge(orphans_wanted=K.ORPHAN_EFFECT in kinds)
        out: list[Finding] = []
        want_dup, want_hidden = K.DUPLICATE_EFFECT in kinds, K.HIDDEN_SUCCESS in kinds
        flagged = {
            k: st
            for k, st in states.items()
            if (want_dup and st.n_effects >= 2) or (want_hidden and st.bad and not st.completed)
        }
        want_orphans = K.ORPHAN_EFFECT in kinds and bool(orphans)
        # one read of the reported links' records: their evidence, and the earliest time of each link
        # (over all its records) where the grouped statements did not give it
        earliest = self._earliest
        reported = {x for st in flagged.values() for x in st.links} | (set(orphans) if want_orphans else set())
        records = {x: self._read[x] for x in reported if x in self._read}
        records.update(
            self.fx.records_for(reported - self._read_links, limit_per_link=EVIDENCE_RECORDS, earliest=earliest)
        )
        where = self.fx.describe()["table"]
        for (scope, key), st in sorted(flagged.items()):
            recs = [e for x in sorted(st.links) for e in records.get(x, [])][:EVIDENCE_RECORDS]
            ev = [_evidence(e) for e in recs]
            whom = who(scope, key)
            if st.first_e is None:
                st.first_e = min((earliest[x] for x in st.links if x in earliest), default=None)
            first = from_epoch(st.first_e) if st.first_e is not None else (recs[0].at if recs else None)
            # The counts and the ledger's word behind the sentence travel as the evidence's last row (at
            # most EVIDENCE_RECORDS records are listed): the sentence is read from the evidence only.
            summary = {
                "effect_records": st.n_effects,
                "table": where,
                "ledger_says": st.why or None,
                "first_effect_at": iso(first) if first else None,
            }
            if want_dup and st.n_effects >= 2:
                dev = [*ev, summary]
                self.dup_reasons[(scope, key)] = explain_fx.effect_reason(dev)
                out.append(
                    Finding(
                        K.DUPLICATE_EFFECT,
                        Severity.CRITICAL,
                        scope,
                        key,
                        explain_fx.effect_duplicate(whom, dev),
                        dev,
                        at=first,
                    )
                )
            if want_hidden and st.bad and not st.completed:
                hev = [*ev, summary]
                out.append(
                    Finding(
                        K.HIDDEN_SUCCESS,
                        Severity.CRITICAL,
                        scope,
                        key,
                        explain_fx.hidden_success(whom, hev),
                        hev,
                        at=first,
                    )
                )
        if want_orphans:
            for link in sorted(orphans):
                n, first_e = orphans[link]
                first_e = earliest.get(link) if first_e is None else first_e
                first = from_epoch(first_e) if first_e is not None else None
                oev = [_evidence(e) for e in records.get(link, [])]
                oev.append({"effect_records": n, "table": where, "first_effect_at": iso(first) if first else None})
                out.append(
                    Finding(
                        K.ORPHAN_EFFECT, Severity.MEDIUM, "", link, explain_fx.orphan_effect(link, oev), oev, at=first
                    )
                )
        order = {k: i for i, k in enumerate(K)}
        out.sort(key=lambda f: (order[f.kind], f.scope, f.key))
        return out

    # ------------------------------------------------------------------- same database: SQL

    def _sql(self) -> tuple[dict, dict]:
        fx, l = self.fx, self.l
        bad, comp, why = self._flags()
        link = fx.operation_link
        g = fx.grouped_select(None).subquery("g")
        # one row per (operation, link) with the records' flags, so that effects are counted once per
        # link however many records share it (all records of a key share a key link)
        t1 = (
            select(
                l.scope_expr.label("scope"),
                l.key_expr.label("key"),
                link.label("link"),
                func.max(bad).label("bad"),
                func.max(comp).label("comp"),
                func.max(why).label("why"),
            )
            .select_from(l.ops)
            .group_by(*_operation_identity(l), link)
        ).subquery("t1")
        first = [func.min(g.c.first_e).label("first_e")] if "first_e" in g.c else []
        n = func.coalesce(func.sum(g.c.n), 0)
        q = (
            select(
                t1.c.scope,
                t1.c.key,
                n.label("n"),
                func.max(t1.c.bad).label("bad"),
                func.max(t1.c.comp).label("comp"),
                func.max(t1.c.why).label("why"),
                *first,
            )
            .select_from(t1.outerjoin(g, t1.c.link == g.c.link))
            .group_by(t1.c.scope, t1.c.key)
            .having(or_(n >= 2, and_(n >= 1, func.max(t1.c.bad) == 1, func.max(t1.c.comp) == 0)))
        )
        states: dict = {}
        with l.engine.connect() as c, sequential_pass(c):
            for r in c.execute(q):
                m = r._mapping
                states[(r.scope, r.key)] = _KeyState(
                    int(r.n), set(), m.get("first_e"), bool(r.bad), bool(r.comp), r.why or ""
                )
            # the links of the flagged operations (for their evidence records)
            keys = list(states)
            for i in range(0, len(keys), 200):
                batch = keys[i : i + 200]
                cond = in_keys(l.scope_expr, l.key_expr, batch)
                for r in c.execute(
                    select(l.scope_expr.label("scope"), l.key_expr.label("key"), link.label("link"))
                    .where(cond, link.is_not(None))
                    .distinct()
                ):
                    states[(r.scope, r.key)].links.add(r.link)
            og = fx.grouped_select(self.orphans_since_e).subquery("og")
            # NOT IN over the plain link expression (no per-row flags): engines hash or index it once
            ol = self.fx.operation_link
            oq = select(og.c.link, og.c.n, *([og.c.first_e] if "first_e" in og.c else [])).where(
                og.c.link.not_in(select(ol).select_from(self.l.ops).where(ol.is_not(None)))
            )
            orphans = {r.link: (int(r.n), r._mapping.get("first_e")) for r in c.execute(oq)}
        return states, orphans

    # ------------------------------------------------------------- different databases: merge

    def _ledger_links(self) -> tuple[StartedStream | IndexOrderedStream, bool]:
        """Every operation link in byte order, as chunks of driver rows (the orphan merge reads nothing
        else; on SQLite no row is decoded), and whether each row carries the record's id.

        Read in an index's order where one serves it (per scope on the reference schema's ``(scope,
        key)`` index: :class:`IndexOrderedStream`): rows ``(link,)``, the database sorts nothing, and
        the records behind a link are found through that index afterwards. Else sorted by the database,
        executed from now on in a thread (:class:`StartedStream`): rows ``(link, rid)`` when the record
        id is the table's primary key (:meth:`_rid_key`), else ``(link,)``."""
        l, ol = self.l, self.fx.operation_link
        scope = (l.scope_expr, l.ops.c[l.layout.scope[0]]) if len(l.layout.scope) == 1 else None
        served = IndexOrderedStream.open(l.engine, l.ops, [ol], ol, scope)
        if served is not None:
            return served, False
        rid = self._rid_key()
        cols = [ol] if rid is None else [ol, rid]
        q = select(*cols).select_from(l.ops).where(ol.is_not(None)).order_by(byte_order(ol))
        return StartedStream(l.engine, q), rid is not None

    def _rid_key(self):
        """The record id column when it is the operations table's integer primary key (unique, not
        NULL: the records behind links are then found by it, see :meth:`_stream_merge`), else None."""
        rid = self.l.rid
        pk = list(self.l.ops.primary_key.columns)
        if rid is None or len(pk) != 1 or pk[0] is not rid:
            return None
        try:  # integers only: SQLite text would arrive as bytes in the stream and match no TEXT value
            return rid if rid.type.python_type is int else None
        except NotImplementedError:
            return None

    def _multi_keys(self) -> list:
        """(scope, key) of operations with several records (one grouped pass, no flags)."""
        l = self.l
        q = (
            select(l.scope_expr.label("scope"), l.key_expr.label("key"))
            .select_from(l.ops)
            .group_by(*_operation_identity(l))
            .having(func.count() >= 2)
        )
        with l.engine.connect() as c, sequential_pass(c):
            return [(r[0], r[1]) for r in c.execute(q)]

    def _timed_out(self) -> set:
        """(scope, key) of operations with a timed-out attempt (one pass over the attempts)."""
        a = self.l.attempts_select()
        if a is None:
            return set()
        t = a.subquery("ta")
        with self.l.engine.connect() as c, sequential_pass(c):
            return {
                (r[0], r[1]) for r in c.execute(select(t.c.scope, t.c.key).where(t.c.outcome == "timed_out").distinct())
            }

    def _bad_where(self) -> ColumnElement:
        """SQL: the record failed or is stuck (``bad`` of :meth:`_flags` without timeouts), as a
        condition the status column's index can serve (``raw IN (...)``) instead of a CASE per row."""
        l = self.l
        le = lock_expired(l, self.now)
        stuck = and_(l.status_in(["in_progress"]), le) if le is not None else false()
        return or_(l.status_in(["failed"]), stuck)

    def _records_of_bad_operations(self, c) -> list:
        """``(scope, key, link, bad, comp, why)`` of every record of the operations that have a failed
        or stuck record: those operations (by the status index) joined back through (scope, key)."""
        l = self.l
        inner = l.ops.alias("bad_ops")
        ad = ClauseAdapter(inner)
        b = (
            select(ad.traverse(l.scope_expr).label("s"), ad.traverse(l.key_expr).label("k"))
            .select_from(inner)
            .where(ad.traverse(self._bad_where()))
            .distinct()
            .subquery("b")
        )
        bad, comp, why = self._flags(with_timeouts=False)
        q = select(l.scope_expr, l.key_expr, self.fx.operation_link, bad, comp, why).select_from(
            l.ops.join(b, and_(l.scope_expr == b.c.s, l.key_expr == b.c.k))
        )
        return [tuple(r) for r in c.execute(q)]

    def _records_where(self, c, cond) -> list:
        """``(scope, key, link, bad, comp, why)`` of the operation records matching ``cond``."""
        l = self.l
        bad, comp, why = self._flags(with_timeouts=False)
        q = select(l.scope_expr, l.key_expr, self.fx.operation_link, bad, comp, why).select_from(l.ops).where(cond)
        return [tuple(r) for r in c.execute(q)]

    def _merge(self, orphans_wanted: bool = True) -> tuple[dict, dict]:
        """Across two databases. Only candidates are looked up on each side: the ledger's failed /
        stuck / timed-out records and its keys with several records, and the effect links with >= 2
        records; each side is then asked for the other's half of those few links (``IN`` lists).

        With ``orphan_effect`` asked for, every link of both sides is read once, in byte order, and
        merged (:meth:`_stream_merge`): that one pass also yields the links with several records, so
        the effect table is not grouped a second time. Both sides' ordered statements start first (the
        effect side's in a thread, :class:`StartedStream`): the database sorts while the ledger is asked
        for its candidates and the effect records of their links are read (their counts and evidence:
        what :meth:`run` reports of them is not read again)."""
        fx = self.fx
        streams: list = []  # the effect links, the ledger links (StartedStream, IndexOrderedStream)
        with_rid = False
        counts: dict = {}  # link -> number of effect records
        orphans: dict = {}
        try:
            if orphans_wanted:
                streams.append(fx.stream_links(self.orphans_since_e, started=True))
                op_stream, with_rid = self._ledger_links()
                streams.append(op_stream)
            recs = self._candidate_records()  # (scope, key) -> list of (link, bad, comp, why)
            cand_links = {x[0] for rs in recs.values() for x in rs if x[0] is not None}
            self._read = fx.records_for(cand_links, EVIDENCE_RECORDS, earliest=self._earliest, counts=counts)
            self._read_links = cand_links
            if streams:
                orphans, dup_links, dup_rids = self._stream_merge(streams[0], streams[1], with_rid)
            else:
                # effect links with several records: one operation's double effect at least
                dup_links, dup_rids = {}, None
                with fx.engine.connect() as c:
                    for g in c.execute(fx.grouped_select(None).having(func.count() >= 2)):
                        dup_links[g[0]] = int(g[1])
            counts.update(dup_links)
        finally:
            for st in streams:
                st.close()
        groups = getattr(streams[-1], "groups", None) if streams else None
        self._records_behind(recs, counts, dup_links, dup_rids, groups)
        # the earliest effect times are read with the evidence (run: records_for), reported links only
        return _states(recs, counts), {k: (n, None) for k, n in orphans.items()}

    def _records_behind(self, recs: dict, counts: dict, dup_links: dict, dup_rids: list | None, groups) -> None:
        """Add to ``recs`` the ledger records behind ``dup_links`` (the links with several records),
        and to ``counts`` their other links' counts. (An operation not yet among them has all its
        records behind its links: with several records it is a candidate already, unless its link is
        its key.) With their record ids from the merge (``dup_rids``): lookups by primary key; with the
        ledger's links read per scope through an index (``groups``): lookups through it, scope by
        scope; else large IN lists (without an index on the link alone each is one pass)."""
        l, ol = self.l, self.fx.operation_link
        more: set = set()
        new: dict = {}
        rid = self._rid_key()
        if dup_rids is not None and rid is not None:
            by: Iterable = (rid.in_(b) for b in _batches(sorted(dup_rids), LINK_BATCH))
        elif groups:
            by = (and_(g, ol.in_(b)) for g in groups for b in _batches(sorted(dup_links), LINK_BATCH))
        else:
            by = (ol.in_(b) for b in _batches(sorted(dup_links), LEDGER_IN_BATCH))
        with l.engine.connect() as c, sequential_pass(c):
            for cond in by:
                for row in self._records_where(c, cond):
                    if (row[0], row[1]) not in recs:
                        new.setdefault((row[0], row[1]), []).append(row[2:])
                        more.add(row[2])
        recs.update(new)
        self._count_links(more - set(counts), counts)

    def _candidate_records(self) -> dict:
        """(scope, key) -> [(link, bad, comp, why), ...]: every record of the operations that may be
        reported — failed, stuck or timed out, and (unless the link is the key) those with several
        records."""
        l, fx = self.l, self.fx
        ol = fx.operation_link
        timed = self._timed_out()
        recs: dict = {}  # (scope, key) -> list of (link, bad, comp, why) of its records
        # no memory map: these lookups may scan the table (status without an index), whose pages would
        # stay mapped, and count in RSS, while the merge runs on another connection
        with l.engine.connect() as c, sequential_pass(c):

            def take(rows):
                for s_, k_, link, b, cm, w in rows:
                    if (s_, k_) in timed and not cm and not b:
                        b, w = 1, "timed out"
                    recs.setdefault((s_, k_), []).append((link, b, cm, w))

            if fx.spec.link_operation == "key":
                # Every record of an operation has the same link (its key): the link's count is the
                # operation's, so only the failed / stuck / timed-out operations need all their
                # records (one that completed clears them) — no grouping of the whole ledger.
                if family(l.engine) != "mysql":
                    take(self._records_of_bad_operations(c))
                    cand = sorted(set(timed) - set(recs))
                else:  # joins on binary casts would not use the (scope, key) index: lookups instead
                    take(self._records_where(c, self._bad_where()))
                    cand = sorted(set(timed) | set(recs))
                    recs.clear()
            else:
                take(self._records_where(c, and_(self._bad_where(), ol.is_not(None))))
                cand = list(timed) + self._multi_keys()
            for batch in _batches(cand, 200):
                take(self._records_where(c, in_keys(l.scope_expr, l.key_expr, batch)))
        return recs

    def _count_links(self, links: set, counts: dict) -> None:
        """Fill ``counts`` (link -> effect records) for ``links``, by ``IN`` lists the effect link's
        index serves."""
        if not links:
            return
        fx = self.fx
        with fx.engine.connect() as c:
            for batch in _batches(sorted(links), 500):
                for g in c.execute(fx.grouped_select(None).where(fx.link.in_(batch))):
                    counts[g[0]] = int(g[1])

    def _stream_merge(
        self,
        fx_chunks: Iterable[Sequence[Any]],
        op_chunks: Iterable[Sequence[Any]],
        with_rid: bool = False,
    ) -> tuple[dict, dict, list | None]:
        """One pass over both sides' links in byte order: ``fx_chunks`` (chunks of the effect side's
        ``(link, n[, n_recent])`` driver tuples, :meth:`EffectSource.stream_links`) against
        ``op_chunks``, the ledger's (:meth:`_ledger_links`), compared as UTF-8 bytes. Returns ``(orphans,
        dup_links, dup_rids)``: effect links no operation link matches (link -> records inside the
        retention), links with >= 2 records (link -> n), and — when the ledger's rows carry their
        record id (``with_rid``) — the ids of every operations record behind ``dup_links`` (else None).

        Memory: one fetch of each side and the links found (:func:`merge_links`)."""
        has_recent = self.orphans_since_e is not None and self.fx.at_e is not None
        return merge_links(fx_chunks, op_chunks, has_recent, with_rid)


class _AfterAll:
    """Compares greater than every link: the ledger's stream once it has ended."""

    def __lt__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return other is self

    __hash__ = object.__hash__


#: Links compared as one block by :func:`merge_links` (a C-level list comparison instead of a Python
#: step per link).
MERGE_BLOCK = 64


def merge_links(
    fx_chunks: Iterable[Sequence[Any]], op_chunks: Iterable[Sequence[Any]], has_recent: bool, with_rid: bool
) -> tuple[dict, dict, list | None]:
    """Merge two link streams in byte order (see :meth:`Reconciler._stream_merge`): ``fx_chunks``, the
    effect side's ``(link, n[, n_recent])`` rows (links unique), against ``op_chunks``, the ledger's
    ``(link[, rid])`` rows (a link once per record). Returns ``(orphans, dup_links, dup_rids)``.

    Most links match one to one: a block of :data:`MERGE_BLOCK` links that is equal on both sides
    (one C-level list comparison) and holds no link with several records is passed in one step; a
    block that differs is walked link by link (and the next block too, so that a failed comparison
    costs at most one more pass over its links in C)."""
    orphans: dict = {}
    dup_links: dict = {}
    dup_rids: list | None = [] if with_rid else None
    end = _AfterAll()
    chunks = iter(op_chunks)
    ops: list = []  # the ledger's current chunk: links as bytes, and the record ids in step
    ids: list = []
    i = 0

    def load() -> None:
        nonlocal ops, ids, i
        rows = next(chunks, None)
        while rows is not None and not rows:
            rows = next(chunks, None)
        if rows is None:
            ops, ids = [end], [None]
        else:
            ops = links_as_bytes(list(map(_first, rows)))
            ids = list(map(_second, rows)) if with_rid else []
        i = 0

    load()
    for rows in fx_chunks:
        links = links_as_bytes(list(map(_first, rows)))
        ns = list(map(_second, rows))
        j, n_links, slow_until = 0, len(links), 0
        while j < n_links:
            if j >= slow_until:
                k = min(MERGE_BLOCK, n_links - j, len(ops) - i)
                if ops[i : i + k] == links[j : j + k] and max(ns[j : j + k]) < 2:
                    i += k
                    j += k
                    if i == len(ops):
                        load()
                    continue
                slow_until = j + MERGE_BLOCK
            link = links[j]
            while ops[i] < link:
                i += 1
                if i == len(ops):
                    load()
            if ops[i] == link:
                n = int(ns[j])
                if n >= 2:
                    dup_links[link_from_bytes(link)] = n
                    while dup_rids is not None and ops[i] == link:  # every record behind this link
                        dup_rids.append(ids[i])
                        i += 1
                        if i == len(ops):
                            load()
                if ops[i] == link:  # past this record (the link's other records: skipped above)
                    i += 1
                    if i == len(ops):
                        load()
            else:
                n_recent = int(rows[j][2] or 0) if has_recent else int(ns[j])
                if n_recent > 0:
                    orphans[link_from_bytes(link)] = n_recent
            j += 1
    return orphans, dup_links, dup_rids


def _states(recs: dict, counts: dict) -> dict:
    """(scope, key) -> :class:`_KeyState` of the operations to report: >= 2 effect records over
    their links, or an effect record behind a failed / stuck / timed-out operation."""
    states: dict = {}
    for ref, rs in recs.items():
        st = _KeyState(
            0, set(), None, any(x[1] for x in rs), any(x[2] for x in rs), max((x[3] or "" for x in rs), default="")
        )
        for link in {x[0] for x in rs if x[0] is not None and x[0] in counts}:
            st.n_effects += counts[link]
            st.links.add(link)
        if st.n_effects >= 2 or (st.n_effects and st.bad and not st.completed):
            states[ref] = st
    return states


def _operation_identity(l) -> list[ColumnElement]:
    """What to GROUP BY for one operation: (scope, key), or the key alone when the layout has no scope
    (its scope is the constant '', which PostgreSQL refuses in GROUP BY: "non-integer constant")."""
    return [l.scope_expr, l.key_expr] if l.layout.scope else [l.key_expr]


def _batches(items, n: int):
    items = list(items)
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _evidence(e: EffectRecord) -> dict:
    d = {
        "effect_record": _jsonable(e.record_id),
        "link": e.link,
        "reference": e.reference,
        "at": iso(e.at) if e.at else None,
    }
    for k, v in e.shown.items():
        d[k] = _jsonable(v)
    return d


def _jsonable(v):
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)


def merge_effect_findings(
    ledger_findings: list[Finding], effect_findings: list[Finding], reasons: dict | None = None
) -> list[Finding]:
    """Join effect findings to the ledger's: a ``duplicate_effect`` the ledger already shows for the
    same operation gains the effect records as evidence and ``reasons[(scope, key)]`` (``"2 effect
    records in charges"``) in its sentence, instead of a second row."""
    dup = {(f.scope, f.key): f for f in ledger_findings if f.kind == K.DUPLICATE_EFFECT}
    out = list(ledger_findings)
    for f in effect_findings:
        same = dup.get((f.scope, f.key)) if f.kind == K.DUPLICATE_EFFECT else None
        if same is None:
            out.append(f)
            continue
        why = (reasons or {}).get((f.scope, f.key), "effect records")
        same.explanation = same.explanation.rstrip(".") + f"; {why}."
        same.evidence = list(same.evidence) + list(f.evidence)  # with its last row, the reason's count
    return out


def reconcile(ledger, now: datetime, kinds: Iterable[FindingKind] | None = None) -> list[Finding]:
    """Convenience: :meth:`Reconciler.run` for ``ledger`` at ``now``."""
    return Reconciler(ledger, now).run(kinds)
