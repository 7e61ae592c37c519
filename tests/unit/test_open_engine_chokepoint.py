"""open_engine is the one entry to every read-only SQL engine (ARCHITECTURE.md "Promises"): the
per-dialect-family helpers that make an engine read-only are called from open_engine and nowhere else,
so no path can skip its URL-option gate (driver_options.check_url_options)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELPERS = {"_sqlite_engine", "_postgresql_engine", "_mysql_engine", "_open_dump"}


def _callers(path: Path) -> dict[str, set[str]]:
    """helper name -> the names of the top-level functions of ``path`` that call it."""
    tree = ast.parse(path.read_text("utf-8"))
    out: dict[str, set[str]] = {}
    for top in tree.body:
        for node in ast.walk(top):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name in HELPERS:
                    out.setdefault(name, set()).add(getattr(top, "name", "<module>"))
    return out


def test_the_family_helpers_are_called_only_by_open_engine():
    found: dict[str, set[str]] = {}
    for p in sorted((ROOT / "idemview").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        for name, callers in _callers(p).items():
            found.setdefault(name, set()).update(f"{rel}:{c}" for c in callers)
    assert found == {name: {"idemview/ledger/connect.py:open_engine"} for name in HELPERS}


def test_the_option_gate_runs_before_any_engine_is_made():
    src = (ROOT / "idemview/ledger/connect.py").read_text("utf-8")
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "open_engine")
    lines = {
        n.func.id: n.lineno
        for n in ast.walk(fn)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in HELPERS | {"check_url_options"}
    }
    assert set(lines) == HELPERS | {"check_url_options"}
    assert all(lines["check_url_options"] < lines[h] for h in HELPERS)
