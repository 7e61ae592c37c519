"""One schema per layout on PostgreSQL (issue #19 item 7).

A layout without a schema names its tables unqualified. PostgreSQL resolves each unqualified name on
its own through ``search_path`` (default ``"$user", public``), so a schema named after the login role
holding its own ``operations`` shadows ``public.operations`` while ``attempts`` still comes from
``public``: two halves of two ledgers, read as one, silently. :func:`resolve_schema` decides once, for
the operations table, which schema the session would read it from (the first schema of
``current_schemas(false)`` that holds it — the search-path rule of the PostgreSQL docs, "The Schema
Search Path") and pins the layout to it, so that attempts, ``in_table`` predicates and a same-database
``[effects]`` table are read from that schema too. It also names the other schemas that hold a table
of that name (what ``detect`` reports as "also in schema"). Called by
:class:`idemview.ledger.reader.Ledger` — every front end reads through it.
"""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from idemview.layouts.layout import Layout

_COPIES = text(
    "SELECT n.nspname, c.relname, array_position(current_schemas(false), n.nspname::text) AS pos "
    "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE lower(c.relname) = lower(:t) AND c.relkind IN ('r', 'v', 'm', 'p', 'f') "
    "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
    "ORDER BY pos NULLS LAST, (c.relname = :t) DESC, n.nspname"
)


def resolve_schema(engine: Engine, layout: Layout) -> tuple[Layout, str | None]:
    """``(layout pinned to one schema, note)`` for a PostgreSQL ``engine``; ``layout`` unchanged (and
    no note) when it names its schema already or no schema on the search path holds its operations
    table (opening it then says what is missing). ``note`` is ``None`` unless other schemas hold a
    table of that name: then one line for people saying which schema is read and which hold copies."""
    if layout.schema is not None:
        return layout, None
    try:
        with engine.connect() as c:
            rows = c.execute(_COPIES, {"t": layout.table}).all()
    except DBAPIError:  # catalog not readable: reflection will say what is wrong
        return layout, None
    on_path = [r for r in rows if r[2] is not None]
    if not on_path:
        return layout, None
    schema = str(on_path[0][0])
    others = sorted({str(r[0]) for r in rows} - {schema})
    if not others:  # one copy: nothing to warn of (scan's stderr stays one line per problem)
        return replace(layout, schema=schema), None
    note = (
        f"tables of layout {layout.name} read from schema {schema}; table {layout.table} also in schema "
        f"{', '.join(others)} (pass --schema to read another)"
    )
    return replace(layout, schema=schema), note
