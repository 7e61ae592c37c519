"""Large cells exported from every engine under every dialect name (issue 27 items 1-2): a JSON
*document*, one flat JSON string and secret-dense free text, each a few times the stream masker's
threshold (``STREAM_MIN``) and over the writer's field-by-field size (``BIG_ROW``), are written
byte-identical to the whole-cell mask, with the secrets masked, also one lying across the edge of the
slices the writer quotes and encodes a large field in (``PIECE_CHARS``: masking comes before slicing).
These cells are below ``pages.PAGE_MIN`` and arrive whole; the same engines with cells read in pages
(page edges inside characters, secrets and escapes; NULL; rewrites between pages):
``test_large_cells_paged.py``.
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from datetime import UTC, datetime

from sqlalchemy import text

from idemview.domain.filters import Filter
from idemview.evidence import writer
from idemview.evidence.plan import export_evidence
from idemview.evidence.writer import ColumnSpec, _make_formatter
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.masking.masker import Masker
from idemview.masking.stream import STREAM_MIN
from idemview.services.demo import reference_metadata

KEY = b"L" * 32
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SECRETS = ("alice@example.com", "4111 1111 1111 1111", "abcDEF1234567890xyzQRS", "s3cretpw9")


def _doc(size: int) -> str:
    one = '{"id":"it_%06d","qty":%d,"note":"plain words","contact":"%s"}'
    parts, n, i = [], 2, 0
    while n < size:
        p = one % (i, i % 7, "alice@example.com" if i % 97 == 5 else "nobody")
        parts.append(p)
        n += len(p) + 1
        i += 1
    return '{"items":[' + ",".join(parts) + '],"password":"s3cretpw9"}'


def _dense(size: int) -> str:
    unit = "alice@example.com paid 4111 1111 1111 1111; Authorization: Bearer abcDEF1234567890xyzQRS\n"
    return (unit * (size // len(unit) + 1))[:size]


def _straddling(size: int, edge: int) -> str:
    """Filler with an e-mail address whose middle sits on character ``edge`` of the written field
    (the field starts with ``"``: the JSON string's own quote)."""
    filler = "lorem ipsum dolor sit amet "
    head = (filler * (edge // len(filler) + 1))[: edge - 10]
    tail = (filler * (size // len(filler) + 1))[: size - edge]
    return head + "alice@example.com" + tail


def test_large_cells_equal_the_whole_cell_mask_on_every_engine(dialect_db):
    eng, url = dialect_db
    size = 3 * STREAM_MIN + writer.BIG_ROW  # ~1.8 MB: streamed, and written field by field
    cells = {
        "doc": (json.dumps({"wrap": json.loads(_doc(size // 2))}), _dense(size)),
        "flat": (json.dumps(_straddling(size, writer.PIECE_CHARS)), None),
        "dense": (json.dumps({"text": _dense(size)}), _straddling(size, writer.PIECE_CHARS)),
    }
    md = reference_metadata()
    md.drop_all(eng)
    md.create_all(eng)
    with eng.begin() as c:
        if eng.dialect.name in ("mysql", "mariadb"):  # the reference DDL's TEXT holds 64 KiB there
            c.execute(text("ALTER TABLE operations MODIFY response_body LONGTEXT, MODIFY error LONGTEXT"))
        for i, (k, (body, err)) in enumerate(cells.items(), 1):
            c.execute(
                text(
                    "INSERT INTO operations (id, scope, idempotency_key, kind, status, attempt_count, "
                    "created_at, response_body, error) VALUES (:i, 's', :k, 'pay', 'succeeded', 1, "
                    "'2026-11-30 11:00:00', :b, :e)"
                ),
                {"i": i, "k": k, "b": body, "e": err},
            )
    led = Ledger(open_engine(url), load_preset("idemview"))
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/cells.csv"
        export_evidence(led, Filter(), path, now=NOW, masker=Masker(key=KEY))
        data = open(path, encoding="utf-8", newline="").read()
    led.engine.dispose()
    old = csv.field_size_limit(1 << 26)
    try:
        rows = list(csv.DictReader(io.StringIO(data, newline="")))
    finally:
        csv.field_size_limit(old)
    assert [r["idempotency_key"] for r in rows] == list(cells)
    ref = Masker(key=KEY)  # the whole-cell path: parsed whole, masked whole, formatted whole
    as_json = _make_formatter(ColumnSpec("response", "json"), ref, "")
    as_text = _make_formatter(ColumnSpec("error"), ref, "")
    for r in rows:
        body, err = cells[r["idempotency_key"]]
        assert r["response"] == as_json(json.loads(body)), r["idempotency_key"]
        assert r["error"] == (as_text(err) if err is not None else "")
    for s in SECRETS:
        assert s not in data, s
    assert data.count("[email#") > 1000
