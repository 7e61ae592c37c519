"""The :class:`Masker` (DESIGN.md §6): tags, the walk over parsed JSON, text through the detectors.

Imported from :mod:`idemview.masking.masker`, its public home.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Callable, Mapping
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from idemview.domain.jsontext import MAX_JSON_DEPTH
from idemview.domain.model import Payload
from idemview.masking.detectors import Detectors
from idemview.masking.known import _scrub_known, mask_userinfo
from idemview.masking.patterns import (
    _F_AT,
    _F_AWS,
    _F_B64,
    _F_BYTEX,
    _F_CARD,
    _F_CLI,
    _F_ENT,
    _F_IBAN,
    _F_JSONU,
    _F_JWT,
    _F_LABEL,
    _F_NFKC,
    _F_PCT,
    _F_PEM,
    _F_PHONE,
    _F_PHONE00,
    _F_PROV,
    _F_SSN,
    _F_STEM,
    _F_URL,
    _MISSING,
    _families,
)
from idemview.masking.rules import MaskRules
from idemview.masking.validators import _CARD_MIN, _card_number, _plain_chunk, _plain_shape, card_last4

# Exact types that never carry text, passed through unless their column is sensitive by name.
_PASSTHROUGH_TYPES = frozenset({int, float, Decimal, datetime, date, time, timedelta, UUID, bool, type(None)})


#: Nesting the masker keeps as structure; deeper containers become their masked JSON text. The same
#: bound as the parser's (:data:`idemview.domain.jsontext.MAX_JSON_DEPTH`), for values that did not come
#: through it (API callers, driver-parsed columns).
MAX_MASK_DEPTH = MAX_JSON_DEPTH


def _is_container(v: Any) -> bool:
    t = type(v)
    return t is dict or t is list or t is tuple or (t is not str and isinstance(v, (Mapping, list, tuple)))


def dump_json(value: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON text of a value of any nesting, by a loop (``json.dumps`` recurses per level and
    fails past ~1000). Scalars as ``json.dumps`` writes them (``default=str`` for other objects)."""
    enc = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":")).encode
    parts: list[str] = []
    # items: a value to write, or a literal string marker (closing brackets, separators)
    stack: list[tuple[bool, Any]] = [(False, value)]
    while stack:
        literal, v = stack.pop()
        if literal:
            parts.append(v)
            continue
        if isinstance(v, Mapping):
            items = sorted(v.items(), key=lambda kv: str(kv[0])) if sort_keys else list(v.items())
            parts.append("{")
            stack.append((True, "}"))
            for n, (k, x) in enumerate(reversed(items)):
                stack.append((False, x))
                sep = "" if n == len(items) - 1 else ","
                stack.append((True, sep + enc(k if isinstance(k, str) else str(k)) + ":"))
        elif isinstance(v, (list, tuple)):
            parts.append("[")
            stack.append((True, "]"))
            for n, x in enumerate(reversed(v)):
                stack.append((False, x))
                if n != len(v) - 1:
                    stack.append((True, ","))
        else:
            parts.append(enc(v))
    return "".join(parts)


class Masker(Detectors):
    """Masks values with one set of :class:`MaskRules` and one HMAC key.

    ``key`` (bytes) defaults to 32 random bytes, per instance; it is never stored, logged, pickled
    or shown. Make one Masker per GUI session and one per export. Not thread-safe for ``counts``
    (use one per thread/worker).
    """

    _TEXT_CACHE_MAX = 16384
    _TEXT_CACHE_LEN = 160

    def __init__(self, rules: MaskRules | None = None, key: bytes | None = None) -> None:
        self.rules = rules if rules is not None else MaskRules.default()
        if key is not None and not isinstance(key, (bytes, bytearray)):
            raise TypeError("Masker key must be bytes")
        self.__key = bytes(key) if key is not None else secrets.token_bytes(32)
        self._counts: dict[str, int] = {}
        self._name_cache: dict[str, str | None] = {}
        self._url_name_cache: dict[str, str | None] = {}
        self._text_cache: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._tag_cache: dict[tuple[str, str], str] = {}
        self._key_cache: dict[str, tuple[str, str | None, tuple[str, ...]]] = {}
        self._pct_depth = 0  # nesting of _d_percent_encoded (decodes at most twice)
        det = self.rules.detectors
        # (detector, families that must have triggered, function), in the order they must run.
        self._steps = [
            (bits, fn)
            for name, bits, fn in (
                ("percent_encoded", _F_JSONU, self._d_json_escapes),
                ("percent_encoded", _F_PCT, self._d_percent_encoded),
                ("percent_encoded", _F_ENT, self._d_html_entities),
                ("percent_encoded", _F_NFKC, self._d_lookalike_letters),
                ("percent_encoded", _F_BYTEX, self._d_byte_escapes),
                ("private_key", _F_PEM, self._d_pem),
                ("url_password", _F_URL, self._d_url_password),
                ("url_param", _F_STEM, self._d_url_param),
                ("jwt", _F_JWT, self._d_jwt),
                ("provider_key", _F_PROV, self._d_provider),
                ("provider_key", _F_AWS, self._d_aws_secret),
                ("auth_header", _F_STEM, self._d_auth),
                ("percent_encoded", _F_B64, self._d_base64),
                ("email", _F_AT, self._d_email),
                ("iban", _F_IBAN, self._d_iban),
                ("phone", _F_PHONE, self._d_phone),  # before cards: "+4915123456789" is a phone
                ("phone", _F_PHONE00, self._d_phone00),
                ("ssn", _F_SSN, self._d_ssn),
                ("named_value", _F_LABEL, self._d_labelled_number),
                ("card", _F_CARD, self._d_card),
                ("xml_element", _F_STEM, self._d_xml_element),
                ("key_detail", _F_STEM, self._d_key_detail),
                ("command_line", _F_CLI, self._d_command_line),
                ("named_value", _F_STEM, self._d_kv),
            )
            if name in det
        ]

    def __repr__(self) -> str:
        return f"<Masker rules={self.rules.describe()['rules_sha256'][:12]} key=<hidden>>"

    def __getstate__(self):
        raise TypeError("a Masker holds a session key and cannot be pickled")

    # ------------------------------------------------------------------ public API

    @property
    def counts(self) -> dict[str, int]:
        """Kind → number of values masked since creation or :meth:`reset_counts` (a copy)."""
        return dict(self._counts)

    def reset_counts(self) -> None:
        self._counts.clear()

    def count_total(self) -> int:
        """Number of values masked so far (the sum of :attr:`counts`, without copying them): a caller
        that caches masked output can tell from it whether a call masked anything."""
        return sum(self._counts.values())

    def add_counts(self, kinds: Mapping[str, int]) -> None:
        """Add ``kinds`` (kind → values) to :attr:`counts`: a caller that reuses a masked output for an
        equal value (the export's memo per distinct value) counts it as masked again, so the counts
        stay one per cell whether the output was computed or reused."""
        cnt = self._counts
        for k, n in kinds.items():
            cnt[k] = cnt.get(k, 0) + n

    def column_kind(self, column: str | None) -> str | None:
        """Kind of a column / field name under these rules, or ``None`` if not sensitive by name."""
        if column is None:
            return None
        try:
            return self._name_cache[column]
        except KeyError:
            pass
        k = self.rules.classify_name(column) if isinstance(column, str) else None
        if len(self._name_cache) > 8192:
            self._name_cache.clear()
        self._name_cache[column] = k
        return k

    def unchanged_check(self) -> Callable[[str], bool] | None:
        """A cheap test that proves a text is one every rule of this Masker leaves unchanged (a
        canonical UUID or lower-case hex holding no card or IBAN, see ``_plain_shape``), for callers
        that mask many unique ids; ``None`` when user patterns exist (they may match anything).
        False from the test proves nothing: mask the text."""
        return None if self.rules.patterns else _plain_shape

    def unchanged_chunk_check(self) -> Callable[[list[str]], list[int] | None] | None:
        """The chunk form of :meth:`unchanged_check` for texts that are all canonical UUIDs (an
        exporter's id column) or all lower-case hex digests (an md5 ``intent_ref``, a binary payload as
        hex): ``check(texts)`` gives the positions of the texts not proven unchanged (ask the per-text
        check about those, mask those it does not prove), or
        ``None`` for another chunk (then ask :meth:`unchanged_check` per text); one pass over the chunk
        (``_plain_chunk``). ``None`` when user patterns exist."""
        return None if self.rules.patterns else _plain_chunk

    def mask_text(self, text: str, *, count: bool = True) -> str:
        """Mask every detected secret inside free text (JSON text, URLs, error messages, headers).

        Only the secret part is replaced: ``postgres://app:[password#1a2b3c]@db/x``,
        ``Authorization: Bearer [bearer#…]``. Returns ``text`` itself when nothing was found.
        Idempotent: tags are never re-masked. ``count=False`` leaves :attr:`counts` alone.
        """
        return self._mask_text(text, self._counts if count else {})

    def mask_message(self, text: str) -> str:
        """Mask a message (an error, a banner, a log line) before anyone sees it: secrets this process
        knows (:func:`register_secret`) are replaced first, then anything shaped like
        ``user:password@host`` (:func:`mask_userinfo`, URL or not), then every detector of
        :meth:`mask_text` (e-mail, card, API key...). Counts are left alone. DESIGN §6: error messages
        and logs are masked like any other value."""
        if not isinstance(text, str):
            text = str(text)
        text = _scrub_known(self, text)
        text = mask_userinfo(text, lambda pw: self._tag("password", pw))
        return self._mask_text(text, {})

    def mask_value(self, value: Any, column: str | None = None, *, count: bool = True) -> Any:
        """Mask one cell. ``column`` is its column or field name, if known.

        - sensitive column (by name): any non-``None``, non-bool value becomes one tag string;
        - ``None``, ``bool``, ``int``, ``float``, ``Decimal``, date/time values, ``UUID`` pass through;
        - ``str`` → :meth:`mask_text`;
        - ``dict`` / ``list`` / ``tuple`` (parsed JSON) → a new structure, recursively, using field
          names; keys are masked as text too; ``[name, value]`` pairs and ``{"name":..,"value":..}``
          header objects (HAR) are masked by their name;
        - ``bytes`` pass through (the caller decodes them first if they are text);
        - :class:`idemview.domain.model.Payload` → a new Payload with its value masked.

        ``count=False`` leaves :attr:`counts` alone (e.g. for a manifest's own fields).
        """
        return self._mask_value(value, column, self._counts if count else {})

    def for_column(self, column: str | None) -> Callable[[Any], Any]:
        """A function equivalent to ``lambda v: self.mask_value(v, column)``, with the column's
        name rule resolved once (used by exports and grids for speed)."""
        kind = self.column_kind(column)
        cnt = self._counts
        if kind is not None:
            tag_whole = self._tag_whole

            def masked_column(v: Any) -> Any:
                if v is None or v is True or v is False:
                    return v
                return tag_whole(kind, v, cnt)

            return masked_column
        tc = self._text_cache
        mask_text = self._mask_text
        mask_value = self._mask_value
        mask_dict = self._mask_dict
        passthrough = _PASSTHROUGH_TYPES

        def plain_column(v: Any) -> Any:
            t = type(v)
            if t is str:
                hit = tc.get(v)
                if hit is None:
                    return mask_text(v, cnt)
                if hit[1]:
                    for k in hit[1]:
                        cnt[k] = cnt.get(k, 0) + 1
                return hit[0]
            if t in passthrough:
                return v
            if t is dict:
                return mask_dict(v, cnt)
            return mask_value(v, None, cnt)

        return plain_column

    def mask_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """``{column: mask_value(value, column)}`` for a row given as a mapping."""
        return {k: self._mask_value(v, k, self._counts) for k, v in row.items()}

    def is_credential(self, column: str | None, value: Any) -> bool:
        """True if the cell holds (or its column names) a credential: it may then never be revealed,
        not even one cell at a time. Does not change :attr:`counts`."""
        kind = self.column_kind(column)
        cred = self.rules.credential_kinds
        if kind is not None and value is not None and kind in cred:
            return True
        scratch: dict[str, int] = {}
        self._mask_value(value, None, scratch)
        return any(k in cred for k in scratch)

    def detected_kinds(self, value: Any, column: str | None = None) -> dict[str, int]:
        """Which kinds this Masker would mask in ``value`` (a cell, text or parsed JSON; ``column``
        its column or field name), with how many values of each: ``{}`` when nothing is sensitive.
        The value is never returned or kept, and :attr:`counts` is left alone (the ledger audit,
        ``secret_at_rest``, asks this of sampled cells)."""
        scratch: dict[str, int] = {}
        self._mask_value(value, column, scratch)
        return scratch

    def tag(self, kind: str, value: Any) -> str:
        """The tag this Masker gives ``value`` as ``kind`` (counted)."""
        return self._tag_whole(kind, value, self._counts)

    # ------------------------------------------------------------------ tags

    def _hex(self, norm: str) -> str:
        return hmac.digest(self.__key, norm.encode("utf-8", "surrogatepass"), "sha256").hex()[:6]

    def _tag(self, kind: str, raw: str, value: Any = None) -> str:
        """Tag for a detected/whole string value. Normalisation makes formatting variants equal.
        ``value``: the value ``raw`` was written from, when it was not text (a JSON object or number
        under a card name), for the card's last four (:func:`card_last4`, the one rule for them)."""
        ck = (kind, raw)
        t = self._tag_cache.get(ck)
        if t is not None:
            return t
        last4 = None
        if kind == "card":
            norm = "".join(ch for ch in raw if ch.isdigit())
            if self.rules.keep_card_last4:
                last4 = card_last4(raw if value is None else value)
        elif kind == "iban":
            norm = raw.replace(" ", "").upper()
        elif kind == "email":
            norm = raw.strip().lower()
        elif kind in ("phone", "ssn"):
            norm = "".join(ch for ch in raw if ch.isdigit())
            if kind == "phone" and norm.startswith("00"):
                norm = norm[2:]  # "0044 20 ..." is "+44 20 ..."
        else:
            norm = raw
        t = f"[{kind}#{self._hex(norm)} …{last4}]" if last4 else f"[{kind}#{self._hex(norm)}]"
        if len(self._tag_cache) > 65536:
            self._tag_cache.clear()
        self._tag_cache[ck] = t
        return t

    def _tag_whole(self, kind: str, value: Any, cnt: dict[str, int]) -> str:
        """Whole-value tag for a value under a sensitive name (any type); counted in ``cnt``."""
        if isinstance(value, str):
            raw = value
        elif isinstance(value, (bytes, bytearray, memoryview)):
            raw = "b:" + bytes(value).hex()
        elif isinstance(value, (dict, list, tuple)):
            try:
                raw = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
            except (RecursionError, TypeError):  # nested past the encoder's recursion; keys of mixed types
                raw = dump_json(value, sort_keys=True)
        elif isinstance(value, datetime):
            raw = value.isoformat()
        elif type(value) is float and value.is_integer() and abs(value) < 1e19:
            raw = str(int(value))  # 4242424242424242.0 is the number 4242424242424242, not 17 digits
        else:
            raw = str(value)
        cnt[kind] = cnt.get(kind, 0) + 1
        return self._tag(kind, raw, None if isinstance(value, str) else value)

    # ------------------------------------------------------------------ values
    # Internals count into ``cnt`` (the Masker's counts, or a scratch dict for is_credential).

    def _mask_value(self, value: Any, column: str | None, cnt: dict[str, int]) -> Any:
        if value is None or value is True or value is False:
            return value
        if column is not None:
            kind = self._name_cache.get(column, _MISSING)
            if kind is _MISSING:
                kind = self.column_kind(column)
            if kind is not None:
                return self._tag_whole(kind, value, cnt)  # type: ignore[arg-type]
        t = type(value)
        if t is str:
            return self._mask_text(value, cnt)
        if t is int or t is float or t is Decimal:
            return value
        if t is dict:
            return self._mask_dict(value, cnt)
        if t is list or t is tuple:
            return self._mask_list(value, cnt)
        if isinstance(value, str):  # str subclasses (enums): keep the object if unchanged
            out = self._mask_text(str(value), cnt)
            return value if out == value else out
        if isinstance(
            value, (int, float, Decimal, datetime, date, time, timedelta, UUID, bytes, bytearray, memoryview)
        ):
            return value
        if isinstance(value, Mapping):
            return self._mask_dict(value, cnt)
        if isinstance(value, (list, tuple)):
            return self._mask_list(value, cnt)
        if isinstance(value, Payload):
            return Payload(
                value.encoding,
                self._mask_value(value.value, None, cnt),
                value.size,
                None if value.problem is None else self._mask_text(value.problem, cnt),
            )
        # Unknown object: what leaves is its text, so mask that.
        return self._mask_text(str(value), cnt)

    def _mask_dict(self, d: Mapping[Any, Any], cnt: dict[str, int]) -> dict[Any, Any]:
        return self._walk(d, cnt)

    def _mask_list(self, seq, cnt: dict[str, int]) -> list[Any]:
        return self._walk(seq, cnt)

    def _walk(self, root: Any, cnt: dict[str, int], depth: int = 0) -> Any:
        """Mask a parsed JSON value (dicts, lists, tuples, Mappings) by a loop over an explicit stack,
        never recursion on the data: any nesting is walked in constant Python stack. Containers more
        than :data:`MAX_MASK_DEPTH` levels down are serialised to JSON text (iteratively too) and that
        text is masked as one value: shown, bounded, never a crash (issue 19 item 11). ``depth``: how deep
        ``root`` itself sits in a larger document (the stream masker hands over small subtrees)."""
        holder: list[Any] = [None]
        # (source container, where its copy goes, slot there, depth)
        stack: list[tuple[Any, Any, Any, int]] = [(root, holder, 0, depth)]
        pop, push = stack.pop, stack.append
        while stack:
            src, parent, slot, depth = pop()
            if depth >= MAX_MASK_DEPTH:
                parent[slot] = self._mask_text(dump_json(src), cnt)
                continue
            if isinstance(src, Mapping):
                parent[slot] = self._walk_dict(src, cnt, push, depth + 1)
            else:
                parent[slot] = self._walk_list(src, cnt, push, depth + 1)
        return holder[0]

    def _walk_dict(self, d: Mapping[Any, Any], cnt: dict[str, int], push, depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        keys = self._key_cache
        tc = self._text_cache
        # HAR-style header object {"name": "Cookie", "value": "..."}: the name governs the value.
        hdr_kind = None
        if len(d) <= 4 and "value" in d:
            nm = d.get("name", d.get("key"))
            if isinstance(nm, str):
                hdr_kind = self.column_kind(nm)
        for k, v in d.items():
            if type(k) is not str:
                if _is_container(v):
                    out[k] = None
                    push((v, out, k, depth))
                else:
                    out[k] = self._mask_value(v, None, cnt)
                continue
            ki = keys.get(k)
            if ki is None:
                ki = self._key_info(k)
            mk, kind, key_kinds = ki
            if key_kinds:
                for kk in key_kinds:
                    cnt[kk] = cnt.get(kk, 0) + 1
                if mk in out:  # two keys masked alike: keep both
                    mk = f"{mk}~{len(out)}"
            if v is None or v is True or v is False:
                out[mk] = v
            elif kind is not None:
                out[mk] = self._tag_whole(kind, v, cnt)
            elif hdr_kind is not None and k == "value":
                out[mk] = self._tag_whole(hdr_kind, v, cnt)
            elif type(v) is str:
                hit = tc.get(v)
                if hit is None:
                    out[mk] = self._mask_text(v, cnt)
                else:
                    if hit[1]:
                        for kk in hit[1]:
                            cnt[kk] = cnt.get(kk, 0) + 1
                    out[mk] = hit[0]
            elif type(v) is int or type(v) is float:
                out[mk] = v if v < _CARD_MIN or not _card_number(v) else self._tag_number(v, cnt)
            elif _is_container(v):
                out[mk] = None  # the slot keeps the key order; filled when the stack reaches it
                push((v, out, mk, depth))
            else:
                out[mk] = self._mask_value(v, None, cnt)
        return out

    def _key_info(self, k: str) -> tuple[str, str | None, tuple[str, ...]]:
        """(masked key, kind of the name, kinds masked inside the key) of a JSON object key, cached:
        keys repeat a lot. The kinds inside are counted by the caller each time the key is seen."""
        scratch: dict[str, int] = {}
        mk = self._mask_text(k, scratch)
        ki = (mk, self.column_kind(k), tuple(x for x, n in scratch.items() for _ in range(n)))
        if len(self._key_cache) > 8192:
            self._key_cache.clear()
        self._key_cache[k] = ki
        return ki

    def _walk_list(self, seq, cnt: dict[str, int], push, depth: int) -> list[Any]:
        # [name, value] header pairs: [["Authorization", "Bearer ..."], ["Cookie", "sid=..."]]
        if len(seq) == 2 and isinstance(seq[0], str) and seq[1] is not None:
            kind = self.column_kind(seq[0])
            if kind is not None:
                return [self._mask_text(seq[0], cnt), self._tag_whole(kind, seq[1], cnt)]
        out: list[Any] = []
        for v in seq:
            if (type(v) is int or type(v) is float) and v >= _CARD_MIN and _card_number(v):
                out.append(self._tag_number(v, cnt))
            elif _is_container(v):
                out.append(None)
                push((v, out, len(out) - 1, depth))
            else:
                out.append(self._mask_value(v, None, cnt))
        return out

    def _tag_number(self, v: int | float, cnt: dict[str, int]) -> str:
        """A JSON number that is a card number (issue 19: ``{"n": 4111111111111111}``), as its tag."""
        cnt["card"] = cnt.get("card", 0) + 1
        return self._tag("card", str(int(v)))

    # ------------------------------------------------------------------ text

    def _mask_text(self, text: str, cnt: dict[str, int]) -> str:
        # Inside a percent-decoding step the result depends on its depth: never cached then.
        short = len(text) <= self._TEXT_CACHE_LEN and not self._pct_depth
        if short:
            hit = self._text_cache.get(text)
            if hit is not None:
                if hit[1]:
                    for k in hit[1]:
                        cnt[k] = cnt.get(k, 0) + 1
                return hit[0]
        out = text
        local: list[str] = []
        if self.rules.patterns:
            out = self._d_patterns(out, local)
        elif _plain_shape(text):
            return text  # unique ids and hex mostly: not cached, the check is cheaper than a cache slot
        if len(out) >= 6:  # nothing we detect by shape is shorter
            fams = _families(out)
            if fams:
                for bits, step in self._steps:
                    if fams & bits:
                        out = step(out, local)
        if short:
            if len(self._text_cache) >= self._TEXT_CACHE_MAX:
                self._text_cache.clear()
            self._text_cache[text] = (out, tuple(local))
        if local:
            for k in local:
                cnt[k] = cnt.get(k, 0) + 1
        return out
