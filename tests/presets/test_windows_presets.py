"""``windows`` on every preset's fixture, on every engine its system runs on (issue #22): it runs in
the engine, and a ledger without attempt times says ``unknown`` with the reason instead of a verdict."""

from __future__ import annotations

import pytest

from idemview.findings.windows import measure_windows, span_source
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.presets.systems import NOW, SYSTEMS, drop_system_schemas, fitted
from tests.presets.test_state_tables import doc_states, engine_name


@pytest.fixture(autouse=True)
def _system_schemas(request):
    drop_system_schemas(request)
    yield
    drop_system_schemas(request)


@pytest.mark.parametrize("preset", sorted(SYSTEMS))
def test_windows_runs_on_every_preset(db, preset):
    writable, url = db
    loader, engines, _ = SYSTEMS[preset]
    if engine_name(url if "://" in url else "sqlite") not in engines:
        pytest.skip(f"{preset} does not run on this engine")
    layout, by_key = loader(writable, list(doc_states(preset)))
    eng = open_engine(url)
    try:
        led = Ledger(eng, fitted(layout, eng))
        source, why = span_source(led)
        rep = measure_windows(led, NOW)
    finally:
        eng.dispose()
    assert sum(g.operations for g in rep.groups) == len(by_key)
    assert rep.source == source
    for g in rep.groups:
        assert g.verdict in ("too_short", "enough", "unknown") and g.sentence.startswith(g.label + ":")
        if source is None:
            assert (g.verdict, g.reason, g.max) == ("unknown", why, None)
