"""Issue 19, item 20: ``scan --format json`` is one strict JSON object (no key twice, no NaN) of the shape
DESIGN §9 gives (tests/scan_json.py holds the JSON Schema), on the demo with and without its effects
source and on every preset's own tables that SQLite can hold, with unmapped values."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine

from idemview.cli import main
from tests.presets.systems import SYSTEMS, holds_other_values
from tests.presets.test_state_tables import doc_states
from tests.scan_json import DuplicateKey, check_scan_json, strict_loads

ANCHOR = "2026-11-30T12:00:00Z"


def scan_json(capsys, *argv) -> dict:
    code = main(["scan", *argv, "--now", ANCHOR, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return check_scan_json(out)


def test_the_strict_parser_refuses_twins_and_constants():
    with pytest.raises(DuplicateKey):
        strict_loads('{"a": {"b": 1}, "unmapped": {}, "unmapped": {}}')
    with pytest.raises(ValueError):
        strict_loads('{"x": NaN}')
    assert strict_loads('{"a": [{"b": 1}, {"b": 2}]}') == {"a": [{"b": 1}, {"b": 2}]}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    assert main(["demo", str(path), "--operations", "300", "--seed", "5"]) == 0
    return path


def test_demo_scan_json_fits_the_schema(capsys, demo):
    doc = scan_json(capsys, str(demo))
    assert doc["layout"] == "idemview" and doc["unmapped"] == {"status": {}, "outcome": {}}
    assert doc["findings"] and doc["operations"] > 0
    with_fx = scan_json(capsys, str(demo), "--layout", str(demo.with_name("demo-layout.toml")))
    assert "effects" in with_fx
    assert {"hidden_success", "orphan_effect"} <= set(with_fx["counts"])


@pytest.mark.parametrize("preset", sorted(p for p, (_l, engines, _o) in SYSTEMS.items() if "sqlite" in engines))
def test_preset_scan_json_fits_the_schema(capsys, tmp_path, preset):
    loader = SYSTEMS[preset][0]
    values = list(doc_states(preset))
    other = holds_other_values(preset, "sqlite")
    if other:
        values.append("NOT_IN_THE_LIST")
    path = tmp_path / "ledger.db"
    w = create_engine(f"sqlite:///{path}")
    try:
        layout, _by_key = loader(w, values)
    finally:
        w.dispose()
    doc = scan_json(capsys, str(path), "--layout", layout.name)
    assert doc["layout"] == layout.name
    assert doc["operations"] == len(values)
    assert doc["unmapped"]["status"] == ({"NOT_IN_THE_LIST": 1} if other else {})
