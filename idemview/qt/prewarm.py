"""The modules every open imports, imported on a worker while the window waits for the user (issue 27 item 3).

Opening the first ledger of a session imported about 80 modules on the open's worker: SQLAlchemy's
PostgreSQL and MySQL dialect packages (``idemview.ledger.dialects`` tells engine families apart with them,
even for a SQLite file), the backends, the presets and the findings process's transport. On a loaded 2-core
machine that was 0.3-0.8 s of the open (cProfile of ``open_source``: 1.4 of 1.56 s in imports), before the
first page could be asked; the target is first rows within 0.5 s. They are imported once per process, on
the shared pool, right after the window is first shown. Database drivers (psycopg, PyMySQL: ~10 MB each)
are not: a window that opens a SQLite file does not carry them.
"""

from __future__ import annotations

import importlib
import threading

#: What an open imports, cheapest first (a failure is ignored: the open reports its own)
MODULES = (
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql",
    "sqlalchemy.dialects.mysql",
    "idemview.backends.sql",
    "idemview.backends.redis",
    "idemview.backends.dynamodb",
    "idemview.backends.dump",
    "idemview.layouts.presets",
    "idemview.ledger.detect",
    "idemview.ledger.constraints",
    "idemview.ledger.unknown_times",
    "idemview.ledger.schemas",
    "idemview.services.findstate",
    "idemview.services.scanproc",
    "multiprocessing.popen_spawn_posix",
)

_started = threading.Event()


def prewarm(modules: tuple[str, ...] = MODULES) -> int:
    """Import ``modules`` (on the calling thread); returns how many imported. Never raises."""
    n = 0
    for name in modules:
        try:
            importlib.import_module(name)
            n += 1
        except Exception:  # noqa: BLE001 - a missing optional module: the open says what is wrong
            pass
    return n


def start_prewarm() -> bool:
    """Run :func:`prewarm` once per process on the shared pool; False when it had already started."""
    if _started.is_set():
        return False
    _started.set()
    from idemview.qt.workers import run_detached

    run_detached(prewarm, "preloading the modules an open needs")
    return True


__all__ = ["MODULES", "prewarm", "start_prewarm"]
