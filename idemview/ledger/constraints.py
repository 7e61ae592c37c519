"""What a ledger's schema guarantees about its keys, read from the reflected table (no guessing).

A finding kind that needs two records of one (scope, key) cannot occur when the operations table
declares the key unique: a PRIMARY KEY, a UNIQUE constraint or a full unique index whose columns are
all among the key and scope columns. The scan then skips that kind and says why (issue 11), instead of
grouping millions of rows to find nothing.

Declarations that do **not** count: partial unique indexes (``WHERE ...``: uniqueness only inside the
predicate), expression indexes (``lower(key)``), and constraints on columns outside the key and scope.
NULLs do not collide under UNIQUE on any engine (and SQLite even lets a PRIMARY KEY column hold
NULLs), while idemview's grouping would put NULL keys together; so a nullable unique column counts only
when no row holds NULL there (one indexed ``IS NULL`` probe).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Column, Index, Table, UniqueConstraint, or_, select
from sqlalchemy.exc import SQLAlchemyError

if TYPE_CHECKING:  # pragma: no cover
    from idemview.ledger.reader import Ledger


def unique_column_sets(t: Table, engine=None) -> list[list[Column]]:
    """The column lists ``t`` declares unique (primary key, UNIQUE constraints, full unique indexes),
    as reflected. Partial and expression indexes are left out. With a SQLite ``engine``, SQLite's own
    index list is read too (``PRAGMA index_list``): SQLAlchemy does not reflect a column-level
    ``UNIQUE`` (``task_id VARCHAR(155) UNIQUE``), which SQLite keeps as an automatic index."""
    out: list[list[Column]] = []
    if engine is not None and engine.dialect.name == "sqlite":
        out += _sqlite_unique(t, engine)
    if t.primary_key is not None and len(t.primary_key.columns):
        out.append(list(t.primary_key.columns))
    for c in t.constraints:
        if isinstance(c, UniqueConstraint) and len(c.columns):
            out.append(list(c.columns))
    for ix in t.indexes:
        if not ix.unique or not _plain(ix):
            continue
        out.append(list(ix.columns))
    return out


def _sqlite_unique(t: Table, engine) -> list[list[Column]]:
    by_name = {c.name.lower(): c for c in t.c}
    schema = f'"{t.schema}".' if t.schema else ""
    out = []
    try:
        with engine.connect() as conn:
            for row in conn.exec_driver_sql(f'PRAGMA {schema}index_list("{t.name}")').fetchall():
                # (seq, name, unique, origin, partial)
                if not row[2] or (len(row) > 4 and row[4]):
                    continue
                info = conn.exec_driver_sql(f'PRAGMA {schema}index_info("{row[1]}")').fetchall()
                names = [r[2] for r in info]
                if not names or any(n is None or n.lower() not in by_name for n in names):
                    continue  # an expression index (cid -2, no name)
                out.append([by_name[n.lower()] for n in names])
    except SQLAlchemyError:
        return []
    return out


def _plain(ix: Index) -> bool:
    """A full index on plain columns: no predicate (partial index), no expression."""
    if any(k.endswith("_where") and v is not None for k, v in ix.dialect_kwargs.items()):
        return False
    exprs = list(ix.expressions)
    return bool(exprs) and len(exprs) == len(ix.columns) and all(isinstance(e, Column) for e in exprs)


def key_is_unique(ledger: Ledger) -> str | None:
    """Why the ledger holds at most one record per (scope, idempotency key), as a short phrase naming
    the declaration (e.g. ``"UNIQUE (task_id)"``), or ``None`` when the schema does not guarantee it.

    Issues at most one indexed query (the ``IS NULL`` probe of nullable unique columns); a failing
    probe (permissions, odd engine) answers ``None``, never an error."""
    lay, t = ledger.layout, ledger.ops
    ident = {t.c[c].name for c in lay.key + lay.scope if c in t.c}
    for cols in unique_column_sets(t, ledger.engine):
        if not cols or not {c.name for c in cols} <= ident:
            continue
        nullable = [c for c in cols if c.nullable and not _sqlite_rowid(t, c)]
        if nullable:
            probe = or_(*[c.is_(None) for c in nullable])
            if _fallback_is_unique(ledger, nullable):
                # A NULL key is keyed "#<row id>" (key_fallback, a unique row id): NULL rows are each
                # their own key, and only a stored key spelled like a fallback ("#12") could collide.
                probe = nullable[0].like("#%")
            try:
                with ledger.engine.connect() as conn:
                    hit = conn.execute(select(cols[0]).select_from(t).where(probe).limit(1)).first()
            except SQLAlchemyError:
                return None
            if hit is not None:
                continue
        what = "PRIMARY KEY" if t.primary_key is not None and set(cols) == set(t.primary_key.columns) else "UNIQUE"
        return f"{what} ({', '.join(c.name for c in cols)})"
    return None


def _fallback_is_unique(ledger: Ledger, nullable: list[Column]) -> bool:
    """True when the only nullable column of a unique set is the layout's one key column and a NULL
    there is keyed by a ``key_fallback`` column that is the table's single-column primary key
    (Graphile Worker's keyless jobs, Trigger.dev's runs without an idempotency key: "#<id>")."""
    lay, t = ledger.layout, ledger.ops
    fb = lay.key_fallback
    if not fb or len(lay.key) != 1 or lay.key_required or fb not in t.c or lay.key[0] not in t.c:
        return False
    if [c.name for c in nullable] != [t.c[lay.key[0]].name]:
        return False
    pk = list(t.primary_key.columns) if t.primary_key is not None else []
    return len(pk) == 1 and pk[0].name == t.c[fb].name


def _sqlite_rowid(t: Table, c: Column) -> bool:
    # An INTEGER PRIMARY KEY in SQLite is the rowid alias and can never be NULL.
    return c.primary_key and len(t.primary_key.columns) == 1 and type(c.type).__name__.upper() == "INTEGER"
