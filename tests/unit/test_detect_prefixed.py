"""Detection with generic table names (issue #26's Laravel and Graphile ``jobs``): a table found only
by a prefixed name (``delayed_jobs`` ends in ``_jobs``) is a candidate only when it holds every column
the preset reads, so another system's ``*_jobs`` table is not called a Laravel queue."""

from __future__ import annotations

from sqlalchemy import create_engine

from idemview.ledger.detect import detect

DELAYED_JOB = (  # Rails Delayed::Job's table (no preset): attempts, queue, created_at, but no payload
    "CREATE TABLE delayed_jobs (id INTEGER PRIMARY KEY, priority INT, attempts INT, handler TEXT,"
    " last_error TEXT, run_at DATETIME, locked_at DATETIME, failed_at DATETIME, locked_by TEXT,"
    " queue TEXT, created_at DATETIME, updated_at DATETIME)"
)
LARAVEL_JOBS = (  # laravel/laravel create_jobs_table, under an application prefix
    "CREATE TABLE {name} (id INTEGER PRIMARY KEY AUTOINCREMENT, queue VARCHAR NOT NULL, payload TEXT NOT NULL,"
    " attempts INTEGER NOT NULL, reserved_at INTEGER, available_at INTEGER NOT NULL, created_at INTEGER NOT NULL)"
)


def _names(tmp_path, *ddl):
    eng = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        with eng.begin() as c:
            for d in ddl:
                c.exec_driver_sql(d)
        return [(m.layout.name, m.layout.table) for m in detect(eng)]
    finally:
        eng.dispose()


def test_another_systems_jobs_table_is_not_a_laravel_queue(tmp_path):
    assert _names(tmp_path, DELAYED_JOB) == []


def test_a_prefixed_complete_laravel_table_is_still_found(tmp_path):
    got = _names(tmp_path, LARAVEL_JOBS.format(name="shop_jobs"))
    assert got[0] == ("laravel-queue", "shop_jobs")


def test_an_exact_partial_jobs_table_is_still_a_candidate(tmp_path):
    # the exact name keeps today's rule (at least half the columns): reported with what is missing
    ddl = LARAVEL_JOBS.format(name="jobs").replace(" reserved_at INTEGER,", "")
    got = _names(tmp_path, ddl)
    assert ("laravel-queue", "jobs") in got
