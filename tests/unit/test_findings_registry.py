"""The findings registry: one rule object per kind, iterated by the engine in report order."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine

from idemview.domain.filters import Filter
from idemview.domain.model import Finding, FindingKind, Severity, Status
from idemview.findings import registry
from idemview.findings.engine import FindingEngine
from idemview.findings.rules import FindingRule
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.services.demo import generate
from tests.conftest import ANCHOR


def test_every_kind_has_one_rule_in_report_order():
    assert registry.kinds() == list(FindingKind)
    for r in registry.rules():
        assert registry.rule(r.kind) is r
        assert isinstance(r.severity, Severity)


def test_registering_a_kind_twice_is_refused():
    with pytest.raises(ValueError, match="registered already"):
        registry.register(registry.rule(FindingKind.RETRY_STORM))


@pytest.fixture()
def demo(tmp_path):
    path = tmp_path / "demo.db"
    w = create_engine(f"sqlite:///{path}")
    planted = generate(w, operations=300, seed=3)
    w.dispose()
    eng = open_engine(str(path))
    yield Ledger(eng, load_preset("idemview")), planted
    eng.dispose()


def test_engine_runs_what_the_registry_holds(demo, monkeypatch):
    led, planted = demo
    calls = []

    class Probe(FindingRule):
        kind = FindingKind.RETRY_STORM
        severity = Severity.LOW

        def selects(self, e):
            return []

        def run(self, e, c):
            calls.append(e.now)
            return [Finding(self.kind, self.severity, "s", "probe", "probe", [])]

    original = registry.rule(FindingKind.RETRY_STORM)
    registry.register(Probe(), replace=True)
    try:
        fs = FindingEngine(led, ANCHOR).run([FindingKind.RETRY_STORM, FindingKind.EXPIRED_KEY])
    finally:
        registry.register(original, replace=True)
    assert calls == [ANCHOR]
    assert [f.key for f in fs if f.kind == FindingKind.RETRY_STORM] == ["probe"]
    assert registry.kinds() == list(FindingKind)  # the swap kept the order


def test_run_with_a_filter_keeps_only_the_filtered_operations(demo):
    led, planted = demo
    every = FindingEngine(led, ANCHOR).run()
    failed = FindingEngine(led, ANCHOR).run(flt=Filter(statuses=[Status.FAILED]))
    failed_keys = {(r.scope, r.key) for r in led.iter_operations(Filter(statuses=[Status.FAILED]))}
    want = [f for f in every if (f.scope, f.key) in failed_keys]
    assert want, "the demo has findings on failed operations"
    assert [(f.kind, f.scope, f.key) for f in failed] == [(f.kind, f.scope, f.key) for f in want]
    assert len(failed) < len(every)
