"""Issue 6 (scale): the faster SQL keeps its meaning on every engine.

- keyset paging (two index-servable range queries) returns every row once, in order, NULL sort values
  last, whatever the page size;
- the sargable status filter (raw values instead of the normalized CASE) selects exactly the operations
  whose normalized status is asked for, including the default for unmapped raw values;
- the one-pass key profile gives the same findings as the per-kind queries;
- index_warnings() names the missing indexes and nothing else.
"""

from itertools import combinations

import pytest
from sqlalchemy import text

from idemview.domain.filters import Filter
from idemview.domain.model import Status
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger, index_warnings
from idemview.services.demo import generate
from tests.conftest import ANCHOR


def _ledger(db, ops=150):
    writable, url = db
    generate(writable, operations=ops, seed=5)
    with writable.begin() as c:
        # an unmapped raw status (normalized to the default, unknown)
        c.execute(text("UPDATE operations SET status = 'weird' WHERE id = 7"))
    eng = open_engine(url)
    return eng, Ledger(eng, load_preset("idemview"))


def _all_pages(led, flt, sort, desc, limit):
    out, after = [], None
    for _ in range(10_000):
        p = led.page(flt, sort=sort, descending=desc, after=after, limit=limit, now=ANCHOR)
        out += p.rows
        if p.cursor is None:
            return out
        after = p.cursor
    raise AssertionError("paging did not end")


@pytest.mark.parametrize("sort", ["created_at", "expires_at", "attempt_count", "key", "status"])
def test_keyset_pages_cover_every_row_once_in_order(db, sort):
    eng, led = _ledger(db)
    try:
        everything = {op.row_id for op in led.iter_operations()}
        for desc in (False, True):
            for flt in (None, Filter(statuses=[Status.COMPLETED, Status.FAILED])):
                whole = led.page(flt, sort=sort, descending=desc, limit=100_000).rows
                pages = _all_pages(led, flt, sort, desc, limit=17)
                assert [o.row_id for o in pages] == [o.row_id for o in whole]
                ids = [o.row_id for o in pages]
                assert len(ids) == len(set(ids))
                if flt is None:
                    assert set(ids) == everything
                if sort in ("created_at", "attempt_count"):
                    vals = [getattr(o, sort) for o in pages]
                    present = [v for v in vals if v is not None]
                    assert vals == present + [None] * (len(vals) - len(present)), "NULLs come last"
                    assert present == sorted(present, reverse=desc)
                    for a, b in zip(pages, pages[1:], strict=False):
                        if getattr(a, sort) == getattr(b, sort):
                            assert (a.row_id > b.row_id) if desc else (a.row_id < b.row_id)
    finally:
        eng.dispose()


def test_status_filter_selects_the_normalized_statuses(db):
    eng, led = _ledger(db)
    try:
        ops = list(led.iter_operations())
        assert any(o.status == Status.UNKNOWN for o in ops)
        statuses = list(Status)
        for n in (1, 2):
            for combo in combinations(statuses, n):
                got = {o.row_id for o in led.iter_operations(Filter(statuses=list(combo)))}
                assert got == {o.row_id for o in ops if o.status in combo}, combo
    finally:
        eng.dispose()


def test_key_profile_gives_the_same_findings_as_the_per_kind_queries(db):
    eng, led = _ledger(db, ops=400)
    try:

        def keyset(fs):
            return sorted((f.kind.value, f.scope, f.key, f.severity.value, f.explanation) for f in fs)

        with_profile = FindingEngine(led, ANCHOR, use_profile=True).run()
        without = FindingEngine(led, ANCHOR, use_profile=False).run()
        assert keyset(with_profile) == keyset(without)
        assert {f.kind.value for f in with_profile} >= {"duplicate_effect", "key_conflict", "replay_after_expiry"}
    finally:
        eng.dispose()


def test_index_warnings_name_missing_indexes_only(sqlite_db):
    writable, path = sqlite_db
    generate(writable, operations=50, seed=3)
    eng = open_engine(path)
    assert index_warnings(Ledger(eng, load_preset("idemview"))) == []
    eng.dispose()
    with writable.begin() as c:
        c.execute(text("DROP INDEX ix_operations_created_at"))
        c.execute(text("DROP INDEX ix_attempts_scope_key"))
    eng = open_engine(path)
    ws = index_warnings(Ledger(eng, load_preset("idemview")))
    eng.dispose()
    assert sorted((w.table, tuple(w.columns)) for w in ws) == [
        ("attempts", ("scope", "idempotency_key")),
        ("operations", ("created_at",)),
    ]
    assert all("CREATE INDEX" in w.ddl and w.table in w.message for w in ws)
