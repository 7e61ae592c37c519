"""Shared by the tests of the one "not checkable" list (issue 25 round 2): a kind a backend declares it
cannot check is never queried, and the scan JSON gives the backend's reason for it."""

from __future__ import annotations

import json

from idemview.domain.model import FindingKind
from idemview.findings import registry


def forbid(monkeypatch, kinds) -> list[str]:
    """Make every way the engine could query ``kinds`` (a rule's ``run``, ``selects``, ``row_filter``)
    record the call and fail; returns the list of calls (``"kind.method"``), empty when none ran."""
    calls: list[str] = []
    for k in kinds:
        rule = registry.rule(FindingKind(k))
        for method in ("run", "selects", "row_filter"):

            def boom(*a, _name=f"{rule.kind.value}.{method}", **kw):
                calls.append(_name)
                raise AssertionError(f"{_name} ran although its kind is declared not checkable")

            monkeypatch.setattr(rule, method, boom)
    return calls


def scan_json(capsys, target: str, *extra: str) -> dict:
    """``idemview scan TARGET --format json`` parsed; fails with stderr when the exit code is not 0."""
    from idemview.cli import main

    code = main(["scan", target, "--format", "json", *extra])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    return json.loads(cap.out)
