"""Export memory is bounded by bytes, not rows (issue 11): 5 MB cells must not pile up by the thousand."""

from __future__ import annotations

import tracemalloc

from sqlalchemy import Column, Integer, MetaData, Table, Text, create_engine, insert, select

from idemview.evidence.plan import stream_rows
from idemview.evidence.writer import ColumnSpec, write_evidence
from idemview.masking.masker import Masker

MB = 1 << 20


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_csv_is_written_out_by_bytes(tmp_path):
    def rows():
        for i in range(40):  # 40 cells of 2 MB: 80 MB in all
            yield (i, ("x" * 63 + "\n") * (2 * MB // 64))

    def run():
        write_evidence(
            tmp_path / "big.csv",
            [ColumnSpec("n", "integer"), ColumnSpec("body", "text")],
            rows(),
            masker=Masker(),
            manifest={"rows": {"kind": "test"}},
        )

    peak = _peak(run)
    assert (tmp_path / "big.csv").stat().st_size > 80 * MB
    assert peak < 40 * MB, f"peak {peak / MB:.0f} MB: the rows were held until the 1000-row batch"


def test_fetches_are_sized_by_bytes(tmp_path):
    path = tmp_path / "cells.db"
    eng = create_engine(f"sqlite:///{path}")
    md = MetaData()
    t = Table("t", md, Column("id", Integer, primary_key=True), Column("body", Text))
    md.create_all(eng)
    with eng.begin() as c:
        for i in range(30):  # 30 cells of 1 MB
            c.execute(insert(t), {"id": i, "body": chr(97 + i % 26) * MB})
    seen = []

    def run():
        with eng.connect() as c:
            for r in stream_rows(c, select(t.c.id, t.c.body), [1], batch_bytes=2 * MB):
                seen.append(r[0])

    peak = _peak(run)
    eng.dispose()
    assert seen == list(range(30))
    assert peak < 12 * MB, f"peak {peak / MB:.0f} MB: more rows were fetched than 2 MB hold"
