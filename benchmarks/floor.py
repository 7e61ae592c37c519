"""The two baselines the benchmark measures idemview's findings against, for the reference layout only:

- the **floor**: the eight findings of DESIGN §5 hand-written as plain SQL for the reference schema
  (``operations`` + ``attempts``, statuses ``succeeded``/``failed``/``running``), run directly on the
  connection. This is what a competent engineer would type for this one schema; idemview's generic,
  layout-driven SQL should come close to it;
- the **naive way**: ``pandas.read_sql`` of both whole tables, then the eight findings in pandas.

Both return ``{kind: {(scope, key), ...}}`` for ``now`` so the benchmark can check that the engine finds
exactly the same operations.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import text

LOCK_TIMEOUT_S = 300
WINDOW_S = 86400
RETRY_THRESHOLD = 5


def floor_queries(dialect: str, now: datetime) -> dict[str, str]:
    """kind -> SQL returning (scope, idempotency_key) rows."""
    n = (
        now.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        if now.tzinfo is None
        else now.replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S")
    )
    lock_lim = (now.replace(tzinfo=None) - timedelta(seconds=LOCK_TIMEOUT_S)).strftime("%Y-%m-%d %H:%M:%S")
    if dialect == "sqlite":
        ts = lambda s: f"'{s}'"  # noqa: E731 - ISO text as written by the generator
        within = f"o2.created_at <= datetime(o1.created_at, '+{WINDOW_S} seconds')"
    else:
        ts = lambda s: f"TIMESTAMP '{s}'"  # noqa: E731
        within = f"o2.created_at <= o1.created_at + INTERVAL '{WINDOW_S} seconds'"
    return {
        "duplicate_effect": f"""
            SELECT scope, idempotency_key FROM operations WHERE status = 'succeeded'
              GROUP BY scope, idempotency_key HAVING count(*) >= 2
            UNION
            SELECT scope, idempotency_key FROM attempts WHERE outcome = 'succeeded'
              GROUP BY scope, idempotency_key HAVING count(*) >= 2
            UNION
            SELECT scope, idempotency_key FROM (
                SELECT scope, idempotency_key, effect_ref FROM operations WHERE effect_ref <> ''
                UNION ALL
                SELECT scope, idempotency_key, effect_ref FROM attempts WHERE effect_ref <> '') e
              GROUP BY scope, idempotency_key HAVING min(effect_ref) <> max(effect_ref)""",
        "replay_after_expiry": """
            SELECT DISTINCT a.scope, a.idempotency_key FROM attempts a
              JOIN operations o ON o.scope = a.scope AND o.idempotency_key = a.idempotency_key
             WHERE a.started_at > o.expires_at
            UNION
            SELECT DISTINCT o2.scope, o2.idempotency_key FROM operations o2
              JOIN operations o ON o.scope = o2.scope AND o.idempotency_key = o2.idempotency_key
                               AND o.id <> o2.id
             WHERE o2.created_at > o.expires_at""",
        "key_conflict": """
            SELECT scope, idempotency_key FROM (
                SELECT scope, idempotency_key, request_hash FROM operations WHERE request_hash <> ''
                UNION ALL
                SELECT scope, idempotency_key, request_hash FROM attempts WHERE request_hash <> '') f
              GROUP BY scope, idempotency_key HAVING min(request_hash) <> max(request_hash)""",
        "duplicate_intent": f"""
            SELECT DISTINCT o2.scope, o2.idempotency_key FROM operations o2
              JOIN operations o1 ON o1.scope = o2.scope AND o1.intent_ref = o2.intent_ref
                                AND o1.idempotency_key <> o2.idempotency_key
             WHERE o2.intent_ref <> '' AND o1.status = 'succeeded' AND o2.status = 'succeeded'
               AND (o1.created_at < o2.created_at
                    OR (o1.created_at = o2.created_at AND o1.idempotency_key < o2.idempotency_key))
               AND {within}""",
        "stuck_in_progress": f"""
            SELECT scope, idempotency_key FROM operations
             WHERE status = 'running'
               AND (lock_expires_at <= {ts(n)} OR locked_at <= {ts(lock_lim)})""",
        "unresolved_failure": """
            SELECT o.scope, o.idempotency_key FROM operations o
             WHERE o.status = 'failed' AND NOT EXISTS (
                SELECT 1 FROM operations o2
                 WHERE o2.status = 'succeeded' AND o2.scope = o.scope
                   AND o2.idempotency_key = o.idempotency_key
                   AND (o2.created_at >= o.created_at OR o2.created_at IS NULL
                        OR o.created_at IS NULL))
               AND NOT EXISTS (
                SELECT 1 FROM operations o2
                 WHERE o2.status = 'succeeded' AND o2.scope = o.scope
                   AND o.intent_ref <> '' AND o2.intent_ref = o.intent_ref
                   AND (o2.created_at >= o.created_at OR o2.created_at IS NULL
                        OR o.created_at IS NULL))""",
        "retry_storm": f"SELECT scope, idempotency_key FROM operations WHERE attempt_count > {RETRY_THRESHOLD}",
        "expired_key": f"SELECT scope, idempotency_key FROM operations WHERE expires_at <= {ts(n)}",
    }


def run_floor(conn, dialect: str, now: datetime) -> dict[str, set]:
    out = {}
    for kind, sql in floor_queries(dialect, now).items():
        out[kind] = {(r[0] or "", r[1]) for r in conn.execute(text(sql))}
    return out


def run_naive(engine, now: datetime) -> dict[str, set]:
    """The eight findings with pandas over the whole tables (read into memory)."""
    import pandas as pd

    ops = pd.read_sql("SELECT * FROM operations", engine)
    att = pd.read_sql("SELECT * FROM attempts", engine)
    for df, cols in ((ops, ("created_at", "expires_at", "locked_at", "lock_expires_at")), (att, ("started_at",))):
        for c in cols:
            df[c] = pd.to_datetime(df[c], format="ISO8601")
    now_ = pd.Timestamp(now.replace(tzinfo=None))
    K = ["scope", "idempotency_key"]

    def keys(df):
        return set(zip(df["scope"].fillna(""), df["idempotency_key"]))

    out = {}
    # duplicate_effect
    s1 = ops[ops.status == "succeeded"].groupby(K).size()
    s2 = att[att.outcome == "succeeded"].groupby(K).size()
    eff = pd.concat(
        [
            ops.loc[ops.effect_ref.fillna("") != "", K + ["effect_ref"]],
            att.loc[att.effect_ref.fillna("") != "", K + ["effect_ref"]],
        ]
    )
    s3 = eff.groupby(K)["effect_ref"].nunique()
    out["duplicate_effect"] = set(s1[s1 >= 2].index) | set(s2[s2 >= 2].index) | set(s3[s3 >= 2].index)
    # replay_after_expiry
    j = att[K + ["started_at"]].merge(ops[K + ["expires_at"]], on=K)
    r = keys(j[j.started_at > j.expires_at])
    j2 = ops[K + ["id", "created_at"]].merge(ops[K + ["id", "expires_at"]], on=K, suffixes=("", "_o"))
    r |= keys(j2[(j2.id != j2.id_o) & (j2.created_at > j2.expires_at)])
    out["replay_after_expiry"] = r
    # key_conflict
    fp = pd.concat(
        [
            ops.loc[ops.request_hash.fillna("") != "", K + ["request_hash"]],
            att.loc[att.request_hash.fillna("") != "", K + ["request_hash"]],
        ]
    )
    s = fp.groupby(K)["request_hash"].nunique()
    out["key_conflict"] = set(s[s >= 2].index)
    # duplicate_intent
    c = ops[(ops.status == "succeeded") & (ops.intent_ref.fillna("") != "")][K + ["intent_ref", "created_at"]]
    m = c.merge(c, on=["scope", "intent_ref"], suffixes=("_1", "_2"))
    m = m[m.idempotency_key_1 != m.idempotency_key_2]
    earlier = (m.created_at_1 < m.created_at_2) | (
        (m.created_at_1 == m.created_at_2) & (m.idempotency_key_1 < m.idempotency_key_2)
    )
    m = m[earlier & ((m.created_at_2 - m.created_at_1).dt.total_seconds() <= WINDOW_S)]
    out["duplicate_intent"] = set(zip(m.scope, m.idempotency_key_2))
    # stuck_in_progress
    st = ops[
        (ops.status == "running")
        & ((ops.lock_expires_at <= now_) | (ops.locked_at <= now_ - pd.Timedelta(seconds=LOCK_TIMEOUT_S)))
    ]
    out["stuck_in_progress"] = keys(st)
    # unresolved_failure
    f = ops[ops.status == "failed"][K + ["intent_ref", "created_at", "id"]]
    done = ops[ops.status == "succeeded"][K + ["intent_ref", "created_at"]]
    a = f.merge(done, on=K, suffixes=("", "_d"))
    b = f[f.intent_ref.fillna("") != ""].merge(done, on=["scope", "intent_ref"], suffixes=("", "_d"))
    resolved = set()
    for x in (a, b):
        later = (x.created_at_d >= x.created_at) | x.created_at_d.isna() | x.created_at.isna()
        resolved |= set(x[later].id)
    out["unresolved_failure"] = keys(f[~f.id.isin(resolved)])
    out["retry_storm"] = keys(ops[ops.attempt_count > RETRY_THRESHOLD])
    out["expired_key"] = keys(ops[ops.expires_at <= now_])
    return out
