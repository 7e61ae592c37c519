"""Golden evidence files: the CSV and manifest exported from a fixed demo ledger at a fixed ``now`` are
compared byte for byte with ``tests/evidence/golden/``.

What is inherently variable is fixed or normalised, nothing else:
- the masking key: a fixed 32-byte key is injected (``Masker(key=GOLDEN_KEY)``), so tags are stable;
- the export time: the manifest's ``exported_at`` is replaced by ``GOLDEN_EXPORTED_AT`` before comparing;
- the ledger's path: the ledger is opened by a relative name from a temporary working directory.

A deliberate change of the export format, the masking rules, the demo ledger or a finding's wording shows
up here as a diff; regenerate with ``IDEMVIEW_UPDATE_GOLDEN=1 pytest tests/evidence/test_golden.py`` and
review the diff of the golden files like code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from idemview.evidence.plan import export_evidence
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.masking.masker import Masker
from idemview.services.demo import write_demo
from tests.conftest import ANCHOR

GOLDEN = Path(__file__).parent / "golden"
GOLDEN_KEY = bytes(range(32))
GOLDEN_EXPORTED_AT = "2026-11-30T12:00:00Z"
UPDATE = os.environ.get("IDEMVIEW_UPDATE_GOLDEN") == "1"


def _normalise_manifest(data: bytes) -> bytes:
    doc = json.loads(data)
    assert doc["exported_at"].endswith("Z")  # present and UTC; its value is the moment of export
    doc["exported_at"] = GOLDEN_EXPORTED_AT
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("golden")
    write_demo(d / "demo.db", operations=40, seed=3)
    return d


@pytest.mark.parametrize("rows", ["operations", "attempts", "findings"])
def test_export_matches_the_golden_files(rows, demo_dir, monkeypatch):
    monkeypatch.chdir(demo_dir)
    engine = open_engine("demo.db")
    try:
        ledger = Ledger(engine, load_preset("idemview"), name="demo.db")
        res = export_evidence(ledger, None, f"{rows}.csv", rows=rows, now=ANCHOR, masker=Masker(key=GOLDEN_KEY))
    finally:
        engine.dispose()
    csv_bytes = Path(res.path).read_bytes()
    manifest = _normalise_manifest(Path(res.manifest_path).read_bytes())
    want_csv, want_manifest = GOLDEN / f"{rows}.csv", GOLDEN / f"{rows}.csv.manifest.json"
    if UPDATE:
        want_csv.write_bytes(csv_bytes)
        want_manifest.write_bytes(manifest)
    assert csv_bytes == want_csv.read_bytes(), f"{rows}.csv differs from {want_csv}"
    assert manifest == want_manifest.read_bytes(), f"{rows} manifest differs from {want_manifest}"
