"""Property (issue #9 suites): arbitrary bytes in every text column of the reference (``idemview``)
layout on SQLite never abort anything. Scan, every export kind, every grid page and every detail
complete; every stored operation and attempt is read and counted; an undecodable key found on a page
is found again by its detail lookup."""

from __future__ import annotations

import csv
import tempfile
from datetime import UTC
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from idemview.domain.filters import Filter
from idemview.evidence.plan import export_evidence
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.services.demo import reference_metadata
from idemview.services.session import SharedMasker, fetch_page, load_detail
from tests.conftest import ANCHOR

OP_TEXT = (
    "scope",
    "idempotency_key",
    "kind",
    "status",
    "request_hash",
    "intent_ref",
    "effect_ref",
    "created_at",
    "updated_at",
    "completed_at",
    "locked_at",
    "lock_expires_at",
    "expires_at",
    "request_body",
    "response_body",
    "error",
    "attempt_count",
)
ATT_TEXT = (
    "scope",
    "idempotency_key",
    "started_at",
    "finished_at",
    "outcome",
    "request_hash",
    "effect_ref",
    "worker",
    "error",
    "attempt_no",
)
NOT_NULL = {"scope", "idempotency_key", "status", "outcome", "attempt_count", "attempt_no"}

# Bytes worth trying: arbitrary ones, plus fragments that look like real values (valid and broken
# UTF-8, ISO times, JSON, numbers, the escaped spelling of bytes) so that keys collide and times parse.
_SEEDS = [
    b"",
    b"k",
    b"K",
    b"k ",
    b"\xff\xfeA",
    b"\\xff\\xfeA",
    b"succeeded",
    b"running",
    b"failed",
    b"2026-11-30 11:00:00",
    b"2026-11-30T10:00:00Z",
    b"0000-00-00 00:00:00",
    b'{"a": 1}',
    b"[1,",
    b"7",
    b"many",
    b"1e20",
    b"-1",
    b"caf\xc3\xa9",
    b"caf\xe9",
    b"\x00",
    b"\xed\xa0\x80",
]
cell = st.one_of(st.none(), st.sampled_from(_SEEDS), st.binary(max_size=10))
op_row = st.fixed_dictionaries({c: cell for c in OP_TEXT})
att_row = st.fixed_dictionaries({c: cell for c in ATT_TEXT})


def _write(path: Path, ops: list[dict], atts: list[dict]) -> None:
    w = create_engine(f"sqlite:///{path}")
    reference_metadata().create_all(w)
    with w.begin() as c:
        for table, rows in (("operations", ops), ("attempts", atts)):
            for i, r in enumerate(rows, 1):
                cols = ["id"] + list(r)
                vals = [":id"] + [f"CAST(:{c} AS TEXT)" for c in r]
                params = {"id": i}
                for k, v in r.items():
                    params[k] = b"" if v is None and k in NOT_NULL else v
                c.execute(text(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(vals)})"), params)
    w.dispose()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op_row, min_size=1, max_size=4), atts=st.lists(att_row, max_size=4), link=st.booleans())
def test_arbitrary_bytes_never_abort(ops, atts, link):
    if link:  # attempts of the first operation, so joins and per-key findings see the odd bytes
        for a in atts:
            a["scope"], a["idempotency_key"] = ops[0]["scope"], ops[0]["idempotency_key"]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "l.db"
        _write(path, ops, atts)
        eng = open_engine(str(path))
        try:
            led = Ledger(eng, load_preset("idemview"))
            now = ANCHOR.astimezone(UTC)
            findings = FindingEngine(led, now).run()
            assert led.counts() == (len(ops), len(atts))
            masker = SharedMasker()
            # every grid page, by every sort, then every detail
            for sort in ("created_at", "key", "scope", "status", "attempt_count", "expires_at"):
                seen, after = [], None
                for _ in range(len(ops) + 2):
                    rows, after = fetch_page(led, masker, Filter(), sort, False, after, 2, now, None)
                    seen += rows
                    if after is None:
                        break
                assert after is None and len(seen) == len(ops), sort
            for r in seen:
                det = load_detail(led, masker, r.scope_raw, r.key_raw, [], {})
                assert det.records, "the detail lookup finds the row the page showed"
            for rows, n in (("operations", len(ops)), ("attempts", len(atts)), ("findings", len(findings))):
                out = Path(d) / f"{rows}.csv"
                res = export_evidence(led, Filter(), out, rows=rows, now=now)
                with open(out, newline="", encoding="utf-8") as f:
                    assert len(list(csv.DictReader(f))) == res.rows == n
            # a filtered export (attempts joined to the operations) reads the odd bytes too
            export_evidence(led, Filter(key="k"), Path(d) / "f.csv", rows="attempts", now=now)
        finally:
            eng.dispose()
