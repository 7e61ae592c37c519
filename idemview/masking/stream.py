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
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from idemview.domain.jsontext import MAX_JSON_DEPTH, json_depth
from idemview.masking.engine import Masker
from idemview.masking.validators import _CARD_MIN, _card_number

__all__ = [
    "CARRY",
    "SMALL",
    "STREAM_MIN",
    "JsonText",
    "json_string_pieces",
    "mask_json_pages",
    "mask_json_text",
    "mask_text_pieces",
]

#: A container closing within this many characters is parsed and masked whole (bounded by this size).
SMALL = 64 * 1024
#: Exporters hand JSON cells at least this long to :func:`mask_json_text`; shorter ones are parsed.
STREAM_MIN = 256 * 1024

_WS = re.compile(r"[ \t\n\r]*")
# A string (to its end, or to the end of the scanned window when it does not close in it) or a bracket.
# (Each as "unrolled loop": a repeat of single characters per run, not one group iteration per character,
# which costs the regex engine stack for every character of a long string.)
_STRUCT = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[\[\]{}]', re.S)
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
    out: list[str] = []
    w = _Walker(masker, text, encode, cnt, out)
    if not w.run():
        return None
    return "".join(out)


def mask_json_pages(
    masker: Masker,
    pages: Iterable[str],
    encode: Callable[[Any], str],
    emit: Callable[[str], Any],
    *,
    count: bool = True,
) -> bool | None:
    """:func:`mask_json_text` of ``"".join(pages)`` without ever holding the whole text: the text is a
    window over ``pages`` that is refilled between the elements of a large container (text already
    walked is dropped) and grows only while one value has to be seen whole: a single string or number
    longer than the window, a value tagged whole (under a sensitive name), the values after a large
    ``value`` member (the header rule counts an object's keys). The masked text is handed to ``emit``
    in pieces as it is made.

    Returns ``True`` when the document was masked (every piece emitted); ``None`` when the text does
    not start with ``[`` or ``{`` (nothing emitted: a JSON scalar, or not JSON); ``False`` when it is
    not JSON the bounded parser accepts, found part-way: ``emit`` may have had part of the output, which
    the caller must discard (the exporter writes the pieces to a temporary file first). Counts are
    added to the Masker only on ``True``."""
    cnt: dict[str, int] = {}
    out: list[str] = []
    w = _Walker(masker, "", encode, cnt, out, iter(pages), emit)
    i = w.ws(0)
    if i >= len(w.text) or w.text[i] not in "[{":
        return None
    if not w.run():
        return False
    if out:
        emit("".join(out))
    if count:
        masker.add_counts(cnt)
    return True


#: The paged walk drops the text it has walked once this many characters are behind it.
DROP = 256 * 1024
# A JSON string's body (up to its closing quote or the end of the window).
_STR_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.S)
# A number or literal's characters.
_ATOM = re.compile(r"[-+0-9.a-zA-Z]*")


class _Walker:
    """One document's scan: positions in ``text`` (the whole text, or a window over ``src``'s pages
    whose start moves only in :meth:`refill`), output appended to ``out`` (and, for a paged walk,
    handed to ``emit`` at each refill)."""

    __slots__ = ("m", "text", "enc", "cnt", "out", "src", "emit", "eof")

    def __init__(
        self,
        m: Masker,
        text: str,
        enc: Callable[[Any], str],
        cnt: dict[str, int],
        out: list[str],
        src: Iterator[str] | None = None,
        emit: Callable[[str], Any] | None = None,
    ):
        self.m, self.text, self.enc, self.cnt, self.out = m, text, enc, cnt, out
        self.src, self.emit, self.eof = src, emit, src is None

    def run(self) -> bool:
        """Walk the whole document; ``False`` when it is not JSON the bounded parser accepts."""
        i = self.ws(0)
        if i >= len(self.text) or self.text[i] not in "[{":
            return False
        try:
            i = self.container(i, 0)
        except (ValueError, IndexError, TypeError, AssertionError, RecursionError):  # _Broken, JSONDecodeError
            return False
        return self.ws(i) == len(self.text)  # else "Extra data", as json.loads says

    # ---- the window (a paged walk); for a whole text these return at once

    def more(self) -> bool:
        """Append the next page to the window; ``False`` at the end of the text."""
        if self.eof:
            return False
        for p in self.src:  # type: ignore[union-attr]
            if p:
                self.text += p
                return True
        self.eof = True
        return False

    def need(self, end: int) -> None:
        """Make ``text[:end]`` available (or all the text, when shorter)."""
        while len(self.text) < end and self.more():
            pass

    def ch(self, j: int) -> str:
        """The character at ``j`` (``IndexError`` past the end of the text)."""
        if j >= len(self.text):
            self.need(j + 1)
        return self.text[j]

    def refill(self, j: int) -> int:
        """Between two elements of a container: hand the output so far to ``emit`` and drop the text
        before ``j`` from the window; ``j``'s new position. Only here do positions move, and no caller
        keeps one across it but its own loop's."""
        if self.emit is None or j < DROP:
            return j
        if self.out:
            self.emit("".join(self.out))
            self.out.clear()
        self.text = self.text[j:]
        return 0

    def ws(self, i: int) -> int:
        while True:
            e = _WS.match(self.text, i).end()  # type: ignore[union-attr]
            if e < len(self.text) or not self.more():
                return e

    def tok(self, j: int) -> tuple[Any, int]:
        """The scalar at ``j`` decoded, once the window holds all of it."""
        if not self.eof:
            if self.ch(j) == '"':
                k = j + 1
                while True:
                    k = _STR_BODY.match(self.text, k).end()  # type: ignore[union-attr]
                    if k < len(self.text) and self.text[k] == '"' or not self.more():
                        break
            else:
                while _ATOM.match(self.text, j).end() >= len(self.text) and self.more():  # type: ignore[union-attr]
                    pass
        return _DECODE(self.text, j)

    # ---- the walk

    def close_within(self, i: int, limit: int | None) -> int | None:
        """End of the container starting at ``i`` if it closes within ``limit`` characters (``None``:
        anywhere, growing the window until it does), else ``None``. Strings are skipped whole, so
        brackets inside them do not count."""
        if limit is not None:
            self.need(i + limit + 1)
        depth = 0
        k = i
        while True:
            text = self.text
            stop = len(text) if limit is None else min(len(text), i + limit)
            for mt in _STRUCT.finditer(text, k, stop):
                ch = text[mt.start()]
                if ch == '"':
                    if mt.end() == len(text) and not self.eof:
                        k = mt.start()  # the string may go on in the next page: scan it again
                        break
                    continue
                if ch == "[" or ch == "{":
                    depth += 1
                else:
                    depth -= 1
                    if depth == 0:
                        return mt.end()
                k = mt.end()
            else:
                k = stop
            if limit is not None:
                return None
            if not self.more():
                raise _Broken("unclosed container")

    def check_depth(self, i: int, end: int, d: int) -> None:
        """The container ``text[i:end]`` at depth ``d`` keeps the document within MAX_JSON_DEPTH."""
        text = self.text
        if d + text.count("[", i, end) + text.count("{", i, end) > MAX_JSON_DEPTH:
            if d + json_depth(text[i:end]) > MAX_JSON_DEPTH:
                raise _Broken("too deep")

    def whole(self, i: int, d: int) -> tuple[Any, int]:
        """The value at ``i`` parsed whole (depth-checked when a container)."""
        if self.ch(i) in "[{":
            if not self.eof:
                self.close_within(i, None)
            v, e = _DECODE(self.text, i)
            self.check_depth(i, e, d)
            return v, e
        return self.tok(i)

    def container(self, i: int, d: int) -> int:
        """Write the masked container starting at ``i`` (depth ``d``: 0 for the root); its end."""
        if d >= MAX_JSON_DEPTH:
            raise _Broken("too deep")
        end = self.close_within(i, SMALL)
        if end is not None:
            v, e = _DECODE(self.text, i)
            self.check_depth(i, e, d)
            self.out.append(self.enc(self.m._walk(v, self.cnt, d)))
            return e
        return self.obj(i, d) if self.text[i] == "{" else self.array(i, d)

    def skip(self, j: int) -> int:
        """End of the value at ``j``, nothing kept."""
        if self.ch(j) in "[{":
            e = self.close_within(j, None)
            assert e is not None
            return e
        return self.tok(j)[1]

    def header_rest(self, j: int, keys: set[Any], names: dict[str, Any]) -> str | None:
        """``Masker._walk_dict``'s header rule (at most 4 keys, one ``value``, and ``name`` (else
        ``key``) a string naming a sensitive header: that name's kind), decided at an object's first
        ``value`` member, whose value starts at ``j``: ``keys`` and ``names`` (the last ``name`` and
        ``key`` values, ``_NOT_TEXT`` when not a string) hold what the members before it had; the
        members after it are looked at here, nothing written."""
        j = self.ws(self.skip(j))
        while self.ch(j) != "}" and len(keys) < 5:
            if self.ch(j) == ",":
                j = self.ws(j + 1)
            k, j = self.tok(j)
            j = self.ws(self.ws(j) + 1)  # past ':'
            keys.add(k)
            if k == "name" or k == "key":
                names[k] = self.tok(j)[0] if self.ch(j) == '"' else _NOT_TEXT
            j = self.ws(self.skip(j))
        if len(keys) > 4:
            return None
        nm = names.get("name", names.get("key", _NOT_TEXT))
        if type(nm) is not str:
            return None
        return self.m.column_kind(nm)

    # Long because: one object member per iteration with the Masker's key, header and duplicate rules.
    def obj(self, i: int, d: int) -> int:
        out, m, cnt, enc = self.out, self.m, self.cnt, self.enc
        hdr: Any = _UNDECIDED
        keys_seen: set[Any] = set()
        names: dict[str, Any] = {}
        mkeys = m._key_cache
        seen: set[str] = set()
        out.append("{")
        j = self.ws(i + 1)
        n = 0
        while self.ch(j) != "}":
            j = self.refill(j)
            if self.text[j] != '"':
                raise _Broken("expecting a key")
            k, j = self.tok(j)
            j = self.ws(j)
            if self.ch(j) != ":":
                raise _Broken("expecting ':'")
            j = self.ws(j + 1)
            if len(keys_seen) < 5:
                keys_seen.add(k)
            if k == "name" or k == "key":
                names[k] = self.tok(j)[0] if self.ch(j) == '"' else _NOT_TEXT
            elif k == "value" and hdr is _UNDECIDED:
                hdr = self.header_rest(j, set(keys_seen), dict(names)) if len(keys_seen) < 5 else None
            ki = mkeys.get(k)
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
            if self.ch(j) == ",":
                j = self.ws(j + 1)
                if self.ch(j) == "}":
                    raise _Broken("trailing comma")
            elif self.text[j] != "}":
                raise _Broken("expecting ',' or '}'")
        out.append("}")
        return j + 1

    def member(self, j: int, d: int, kind: str | None, hdr: str | None) -> int:
        """Write the value at ``j`` of an object member (``kind``: its name's; ``hdr``: the header rule's)."""
        m, cnt = self.m, self.cnt
        if self.ch(j) in "[{":
            if kind is None and hdr is None:
                return self.container(j, d + 1)
            v, e = self.whole(j, d + 1)
            self.out.append(self.enc(m._tag_whole(kind or hdr, v, cnt)))  # type: ignore[arg-type]
            return e
        v, e = self.tok(j)
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
        j = self.ws(i + 1)
        if self.ch(j) != '"':
            return False
        nm, j = self.tok(j)
        if self.m.column_kind(nm) is None:
            return False
        j = self.ws(j)
        if self.ch(j) != ",":
            return False
        j = self.ws(j + 1)
        self.need(j + 4)
        if self.text.startswith("null", j):
            return False
        j = self.ws(self.skip(j))
        return self.ch(j) == "]"

    def array(self, i: int, d: int) -> int:
        out, m, cnt, enc = self.out, self.m, self.cnt, self.enc
        if self.pair_rule(i):
            v, e = self.whole(i, d)
            out.append(enc(m._walk(v, cnt, d)))
            return e
        out.append("[")
        j = self.ws(i + 1)
        first = True
        while self.ch(j) != "]":
            j = self.refill(j)
            if not first:
                out.append(",")
            first = False
            if self.text[j] in "[{":
                j = self.container(j, d + 1)
            else:
                v, j = self.tok(j)
                if (type(v) is int or type(v) is float) and v >= _CARD_MIN and _card_number(v):
                    out.append(enc(m._tag_number(v, cnt)))
                else:
                    out.append(enc(m._mask_value(v, None, cnt)))
            j = self.ws(j)
            if self.ch(j) == ",":
                j = self.ws(j + 1)
                if self.ch(j) == "]":
                    raise _Broken("trailing comma")
            elif self.text[j] != "]":
                raise _Broken("expecting ',' or ']'")
        out.append("]")
        return j + 1


_UNDECIDED = object()
_NOT_TEXT = object()


# ---- long texts in pieces (a text cell, or a JSON document that is one string)

#: Characters of context a cut of a long text is checked with on each side (see :func:`mask_text_pieces`).
#: Every detector's longest match is bounded by this (tests/evidence/test_large_cells_pieces.py checks the
#: bounded patterns' widths; the unbounded ones, runs such as ``\S+``, end at the whitespace cuts are made at).
CARRY = 16 * 1024
#: Characters of a long text masked at a time.
TEXT_PIECE = 1 << 20
_CUT_TRIES = 8


def mask_text_pieces(
    masker: Masker, pieces: Iterable[str], cnt: dict[str, int], *, size: int = TEXT_PIECE
) -> Iterator[str]:
    """``masker._mask_text("".join(pieces), cnt)`` in pieces, holding about ``size + 2 * CARRY``
    characters of the text at a time.

    The text is cut at a whitespace character ``c`` at least :data:`CARRY` characters before the end of
    what has arrived, where masking is local: the :data:`CARRY` characters on each side of ``c``,
    masked together, give the two sides masked apart (a match or a detector's context crossing ``c``
    would change that; then an earlier whitespace is tried, and after :data:`_CUT_TRIES` the window
    waits for more text). The part before ``c`` is masked and given out; the rest is kept. This is the
    whole-text mask exactly when no match and no detector's look-around is longer than :data:`CARRY`."""
    mt = masker._mask_text
    left = ""  # the CARRY characters before buf (given out already): the left side of the check
    buf = ""
    for p in pieces:
        buf += p
        while len(buf) >= size + CARRY:
            c = _local_cut(mt, left, buf, len(buf) - CARRY)
            if c is None:
                break  # no local cut near the end: wait for more text (the window grows)
            yield mt(buf[:c], cnt)
            left = (left + buf[max(0, c - CARRY) : c])[-CARRY:]
            buf = buf[c:]
    if buf:
        yield mt(buf, cnt)


def _local_cut(mt: Callable[[str, dict[str, int]], str], left: str, buf: str, target: int) -> int | None:
    """A cut ``0 < c <= target`` at a whitespace character of ``buf`` where masking is local (see
    :func:`mask_text_pieces`), or ``None``."""
    for _ in range(_CUT_TRIES):
        c = max(buf.rfind(" ", 0, target), buf.rfind("\n", 0, target))
        if c <= 0:
            return None
        lhs = (left + buf[max(0, c - CARRY) : c])[-CARRY:]
        rhs = buf[c : c + CARRY]
        scratch: dict[str, int] = {}
        if mt(lhs + rhs, scratch) == mt(lhs, scratch) + mt(rhs, scratch):
            return c
        target = c - CARRY // _CUT_TRIES
    return None


# A JSON string's body up to its closing quote, or to the end of what has arrived.
_BODY_END = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.S)


def json_string_pieces(pages: Iterable[str], *, size: int = TEXT_PIECE) -> Iterator[str]:
    """The decoded text of a JSON document that is one string (``"..."`` with whitespace around),
    given as ``pages`` of its raw text, in pieces of about ``size`` characters. Raises ``ValueError``
    when the text is not one JSON string (what ``json.loads`` would refuse), possibly after pieces.

    Raw text is cut only where the 12 characters before the cut hold no backslash: never inside an
    escape, nor between the two ``\\uXXXX`` of a surrogate pair (decoded as one character)."""
    it = iter(pages)
    buf = ""
    i = 0
    for p in it:
        buf += p
        i = _WS.match(buf).end()  # type: ignore[union-attr]
        if i < len(buf):
            break
    if buf[i : i + 1] != '"':
        raise ValueError("not a JSON string")
    buf = buf[i + 1 :]
    k = 0  # buf[:k] holds no closing quote
    while True:
        k = _BODY_END.match(buf, k).end()  # type: ignore[union-attr]
        if k < len(buf) and buf[k] == '"':
            break
        if len(buf) > size + 12:
            c = _escape_free_cut(buf, min(k, len(buf) - 12))
            if c:
                yield _DECODE('"' + buf[:c] + '"')[0]
                buf, k = buf[c:], k - c
        nxt = next(it, None)
        if nxt is None:
            raise ValueError("unterminated JSON string")
        buf += nxt
    yield _DECODE('"' + buf[:k] + '"')[0]
    rest = buf[k + 1 :]
    while True:
        if _WS.fullmatch(rest) is None:
            raise ValueError("extra data after a JSON string")
        nxt = next(it, None)
        if nxt is None:
            return
        rest = nxt


def _escape_free_cut(buf: str, q: int) -> int:
    """The last ``c <= q`` with no backslash in ``buf[c - 12 : c]`` (``0``: none in reach)."""
    while q > 12:
        b = buf.rfind("\\", q - 12, q)
        if b < 0:
            return q
        q = b
    return 0
