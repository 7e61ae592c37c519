"""A function's docstring is its first statement: a string placed after the imports is an expression
that does nothing, and the function has no ``__doc__`` (``idemview.cli.export_cli`` had one so)."""

from __future__ import annotations

import ast
from pathlib import Path

import idemview.cli


def test_export_cli_has_its_docstring():
    assert idemview.cli.export_cli.__doc__ is not None
    assert idemview.cli.export_cli.__doc__.startswith("``idemview export``: build the filter from the arguments")


def test_no_function_of_the_cli_has_a_misplaced_docstring():
    tree = ast.parse(Path(idemview.cli.__file__).read_text(encoding="utf-8"))
    misplaced = [
        f"{fn.name} (line {stmt.lineno})"
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for stmt in fn.body[1:]
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
    ]
    assert misplaced == []
