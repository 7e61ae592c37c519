"""Ledgers in each system's own schema, with the indexes the system creates, for the per-preset benchmark
(benchmarks/presets_bench.py). Rows are computed in SQL from a row number ``i`` (a recursive CTE on
SQLite, ``generate_series`` on PostgreSQL), so millions of rows take seconds.

- ``celery``: ``celery_taskmeta`` as Celery's SQLAlchemy result backend creates it
  (celery/backends/database/models.py: ``id`` primary key, ``task_id`` VARCHAR(155) UNIQUE, extended
  columns), plus an index on ``date_done`` (issue 11 describes the ledger with one). ~0.1 % FAILURE,
  ~0.2 % older than a day, ~0.05 % with retries > 5, ~0.05 % STARTED for 2 h (stuck).
- ``oban``: ``oban_jobs`` of Oban's migrations (PostgreSQL v12+: ``oban_job_state`` enum, ``errors
  jsonb[]``, the state/queue/priority/scheduled_at/id index and GIN indexes on ``args`` and ``meta``;
  SQLite (Oban's Lite engine, sqlite.ex): JSON as text, the same b-tree index). No unique index:
  OSS Oban checks uniqueness with a query. ~0.1 % discarded, ~0.05 % executing for 2 h, ~0.05 % with
  attempt > 5, ~0.1 % duplicate jobs (same worker + args completed twice within 60 s).
- ``stripe-style``: rocket-rides-atomic's ``idempotency_keys`` (PostgreSQL only, as the system):
  ``id`` BIGSERIAL, UNIQUE (user_id, idempotency_key). ~0.2 % older than 72 h, ~0.05 % locked and
  unfinished, ~0.1 % finished with a 4xx/5xx, ~0.05 % retried after expiry (last_run_at > 72 h after
  created_at).
- ``idemview``: the reference ledger of benchmarks/gen.py (operations + attempts).
"""

from __future__ import annotations

import os
import sqlite3
import time
from datetime import datetime, timezone

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

import gen

UTC = timezone.utc
ANCHOR = gen.ANCHOR
A = int(ANCHOR.timestamp())
VERSION = 3

#: Which engines each system runs on (stripe-style / rocket-rides is PostgreSQL only).
ENGINES = {
    "idemview": ("sqlite", "postgresql"),
    "celery": ("sqlite", "postgresql"),
    "oban": ("sqlite", "postgresql"),
    "stripe-style": ("postgresql",),
}


def _series(d: str, n: int) -> tuple[str, str]:
    if d == "sqlite":
        return f"WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {n}) ", "FROM s"
    return "", f"FROM generate_series(CAST(1 AS BIGINT), {n}) AS s(i)"


def _ts(d: str, e: str, aware=False) -> str:
    if d == "sqlite":
        return f"datetime({e}, 'unixepoch')"
    return f"to_timestamp({e})" if aware else f"(to_timestamp({e}) AT TIME ZONE 'UTC')"


def _hexid(d: str, i="i") -> str:
    """A uuid4-shaped id from ``i`` (hex groups from multiplicative hashes; ``i`` in the last group keeps
    it unique), like the ids Celery and rocket-rides clients generate."""
    parts = [
        (f"(({i} * 2654435761) % 4294967296)", 8),
        (f"(({i} * 40503) % 65536)", 4),
        (f"(16384 + ({i} * 2246822519) % 4096)", 4),
        (f"(32768 + ({i} * 3266489917) % 16384)", 4),
        (f"((({i} * 668265263) % 16777216) * 16777216 + {i})", 12),
    ]
    if d == "sqlite":
        return "printf('" + "-".join(f"%0{w}x" for _e, w in parts) + "', " + ", ".join(e for e, _w in parts) + ")"
    return " || '-' || ".join(f"lpad(to_hex({e}), {w}, '0')" for e, w in parts)


def _blob(d: str, expr: str) -> str:
    return f"CAST({expr} AS BLOB)" if d == "sqlite" else f"convert_to({expr}, 'UTF8')"


# ------------------------------------------------------------------------------------------ celery


def celery_ddl(d: str) -> list[str]:
    blob, ts = ("BLOB", "DATETIME") if d == "sqlite" else ("BYTEA", "TIMESTAMP WITHOUT TIME ZONE")
    return [
        f"""CREATE TABLE celery_taskmeta (
        id INTEGER NOT NULL PRIMARY KEY, task_id VARCHAR(155) UNIQUE, status VARCHAR(50), result {blob},
        date_done {ts}, traceback TEXT, name VARCHAR(155), args {blob}, kwargs {blob}, worker VARCHAR(155),
        retries INTEGER, queue VARCHAR(155))"""
    ]


def celery_fill(d: str, n: int) -> list[str]:
    pre, frm = _series(d, n)
    m = "(i % 10000)"
    status = f"(CASE WHEN {m} < 10 THEN 'FAILURE' WHEN {m} < 15 THEN 'STARTED' ELSE 'SUCCESS' END)"
    off = (
        f"(CASE WHEN {m} BETWEEN 10 AND 14 THEN 7200 + i % 600 WHEN i % 500 = 7 THEN 90000 + i % 3600 "
        f"ELSE 60 + (i * 7919) % 80000 END)"
    )
    tb = (
        '\'Traceback (most recent call last):\n  File "tasks.py", line 12, in charge\n'
        "ValueError: cannot reach postgres://app:hunter2@db.internal:5432/payments for order ' || i"
    )
    kw = _blob(d, """'{"order": ' || i || ', "email": "user' || i || '@example.com"}'""")
    res, empty = _blob(d, "'result-' || i"), _blob(d, "'[]'")
    return [
        pre
        + f"""INSERT INTO celery_taskmeta (id, task_id, status, result, date_done, traceback, name, args,
        kwargs, worker, retries, queue)
        SELECT i, {_hexid(d)}, {status}, {res}, {_ts(d, f"{A} - {off}")},
               (CASE WHEN {m} < 10 THEN {tb} END), 'billing.tasks.charge', {empty},
               {kw},
               'celery@w' || (i % 8), (CASE WHEN i % 2000 = 3 THEN 7 ELSE i % 3 END), 'billing' """
        + frm
    ]


CELERY_INDEXES = ["CREATE INDEX ix_celery_taskmeta_date_done ON celery_taskmeta (date_done)"]


# -------------------------------------------------------------------------------------------- oban

OBAN_STATES = ("available", "suspended", "scheduled", "executing", "retryable", "completed", "discarded", "cancelled")


def oban_ddl(d: str) -> list[str]:
    if d == "sqlite":
        return [
            """CREATE TABLE oban_jobs (
            id INTEGER PRIMARY KEY, state TEXT NOT NULL DEFAULT 'available', queue TEXT NOT NULL DEFAULT 'default',
            worker TEXT NOT NULL, args JSON NOT NULL DEFAULT '{}', meta JSON NOT NULL DEFAULT '{}',
            tags JSON NOT NULL DEFAULT '[]', errors JSON NOT NULL DEFAULT '[]', attempt INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL DEFAULT 20, priority INTEGER NOT NULL DEFAULT 0,
            inserted_at TEXT NOT NULL, scheduled_at TEXT NOT NULL, attempted_at TEXT, attempted_by JSON,
            cancelled_at TEXT, completed_at TEXT, discarded_at TEXT)"""
        ]
    states = ", ".join(f"'{s}'" for s in OBAN_STATES)
    return [
        "DROP TYPE IF EXISTS oban_job_state CASCADE",
        f"CREATE TYPE oban_job_state AS ENUM ({states})",
        """CREATE TABLE oban_jobs (
            id BIGSERIAL PRIMARY KEY, state oban_job_state NOT NULL DEFAULT 'available',
            queue TEXT NOT NULL DEFAULT 'default', worker TEXT NOT NULL, args JSONB NOT NULL DEFAULT '{}',
            errors JSONB[] NOT NULL DEFAULT ARRAY[]::jsonb[], attempt INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL DEFAULT 20,
            inserted_at TIMESTAMP WITHOUT TIME ZONE NOT NULL DEFAULT timezone('UTC', now()),
            scheduled_at TIMESTAMP WITHOUT TIME ZONE NOT NULL DEFAULT timezone('UTC', now()),
            attempted_at TIMESTAMP WITHOUT TIME ZONE, completed_at TIMESTAMP WITHOUT TIME ZONE,
            attempted_by TEXT[], discarded_at TIMESTAMP WITHOUT TIME ZONE, priority INTEGER NOT NULL DEFAULT 0,
            tags VARCHAR(255)[] DEFAULT ARRAY[]::varchar[], meta JSONB DEFAULT '{}',
            cancelled_at TIMESTAMP WITHOUT TIME ZONE)""",
    ]


def oban_fill(d: str, n: int) -> list[str]:
    pre, frm = _series(d, n)
    m = "(i % 10000)"
    # m = 22, 24 .. 30: same worker + args as job i - 1, inserted 20 s later, both completed (a duplicate job)
    state = (
        f"(CASE WHEN {m} < 10 THEN 'discarded' WHEN {m} < 15 THEN 'executing' "
        f"WHEN {m} < 20 THEN 'retryable' ELSE 'completed' END)"
    )
    dup = f"{m} IN (22, 24, 26, 28, 30)"
    src = f"(CASE WHEN {dup} THEN i - 1 ELSE i END)"
    off = f"(CASE WHEN {dup} THEN 60 + ((i - 1) * 7919) % 80000 - 20 ELSE 60 + (i * 7919) % 80000 END)"
    off_att = f"(CASE WHEN {m} BETWEEN 10 AND 14 THEN 7200 + i % 600 ELSE {off} - 5 END)"
    attempt = f"(CASE WHEN i % 2000 = 3 THEN 7 WHEN {m} < 10 THEN 3 ELSE 1 END)"
    nerr = f"(CASE WHEN i % 2000 = 3 THEN 6 WHEN {m} < 10 THEN 3 ELSE 0 END)"
    worker = (
        "'MyApp.Workers.' || (CASE (" + src + " % 4) WHEN 0 THEN 'Charge' WHEN 1 THEN 'Mailer' "
        "WHEN 2 THEN 'Sync' ELSE 'Webhook' END)"
    )
    args_txt = f"'{{\"order_id\": ' || {src} || ', \"email\": \"user' || {src} || '@example.com\"}}'"
    err = "'** (RuntimeError) gateway timeout calling https://api.example.com/?api_key=sk_live_' || i"
    at = lambda k: (
        _ts(d, f"{A} - {off} + {k} * 10").replace("datetime(", "strftime('%Y-%m-%dT%H:%M:%SZ', ")
        if d == "sqlite"
        else f"to_char(to_timestamp({A} - {off} + {k} * 10) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
    )
    if d == "sqlite":
        one = lambda k: f"json_object('attempt', {k}, 'at', {at(k)}, 'error', {err})"  # noqa: E731
        errors = (
            f"(CASE {nerr} WHEN 0 THEN '[]' WHEN 3 THEN json_array({one(1)}, {one(2)}, {one(3)}) "
            f"ELSE json_array({one(1)}, {one(2)}, {one(3)}, {one(4)}, {one(5)}, {one(6)}) END)"
        )
        args = args_txt
        ts = lambda e: f"strftime('%Y-%m-%d %H:%M:%f', {e}, 'unixepoch')"  # noqa: E731
    else:
        one = lambda k: f"jsonb_build_object('attempt', {k}, 'at', {at(k)}, 'error', {err})"  # noqa: E731
        errors = (
            f"(CASE {nerr} WHEN 0 THEN ARRAY[]::jsonb[] WHEN 3 THEN ARRAY[{one(1)}, {one(2)}, {one(3)}] "
            f"ELSE ARRAY[{one(1)}, {one(2)}, {one(3)}, {one(4)}, {one(5)}, {one(6)}] END)"
        )
        args = f"CAST({args_txt} AS jsonb)"
        ts = lambda e: _ts(d, e)  # noqa: E731
    state_v = state if d == "sqlite" else f"CAST({state} AS oban_job_state)"
    return [
        pre
        + f"""INSERT INTO oban_jobs (id, state, queue, worker, args, errors, attempt, max_attempts,
        inserted_at, scheduled_at, attempted_at, completed_at, discarded_at)
        SELECT i, {state_v}, 'default', {worker}, {args}, {errors}, {attempt},
               (CASE WHEN {m} < 10 THEN 3 ELSE 20 END),
               {ts(f"{A} - {off}")}, {ts(f"{A} - {off}")}, {ts(f"{A} - {off_att}")},
               (CASE WHEN {m} >= 20 THEN {ts(f"{A} - {off} + 1")} END),
               (CASE WHEN {m} < 10 THEN {ts(f"{A} - {off} + 40")} END) """
        + frm
    ]


def oban_indexes(d: str) -> list[str]:
    out = [
        "CREATE INDEX oban_jobs_state_queue_priority_scheduled_at_id_index "
        "ON oban_jobs (state, queue, priority, scheduled_at, id)"
    ]
    if d == "postgresql":
        out += [
            "CREATE INDEX oban_jobs_args_index ON oban_jobs USING gin (args)",
            "CREATE INDEX oban_jobs_meta_index ON oban_jobs USING gin (meta)",
        ]
    return out


# ------------------------------------------------------------------------------------ stripe-style


def stripe_ddl(d: str) -> list[str]:
    return [
        """CREATE TABLE idempotency_keys (
        id BIGSERIAL PRIMARY KEY, created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        idempotency_key TEXT NOT NULL CHECK (char_length(idempotency_key) <= 100),
        last_run_at TIMESTAMPTZ NOT NULL DEFAULT now(), locked_at TIMESTAMPTZ DEFAULT now(),
        request_method TEXT NOT NULL CHECK (char_length(request_method) <= 10),
        request_params JSONB NOT NULL, request_path TEXT NOT NULL CHECK (char_length(request_path) <= 100),
        response_code INT NULL, response_body JSONB NULL,
        recovery_point TEXT NOT NULL CHECK (char_length(recovery_point) <= 50), user_id BIGINT NOT NULL)"""
    ]


def stripe_fill(d: str, n: int) -> list[str]:
    pre, frm = _series(d, n)
    m = "(i % 10000)"
    off = f"(CASE WHEN i % 500 = 7 THEN 260000 + i % 3600 WHEN {m} BETWEEN 30 AND 34 THEN 270000 ELSE 60 + (i * 7919) % 250000 END)"
    last = f"(CASE WHEN {m} BETWEEN 30 AND 34 THEN {A} - 600 WHEN {m} BETWEEN 10 AND 14 THEN {A} - 3600 ELSE {A} - {off} + 2 END)"
    point = f"(CASE WHEN {m} BETWEEN 10 AND 14 THEN 'ride_created' ELSE 'finished' END)"
    code = f"(CASE WHEN {m} < 10 THEN 402 WHEN {m} BETWEEN 10 AND 14 THEN NULL ELSE 200 END)"
    locked = f"(CASE WHEN {m} BETWEEN 10 AND 14 THEN {_ts(d, f'{A} - 3600', True)} END)"
    return [
        pre
        + f"""INSERT INTO idempotency_keys (id, created_at, idempotency_key, last_run_at, locked_at,
        request_method, request_params, request_path, response_code, response_body, recovery_point, user_id)
        SELECT i, {_ts(d, f"{A} - {off}", True)}, {_hexid(d)}, {_ts(d, last, True)}, {locked}, 'POST',
               CAST('{{"amount": ' || (i % 5000) || ', "email": "rider' || i || '@example.com"}}' AS jsonb),
               '/rides', {code},
               (CASE WHEN {code} IS NOT NULL THEN CAST('{{"id": "ch_' || i || '"}}' AS jsonb) END),
               {point}, 1 + i % 50000 """
        + frm
    ]


STRIPE_INDEXES = [
    "CREATE UNIQUE INDEX idempotency_keys_user_id_idempotency_key ON idempotency_keys (user_id, idempotency_key)"
]


SPECS = {
    "celery": (celery_ddl, celery_fill, lambda d: CELERY_INDEXES, "celery_taskmeta"),
    "oban": (oban_ddl, oban_fill, oban_indexes, "oban_jobs"),
    "stripe-style": (stripe_ddl, stripe_fill, lambda d: STRIPE_INDEXES, "idempotency_keys"),
}


# ------------------------------------------------------------------------------------------- build


def cache_dir() -> str:
    """Generated ledgers live outside the repository (``IDEMVIEW_BENCH_CACHE``, default
    ``~/.cache/idemview-bench``)."""
    d = os.environ.get("IDEMVIEW_BENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "idemview-bench")
    os.makedirs(d, exist_ok=True)
    return d


def pg_db(preset: str, n: int) -> str:
    return f"idemview_bench_{preset.replace('-', '_')}_{n}"


def sqlite_path(preset: str, n: int) -> str:
    return os.path.join(cache_dir(), f"{preset}_{n}.db")


def _sig(preset: str, n: int) -> str:
    return f"presets v{VERSION} {preset} n={n}" if preset != "idemview" else gen._signature(n)


def ensure(engine: str, preset: str, n: int, admin_url: str, reuse: bool = True, log=print) -> tuple[str, float]:
    """(URL, seconds spent generating; 0 when reused) of the ``preset`` ledger with ``n`` rows."""
    if preset == "idemview":
        if engine == "sqlite":
            p = sqlite_path(preset, n)
            return p, gen.generate_sqlite(p, n, reuse, log=log)
        db = pg_db(preset, n)
        s = gen.generate_postgresql(admin_url, db, n, reuse, log=log)
        return make_url(admin_url).set(database=db).render_as_string(hide_password=False), s
    ddl, fill, idx, _table = SPECS[preset]
    sig = _sig(preset, n)
    t0 = time.perf_counter()
    if engine == "sqlite":
        p = sqlite_path(preset, n)
        if reuse and os.path.exists(p):
            c = sqlite3.connect(p)
            try:
                got = c.execute("SELECT signature FROM idemview_bench_meta").fetchone()[0]
            except sqlite3.Error:
                got = None
            c.close()
            if got == sig:
                return p, 0.0
        for suffix in ("", "-journal", "-wal", "-shm"):
            if os.path.exists(p + suffix):
                os.unlink(p + suffix)
        c = sqlite3.connect(p, isolation_level=None)
        c.execute("PRAGMA journal_mode=OFF")
        c.execute("PRAGMA synchronous=OFF")
        c.execute("PRAGMA cache_size=-1000000")
        c.execute("BEGIN")
        for s in ddl("sqlite") + fill("sqlite", n):
            c.execute(s)
        c.execute("COMMIT")
        for s in idx("sqlite"):
            c.execute(s)
        c.execute("ANALYZE")
        c.execute("CREATE TABLE idemview_bench_meta (signature TEXT)")
        c.execute("INSERT INTO idemview_bench_meta VALUES (?)", (sig,))
        c.close()
        log(f"  generated sqlite {preset} {n:,} in {time.perf_counter() - t0:.1f} s")
        return p, time.perf_counter() - t0
    db = pg_db(preset, n)
    url = make_url(admin_url).set(database=db)
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        exists = c.execute(text("SELECT 1 FROM pg_database WHERE datname = :d"), {"d": db}).scalar()
    if exists and reuse:
        e = create_engine(url)
        try:
            with e.connect() as c:
                got = c.execute(text("SELECT signature FROM idemview_bench_meta")).scalar()
        except Exception:  # noqa: BLE001
            got = None
        e.dispose()
        if got == sig:
            admin.dispose()
            return url.render_as_string(hide_password=False), 0.0
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        c.execute(text(f'CREATE DATABASE "{db}"'))
    admin.dispose()
    e = create_engine(url)
    with e.begin() as c:
        c.execute(text("SET LOCAL synchronous_commit = off"))
        for s in ddl("postgresql") + fill("postgresql", n):
            c.exec_driver_sql(s.replace("%", "%%"))
    with e.begin() as c:
        c.execute(text("SET LOCAL maintenance_work_mem = '1GB'"))
        for s in idx("postgresql"):
            c.exec_driver_sql(s)
    with e.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.exec_driver_sql("VACUUM ANALYZE")
    with e.begin() as c:
        c.exec_driver_sql("CREATE TABLE idemview_bench_meta (signature TEXT)")
        c.execute(text("INSERT INTO idemview_bench_meta VALUES (:s)"), {"s": sig})
    e.dispose()
    log(f"  generated postgresql {preset} {n:,} in {time.perf_counter() - t0:.1f} s")
    return url.render_as_string(hide_password=False), time.perf_counter() - t0


def now_iso() -> str:
    return ANCHOR.isoformat().replace("+00:00", "Z")


def anchor_naive(offset_s: float = 0) -> str:
    return datetime.fromtimestamp(A - offset_s, UTC).strftime("%Y-%m-%d %H:%M:%S")
