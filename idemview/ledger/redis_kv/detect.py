"""Which key-value preset a Redis database holds: ranked from a bounded sample of its keys."""

from __future__ import annotations

from dataclasses import dataclass

from idemview.layouts.kv import KvLayout, all_kv_presets
from idemview.ledger.redis_kv.client import SCAN_COUNT
from idemview.ledger.redis_kv.decode import decode_value

DETECT_SAMPLE = 500  # keys sampled by detection
DETECT_SCANS = 50  # at most this many SCAN calls while sampling


@dataclass
class KvMatch:
    """A key-value preset that fits a sample: ``confidence`` in [0, 1] and the reason in words."""

    layout: KvLayout
    confidence: float
    reason: str
    keys: int


def sample_keys(client, limit: int = DETECT_SAMPLE, scans: int = DETECT_SCANS) -> list[bytes]:
    """At most ``limit`` keys from at most ``scans`` SCAN calls (bounded on any keyspace size)."""
    out: list[bytes] = []
    cursor = 0
    for _ in range(scans):
        cursor, keys = client.scan(cursor=cursor, count=SCAN_COUNT)
        out.extend(keys)
        if int(cursor) == 0 or len(out) >= limit:
            break
    return out[:limit]


def detect_kv(client, presets: list[KvLayout] | None = None, sample: list[bytes] | None = None) -> list[KvMatch]:
    """Rank key-value presets by a bounded sample of keys: a preset fits when some sampled keys match
    its key pattern; its values (up to 20, read with the layout's command) must decode and carry the
    fields the preset's ``[detect]`` names. Best first; empty when nothing fits."""
    from fnmatch import fnmatchcase  # SCAN MATCH's glob, applied to the sample

    import redis

    keys = [
        bytes(k).decode("utf-8", "backslashreplace") for k in (sample if sample is not None else sample_keys(client))
    ]
    out = []
    for kv in presets if presets is not None else all_kv_presets():
        if kv.members:
            m = _members_match(kv, keys)
            if m is not None:
                out.append(m)
            continue
        mine = [k for k in keys if fnmatchcase(k, kv.match) and kv.split_key(k) is not None]
        if not mine:
            continue
        probe = mine[:20]
        pipe = client.pipeline(transaction=False)
        for k in probe:
            pipe.execute_command("HGETALL" if kv.encoding == "hash" else "GET", k)
        vals = pipe.execute(raise_on_error=False)
        need = kv.required_fields()
        good = 0
        for v in vals:
            if isinstance(v, redis.exceptions.ResponseError) or v is None:
                continue
            d = decode_value(kv, v)
            if d is None:
                continue
            if kv.encoding == "plain" or all(kv.get(d, f) is not None or f in d for f in need):
                good += 1
        if good == 0:
            continue
        conf = good / len(probe)
        out.append(
            KvMatch(
                kv,
                conf,
                f"{len(mine)} of {len(keys)} sampled keys match {kv.match!r}; "
                f"{good} of {len(probe)} values have {', '.join(sorted(need)) or 'a value'}",
                len(mine),
            )
        )
    # More specific presets (more fields required) win ties: celery-redis-extended over celery-redis.
    out.sort(key=lambda m: (-m.confidence, -len(m.layout.required_fields()), -m.keys, m.layout.name))
    return out


def _members_match(kv: KvLayout, keys: list[str]) -> KvMatch | None:
    """A ``[members]`` layout fits when sampled keys match its ``[detect] keys`` globs (keys its system
    alone writes: ``uniquejobs:*``) and its sources' container keys are present beside them."""
    from fnmatch import fnmatchcase

    own = [k for k in keys if any(fnmatchcase(k, g) for g in kv.detect_keys)]
    if not own:
        return None
    containers = [k for k in keys if any(fnmatchcase(k, s.match) for s in kv.members)]
    conf = 1.0 if containers else 0.5
    return KvMatch(
        kv,
        conf,
        f"{len(own)} of {len(keys)} sampled keys match {', '.join(kv.detect_keys)}; "
        f"{len(containers)} are record containers ({', '.join(s.match for s in kv.members)})",
        len(own),
    )
