"""Issue 20 §8: the detail of a duplicate effect says why dedup failed, computed from the evidence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from idemview.domain.model import Attempt, Operation, Outcome, Status
from idemview.services.session import Detail
from idemview.services.why import span_words, why_duplicate

T0 = datetime(2026, 6, 15, 12, tzinfo=UTC)


def _op(**kw):
    base = dict(scope="acme", key="k1", status=Status.COMPLETED, raw_status="completed", created_at=T0)
    base.update(kw)
    return Operation(**base)


def _detail(recs, atts, window_s=None, effects=()):
    return Detail("acme", "k1", recs, atts, [], {}, window_s, None, list(effects))


def _att(n, start_s, end_s, outcome=Outcome.SUCCEEDED):
    return Attempt("acme", "k1", n, T0 + timedelta(seconds=start_s), T0 + timedelta(seconds=end_s), outcome)


def test_second_success_inside_the_window():
    d = _detail([_op(expires_at=T0 + timedelta(hours=24))], [_att(1, 0, 2), _att(2, 7, 9)])
    assert why_duplicate(d)[0].startswith("Attempt #2 started 5 s after #1 succeeded, inside the 24 h dedup window")


def test_after_the_window_and_concurrent_and_two_records():
    late = _detail([_op(expires_at=T0 + timedelta(minutes=10))], [_att(1, 0, 1), _att(2, 3600, 3601)])
    s = why_duplicate(late)[0]
    assert "60 min after #1 succeeded" in s and "after the 10 min dedup window had ended" in s
    both = _detail([_op()], [_att(1, 0, 30), _att(2, 10, 40)], window_s=3600)
    assert "while #1 was still running (20 s before it finished)" in why_duplicate(both)[0]
    recs = [_op(completed_at=T0 + timedelta(seconds=1)), _op(created_at=T0 + timedelta(seconds=4))]
    assert any("3 s after the first" in w and "no unique constraint" in w for w in why_duplicate(_detail(recs, [])))
    assert why_duplicate(_detail([_op()], [_att(1, 0, 1), _att(2, 5, 6, Outcome.FAILED)])) == []
    assert span_words(86400) == "24 h" and span_words(0.25) == "250 ms" and span_words(3 * 86400) == "3 d"
