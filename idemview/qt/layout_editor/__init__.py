"""The GUI layout editor (DESIGN §4), split by role: ``dialog`` (the LayoutEditor dialog and its pages),
``models`` (Qt item models), ``widgets`` (column pickers, check lists, time rows), ``jobs`` (database work
run through :class:`idemview.qt.workers.Runner`), ``common`` (shared constants).

The core it edits lives in :mod:`idemview.ledger.builder` (no Qt)."""

from idemview.qt.layout_editor.dialog import LayoutEditor
from idemview.qt.layout_editor.jobs import PreviewResult
from idemview.qt.layout_editor.models import PreviewModel, StatusMapModel
from idemview.qt.layout_editor.widgets import CheckList, ColumnCombo, TimeRow

__all__ = ["CheckList", "ColumnCombo", "LayoutEditor", "PreviewModel", "PreviewResult", "StatusMapModel", "TimeRow"]
