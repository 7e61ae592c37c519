"""The findings scan runs in another process through a picklable top-level function (issue 11)."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from sqlalchemy import create_engine

from idemview.domain.filters import Filter
from idemview.domain.model import FindingKind, Status
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.services.demo import generate
from idemview.services.scan_process import scan_findings
from tests.conftest import ANCHOR


def test_scan_in_a_worker_process_equals_the_scan_here(tmp_path):
    path = tmp_path / "demo.db"
    w = create_engine(f"sqlite:///{path}")
    generate(w, operations=300, seed=4)
    w.dispose()
    eng = open_engine(str(path))
    here = FindingEngine(Ledger(eng, load_preset("idemview")), ANCHOR).run(
        [FindingKind.UNRESOLVED_FAILURE, FindingKind.DUPLICATE_EFFECT], Filter(statuses=[Status.FAILED])
    )
    eng.dispose()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex:
        out = ex.submit(
            scan_findings,
            str(path),
            "idemview",
            ANCHOR,
            kinds=[FindingKind.UNRESOLVED_FAILURE, FindingKind.DUPLICATE_EFFECT],
            flt=Filter(statuses=[Status.FAILED]),
        ).result(timeout=120)
    assert out.now == ANCHOR
    assert here and [(f.kind, f.key, f.explanation) for f in out.findings] == [
        (f.kind, f.key, f.explanation) for f in here
    ]
    assert FindingKind.HIDDEN_SUCCESS in out.not_checkable
