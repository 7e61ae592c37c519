"""Every preset follows its system's state list (issue 12): the documented state tables in
docs/presets/states-and-identity.md are the presets' maps, and a real row of every documented value, on
every engine the system runs on, reads as its documented status; a value outside the list is counted as
unmapped (shown, not hidden)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from idemview.layouts.layout import load_preset, preset_names
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.presets.systems import SYSTEMS, drop_system_schemas, fitted, holds_other_values

DOC = Path(__file__).resolve().parents[2] / "docs" / "presets" / "states-and-identity.md"


@pytest.fixture(autouse=True)
def _system_schemas(request):
    """Each test starts and ends without the systems' PostgreSQL schemas (see drop_system_schemas)."""
    drop_system_schemas(request)
    yield
    drop_system_schemas(request)


def doc_sections() -> dict[str, str]:
    text = DOC.read_text("utf-8")
    parts = re.split(r"^## `([^`]+)`\s*$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def doc_states(preset: str) -> dict[str | None, str]:
    """{raw value (None for `(null)`): normalized status} from the preset's first table."""
    out: dict[str | None, str] = {}
    for line in doc_sections()[preset].splitlines():
        m = re.match(r"^\| `([^`]+)` \| .* \| (\w+) \|$", line.strip())
        if m:
            out[None if m.group(1) == "(null)" else m.group(1)] = m.group(2)
    return out


def engine_name(url: str) -> str:
    return "postgresql" if url.startswith("postgresql") else "mysql" if url.startswith("mysql") else "sqlite"


def test_every_preset_has_a_section():
    assert set(doc_sections()) == set(preset_names())


@pytest.mark.parametrize("preset", [p for p in preset_names() if load_preset(p).status.maps()])
def test_documented_table_is_the_presets_map(preset):
    st = load_preset(preset).status
    expected = dict(st.map)
    if st.null is not None:
        expected[None] = st.null
    assert doc_states(preset) == expected


@pytest.mark.parametrize("preset", sorted(SYSTEMS))
def test_every_documented_state_reads_as_documented(db, preset):
    writable, url = db
    loader, engines, _ = SYSTEMS[preset]
    eng_name = engine_name(url if "://" in url else "sqlite")
    if eng_name not in engines:
        pytest.skip(f"{preset} does not run on {eng_name}")
    table = doc_states(preset)
    values = list(table)
    other = holds_other_values(preset, eng_name)
    if other:
        values.append("NOT_IN_THE_LIST")
    layout, by_key = loader(writable, values)
    eng = open_engine(url)
    try:
        led = Ledger(eng, fitted(layout, eng))
        got = {op.key: (op.raw_status, op.status.value) for op in led.page(limit=1000).rows}
        for key, raw in by_key.items():
            want = table[raw] if raw in table else led.layout.status.default
            assert got[key] == (raw, want), (key, raw)
        unmapped = led.unmapped_counts()
    finally:
        eng.dispose()
    assert unmapped["status"] == ({"NOT_IN_THE_LIST": 1} if other else {})
