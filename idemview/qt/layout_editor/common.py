"""Constants shared by the layout editor's models, widgets and dialog."""

from __future__ import annotations

from datetime import UTC
from zoneinfo import available_timezones

from idemview.domain.model import Outcome, Status

UTC = UTC
PREVIEW_ROWS = 50
NONE = "(none)"
STATUSES = [s.value for s in Status]
OUTCOMES = [o.value for o in Outcome]
_ZONES = ["UTC"] + sorted(z for z in available_timezones() if z != "UTC" and "/" in z)
_SCRATCH = "(scratch)"
