"""Dedup windows measured from data (DESIGN §5.2, issue #22): planted retry spans whose percentiles,
verdicts and suggestions are computed by hand, on every engine under every dialect name."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import MetaData, insert

from idemview.cli import main
from idemview.findings.windows import (
    EDGES,
    LADDER,
    duration_words,
    late_operations,
    measure_windows,
    suggest,
)
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.ledger.reference import add_reference_tables

T0 = datetime(2026, 5, 1, 8, 0, 0)  # naive UTC, as the reference tables keep it
NOW = datetime(2026, 5, 3, 12, 0, 0, tzinfo=UTC)
H = 3600

# payments.capture: 1 h window; eleven retried operations with these spans (seconds), each alone in
# its histogram bucket so that every engine computes the same percentiles as percentile_cont.
CAPTURE_SPANS = [60, 120, 300, 600, 900, 1200, 1800, 2400, 3000, 5400, 11400]
# email.send: 24 h window; four retried operations.
EMAIL_SPANS = [10, 20, 30, 40]


class _Rows:
    def __init__(self):
        self.ops: list[dict] = []
        self.atts: list[dict] = []

    def op(self, kind, key, created, window_s, starts, *, durations=None, scope="acme"):
        """One operation: its record created at ``created`` expiring ``window_s`` later, and one
        attempt per entry of ``starts`` (seconds after ``created``; ``None``: a missing start)."""
        self.ops.append(
            {
                "id": len(self.ops) + 1,
                "scope": scope,
                "idempotency_key": key,
                "kind": kind,
                "status": "succeeded",
                "attempt_count": len(starts),
                "created_at": created,
                "expires_at": created + timedelta(seconds=window_s) if created is not None else None,
            }
        )
        for i, s in enumerate(starts, 1):
            start = created + timedelta(seconds=s) if s is not None and created is not None else None
            dur = (durations or {}).get(i, 5)
            self.atts.append(
                {
                    "id": len(self.atts) + 1,
                    "scope": scope,
                    "idempotency_key": key,
                    "attempt_no": i,
                    "started_at": start,
                    "finished_at": start + timedelta(seconds=dur) if start is not None else None,
                    "outcome": "succeeded" if i == len(starts) else "failed",
                }
            )

    def load(self, engine):
        md = MetaData()
        add_reference_tables(md)
        md.drop_all(engine)
        md.create_all(engine)
        with engine.begin() as c:
            c.execute(insert(md.tables["operations"]), self.ops)
            if self.atts:
                c.execute(insert(md.tables["attempts"]), self.atts)


def planted() -> _Rows:
    r = _Rows()
    for i, span in enumerate(CAPTURE_SPANS):
        # the 600 s span's first attempt ran for 10 minutes: longer than the 5 min lock
        r.op(
            "payments.capture",
            f"cap-{i}",
            T0 + timedelta(minutes=i),
            H,
            [0, span],
            durations={1: 600} if span == 600 else None,
        )
    r.op("payments.capture", "cap-once", T0, H, [0])  # not retried
    for i, span in enumerate(EMAIL_SPANS):
        r.op("email.send", f"em-{i}", T0 + timedelta(minutes=i), 24 * H, [0, span // 2, span])
    r.op("invoice.create", "inv-1", T0, 24 * H, [0])
    r.op("invoice.create", "inv-2", T0, 24 * H, [1])
    return r


def _open(url):
    eng = open_engine(url)
    return eng, Ledger(eng, load_preset("idemview"))


def test_planted_spans_on_every_engine(dialect_db):
    w, url = dialect_db
    planted().load(w)
    eng, led = _open(url)
    try:
        rep = measure_windows(led, NOW)
        lates = late_operations(led, "payments.capture")
    finally:
        eng.dispose()
    assert rep.method == ("percentile_cont" if led.dialect == "postgresql" else "histogram")
    assert [g.kind for g in rep.groups] == ["payments.capture", "invoice.create", "email.send"]
    cap, inv, em = rep.groups
    # payments.capture by hand: n = 11 sorted spans; p50 = the 6th (1200); p99 at rank 0.99 * 10 = 9.9:
    # 5400 + 0.9 * (11400 - 5400) = 10800; two spans (5400, 11400) reach past the 1 h window, and both
    # operations' last attempts came after their key expired, the later 11400 - 3600 = 7800 s after.
    assert (cap.operations, cap.retried, cap.window_s, cap.window_source) == (12, 11, 3600, "expires_at")
    assert (cap.p50, cap.max) == (pytest.approx(1200, abs=1e-3), pytest.approx(11400, abs=1e-3))
    assert cap.p99 == pytest.approx(10800, abs=1e-3)
    assert (cap.over, cap.late, cap.verdict) == (2, 2, "too_short")
    assert cap.late_max_s == pytest.approx(7800, abs=1e-3)
    assert cap.suggested_window_s == 21600  # 1.5 * 11400 = 17100 -> 6 h
    assert cap.sentence == (
        "payments.capture: window 1 h; 18 % of retries came later, the latest 3 h 10 min after the first "
        "attempt; 2 operations got a request after the key had expired, up to 2 h 10 min after; a 6 h window "
        "would have covered every retry seen"
    )
    # the layout's lock timeout (5 min) against the 10-minute attempt
    assert cap.lock_timeout_s == 300 and cap.longest_attempt_s == pytest.approx(600, abs=1e-3)
    assert any("shorter than the longest attempt seen (10 min)" in n for n in cap.notes)
    # email.send: spans 10, 20, 30, 40: p50 = 25, p99 = 30 + 0.97 * 10 = 39.7; under 24 h
    assert (em.retried, em.verdict, em.late, em.over) == (4, "enough", 0, 0)
    assert em.p50 == pytest.approx(25, abs=1e-3) and em.p99 == pytest.approx(39.7, abs=1e-3)
    assert em.max == pytest.approx(40, abs=1e-3) and em.suggested_window_s == 300
    assert em.notes == []
    # invoice.create: nothing retried
    assert (inv.operations, inv.retried, inv.verdict, inv.suggested_window_s) == (2, 0, "unknown", None)
    assert inv.reason == "no operation of this kind was retried or replayed"
    # the late operations, latest first (what the GUI lists and filters the grid to)
    assert [(x["key"], round(x["late_s"])) for x in lates] == [("cap-10", 7800), ("cap-9", 1800)]


def test_json_shape_and_text_through_the_cli(sqlite_db, capsys):
    w, path = sqlite_db
    r = planted()
    # a kind carrying an e-mail address: masked in every output, like scan's
    r.op("notify alice.smith@example.com", "n-1", T0, H, [0, 2 * H])
    r.load(w)
    assert main(["windows", path, "--layout", "idemview", "--now", "2026-05-03T12:00:00Z", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["now"] == "2026-05-03T12:00:00Z" and out["layout"] == "idemview"
    g = out["groups"][0]
    assert set(g) >= {
        "kind", "operations", "retried", "window_s", "window_source", "lock_timeout_s", "retry_span_s", "late",
        "late_max_s", "verdict", "suggested_window_s", "sentence",
    }  # fmt: skip
    assert [x["verdict"] for x in out["groups"]] == ["too_short", "too_short", "unknown", "enough"]
    assert "alice.smith@example.com" not in json.dumps(out)
    # a kind named like a sensitive field keeps the words after it (masked apart, not as "email: value")
    em = next(x for x in out["groups"] if x["kind"] == "email.send")
    assert em["sentence"].startswith("email.send: window 24 h; every retry came within it")
    assert main(["windows", path, "--layout", "idemview", "--now", "2026-05-03T12:00:00Z"]) == 0
    text = capsys.readouterr().out
    assert "payments.capture  [too_short]" in text and "alice.smith" not in text
    assert "retry span p50 20 min, p99 3 h 0 min, max 3 h 10 min" not in text  # words, not raw minutes
    assert "a 6 h window would have covered every retry seen" in text


def test_cli_bad_input_exit_codes(tmp_path, capsys):
    assert main(["windows", str(tmp_path / "missing.db")]) == 3
    with pytest.raises(SystemExit) as e:
        main(["windows", "sqlite:///" + str(tmp_path / "x.db"), "--now", "yesterday"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err


def test_partly_missing_times_are_judged_on_what_can_be_read(db):
    w, url = db
    r = _Rows()
    r.op("payments.capture", "ok", T0, H, [0, 2 * H])  # too late
    r.op("payments.capture", "partly", T0, H, [0, None, 600])  # one start missing: judged on 0 and 600
    r.op("payments.capture", "none", None, H, [None, None])  # nothing readable
    r.load(w)
    eng, led = _open(url)
    try:
        g = measure_windows(led, NOW).groups[0]
    finally:
        eng.dispose()
    assert (g.operations, g.retried, g.unreadable, g.partly_unreadable) == (3, 2, 1, 1)
    assert g.max == pytest.approx(2 * H, abs=1e-3) and g.verdict == "too_short"
    assert "1 operation could not be read (times missing or undecodable)" in g.sentence
    assert "1 operation with some times missing or undecodable judged on the rest" in g.sentence


def test_undecodable_text_times_on_sqlite(sqlite_db):
    w, path = sqlite_db
    r = _Rows()
    r.op("email.send", "a", T0, 24 * H, [0, 100])
    r.op("email.send", "b", T0, 24 * H, [0, 50])
    r.load(w)
    with w.begin() as c:  # SQLite keeps whatever text it is given
        c.exec_driver_sql(
            "UPDATE attempts SET started_at = 'not a date' WHERE idempotency_key = 'b' AND attempt_no = 2"
        )
        c.exec_driver_sql("UPDATE operations SET created_at = '0000-00-00 00:00:00' WHERE idempotency_key = 'b'")
    eng, led = _open(path)
    try:
        g = measure_windows(led, NOW).groups[0]
    finally:
        eng.dispose()
    # b keeps one readable start: no span (one time is no span), a is 100 s
    assert (g.operations, g.partly_unreadable, g.unreadable) == (2, 1, 0)
    assert g.max == pytest.approx(100, abs=1e-3) and g.verdict == "enough"


def test_counter_only_preset_says_unknown(db):
    from tests.ledgers import load
    from tests.presets.test_planted_stripe_powertools_celery import cel_row, celery_md

    w, url = db
    load(w, celery_md(), {"celery_taskmeta": [cel_row(i + 1, f"t-{i}", "SUCCESS", T0, retries=i) for i in range(3)]})
    eng = open_engine(url)
    try:
        rep = measure_windows(Ledger(eng, load_preset("celery")), NOW)
    finally:
        eng.dispose()
    assert rep.source is None
    (g,) = rep.groups
    # retries 0, 1, 2 are attempts 1, 2, 3 (Celery counts retries): two were retried
    assert (g.kind, g.operations, g.retried, g.verdict) == ("billing.tasks.charge", 3, 2, "unknown")
    assert g.reason.startswith("no attempt times: the ledger keeps only an attempt counter")
    assert g.window_source == "retention" and g.window_s == 86400
    assert g.max is None and g.suggested_window_s is None


def test_retention_and_declared_window_purge_note(sqlite_db):
    # A purge retention (added to created_at) shorter than the declared dedup window: keys are
    # forgotten before their window ends (Oban's pruner under a longer unique period).
    from dataclasses import replace

    w, path = sqlite_db
    r = _Rows()
    r.op("sync.export", "s-1", T0, 24 * H, [0, 30 * 60])
    r.load(w)
    eng = open_engine(path)
    try:
        lay = load_preset("idemview")
        lay = replace(lay, times={k: v for k, v in lay.times.items() if k != "expires_at"}, retention_seconds=60.0)
        lay = replace(lay, dedup_window_seconds=23 * H)
        g = measure_windows(Ledger(eng, lay), NOW).groups[0]
    finally:
        eng.dispose()
    assert (g.window_source, g.window_s, g.verdict) == ("retention", 60, "too_short")
    assert g.late_max_s == pytest.approx(30 * 60 - 60, abs=1e-3)
    assert any("purged 60 s after created_at but the declared dedup window is 23 h" in n for n in g.notes)


def test_no_window_kept_still_measures_spans(sqlite_db):
    from dataclasses import replace

    w, path = sqlite_db
    r = _Rows()
    r.op("email.send", "a", T0, 24 * H, [0, 1000])
    r.load(w)
    eng = open_engine(path)
    try:
        lay = load_preset("idemview")
        lay = replace(lay, times={k: v for k, v in lay.times.items() if k != "expires_at"}, dedup_window_seconds=None)
        g = measure_windows(Ledger(eng, lay), NOW).groups[0]
    finally:
        eng.dispose()
    assert (g.window_source, g.verdict, g.max, g.suggested_window_s) == (None, "unknown", 1000, 3600)
    assert g.reason == "the ledger keeps no dedup window (no expires_at, TTL or retention)"


def test_ladder_and_words():
    assert suggest(None) is None
    assert [suggest(x) for x in (0, 200, 201, 11400, 86400, 5_000_000, 6_000_000)] == [
        300, 300, 900, 21600, 604800, 7776000, None,
    ]  # fmt: skip
    assert LADDER[-1] == 90 * 86400
    assert [duration_words(x) for x in (45, 600, 11400, 86400, 604800, 190000)] == [
        "45 s", "10 min", "3 h 10 min", "24 h", "7 d", "2 d 5 h",
    ]  # fmt: skip
    assert EDGES[0] == 1 and EDGES[32] == pytest.approx(10)


def test_last_attempt_time_of_a_one_record_per_key_ledger(db):
    # stripe-style (rocket-rides-atomic): one row per (user_id, idempotency_key), last_run_at is the
    # latest attempt's start, the reaper's 72 h retention is the window.
    from tests.ledgers import load
    from tests.presets.test_planted_stripe_powertools_celery import stripe_md, stripe_row

    w, url = db
    created = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
    offsets = [0, 60, 600, 4 * 86400]  # the first key never ran again
    rows = [
        stripe_row(i + 1, f"k-{i}", 7, created=created, last_run=created + timedelta(seconds=s))
        for i, s in enumerate(offsets)
    ]
    load(w, stripe_md(), {"idempotency_keys": rows})
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("stripe-style"))
        assert led.key_unique  # the no-grouping path
        rep = measure_windows(led, NOW)
    finally:
        eng.dispose()
    assert rep.source == "last_attempt_at"
    (g,) = rep.groups
    # retried: the three whose last run came after their creation; spans 60, 600, 345600:
    # p50 600, p99 at rank 1.98: 600 + 0.98 * 345000 = 338700; 4 d > 72 h, 1 d late
    assert (g.kind, g.operations, g.retried, g.window_source, g.window_s) == ("/rides", 4, 3, "retention", 259200)
    assert (g.p50, g.p99, g.max) == (pytest.approx(600), pytest.approx(338700), pytest.approx(345600))
    assert (g.verdict, g.over, g.late, g.late_max_s, g.suggested_window_s) == (
        "too_short", 1, 1, pytest.approx(86400), 604800,
    )  # fmt: skip
    assert g.lock_timeout_s == 90


def test_the_demo_shows_one_kind_whose_window_is_too_short(tmp_path):
    # The demo's replays (a client retried two days later, after the 24 h window) make payment.capture
    # too short; every other kind's retries come within minutes.
    from idemview.services.demo import DEFAULT_ANCHOR, write_demo

    path = tmp_path / "demo.db"
    planted = write_demo(path)
    eng, led = _open(str(path))
    try:
        rep = measure_windows(led, DEFAULT_ANCHOR)
    finally:
        eng.dispose()
    verdicts = {g.kind: g.verdict for g in rep.groups}
    # one kind too short; every other kind the demo writes (issue 21 added access.grant and
    # report.render) is enough
    assert verdicts.pop("payment.capture") == "too_short"
    assert {"email.send", "invoice.create", "refund.create", "webhook.deliver"} <= set(verdicts)
    assert set(verdicts.values()) == {"enough"}
    top = rep.groups[0]
    assert top.kind == "payment.capture" and top.window_s == 86400
    assert top.late == len(planted.incidents["replay_after_expiry"]) and top.suggested_window_s == 604800
