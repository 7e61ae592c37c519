"""Issue 20 §7: every registered finding kind has its DESIGN §5 definition, severity rule and fields in
one place (idemview.findings.definitions), and the severity rule starts with the rule's own severity."""

from __future__ import annotations

from idemview.findings.definitions import DEFINITIONS, definition
from idemview.findings.registry import kinds, rule


def test_every_kind_is_defined_and_its_severity_agrees_with_its_rule():
    assert set(kinds()) <= set(DEFINITIONS)
    for k in kinds():
        d = definition(k)
        assert d is not None and d.kind == k and d.fields and len(d.definition) > 30
        assert d.severity_rule.startswith(rule(k).severity.value), (k, d.severity_rule)


def test_wording_is_designs():
    from idemview.domain.model import FindingKind as K

    assert "lock expired" in definition(K.STUCK_IN_PROGRESS).definition
    assert "critical if the replay succeeded" in definition(K.REPLAY_AFTER_EXPIRY).severity_rule
