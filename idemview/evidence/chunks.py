"""Rows into column chunks for the evidence writer: rows (sequences or mappings) or
:class:`ColumnBatches` taken a chunk at a time as a list of columns. Split out of
:mod:`idemview.evidence.writer` (issue 25 item 6)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

_ROW_TYPES = frozenset({tuple, list})


class ColumnBatches:
    """Rows handed over a batch at a time as columns: ``batches`` yields lists of equally long
    column sequences (in column order). :func:`write_evidence` formats them as they are, without
    turning them into rows and back; as an iterator a ``ColumnBatches`` gives the rows (tuples)."""

    def __init__(self, batches: Iterable[Sequence[Sequence[Any]]]) -> None:
        self.batches = batches
        self._rows: Iterator[tuple] | None = None

    def __iter__(self) -> Iterator[tuple]:
        return self

    def __next__(self) -> tuple:
        if self._rows is None:
            self._rows = (row for cols in self.batches for row in zip(*cols, strict=True))
        return next(self._rows)


def _column_chunks(
    rows: Iterable[Sequence[Any] | Mapping[str, Any]] | ColumnBatches, names: list[str], ncols: int
) -> Callable[[int, int], list[Sequence[Any]] | None]:
    """``take(at_most, done)``: the next chunk of at most ``at_most`` rows as a list of columns, or
    ``None`` at the end (``done``: rows taken before, to number a bad row in ``ValueError``)."""
    if isinstance(rows, ColumnBatches):
        batches = iter(rows.batches)
        held: list[Sequence[Any]] = []
        pos = size = 0

        def take_batch(at_most: int, done: int) -> list[Sequence[Any]] | None:
            nonlocal held, pos, size
            while pos >= size:
                nxt = next(batches, None)
                if nxt is None:
                    return None
                held = list(nxt)
                lens = set(map(len, held))
                if len(held) != ncols or len(lens) != 1:
                    raise ValueError(
                        f"a batch after row {done} has {len(held)} columns for {ncols}, of lengths {sorted(lens)}"
                    )
                pos, size = 0, lens.pop()
            if pos == 0 and size <= at_most:
                pos = size
                return held
            end = min(size, pos + at_most)
            sliced: dict[int, Sequence[Any]] = {}  # a column handed twice (the same list) stays one list
            part = []
            for c in held:
                sc = sliced.get(id(c))
                if sc is None:
                    sc = sliced[id(c)] = c[pos:end]
                part.append(sc)
            pos = end
            return part

        return take_batch
    it = iter(rows)

    def take_rows(at_most: int, done: int) -> list[Sequence[Any]] | None:
        chunk = list(islice(it, at_most))
        if not chunk:
            return None
        return list(zip(*_normalise_rows(chunk, names, ncols, done), strict=True))

    return take_rows


def _normalise_rows(chunk: list[Any], names: list[str], ncols: int, done: int) -> list[Any]:
    """Rows of a chunk as sequences in column order (mappings by column name); ``ValueError`` for a
    row of the wrong length (numbered from 1 over the whole export)."""
    if set(map(type, chunk)) <= _ROW_TYPES and set(map(len, chunk)) == {ncols}:
        return chunk
    out = []
    for i, row in enumerate(chunk):
        if isinstance(row, Mapping):
            row = [row.get(x) for x in names]
        elif len(row) != ncols:
            raise ValueError(f"row {done + i + 1} has {len(row)} values for {ncols} columns")
        out.append(row)
    return out
