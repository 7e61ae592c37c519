"""DynamoDB layouts: how one DynamoDB table's items map onto the normalized model (issue 23 item 2).

A DynamoDB layout is TOML data (never code). It is a key-value layout (:mod:`idemview.layouts.kv`: the
``[status]``, ``[fields]``, ``[attempt]``, ``[expiry]`` and ``[tunables]`` sections, with item attributes
in place of value fields; dotted paths reach into maps) plus a ``[dynamodb]`` table:

- ``key_schema``: the table's primary key attribute names, partition key first (``["id"]``, or
  ``["id", "sk"]`` for a composite key); a table whose key schema differs does not fit (exit 4);
- ``key_attribute``: the key attribute (partition or sort key) whose text holds the idempotency key;
- ``key_regex`` (optional, default the whole text is the key): a Python regular expression over that
  text with the named captures ``key`` (required), ``scope`` and ``kind`` (optional), as in ``[kv]``;
- ``expires_at`` (optional): ``{attribute = NAME, encoding = "epoch_s" | "epoch_ms" | "iso_text"}``, the
  end of the dedup window (Powertools' ``expiration``, usually the table's TTL attribute). Unlike a Redis
  key, an expired DynamoDB item stays until the TTL sweeper deletes it (up to 48 h late), so
  ``expired_key`` is meaningful here.

``[detect] attributes`` names attributes whose presence identifies the layout in a sample of items.

Shipped DynamoDB layouts live in ``idemview/layouts/dynamodb_presets/*.toml`` (package data, in a folder
of their own so neither SQL nor Redis detection sees them).
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idemview.layouts.kv import KV_TIME_ENCODINGS, KvLayout, parse_kv_layout
from idemview.layouts.layout import LayoutError, shipped_names, shipped_text

PRESETS_PACKAGE = "idemview.layouts.dynamodb_presets"
_DYNAMODB_KEYS = frozenset({"key_schema", "key_attribute", "key_regex", "expires_at"})


@dataclass(slots=True)
class DynamoLayout:
    """A parsed DynamoDB layout: ``kv`` (the shared key-value mapping: status, fields, expiry; its
    ``key_regex`` splits the text of ``key_attribute``), ``key_schema`` (partition key first),
    ``expires_attribute``/``expires_encoding`` (``None`` when the layout names no expiry),
    ``detect_attributes`` and ``text`` (the TOML source; its SHA-256 is :attr:`hash`)."""

    kv: KvLayout
    key_schema: tuple[str, ...]
    key_attribute: str
    expires_attribute: str | None
    expires_encoding: str
    detect_attributes: tuple[str, ...]
    text: str
    origin: str

    @property
    def name(self) -> str:
        return self.kv.name

    @property
    def title(self) -> str:
        return self.kv.title

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def split(self, item: dict[str, Any]) -> tuple[str, str, str | None] | None:
        """(scope, idempotency key, kind or None) of a decoded item, or ``None`` when its key attribute
        is missing, not text, or does not match ``key_regex``."""
        v = item.get(self.key_attribute)
        if not isinstance(v, str):
            return None
        return self.kv.split_key(v)

    def attributes(self) -> set[str]:
        """Top-level attribute names the layout reads (key schema, expiry, status, fields)."""
        out = set(self.key_schema) | {self.key_attribute}
        if self.expires_attribute:
            out.add(self.expires_attribute.split(".")[0])
        if self.kv.status_field:
            out.add(self.kv.status_field.split(".")[0])
        for f in self.kv.fields.values():
            out.update(n.split(".")[0] for n in (*f.fields, *f.hash_of, *f.unless_empty))
        out.update(v.split(".")[0] for v in self.kv.attempt.values())
        return out


def _err(where: str, msg: str) -> LayoutError:
    return LayoutError(f"DynamoDB layout {where}: {msg}")


def _names(where: str, v: Any, what: str) -> tuple[str, ...]:
    if isinstance(v, list) and v and all(isinstance(x, str) and x for x in v):
        return tuple(v)
    raise _err(where, f"{what} must be a non-empty list of attribute names")


def parse_dynamodb_layout(text: str, origin: str = "<string>") -> DynamoLayout:
    """Parse and validate DynamoDB layout TOML (see the module docstring). Raises :class:`LayoutError`
    with one clear line. The shared sections are validated by :func:`parse_kv_layout` itself."""
    import tomli_w

    try:
        d = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _err(origin, f"not valid TOML: {e}") from None
    name = (d.get("layout") or {}).get("name", "?")
    where = f"{name!r} ({origin})"
    dyn = d.pop("dynamodb", None)
    if not isinstance(dyn, dict):
        raise _err(where, "[dynamodb] is required (key_schema, key_attribute)")
    if "kv" in d:
        raise _err(where, "[kv] belongs to Redis layouts; a DynamoDB layout names its key in [dynamodb]")
    extra = set(dyn) - _DYNAMODB_KEYS
    if extra:
        raise _err(where, f"[dynamodb] has unknown entries: {', '.join(sorted(extra))}")
    schema = _names(where, dyn.get("key_schema"), "dynamodb.key_schema")
    if len(schema) > 2:
        raise _err(where, "dynamodb.key_schema has a partition key and at most one sort key")
    key_attr = dyn.get("key_attribute", schema[-1])
    if key_attr not in schema:
        raise _err(where, f"dynamodb.key_attribute {key_attr!r} is not in key_schema {list(schema)}")
    exp = dyn.get("expires_at")
    exp_attr, exp_enc = None, "epoch_s"
    if exp is not None:
        if not isinstance(exp, dict) or set(exp) - {"attribute", "encoding"} or not exp.get("attribute"):
            raise _err(where, 'dynamodb.expires_at must be {attribute = "NAME", encoding = "epoch_s"}')
        exp_attr, exp_enc = str(exp["attribute"]), exp.get("encoding", "epoch_s")
        if exp_enc not in KV_TIME_ENCODINGS:
            raise _err(where, f"dynamodb.expires_at encoding {exp_enc!r} is not one of {', '.join(KV_TIME_ENCODINGS)}")
    det = d.pop("detect", None) or {}
    if set(det) - {"attributes"}:
        raise _err(where, "[detect] knows only attributes")
    attrs = _names(where, det["attributes"], "detect.attributes") if "attributes" in det else ()
    d["kv"] = {"match": "*", "encoding": "json"}
    if dyn.get("key_regex"):
        d["kv"]["key_regex"] = dyn["key_regex"]
    if attrs:
        d["detect"] = {"fields": list(attrs)}
    kv = parse_kv_layout(tomli_w.dumps(d), origin=origin)
    if kv.states or kv.lock_key or kv.group_field:
        raise _err(where, "[states], [lock] and [duplicates] are Redis keys beside a record; DynamoDB has none")
    kv.text, kv.origin = text, origin
    return DynamoLayout(kv, schema, key_attr, exp_attr, exp_enc, attrs, text, origin)


def dynamodb_preset_names() -> list[str]:
    """Names of the shipped DynamoDB layouts, sorted."""
    return shipped_names(PRESETS_PACKAGE)


def load_dynamodb_preset(name: str) -> DynamoLayout:
    """A shipped DynamoDB layout by name. Raises :class:`LayoutError` naming the known ones."""
    text = shipped_text(PRESETS_PACKAGE, name)
    if text is None:
        raise LayoutError(f"no DynamoDB preset named {name!r}; known: {', '.join(dynamodb_preset_names())}")
    return parse_dynamodb_layout(text, origin=f"preset {name}")


def load_dynamodb_layout(spec: str) -> DynamoLayout:
    """A DynamoDB preset name or a path to a DynamoDB layout TOML file. Raises :class:`LayoutError`."""
    p = Path(spec)
    if spec.endswith(".toml") or p.is_file():
        from idemview.paths import readable_file

        try:
            return parse_dynamodb_layout(readable_file(p, "layout").read_text("utf-8"), origin=str(p))
        except OSError as e:
            raise LayoutError(f"cannot read layout file {spec}: {e.strerror or e}") from None
    return load_dynamodb_preset(spec)


def all_dynamodb_presets() -> list[DynamoLayout]:
    """Every shipped DynamoDB layout, by name."""
    return [load_dynamodb_preset(n) for n in dynamodb_preset_names()]
