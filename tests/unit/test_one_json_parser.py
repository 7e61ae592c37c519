"""Ledger JSON is parsed in one place (issue 19, item 11): :func:`idemview.domain.jsontext.loads`, which
bounds the nesting depth without recursion. A new ``json.loads`` on ledger data elsewhere would bring the
RecursionError back on a deeply nested cell (the ledger audit did, found when the branches merged), so
this test reads the source and allows only the calls that parse idemview's own documents."""

from __future__ import annotations

import ast
from pathlib import Path

import idemview

ROOT = Path(idemview.__file__).parent

#: module -> why its json.loads never sees ledger data
ALLOWED = {
    "domain/jsontext.py": "the chokepoint itself",
    "evidence/reading.py": "idemview's own manifests, size-capped, RecursionError reported as a mismatch",
    "evidence/manifest.py": "a round trip of idemview's own manifest values; verify reads its own manifest",
    "masking/rules.py": "a round trip of the user's [masking] settings for the manifest",
    "services/demo_effects.py": "the demo's own request bodies, written by the demo",
}


def _json_parse_calls(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("loads", "load"):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id in ("json", "orjson", "_orjson", "ujson", "simplejson"):
                lines.append(node.lineno)
    return lines


def test_ledger_json_is_parsed_only_through_jsontext():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ALLOWED:
            continue
        offenders += [f"{rel}:{n}" for n in _json_parse_calls(path)]
    assert offenders == [], "parse ledger JSON with idemview.domain.jsontext.loads: " + ", ".join(offenders)


def test_the_check_finds_a_direct_call(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("import json\nx = json.loads('[1]')\n")
    assert _json_parse_calls(p) == [2]
