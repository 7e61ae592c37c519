"""Typed events for service objects, without Qt (issue 25, item 5).

A service owns an :class:`EventEmitter` per event (``scan.events.merged``); a view ``connect``s a
callable to it and is called with the event's typed payload, on the thread that emitted (the owner's
thread: a :class:`~idemview.services.work.Worker` brings answers back there first). The GUI relays them
to its widgets; tests subscribe without a display.

The idea is napari's evented models (``napari/utils/events``: an ``EmitterGroup`` of named emitters on a
model); nothing of its code is used.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


class EventEmitter(Generic[T]):
    """One event: ``connect(fn)`` / ``disconnect(fn)``; ``emit(payload)`` calls each ``fn(payload)`` in the
    order they connected. A callback that raises does not stop the others: the error is logged (a view
    that broke must not leave the others stale) and re-raised after the last, so tests see it."""

    def __init__(self, name: str):
        self.name = name
        self._callbacks: list[Callable[[T], None]] = []

    def connect(self, fn: Callable[[T], None]) -> Callable[[T], None]:
        self._callbacks.append(fn)
        return fn

    def disconnect(self, fn: Callable[[T], None] | None = None) -> None:
        """Remove ``fn`` (every callback when None); unknown callbacks are ignored."""
        if fn is None:
            self._callbacks.clear()
        elif fn in self._callbacks:
            self._callbacks.remove(fn)

    def emit(self, payload: T) -> None:
        first: BaseException | None = None
        for fn in list(self._callbacks):
            try:
                fn(payload)
            except Exception as e:  # noqa: BLE001 - reported below, after every listener ran
                log.exception("a listener of %s failed", self.name)
                first = first or e
        if first is not None:
            raise first

    def __len__(self) -> int:
        return len(self._callbacks)


__all__ = ["EventEmitter"]
