"""Operation references ``(scope, key)`` packed into bytes and arrays (issue 27, item 3).

The findings process sends a kind with more than ``DETAIL_MAX`` findings as keys. As a list of tuples
of two ``str`` each, a million keys cost the GUI process ~230 MB (a tuple, two strings and a set entry
per key, ~230 bytes) and a million objects for its garbage collector to walk. A :class:`PackedRefs`
holds a chunk of them as one ``bytes`` (the UTF-8 of each reference, back to back), one ``int64``
array of end offsets and one sorted ``uint64`` array of their hashes: about the keys' own length + 16
bytes each, three Python objects per chunk of 20,000. It pickles as those buffers (what crosses the
pipe), decodes one reference on demand (F8, a badge) and answers membership by binary search of the
hash.

A reference is encoded as ``\\x00`` (None) or ``\\x01`` + UTF-8 (``surrogatepass``: a driver may hand
lone surrogates through) for the scope, ``\\xff`` (never in UTF-8), then the key the same way. The hash is
the first 8 bytes of BLAKE2b of that encoding: the same in every process (Python's ``hash`` of a str
is salted per process). Two references share a hash with probability ~2⁻⁶⁴ per pair: at a million
keys, a false badge on one look-up in ~10¹³.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar, overload

import numpy as np

Ref = tuple[str | None, str | None]


def _part(s: str | None) -> bytes:
    return b"\x00" if s is None else b"\x01" + s.encode("utf-8", "surrogatepass")


def encode_ref(ref: Ref) -> bytes:
    """The bytes of one reference (module docstring)."""
    return _part(ref[0]) + b"\xff" + _part(ref[1])


def _unpart(b: bytes) -> str | None:
    return None if b[:1] == b"\x00" else b[1:].decode("utf-8", "surrogatepass")


def decode_ref(b: bytes) -> Ref:
    scope, key = b.split(b"\xff", 1)
    return _unpart(scope), _unpart(key)


def ref_hash(ref: Ref) -> int:
    """The 64-bit hash of one reference, as an unsigned int (equal in every process)."""
    return int.from_bytes(hashlib.blake2b(encode_ref(ref), digest_size=8).digest(), "little")


class PackedRefs(Sequence[Ref]):
    """A chunk of references in their order (F8's), packed (module docstring). ``refs[i]`` decodes one;
    ``ref in refs`` looks its hash up; :attr:`hashes` the sorted hashes (for counting distinct ones)."""

    __slots__ = ("blob", "ends", "hashes")

    def __init__(self, blob: bytes, ends: np.ndarray, hashes: np.ndarray):
        self.blob, self.ends, self.hashes = blob, ends, hashes

    @classmethod
    def pack(cls, refs: Iterable[Ref]) -> PackedRefs:
        encs = [encode_ref(r) for r in refs]
        ends = np.cumsum(np.fromiter((len(e) for e in encs), dtype=np.int64, count=len(encs)))
        digests = b"".join(hashlib.blake2b(e, digest_size=8).digest() for e in encs)
        hashes = np.sort(np.frombuffer(digests, dtype="<u8"))
        return cls(b"".join(encs), ends, hashes)

    def __reduce__(self):
        # three buffers cross the pipe, not a list of objects
        return (_unpickle, (self.blob, self.ends.tobytes(), self.hashes.tobytes()))

    def __len__(self) -> int:
        return len(self.ends)

    @overload
    def __getitem__(self, i: int) -> Ref: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Ref]: ...
    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self.ends)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        start = int(self.ends[i - 1]) if i else 0
        return decode_ref(self.blob[start : int(self.ends[i])])

    def has_hash(self, h: int) -> bool:
        hs = self.hashes
        j = int(np.searchsorted(hs, np.uint64(h)))
        return j < len(hs) and int(hs[j]) == h

    def __contains__(self, ref: object) -> bool:
        return isinstance(ref, tuple) and self.has_hash(ref_hash(ref))  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Ref]:
        for i in range(len(self)):
            yield self[i]

    @property
    def nbytes(self) -> int:
        return len(self.blob) + self.ends.nbytes + self.hashes.nbytes


def _unpickle(blob: bytes, ends: bytes, hashes: bytes) -> PackedRefs:
    return PackedRefs(blob, np.frombuffer(ends, dtype=np.int64), np.frombuffer(hashes, dtype="<u8"))


T = TypeVar("T")


class ChunkedSequence(Sequence[T]):
    """A read-only sequence made of chunks laid end to end, indexed without copying them: a subclass
    sets ``_starts`` (the index each chunk starts at, ascending, the first 0) and ``_len`` (the total
    length), and gives :meth:`_in_chunk`. An index finds its chunk by bisection (O(log chunks));
    negative indexes count from the end, a slice is a list, an index out of range raises IndexError."""

    _starts: list[int]
    _len: int

    def _in_chunk(self, n: int, j: int) -> T:
        """Item ``j`` of chunk ``n`` (both in range)."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[T]: ...
    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._len))]
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(i)
        n = bisect_right(self._starts, i) - 1
        return self._in_chunk(n, i - self._starts[n])


class RefChain(ChunkedSequence[Ref]):
    """Several :class:`PackedRefs` read as one sequence (a run of one severity, chunk after chunk)."""

    def __init__(self, chunks: Iterable[PackedRefs] = ()):
        self.chunks: list[PackedRefs] = []
        self._starts = []
        self._len = 0
        for c in chunks:
            self.append(c)

    def append(self, chunk: PackedRefs) -> None:
        if len(chunk):
            self.chunks.append(chunk)
            self._starts.append(self._len)
            self._len += len(chunk)

    def _in_chunk(self, n: int, j: int) -> Ref:
        return self.chunks[n][j]

    def __iter__(self) -> Iterator[Ref]:
        for c in self.chunks:
            yield from c


__all__ = ["ChunkedSequence", "PackedRefs", "Ref", "RefChain", "decode_ref", "encode_ref", "ref_hash"]
