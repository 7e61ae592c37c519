"""The preset contract: every shipped preset, on every engine its layout can live on, against a schema
built only from what the preset declares (its tables, columns, time encodings, JSON paths, ``in_table``
tables, schema).

Engines: a preset whose tables live in a named schema (pg-boss, Convoy, DBOS, Hangfire) runs on
PostgreSQL; the others on SQLite, PostgreSQL and MariaDB/MySQL. What must hold for each:

- the declared columns are enough: the ledger opens without a ``LayoutMismatch``;
- on an empty ledger every read of the contract runs and returns nothing: counts, a page, a filtered
  page (every filter field), the operation iterator, and every finding kind's query;
- on a database without its tables the preset is refused with a typed ``LayoutMismatch`` naming them;
- detection lists the preset for its own schema.

The planted incidents per system are in the ``test_planted_*`` files of this folder.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import JSON, BigInteger, Boolean, Column, DateTime, Float, LargeBinary, MetaData, Table, Text, text
from sqlalchemy.schema import CreateSchema

from idemview.domain.filters import Filter
from idemview.domain.model import FindingKind, Status
from idemview.errors import LayoutMismatch
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import Layout, Predicate, all_presets
from idemview.ledger.connect import open_engine
from idemview.ledger.detect import detect
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR

PRESETS = sorted(all_presets(), key=lambda lay: lay.name)


def _schemas(lay: Layout) -> set[str]:
    out = {lay.schema} if lay.schema else set()
    if lay.attempts.source == "table" and lay.attempts.schema:
        out.add(lay.attempts.schema)
    out |= {p.value["schema"] for p in _predicates(lay) if p.op == "in_table" and p.value.get("schema")}
    return out


def _engines(lay: Layout) -> list[str]:
    return ["postgresql"] if _schemas(lay) else ["sqlite", "postgresql", "mysql"]


def _predicates(lay: Layout):
    preds: list[Predicate] = [p for r in lay.status.rules for p in r.when]
    if lay.attempts.outcome:
        preds += [p for r in lay.attempts.outcome.rules for p in r.when]
    preds += list(lay.attempts.where)
    stack, out = list(preds), []
    while stack:
        p = stack.pop()
        if p.op in ("any", "all"):
            stack.extend(p.value)
        else:
            out.append(p)
    return out


CASES = [pytest.param(lay, eng, id=f"{lay.name}-{eng}") for lay in PRESETS for eng in _engines(lay)]


def _column_types(lay: Layout) -> dict[str, object]:
    """The SQL type of each declared column, from how the layout reads it."""
    types: dict[str, object] = {}
    for p in _predicates(lay):
        v = p.value[0] if isinstance(p.value, list | tuple) and p.value else p.value
        if isinstance(v, bool) and p.op != "is_null":
            types[p.column] = Boolean()
        elif isinstance(v, int) and not isinstance(v, bool):
            types[p.column] = BigInteger()
        elif isinstance(v, float):
            types[p.column] = Float()
    for vs in lay.fields.values():
        if vs.column and (vs.json_path or vs.encoding == "json"):
            types[vs.column] = JSON()
        elif vs.column and vs.encoding in ("hex", "binary", "pickle"):
            types[vs.column] = LargeBinary()
    if lay.attempts.source == "json_array" and lay.attempts.column:
        types[lay.attempts.column] = JSON()
    if lay.fields.get("attempt_count") is not None and not lay.fields["attempt_count"].json_path:
        types[lay.fields["attempt_count"].column] = BigInteger()
    for p in _predicates(lay):
        if p.op == "ge_column":  # two columns of one row compared: one type (attempts, max_attempts)
            types[p.value] = types.setdefault(p.column, BigInteger())
    return types


def _time_type(encoding: str):
    return {"datetime": DateTime(timezone=True), "naive": DateTime(), "epoch_s": Float(), "epoch_ms": BigInteger()}.get(
        encoding, Text()
    )


def build_schema(writable, lay: Layout) -> None:
    """Create the preset's tables, empty, with only the columns it declares."""
    types = _column_types(lay)
    md = MetaData()
    op_times = {t.column: _time_type(t.encoding) for t in lay.times.values()}
    if lay.lock_heartbeat is not None:  # a heartbeat lease: its time and its seconds (pg-boss 12)
        op_times[lay.lock_heartbeat.time.column] = _time_type(lay.lock_heartbeat.time.encoding)
        types[lay.lock_heartbeat.seconds_column] = BigInteger()
    a = lay.attempts
    ops_cols = lay.operations_columns() | set(lay.optional) | set(a.join.values())
    Table(
        lay.table,
        md,
        *[Column(c, op_times.get(c) or types.get(c) or Text()) for c in sorted(ops_cols)],
        schema=lay.schema,
    )
    if a.source == "table":
        att_times = {t.column: _time_type(t.encoding) for t in (a.started_at, a.finished_at) if t}
        att_types = _column_types(lay)
        if a.number:
            att_types[a.number] = BigInteger()
        Table(
            a.table,
            md,
            *[Column(c, att_times.get(c) or att_types.get(c) or Text()) for c in sorted(lay.attempts_columns())],
            schema=a.schema if a.schema is not None else lay.schema,
        )
    for p in _predicates(lay):
        if p.op == "in_table":
            schema = p.value.get("schema", lay.schema)
            if p.value["table"] not in {t.name for t in md.tables.values()}:
                Table(p.value["table"], md, Column(p.value["column"], types.get(p.column) or Text()), schema=schema)
    if writable.dialect.name == "postgresql":
        with writable.begin() as c:
            for s in _schemas(lay):
                c.execute(text(f'DROP SCHEMA IF EXISTS "{s}" CASCADE'))
                c.execute(CreateSchema(s))
    md.drop_all(writable)
    md.create_all(writable)


@pytest.fixture
def engine_url(request, tmp_path):
    """(writable engine, read-only URL) of an empty database on the case's engine."""
    from sqlalchemy import create_engine

    from tests.conftest import _clear

    name = request.node.callspec.params["engine"]
    if name == "sqlite":
        url = str(tmp_path / "ledger.db")
        w = create_engine(f"sqlite:///{url}")
    else:
        url = request.getfixturevalue("pg_url" if name == "postgresql" else "mysql_url")
        w = create_engine(url)
        _clear(w)
    yield w, url
    if name == "postgresql":  # schemas are outside what _clear drops; later tests detect on this database
        with w.begin() as c:
            for schema in _schemas(request.node.callspec.params["layout"]):
                c.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    w.dispose()


@pytest.mark.parametrize(("layout", "engine"), CASES)
def test_preset_contract(layout, engine, engine_url):
    writable, url = engine_url
    build_schema(writable, layout)
    ro = open_engine(url)
    try:
        led = Ledger(ro, layout)
        assert led.counts() == (0, 0)
        assert list(led.iter_operations()) == []
        assert led.page().rows == []
        every = Filter(
            findings=[FindingKind.DUPLICATE_EFFECT],
            statuses=list(Status),
            kinds=["k"],
            key="k",
            intent="i",
            scope="s",
            since=ANCHOR - timedelta(days=1) if "created_at" in layout.times else None,
            until=ANCHOR if "created_at" in layout.times else None,
        )
        assert led.page(every).rows == []
        assert FindingEngine(led, ANCHOR).run() == []
        assert layout.name in {m.layout.name for m in detect(ro)}
    finally:
        ro.dispose()


@pytest.mark.parametrize("layout", [pytest.param(lay, id=lay.name) for lay in PRESETS])
def test_preset_refused_without_its_tables(layout, sqlite_db):
    writable, path = sqlite_db
    with writable.begin() as c:
        c.execute(text("CREATE TABLE unrelated (id INTEGER PRIMARY KEY)"))
    ro = open_engine(path)
    try:
        with pytest.raises(LayoutMismatch) as ei:
            Ledger(ro, layout)
    finally:
        ro.dispose()
    assert ei.value.exit_code == 4
    assert any(layout.table in m or (layout.schema or "\0") in m for m in ei.value.missing)


def test_every_preset_is_covered_and_described():
    names = [lay.name for lay in PRESETS]
    assert len(names) == len(set(names)) >= 20
    for lay in PRESETS:
        assert lay.title and lay.description and lay.source, lay.name
