"""The ledger audit: ``secret_at_rest`` (DESIGN §5), what the ledger itself keeps in plain text.

Seed: "keep evidence without exposing secrets … avoid copying credentials, tokens, or unnecessary
sensitive content into logs". idemview masks what it shows; this rule tells a team that their ledger
*stores* card numbers, credentials or personal data. It reads a **sample**: the newest
:data:`DEFAULT_AUDIT_ROWS` rows (by ``created_at``, else the row id) of the operations table and of a
separate attempts table, every text and JSON column, and asks the masker's detectors
(:meth:`idemview.masking.masker.Masker.detected_kinds`) which kinds each cell (each JSON field, by its
path) holds. One finding per column, and per JSON path inside a JSON column, says how many of the rows
read carry it, which kinds, a few example idempotency keys and what to change. A value of the column is
never put in a finding, its evidence or a message (the example keys are masked by every output, as the
grid's keys are).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.sql import sqltypes
from sqlalchemy.types import TypeDecorator

from idemview.domain import jsontext
from idemview.domain.model import Finding, FindingKind
from idemview.findings.rules import FindingRule
from idemview.masking.masker import CREDENTIAL_KINDS, Masker

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy.engine import Connection

    from idemview.findings.engine import FindingEngine

#: Rows read per table (each of its text/JSON columns sees that many), newest first (``--audit-rows``).
DEFAULT_AUDIT_ROWS = 10_000
#: Characters of one cell given to the detectors (a multi-megabyte payload is audited by its head).
CELL_CHARS = 65_536
#: JSON: nesting levels walked, and distinct paths reported per column at most.
MAX_DEPTH = 8
MAX_PATHS = 50
#: Example idempotency keys per finding.
EXAMPLES = 3

_CARD = {"card", "cvv", "iban"}
_PERSONAL = {"email", "phone", "ssn"}


def _advice(kinds: set[str]) -> str:
    """What to change, in words, for the kinds found (the most serious first)."""
    if kinds & _CARD:
        return "store a hash of the request (or the payment provider's token), not the card number"
    if kinds & CREDENTIAL_KINDS or kinds - _PERSONAL:
        return "drop credentials before the value is recorded (keep a hash if a comparison needs one)"
    return "keep a customer reference instead of their personal data"


def _is_texty(col) -> bool:
    t = col.type
    if isinstance(t, TypeDecorator):
        t = t.impl if not isinstance(t.impl, type) else t.impl()
    return isinstance(t, (sqltypes.String, sqltypes.JSON)) and not isinstance(t, sqltypes.Enum)


def _walk(v: Any, path: str, depth: int, out: list):
    """(JSON path, field name, leaf value) of every scalar leaf of parsed JSON ``v``."""
    if depth > MAX_DEPTH:
        return
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, (dict, list)):
                _walk(x, f"{path}.{k}", depth + 1, out)
            else:
                out.append((f"{path}.{k}", str(k), x))
    elif isinstance(v, list):
        for x in v:
            if isinstance(x, (dict, list)):
                _walk(x, f"{path}[]", depth + 1, out)
            else:
                out.append((f"{path}[]", None, x))


def _cells(value: Any, column: str) -> list[tuple[str | None, str | None, Any]]:
    """(JSON path or None, field name, value) pieces of one cell for the detectors."""
    if value is None or isinstance(value, (bytes, bytearray, memoryview, bool, int, float)):
        return []
    if isinstance(value, str):
        s = value[:CELL_CHARS]
        if s[:1] in ("{", "[") and len(value) <= CELL_CHARS:
            try:
                value = jsontext.loads(s)  # depth bounded (JSONTooDeep is a ValueError)
            except ValueError:
                return [(None, column, s)]
        else:
            return [(None, column, s)]
    if isinstance(value, (dict, list)):
        out: list = []
        _walk(value, "$", 0, out)
        return out
    return [(None, column, str(value)[:CELL_CHARS])]


#: Distinct cells remembered per table (repeated cells are detected once; beyond it, every cell is read).
MEMO_CELLS = 50_000


def _detect_cell(masker: Masker, memo: dict, i: int, value: Any, column: str) -> list:
    """[(JSON path or None, {kind: n})] the detectors find in one cell (pieces with nothing left out),
    memoised per distinct cell value in ``memo`` (at most :data:`MEMO_CELLS`): the same status text,
    payload or JSON document in many rows is parsed and detected once. The result is what detecting it
    again would give (the detectors are pure), so findings do not change."""
    key = (i, type(value), value) if isinstance(value, str | int | float) else None
    if key is not None:
        got = memo.get(key)
        if got is not None:
            return got
    out = []
    for path, field, v in _cells(value, column):
        if v is None or isinstance(v, bool):
            continue
        leaf = ("leaf", field, v) if isinstance(v, str) and len(v) <= 256 else None
        found = memo.get(leaf) if leaf is not None else None
        if found is None:
            found = masker.detected_kinds(v, field)
            if leaf is not None and len(memo) < MEMO_CELLS:
                memo[leaf] = found  # a short leaf (status, currency, a repeated e-mail) is detected once
        if found:
            out.append((path, found))
    if key is not None and len(memo) < MEMO_CELLS:
        memo[key] = out
    return out


def _audit_masker() -> Masker:
    """The masker's detectors for the audit: every value detector (cards by Luhn, IBANs by mod-97,
    JWTs, provider keys, bearer/basic credentials, passwords in URLs, e-mail addresses …) and sensitive
    field names, but not ``named_value`` (a "label: value" inside free text): masking errs on the safe
    side there ("CardError: declined" is masked as a card), and an audit that claims a ledger keeps card
    numbers must not."""
    from idemview.config import new_masker

    return new_masker(without=frozenset({"named_value"}))


class SecretAtRest(FindingRule):
    """``secret_at_rest`` (high): a column (or JSON path) of the ledger holds credentials, card numbers
    or personal data in plain text, in a sample of the newest rows. About the ledger, not one operation:
    scope and key are empty, ``column`` names it."""

    kind = FindingKind.SECRET_AT_REST

    def selects(self, e):
        return []  # no operation carries it: a filter on it matches no operation

    def run(self, e: FindingEngine, c: Connection) -> list[Finding]:
        n = getattr(e, "audit_rows", DEFAULT_AUDIT_ROWS)
        if not n or n <= 0:
            return []
        flt = e.flt
        if flt is not None and not flt.without(findings=True).is_empty():
            return []  # about the whole ledger: a filter narrowing the operations leaves it out
        l = e.l
        out = self._table(e, c, l.ops, n, "operations")
        att = getattr(l, "att", None)
        if att is not None and att is not l.ops and getattr(att, "name", None) != l.ops.name:
            out += self._table(e, c, att, n, "attempts")
        return out

    def _table(self, e: FindingEngine, c: Connection, t, n: int, role: str) -> list[Finding]:
        l = e.l
        cols = [col for col in t.c if _is_texty(col)]
        if not cols:
            return []
        is_ops = t is l.ops
        # example keys: the operations' key, or a separate attempts table's own key columns
        key_expr = l.key_expr if is_ops else (None if getattr(l, "att_needs_join", True) else l.att_key_expr)
        keyed = key_expr is not None
        sel = [col.label(f"c{i}") for i, col in enumerate(cols)]
        if key_expr is not None:
            sel.append(key_expr.label("_k"))
        q = select(*sel).select_from(t)
        newest = None
        if is_ops and "created_at" in l.time_cols:
            newest = l.time_cols["created_at"][0]
        elif is_ops and l.rid is not None:
            newest = l.rid
        elif not is_ops and "started_at" in getattr(l, "att_time", {}):
            newest = l.att_time["started_at"][0]
        if newest is not None:
            q = q.order_by(newest.desc())
        q = q.limit(n)
        masker = _audit_masker()  # only the kinds it detects are read, never a tag or a value
        # (column, path) -> [rows with it, {kind: values}, examples]
        hits: dict[tuple[str, str | None], list] = {}
        memo: dict = {}  # (column index, cell) -> what the detectors found in it (a repeated cell: once)
        rows_read = 0
        res = c.execution_options(stream_results=True, yield_per=500).execute(q)
        try:
            for row in res:
                rows_read += 1
                k = row[-1] if keyed else None
                for i, col in enumerate(cols):
                    seen: set = set()
                    for path, found in _detect_cell(masker, memo, i, row[i], col.name):
                        ref = (col.name, path)
                        if len(hits) >= MAX_PATHS * len(cols) and ref not in hits:
                            continue
                        h = hits.setdefault(ref, [0, {}, []])
                        if ref not in seen:
                            seen.add(ref)
                            h[0] += 1
                            if k is not None and len(h[2]) < EXAMPLES and k not in h[2]:
                                h[2].append(k)
                        for kind, m in found.items():
                            h[1][kind] = h[1].get(kind, 0) + m
        finally:
            res.close()
        return self._shape(t.name, role, hits, rows_read, n)

    def _shape(self, table: str, role: str, hits: dict, rows_read: int, n: int) -> list[Finding]:
        """One finding per (column, JSON path) of ``hits`` (``[rows with it, {kind: values}, example
        keys]``), read from ``rows_read`` of at most ``n`` newest rows of ``table`` (its ``role``)."""
        out = []
        for (col_name, path), (m, kinds, ex) in sorted(hits.items(), key=lambda x: (x[0][0], x[0][1] or "")):
            # quoted like keys in other explanations: a name, not a claim (its digits are not counts)
            where = f"'{col_name}'" + (f" at '{path}'" if path else "")
            words = ", ".join(sorted(kinds))
            advice = _advice(set(kinds))
            expl = (
                f"The {role} table's column {where} stores {words} in plain text in {m:,} of the {rows_read:,} "
                f"newest rows read (a sample of at most {n:,} rows): {advice}."
            )
            ev = {
                "table": table,
                "column": col_name,
                "json_path": path,
                "rows_read": rows_read,
                "rows_with": m,
                "sample_limit": n,
                # a list, not {kind: n}: "card" or "email" as a field name would be masked by every output
                "kinds": [{"kind": k, "values": v} for k, v in sorted(kinds.items())],
                "sample": True,
                "advice": advice,
                # keys as the grid shows them: every output (CLI, GUI, export) masks them like any value
                "example_keys": [str(x) for x in ex],
            }
            f = Finding(self.kind, self.severity, "", "", expl, [ev])
            f.column = col_name if path is None else f"{col_name} {path}"
            out.append(f)
        return out
