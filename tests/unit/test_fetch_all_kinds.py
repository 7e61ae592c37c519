"""rule_base.fetch_all notes the operation kinds that rows bring (``op_kind``) for weighing; a rule
may run several selects of which only some carry it (retry_storm: records with a counter, then
attempts counted per key): each select's rows are read by their own columns."""

from __future__ import annotations

from types import SimpleNamespace

from sqlalchemy import create_engine, literal_column, select

from idemview.findings.rule_base import fetch_all


def _sel(scope, key, kind=None):
    cols = [literal_column(f"'{scope}'").label("scope"), literal_column(f"'{key}'").label("key")]
    if kind is not None:
        cols.append(literal_column("NULL" if kind == "" else f"'{kind}'").label("op_kind"))
    return select(*cols)


def test_mixed_selects_and_null_kinds():
    eng = create_engine("sqlite://")
    with eng.connect() as c:
        for unique, want in ((False, {("s", "a"): "charge"}), (True, {("s", "a"): "charge", ("s", "n"): None})):
            e = SimpleNamespace(op_kinds={}, l=SimpleNamespace(key_unique=unique))
            # no op_kind first, then a kind, then a NULL kind (known only where a record is the operation)
            rows = fetch_all(c, [_sel("s", "b"), _sel("s", "a", "charge"), _sel("s", "n", "")], e)  # type: ignore[arg-type]
            assert [(r.scope, r.key) for r in rows] == [("s", "b"), ("s", "a"), ("s", "n")]
            assert e.op_kinds == want
        # a kind already known is kept; no engine: nothing noted
        e = SimpleNamespace(op_kinds={("s", "a"): "refund"}, l=SimpleNamespace(key_unique=False))
        fetch_all(c, [_sel("s", "a", "charge")], e)  # type: ignore[arg-type]
        assert e.op_kinds == {("s", "a"): "refund"}
        assert len(fetch_all(c, [_sel("s", "a", "charge")])) == 1
