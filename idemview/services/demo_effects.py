"""The demo's effect records: a payment provider's charges in a second SQLite file (issue #16).

:func:`write_demo_effects` reads a demo ledger written by :func:`idemview.services.demo.write_demo`
and writes ``charges`` — what the provider recorded, which is the truth an incident asks about — into
another SQLite file, plus a layout file (preset ``idemview`` with an ``[effects]`` section pointing at
it) beside the ledger. Every completed operation record of a charging kind has one charge; on top, with
the same seed the same rows:

- **hidden successes**: failed, stuck and timed-out operations whose charge went through anyway;
- **double charges**: completed operations charged twice;
- **orphans**: charges carrying an idempotency key the ledger never recorded.

What was planted is kept in the effects file's ``idemview_demo_planted`` table (kind, scope, key), which
the layout does not read, so a person or a test can check a scan against it.
"""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

from idemview.ledger.sqlite_functions import connect_sqlite

CHARGING = ("payment.capture", "refund.create")

EFFECTS_SECTION = """
[effects]
# The demo payment provider's records (a second SQLite file): every charge carries the Idempotency-Key
# of the request that made it, so charges link to operations by key.
table = "charges"
connection = "{connection}"
link = {{ effect = "idempotency_key", operation = "key" }}
id = "id"
reference = "charge_id"
time = {{ column = "created_at", encoding = "iso_text" }}
show = ["amount", "currency", "status", "customer_email"]
"""

_SCHEMA = """
CREATE TABLE charges (
    id INTEGER PRIMARY KEY,
    charge_id TEXT NOT NULL UNIQUE,
    idempotency_key TEXT,
    amount INTEGER NOT NULL,
    currency TEXT NOT NULL,
    status TEXT NOT NULL,
    customer_email TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX ix_charges_idempotency_key ON charges (idempotency_key);
CREATE TABLE idemview_demo_planted (kind TEXT, scope TEXT, idempotency_key TEXT,
                                    PRIMARY KEY (kind, scope, idempotency_key));
"""


def effects_path_for(ledger_path: str | Path) -> Path:
    """``demo.db`` → ``demo-effects.db`` (beside the ledger)."""
    p = Path(ledger_path)
    return p.with_name(p.stem + "-effects.db")


def layout_path_for(ledger_path: str | Path) -> Path:
    """``demo.db`` → ``demo-layout.toml`` (beside the ledger): ``idemview scan demo.db --layout`` it."""
    p = Path(ledger_path)
    return p.with_name(p.stem + "-layout.toml")


def demo_layout_text(effects_file: str) -> str:
    """The ``idemview`` preset's TOML plus the demo's ``[effects]`` section (``effects_file`` relative
    to the layout file's folder, or absolute)."""
    from idemview.layouts.layout import load_preset

    text = load_preset("idemview").text.replace('name = "idemview"', 'name = "idemview-demo"', 1)
    return text.rstrip() + "\n" + EFFECTS_SECTION.format(connection=effects_file.replace("\\", "/"))


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(v) -> datetime | None:
    if v is None:
        return None
    t = datetime.fromisoformat(str(v))
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def write_demo_effects(
    ledger_path: str | Path, *, seed: int = 7, anchor: datetime | None = None
) -> dict[str, list[tuple[str, str]]]:
    """Write the charges file and the layout file for the demo ledger at ``ledger_path``; returns what
    was planted: finding kind -> [(scope, key)] (orphans: ``("", key)``). Replaces earlier demo files;
    raises ``ValueError`` for an existing effects file that is not one of idemview's demos."""
    lp = Path(ledger_path)
    ep = effects_path_for(lp)
    _remove_earlier_effects(ep)
    led = _read_ledger(lp)
    if anchor is None:
        anchor = max((t for o in led.ops if (t := _parse(o[4])) is not None), default=datetime.now(UTC))
    anchor = anchor.astimezone(UTC)
    # One random source for every charge, drawn in this order: the same seed gives the same rows.
    charges = _Charges(random.Random(seed * 7919 + 16))
    planted: dict[str, list[tuple[str, str]]] = {}
    _charge_completed(led, charges, anchor)
    _plant_hidden_successes(led, charges, anchor, planted)
    _plant_double_charges(led, charges, anchor, planted)
    _plant_orphans(charges, anchor, planted)
    ep.parent.mkdir(parents=True, exist_ok=True)
    with connect_sqlite(ep) as c:
        c.executescript(_SCHEMA)
        c.executemany("INSERT INTO charges VALUES (?, ?, ?, ?, ?, ?, ?, ?)", charges.rows)
        c.executemany(
            "INSERT INTO idemview_demo_planted VALUES (?, ?, ?)",
            [(k, s, key) for k, refs in planted.items() for s, key in refs],
        )
    c.close()
    layout_path_for(lp).write_text(demo_layout_text(ep.name), encoding="utf-8")
    return planted


def _remove_earlier_effects(ep: Path) -> None:
    """Remove an earlier demo's effects file at ``ep``; ``ValueError`` for any other file there."""
    if ep.exists():
        try:
            with connect_sqlite(f"file:{quote(str(ep.resolve()))}?mode=ro", uri=True) as c:
                ok = c.execute("SELECT 1 FROM sqlite_master WHERE name = 'idemview_demo_planted'").fetchone()
        except sqlite3.Error:
            ok = None
        if not ok:
            raise ValueError(f"{ep} exists and is not an idemview demo effects file; not replaced")
        ep.unlink()


@dataclass
class _Ledger:
    """What the effects are derived from, read from the demo ledger: ``ops`` rows (scope, key, kind,
    status, created_at, completed_at, locked_at, lock_expires_at, request_body) in id order, the keys
    with a timed-out attempt, and each key's succeeded attempts' (effect_ref, finished_at)."""

    ops: list
    timed: set
    succeeded: dict
    completed_keys: set = field(default_factory=set)


def _read_ledger(lp: Path) -> _Ledger:
    with connect_sqlite(f"file:{quote(str(lp.resolve()))}?mode=ro", uri=True) as c:
        ops = c.execute(
            "SELECT scope, idempotency_key, kind, status, created_at, completed_at, locked_at, "
            "lock_expires_at, request_body FROM operations ORDER BY id"
        ).fetchall()
        timed = {
            (s, k)
            for s, k in c.execute("SELECT DISTINCT scope, idempotency_key FROM attempts WHERE outcome = 'timed_out'")
        }
        succeeded: dict = {}
        for s_, k_, ref, fin in c.execute(
            "SELECT scope, idempotency_key, effect_ref, finished_at FROM attempts "
            "WHERE outcome = 'succeeded' ORDER BY id"
        ):
            succeeded.setdefault((s_, k_), []).append((ref, fin))
    return _Ledger(ops, timed, succeeded, {(o[0], o[1]) for o in ops if o[3] == "succeeded"})


@dataclass
class _Charges:
    """The provider's charge rows, numbered in the order they are added; ``r`` is the one random source."""

    r: random.Random
    rows: list[tuple] = field(default_factory=list)

    def add(self, scope, key, at: datetime, body: str | None, status="succeeded", charge_id=None) -> None:
        import json

        r = self.r
        amount, currency, email = r.randint(100, 250_000), "usd", None
        try:
            b = json.loads(body) if body else {}
            amount, currency = int(b.get("amount", amount)), str(b.get("currency", currency))
            email = (b.get("customer") or {}).get("email")
        except (ValueError, TypeError, AttributeError):
            pass
        self.rows.append(
            (
                len(self.rows) + 1,
                charge_id or f"ch_{r.getrandbits(72):018x}",
                key,
                amount,
                currency,
                status,
                email,
                _iso(at),
            )
        )


def _charge_completed(led: _Ledger, charges: _Charges, anchor: datetime) -> None:
    """One charge per succeeded attempt of every completed charging operation (the provider's id is
    the attempt's effect reference), so a ledger duplicate that charged twice shows two charges here
    as well."""
    done = set()
    for scope, key, kind, status, created, completed, *_rest, body in led.ops:
        if kind in CHARGING and status == "succeeded" and (scope, key) not in done:
            done.add((scope, key))
            for ref, fin in led.succeeded.get((scope, key)) or [(None, completed)]:
                charges.add(
                    scope,
                    key,
                    _parse(fin) or _parse(completed) or _parse(created) or anchor,
                    body,
                    charge_id=ref if ref and ref.startswith(("ch_", "re_")) else None,
                )


def _plant_hidden_successes(led: _Ledger, charges: _Charges, anchor: datetime, planted: dict) -> None:
    """Hidden successes: the provider charged, the ledger says failed / stuck / timed out. Only charging
    kinds: a charge is the effect of a payment, not of an e-mail (the demo plants such payments,
    services.demo_charge_failures); a timed-out one is its own case, not also a "failed" one."""
    r, ops, timed = charges.r, led.ops, led.timed

    def pick(pred, n):
        cands = [o for o in ops if o[2] in CHARGING and (o[0], o[1]) not in led.completed_keys and pred(o)]
        return r.sample(cands, min(n, len(cands)))

    def stuck(o) -> bool:
        lock_end = _parse(o[7])
        return o[3] == "running" and lock_end is not None and lock_end <= anchor

    def untimed_failure(o) -> bool:
        return o[3] == "failed" and (o[0], o[1]) not in timed

    for o in pick(untimed_failure, 1) + pick(stuck, 1) + pick(lambda o: (o[0], o[1]) in timed, 1):
        if (o[0], o[1]) in {tuple(x) for x in planted.get("hidden_success", [])}:
            continue
        charges.add(o[0], o[1], (_parse(o[4]) or anchor) + timedelta(seconds=r.randint(2, 40)), o[8])
        planted.setdefault("hidden_success", []).append((o[0], o[1]))


def _plant_double_charges(led: _Ledger, charges: _Charges, anchor: datetime, planted: dict) -> None:
    """Double charges: a completed payment whose retry charged again."""
    r, ops = charges.r, led.ops
    records_per_key = Counter((o[0], o[1]) for o in ops)  # one pass: the demo may hold 10^5+ operations
    doubles = [
        o for o in ops if o[2] == "payment.capture" and o[3] == "succeeded" and records_per_key[(o[0], o[1])] == 1
    ]
    for o in r.sample(doubles, min(3, len(doubles))):
        charges.add(o[0], o[1], (_parse(o[5]) or anchor) + timedelta(seconds=r.randint(30, 90)), o[8])
        planted.setdefault("duplicate_effect", []).append((o[0], o[1]))


def _plant_orphans(charges: _Charges, anchor: datetime, planted: dict) -> None:
    """Orphans: charges whose key the ledger never recorded."""
    r = charges.r
    for _ in range(2):
        key = f"{r.getrandbits(64):016x}-lost"
        charges.add("", key, anchor - timedelta(minutes=r.randint(5, 300)), None)
        planted.setdefault("orphan_effect", []).append(("", key))
