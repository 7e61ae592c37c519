"""Per-row limits and counters read as each system stores them (issue 26, "existing presets, tried with
the systems themselves"): pg-boss's own active-time limit per job (``expire_seconds``, the 900 s default
only where it is NULL), and Celery's ``retries`` as retries so far (attempts = retries + 1)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Column, Integer, MetaData, Table, Text

from idemview.layouts.layout import LayoutError, load_preset, parse_layout
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load, scan
from tests.presets.test_planted_stripe_powertools_celery import cel_row, celery_md
from tests.presets.test_planted_workflows_webhooks import boss_load, boss_row, pg  # noqa: F401 - fixture

NOW = ANCHOR
S = timedelta(seconds=1)
M = timedelta(minutes=1)
H = timedelta(hours=1)


def _boss(n, started, limit):
    r = boss_row(n, "charge-card", "active", started - S, started=started)
    r["expire_seconds"] = limit
    return r


def test_pgboss_reads_each_jobs_own_active_time_limit(pg):  # noqa: F811 - the fixture
    """Tried with pg-boss 10.4 on Node 20: a job whose worker was killed stays active past its own 3 s
    limit. It is stuck after 3 s, not after the 900 s default; a job with a 2 h limit an hour in is not."""
    writable, url = pg
    boss_load(
        writable,
        [
            _boss(1, NOW - M, 3),  # its own 3 s: stuck for 57 s
            _boss(2, NOW - H, 7200),  # 1 h into its own 2 h: running (900 s would call it stuck)
            _boss(3, NOW - 10 * M, 900),  # 10 min into 15: running
            _boss(4, NOW - 20 * M, 900),  # 20 min into 15: stuck
        ],
    )
    got, fs = scan(url, "pg-boss", NOW)
    assert got == {
        ("stuck_in_progress", "charge-card", "#0b8e4c9a-9a3e-4000-8000-000000000001"),
        ("stuck_in_progress", "charge-card", "#0b8e4c9a-9a3e-4000-8000-000000000004"),
    }
    ends = {f.key[-2:]: f.evidence[0]["lock_expired_at"] for f in fs}
    assert ends == {"01": "2026-11-30T11:59:03Z", "04": "2026-11-30T11:55:00Z"}
    # the operation shows the lock's end it was judged by
    eng = open_engine(url)
    try:
        ops = {op.key[-2:]: op for op in Ledger(eng, load_preset("pg-boss")).iter_operations(now=NOW)}
    finally:
        eng.dispose()
    assert ops["02"].lock_expires_at.isoformat() == "2026-11-30T13:00:00+00:00"
    # an explicit --lock-timeout is the user's word for every row, over the rows' own limits
    got, _ = scan(url, "pg-boss", NOW, lock_timeout_s=30 * 60)
    assert {k[-2:] for _, _, k in got} == {"02"}


def test_lock_timeout_column_falls_back_to_the_default_where_null(sqlite_db):
    writable, path = sqlite_db
    md = MetaData()
    Table(
        "leases",
        md,
        Column("id", Integer, primary_key=True),
        Column("key", Text),
        Column("state", Text),
        Column("locked_at", Text),
        Column("limit_s", Integer),
    )
    at = (NOW - 20 * M).isoformat()
    load(
        writable,
        md,
        {
            "leases": [
                {"id": 1, "key": "a", "state": "running", "locked_at": at, "limit_s": None},  # 600 s default
                {"id": 2, "key": "b", "state": "running", "locked_at": at, "limit_s": 3600},
            ]
        },
    )
    toml = """
[layout]
name = "leases"
[operations]
table = "leases"
row_id = "id"
key = "key"
status = { column = "state", map = { running = "in_progress" } }
times = { locked_at = { column = "locked_at", encoding = "iso_text" } }
[expiry]
lock_timeout_column = "limit_s"
lock_timeout_seconds = 600
"""
    from idemview.findings.engine import FindingEngine

    eng = open_engine(path)
    try:
        fs = FindingEngine(Ledger(eng, parse_layout(toml)), NOW).run()
    finally:
        eng.dispose()
    assert [(f.kind.value, f.key) for f in fs] == [("stuck_in_progress", "a")]
    try:
        parse_layout(toml.replace('times = { locked_at = { column = "locked_at", encoding = "iso_text" } }', ""))
    except LayoutError as e:
        assert "lock_timeout_column" in str(e)
    else:
        raise AssertionError("a lock_timeout_column without locked_at must be refused")


def test_celery_attempts_are_retries_plus_one(db):
    """Celery 5.7 with result_extended: a task retried 7 times ran 8 times (``retries`` = 7); the SQL
    preset said 7 and flagged a storm one attempt late. Changed deliberately: the counts in
    test_planted_stripe_powertools_celery (retries 2/3/9) now read 3/4/10 attempts."""
    writable, url = db
    rows = [
        cel_row(1, "t-once", "SUCCESS", NOW - H),
        cel_row(2, "t-eight", "SUCCESS", NOW - H, retries=7),
        cel_row(3, "t-five", "SUCCESS", NOW - H, retries=5),  # 6 attempts: over the threshold of 5
        cel_row(4, "t-four", "SUCCESS", NOW - H, retries=4),  # 5 attempts: not over it
        cel_row(5, "t-pending", "PENDING", NOW - H),  # never run: no attempt
    ]
    load(writable, celery_md(), {"celery_taskmeta": rows})
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("celery"))
        got = {op.key: op.attempt_count for op in led.iter_operations(now=NOW)}
    finally:
        eng.dispose()
    assert got == {"t-once": 1, "t-eight": 8, "t-five": 6, "t-four": 5, "t-pending": None}
    found, _ = scan(url, "celery", NOW)
    assert {k for kind, _, k in found if kind == "retry_storm"} == {"t-eight", "t-five"}


def test_layout_editor_keeps_the_new_layout_entries():
    """The layout editor's draft round-trips what these presets use: a per-row lock limit, ``all``
    groups and ``ge_column`` predicates (an edit must not silently drop them)."""
    from idemview.layouts.draft import LayoutDraft

    assert load_preset("pg-boss").lock_heartbeat is not None
    for name in ("pg-boss", "graphile-worker", "trigger-dev"):
        lay = load_preset(name)
        back = LayoutDraft.from_layout(lay).to_layout()
        assert back.lock_timeout_column == lay.lock_timeout_column, name
        assert back.lock_heartbeat == lay.lock_heartbeat, name
        assert back.fields["attempt_count"].unless == lay.fields["attempt_count"].unless, name
        assert [r.when for r in back.status.rules] == [r.when for r in lay.status.rules], name


def test_lock_timeout_column_list_names_optional_alternatives():
    """A list of per-row limit columns names one column per version (pg-boss v11+ expire_seconds, v10
    expire_in): each must be optional, since a table has only one of them."""
    base = """
[layout]
name = "jobs"
[operations]
table = "job"
row_id = "id"
key = "id"
optional = OPT
status = { column = "state", map = { active = "in_progress" } }
times = { locked_at = { column = "started_on", encoding = "datetime" } }
[expiry]
lock_timeout_column = ["expire_seconds", "expire_in"]
lock_timeout_seconds = 900
"""
    lay = parse_layout(base.replace("OPT", '["expire_seconds", "expire_in"]'))
    assert lay.lock_timeout_column == ["expire_seconds", "expire_in"]
    assert lay.without_columns({"expire_seconds"}).lock_timeout_column == ["expire_in"]
    assert lay.without_columns({"expire_seconds", "expire_in"}).lock_timeout_column is None
    try:
        parse_layout(base.replace("OPT", '["expire_seconds"]'))
    except LayoutError as e:
        assert "operations.optional" in str(e)
    else:
        raise AssertionError("a list with a column that is not optional must be refused")


def test_pgboss_heartbeat_lease_is_per_row_and_the_earlier_end_holds(pg):  # noqa: F811 - the fixture
    """pg-boss 12.12+ (src/plans.ts failJobsByHeartbeat): an active job is also failed once heartbeat_on +
    ITS OWN heartbeat_seconds passes. A variant of the real-ledger test: a job without heartbeat_seconds
    has no lease however old its heartbeat; where the active-time limit ends first, it holds."""
    writable, url = pg

    def hb(n, started, limit, beat, beat_s):
        r = _boss(n, started, limit)
        r["heartbeat_on"], r["heartbeat_seconds"] = beat, beat_s
        return r

    boss_load(
        writable,
        [
            hb(1, NOW - 10 * M, 3600, NOW - 2 * M, 60),  # last beat 2 min ago, 60 s lease: stuck
            hb(2, NOW - 10 * M, 3600, NOW - 30 * S, 60),  # beating: running
            hb(3, NOW - 10 * M, 3600, NOW - 9 * M, None),  # no lease: running (1 h limit)
            hb(4, NOW - 20 * M, 300, NOW - 30 * S, 600),  # beating, but 20 min into its own 5: stuck
        ],
    )
    got, fs = scan(url, "pg-boss", NOW)
    assert {k[-2:] for _, _, k in got} == {"01", "04"}
    ends = {f.key[-2:]: f.evidence[0]["lock_expired_at"] for f in fs}
    assert ends == {"01": "2026-11-30T11:59:00Z", "04": "2026-11-30T11:45:00Z"}
    # the user's --lock-timeout holds for every row, over both of the rows' own limits
    got, _ = scan(url, "pg-boss", NOW, lock_timeout_s=15 * 60)
    assert {k[-2:] for _, _, k in got} == {"04"}
