"""Dedup windows on odd data (DESIGN §5.2): windows that end before they begin, kinds that are NULL or
empty, operations with a single readable time, kinds whose records keep no expiry. Found by trying
``idemview windows`` on invented ledgers; each case on every engine under every dialect name."""

from __future__ import annotations

from datetime import timedelta

import pytest

from idemview.findings.windows import duration_words, late_operations, measure_windows
from tests.unit.test_windows import NOW, T0, H, _open, _Rows


def _measure(dialect_db, rows: _Rows):
    w, url = dialect_db
    rows.load(w)
    eng, led = _open(url)
    try:
        rep = measure_windows(led, NOW)
        return {g.kind: g for g in rep.groups}, led, eng
    except BaseException:
        eng.dispose()
        raise


def test_a_window_ending_before_its_creation_is_shown_negative_and_percent_counts_retries(dialect_db):
    r = _Rows()
    # expires_at an hour before created_at: one retried (10 s span), two never retried; all late
    r.op("refund.create", "neg-1", T0, -H, [0, 10])
    r.op("refund.create", "neg-2", T0, -H, [0])
    r.op("refund.create", "neg-3", T0 + timedelta(minutes=1), -H, [0])
    groups, _led, eng = _measure(dialect_db, r)
    eng.dispose()
    g = groups["refund.create"]
    assert (g.operations, g.retried, g.late, g.over, g.over_retried) == (3, 1, 3, 3, 1)
    assert g.window_s == -H and g.verdict == "too_short"
    # one retry of one came later: 100 %, not 300 % (the late single requests are no retries)
    assert g.sentence.startswith("refund.create: window -1 h; 100 % of retries came later, the latest 10 s")
    assert "3 operations got a request after the key had expired, up to 1 h 0 min after" not in g.sentence
    assert "3 operations got a request after the key had expired, up to 1 h after" in g.sentence


def test_null_and_empty_kinds_are_two_labelled_groups(dialect_db):
    r = _Rows()
    r.op(None, "k-null", T0, H, [0, 120])
    r.op("", "k-empty", T0, H, [0, 2 * H])  # too late
    groups, led, eng = _measure(dialect_db, r)
    try:
        lates_empty = late_operations(led, "")
        lates_null = late_operations(led, None)
    finally:
        eng.dispose()
    assert set(groups) == {None, ""}
    assert groups[None].label == "(no kind)" and groups[""].label == "(empty kind)"
    assert groups[""].sentence.startswith("(empty kind): window 1 h; 100 % of retries came later")
    assert groups[None].verdict == "enough" and groups[""].verdict == "too_short"
    assert [x["key"] for x in lates_empty] == ["k-empty"] and lates_null == []


def test_an_operation_with_one_readable_time_has_no_span(dialect_db):
    r = _Rows()
    r.op("email.send", "a", T0, 24 * H, [0, 600])
    r.op("email.send", "b", T0, 24 * H, [0, 1200])
    r.op("email.send", "c", T0, 24 * H, [0, 1800])
    # both attempts' starts missing: only the record's creation can be read, so no span (not a span of 0)
    r.op("email.send", "one-time", T0, 24 * H, [None, None])
    groups, _led, eng = _measure(dialect_db, r)
    eng.dispose()
    g = groups["email.send"]
    assert (g.operations, g.retried, g.partly_unreadable, g.unreadable) == (4, 3, 1, 0)
    # spans 600, 1200, 1800: p50 the middle one (each alone in its histogram bucket)
    assert g.p50 == pytest.approx(1200, abs=1e-3) and g.max == pytest.approx(1800, abs=1e-3)


def test_a_kind_whose_records_keep_no_expiry(dialect_db):
    r = _Rows()
    r.op("payments.capture", "p-1", T0, H, [0, 60])
    r.op("webhook.deliver", "w-1", T0, H, [0, 60])
    w, _url = dialect_db
    groups, _led, eng = _measure(dialect_db, r)
    eng.dispose()
    with w.begin() as c:
        c.exec_driver_sql("UPDATE operations SET expires_at = NULL WHERE kind = 'webhook.deliver'")
    eng, led = _open(dialect_db[1])
    try:
        groups = {g.kind: g for g in measure_windows(led, NOW).groups}
    finally:
        eng.dispose()
    wh = groups["webhook.deliver"]
    assert (wh.window_s, wh.window_source, wh.verdict) == (None, None, "unknown")
    assert wh.reason == "no record of this kind has a readable expiry (expires_at)"
    assert groups["payments.capture"].window_source == "expires_at"


def test_duration_words_signs_and_rounding():
    assert duration_words(-3600) == "-1 h"
    assert duration_words(-90) == "-90 s"
    # 59 min 36 s rounds to an hour: "1 h", not "60 min"
    assert duration_words(3576) == "1 h" and duration_words(3569) == "59 min"


def test_control_and_bidi_characters_in_a_kind_are_shown_escaped(sqlite_db, capsys):
    from idemview.cli import main

    w, path = sqlite_db
    r = _Rows()
    r.op("evil\x1b[2J\nfake.kind: [enough]", "x-1", T0, H, [0, 2 * H])  # a forged second line
    r.op("pay\u202ement.capture", "x-2", T0, H, [0, 60])  # right-to-left override
    r.load(w)
    assert main(["windows", path, "--layout", "idemview", "--now", "2026-05-03T12:00:00Z"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    assert "evil\\u001b[2J\\u000afake.kind: [enough]  [too_short]" in out
    assert not any(line.startswith("fake.kind") for line in out.splitlines())
    assert "  pay\\u202ement.capture: window 1 h; every retry came within it" in out


def test_blob_kinds_on_sqlite_are_ordered_shown_as_text_and_masked(sqlite_db, capsys):
    """SQLite keeps whatever type a row was written with: a kind column holding BLOBs beside text
    crashed ``idemview windows`` (ordering bytes against str); shown, a BLOB kind was Python's
    ``b'...'`` and its card number unmasked. Now: UTF-8 BLOBs read as their text, others escaped as
    the grid shows them, every kind masked, in text and JSON."""
    import json

    from idemview.cli import main

    w, path = sqlite_db
    r = _Rows()
    r.op("billing.charge", "x-1", T0, H, [0, 60])
    r.op("refund card 4111111111111111", "x-2", T0, H, [0, 60])  # text, masked already
    r.op("mail.send", "x-3", T0, H, [0, 60])
    r.op("blob.a", "x-4", T0, H, [0, 60])
    r.load(w)
    with w.begin() as c:
        c.exec_driver_sql("UPDATE operations SET kind = CAST(kind AS BLOB) WHERE idempotency_key IN ('x-3', 'x-4')")
        c.exec_driver_sql(
            "UPDATE operations SET kind = CAST('charge 4111111111111111' AS BLOB) WHERE idempotency_key = 'x-4'"
        )
        c.exec_driver_sql("UPDATE operations SET kind = x'ff6b696e64' WHERE idempotency_key = 'x-1'")
        assert c.exec_driver_sql("SELECT count(*) FROM operations WHERE typeof(kind) = 'blob'").scalar() == 3
    now = ["--now", "2026-05-03T12:00:00Z"]
    assert main(["windows", path, "--layout", "idemview", *now]) == 0
    out = capsys.readouterr().out
    assert "b'" not in out and "4111111111111111" not in out
    heads = [line.split("  [")[0] for line in out.splitlines() if "  [" in line and not line.startswith(" ")]
    assert "mail.send" in heads and "\\xffkind" in heads
    assert any(h.startswith("charge [card#") for h in heads)
    assert main(["windows", path, "--layout", "idemview", "--format", "json", *now]) == 0
    kinds = sorted(g["kind"] for g in json.loads(capsys.readouterr().out)["groups"])
    assert "mail.send" in kinds and "\\xffkind" in kinds
    assert not any("4111111111111111" in k for k in kinds)
