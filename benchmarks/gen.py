"""Bulk generator of reference-layout ledgers (preset ``idemview``) for the benchmark.

Rows are computed inside the database from a row number ``i`` (SQLite: a recursive CTE; PostgreSQL:
``generate_series``), so 3M operations and ~9M attempts take seconds to minutes, not hours. The same
``i`` gives the same row on both engines (pure integer arithmetic, whole-second UTC times).

Traffic: operation ``i`` has ``1 + i % 5`` attempts (3 on average; failures/time-outs then a success),
created in the 6 hours before the anchor; about 3 % are older than the 24 h dedup window (``i % 33 == 0``).
Incidents are planted at a known rate, by ``m = i % 1000``:

====  ===================  ==========================================================================
m     finding              how
====  ===================  ==========================================================================
1     duplicate_effect     attempts 1 and 2 both succeeded, with different effect references
2     replay_after_expiry  created ~50 h ago; attempt 3 started 1-2 h ago (after expiry), rejected
3     key_conflict         attempt 4 carries another request fingerprint
5     duplicate_intent     same intent reference as operation ``i - 1``, created 10 min after it
6     stuck_in_progress    status running, lock expired ~10 min-1 h ago
7     unresolved_failure   status failed, every attempt failed
8     retry_storm          8 attempts
====  ===================  ==========================================================================

plus ``expired_key`` for every old operation, and one row in 100,000 with no ``created_at``/``expires_at``
(damaged data). :func:`expected_counts` gives the exact number of findings of each kind for ``N``.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import datetime, timezone

from sqlalchemy import create_engine, text

from idemview.services.demo import reference_metadata

UTC = timezone.utc
ANCHOR = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
ANCHOR_E = int(ANCHOR.timestamp())
GEN_VERSION = 3
MAX_ATTEMPTS = 8

SCOPES = ("acme", "globex", "initech", "umbrella", "hooli", "stark")
KINDS = ("payment.capture", "refund.create", "email.send", "invoice.create", "webhook.deliver")
DSN_ERR = "connection reset by peer (postgres://app:hunter2@db.internal:5432/payments)"


def _case(expr: str, values) -> str:
    return "CASE " + expr + " " + " ".join(f"WHEN {k} THEN '{v}'" for k, v in enumerate(values)) + " END"


class _Sql:
    """Per-dialect SQL snippets over the integer ``i`` (and ``j`` for attempts)."""

    def __init__(self, dialect: str):
        self.d = dialect

    def ts(self, epoch_expr: str) -> str:
        if self.d == "sqlite":
            return f"datetime({epoch_expr}, 'unixepoch')"
        return f"(to_timestamp({epoch_expr}) AT TIME ZONE 'UTC')"

    def key(self, i="i") -> str:
        x = f"(({i} * 2654435761) % 4294967296)"
        if self.d == "sqlite":
            return f"printf('%08x-%d', {x}, {i})"
        return f"(lpad(to_hex({x}), 8, '0') || '-' || {i})"

    def scope(self, i="i"):
        # operation i (m = 5) shares the scope of i - 1: same intent in the same scope
        return _case(f"((CASE WHEN {self.m(i)} = 5 THEN {i} - 1 ELSE {i} END) % 6)", SCOPES)

    # ---- per-operation quantities (the attempts insert recomputes them from i)
    @staticmethod
    def m(i="i"):
        return f"({i} % 1000)"

    def old(self, i="i"):
        m = self.m(i)
        return f"(({i} % 33 = 0 AND {m} NOT IN (4, 5, 6, 7)) OR {m} = 2)"

    def n(self, i="i"):
        m = self.m(i)
        return f"(CASE WHEN {m} = 8 THEN 8 WHEN {m} = 6 THEN 1 ELSE 1 + {i} % 5 END)"

    def succ(self, i="i"):
        """Index of the attempt that succeeded last (0: none)."""
        m = self.m(i)
        return f"(CASE WHEN {m} = 2 THEN 2 WHEN {m} = 3 THEN 3 WHEN {m} IN (6, 7) THEN 0 ELSE {self.n(i)} END)"

    def off(self, i="i"):
        """Seconds before the anchor at which operation i was created."""
        m = self.m(i)
        return (
            f"(CASE WHEN {m} = 2 THEN 180000 + {i} % 3600 "
            f"WHEN {m} = 4 THEN 1200 + ({i} * 7919) % 18000 "
            f"WHEN {m} = 5 THEN 600 + (({i} - 1) * 7919) % 18000 "
            f"WHEN {m} = 6 THEN 600 + {i} % 3600 "
            f"WHEN {self.old(i)} THEN 90000 + ({i} * 7919) % 162000 "
            f"ELSE 60 + ({i} * 7919) % 21600 END)"
        )

    def created_e(self, i="i"):
        return f"(CASE WHEN {i} % 100000 = 99999 THEN NULL ELSE {ANCHOR_E} - {self.off(i)} END)"

    def series(self, n: int) -> tuple[str, str]:
        """(prefix, FROM clause) producing rows i = 1..n."""
        if self.d == "sqlite":
            return (f"WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {n}) ", "FROM s")
        return "", f"FROM generate_series(CAST(1 AS BIGINT), {n}) AS s(i)"


def ops_sql(dialect: str, n: int) -> str:
    q = _Sql(dialect)
    m, ce, nn, sc = q.m(), q.created_e(), q.n(), q.succ()
    status = f"(CASE WHEN {m} = 6 THEN 'running' WHEN {m} = 7 THEN 'failed' ELSE 'succeeded' END)"
    prefix, frm = q.series(n)
    eff = f"(CASE WHEN {sc} > 0 THEN 'ch_' || i || '_' || {sc} END)"
    body = (
        '\'{"customer": {"email": "user\' || i || \'@example.com"}, "card": '
        '{"number": "4242424242424242"}, "amount": \' || (i % 25000) || \'}\''
    )
    return (
        prefix + "INSERT INTO operations (id, scope, idempotency_key, kind, status, request_hash, intent_ref, "
        "effect_ref, attempt_count, created_at, updated_at, completed_at, locked_at, lock_expires_at, "
        "expires_at, request_body, response_body, error) "
        f"SELECT i, {q.scope()}, {q.key()}, {_case('i % 5', KINDS)}, {status}, "
        f"'fp' || i, 'ord_' || (CASE WHEN {m} = 5 THEN i - 1 ELSE i END), {eff}, {nn}, "
        f"{q.ts(ce)}, {q.ts(ce + ' + 60')}, "
        f"(CASE WHEN {sc} > 0 THEN {q.ts(ce + ' + 60')} END), "
        f"(CASE WHEN {m} = 6 THEN {q.ts(ce)} END), (CASE WHEN {m} = 6 THEN {q.ts(ce + ' + 300')} END), "
        f"{q.ts(ce + ' + 86400')}, {body}, "
        f'(CASE WHEN {sc} > 0 THEN \'{{"id": "\' || {eff} || \'", "status": "ok"}}\' END), '
        f"(CASE WHEN {m} = 7 THEN 'upstream 503 from provider' END) " + frm
    )


def attempts_sql(dialect: str, n: int) -> str:
    q = _Sql(dialect)
    m, ce, nn, sc = q.m(), q.created_e(), q.n(), q.succ()
    prefix, frm = q.series(n)
    if dialect == "sqlite":
        prefix = prefix.rstrip() + (f", j(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM j WHERE j < {MAX_ATTEMPTS}) ")
        frm = frm + " JOIN j ON j.j <= " + nn
    else:
        frm = frm + f" JOIN generate_series(CAST(1 AS BIGINT), {MAX_ATTEMPTS}) AS j(j) ON j.j <= " + nn
    outcome = (
        f"(CASE WHEN {m} = 6 THEN 'running' WHEN {m} = 7 THEN 'failed' "
        f"WHEN {m} = 2 AND j = 3 THEN 'rejected' WHEN {m} = 3 AND j = 4 THEN 'rejected' "
        f"WHEN {m} = 1 AND j = 1 THEN 'succeeded' WHEN j = {sc} THEN 'succeeded' "
        f"WHEN (i + j) % 4 = 0 THEN 'timed_out' ELSE 'failed' END)"
    )
    start = f"(CASE WHEN {m} = 2 AND j = 3 THEN {ANCHOR_E} - 3600 - i % 3600 ELSE {ce} + (j - 1) * 45 END)"
    return (
        prefix + "INSERT INTO attempts (id, scope, idempotency_key, attempt_no, started_at, finished_at, outcome, "
        "request_hash, effect_ref, worker, error) "
        f"SELECT (i - 1) * {MAX_ATTEMPTS} + j, {q.scope()}, {q.key()}, j, {q.ts(start)}, "
        f"(CASE WHEN {m} = 6 THEN NULL ELSE {q.ts(start + ' + 1 + (i + j) % 20')} END), o, "
        f"(CASE WHEN {m} = 3 AND j = 4 THEN 'fpX' || i ELSE 'fp' || i END), "
        f"(CASE WHEN o = 'succeeded' THEN 'ch_' || i || '_' || j END), 'worker-' || (1 + (i + j) % 6), "
        f"(CASE WHEN o = 'failed' AND (i + j) % 7 = 0 THEN '{DSN_ERR}' "
        f"WHEN o = 'failed' THEN 'upstream 503 from provider' "
        f"WHEN o = 'timed_out' THEN 'provider did not answer within 30 s' "
        f"WHEN o = 'rejected' AND {m} = 3 THEN '422 key reused with different parameters' END) "
        f"FROM (SELECT i, j, {outcome} AS o " + frm + ") x"
    )


def expected_counts(n: int) -> dict[str, int]:
    """Exact number of findings of each kind that :func:`generate` plants for ``n`` operations."""
    out = dict.fromkeys(
        (
            "duplicate_effect",
            "replay_after_expiry",
            "key_conflict",
            "duplicate_intent",
            "stuck_in_progress",
            "unresolved_failure",
            "retry_storm",
            "expired_key",
        ),
        0,
    )
    by_m = {
        1: "duplicate_effect",
        2: "replay_after_expiry",
        3: "key_conflict",
        5: "duplicate_intent",
        6: "stuck_in_progress",
        7: "unresolved_failure",
        8: "retry_storm",
    }
    for m, k in by_m.items():
        out[k] = (n - m) // 1000 + 1 if n >= m else 0
    if n < 5:
        out["duplicate_intent"] = 0
    for i in range(1, n + 1):
        m = i % 1000
        if i % 100000 == 99999:
            continue
        if (i % 33 == 0 and m not in (4, 5, 6, 7)) or m == 2:
            out["expired_key"] += 1
    return out


def _signature(n: int) -> str:
    return f"idemview-bench v{GEN_VERSION} n={n}"


def _meta_ok(conn_exec) -> str | None:
    try:
        return conn_exec("SELECT signature FROM idemview_bench_meta")
    except Exception:  # noqa: BLE001 - no table: not generated yet
        return None


def _ddl(engine):
    md = reference_metadata()
    indexes = sorted((i for t in md.tables.values() for i in t.indexes), key=lambda i: i.name)
    for t in md.tables.values():
        t.indexes.clear()
    md.drop_all(engine)
    md.create_all(engine)
    return indexes


def generate_sqlite(path: str, n: int, reuse: bool, log=print) -> float:
    """Write (or reuse) a SQLite ledger of ``n`` operations at ``path``; returns seconds spent."""
    import os

    if reuse and os.path.exists(path):
        c = sqlite3.connect(path)
        try:
            sig = _meta_ok(lambda s: c.execute(s).fetchone()[0])
        finally:
            c.close()
        if sig == _signature(n):
            return 0.0
    t0 = time.perf_counter()
    for suffix in ("", "-journal", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    eng = create_engine(f"sqlite:///{path}")
    indexes = _ddl(eng)
    eng.dispose()
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=OFF")
    c.execute("PRAGMA synchronous=OFF")
    c.execute("PRAGMA cache_size=-1000000")
    c.execute("BEGIN")
    c.execute(ops_sql("sqlite", n))
    c.execute(attempts_sql("sqlite", n))
    c.execute("COMMIT")
    log(f"  sqlite rows written in {time.perf_counter() - t0:.1f} s; indexing")
    eng = create_engine(f"sqlite:///{path}")
    for ix in indexes:
        ix.create(eng)
    eng.dispose()
    c.execute("ANALYZE")
    c.execute("CREATE TABLE idemview_bench_meta (signature TEXT)")
    c.execute("INSERT INTO idemview_bench_meta VALUES (?)", (_signature(n),))
    c.close()
    return time.perf_counter() - t0


def generate_postgresql(admin_url: str, db: str, n: int, reuse: bool, log=print) -> float:
    """Create (or reuse) database ``db`` holding a ledger of ``n`` operations; returns seconds spent."""
    from sqlalchemy.engine import make_url

    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        exists = c.execute(text("SELECT 1 FROM pg_database WHERE datname = :d"), {"d": db}).scalar()
    url = make_url(admin_url).set(database=db)
    if exists and reuse:
        eng = create_engine(url)
        with eng.connect() as c:
            sig = _meta_ok(lambda s: c.execute(text(s)).scalar())
        eng.dispose()
        if sig == _signature(n):
            admin.dispose()
            return 0.0
    t0 = time.perf_counter()
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        c.execute(text(f'CREATE DATABASE "{db}"'))
    admin.dispose()
    eng = create_engine(url)
    indexes = _ddl(eng)
    with eng.begin() as c:
        c.execute(text("SET LOCAL synchronous_commit = off"))
        c.execute(text(ops_sql("postgresql", n)))
        c.execute(text(attempts_sql("postgresql", n)))
    log(f"  postgresql rows written in {time.perf_counter() - t0:.1f} s; indexing")
    with eng.begin() as c:
        c.execute(text("SET LOCAL maintenance_work_mem = '1GB'"))
        for ix in indexes:
            ix.create(c)
    with eng.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text("VACUUM ANALYZE"))
    with eng.begin() as c:
        c.execute(text("CREATE TABLE idemview_bench_meta (signature TEXT)"))
        c.execute(text("INSERT INTO idemview_bench_meta VALUES (:s)"), {"s": _signature(n)})
    eng.dispose()
    return time.perf_counter() - t0
