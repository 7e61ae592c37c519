"""The evidence manifest (DESIGN §7): what is written beside ``FILE.csv`` as
``FILE.csv.manifest.json``, its sanitising (no user name, password or URL credentials) and
:func:`verify_evidence`. Split out of :mod:`idemview.evidence.writer` (issue 25 item 6)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from idemview import __version__
from idemview.evidence import cells
from idemview.evidence.formatting import ColumnSpec, _json_default
from idemview.masking.masker import Masker, normalize_name

MANIFEST_FORMAT = "idemview-evidence-manifest/1"
_RESERVED = frozenset({"format", "tool", "exported_at", "columns", "row_count", "masking", "csv", "hidden_characters"})
# Connection fields that must never reach a manifest (DESIGN §7: never a user name or password).
_LEDGER_FORBIDDEN = frozenset(
    {
        "user",
        "username",
        "user_name",
        "login",
        "uid",
        "role",
        "password",
        "passwd",
        "pwd",
        "pass",
        "secret",
        "token",
        "credentials",
        "credential",
        "auth",
        "authorization",
        "api_key",
        "private_key",
    }
)


@dataclass
class VerifyReport:
    """Result of :func:`verify_evidence`; truthy when the CSV matches its manifest."""

    ok: bool
    csv_path: str
    manifest_path: str
    expected_sha256: str | None = None
    actual_sha256: str | None = None
    expected_size: int | None = None
    actual_size: int | None = None
    problems: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.ok


def manifest_path_for(csv_path: str | os.PathLike[str]) -> str:
    """``FILE.csv`` → ``FILE.csv.manifest.json``."""
    return os.fspath(csv_path) + ".manifest.json"


def _strip_userinfo(s: str) -> str:
    """``postgresql://app:pw@db:5432/x?password=..`` → ``postgresql://db:5432/x`` (user, password
    and query removed); text that is not such a URL is returned unchanged."""
    if "://" not in s:
        return s
    try:
        parts = urlsplit(s)
    except ValueError:
        return s
    if not parts.scheme or not parts.netloc:
        return s
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _sanitize_ledger(d: Any) -> Any:
    """Drop user names and passwords from the ledger description (DESIGN §7)."""
    if isinstance(d, Mapping):
        out = {}
        for k, v in d.items():
            if isinstance(k, str) and "_".join(normalize_name(k)) in _LEDGER_FORBIDDEN:
                continue
            out[k] = _sanitize_ledger(v)
        return out
    if isinstance(d, (list, tuple)):
        return [_sanitize_ledger(x) for x in d]
    if isinstance(d, str):
        return _strip_userinfo(d)
    return d


def _plain(o: Any) -> Any:
    """JSON-able copy (datetimes ISO, enums by value, dataclasses via to_dict)."""
    return json.loads(json.dumps(o, default=_json_default))


def _strip_urls(o: Any) -> Any:
    if isinstance(o, str):
        return _strip_userinfo(o) if "@" in o else o
    if isinstance(o, dict):
        return {k: _strip_urls(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_strip_urls(x) for x in o]
    return o


def _mask_uncounted(masker: Masker, v: Any) -> Any:
    """Mask a manifest field without adding to the export's counts (maskers without the
    ``count`` keyword are called plainly)."""
    try:
        return masker.mask_value(v, None, count=False)
    except TypeError:
        return masker.mask_value(v, None)


def _utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _build_manifest(
    entries: Mapping[str, Any],
    cols: list[ColumnSpec],
    n: int,
    masker: Masker,
    counts: dict[str, int],
    base: str,
    sha: str,
    size: int,
    excel: bool,
    null_literal: str,
) -> dict[str, Any]:
    caller: dict[str, Any] = {}
    for k, v in entries.items():
        v = _plain(v)
        if k in ("ledger", "connection"):
            v = _sanitize_ledger(v)
        caller[k] = _mask_uncounted(masker, _strip_urls(v))
    f, mk = caller.get("filter"), caller.get("masking_key")
    flt: dict[str, Any] = f if isinstance(f, dict) else {}
    key: dict[str, Any] = mk if isinstance(mk, dict) else {}
    # What a reader needs first (issue 20 §12): what was exported, for which `now`, how many rows, the
    # file's hash and whose masking key; every detail (masking word lists included) follows.
    summary = {
        "filter": flt.get("sentence_shown") or flt.get("sentence"),
        "now": caller.get("now"),
        "row_count": n,
        "sha256": sha,
        **({"masking_key": key.get("scope")} if key.get("scope") else {}),
    }
    return {
        "format": MANIFEST_FORMAT,
        "summary": summary,
        "tool": {"name": "idemview", "version": __version__},
        "exported_at": _utc_now_iso(),
        **caller,
        "columns": [
            {
                "name": _mask_uncounted(masker, c.name),
                "kind": c.kind,
                **({"description": c.description} if c.description else {}),
            }
            for c in cols
        ],
        "row_count": n,
        "masking": {"enabled": True, "rules": masker.rules.describe(), "counts": dict(sorted(counts.items()))},
        "csv": {
            "file": base,
            "sha256": sha,
            "bytes": size,
            "encoding": "utf-8",
            "bom": bool(excel),
            "header": True,
            "delimiter": ",",
            "quoting": "RFC 4180, every text field quoted (quotes doubled); NULL, numbers, booleans, instants bare",
            "line_terminator": "CRLF",
            "null": null_literal,
            "null_cell": cells.CellCodec(null_literal).null_cell,
            "formula_guard": cells.GUARD_SPEC,
        },
    }


def verify_evidence(csv_path: str | os.PathLike[str]) -> VerifyReport:
    """Recompute the CSV's SHA-256 and size and compare them with its manifest.

    Returns a :class:`VerifyReport` (truthy when they match); a missing or unreadable manifest is
    reported as a problem, not raised.
    """
    p = os.fspath(csv_path)
    mp = manifest_path_for(p)
    rep = VerifyReport(False, p, mp)
    try:
        with open(mp, encoding="utf-8") as f:
            doc = json.load(f)
        meta = doc["csv"] if "csv" in doc else doc["html"]  # an evidence CSV's manifest, or a report's
        rep.expected_sha256 = meta["sha256"]
        rep.expected_size = meta["bytes"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
        rep.problems.append(f"manifest unreadable: {type(e).__name__}: {e}")
        return rep
    h = hashlib.sha256()
    size = 0
    try:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
                size += len(chunk)
    except OSError as e:
        rep.problems.append(f"CSV unreadable: {e}")
        return rep
    rep.actual_sha256 = h.hexdigest()
    rep.actual_size = size
    if rep.actual_sha256 != rep.expected_sha256:
        rep.problems.append("SHA-256 differs from the manifest")
    if size != rep.expected_size:
        rep.problems.append(f"size {size} bytes differs from the manifest's {rep.expected_size}")
    rep.ok = not rep.problems
    return rep
