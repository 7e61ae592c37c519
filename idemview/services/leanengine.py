"""Bounded SQLite memory for the window and its findings process (issue 27 item 3).

Measured on a 2M-row Celery ledger (539 MB file) when :func:`idemview.ledger.connect.open_engine` still gave every
SQLite connection a 256 MiB page cache and a 1 GiB memory map: the GUI process peaked at 1,239 MB and the
findings process at 965 MB, the mapped file's pages counted in both and each pooled connection filling its own
cache; with a 16 MiB cache and no map the GUI peaked at 238 MB (docs/benchmarks-history.md, "A lean window").
open_engine's batch values are bounded now too (64 MiB cache, no map, temporary b-trees in a file: ``SQLITE_CACHE_KB``,
``SQLITE_MMAP_BYTES``, ``SQLITE_TEMP_STORE``; docs/benchmarks-history.md "SQLite scan memory"); a window stays open with
several pooled connections, so its cache is smaller still, and the map and ``temp_store`` are set here as well so
that the window's bound does not depend on the batch values. The operating system's page cache still holds the
file, so reads stay memory-speed.

:func:`bound_sqlite_memory` sets the smaller values on every connection each time it is checked out of the
pool (three PRAGMAs, microseconds; allowed on a read-only, ``query_only`` session: they change no data), so a
connection opened before it was called is bounded too. An export run from the window sets its own values on
its connection (:mod:`idemview.evidence.plan`) after the checkout, as before.
"""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.engine import Engine

#: The page cache of one interactive connection (KiB); SQLite frees pages above it as it runs.
LEAN_CACHE_KB = 16384


def bound_sqlite_memory(engine: Engine, cache_kb: int = LEAN_CACHE_KB) -> bool:
    """Bound the memory of ``engine``'s SQLite connections (module docstring); False (and nothing done) for
    another dialect or when it was already bound."""
    if engine.dialect.name != "sqlite" or getattr(engine, "_idemview_lean", False):
        return False

    def lean(dbapi_conn, _record, _proxy) -> None:
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA cache_size = -{int(cache_kb)}")
            cur.execute("PRAGMA mmap_size = 0")
            # GROUP BY / DISTINCT b-trees of a whole-ledger finding query spill to a temporary file
            # (open_engine's value too: a no-op then). Not on a
            # memory database (a Redis or DynamoDB snapshot): its keys would reach the disk
            # (ledger.memory_snapshot.new_memory_db)
            cur.execute("PRAGMA database_list")
            if any(name == "main" and path for _seq, name, path in cur.fetchall()):
                cur.execute("PRAGMA temp_store = FILE")
        finally:
            cur.close()

    event.listen(engine, "checkout", lean)
    engine._idemview_lean = True  # type: ignore[attr-defined]
    return True


__all__ = ["LEAN_CACHE_KB", "bound_sqlite_memory"]
