"""The export's findings column reads expired_key's keys in SQL (no Finding object per key, issue 11):
it must hold exactly what the findings engine reports, key for key and in report order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine

from idemview.domain.model import LEDGER_KINDS
from idemview.evidence.plan import _finding_index
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine, parse_url
from idemview.ledger.reader import Ledger
from idemview.services.demo import generate

ANCHOR = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("days_later", [0, 3])  # 3 days on, every key of the demo has expired
def test_findings_column_equals_the_engine(tmp_path, days_later):
    p = tmp_path / "ledger.db"
    w = create_engine(f"sqlite:///{p}")
    generate(w, operations=600, anchor=ANCHOR)
    w.dispose()
    eng = open_engine(parse_url(str(p)))
    try:
        led = Ledger(eng, load_preset("idemview"))
        now = ANCHOR + timedelta(days=days_later)
        slow: dict[tuple[str, str], list[str]] = {}
        for f in FindingEngine(led, now).run():
            if f.kind in LEDGER_KINDS:
                continue  # secret_at_rest is about a column, not an operation: no row carries it
            slow.setdefault((f.scope, f.key), []).append(f.kind.value)
        fast = _finding_index(led, now)
        assert fast == slow
        assert sum("expired_key" in v for v in fast.values()) > (500 if days_later else 10)
        # several records of one key (the demo's duplicates) still give the kind once
        assert all(len(v) == len(set(v)) for v in fast.values())
    finally:
        eng.dispose()
