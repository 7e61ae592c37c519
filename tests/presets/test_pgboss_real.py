"""pg-boss 10.4, 11 and 12 themselves write the ledger (tests/pgboss/plant.js, issue 26): a job whose worker
was SIGKILLed stays ``active`` with its own 3 s limit, and the ``pg-boss`` preset calls it stuck by that
limit, read per row: v10's ``expire_in`` is a PostgreSQL interval, v11's ``expire_seconds`` an integer;
v12 also keeps a heartbeat lease per job (``heartbeat_on`` + ``heartbeat_seconds``): a job whose worker
stopped beating is stuck when its own lease lapses, long before its active-time limit.
Clean look-alikes: active jobs under their own 1 h and the default 15 min limits, a throttled re-send
pg-boss refused, one singleton key sent twice without a slot (two intended runs), a job that failed once
and then completed. pg-boss is PostgreSQL-only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.detect import detect
from idemview.ledger.reader import Ledger
from tests.conftest import _unavailable
from tests.ledgers import scan
from tests.presets import pgboss_node
from tests.presets.test_planted_workflows_webhooks import pg  # noqa: F401 - fixture


def _plant(url, version):
    try:
        return pgboss_node.plant(url, version)
    except RuntimeError as e:
        if "Node.js and npm" in str(e) or "npm ci" in str(e):
            _unavailable("pg-boss (Node.js)", e)
        raise


@pytest.mark.parametrize("version", ["10", "11", "12"])
def test_pgboss_itself_killed_worker_is_stuck_by_its_own_limit(pg, version):  # noqa: F811 - the fixture
    writable, url = pg
    ids = _plant(url, version)
    assert ids["throttled-refused"] == [None]  # pg-boss refused the same key in the same slot
    assert ids["working"] == ids["killed"]
    killed, failed = ids["killed"][0], ids["failed"][0]
    with writable.connect() as c:
        limit_col = "expire_in" if version == "10" else "expire_seconds"
        hb = "heartbeat_on" if version == "12" else "NULL AS heartbeat_on"
        q = text(f"SELECT id, state, started_on, {limit_col} AS lim, {hb} FROM pgboss.job")
        rows = {str(r.id): r for r in c.execute(q)}
        assert {r.state for r in rows.values()} == {"created", "active", "completed", "failed"}
    assert rows[killed].state == "active"
    assert rows[killed].lim == (timedelta(seconds=3) if version == "10" else 3)
    started = rows[killed].started_on

    eng = open_engine(url)
    try:
        assert detect(eng)[0].layout.name == "pg-boss"
        led = Ledger(eng, load_preset("pg-boss"))
        ops = {op.key: op for op in led.iter_operations(now=started)}
    finally:
        eng.dispose()
    # each active job's lock ends at its own started_on + its own limit: 3 s, 1 h, the default 15 min
    # (derived times are kept to the millisecond: times.from_epoch)
    ends = {
        name: round((ops[f"#{ids[name][0]}"].lock_expires_at - rows[ids[name][0]].started_on).total_seconds(), 2)
        for name in ("killed", "active-1h", "active-default")
    }
    assert ends == {"killed": 3, "active-1h": 3600, "active-default": 900}
    if version == "12":  # the heartbeat lease ends first: heartbeat_on + its own 10 s, 600 s
        hb_ends = {
            name: round((ops[f"#{ids[name][0]}"].lock_expires_at - rows[ids[name][0]].heartbeat_on).total_seconds(), 2)
            for name in ("heartbeat-lapsed", "heartbeat-live")
        }
        assert hb_ends == {"heartbeat-lapsed": 10, "heartbeat-live": 600}
    attempts = {
        name: ops[f"#{ids[name][0]}"].attempt_count for name in ("completed", "failed", "retried-ok", "created")
    }
    assert attempts == {"completed": 1, "failed": 3, "retried-ok": 2, "created": None}
    # one singleton key without a slot, sent twice: two operations (intended runs), not a duplicate
    assert {f"#{i}" for i in ids["same-key-no-slot"]} <= set(ops)

    # five minutes after the kill: only the killed job is stuck (900 s for every job would miss it)
    got, fs = scan(url, "pg-boss", started + timedelta(minutes=5))
    lapsed = {("stuck_in_progress", "charge-card", f"#{i}") for i in ids.get("heartbeat-lapsed", [])}
    assert (
        got
        == {
            ("stuck_in_progress", "charge-card", f"#{killed}"),
            ("unresolved_failure", "charge-card", f"#{failed}"),
        }
        | lapsed
    )
    stuck = next(f for f in fs if f.kind.value == "stuck_in_progress" and f.key == f"#{killed}")
    lock_end = datetime.fromisoformat(stuck.evidence[0]["lock_expired_at"].replace("Z", "+00:00"))
    assert abs(lock_end - (started + timedelta(seconds=3))) <= timedelta(milliseconds=1)
    # twenty minutes after: the default-limit job too, the one under its own hour not
    got, _ = scan(url, "pg-boss", started + timedelta(minutes=20))
    stuck_keys = {k for kind, _, k in got if kind == "stuck_in_progress"}
    beats = {f"#{i}" for name in ("heartbeat-lapsed", "heartbeat-live") for i in ids.get(name, [])}
    assert stuck_keys == {f"#{killed}", f"#{ids['active-default'][0]}"} | beats


def test_pgboss_v10_interval_limit_of_another_shape(pg):  # noqa: F811 - the fixture
    """A variant: v10 rows whose expire_in intervals are written in other units (days, a fraction of a
    second, minutes and seconds), by pg-boss 10.4's schema (the script creates it), read as seconds."""
    writable, url = pg
    _plant(url, "10")
    now = datetime.now(UTC) + timedelta(minutes=1)  # the killed job (3 s) is then stuck too
    with writable.begin() as c:
        c.execute(
            text(
                "UPDATE pgboss.job SET state = 'active', started_on = :t, expire_in = CAST(:i AS interval)"
                " WHERE data->>'orderId' = :o"
            ),
            [
                {"t": now - timedelta(hours=30), "i": "1 day 2 hours", "o": "6"},  # 26 h: stuck 4 h ago
                {"t": now - timedelta(seconds=10), "i": "00:00:10.5", "o": "7"},  # 10.5 s: running
                {"t": now - timedelta(minutes=3), "i": "2 minutes 30 seconds", "o": "8"},  # stuck
            ],
        )
        jobs = {r.o: str(r.id) for r in c.execute(text("SELECT data->>'orderId' AS o, id FROM pgboss.job"))}
    got, _ = scan(url, "pg-boss", now)
    stuck = {k for kind, _, k in got if kind == "stuck_in_progress"}
    assert stuck == {f"#{jobs['6']}", f"#{jobs['8']}", f"#{jobs['9']}"}
