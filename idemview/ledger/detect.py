"""Detection: which layout fits a database (``idemview detect``, DESIGN §4).

Every preset names tables and columns; detection reflects the database (every schema it can list) and
scores each preset by the share of its named tables and columns that exist, matched case-insensitively
and allowing a table-name prefix (``myapp_oban_jobs``) or a schema (``HangFire.Job``, ``pgboss.job``).
A preset is only a candidate when all its tables and key columns exist (a table found only by its prefixed
name must hold every column the preset reads); confidence is the share of all its columns found, and more
specific presets (more columns matched) win ties.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlalchemy import inspect
from sqlalchemy.engine import Engine

from idemview.layouts.layout import Layout, all_presets
from idemview.ledger.dialects import POSTGRESQL, family

SYSTEM_SCHEMAS = {"information_schema", "pg_catalog", "pg_toast", "mysql", "performance_schema", "sys"}


@dataclass
class Match:
    """A preset that fits: ``layout`` (with the schema and real table names found), ``confidence`` in
    [0, 1], ``reason`` in plain words, and ``missing`` optional columns not found."""

    layout: Layout
    confidence: float
    reason: str
    matched: int
    missing: list[str]
    exact: int = 0  # names found with the preset's exact spelling (tells Hangfire's SQL Server and
    # PostgreSQL storages apart: same names, different case)


def _catalog(engine: Engine) -> dict[tuple[str | None, str], set[str]]:
    insp = inspect(engine)
    default = None
    fam = family(engine)
    try:
        default = insp.default_schema_name
        if fam != POSTGRESQL:
            # MySQL/MariaDB (under either dialect name): a "schema" is another database on the same
            # server; look only at the one the URL names (issue #9, item 1). SQLite: attached
            # databases are refused on a read-only engine. An unknown dialect: its schemas may be
            # other databases too, so the default one only.
            schemas = [default]
        else:
            schemas = [s for s in insp.get_schema_names() if s.lower() not in SYSTEM_SCHEMAS]
    except NotImplementedError:
        schemas = [None]
    out: dict[tuple[str | None, str], set[str]] = {}
    for s in schemas or [None]:
        sch = None if s == default else s
        try:
            names = insp.get_table_names(schema=sch)
        except Exception:
            continue
        for t in names:
            try:
                out[(sch, t)] = {c["name"] for c in insp.get_columns(t, schema=sch)}
            except Exception:
                continue
    return out


def _find_table(cat, schema: str | None, name: str):
    """(schema, real name) of a table matching ``name`` exactly, case-insensitively, or with a prefix.
    Among exact matches in several schemas the connection's default schema (``None`` in the catalog,
    e.g. PostgreSQL's ``public``) wins, then the first by name: see :func:`other_schemas`."""
    lname = name.lower()
    best = None
    exact = []
    for (s, t), _cols in cat.items():
        if schema is not None and s is not None and s.lower() != schema.lower():
            continue
        lt = t.lower()
        if lt == lname:
            exact.append((s, t))
        elif lt.endswith("_" + lname) and best is None:
            best = (s, t)
    if exact:
        return next((x for x in exact if x[0] is None), exact[0])
    return best


def other_schemas(cat, found: tuple[str | None, str]) -> list[str]:
    """Other schemas holding a table of the same name as ``found`` (an Oban installed twice, a staging
    copy): said in the match's reason, so that a silent choice cannot be read as the only one."""
    return sorted(s or "(default)" for (s, t) in cat if t.lower() == found[1].lower() and s != found[0])


def detect(engine: Engine, presets: list[Layout] | None = None) -> list[Match]:
    """Ranked matches (best first) of ``presets`` (default: all shipped) against ``engine``'s schema.
    An empty list means nothing fits."""
    cat = _catalog(engine)
    matches = []
    for lay in presets if presets is not None else all_presets():
        found = _find_table(cat, lay.schema, lay.table) or _find_table(cat, None, lay.table)
        if not found:
            continue
        cols = {c.lower() for c in cat[found]}
        exact = len(lay.operations_columns() & cat[found]) + (found[1] == lay.table)
        optional = {c.lower() for c in lay.optional}
        need = {c.lower() for c in lay.operations_columns()} - optional
        key_cols = {c.lower() for c in lay.key}
        if not key_cols <= cols:
            continue
        have = need & cols
        missing = sorted(need - cols)
        total, got = len(need), len(have)
        # optional columns found add to the evidence (a Celery table with extended columns)
        total += len(optional)
        got += len(optional & cols)
        att_found = None
        if lay.attempts.source == "table" and lay.attempts.table:
            att_found = _find_table(cat, found[0], lay.attempts.table)
            need_a = {c.lower() for c in lay.attempts_columns()}
            total += len(need_a)
            if att_found:
                have_a = need_a & {c.lower() for c in cat[att_found]}
                exact += len(lay.attempts_columns() & cat[att_found]) + (att_found[1] == lay.attempts.table)
                got += len(have_a)
                missing += [f"{lay.attempts.table}.{c}" for c in sorted(need_a - have_a)]
            else:
                missing.append(f"table {lay.attempts.table}")
        conf = got / total if total else 0.0
        if missing and conf < 0.5:
            continue
        if missing and found[1].lower() != lay.table.lower():
            # A prefixed name is weak evidence for a generic table name: Laravel's `jobs` is the tail of
            # delayed_jobs, oban_jobs, failed_jobs, good_jobs... A prefixed table must hold every column.
            continue
        fitted = replace(lay, schema=found[0], table=found[1])
        if att_found:
            fitted.attempts = replace(lay.attempts, table=att_found[1], schema=att_found[0])
        where = f"{found[0]}.{found[1]}" if found[0] else found[1]
        reason = (
            f"table {where} has {len(have)} of the {len(need)} columns {lay.name} reads"
            + (f"; attempts table {att_found[1]} found" if att_found else "")
            + (f"; missing: {', '.join(missing[:6])}" if missing else "")
        )
        others = other_schemas(cat, found)
        if others:
            reason += f"; also in schema {', '.join(others)} (pass --schema to read another)"
        matches.append(Match(fitted, conf, reason, got, missing, exact))
    matches.sort(key=lambda m: (-(m.confidence >= 0.999), -m.confidence, -m.matched, -m.exact, m.layout.name))
    return matches


def locate(engine: Engine, layout: Layout, schema: str | None = None) -> Layout:
    """``layout`` with the schema and real table names where this database keeps its tables.

    A preset's schema is a default, not a requirement (DESIGN §9): with ``schema`` given (``--schema``,
    a connection's setting) the tables are read there; otherwise, when the layout's own schema does not
    hold its operations table (DBOS on SQLite has no schemas; pg-boss installed in another schema), the
    table is found the way :func:`detect` finds it (any schema, case-insensitively, a prefixed name).
    Returns the layout unchanged when nothing better is found (opening it then says what is missing)."""
    if schema:
        return replace(layout, schema=schema)  # an attempts table without its own schema follows
    try:
        cat = _catalog(engine)
    except Exception:  # reflection refused: let opening the ledger report it
        return layout
    if layout.schema is not None:
        same = [
            (s, t)
            for (s, t) in cat
            if s is not None and s.lower() == layout.schema.lower() and t.lower() == layout.table.lower()
        ]
        if same:
            # the names as the database spells them: Hangfire.PostgreSql's "hangfire" for the SQL Server
            # preset's "HangFire" (quoted identifiers are case-sensitive on PostgreSQL)
            s, t = same[0]
            if (s, t) == (layout.schema, layout.table):
                return layout
            fitted = replace(layout, schema=s, table=t)
            if layout.attempts.source == "table" and layout.attempts.table:
                att = _find_table(cat, s, layout.attempts.table)
                if att:
                    fitted.attempts = replace(layout.attempts, table=att[1], schema=att[0])
            return fitted
    if layout.schema is None and any(s is None and t.lower() == layout.table.lower() for (s, t) in cat):
        return layout
    found = _find_table(cat, layout.schema, layout.table) or _find_table(cat, None, layout.table)
    if not found:
        return layout
    fitted = replace(layout, schema=found[0], table=found[1])
    if layout.attempts.source == "table" and layout.attempts.table:
        att_found = _find_table(cat, found[0], layout.attempts.table)
        if att_found:
            fitted.attempts = replace(layout.attempts, table=att_found[1], schema=att_found[0])
    return fitted
