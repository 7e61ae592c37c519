"""Reading evidence back (``idemview.read_evidence``): the manifest checked field by field, the CSV
verified against it, and every cell restored to the value that was exported.

Every way the pair can be wrong (a manifest that is not JSON or nested beyond reason, a missing key, a
value of the wrong type, a timestamp that is none, a CSV that differs from its SHA-256, a header or a row
that does not fit the columns) is one :class:`~idemview.errors.EvidenceMismatch` saying why; nothing
else is raised for bad files (issue 19, item 15). Text cells round-trip exactly: the formula guard is
undone as the manifest's ``csv.formula_guard`` says (:mod:`idemview.evidence.cells`).
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from idemview.domain import jsontext
from idemview.errors import EvidenceMismatch
from idemview.evidence import cells
from idemview.evidence.writer import COLUMN_KINDS, MANIFEST_FORMAT, ColumnSpec, manifest_path_for, verify_evidence

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["read_evidence_frame", "load_manifest"]

#: A manifest is a few kB; anything far larger is not one of ours (and is not parsed).
MANIFEST_MAX_BYTES = 16 << 20
_SHA_RE = re.compile(r"[0-9a-f]{64}")
_ISO_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


def _fail(path: str, why: str) -> EvidenceMismatch:
    return EvidenceMismatch(f"{path}: {why}")


def _need(cond: bool, path: str, why: str) -> None:
    if not cond:
        raise _fail(path, why)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _manifest_doc(path: str) -> Any:  # a JSON object, checked field by field by the callers
    """The JSON object in ``path``'s manifest, read with a size cap and parsed with a bounded depth;
    :class:`~idemview.errors.EvidenceMismatch` when missing, too large, not JSON or not an object."""
    mp = manifest_path_for(path)
    try:
        with open(mp, "rb") as f:
            data = f.read(MANIFEST_MAX_BYTES + 1)
    except OSError as e:
        raise _fail(path, f"manifest missing or unreadable ({mp}: {e.strerror or e})") from None
    _need(len(data) <= MANIFEST_MAX_BYTES, path, f"manifest larger than {MANIFEST_MAX_BYTES >> 20} MiB")
    try:
        doc = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise _fail(path, "manifest is not a manifest (JSON nested too deeply)") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise _fail(path, f"manifest is not JSON ({e})") from None
    _need(isinstance(doc, dict), path, "manifest is not a JSON object")
    return doc


def load_manifest(csv_path: str) -> dict[str, Any]:
    """The manifest of ``csv_path`` (``PATH.manifest.json``), checked: a JSON object of
    ``idemview-evidence-manifest/1`` with ``exported_at`` (ISO-8601 instant), ``columns`` (a list of
    ``{"name": str, "kind": one of COLUMN_KINDS}``), ``row_count`` (int >= 0) and ``csv`` (``sha256``
    hex, ``bytes`` int, ``null`` str, ``bom`` bool, ``formula_guard``). Raises
    :class:`~idemview.errors.EvidenceMismatch` naming the first problem."""
    doc = _manifest_doc(csv_path)
    _need(doc.get("format") == MANIFEST_FORMAT, csv_path, f"manifest format is not {MANIFEST_FORMAT!r}")
    at = doc.get("exported_at")
    _need(isinstance(at, str) and _ISO_RE.fullmatch(at) is not None, csv_path, "exported_at is not an ISO-8601 instant")
    try:
        from idemview.ledger.times import parse_instant

        parse_instant(at)
    except (ValueError, OverflowError):
        raise _fail(csv_path, f"exported_at is not an instant: {at!r}") from None
    cols = doc.get("columns")
    _need(isinstance(cols, list) and len(cols) > 0, csv_path, "manifest columns missing or not a list")
    for i, c in enumerate(cols):
        _need(
            isinstance(c, dict) and isinstance(c.get("name"), str) and c.get("kind") in COLUMN_KINDS,
            csv_path,
            f"manifest column {i + 1} is not {{name, kind}} with a known kind",
        )
    _need(_is_int(doc.get("row_count")) and doc["row_count"] >= 0, csv_path, "row_count is not a count")
    meta = doc.get("csv")
    _need(isinstance(meta, dict), csv_path, "manifest has no csv section")
    _need(isinstance(meta.get("sha256"), str) and _SHA_RE.fullmatch(meta["sha256"]) is not None, csv_path, "bad sha256")
    _need(_is_int(meta.get("bytes")) and meta["bytes"] >= 0, csv_path, "csv.bytes is not a size")
    _need(isinstance(meta.get("null", ""), str), csv_path, "csv.null is not text")
    _need(isinstance(meta.get("bom", False), bool), csv_path, "csv.bom is not true or false")
    guard = meta.get("formula_guard")
    _need(
        isinstance(guard, str) or (isinstance(guard, dict) and guard.get("version") == cells.GUARD_SPEC["version"]),
        csv_path,
        "csv.formula_guard is not one this version can undo",
    )
    return doc


def read_report_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The checked manifest of an incident report (``PATH.manifest.json`` with an ``html`` section:
    ``sha256`` hex and ``bytes``), after the HTML's SHA-256 and size were verified against it.
    Raises :class:`~idemview.errors.EvidenceMismatch` naming the first problem: missing, not JSON,
    nested too deeply, an evidence CSV's manifest (use ``read_evidence``), or a changed byte."""
    p = os.fspath(path)
    doc = _manifest_doc(p)
    _need("csv" not in doc, p, "its manifest is an evidence CSV's, not a report's (use read_evidence)")
    meta = doc.get("html")
    _need(isinstance(meta, dict), p, "manifest has no html section")
    _need(isinstance(meta.get("sha256"), str) and _SHA_RE.fullmatch(meta["sha256"]) is not None, p, "bad sha256")
    _need(_is_int(meta.get("bytes")) and meta["bytes"] >= 0, p, "html.bytes is not a size")
    rep = verify_evidence(p)
    _need(rep.ok, p, "does not match its manifest: " + "; ".join(rep.problems))
    return doc


class _Legacy:
    """Cells of manifests written before ``formula_guard`` version 2 (formula starters only)."""

    def __init__(self, null: str) -> None:
        guarded = bool(null) and null[0] in cells.FORMULA_STARTERS and not cells.is_plain_number(null)
        self.null_cell = "'" + null if guarded else null

    def read(self, c: str) -> str | None:
        return None if c == self.null_cell else cells.decode_legacy(c)


def read_evidence_frame(path: str | os.PathLike[str]) -> pd.DataFrame:
    """See :func:`idemview.read_evidence`: the manifest checked (:func:`load_manifest`), the CSV's SHA-256
    and size verified, then the header and every row read with the stdlib ``csv`` module and each
    column restored to its kind. Raises :class:`~idemview.errors.EvidenceMismatch` only."""
    import pandas as pd

    p = os.fspath(path)
    doc = load_manifest(p)
    rep = verify_evidence(p)
    if not rep.ok:
        raise _fail(p, f"does not match its manifest: {'; '.join(rep.problems)}")
    meta = doc["csv"]
    null = meta.get("null", "")
    codec: cells.CellCodec | _Legacy = (
        cells.CellCodec(null) if isinstance(meta["formula_guard"], dict) else _Legacy(null)
    )
    cols = [ColumnSpec(c["name"], c["kind"]) for c in doc["columns"]]
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))  # a cell may be megabytes of JSON
    try:
        with open(p, encoding="utf-8-sig" if meta.get("bom") else "utf-8", newline="") as f:
            reader = csv.reader(f, strict=True)
            header = next(reader, None)
            _need(header is not None, p, "the CSV has no header row")
            assert header is not None
            names = [cells.decode(h) if isinstance(codec, cells.CellCodec) else cells.decode_legacy(h) for h in header]
            _need(names == [c.name for c in cols], p, "the header differs from the manifest's columns")
            columns: list[list[str]] = [[] for _ in cols]
            n = 0
            for row in reader:
                n += 1
                _need(len(row) == len(cols), p, f"row {n} has {len(row)} fields, the manifest {len(cols)} columns")
                for i, v in enumerate(row):
                    columns[i].append(v)
    except (UnicodeDecodeError, csv.Error) as e:
        raise _fail(p, f"the CSV cannot be read ({e})") from None
    _need(n == doc["row_count"], p, f"{n} rows, the manifest says {doc['row_count']}")
    out = {c.name: _restore(p, c, [codec.read(v) for v in columns[i]]) for i, c in enumerate(cols)}
    return pd.DataFrame(out, columns=[c.name for c in cols])


def _typed(vals: list[str | None], conv: Callable[[str], Any]) -> list[Any] | None:
    try:
        return [None if v is None else conv(v) for v in vals]
    except (ValueError, OverflowError):
        return None  # a masked tag or other text in the column: kept as text


def _bool(v: str) -> bool:
    if v == "true":
        return True
    if v == "false":
        return False
    raise ValueError(v)


def _int(v: str) -> int:
    if not cells.is_plain_number(v) or any(ch in v for ch in ".eE"):
        raise ValueError(v)
    return int(v)


def _restore(path: str, col: ColumnSpec, vals: list[str | None]) -> pd.Series:
    """One column's decoded texts (``None`` for NULL) as its kind's values (see ``ColumnSpec``)."""
    import pandas as pd

    kind = col.kind
    if kind == "integer":
        ints = _typed(vals, _int)
        if ints is not None:
            return pd.Series(ints, dtype="Int64", name=col.name)
    elif kind == "number":
        nums = _typed(vals, float)
        if nums is not None:
            return pd.Series(nums, dtype="Float64", name=col.name)
    elif kind == "boolean":
        bools = _typed(vals, _bool)
        if bools is not None:
            return pd.Series(bools, dtype="boolean", name=col.name)
    elif kind in ("instant", "naive_instant"):
        try:
            return pd.Series(
                pd.to_datetime(pd.Series(vals, dtype=object), utc=kind == "instant", format="ISO8601"), name=col.name
            )
        except (ValueError, OverflowError, TypeError) as e:
            raise _fail(path, f"column {col.name!r} holds a value that is not an ISO-8601 instant ({e})") from None
    elif kind == "json":
        out: list[Any] = []
        for v in vals:
            if v is None:
                out.append(None)
                continue
            try:
                out.append(jsontext.loads(v))  # depth bounded: the one parse chokepoint
            except (ValueError, RecursionError):
                out.append(v)  # a masked or plain-text payload (or one nested beyond the parser): its text
        return pd.Series(out, dtype=object, name=col.name)
    return pd.Series(vals, dtype="string", name=col.name)
