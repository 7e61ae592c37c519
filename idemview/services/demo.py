"""The demo ledger: realistic traffic in the reference layout with planted incidents of every kind.

:func:`reference_metadata` defines the reference tables (preset ``idemview``); :func:`generate` fills
them on any engine from a seed, so the same seed gives the same rows everywhere (whole-second UTC
times, explicit ids), and returns which operations were planted as which incident. The planted list is
also stored in a side table ``idemview_demo_planted`` (which the layout does not read), so a person or a
test can check a scan against it.

Times are anchored to ``anchor`` (UTC, default :data:`DEFAULT_ANCHOR`): traffic lies in the 6 hours
before it, expired keys 2–3 days before it. Scanning with ``now=anchor`` gives exactly the planted
findings; the GUI's ``--demo`` anchors to the current hour so the incidents look recent.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import (
    Column,
    MetaData,
    String,
    Table,
    create_engine,
    insert,
)
from sqlalchemy.engine import Engine

from idemview.ledger.reference import add_reference_tables
from idemview.ledger.sqlite_functions import connect_sqlite

UTC = UTC
DEFAULT_ANCHOR = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
RETENTION = timedelta(hours=24)
LOCK = timedelta(minutes=5)

KINDS = ("payment.capture", "refund.create", "email.send", "invoice.create", "webhook.deliver")
SCOPES = ("acme", "globex", "initech", "umbrella", "hooli", "stark")
WORKERS = tuple(f"worker-{i}" for i in range(1, 7))
# Public test card numbers (they pass Luhn): the masking must hide them.
CARDS = ("4242424242424242", "5555555555554444", "378282246310005", "4000056655665556")
FIRST = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi")


def reference_metadata() -> MetaData:
    """The reference ledger's tables (preset ``idemview``): ``operations`` and ``attempts``.

    Times are ``DateTime`` holding UTC (naive in the database). (scope, idempotency_key) is indexed but
    deliberately not unique: a replay after the record was purged, or a bug, can add a second record."""
    md = MetaData()
    add_reference_tables(md)
    Table(
        "idemview_demo_planted",
        md,
        Column("kind", String(32), primary_key=True),
        Column("scope", String(64), primary_key=True),
        Column("idempotency_key", String(128), primary_key=True),
    )
    return md


@dataclass
class Planted:
    """What :func:`generate` planted: finding kind -> list of (scope, key)."""

    incidents: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    operations: int = 0
    attempts: int = 0
    anchor: datetime = DEFAULT_ANCHOR

    def add(self, kind: str, scope: str, key: str) -> None:
        self.incidents.setdefault(kind, []).append((scope, key))


class _Gen:
    def __init__(self, seed: int, anchor: datetime):
        self.r = random.Random(seed)
        self.anchor = anchor.astimezone(UTC).replace(microsecond=0, tzinfo=None)
        self.ops: list[dict] = []
        self.atts: list[dict] = []
        self.planted = Planted(anchor=anchor)
        self._op_id = 0
        self._att_id = 0
        self._n = 0

    def key(self) -> str:
        self._n += 1
        return f"{self.r.getrandbits(64):016x}-{self._n:07d}"

    def ref(self, prefix: str) -> str:
        return f"{prefix}_{self.r.getrandbits(72):018x}"

    def payload(self, kind: str, scope: str) -> tuple[dict, str]:
        r = self.r
        who = r.choice(FIRST)
        body: dict = {
            "tenant": scope,
            "customer": {"email": f"{who}.{r.randint(1, 999)}@example.com", "name": who.title()},
        }
        if kind in ("payment.capture", "refund.create"):
            body["amount"] = r.randint(100, 250_000)
            body["currency"] = r.choice(("usd", "eur", "gbp"))
            body["card"] = {"number": r.choice(CARDS), "exp": f"{r.randint(1, 12):02d}/{r.randint(27, 31)}"}
        elif kind == "email.send":
            body["template"] = r.choice(("receipt", "welcome", "reset"))
        elif kind == "webhook.deliver":
            body["url"] = f"https://hooks.example.net/{scope}/in?token=tok_{r.getrandbits(64):016x}"
        else:
            body["lines"] = r.randint(1, 9)
        body["headers"] = {"Authorization": f"Bearer sk_live_{r.getrandbits(96):024x}"}
        fp = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32]
        return body, fp

    # Bodies of the planted incidents: what a provider really answers (charges, refunds, SMTP bounces,
    # webhook receipts, driver errors), with the secrets such bodies really carry, so the payload
    # viewers show something worth masking. Derived from the key (no draw from ``self.r``), so the
    # keys and rows of a seed stay what they were.
    @staticmethod
    def _hex(key: str, salt: str, n: int = 24) -> str:
        return hashlib.sha256(f"{salt}:{key}".encode()).hexdigest()[:n]

    def charge(
        self,
        key: str,
        body: dict,
        effect: str | None,
        created: datetime,
        *,
        obj: str = "charge",
        status: str = "succeeded",
    ) -> dict:
        card = (body.get("card") or {}).get("number", "4242424242424242")
        email = body["customer"]["email"]
        return {
            "id": effect,
            "object": obj,
            "amount": body.get("amount"),
            "currency": body.get("currency"),
            "status": status,
            "created": int(created.replace(tzinfo=UTC).timestamp()),
            "livemode": True,
            "payment_method_details": {
                "type": "card",
                "card": {
                    "brand": {"4": "visa", "5": "mastercard", "3": "amex"}.get(card[0], "card"),
                    "last4": card[-4:],
                    "fingerprint": self._hex(key, "fp", 16),
                },
            },
            "billing_details": {"email": email, "phone": "+4915123456789", "name": body["customer"]["name"]},
            "receipt_email": email,
            "receipt_url": f"https://pay.example.com/receipts/{self._hex(key, 'rc')}"
            f"?token=rt_{self._hex(key, 'rt', 32)}",
            "metadata": {"idempotency_key": key},
        }

    def op(
        self,
        *,
        scope,
        key,
        kind,
        status,
        created,
        attempts: list[dict],
        intent=None,
        effect=None,
        fp=None,
        body=None,
        expires=None,
        error=None,
        locked=None,
        completed=None,
        response=None,
    ):
        self._op_id += 1
        n = len(attempts)
        last = max((a["finished_at"] or a["started_at"] for a in attempts), default=created)
        row = {
            "id": self._op_id,
            "scope": scope,
            "idempotency_key": key,
            "kind": kind,
            "status": status,
            "request_hash": fp,
            "intent_ref": intent,
            "effect_ref": effect,
            "attempt_count": n,
            "created_at": created,
            "updated_at": last,
            "completed_at": completed,
            "locked_at": locked,
            "lock_expires_at": (locked + LOCK) if locked else None,
            "expires_at": expires if expires is not None else created + RETENTION,
            "request_body": json.dumps(body) if body is not None else None,
            "response_body": json.dumps(response) if response is not None else None,
            "error": error,
        }
        self.ops.append(row)
        for i, a in enumerate(attempts, 1):
            self._att_id += 1
            self.atts.append(
                {
                    "id": self._att_id,
                    "scope": scope,
                    "idempotency_key": key,
                    "attempt_no": a.get("no", i),
                    "started_at": a["started_at"],
                    "finished_at": a["finished_at"],
                    "outcome": a["outcome"],
                    "request_hash": a.get("fp", fp),
                    "effect_ref": a.get("effect"),
                    "worker": a.get("worker") or self.r.choice(WORKERS),
                    "error": a.get("error"),
                }
            )
        return row

    def attempt_chain(self, created: datetime, outcomes: list[str], effect_prefix: str) -> list[dict]:
        out, t = [], created + timedelta(seconds=self.r.randint(0, 3))
        for o in outcomes:
            dur = timedelta(seconds=self.r.randint(1, 20) if o != "timed_out" else 30)
            a = {"started_at": t, "finished_at": t + dur, "outcome": o}
            if o == "succeeded":
                a["effect"] = self.ref(effect_prefix)
            elif o == "failed":
                a["error"] = self.r.choice(
                    (
                        "card_declined: insufficient funds",
                        "upstream 503 from provider",
                        "connection reset by peer (postgres://app:hunter2@db.internal:5432/payments)",
                        "rate limited; retry after 2s",
                    )
                )
            elif o == "timed_out":
                a["error"] = "provider did not answer within 30 s"
            out.append(a)
            t = t + dur + timedelta(seconds=2 ** len(out) + self.r.randint(0, 5))
        return out

    def plant_base(self, kind: str = "payment.capture", hours_ago: float | None = None) -> tuple:
        """A planted incident's start: ``(scope, key, created, body, fingerprint)``, created a random
        10 minutes to 5 hours before the anchor, or ``hours_ago``."""
        r = self.r
        scope = r.choice(SCOPES)
        ago = timedelta(seconds=r.randint(600, 5 * 3600)) if hours_ago is None else timedelta(hours=hours_ago)
        created = (self.anchor - ago).replace(microsecond=0)
        body, fp = self.payload(kind, scope)
        return scope, self.key(), created, body, fp


EFFECT_PREFIX = {
    "payment.capture": "ch",
    "refund.create": "re",
    "email.send": "em",
    "invoice.create": "in",
    "webhook.deliver": "wh",
}


def generate(
    engine: Engine, *, operations: int = 2000, seed: int = 7, anchor: datetime = DEFAULT_ANCHOR, batch: int = 5000
) -> Planted:
    """Create the reference tables on ``engine`` (dropping demo tables already there) and fill them.

    ``operations`` is the number of ordinary operations (planted ones come on top, about 40). Rows are
    whole-second UTC. Returns :class:`Planted`. Raises SQLAlchemy errors from the engine as they come."""
    from idemview.services.demo_actions import plant_action_doubles
    from idemview.services.demo_charge_failures import plant_charge_failures
    from idemview.services.demo_incidents import INCIDENTS

    g = _Gen(seed, anchor)
    _traffic(g, operations)
    for plant in INCIDENTS:
        plant(g)
    # --- the same duplicate in several action classes (money, notification, access, read: issue 21)
    plant_action_doubles(g, g.plant_base)
    plant_charge_failures(g, g.plant_base)  # the payments the effects file's hidden successes charged
    # --- the ledger keeps card numbers, e-mail addresses and bearer tokens in request_body in plain text
    g.planted.add("secret_at_rest", "", "")
    _write_tables(engine, g, batch)
    g.planted.operations, g.planted.attempts = len(g.ops), len(g.atts)
    return g.planted


def _traffic(g: _Gen, operations: int) -> None:
    """Ordinary traffic in the 6 hours before the anchor; ~3 % older than the dedup window (planted as
    ``expired_key``)."""
    r = g.r
    A = g.anchor
    for _ in range(operations):
        scope, kind = r.choice(SCOPES), r.choices(KINDS, weights=(5, 1, 3, 2, 3))[0]
        old = r.random() < 0.03
        created = A - (timedelta(hours=r.uniform(25, 70)) if old else timedelta(seconds=r.randint(60, 6 * 3600)))
        created = created.replace(microsecond=0)
        roll = r.random()
        if roll < 0.80:
            outcomes = ["succeeded"]
        elif roll < 0.93:
            outcomes = ["failed", "succeeded"]
        else:
            outcomes = ["timed_out", "failed", "succeeded"][: r.randint(2, 3)]
            outcomes[-1] = "succeeded"
        body, fp = g.payload(kind, scope)
        atts = g.attempt_chain(created, outcomes, EFFECT_PREFIX[kind])
        key = g.key()
        g.op(
            scope=scope,
            key=key,
            kind=kind,
            status="succeeded",
            created=created,
            attempts=atts,
            intent=g.ref("ord"),
            effect=atts[-1]["effect"],
            fp=fp,
            body=body,
            completed=atts[-1]["finished_at"],
            response={"id": atts[-1]["effect"], "status": "ok"},
        )
        if old:
            g.planted.add("expired_key", scope, key)


def _write_tables(engine: Engine, g: _Gen, batch: int) -> None:
    """(Re)create the reference tables on ``engine`` and insert ``g``'s rows, ``batch`` rows a statement,
    and what was planted (each (kind, scope, key) once)."""
    md = reference_metadata()
    md.drop_all(engine)
    # Indexes are created one by one in name order: Table.indexes is a set, and a stable DDL order keeps
    # "same seed, same file" true to the byte.
    indexes = sorted((i for t in md.tables.values() for i in t.indexes), key=lambda i: str(i.name))
    for t in md.tables.values():
        t.indexes.clear()
    md.create_all(engine)
    for ix in indexes:
        ix.create(engine)
    t_ops, t_att, t_pl = md.tables["operations"], md.tables["attempts"], md.tables["idemview_demo_planted"]
    with engine.begin() as c:
        for i in range(0, len(g.ops), batch):
            c.execute(insert(t_ops), g.ops[i : i + batch])
        for i in range(0, len(g.atts), batch):
            c.execute(insert(t_att), g.atts[i : i + batch])
        seen = set()
        rows = []
        for kind, refs in g.planted.incidents.items():
            for s, k in refs:
                if (kind, s, k) not in seen:
                    seen.add((kind, s, k))
                    rows.append({"kind": kind, "scope": s, "idempotency_key": k})
        c.execute(insert(t_pl), rows)


def is_demo_ledger(path: str | Path) -> bool:
    """True when ``path`` is a SQLite file holding a demo ledger (its ``idemview_demo_planted`` table):
    ``idemview demo`` replaces only those without ``--force``."""
    import sqlite3
    from urllib.parse import quote

    try:
        with connect_sqlite(f"file:{quote(str(Path(path).resolve()))}?mode=ro", uri=True) as c:
            return (
                c.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'idemview_demo_planted'"
                ).fetchone()
                is not None
            )
    except sqlite3.Error:
        return False


def _made_by_demo(p: Path) -> bool:
    """True for a file an earlier ``idemview demo`` wrote: a demo ledger or effects database (its
    ``idemview_demo_planted`` table) or the demo's layout (named ``idemview-demo``)."""
    if p.suffix == ".toml":
        import tomllib

        try:
            return tomllib.loads(p.read_text("utf-8")).get("layout", {}).get("name") == "idemview-demo"
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return False
    return is_demo_ledger(p)


def _check_demo_targets(p: Path) -> None:
    """The write gate (:func:`idemview.paths.check_write_target`) for the three files a demo writes:
    each may replace only what an earlier demo wrote (``--force`` replaces a non-demo *ledger path* the
    CLI checked, never a layout or another database). Raises ``TargetRefused``."""
    from idemview.paths import check_write_target
    from idemview.services.demo_effects import effects_path_for, layout_path_for

    for t in (effects_path_for(p), layout_path_for(p)):
        check_write_target(t, overwrite=False, may_replace=_made_by_demo)
    if not p.exists() or _made_by_demo(p) or not _is_sqlite_file(p):
        return  # --force on an empty or non-database file the user named: the CLI asked
    check_write_target(p, overwrite=False, may_replace=_made_by_demo)


def _is_sqlite_file(p: Path) -> bool:
    from idemview.paths import source_kind

    return source_kind(p) is not None


def write_demo(
    path: str | Path, *, operations: int = 2000, seed: int = 7, anchor: datetime = DEFAULT_ANCHOR
) -> Planted:
    """Write a demo SQLite ledger at ``path`` (replacing the file). Same arguments, same bytes."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    _check_demo_targets(p)
    if p.exists():
        p.unlink()
    eng = create_engine(f"sqlite:///{p}", creator=lambda: connect_sqlite(str(p)))
    try:
        planted = generate(eng, operations=operations, seed=seed, anchor=anchor)
        with eng.begin() as c:
            c.exec_driver_sql("PRAGMA journal_mode=DELETE")
    finally:
        eng.dispose()
    # the provider's charges in a second file, and the layout that reconciles with them (issue #16)
    from idemview.services.demo_effects import write_demo_effects

    for kind, refs in write_demo_effects(p, seed=seed, anchor=anchor).items():
        for scope, key in refs:
            planted.add(kind, scope, key)
    return planted
