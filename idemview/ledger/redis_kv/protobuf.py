"""A tiny protobuf wire-format reader: the declared scalar fields of one message, nothing executed.

Asynq keeps each task's metadata as the ``msg`` field of its hash: a ``TaskMessage`` protobuf
(hibiken/asynq internal/proto/asynq.proto). Its per-task limits (``timeout``, ``deadline``, ``retry``)
and counters (``retried``, ``last_failed_at``, ``completed_at``) are read here with the wire format alone
(protobuf.dev/programming-guides/encoding: a record is a varint tag ``field number << 3 | wire type``
followed by a varint (type 0), 8 bytes (1), a varint length and that many bytes (2) or 4 bytes (5)).
No generated code, no descriptor, no dependency: only the fields a layout declares are kept, every
other one is skipped by its wire type. As in Go's protobuf runtime (asynq's reader), a declared field
arriving with another wire type than its type's is skipped as an unknown field, and so is a group
(wire type 3, deprecated; skipped up to its matching end group, 4); the other fields are kept.
Malformed or truncated bytes make the message unreadable: :func:`decode_message` then returns a dict
with the single key ``"unreadable"`` saying where and why, never raises.

A field is declared as ``name -> (number, type)``; types:

- ``string``: length-delimited UTF-8 text (invalid UTF-8 kept with U+FFFD replacements); absent or
  empty = no value (``None``), proto3's "not set";
- ``bytes``: length-delimited bytes, given as text when they are UTF-8 (Asynq's JSON payloads), else
  as ``"hex:<hex digits>"``; absent or empty = ``None``;
- ``int``: a varint read as a signed 64-bit integer (int32/int64; a negative int32 is sign-extended to
  ten bytes on the wire, so the same reading holds); absent = 0, proto3's default;
- ``int_nonzero``: the same, but 0 (or absent) is no value (``None``): Asynq's "use zero to indicate no
  deadline / no timeout / no last failure".

A field repeated on the wire keeps its last value (protobuf's rule for a scalar). The result keeps
the declared fields only, under their names.
"""

from __future__ import annotations

from collections.abc import Mapping

FIELD_TYPES = ("string", "bytes", "int", "int_nonzero")
UNREADABLE = "unreadable"
#: at most this many bytes are read of one message (Redis values can be large; Asynq's msg is ~100 B plus
#: the payload): a longer one is unreadable rather than a long walk
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class _Unreadable(Exception):
    """Raised inside the reader; turned into the ``{"unreadable": reason}`` result."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, next position) of the varint at ``pos``: at most 10 bytes (64 bits)."""
    out = 0
    shift = 0
    n = len(buf)
    start = pos
    while True:
        if pos >= n:
            raise _Unreadable(f"truncated varint at byte {start}")
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7
        if shift >= 70:
            raise _Unreadable(f"varint longer than 10 bytes at byte {start}")


def _signed64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def _bytes_value(b: bytes, kind: str) -> str:
    if kind == "string":
        return b.decode("utf-8", "replace")
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return "hex:" + b.hex()


def decode_message(raw: bytes | bytearray | memoryview | str | None, fields: Mapping[str, tuple[int, str]]) -> dict:
    """The declared ``fields`` (name -> (field number, type), types in :data:`FIELD_TYPES`) of the
    protobuf message ``raw``: ``{name: value}`` with every declared field (absent: 0 for ``int``, else
    ``None``; a declared field of an unexpected wire type, and a group, are skipped). Bytes that are not
    a readable message (truncated, a length past the end, a group never ended or ended by another field
    number, an end group without its start, wire type 6 or 7, a field number 0, over
    :data:`MAX_MESSAGE_BYTES`, a ``str`` or ``None`` instead of bytes) give
    ``{"unreadable": "<why, with the byte offset>"}``. Never raises for any input."""
    if raw is None:
        return {UNREADABLE: "no message (the field is missing)"}
    if isinstance(raw, str):  # decoded text: the bytes are lost (a caller error, said not raised)
        return {UNREADABLE: "the message was decoded as text, its bytes are lost"}
    buf = bytes(raw)
    if len(buf) > MAX_MESSAGE_BYTES:
        return {UNREADABLE: f"message of {len(buf)} bytes, over the {MAX_MESSAGE_BYTES} read"}
    by_number = {num: (name, kind) for name, (num, kind) in fields.items()}
    out: dict = {name: 0 if kind == "int" else None for name, (_n, kind) in fields.items()}
    try:
        _walk(buf, by_number, out)
    except _Unreadable as e:
        return {UNREADABLE: f"not a readable protobuf message: {e}"}
    return out


def _walk(buf: bytes, by_number: dict[int, tuple[str, str]], out: dict) -> None:
    """Read the records of ``buf`` into ``out``. A declared field whose wire type is not its type's,
    and any group, is skipped as an unknown field, as Go's protobuf runtime does (internal/impl/decode.go:
    a field decoder's errUnknown sends the field to the unknown fields, protowire.ConsumeFieldValue skips
    it, a group up to its matching end)."""
    pos = 0
    n = len(buf)
    while pos < n:
        at = pos
        number, wire, pos = _tag(buf, pos)
        want = by_number.get(number)
        if want is not None and wire == 0 and want[1] not in ("string", "bytes"):
            v, pos = _varint(buf, pos)
            s = _signed64(v)
            out[want[0]] = None if want[1] == "int_nonzero" and s == 0 else s
        elif want is not None and wire == 2 and want[1] in ("string", "bytes"):
            size, pos = _varint(buf, pos)
            if size > n - pos:
                raise _Unreadable(f"field {number} declares {size} bytes at byte {at}, {n - pos} left")
            out[want[0]] = _bytes_value(buf[pos : pos + size], want[1]) if size else None
            pos += size
        else:
            pos = _skip(buf, pos, number, wire, at)


#: nested groups deeper than this are unreadable (Go's default RecursionLimit is 10,000; a real
#: TaskMessage has none)
MAX_GROUP_DEPTH = 100


def _tag(buf: bytes, pos: int) -> tuple[int, int, int]:
    """(field number, wire type, next position) of the tag at ``pos``; field number 0 is unreadable."""
    tag, nxt = _varint(buf, pos)
    if tag >> 3 == 0:
        raise _Unreadable(f"field number 0 at byte {pos}")
    return tag >> 3, tag & 7, nxt


def _skip(buf: bytes, pos: int, number: int, wire: int, at: int, depth: int = 0) -> int:
    """The position after the value of field ``number`` (wire type ``wire``, its tag at byte ``at``)
    starting at ``pos``: a group (3) up to its matching end group (4). An end group without its start,
    wire types 6 and 7 and values past the end are unreadable."""
    n = len(buf)
    if wire == 0:
        return _varint(buf, pos)[1]
    if wire == 2:
        size, pos = _varint(buf, pos)
        if size > n - pos:
            raise _Unreadable(f"field {number} declares {size} bytes at byte {at}, {n - pos} left")
        return pos + size
    if wire in (1, 5):
        size = 8 if wire == 1 else 4
        if size > n - pos:
            raise _Unreadable(f"field {number} needs {size} bytes at byte {at}, {n - pos} left")
        return pos + size
    if wire == 3:
        if depth >= MAX_GROUP_DEPTH:
            raise _Unreadable(f"groups nested over {MAX_GROUP_DEPTH} deep at byte {at}")
        while True:
            if pos >= n:
                raise _Unreadable(f"group {number} opened at byte {at} never ends")
            inner_at = pos
            inner, inner_wire, pos = _tag(buf, pos)
            if inner_wire == 4:
                if inner != number:
                    raise _Unreadable(f"group {number} opened at byte {at} ends as group {inner} at byte {inner_at}")
                return pos
            pos = _skip(buf, pos, inner, inner_wire, inner_at, depth + 1)
    if wire == 4:
        raise _Unreadable(f"end of group {number} without its start at byte {at}")
    raise _Unreadable(f"wire type {wire} (not protobuf) at byte {at}")
