"""Issue 25 item 2: a finding kind is one object and one registration. A toy kind from outside the
package (tests/toykind.py), found through the ``idemview.finding_kinds`` entry point, shows up in
``list(FindingKind)``, every derived table, ``scan --format json``, the filter sentence and an export;
removed again, it leaves nothing behind, and a kind object never misses a table entry (no KeyError)."""

from __future__ import annotations

import csv
import json
import pickle
import sqlite3

import pytest

from idemview.cli import main
from idemview.domain.filters import Filter
from idemview.domain.kinds import KIND_PHRASES, KIND_SHORT
from idemview.domain.model import DEFAULT_SEVERITY, LEDGER_KINDS, FindingKind, Severity
from idemview.domain.palette import KIND_WORDS, kind_colour, kind_glyph
from idemview.findings import registry
from idemview.findings.definitions import DEFINITIONS, definition
from tests.scan_json import check_scan_json
from tests.toykind import RULES, TOY, install_entry_point

NOW = "2026-11-30T12:00:00Z"
BUILTIN = [
    "duplicate_effect",
    "replay_after_expiry",
    "key_conflict",
    "duplicate_intent",
    "stuck_in_progress",
    "unresolved_failure",
    "retry_storm",
    "expired_key",
    "hidden_success",
    "orphan_effect",
    "secret_at_rest",
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    assert main(["demo", str(path), "--operations", "300", "--seed", "5"]) == 0
    return path


def failed_refs(path) -> set[tuple[str, str]]:
    with sqlite3.connect(path) as c:
        return set(c.execute("SELECT scope, idempotency_key FROM operations WHERE status = 'failed'"))


@pytest.fixture
def toy(tmp_path, monkeypatch):
    install_entry_point(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    added = registry.load_plugins()
    try:
        yield added
    finally:
        registry.unregister(TOY)


def test_the_entry_point_registers_the_kind_in_every_table(toy):
    assert toy == [TOY]
    assert [k.value for k in FindingKind] == [*BUILTIN, "toy_failed_record"]  # after the built-ins
    assert registry.kinds() == list(FindingKind) and registry.rule(TOY) is RULES[0]
    assert FindingKind("toy_failed_record") is TOY and FindingKind.TOY_FAILED_RECORD is TOY
    assert DEFAULT_SEVERITY[TOY] is Severity.LOW and RULES[0].severity is Severity.LOW
    assert (KIND_WORDS[TOY], KIND_SHORT[TOY], KIND_PHRASES[TOY]) == (
        "toy failed record",
        "toy",
        "with a toy failed record",
    )
    assert TOY not in LEDGER_KINDS and len(DEFAULT_SEVERITY) == 12
    assert (kind_glyph(TOY), kind_colour(TOY)) == ("✱", ("#6a1b9a", "#ce93d8"))
    assert TOY in DEFINITIONS and definition(TOY).fields == ("status",)
    assert registry.load_plugins() == []  # loading again adds nothing


def test_the_filter_sentence_names_the_toy_kind(toy):
    flt = Filter(findings=[TOY, FindingKind.RETRY_STORM])
    assert "with a toy failed record or in a retry storm" in flt.sentence()
    back = Filter.from_dict(json.loads(json.dumps(flt.to_dict())))
    assert back.findings == [TOY, FindingKind.RETRY_STORM] and back.findings[0] is TOY


def test_scan_json_reports_the_toy_kind(toy, demo, capsys):
    assert main(["scan", str(demo), "--now", NOW, "--format", "json"]) == 0
    doc = check_scan_json(capsys.readouterr().out)
    toys = [f for f in doc["findings"] if f["kind"] == "toy_failed_record"]
    want = failed_refs(demo)
    assert want and {(f["scope"], f["key"]) for f in toys} == want and len(toys) == len(want)
    assert {f["severity"] for f in toys} <= {"low", "medium", "high", "critical"}  # weighed by action class
    assert doc["counts"]["toy_failed_record"] == len(want)


def test_export_of_the_toy_kind_gives_exactly_its_operations(toy, demo, tmp_path, capsys):
    out = tmp_path / "toy.csv"
    code = main(["export", str(demo), "--now", NOW, "--finding", "toy_failed_record", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {(r["scope"], r["idempotency_key"]) for r in rows} == failed_refs(demo)
    assert all("toy_failed_record" in r["findings"].split() for r in rows)
    manifest = json.loads((tmp_path / "toy.csv.manifest.json").read_text())
    assert manifest["filter"]["structured"]["findings"] == ["toy_failed_record"]
    assert manifest["filter"]["sentence"] == Filter(findings=[TOY]).sentence()
    assert "with a toy failed record" in manifest["filter"]["sentence"]


def test_unregistered_the_kind_is_gone_but_its_object_still_describes_itself(demo, tmp_path, capsys):
    assert [k.value for k in FindingKind] == BUILTIN
    with pytest.raises(ValueError):
        FindingKind("toy_failed_record")
    out = str(tmp_path / "x.csv")
    assert main(["export", str(demo), "--now", NOW, "--finding", "toy_failed_record", "--out", out]) != 0
    assert "unknown finding kind 'toy_failed_record'" in capsys.readouterr().err
    # a kind object never misses a table entry: no KeyError in a view that gets one
    assert (KIND_WORDS[TOY], KIND_SHORT[TOY], DEFAULT_SEVERITY[TOY]) == ("toy failed record", "toy", Severity.LOW)
    with pytest.raises(KeyError):
        KIND_WORDS["no_such_kind"]
    # pickled (to the findings process) and back: the registered object, or a copy carrying the description
    assert pickle.loads(pickle.dumps(FindingKind.RETRY_STORM)) is FindingKind.RETRY_STORM
    copy = pickle.loads(pickle.dumps(TOY))
    assert copy == "toy_failed_record" and copy.words == "toy failed record" and copy.glyph == "✱"


def test_kinds_behave_as_the_str_enum_they_replace():
    k = FindingKind.DUPLICATE_EFFECT
    assert k == "duplicate_effect" and k.value == "duplicate_effect" and k.name == "DUPLICATE_EFFECT"
    assert {k: 1}["duplicate_effect"] == 1 and f"{k}" == "duplicate_effect" and str(k) == "FindingKind.DUPLICATE_EFFECT"
    assert "duplicate_effect" in FindingKind and "nope" not in FindingKind and len(FindingKind) == len(BUILTIN)
    assert json.dumps({"kind": k}) == '{"kind": "duplicate_effect"}'
    with pytest.raises(ValueError, match="built-in"):
        registry.unregister(FindingKind.RETRY_STORM)
    with pytest.raises(ValueError, match="lower-case identifier"):
        FindingKind.define("Bad Kind", severity=Severity.LOW)
    other = FindingKind.define("duplicate_effect", severity=Severity.LOW)
    with pytest.raises(ValueError, match="registered already"):
        registry.register(type("Clash", (RULES[0].__class__,), {"kind": other})())
    assert FindingKind("duplicate_effect") is k  # the clash changed nothing
