"""Effect records: the downstream rows that prove a side effect happened (DESIGN §4 ``[effects]``, §5).

An :class:`EffectSource` binds a layout's :class:`~idemview.layouts.layout.EffectsSpec` to a read-only
engine — the ledger's own database (reconciliation then runs as SQL joins) or another one (a saved
connection, a URL or a SQLite file; both sides are then streamed in link order and merged with bounded
memory, see :mod:`idemview.findings.effects`). Nothing is ever written to either database.

Links are compared as exact text on both sides: integer foreign keys are cast to text, MySQL/MariaDB
compare binary strings (their default collations would merge ``Ch_1`` and ``ch_1``), and ordering for
the merge is byte order on every engine (PostgreSQL ``COLLATE "C"``, MySQL binary, SQLite's default),
which is also Python's ``str`` order for UTF-8 text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import String, and_, case, func, select, true
from sqlalchemy.engine import Engine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement, Select

from idemview.domain.model import EffectRecord
from idemview.layouts.layout import EffectsSpec, LayoutError
from idemview.ledger.dialects import family
from idemview.ledger.sqlx import as_text, epoch_seconds, exact_text
from idemview.ledger.times import from_epoch

#: Links per query when effect records are read for a set of operations.
LINK_BATCH = 500


class _ByteOrder(FunctionElement):
    """An expression to ORDER BY in byte order (the merge compares with Python's ``str`` order)."""

    type = String()
    inherit_cache = True
    name = "byte_order"


@compiles(_ByteOrder)
def _byte_order_default(el, compiler, **kw):
    (arg,) = list(el.clauses)
    return compiler.process(arg, **kw)


@compiles(_ByteOrder, "postgresql")
def _byte_order_pg(el, compiler, **kw):
    # the database's collation (often en_US) sorts 'a' < 'B'; "C" sorts by bytes
    (arg,) = list(el.clauses)
    return f'({compiler.process(arg, **kw)}) COLLATE "C"'


def byte_order(expr: ColumnElement) -> ColumnElement:
    """``expr`` for ``ORDER BY`` in byte order on every engine (MySQL links are already binary)."""
    return _ByteOrder(expr)


def link_text(col, dialect: str) -> ColumnElement:
    """A link column as text compared exactly on ``dialect`` (see the module docstring)."""
    t = col if isinstance(col.type, String) else as_text(col)
    return exact_text(t) if dialect in ("mysql", "mariadb") else t


def open_effects_engine(connection: str, base: str | Path | None = None) -> Engine:
    """Open ``connection`` read-only: a saved connection's name (password from the keyring), a URL, or a
    SQLite path (relative paths are taken from ``base``, the layout file's folder).

    Raises :class:`~idemview.ledger.connect.ConnectError` when it cannot be opened."""
    from idemview.config import ConnectionStore, CredentialStore
    from idemview.ledger.connect import ConnectError, open_engine, parse_url

    if "://" not in connection:
        p = Path(connection)
        if not p.is_absolute() and base is not None:
            p = Path(base) / p
        if p.exists():
            return open_engine(parse_url(str(p)))
        saved = ConnectionStore().find(connection)
        if saved is None:
            raise ConnectError(
                f"effects connection {connection!r} is neither a URL, a SQLite file, nor a saved connection"
            )
        return open_engine(saved.url(CredentialStore().get(saved.id)))
    return open_engine(parse_url(connection))


class EffectSource:
    """The effect table of ``ledger``'s layout, read through ``engine`` (default: the ledger's own).

    Columns of every select: ``link`` (text), and where declared ``record_id``, ``reference``, ``at_e``
    (epoch seconds) and the ``show`` columns. Raises :class:`LayoutError` (``missing`` set) when the
    table or a column is absent; a link column of the operations table that is missing likewise."""

    def __init__(self, ledger, engine: Engine | None = None):
        spec: EffectsSpec | None = ledger.layout.effects
        if spec is None:
            raise LayoutError(f"layout {ledger.layout.name!r} has no [effects] section")
        self.spec = spec
        self.ledger = ledger
        self.engine = engine if engine is not None else ledger.engine
        self.same_database = self.engine is ledger.engine
        schema = spec.schema if spec.schema is not None else (ledger.layout.schema if self.same_database else None)
        self.table = ledger._reflect(schema, spec.table, spec.columns(), "effects", engine=self.engine)
        t = self.table
        fx_dialect = family(self.engine)  # MySQL and MariaDB under either name
        self.link = link_text(t.c[spec.link_effect], fx_dialect)
        self.where = and_(*[ledger._pred(t, p) for p in spec.where]) if spec.where else true()
        self.record_id = t.c[spec.id] if spec.id else None
        self.reference = link_text(t.c[spec.reference], fx_dialect) if spec.reference else None
        self.at_e = epoch_seconds(t.c[spec.time.column], spec.time, fx_dialect) if spec.time else None
        self.operation_link = self._operation_link()

    def _operation_link(self) -> ColumnElement:
        """The operations-side expression the effect link is compared with."""
        lo, led = self.spec.link_operation, self.ledger
        if lo == "key":
            return led.key_expr
        if lo == "effect_ref":
            if "effect_ref" not in led.layout.fields:
                raise LayoutError(
                    f"layout {led.layout.name!r}: [effects] links on effect_ref, which [operations.fields] does not map"
                )
            return led.effect_expr
        cols = {c.key: c for c in led.ops.c}
        col = cols[lo] if lo in cols else next((c for k, c in cols.items() if k.lower() == lo.lower()), None)
        if col is None:
            raise LayoutError(
                f"layout {led.layout.name!r}: [effects] links on operations column {lo!r}, "
                f"which table {led.ops.name} lacks",
                [f"column {led.ops.name}.{lo}"],
            )
        return link_text(col, led.dialect)

    # ------------------------------------------------------------------------------------ selects

    def _columns(self) -> list[ColumnElement]:
        cols: list[ColumnElement] = [self.link.label("link")]
        if self.record_id is not None:
            cols.append(self.record_id.label("record_id"))
        if self.reference is not None:
            cols.append(self.reference.label("reference"))
        if self.at_e is not None:
            cols.append(self.at_e.label("at_e"))
        cols += [self.table.c[c].label(f"show_{i}") for i, c in enumerate(self.spec.show)]
        return cols

    def records_select(self) -> Select:
        """Every effect record (the layout's ``where`` applied; NULL links left out)."""
        return select(*self._columns()).select_from(self.table).where(self.where, self.link.is_not(None))

    def grouped_select(self, since_e: float | None = None, recent_since_e: float | None = None) -> Select:
        """One row per link: ``link, n`` (records) and ``first_e`` (earliest time, when declared).
        ``since_e``: only records at or after that epoch second. ``recent_since_e``: also ``n_recent``,
        the records at or after it (records older than the ledger's retention may belong to operations
        already purged from it)."""
        cols = [self.link.label("link"), func.count().label("n")]
        if self.at_e is not None:
            cols.append(func.min(self.at_e).label("first_e"))
            if recent_since_e is not None:
                cols.append(func.sum(case((self.at_e >= recent_since_e, 1), else_=0)).label("n_recent"))
        q = select(*cols).select_from(self.table).where(self.where, self.link.is_not(None))
        if since_e is not None and self.at_e is not None:
            q = q.where(self.at_e >= since_e)
        return q.group_by(self.link)

    def _record(self, r) -> EffectRecord:
        m = r._mapping
        return EffectRecord(
            link=m["link"],
            record_id=m.get("record_id"),
            reference=m.get("reference"),
            at=from_epoch(m["at_e"]) if m.get("at_e") is not None else None,
            shown={c: m[f"show_{i}"] for i, c in enumerate(self.spec.show)},
        )

    def records_for(self, links: Iterable[str], limit_per_link: int | None = None) -> dict[str, list[EffectRecord]]:
        """Effect records by link for ``links`` (queried in batches of :data:`LINK_BATCH`, each an
        ``IN`` list the link column's index can serve), ordered by time then identity."""
        out: dict[str, list[EffectRecord]] = {}
        links = sorted({x for x in links if x is not None})
        with self.engine.connect() as c:
            for i in range(0, len(links), LINK_BATCH):
                batch = links[i : i + LINK_BATCH]
                for r in c.execute(self.records_select().where(self.link.in_(batch))):
                    rec = self._record(r)
                    lst = out.setdefault(rec.link, [])
                    if limit_per_link is None or len(lst) < limit_per_link:
                        lst.append(rec)
        for lst in out.values():
            lst.sort(key=lambda e: (e.at is None, e.at or 0, str(e.record_id)))
        return out

    def records_of_operation(self, scope: str, key: str) -> list[EffectRecord]:
        """The effect records of one operation (every record of ``(scope, key)``), for the detail view."""
        led = self.ledger
        with led.engine.connect() as c:
            links = [
                r[0]
                for r in c.execute(
                    select(self.operation_link)
                    .select_from(led.ops)
                    .where(led.scope_expr == scope, led.key_expr == key, self.operation_link.is_not(None))
                    .distinct()
                )
            ]
        recs = self.records_for(links)
        return sorted(
            (e for lst in recs.values() for e in lst), key=lambda e: (e.at is None, e.at or 0, str(e.record_id))
        )

    def stream_grouped(self, recent_since_e: float | None = None, batch: int = 10000) -> Iterator[Any]:
        """:meth:`grouped_select` rows in byte order of the link, streamed (server-side cursor)."""
        q = self.grouped_select(None, recent_since_e).order_by(byte_order(self.link))
        with self.engine.connect() as c:
            res = c.execution_options(stream_results=True, yield_per=batch).execute(q)
            for part in res.partitions():
                yield from part

    def describe(self) -> dict:
        """Where the effect records are read from, for manifests and the GUI (never a user name or
        password): ``{"table", "dialect", "host", "database", "same_database"}``."""
        from idemview.ledger.connect import describe

        where = f"{self.spec.schema}.{self.spec.table}" if self.spec.schema else self.spec.table
        return {"table": where, **describe(self.engine), "same_database": self.same_database}
