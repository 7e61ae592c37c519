"""The registry of finding rules: one :class:`~idemview.findings.rules.FindingRule` per kind, in report
order. :class:`~idemview.findings.engine.FindingEngine` iterates it; nothing else lists the kinds.

A new kind (e.g. ``hidden_success``) is added by defining a rule and calling :func:`register` once at
import time (the built-in rules are registered below)::

    register(HiddenSuccess())           # appended: reported after the built-in kinds
"""

from __future__ import annotations

from idemview.domain.model import FindingKind
from idemview.findings.audit import SecretAtRest
from idemview.findings.rules import BUILTIN_RULES, FindingRule

_RULES: dict[FindingKind, FindingRule] = {}


def register(rule: FindingRule, *, replace: bool = False) -> FindingRule:
    """Add ``rule`` to the registry (after the rules already there) and return it.

    Raises ``ValueError`` when a rule for ``rule.kind`` is registered already (``replace=True`` swaps
    it, keeping its place in the order)."""
    if rule.kind in _RULES and not replace:
        raise ValueError(f"a rule for {rule.kind.value!r} is registered already")
    _RULES[rule.kind] = rule
    return rule


def rules() -> list[FindingRule]:
    """All registered rules, in report order."""
    return list(_RULES.values())


def rule(kind: FindingKind) -> FindingRule:
    """The rule for ``kind``. Raises ``KeyError`` when none is registered."""
    return _RULES[FindingKind(kind)]


def kinds() -> list[FindingKind]:
    """The registered kinds, in report order."""
    return list(_RULES)


for _r in BUILTIN_RULES:
    register(_r)
register(SecretAtRest())  # the ledger audit: what the ledger itself stores (findings/audit.py)
