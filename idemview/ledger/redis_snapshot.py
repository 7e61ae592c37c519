"""Redis ledgers: the stable import path of :mod:`idemview.ledger.redis_kv` (issue #15, split in #25).

The code lives in the :mod:`idemview.ledger.redis_kv` package, by concern (client / decode / mapping /
snapshot / detect / ledger); this module re-exports the names other layers and the tests import, so
``from idemview.ledger.redis_snapshot import open_redis_ledger`` keeps working.
"""

from __future__ import annotations

from idemview.layouts.kv import NOT_CHECKABLE
from idemview.ledger.memory_snapshot import CONVERSION_ERRORS as _CONVERSION_ERRORS
from idemview.ledger.memory_snapshot import ddl as _ddl
from idemview.ledger.memory_snapshot import load_rows as _load
from idemview.ledger.memory_snapshot import memory_engine, snapshot_metadata
from idemview.ledger.memory_snapshot import prefetched as _prefetched
from idemview.ledger.redis_kv.client import (
    ALLOWED,
    ALLOWED_SUB,
    LOCAL_CLOCK_NOTE,
    SCAN_COUNT,
    SNAPSHOT_COMMANDS,
    UTC,
    RedisUrlError,
    RedisWriteRefused,
    check_command,
    connect_redis,
    is_redis_url,
    redis_url_from_sqlalchemy,
    safe_redis_url,
    server_time,
    snapshot_permissions,
    write_rights,
)
from idemview.ledger.redis_kv.decode import (
    CompiledLayout,
    _text,
    compile_layout,
    decode_value,
    map_record,
    sql_time,
)
from idemview.ledger.redis_kv.detect import DETECT_SAMPLE, DETECT_SCANS, KvMatch, detect_kv, sample_keys
from idemview.ledger.redis_kv.ledger import (
    RedisLedger,
    describe_snapshot,
    not_checkable,
    open_redis_ledger,
    snapshot_layout,
    test_redis,
)
from idemview.ledger.redis_kv.mapping import WORKER_MIN_KEYS
from idemview.ledger.redis_kv.snapshot import SnapshotInfo, snapshot

__all__ = [
    "ALLOWED",
    "ALLOWED_SUB",
    "DETECT_SAMPLE",
    "DETECT_SCANS",
    "LOCAL_CLOCK_NOTE",
    "NOT_CHECKABLE",
    "SCAN_COUNT",
    "SNAPSHOT_COMMANDS",
    "UTC",
    "WORKER_MIN_KEYS",
    "CompiledLayout",
    "KvMatch",
    "RedisLedger",
    "RedisUrlError",
    "RedisWriteRefused",
    "SnapshotInfo",
    "_CONVERSION_ERRORS",
    "_ddl",
    "_load",
    "_prefetched",
    "_text",
    "check_command",
    "compile_layout",
    "connect_redis",
    "decode_value",
    "describe_snapshot",
    "detect_kv",
    "is_redis_url",
    "map_record",
    "memory_engine",
    "not_checkable",
    "open_redis_ledger",
    "redis_url_from_sqlalchemy",
    "safe_redis_url",
    "sample_keys",
    "server_time",
    "snapshot",
    "snapshot_layout",
    "snapshot_metadata",
    "snapshot_permissions",
    "sql_time",
    "test_redis",
    "write_rights",
]
