"""How bad a finding is (DESIGN §5): :class:`Severity`, most severe first in :data:`SEVERITY_ORDER`."""

from __future__ import annotations

from enum import Enum


class Severity(str, Enum):
    """Severity of a finding, most severe first in :data:`SEVERITY_ORDER`."""

    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"


#: ``{severity: rank}``, 0 the most severe (sort key).
SEVERITY_ORDER = {s: i for i, s in enumerate(Severity)}
