"""The registry of finding kinds and their rules: one :class:`~idemview.findings.rules.FindingRule` per
:class:`~idemview.domain.kinds.FindingKind`, in report order. :class:`~idemview.findings.engine.FindingEngine`
iterates it; every table of kinds (``list(FindingKind)``, ``DEFAULT_SEVERITY``, the filter phrases, the
GUI's words and badges, the engine's profile flags) is derived from what is registered here.

A new kind is one object and one registration (ARCHITECTURE.md, "Adding a finding kind")::

    TOY = FindingKind.define("toy_kind", severity=Severity.LOW, words="toy kind", short="toy")

    class ToyRule(FindingRule):
        kind = TOY
        ...

    register(ToyRule())        # the kind and its rule; reported after the kinds already there

A kind from another distribution is found through the entry point group :data:`ENTRY_POINTS`
(``idemview.finding_kinds``): its object is a rule, an iterable of rules, or a function returning
them; :func:`load_plugins` registers them when this module is first imported (in every process: the
GUI's findings process too)::

    [project.entry-points."idemview.finding_kinds"]
    toy = "my_package.toykind:RULES"
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

from idemview.domain import kinds as _kinds
from idemview.domain.model import FindingKind
from idemview.findings.audit import SecretAtRest
from idemview.findings.rules import BUILTIN_RULES, FindingRule

_RULES: dict[FindingKind, FindingRule] = {}
_log = logging.getLogger(__name__)

#: The entry point group third-party finding kinds are registered under.
ENTRY_POINTS = "idemview.finding_kinds"


def register(rule: FindingRule, *, replace: bool = False) -> FindingRule:
    """Add ``rule`` and its kind (``rule.kind``, a :class:`FindingKind`) to the registry, after the ones
    already there, and return it.

    Raises ``ValueError`` when a rule for ``rule.kind`` is registered already (``replace=True`` swaps
    it, keeping its place in the order) or another kind object has its value; ``TypeError`` when
    ``rule.kind`` is not a :class:`FindingKind`."""
    kind = rule.kind
    if kind in _RULES and not replace:
        raise ValueError(f"a rule for {kind.value!r} is registered already")
    _kinds.add(kind)
    _RULES[FindingKind(kind)] = rule
    return rule


def unregister(kind: FindingKind | str) -> None:
    """Remove a kind registered at run time and its rule (a plug-in unloaded, a test cleaning up).
    Raises ``ValueError`` for a built-in kind; an unknown kind is ignored."""
    value = kind.value if isinstance(kind, FindingKind) else str(kind)
    _kinds.remove(value)
    for k in [k for k in _RULES if k.value == value]:
        del _RULES[k]


def rules() -> list[FindingRule]:
    """All registered rules, in report order."""
    return list(_RULES.values())


def rule(kind: FindingKind) -> FindingRule:
    """The rule for ``kind``. Raises ``KeyError`` when none is registered."""
    try:
        return _RULES[FindingKind(kind)]
    except ValueError:
        raise KeyError(kind) from None


def kinds() -> list[FindingKind]:
    """The registered kinds, in report order."""
    return list(_RULES)


def profile_flags() -> list[str]:
    """The key-profile flags (:attr:`FindingRule.profile_flag`) of the registered rules, in report order
    (what :meth:`FindingEngine.q_key_profile` must flag)."""
    out: list[str] = []
    for r in _RULES.values():
        if r.profile_flag and r.profile_flag not in out:
            out.append(r.profile_flag)
    return out


def load_plugins() -> list[FindingKind]:
    """Register the rules of every :data:`ENTRY_POINTS` entry point not registered yet (a rule, an
    iterable of rules, or a function returning either) and return their kinds. A plug-in that fails to
    load, or whose kind clashes with a registered one, is logged (warning) and skipped: a broken
    plug-in never stops the program."""
    added: list[FindingKind] = []
    for ep in entry_points(group=ENTRY_POINTS):
        try:
            obj = ep.load()
            if callable(obj) and not isinstance(obj, FindingRule):
                obj = obj()
            found = [obj] if isinstance(obj, FindingRule) else list(obj)
            for r in found:
                if not isinstance(r, FindingRule):
                    raise TypeError(f"{r!r} is not a FindingRule")
                if _RULES.get(r.kind) is r:
                    continue  # registered already (imported directly too)
                register(r)
                added.append(r.kind)
        except Exception as e:  # noqa: BLE001 - any plug-in failure is reported and skipped
            _log.warning("finding kind plug-in %s could not be loaded: %s", ep.value, e)
    return added


for _r in BUILTIN_RULES:
    register(_r)
register(SecretAtRest())  # the ledger audit: what the ledger itself stores (findings/audit.py)
load_plugins()  # kinds other distributions add (entry points)
