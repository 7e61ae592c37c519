"""A backend from outside the package (issue 25 item 1): its own module and one registration.

``toy://PATH``: a SQLite ledger file named with a scheme of its own (a stand-in for a real store; the
point is the plumbing). Registered through the ``idemview.backends`` entry point by
``tests/unit/test_backends.py`` and ``tests/gui/test_connection_backends.py``. :data:`OPENED` records
every target its :meth:`ToyBackend.open` was asked to open, so a test can see which paths reached it.
"""

from __future__ import annotations

from sqlalchemy.engine import URL

from idemview.backends import Backend, Choice, Field, Match, OpenRequest, Source
from idemview.backends.sql import choose_layout

#: Every target :meth:`ToyBackend.open` opened, in order.
OPENED: list[str] = []


class ToyBackend(Backend):
    """``toy://PATH`` names the SQLite file PATH; a saved connection of dialect ``toy`` keeps PATH in
    ``database``."""

    name = "toy"
    title = "Toy store"
    choices = (Choice("Toy store", "toy"),)
    priority = 50

    def matches(self, target) -> bool:
        return isinstance(target, str) and target.startswith("toy://")

    def target(self, conn, password=None):
        return f"toy://{conn.database}"

    def fields(self, dialect):
        return (Field("database", "Toy file", "file", "/path/to/toy.db"), Field("note", "A toy backend.", "note"))

    def _engine(self, target: str):
        from idemview.ledger.connect import open_engine

        return open_engine(URL.create("sqlite", database=target.removeprefix("toy://")))

    def open(self, req: OpenRequest) -> Source:
        from idemview.ledger.reader import Ledger
        from idemview.ledger.source import LedgerSource

        OPENED.append(str(req.target))
        engine = self._engine(str(req.target))
        req.engine_made(engine)
        layout, detection, _ = choose_layout(engine, req.layout, req.no_fit_hint)
        ledger = Ledger(engine, layout, name=req.name or "toy", naive_zone=req.naive_zone, **req.tunables.as_kwargs())
        ledger.source = LedgerSource(self.name)
        return Source(ledger, engine, detection, "toy://…")

    def test(self, target, password, layout) -> str:
        engine = self._engine(str(target))
        try:
            return f"✓ toy file with {len(engine.dialect.get_table_names(engine.connect()))} tables"
        finally:
            engine.dispose()

    def detect(self, target, password):
        from idemview.ledger.detect import detect

        engine = self._engine(str(target))
        try:
            return [Match(m.layout.name, m.confidence, m.reason) for m in detect(engine)]
        finally:
            engine.dispose()


#: What the entry point names.
BACKEND = ToyBackend()


def install_entry_point(root) -> None:
    """Write a minimal distribution under directory ``root`` whose entry point ``idemview.backends``
    names :data:`BACKEND` (``root`` must then be on ``sys.path``)."""
    from pathlib import Path

    d = Path(root) / "idemview_toy_backend-1.0.dist-info"
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: idemview-toy-backend\nVersion: 1.0\n", encoding="utf-8")
    (d / "entry_points.txt").write_text("[idemview.backends]\ntoy = tests.toybackend:BACKEND\n", encoding="utf-8")
