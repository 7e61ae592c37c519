"""PostgreSQL databases in ``SQL_ASCII`` read like SQLite's undecodable text (issue #19 item 6).

A ``SQL_ASCII`` database stores whatever bytes a client sent, with no encoding (PostgreSQL docs,
"Character Set Support": "SQL_ASCII ... not so much a declaration that a specific encoding is in use,
as a declaration of ignorance about the encoding"). psycopg 3 then returns every text value as
``bytes`` (its ``TextLoader`` has no encoding to decode with), and SQLAlchemy's own start-up query
(``select pg_catalog.version()``, matched by a ``str`` pattern) fails before idemview reads a row: the
ledger could not be opened at all ("driver refused the connection settings").

:func:`adapt` gives such a connection the loaders idemview's SQLite connections have
(:func:`idemview.ledger.rawtext.decode_text`): valid UTF-8 becomes ``str``, anything else a
:class:`~idemview.ledger.rawtext.RawText` (bytes kept, shown escaped); and a ``RawText`` bound back
into SQL is sent as its stored bytes, so a key read can be looked up again. Connections to databases
with a real encoding are left untouched (psycopg's C loaders stay in use).
"""

from __future__ import annotations

from typing import Any

from idemview.ledger.rawtext import RawText, decode_text

#: Text-like types psycopg would return as bytes under SQL_ASCII.
TEXT_TYPES = ("text", "varchar", "bpchar", "name", '"char"', "unknown")


def is_sql_ascii(conn: Any) -> bool:
    """True for a psycopg 3 connection whose client encoding is ``SQL_ASCII``."""
    info = getattr(conn, "info", None)
    try:
        return info is not None and info.parameter_status("client_encoding") == "SQL_ASCII"
    except Exception:  # noqa: BLE001 - another driver's connection: not ours to adapt
        return False


def adapt(conn: Any) -> None:
    """Register the lenient text loaders and the ``RawText`` dumper on ``conn`` (psycopg 3) when its
    encoding is ``SQL_ASCII``; otherwise do nothing."""
    if not is_sql_ascii(conn):
        return
    from psycopg.adapt import Dumper, Loader

    class _Lenient(Loader):
        def load(self, data):
            return decode_text(bytes(data))

    class _RawTextDumper(Dumper):
        oid = conn.adapters.types["text"].oid

        def dump(self, obj):
            return obj.raw

    for name in TEXT_TYPES:
        info = conn.adapters.types.get(name)
        if info is not None:
            conn.adapters.register_loader(info.oid, _Lenient)
    # oid 0: psycopg's fallback for every type it has no loader for (int2vector in the catalog
    # queries SQLAlchemy's reflection runs, enums, domains...), also bytes under SQL_ASCII
    conn.adapters.register_loader(0, _Lenient)
    conn.adapters.register_dumper(RawText, _RawTextDumper)
