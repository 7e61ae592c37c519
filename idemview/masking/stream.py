"""JSON text masked as a stream, in memory bounded by its small parts (issue 27 item 1, DESIGN.md §6).

The whole-document path parses a payload (``json.loads``: a 5 MB document of 24,000 small objects is a
tree of ~60 MB of Python objects), masks the tree (a second tree) and encodes it. :func:`mask_json_text`
gives the same text without building either tree: it walks the JSON text with a scanner of its own,
bounded in depth by :data:`~idemview.domain.jsontext.MAX_JSON_DEPTH` like the parser, and writes masked
output as it goes. Containers that close within :data:`SMALL` characters are parsed and masked whole by
the Masker's own walk (:meth:`Masker._walk`, with their depth in the document), so the rules are the same
code; the containers above them are walked here with the same rules as ``Masker._walk_dict`` and
``Masker._walk_list``:

* object keys are masked as text, with a ``~n`` suffix when two keys mask alike; a value under a
  sensitive name is tagged whole; a HAR-style header object (at most 4 keys, one ``value``, a ``name``
  or ``key`` naming a sensitive header) tags its ``value`` whole;
* a ``[name, value]`` pair with a sensitive ``name`` tags the value whole;
* JSON numbers that are card numbers (13-19 digits, issuer prefix, Luhn) become card tags;
* text goes through every detector (:meth:`Masker.mask_text`).

A value tagged whole (under a sensitive name) is materialised, because its tag is the HMAC of its
canonical text (sorted keys); that is the only part of a document held whole besides single strings.
Two differences from ``json.loads`` are documented rather than reproduced, both only in containers longer
than :data:`SMALL`: a key repeated inside one such object is written twice (``json.loads`` keeps the
last value at the first key's place); both are masked.

Text that is not JSON the parser accepts (broken, nested deeper than the bound, a scalar at the top)
gives ``None``: the caller masks it by the whole-value path (for broken JSON that is its text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from idemview.domain.jsontext import MAX_JSON_DEPTH, json_depth
from idemview.masking.engine import Masker
from idemview.masking.validators import _CARD_MIN, _card_number

__all__ = ["SMALL", "STREAM_MIN", "JsonText", "mask_json_text"]

#: A container closing within this many characters is parsed and masked whole (bounded by this size).
SMALL = 64 * 1024
#: Exporters hand JSON cells at least this long to :func:`mask_json_text`; shorter ones are parsed.
STREAM_MIN = 256 * 1024

_WS = re.compile(r"[ \t\n\r]*")
# A string (to its end, or to the end of the scanned window when it does not close in it) or a bracket.
_STRUCT = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)|[\[\]{}]', re.S)
_DECODE = json.JSONDecoder().raw_decode


class _Broken(ValueError):
    """Not JSON that :func:`idemview.domain.jsontext.loads` accepts."""


class JsonText:
    """A JSON cell kept as its text for :func:`mask_json_text` (an exporter's marker). ``fallback()``
    gives the value the whole-document path would have had (parsed JSON, or the text when broken)."""

    __slots__ = ("text", "fallback")

    def __init__(self, text: str, fallback: Callable[[], Any]) -> None:
        self.text = text
        self.fallback = fallback

    def __repr__(self) -> str:
        return f"<JsonText {len(self.text)} characters>"


def mask_json_text(masker: Masker, text: str, encode: Callable[[Any], str], *, count: bool = True) -> str | None:
    """``encode(masker.mask_value(json.loads(text)))`` computed as a stream (see the module doc), or
    ``None`` when ``text`` is not a JSON object or array the bounded parser accepts.

    ``encode``: how a masked value is written (the exporter's compact JSON encoder); it is applied to
    scalars, tags and small masked subtrees, and the brackets, commas and colons between them are
    written here, compact (``","`` and ``":"``). ``count=False`` leaves the Masker's counts alone.
    Memory: the output text, plus one small container or one string at a time."""
    cnt = masker._counts if count else {}
    i = _WS.match(text, 0).end()  # type: ignore[union-attr]
    if i >= len(text) or text[i] not in "[{":
        return None
    out: list[str] = []
    try:
        i = _Walker(masker, text, encode, cnt, out).container(i, 0)
    except (ValueError, IndexError, TypeError, AssertionError, RecursionError):  # _Broken, JSONDecodeError
        return None
    if _WS.match(text, i).end() != len(text):  # type: ignore[union-attr]
        return None  # "Extra data", as json.loads says
    return "".join(out)


class _Walker:
    """One document's scan: positions in ``text``, output appended to ``out``."""

    __slots__ = ("m", "text", "enc", "cnt", "out")

    def __init__(self, m: Masker, text: str, enc: Callable[[Any], str], cnt: dict[str, int], out: list[str]):
        self.m, self.text, self.enc, self.cnt, self.out = m, text, enc, cnt, out

    def ws(self, i: int) -> int:
        return _WS.match(self.text, i).end()  # type: ignore[union-attr]

    def close_within(self, i: int, limit: int | None) -> int | None:
        """End of the container starting at ``i`` if it closes within ``limit`` characters (``None``:
        anywhere), else ``None``. Strings are skipped whole, so brackets inside them do not count."""
        text = self.text
        stop = len(text) if limit is None else min(len(text), i + limit)
        depth = 0
        for mt in _STRUCT.finditer(text, i, stop):
            ch = text[mt.start()]
            if ch == '"':
                continue
            if ch == "[" or ch == "{":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return mt.end()
        if limit is None:
            raise _Broken("unclosed container")
        return None

    def check_depth(self, i: int, end: int, d: int) -> None:
        """The container ``text[i:end]`` at depth ``d`` keeps the document within MAX_JSON_DEPTH."""
        text = self.text
        if d + text.count("[", i, end) + text.count("{", i, end) > MAX_JSON_DEPTH:
            if d + json_depth(text[i:end]) > MAX_JSON_DEPTH:
                raise _Broken("too deep")

    def whole(self, i: int, d: int) -> tuple[Any, int]:
        """The value at ``i`` parsed whole (depth-checked when a container)."""
        v, e = _DECODE(self.text, i)
        if self.text[i] in "[{":
            self.check_depth(i, e, d)
        return v, e

    def container(self, i: int, d: int) -> int:
        """Write the masked container starting at ``i`` (depth ``d``: 0 for the root); its end."""
        if d >= MAX_JSON_DEPTH:
            raise _Broken("too deep")
        end = self.close_within(i, SMALL)
        if end is not None:
            v, e = self.whole(i, d)
            self.out.append(self.enc(self.m._walk(v, self.cnt, d)))
            return e
        return self.obj(i, d) if self.text[i] == "{" else self.array(i, d)

    def header_kind(self, i: int) -> str | None:
        """``Masker._walk_dict``'s header rule for the object at ``i``: at most 4 keys, one ``value``,
        and ``name`` (else ``key``) a string naming a sensitive header: that name's kind."""
        text = self.text
        keys: dict[Any, int] = {}
        j = self.ws(i + 1)
        while text[j] != "}" and len(keys) < 5:
            k, j = _DECODE(text, j)
            j = self.ws(self.ws(j) + 1)  # past ':'
            keys[k] = j
            j = self.ws(self.skip(j))
            if text[j] == ",":
                j = self.ws(j + 1)
        if len(keys) > 4 or "value" not in keys:
            return None
        at = keys.get("name", keys.get("key"))
        if at is None or text[at] != '"':
            return None
        nm, _ = _DECODE(text, at)
        return self.m.column_kind(nm)

    def skip(self, j: int) -> int:
        """End of the value at ``j``, nothing kept."""
        if self.text[j] in "[{":
            e = self.close_within(j, None)
            assert e is not None
            return e
        return _DECODE(self.text, j)[1]

    def obj(self, i: int, d: int) -> int:
        text, out, m, cnt, enc = self.text, self.out, self.m, self.cnt, self.enc
        hdr = self.header_kind(i)
        keys = m._key_cache
        seen: set[str] = set()
        out.append("{")
        j = self.ws(i + 1)
        n = 0
        while text[j] != "}":
            if text[j] != '"':
                raise _Broken("expecting a key")
            k, j = _DECODE(text, j)
            j = self.ws(j)
            if text[j] != ":":
                raise _Broken("expecting ':'")
            j = self.ws(j + 1)
            ki = keys.get(k)
            if ki is None:
                ki = m._key_info(k)
            mk, kind, key_kinds = ki
            if key_kinds:
                for kk in key_kinds:
                    cnt[kk] = cnt.get(kk, 0) + 1
                if mk in seen:
                    mk = f"{mk}~{n}"
            seen.add(mk)
            if n:
                out.append(",")
            n += 1
            out.append(enc(mk) + ":")
            j = self.ws(self.member(j, d, kind, hdr if k == "value" else None))
            if text[j] == ",":
                j = self.ws(j + 1)
                if text[j] == "}":
                    raise _Broken("trailing comma")
            elif text[j] != "}":
                raise _Broken("expecting ',' or '}'")
        out.append("}")
        return j + 1

    def member(self, j: int, d: int, kind: str | None, hdr: str | None) -> int:
        """Write the value at ``j`` of an object member (``kind``: its name's; ``hdr``: the header rule's)."""
        m, cnt = self.m, self.cnt
        if self.text[j] in "[{":
            if kind is None and hdr is None:
                return self.container(j, d + 1)
            v, e = self.whole(j, d + 1)
            self.out.append(self.enc(m._tag_whole(kind or hdr, v, cnt)))  # type: ignore[arg-type]
            return e
        v, e = _DECODE(self.text, j)
        r: Any
        if v is None or v is True or v is False:
            r = v
        elif kind is not None or hdr is not None:
            r = m._tag_whole(kind or hdr, v, cnt)  # type: ignore[arg-type]
        elif type(v) is str:
            r = m._mask_text(v, cnt)
        elif type(v) is int or type(v) is float:
            r = v if v < _CARD_MIN or not _card_number(v) else m._tag_number(v, cnt)
        else:
            r = m._mask_value(v, None, cnt)
        self.out.append(self.enc(r))
        return e

    def pair_rule(self, i: int) -> bool:
        """``Masker._walk_list``'s rule: a 2-element list ``[name, value]`` with a sensitive ``name``
        and a non-null value (then the list is masked whole)."""
        text = self.text
        j = self.ws(i + 1)
        if text[j] != '"':
            return False
        nm, j = _DECODE(text, j)
        if self.m.column_kind(nm) is None:
            return False
        j = self.ws(j)
        if text[j] != ",":
            return False
        j = self.ws(j + 1)
        if text.startswith("null", j):
            return False
        j = self.ws(self.skip(j))
        return text[j] == "]"

    def array(self, i: int, d: int) -> int:
        text, out, m, cnt, enc = self.text, self.out, self.m, self.cnt, self.enc
        if self.pair_rule(i):
            v, e = self.whole(i, d)
            out.append(enc(m._walk(v, cnt, d)))
            return e
        out.append("[")
        j = self.ws(i + 1)
        first = True
        while text[j] != "]":
            if not first:
                out.append(",")
            first = False
            if text[j] in "[{":
                j = self.container(j, d + 1)
            else:
                v, j = _DECODE(text, j)
                if (type(v) is int or type(v) is float) and v >= _CARD_MIN and _card_number(v):
                    out.append(enc(m._tag_number(v, cnt)))
                else:
                    out.append(enc(m._mask_value(v, None, cnt)))
            j = self.ws(j)
            if text[j] == ",":
                j = self.ws(j + 1)
                if text[j] == "]":
                    raise _Broken("trailing comma")
            elif text[j] != "]":
                raise _Broken("expecting ',' or ']'")
        out.append("]")
        return j + 1
