"""The export's fast paths (issue 11 §4) never weaken masking.

The writer skips the detectors for texts the masker proves unchanged (canonical UUIDs, lower-case hex
without a card or IBAN) and formats repeated values once per chunk; the operations plan builds rows
column by column instead of through ``Operation`` objects. Secrets planted in a column that holds
such safe-looking ids in almost every row must still be masked, and the CSV and the masking counts
must be exactly what the per-cell path gives.
"""

from __future__ import annotations

import csv
import gc
import io
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, insert, select

from idemview.domain.actions import Classifier
from idemview.domain.filters import Filter
from idemview.evidence.plan import OP_TIMES, _as_stored, _finding_index, _payload_cell, export_evidence, plan_export
from idemview.evidence.writer import ColumnSpec, _bare_cells, _make_formatter, guard_formula, write_evidence
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.masking.masker import Masker, _plain_shape
from tests.presets.test_planted_stripe_powertools_celery import cel_row, celery_md

KEY = b"f" * 32
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

# (planted text, the secret part that must not survive, the tag kind expected)
PLANTED = [
    ("4111111111111111", "4111111111111111", "card"),
    ("abcd4111-1111-1111-1111-abcdefabcdef", "4111-1111-1111-1111", "card"),  # UUID-shaped
    ("abc4111111111111111def", "4111111111111111", "card"),  # lower-case hex
    ("0a5555555555554444cd", "5555555555554444", "card"),
    ("de89370400440532013000", "89370400440532013000", "iban"),  # lower-case hex, a valid IBAN
    ("alice.smith@example.com", "alice.smith@example.com", "email"),
    ("sk_live_a1B2c3D4e5F6g7H8i9J0k1L2", "a1B2c3D4e5F6g7H8i9J0k1L2", "stripe_key"),
    ("Bearer abcDEF1234567890xyzQRS", "abcDEF1234567890xyzQRS", "bearer"),
    ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "aws_key"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJl", "eyJzdWIiOiIxMjMifQ", "jwt"),
]


def _safe_looking(i: int) -> str:
    u = uuid.UUID(int=(i * 0x9E3779B97F4A7C15F39CC0605CEDC835) % (1 << 128), version=4)
    return str(u) if i % 3 else u.hex + u.hex[:9]


def _values(n: int) -> list[str]:
    vals = [_safe_looking(i) for i in range(n)]
    for j, (text, _secret, _kind) in enumerate(PLANTED):
        vals[37 + j * 97] = text
    return vals


def test_the_masker_masks_every_planted_value_and_proves_none_of_them_plain():
    m = Masker(key=KEY)
    for text, secret, kind in PLANTED:
        out = m.mask_value(text, "task_id")
        assert secret not in out and f"[{kind}#" in out, (text, out)
        assert not _plain_shape(text), text
    # and most of the safe-looking ids are proven plain (the fast path is taken)
    assert sum(_plain_shape(v) for v in _values(1200)) > 1000


@pytest.mark.parametrize("check_every", [1000, 7])
def test_writer_fast_path_equals_the_per_cell_path(tmp_path, check_every):
    vals = _values(3000)
    statuses = ["SUCCESS", "FAILURE", "user@example.org", None]
    rows = [(v, statuses[i % 4], i, v if i % 5 else None) for i, v in enumerate(vals)]
    cols = [ColumnSpec("task_id"), ColumnSpec("status"), ColumnSpec("n", "integer"), ColumnSpec("request")]
    res = write_evidence(
        tmp_path / "out.csv",
        cols,
        iter(rows),
        masker=Masker(key=KEY),
        manifest={"rows": {"kind": "test"}},
        check_every=check_every,
    )
    ref = Masker(key=KEY)
    buf = io.StringIO()
    # the writer's quoting (every text field quoted, NULL and numbers bare: _bare_cells), cell by cell
    w = csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_NONNUMERIC)
    bare = [_bare_cells(c, "") for c in cols]
    w.writerow([c.name for c in cols])
    for r in rows:
        cells = []
        for c, v in zip(cols, r, strict=True):
            if v is None:
                cells.append("")
            elif c.kind == "integer":
                cells.append(str(v))
            else:
                cells.append(guard_formula(ref.mask_value(v, c.name)))
        w.writerow([b([x])[0] for b, x in zip(bare, cells, strict=True)])
    data = (tmp_path / "out.csv").read_bytes()
    assert data == buf.getvalue().encode("utf-8")
    assert res.masking == ref.counts  # one count per masked cell, repeated values included
    text = data.decode("utf-8")
    for planted, secret, kind in PLANTED:
        assert secret not in text, planted
        assert f"[{kind}#" in text
    assert vals[1] in text and vals[3] in text  # plain ids are written as they are


def test_celery_export_masks_secrets_planted_among_uuid_task_ids(tmp_path):
    path = tmp_path / "celery.db"
    eng = create_engine(f"sqlite:///{path}")
    md = celery_md()
    md.create_all(eng)
    vals = _values(1500)
    rows = []
    for i, v in enumerate(vals):
        r = cel_row(i + 1, v, ("SUCCESS", "FAILURE", "STARTED")[i % 3], NOW - timedelta(minutes=i * 7))
        # kwargs are exported as hex: plant a card number that the hex shows as a digit run
        r["kwargs"] = bytes.fromhex("0a4111111111111111cd") if i == 700 else uuid.UUID(int=i).bytes
        rows.append(r)
    with eng.begin() as c:
        c.execute(insert(md.tables["celery_taskmeta"]), rows)
    eng.dispose()

    ledger = Ledger(open_engine(f"sqlite:///{path}"), load_preset("celery"))
    out = tmp_path / "ops.csv"
    gc_before = gc.get_threshold()
    res = export_evidence(ledger, None, out, now=NOW, masker=Masker(key=KEY))
    assert gc.get_threshold() == gc_before  # the export's collector setting is undone
    assert res.rows == 1500
    text = out.read_bytes().decode("utf-8")
    for planted, secret, kind in PLANTED:
        assert secret not in text, planted
        assert f"[{kind}#" in text
    assert "0a4111111111111111cd" not in text and "0a[card#" in text
    assert vals[1] in text and vals[3] in text

    # The same rows built the per-row way (Ledger.row_to_operation, one Operation per row, each
    # cell masked and formatted on its own) give the same bytes and the same counts.
    ref_masker = Masker(key=KEY)
    findings = _finding_index(ledger, NOW)
    header = next(csv.reader(io.StringIO(text)))
    times = [t for t in header if t in OP_TIMES]
    payloads = [p for p in ("request", "response", "error") if p in header]

    classify = Classifier(ledger.layout.actions).classify  # the action column (DESIGN §5.1)

    def reference_rows():
        q = select(*ledger._op_columns()).select_from(ledger.ops).order_by(ledger.rid)
        with ledger.engine.connect() as c:
            for r in c.execute(q):
                op = ledger.row_to_operation(r)
                row = [ledger.name, op.row_id, op.scope, op.key, op.kind, classify(op.kind), op.status.value]
                row.append(op.raw_status)
                row += [_as_stored(getattr(op, t), ledger, t) for t in times]
                row += [op.attempt_count, op.fingerprint, op.intent_ref, op.effect_ref]
                row.append(ledger.attempt_effect_refs([(op.scope, op.key)]).get((op.scope, op.key)))
                row += [_payload_cell(getattr(op, p)) for p in payloads]
                row.append(" ".join(findings.get((op.scope, op.key), [])) or None)
                yield row

    cols = plan_export(ledger, Filter(), "operations", NOW).columns
    fmts = [_make_formatter(c, ref_masker, "") for c in cols]
    bare = [_bare_cells(c, "") for c in cols]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_NONNUMERIC)
    w.writerow(header)
    for row in reference_rows():
        w.writerow([b([f(v)])[0] for f, b, v in zip(fmts, bare, row, strict=True)])
    assert text == buf.getvalue()
    assert res.masking == ref_masker.counts


def test_memo_formats_each_distinct_value_once_and_counts_every_cell(tmp_path):
    """The memo per distinct value (issue 27 item 2) also keeps values whose formatting masked
    something: formatted once, counted once per cell, the same text as the per-cell path."""
    from idemview.evidence.writer import ColumnBatches

    dense = [
        "mail alice@example.com card 4111 1111 1111 1111 and Bearer abcDEF1234567890xyzQRS",
        '{"password": "hunter22", "email": "bob@example.org"}',
        "postgres://app:s3cretpw@db.internal/payments",
        "nothing to see here",
    ]
    m = Masker(key=KEY)
    calls: list[object] = []
    fmt = _make_formatter(ColumnSpec("note"), m, "")

    def counting(v):
        calls.append(v)
        return fmt(v)

    from idemview.evidence.writer import _Memo

    values = [dense[(i * 7) % 4] if i % 5 else None for i in range(400)]
    memo = _Memo(counting, m.count_total, lambda: m.counts, m.add_counts).begin()
    got = [memo.get_text(v) for v in values]
    assert len(calls) == len(set(values))  # each distinct value formatted once
    ref = Masker(key=KEY)
    assert got == [_make_formatter(ColumnSpec("note"), ref, "")(v) for v in values]
    assert m.counts == ref.counts and ref.counts["email"] > 100  # one count per masked cell

    # through the writer, with two instant columns handed as one list (formatted once)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    times = [t0 + timedelta(seconds=i % 13) for i in range(400)]
    cols = [ColumnSpec("note"), ColumnSpec("updated_at", "instant"), ColumnSpec("locked_at", "instant")]
    batches = [[values[i : i + 150], times[i : i + 150], times[i : i + 150]] for i in range(0, 400, 150)]
    for b in batches:
        b[2] = b[1]  # the same object, as plan._operation_columns hands it
    w1 = Masker(key=KEY)
    res = write_evidence(
        tmp_path / "a.csv", cols, ColumnBatches(batches), masker=w1, manifest={"rows": {"kind": "t"}}, check_every=64
    )
    w2 = Masker(key=KEY)
    rows = [(values[i], times[i], t0 + timedelta(seconds=i % 13)) for i in range(400)]  # no shared objects
    res2 = write_evidence(
        tmp_path / "b.csv", cols, iter(rows), masker=w2, manifest={"rows": {"kind": "t"}}, check_every=1
    )
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert res.masking == res2.masking == ref.counts
    text = (tmp_path / "a.csv").read_text()
    for secret in ("alice@example.com", "hunter22", "s3cretpw", "4111 1111 1111 1111", "abcDEF1234567890xyzQRS"):
        assert secret not in text
