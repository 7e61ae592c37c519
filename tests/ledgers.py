"""Helpers to build fixture ledgers from a system's table definitions and scan them read-only."""

from __future__ import annotations

from sqlalchemy import MetaData, insert

from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger


def load(writable, md: MetaData, rows: dict[str, list[dict]]) -> None:
    """Create ``md``'s tables on the writable engine (dropping them first) and insert ``rows``."""
    md.drop_all(writable)
    md.create_all(writable)
    with writable.begin() as c:
        for t in md.sorted_tables:
            if rows.get(t.name):
                c.execute(insert(t), rows[t.name])


def scan(url: str, layout: str, now, **overrides) -> tuple[set[tuple[str, str, str]], list]:
    """Open ``url`` read-only with preset ``layout`` and return ({(kind, scope, key)}, findings)."""
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset(layout), **overrides)
        fs = FindingEngine(led, now).run()
    finally:
        eng.dispose()
    return {(f.kind.value, f.scope, f.key) for f in fs}, fs
