"""Graphile Worker (PostgreSQL only) on fixtures built in its own schema: planted incidents are found with
the right kind and key, clean look-alikes report nothing, the rows 'replace' leaves behind are read by
their own rules, and detection tells v0.16+ (``_private_jobs``) from the older ``jobs`` table.

DDL written from graphile/worker's migrations: sql/000011.sql (the table since v0.14: task_id,
job_queue_id, smallint attempts, the generated ``is_available``) and sql/000016.sql (renamed to
``_private_jobs``); the pre-v0.14 shape from sql/000001.sql and sql/000003.sql (task_identifier,
queue_name, key, locked_at). The v0.16 columns were compared with the schema graphile-worker 0.16 itself
installs (``graphile-worker --schema-only``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Computed,
    DateTime,
    Identity,
    Integer,
    MetaData,
    SmallInteger,
    Table,
    Text,
    bindparam,
    create_engine,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

from idemview.domain.filters import Filter
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.detect import detect
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR, _clear
from tests.ledgers import load, scan
from tests.presets.systems import SYSTEM_SCHEMAS

NOW = ANCHOR
H = timedelta(hours=1)
M = timedelta(minutes=1)
SCHEMA = "graphile_worker"


@pytest.fixture
def pg(request):
    url = request.getfixturevalue("pg_url")
    eng = create_engine(url)
    with eng.begin() as c:
        for other in SYSTEM_SCHEMAS:  # another system's tables left by an earlier test in this database
            c.execute(text(f'DROP SCHEMA IF EXISTS "{other}" CASCADE'))
        c.execute(text(f"CREATE SCHEMA {SCHEMA}"))
    _clear(eng)
    yield eng, url
    with eng.begin() as c:  # detection looks at every schema: leave none behind
        c.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
    eng.dispose()


def gw_md(legacy: bool = False, tasks: bool = True) -> MetaData:
    """``graphile_worker._private_jobs`` (v0.16+) with ``_private_tasks`` (``tasks``: the task names,
    sql/000011.sql), or ``graphile_worker.jobs`` as before v0.14 (``legacy``: task_identifier and
    queue_name on the row, int counters, no is_available)."""
    md = MetaData()
    if tasks and not legacy:
        Table(
            "_private_tasks",
            md,
            Column("id", Integer, Identity(always=True), primary_key=True),
            Column("identifier", Text, nullable=False, unique=True),
            CheckConstraint("length(identifier) <= 128", name="tasks_identifier_check"),
            schema=SCHEMA,
        )
    small = Integer if legacy else SmallInteger
    cols = [
        Column("id", BigInteger, Identity(always=True), primary_key=True),
        *(
            [Column("queue_name", Text), Column("task_identifier", Text, nullable=False)]
            if legacy
            else [Column("job_queue_id", Integer), Column("task_id", Integer, nullable=False)]
        ),
        Column("payload", JSON, nullable=False, server_default=text("'{}'::json")),
        Column("priority", small, nullable=False, server_default="0"),
        Column("run_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
        Column("attempts", small, nullable=False, server_default="0"),
        Column("max_attempts", small, nullable=False, server_default="25"),
        Column("last_error", Text),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
        Column("updated_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
        Column("key", Text, unique=True),
        Column("locked_at", DateTime(timezone=True)),
        Column("locked_by", Text),
        Column("revision", Integer, nullable=False, server_default="0"),
        Column("flags", JSONB),
    ]
    if not legacy:
        cols.append(
            Column(
                "is_available",
                Boolean,
                Computed("(locked_at IS NULL) AND (attempts < max_attempts)", persisted=True),
                nullable=False,
            )
        )
    Table(
        "jobs" if legacy else "_private_jobs",
        md,
        *cols,
        CheckConstraint("length(key) > 0 AND length(key) <= 512", name="jobs_key_check"),
        CheckConstraint("max_attempts >= 1", name="jobs_max_attempts_check"),
        schema=SCHEMA,
    )
    return md


def job(jid, created, *, key=None, attempts=0, max_attempts=25, locked=None, error=None, legacy=False, task=1):
    row = {
        "id": jid,
        "payload": {"orderId": jid},
        "attempts": attempts,
        "max_attempts": max_attempts,
        "last_error": error,
        "created_at": created,
        "updated_at": locked or created,
        "run_at": created,
        "key": key,
        "locked_at": locked,
        "locked_by": "worker-8f3a1c2d" if locked else None,
    }
    row.update({"task_identifier": TASKS[task]} if legacy else {"task_id": task})
    return row


#: ``_private_tasks`` rows (add_jobs inserts a task's identifier the first time a job names it)
TASKS = {1: "send_invoice", 2: "charge_card"}


def gw_load(writable, rows, legacy=False, tasks=True):
    md = gw_md(legacy, tasks)
    with writable.begin() as c:  # a schema without the tasks table (left by an earlier load)
        c.execute(text(f"DROP TABLE IF EXISTS {SCHEMA}._private_tasks"))
    load(writable, md, {})
    t = md.tables[f"{SCHEMA}.{'jobs' if legacy else '_private_jobs'}"]
    with writable.begin() as c:
        if tasks and not legacy:
            ins = text(f"INSERT INTO {SCHEMA}._private_tasks (id, identifier) OVERRIDING SYSTEM VALUE VALUES (:id, :n)")
            c.execute(ins, [{"id": i, "n": n} for i, n in TASKS.items()])
        for r in rows:
            # "generated always as identity": ids chosen by the fixture need OVERRIDING SYSTEM VALUE
            cols = ", ".join(f'"{k}"' for k in r)
            vals = ", ".join(f":{k}" for k in r)
            stmt = text(f'INSERT INTO {SCHEMA}."{t.name}" ({cols}) OVERRIDING SYSTEM VALUE VALUES ({vals})')
            c.execute(stmt.bindparams(*[bindparam(k, type_=t.c[k].type) for k in r]), r)


def clean(legacy=False):
    kw = {"legacy": legacy}
    return [
        job(1, NOW - M, key="order-1", **kw),  # queued under its job_key
        job(2, NOW - 20 * M, attempts=1, locked=NOW - 10 * M, **kw),  # running, lock fresh
        job(3, NOW - 2 * H, key="sync-7", attempts=2, error="ECONNRESET", **kw),  # waiting for a retry
        # 'replace' while locked: the running row lost its key and got attempts = max_attempts; the
        # new job took the key. It ran once: no retry storm, no failure.
        job(4, NOW - 30 * M, attempts=25, locked=NOW - 20 * M, **kw),
        job(5, NOW - 5 * M, key="order-9", **kw),
        # a job with its own higher limit, 4 attempts of 40, waiting: not failed
        job(6, NOW - H, attempts=4, max_attempts=40, error="timeout", **kw),
    ]


def planted(legacy=False):
    kw = {"legacy": legacy}
    return clean(legacy) + [
        job(10, NOW - 6 * H, attempts=1, locked=NOW - 5 * H, **kw),  # lock older than 4 h
        # retries exhausted against its own max_attempts (5 of 5): failed, not a storm (5 is not > 5)
        job(11, NOW - 3 * H, key="invoice-3", attempts=5, max_attempts=5, error="card declined", **kw),
        job(12, NOW - 4 * H, attempts=8, error="rate limited", task=2, **kw),  # 8 attempts of 25: a storm
        # a replaced row whose worker died: stuck, but its 25 is not a count of attempts
        job(13, NOW - 7 * H, attempts=25, locked=NOW - 6 * H, **kw),
    ]


PLANTED = {
    ("stuck_in_progress", "", "#10"),
    ("unresolved_failure", "", "invoice-3"),
    ("retry_storm", "", "#12"),
    ("stuck_in_progress", "", "#13"),
}


@pytest.mark.parametrize("legacy", [False, True], ids=["private_jobs", "jobs"])
def test_graphile_planted(pg, legacy):
    writable, url = pg
    gw_load(writable, planted(legacy), legacy)
    preset = "graphile-worker-jobs" if legacy else "graphile-worker"
    got, fs = scan(url, preset, NOW)
    assert got == PLANTED
    stuck = next(f for f in fs if f.key == "#10")
    assert stuck.evidence[0]["lock_expired_at"] == "2026-11-30T11:00:00Z"  # locked_at + 4 h
    storm = next(f for f in fs if f.kind.value == "retry_storm")
    assert "8" in storm.explanation


def test_graphile_task_names_from_private_tasks(pg):
    """v0.16 keeps the task's name in _private_tasks (task_id -> identifier): the kind is the name, and
    the task id itself where that table is not there (or holds no row for it)."""
    writable, url = pg
    for tasks, want in ((True, {"#10": "send_invoice", "#12": "charge_card"}), (False, {"#10": "1", "#12": "2"})):
        gw_load(writable, planted(), tasks=tasks)
        eng = open_engine(url)
        try:
            led = Ledger(eng, load_preset("graphile-worker"))
            kinds = {op.key: op.kind for op in led.iter_operations(now=NOW)}
            filtered = {op.key for op in led.page(flt=Filter(kinds=["charge_card"]), limit=50).rows}
        finally:
            eng.dispose()
        assert {k: kinds[k] for k in want} == want
        assert set(kinds.values()) == ({"send_invoice", "charge_card"} if tasks else {"1", "2"})
        assert filtered == ({"#12"} if tasks else set())


@pytest.mark.parametrize("legacy", [False, True], ids=["private_jobs", "jobs"])
def test_graphile_clean(pg, legacy):
    writable, url = pg
    gw_load(writable, clean(legacy), legacy)
    assert scan(url, "graphile-worker-jobs" if legacy else "graphile-worker", NOW)[0] == set()


def test_graphile_rows_read_by_their_own_rules(pg):
    """Status from the row's own max_attempts; a replaced running row has no attempt count; completed
    jobs are deleted, so a key's second success cannot be seen (said, not guessed)."""
    writable, url = pg
    gw_load(writable, planted())
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("graphile-worker"))
        ops = {op.key: op for op in led.iter_operations(now=NOW)}
        assert {k: (o.status.value, o.attempt_count) for k, o in ops.items()} == {
            "order-1": ("new", 0),
            "#2": ("in_progress", 1),
            "sync-7": ("new", 2),
            "#4": ("in_progress", None),  # 'replace' set 25 = max_attempts: the count is lost
            "order-9": ("new", 0),
            "#6": ("new", 4),  # 4 of its own 40
            "#10": ("in_progress", 1),
            "invoice-3": ("failed", 5),  # 5 of its own 5
            "#12": ("new", 8),
            "#13": ("in_progress", None),
        }
        assert ops["sync-7"].error is not None and ops["sync-7"].request is not None
        unsupported = {k.value for k in FindingEngine(led, NOW).unsupported()}
    finally:
        eng.dispose()
    # one row per key (UNIQUE key) and no attempts table: two successes of one key cannot be seen
    assert {"duplicate_effect", "expired_key"} <= unsupported


@pytest.mark.parametrize("legacy", [False, True], ids=["private_jobs", "jobs"])
def test_detect_picks_graphile(pg, legacy):
    writable, url = pg
    gw_load(writable, [], legacy)
    eng = open_engine(url)
    try:
        matches = detect(eng)
    finally:
        eng.dispose()
    want = "graphile-worker-jobs" if legacy else "graphile-worker"
    assert matches and matches[0].layout.name == want, [(m.layout.name, m.confidence) for m in matches]
    assert matches[0].layout.schema == SCHEMA
    assert matches[0].confidence > 0.9


def test_kind_lookup_round_trips_and_is_checked():
    """The lookup survives the layout editor's draft (TOML out, parsed back) and a malformed one is
    refused when parsed, naming the entry."""
    from idemview.layouts.draft import LayoutDraft
    from idemview.layouts.layout import LayoutError, parse_layout

    lay = load_preset("graphile-worker")
    again = LayoutDraft.from_layout(lay).to_layout()
    assert again.kind == lay.kind and again.kind.lookup.value == "identifier"
    base = '[layout]\nname = "x"\n[operations]\ntable = "jobs"\nkey = ["id"]\nstatus = "new"\n'
    for bad, says in (
        ('kind = { column = "task_id", lookup = { table = "tasks", column = "id" } }', "needs table, column"),
        (
            'kind = { column = "task_id", json_path = "$.a", lookup = { table = "t", column = "id", value = "n" } }',
            "plain",
        ),
    ):
        with pytest.raises(LayoutError, match=says):
            parse_layout(base.replace('status = "new"\n', f'status = "new"\n{bad}\n'))
    with pytest.raises(LayoutError, match="operations.kind only"):
        parse_layout(
            base
            + '[operations.fields]\neffect_ref = { column = "a", lookup = '  # noqa: ISC003 - one TOML line
            + '{ table = "t", column = "id", value = "n" } }\n'
        )
