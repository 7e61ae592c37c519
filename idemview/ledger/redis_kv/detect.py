"""Which key-value preset a Redis database holds: ranked from a bounded sample of its keys.

A preset whose system lets the user rename its key prefix (BullMQ's ``prefix`` option, default ``bull``:
taskforcesh/bullmq src/classes/queue-keys.ts ``QueueKeys(prefix = 'bull')`` -> ``<prefix>:<queue>``;
sidekiq-unique-jobs' ``lock_prefix``, default ``uniquejobs``: lib/sidekiq_unique_jobs/config.rb
``PREFIX``, lock_digest.rb ``"#{lock_prefix}:#{digest}"``) says so in its ``[detect]`` table::

    [detect]
    prefix = "bull"                      # the default prefix the preset's key names are written with
    prefix_from = '^(?P<prefix>.+):[^:]+:(meta|id|events)$'   # keys only the system writes: their
                                         # (?P<prefix>...) capture is a prefix in use

A sampled key matching ``prefix_from`` with another prefix makes a variant of the preset with that prefix
in every key name it reads (:func:`with_prefix`), ranked like any preset: the user copies no layout.
Such a variant is named ``NAME@PREFIX`` wherever a choice is handed on (:func:`choice_name`: ``idemview
detect``, Test, a saved connection's layout, ``--layout``, ``idemview.open(layout=...)``) and that name
opens it again (:func:`load_kv_choice`), so the prefix travels with the choice.
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from fnmatch import fnmatchcase

from idemview.layouts.kv import (
    KvLayout,
    all_kv_presets,
    kv_preset_names,
    load_kv_layout,
    load_kv_preset,
    parse_kv_layout,
)
from idemview.layouts.layout import LayoutError
from idemview.ledger.redis_kv.client import SCAN_COUNT
from idemview.ledger.redis_kv.decode import decode_value

DETECT_SAMPLE = 500  # keys sampled by detection
DETECT_SCANS = 50  # at most this many SCAN calls while sampling
PREFIX_CANDIDATES = 3  # other prefixes tried per preset (the most frequent in the sample): bounded probes


@dataclass
class KvMatch:
    """A key-value preset that fits a sample: ``confidence`` in [0, 1] and the reason in words."""

    layout: KvLayout
    confidence: float
    reason: str
    keys: int
    #: for a preset with a ``[detect] prefix_from``: how many sampled keys it found under this prefix
    prefix_keys: int = 0


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
    import redis

    keys = [
        bytes(k).decode("utf-8", "backslashreplace") for k in (sample if sample is not None else sample_keys(client))
    ]
    out = []
    layouts, hits = _with_prefixes(presets if presets is not None else all_kv_presets(), keys)
    for kv in layouts:
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
    for m in out:
        m.prefix_keys = hits.get(id(m.layout), 0)
    return _prefixes_in_order(out, hits)


def other_prefixes(matches: list[KvMatch]) -> list[str]:
    """The names (:func:`choice_name`) of the matches after the first that are its preset under another
    key prefix some sampled keys use (two BullMQ apps, ``prefix`` "alpha" and "beta", in one database):
    a snapshot reads one prefix, so the others are said, not left out in silence."""
    if not matches:
        return []
    first = matches[0].layout
    return [
        choice_name(m.layout)
        for m in matches[1:]
        if m.layout.name == first.name and m.prefix_keys > 0 and choice_name(m.layout) != choice_name(first)
    ]


def _prefixes_in_order(out: list[KvMatch], hits: dict[int, int]) -> list[KvMatch]:
    """``out`` with the matches of one preset under several prefixes reordered among their own places:
    the prefix more sampled keys are written under (``prefix_from`` hits) first, at equal confidence.
    sidekiq-unique-jobs keeps ``uniquejobs:digests`` whatever the ``lock_prefix`` (constants.rb
    ``DIGESTS``), so its default-prefix preset fits a database of another prefix too."""
    places: dict[str, list[int]] = {}
    for i, m in enumerate(out):
        places.setdefault(m.layout.name, []).append(i)
    res = list(out)
    for idx in places.values():
        if len(idx) > 1:
            ms = sorted((out[i] for i in idx), key=lambda m: (-m.confidence, -hits.get(id(m.layout), 0)))
            for i, m in zip(idx, ms, strict=True):
                res[i] = m
    return res


def _members_match(kv: KvLayout, keys: list[str]) -> KvMatch | None:
    """A ``[members]`` layout fits when sampled keys match its ``[detect] keys`` globs (keys its system
    alone writes: ``uniquejobs:*``) and its sources' container keys are present beside them."""
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


# ------------------------------------------------------------------------------ custom prefixes

#: where a prefix sits in a key-value layout's TOML, by how the text is read there: a SCAN MATCH glob, a
#: regular expression or a key template (str.format: braces doubled)
_GLOBS = (("kv", "match"),)
_REGEXES = (("kv", "key_regex"), ("kv", "exclude_regex"))
_TEMPLATES = (("states", "key"), ("lock", "key"), ("duplicates", "window_key"), ("events", "key"))


def _prefix_rule(kv: KvLayout) -> tuple[str, re.Pattern] | None:
    """The preset's (default prefix, prefix_from pattern) from its ``[detect]`` table, or None."""
    try:
        det = tomllib.loads(kv.text).get("detect") or {}
    except tomllib.TOMLDecodeError:
        return None
    prefix, rx = det.get("prefix"), det.get("prefix_from")
    if not isinstance(prefix, str) or not prefix or not isinstance(rx, str):
        return None
    try:
        pat = re.compile(rx)
    except re.error:
        return None
    return (prefix, pat) if "prefix" in pat.groupindex else None


def _with_prefixes(presets: list[KvLayout], keys: list[str]) -> tuple[list[KvLayout], dict[int, int]]:
    """(``presets`` followed by each one's variants for the other prefixes its ``prefix_from`` finds in
    ``keys`` (at most :data:`PREFIX_CANDIDATES` each, the most frequent first), hits: ``id`` of a
    layout with a prefix rule -> how many sampled keys its ``prefix_from`` found under its prefix)."""
    out = list(presets)
    hits: dict[int, int] = {}
    for kv in presets:
        rule = _prefix_rule(kv)
        if rule is None:
            continue
        default, pat = rule
        seen: Counter[str] = Counter()
        for k in keys:
            m = pat.match(k)
            if m is not None and m.group("prefix"):
                seen[m.group("prefix")] += 1
        hits[id(kv)] = seen.pop(default, 0)
        for prefix, n in seen.most_common(PREFIX_CANDIDATES):
            try:
                v = with_prefix(kv, prefix)
            except LayoutError:
                continue  # a prefix the layout cannot carry (none known): the sample's other keys decide
            out.append(v)
            hits[id(v)] = n
    return out, hits


def _glob_escape(s: str) -> str:
    """``s`` literal in a glob read both by Redis (SCAN MATCH: util.c stringmatchlen) and by fnmatchcase
    (the sample): ``*``, ``?``, ``[`` as one-character classes; ``]`` outside a class is literal in both
    (Redis ends a class at its first ``]``: ``[]]`` matches nothing there); ``\\`` as ``[\\\\]`` (Redis
    escapes inside a class too, fnmatch reads both backslashes as the same character)."""
    return "".join(f"[{c}]" if c in "*?[" else "[\\\\]" if c == "\\" else c for c in s)


def with_prefix(kv: KvLayout, prefix: str) -> KvLayout:
    """``kv`` (a preset with ``[detect] prefix``) reading keys under ``prefix`` instead of its default:
    every key name, glob, regular expression and key template that starts its keys with the default
    ``<default>:`` gets ``<prefix>:``, escaped as each is read. The result is parsed from TOML text
    of its own (shown and saved as the layout), named as the preset, its origin saying the prefix.
    Raises :class:`LayoutError` when ``kv`` names no default prefix."""
    import tomli_w

    rule = _prefix_rule(kv)
    if rule is None:
        raise LayoutError(f"layout {kv.name!r} names no [detect] prefix")
    default = rule[0] + ":"
    d = tomllib.loads(kv.text)

    def sub(where: dict, name: str, escape) -> None:
        v = where.get(name)
        if isinstance(v, str) and default in v:
            where[name] = v.replace(default, escape(prefix) + ":")

    for section, name in _GLOBS:
        sub(d.get(section) or {}, name, _glob_escape)
    for section, name in _REGEXES:
        sub(d.get(section) or {}, name, re.escape)
    for section, name in _TEMPLATES:
        sub(d.get(section) or {}, name, lambda p: p.replace("{", "{{").replace("}", "}}"))
    for src in (d.get("members") or {}).get("source") or ():
        sub(src, "match", _glob_escape)
        sub(src, "key_regex", re.escape)
    det = d.setdefault("detect", {})
    det["keys"] = [k.replace(default, _glob_escape(prefix) + ":") for k in det.get("keys") or ()]
    if not det["keys"]:
        del det["keys"]
    det["prefix"] = prefix
    del det["prefix_from"]  # found: this variant is not searched for prefixes again
    head = (
        f"# The shipped {kv.name} preset ({kv.origin}) with the key prefix {prefix!r} in place of its default "
        f"{rule[0]!r}, found in the keys by detection. Its sources: {kv.source}\n"
    )
    return parse_kv_layout(head + tomli_w.dumps(d), origin=f"{kv.origin}, prefix {prefix!r}")


#: what separates a preset's name from the key prefix it is read under in a layout choice (``bullmq@myapp``)
PREFIX_SEP = "@"


def choice_name(kv: KvLayout) -> str:
    """The name that opens ``kv`` again (:func:`load_kv_choice`): ``NAME@PREFIX`` for a shipped preset read
    under a prefix other than its default (:func:`with_prefix`), else ``kv.name``."""
    if kv.name not in kv_preset_names() or _prefix_rule(kv) is not None:
        return kv.name
    try:
        prefix = (tomllib.loads(kv.text).get("detect") or {}).get("prefix")
    except tomllib.TOMLDecodeError:
        return kv.name
    rule = _prefix_rule(load_kv_preset(kv.name))
    if not isinstance(prefix, str) or rule is None or prefix == rule[0]:
        return kv.name
    return f"{kv.name}{PREFIX_SEP}{prefix}"


def load_kv_choice(spec: str) -> KvLayout:
    """A key-value layout by what a user or detection chose: a layout file, a preset name, or
    ``NAME@PREFIX`` (the preset ``NAME`` read under the key prefix ``PREFIX``: :func:`with_prefix`; split at
    the first ``@``, preset names have none). Raises :class:`LayoutError` (unknown preset, empty prefix, a
    preset that names no ``[detect] prefix``)."""
    from pathlib import Path

    name, sep, prefix = spec.partition(PREFIX_SEP)
    if not sep or spec.endswith(".toml") or Path(spec).is_file():
        return load_kv_layout(spec)
    if not prefix:
        raise LayoutError(f"layout {spec!r}: the key prefix after {PREFIX_SEP!r} is empty")
    return with_prefix(load_kv_preset(name), prefix)
