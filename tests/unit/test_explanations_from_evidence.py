"""Issue 19, item 19: every explanation is built from the evidence it ships with. Over generated ledgers
(the reference ``idemview`` layout on SQLite), each time, duration, number and attempt outcome a finding's
sentence states is found in its evidence rows: a time as one of their values, a duration as the gap
between two of their times (or one and ``now``), a number as one of their values or a count of rows, and
"attempt N ... and succeeded" only when the evidence shows attempt N succeeded."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from itertools import combinations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, insert

from idemview.findings.common import parse_iso
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.ledger.times import human_duration
from idemview.services.demo import reference_metadata

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
ISO_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")
DUR_RE = re.compile(r"\b\d+(?:\.\d+)? (?:ms|s|min|h|days)\b")
CLAIM_RE = re.compile(r"attempt (\d+) started [^;:]*? and (succeeded|failed|timed out|was running)")
WORD = {"succeeded": "succeeded", "failed": "failed", "timed out": "timed_out", "was running": "running"}


def _values(ev):
    for row in ev:
        yield from row.items()


def check(f, now: datetime) -> None:
    """Raise AssertionError when ``f.explanation`` states something its ``f.evidence`` does not show."""
    ev = f.evidence
    text = re.sub(r"'[^']*'", "''", f.explanation)  # keys, scopes, intents: names, not claims
    vals = [v for _k, v in _values(ev)]
    times = {v for v in vals if isinstance(v, str) and ISO_RE.fullmatch(v)}
    for t in ISO_RE.findall(text):
        assert t in times, (t, f)
    instants = [parse_iso(t) for t in times]
    spans = {human_duration((a - b).total_seconds()) for a, b in combinations(instants, 2)}
    spans |= {human_duration((now - a).total_seconds()) for a in instants}
    for d in DUR_RE.findall(text):
        assert d in spans, (d, spans, f)
    for n, word in CLAIM_RE.findall(text):
        assert any(row.get("attempt") == int(n) and row.get("outcome") == WORD[word] for row in ev), (n, word, f)
    for word in ("succeeded", "timed out"):
        if word in text:
            assert WORD[word] in vals, (word, f)
    rest = DUR_RE.sub("", ISO_RE.sub("", text))
    counts = {len(ev)} | {v for v in vals if isinstance(v, int) and not isinstance(v, bool)}
    fields = {k for row in ev for k in row}
    for k in fields:
        seen = [row.get(k) for row in ev if row.get(k) not in (None, "")]
        counts.add(len(set(map(str, seen))))
        for v in set(map(str, seen)):
            counts.add(sum(1 for x in seen if str(x) == v))
    for n in re.findall(r"\b\d{1,3}(?:,\d{3})+\b|\b\d+\b", rest):  # "10,000" is one number
        assert int(n.replace(",", "")) in counts, (n, counts, f)


MIN = timedelta(minutes=1)
STATUSES = ["pending", "running", "succeeded", "failed"]
OUTCOMES = ["succeeded", "failed", "timed_out", "running"]


@st.composite
def ledgers(draw):
    ops, atts = [], []
    rid = aid = 0
    for k in range(draw(st.integers(1, 5))):
        key = f"k{k}"
        for _ in range(draw(st.integers(1, 2))):
            rid += 1
            created = NOW - draw(st.integers(0, 600)) * MIN
            ops.append(
                {
                    "id": rid,
                    "scope": "s",
                    "idempotency_key": key,
                    "kind": "charge",
                    "status": draw(st.sampled_from(STATUSES)),
                    "request_hash": draw(st.sampled_from([None, "h1", "h2"])),
                    "intent_ref": draw(st.sampled_from([None, "i1", "i2"])),
                    "effect_ref": draw(st.sampled_from([None, "e1", "e2", "e3"])),
                    "attempt_count": draw(st.integers(0, 9)),
                    "created_at": created.replace(tzinfo=None),
                    "expires_at": draw(st.sampled_from([None, created + draw(st.integers(-120, 300)) * MIN])),
                    "locked_at": draw(st.sampled_from([None, created])),
                    "lock_expires_at": draw(st.sampled_from([None, created + draw(st.integers(1, 30)) * MIN])),
                }
            )
            for c in ("expires_at", "lock_expires_at"):
                if ops[-1][c] is not None:
                    ops[-1][c] = ops[-1][c].replace(tzinfo=None)
        for n in range(1, draw(st.integers(0, 4)) + 1):
            aid += 1
            started = NOW - draw(st.integers(0, 600)) * MIN
            atts.append(
                {
                    "id": aid,
                    "scope": "s",
                    "idempotency_key": key,
                    "attempt_no": n,
                    "started_at": started.replace(tzinfo=None),
                    "outcome": draw(st.sampled_from(OUTCOMES)),
                    "effect_ref": draw(st.sampled_from([None, "e1", "e2"])),
                    "request_hash": draw(st.sampled_from([None, "h1", "h3"])),
                }
            )
    return ops, atts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=ledgers())
def test_every_explanation_is_read_from_its_evidence(tmp_path_factory, data):
    ops, atts = data
    path = tmp_path_factory.mktemp("ledger") / "l.db"
    w = create_engine(f"sqlite:///{path}")
    md = reference_metadata()
    md.create_all(w)
    with w.begin() as c:
        c.execute(insert(md.tables["operations"]), ops)
        if atts:
            c.execute(insert(md.tables["attempts"]), atts)
    w.dispose()
    eng = open_engine(str(path))
    try:
        for f in FindingEngine(Ledger(eng, load_preset("idemview")), NOW).run():
            check(f, NOW)
    finally:
        eng.dispose()


def test_the_reported_case_a_failed_replay_then_a_successful_one(sqlite_db):
    """The issue's example: attempt 3 started after the key had expired and failed, attempt 4
    succeeded. The sentence says so, in that order; the finding is critical (a replay succeeded)."""
    w, path = sqlite_db
    md = reference_metadata()
    md.create_all(w)
    created = (NOW - 3 * timedelta(hours=1)).replace(tzinfo=None)
    expired = created + timedelta(hours=1)
    with w.begin() as c:
        c.execute(
            insert(md.tables["operations"]),
            [
                {
                    "id": 1,
                    "scope": "s",
                    "idempotency_key": "k",
                    "status": "succeeded",
                    "created_at": created,
                    "expires_at": expired,
                }
            ],
        )
        c.execute(
            insert(md.tables["attempts"]),
            [
                {"id": i, "scope": "s", "idempotency_key": "k", "attempt_no": i, "started_at": t, "outcome": o}
                for i, t, o in [
                    (1, created, "failed"),
                    (2, created + 5 * MIN, "timed_out"),
                    (3, expired + 10 * MIN, "failed"),
                    (4, expired + 25 * MIN, "succeeded"),
                ]
            ],
        )
    eng = open_engine(path)
    try:
        (f,) = [
            f
            for f in FindingEngine(Ledger(eng, load_preset("idemview")), NOW).run()
            if f.kind.value == "replay_after_expiry"
        ]
    finally:
        eng.dispose()
    assert f.severity.value == "critical"
    assert "attempt 3 started 10 min after the key had expired (2026-11-30T10:00:00Z) and failed" in f.explanation
    assert "attempt 4 started 25 min after the key had expired and succeeded" in f.explanation
    assert [(x["attempt"], x["outcome"]) for x in f.evidence] == [(3, "failed"), (4, "succeeded")]
    check(f, NOW)


def test_the_demo_findings_with_effects_are_read_from_their_evidence(tmp_path, capsys):
    """Every kind the demo plants, the effect kinds included (its layout file has an [effects] section)."""
    import json
    from types import SimpleNamespace

    from idemview.cli import main
    from idemview.services.demo import write_demo

    db = tmp_path / "demo.db"
    write_demo(db, operations=120, seed=11)
    layout = tmp_path / "demo-layout.toml"
    assert main(["scan", str(db), "--layout", str(layout), "--now", "2026-11-30T12:00:00Z", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    kinds = {f["kind"] for f in doc["findings"]}
    assert {"hidden_success", "orphan_effect", "replay_after_expiry", "duplicate_intent"} <= kinds
    for f in doc["findings"]:
        check(SimpleNamespace(**f), datetime(2026, 11, 30, 12, tzinfo=UTC))
