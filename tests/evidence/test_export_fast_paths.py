"""Issue 27 item 2: the export's whole-column paths give what the per-value ones give.

- time columns (:mod:`idemview.evidence.timecols`): naive UTC texts and epoch floats against
  ``plan._time_converter`` / ``plan._epoch_converter``, with texts and values the column path must
  decline (an offset, ``Z``, spaces, NULL, a non-float, an epoch out of range);
- payload columns of bytes (pickle, binary) and of NULLs against ``plan._payload_converter``;
- a Celery ledger exported whole (SQLite, PostgreSQL, MariaDB) equals the per-value paths byte for
  byte (the column paths and the whole-column bare mark switched off), intent_ref included.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from idemview.evidence import plan, timecols
from idemview.layouts.layout import TimeColumn

_naive_texts = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)).map(lambda d: d.isoformat(" ")),
    st.datetimes().map(lambda d: d.isoformat()),
    st.sampled_from(["2024-05-01 10:00:00Z", " 2024-05-01 10:00:00", "2024-05-01T10:00:00+02:00", "nope", "", "2024"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_naive_texts | st.none(), min_size=1, max_size=20))
def test_naive_utc_text_columns_equal_the_per_value_converter(col):
    tc = TimeColumn(column="date_done", encoding="naive", zone="UTC")
    conv = plan._time_converter(tc, "UTC")
    got = timecols.naive_utc_texts(col)
    if got is not None:
        assert got == [conv(x) for x in col]
        assert [x.tzinfo for x in got] == [conv(x).tzinfo for x in col]
    assert timecols.bulk_for("naive", "UTC", "UTC") is timecols.naive_utc_texts
    assert timecols.bulk_for("naive", "Europe/Paris", "Europe/Paris") is None


def test_naive_utc_texts_decline_what_the_per_value_path_reads_otherwise():
    for odd in ["2024-05-01 10:00:00Z", "2024-05-01T10:00:00+02:00", " 2024-05-01 10:00:00", None, "x"]:
        assert timecols.naive_utc_texts(["2024-05-01 09:00:00.000000", odd]) is None
    assert timecols.naive_utc_texts(["2024-05-01 09:00:00.000000"]) == [datetime(2024, 5, 1, 9)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.floats(min_value=-1e12, max_value=3e11) | st.just(float("nan")) | st.integers(0, 2**40) | st.none(),
        min_size=1,
        max_size=20,
    )
)
def test_epoch_float_columns_equal_from_epoch(col):
    got = timecols.epoch_floats(col)
    if got is not None:
        assert got == [plan.from_epoch(x) for x in col]
        assert all(t.tzinfo is UTC for t in got)
    if set(map(type, col)) != {float}:
        assert got is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40) | st.none() | st.text(max_size=5), min_size=1, max_size=20))
def test_payload_columns_equal_the_per_value_converter(col):
    for enc in ("pickle", "binary", "text", "json", None):
        got = timecols.payload_bulk(enc)(col)
        if got is not None:
            fn = plan._payload_converter(enc)
            assert got == [fn(x) for x in col]
    assert timecols.payload_bulk("pickle")([b"ab", b"abc", b"ab"]) == [
        "pickled, not decoded (2 bytes)",
        "pickled, not decoded (3 bytes)",
        "pickled, not decoded (2 bytes)",
    ]


def _per_cell_marks(make):
    """``make`` (formatting._make_column_cells) with a column marked bare as a whole (_BareColumn)
    given back as one _Bare per cell, the per-value path's cells."""
    from idemview.evidence.formatting import _Bare, _BareColumn

    def made(col, masker, null):
        fn = make(col, masker, null)
        return lambda values: [_Bare(c) for c in out] if type(out := fn(values)) is _BareColumn else out

    return made


def test_celery_export_equals_the_per_value_paths_byte_for_byte(db, tmp_path, monkeypatch):
    """SQLite, PostgreSQL, MariaDB: the column paths (time, payload, integer and instant columns
    marked bare as a whole, a stored column read twice fetched once) switched off give the same
    bytes and the same masking counts."""
    from idemview.domain.filters import Filter
    from idemview.evidence import writer
    from idemview.layouts.layout import load_preset
    from idemview.ledger.connect import open_engine
    from idemview.ledger.reader import Ledger
    from idemview.masking.masker import Masker
    from tests.conftest import ANCHOR
    from tests.ledgers import load
    from tests.presets.test_planted_stripe_powertools_celery import cel_row, celery_md

    rows = []
    for i in range(1, 2601):  # more than one fetched batch and writer chunk
        r = cel_row(
            i,
            f"{hashlib.md5(str(i).encode()).hexdigest()[:8]}-0000-4000-8000-{i:012d}",
            "SUCCESS",
            ANCHOR - timedelta(seconds=37 * i),
            retries=i % 3,
        )
        if i % 97 == 0:
            r.update(status="FAILURE", traceback="postgres://app:hunter2@db/x failed")
        if i % 401 == 0:
            r.update(args=None, kwargs=None, result=None)
        rows.append(r)
    w, url = db
    load(w, celery_md(), {"celery_taskmeta": rows})
    eng = open_engine(url)
    led = Ledger(eng, load_preset("celery"))
    monkeypatch.setattr(plan, "_finding_index", lambda *a, **k: {})
    # date_done is updated_at and locked_at: selected once; absent fields (NULL) once
    kept, aliases = plan._fetched_once(led.op_columns())
    assert aliases == {"t_locked_at": "t_updated_at", "effect_ref": "fingerprint"}
    assert len(kept) == len(led.op_columns()) - 2
    try:
        fast = plan.export_evidence(led, Filter(), tmp_path / "fast.csv", now=ANCHOR, masker=Masker(key=b"k" * 32))
        monkeypatch.setattr(timecols, "naive_utc_texts", lambda col: None)
        monkeypatch.setattr(timecols, "epoch_floats", lambda col: None)
        monkeypatch.setattr(timecols, "payload_bulk", lambda enc: lambda col: None)
        monkeypatch.setattr(writer, "_make_column_cells", _per_cell_marks(writer._make_column_cells))
        monkeypatch.setattr(plan, "_fetched_once", lambda sel: (sel, {}))  # date_done fetched twice
        slow = plan.export_evidence(led, Filter(), tmp_path / "slow.csv", now=ANCHOR, masker=Masker(key=b"k" * 32))
    finally:
        eng.dispose()
    a, b = (tmp_path / "fast.csv").read_bytes(), (tmp_path / "slow.csv").read_bytes()
    assert a == b and fast.masking == slow.masking and fast.rows == 2600
    assert b"hunter2" not in a
