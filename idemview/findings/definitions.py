"""What each finding kind means, in DESIGN §5's words: its definition, its severity rule and the fields
of the normalized model it rests on. The words live on the kind object itself
(:class:`~idemview.domain.kinds.FindingKind`: ``definition``, ``severity_rule``, ``fields``); this module
presents them as :class:`KindDefinition` records for the GUI's help (chips, findings panel, detail) and
anything else that explains a kind (issue 20 §7).

Source: the project's DESIGN.md §5 (table of kinds; §5.1 for the severity that follows the action
class). A rule's default severity is its kind's (:mod:`idemview.findings.registry`), so the two cannot
disagree.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from idemview.domain.model import FindingKind as K


@dataclass(frozen=True)
class KindDefinition:
    """``definition``: when an operation has this finding; ``severity_rule``: how its severity is set;
    ``fields``: the normalized fields (DESIGN §3) the check reads — a layout that lacks them cannot
    check the kind."""

    kind: K
    definition: str
    severity_rule: str
    fields: tuple[str, ...]


def definition(kind: K) -> KindDefinition | None:
    """The definition of ``kind`` (None for a kind registered without one). Raises ``ValueError`` for
    a value no kind has."""
    k = K(kind)
    if k.definition is None:
        return None
    return KindDefinition(k, k.definition, k.severity_rule or k.severity.value, k.fields)


class _Definitions(Mapping[K, KindDefinition]):
    """``{kind: KindDefinition}`` over the registered kinds that carry a definition (live view)."""

    def __getitem__(self, k: object) -> KindDefinition:
        try:
            d = definition(k)  # type: ignore[arg-type]
        except ValueError:
            d = None
        if d is None:
            raise KeyError(k)
        return d

    def __iter__(self) -> Iterator[K]:
        return (k for k in K if k.definition is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


DEFINITIONS: Mapping[K, KindDefinition] = _Definitions()
