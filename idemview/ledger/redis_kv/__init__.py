"""Redis ledgers (issue #15): a read-only snapshot of a keyspace, loaded into in-memory SQLite.

Why a snapshot in SQLite, not findings written for Redis
    Redis cannot group, join or compare across keys, so every finding would need its own client-side
    pass. Instead the keys a key-value layout (:mod:`idemview.layouts.kv`) selects are read once and
    loaded into an in-memory SQLite database in idemview's reference layout (``operations`` +
    ``attempts``, preset ``idemview``). The normal :class:`~idemview.ledger.reader.Ledger` then serves
    the grid, detail, search, findings and export unchanged: the same SQL, the same eight definitions.

The package, by concern (each module's docstring says more):

- :mod:`.client`: the read-only connection (the command allowlist), URLs, the server's clock, the
  write-rights and permission probes;
- :mod:`.decode`: one value decoded and mapped (the layout's mapping, plain and compiled);
- :mod:`.mapping`: read batches into rows, in this process or a second one;
- :mod:`.snapshot`: SCAN + pipelined reads into the shared memory database
  (:mod:`idemview.ledger.memory_snapshot`);
- :mod:`.detect`: which preset a database holds, from a key sample;
- :mod:`.ledger`: opening a Redis ledger, what it cannot check, the connection test.

The stable import path for other layers is :mod:`idemview.ledger.redis_snapshot`, which re-exports the
public names.
"""
