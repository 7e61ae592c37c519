"""The Python API for notebooks (DESIGN §9): ``idemview.open`` → typed, masked DataFrames on SQLite and
PostgreSQL, chunked iteration, and ``idemview.read_evidence`` verifying the manifest first."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from sqlalchemy import create_engine

import idemview
from idemview.errors import CannotConnect, EvidenceMismatch, LayoutMismatch
from idemview.evidence.plan import export_evidence
from idemview.masking.masker import Masker
from idemview.services.demo import generate
from tests.conftest import ANCHOR

KEY = b"k" * 32  # a fixed masking key: equal values give equal tags in every frame and file


@pytest.fixture(params=["sqlite", "postgresql"])
def demo(request, tmp_path):
    """(url, planted) of a 300-operation demo ledger on each engine."""
    if request.param == "sqlite":
        url = str(tmp_path / "demo.db")
        w = create_engine(f"sqlite:///{url}")
    else:
        url = request.getfixturevalue("pg_url")
        w = create_engine(url)
        from tests.conftest import _clear

        _clear(w)
    planted = generate(w, operations=300, seed=21)
    w.dispose()
    return url, planted


def test_import_idemview_stays_cheap():
    code = (
        "import sys, idemview\n"
        "print(sorted(m for m in ('pandas', 'sqlalchemy', 'PySide6') if m in sys.modules))\n"
        "idemview.open\n"  # the lazy attribute loads the API on first use (pandas: on the first frame)
        "print('idemview.api' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "True"]


def test_operations_are_typed_and_complete(demo):
    url, planted = demo
    with idemview.open(url, masker=Masker(key=KEY)) as led:
        ops = led.operations(now=ANCHOR)
        assert led.layout.name == "idemview"  # detected
    assert len(ops) == planted.operations
    assert str(ops["record_id"].dtype) == "Int64"
    assert str(ops["attempt_count"].dtype) == "Int64"
    assert isinstance(ops["created_at"].dtype, pd.DatetimeTZDtype) and str(ops["created_at"].dt.tz) == "UTC"
    assert ops["status"].dtype == "string"
    assert set(ops["status"].dropna()) <= {"new", "in_progress", "completed", "failed", "unknown"}
    assert ops["created_at"].max() <= pd.Timestamp(ANCHOR)
    # the findings column names the kinds found for each planted key
    dup = planted.incidents["duplicate_effect"]
    flagged = ops[ops["findings"].fillna("").str.contains("duplicate_effect")]
    assert {(s, k) for s, k in zip(flagged["scope"], flagged["idempotency_key"], strict=True)} == set(dup)


def test_frames_are_masked_by_default(demo):
    url, _ = demo
    with idemview.open(url, layout="idemview") as led:
        masked = led.operations(now=ANCHOR)
    with idemview.open(url, layout="idemview", masked=False) as led:
        raw = led.operations(now=ANCHOR)
    emails = [
        r["customer"]["email"]
        for r in raw["request"].dropna()
        if isinstance(r, dict) and isinstance(r.get("customer"), dict) and "email" in r["customer"]
    ]
    assert emails and all("@" in e for e in emails)
    text = json.dumps(masked["request"].dropna().tolist())
    assert not any(e in text for e in emails)
    assert "[email#" in text


def test_attempts_and_findings(demo):
    url, planted = demo
    with idemview.open(url) as led:
        att = led.attempts(now=ANCHOR)
        fs = led.findings(ANCHOR)
    assert len(att) == planted.attempts
    assert str(att["attempt"].dtype) == "Int64"
    assert str(att["started_at"].dt.tz) == "UTC"
    got = set(zip(fs["kind"], fs["scope"], fs["idempotency_key"], strict=True))
    want = {(k, s, key) for k, refs in planted.incidents.items() for s, key in refs}
    assert got == want
    assert str(fs["at"].dt.tz) == "UTC"


def test_chunks_concatenate_to_the_whole_frame(demo):
    url, _ = demo
    with idemview.open(url, masker=Masker(key=KEY)) as led:
        whole = led.operations(now=ANCHOR)
        chunks = list(led.operations(now=ANCHOR, chunksize=64))
    assert [len(c) for c in chunks[:-1]] == [64] * (len(chunks) - 1) and 0 < len(chunks[-1]) <= 64
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), whole)


def test_filter_as_mapping(demo):
    url, _ = demo
    with idemview.open(url) as led:
        failed = led.operations({"statuses": ["failed"]}, now=ANCHOR)
        dup = led.operations({"findings": ["duplicate_effect"]}, now=ANCHOR)
        with pytest.raises(ValueError, match="unknown filter field"):
            led.operations({"colour": "red"})
        with pytest.raises(ValueError):
            led.operations(chunksize=0)
    assert len(failed) > 0 and set(failed["status"]) == {"failed"}
    assert len(dup) > 0 and dup["findings"].str.contains("duplicate_effect").all()


def test_read_evidence_round_trip(demo, tmp_path):
    url, _ = demo
    out = tmp_path / "ops.csv"
    with idemview.open(url, masker=Masker(key=KEY)) as led:
        frame = led.operations(now=ANCHOR)
        export_evidence(led.ledger, None, out, now=ANCHOR, masker=Masker(key=KEY))
    back = idemview.read_evidence(out)
    assert list(back.columns) == list(frame.columns)
    pd.testing.assert_frame_equal(back, frame, check_dtype=False)
    assert str(back["record_id"].dtype) == "Int64" and str(back["created_at"].dt.tz) == "UTC"


def test_read_evidence_refuses_a_changed_file(tmp_path, demo):
    url, _ = demo
    out = tmp_path / "f.csv"
    with idemview.open(url) as led:
        export_evidence(led.ledger, None, out, rows="findings", now=ANCHOR)
    assert len(idemview.read_evidence(out)) > 0
    data = out.read_bytes()
    out.write_bytes(data.replace(b"duplicate_effect", b"duplicate_effecT", 1))
    with pytest.raises(EvidenceMismatch, match="SHA-256"):
        idemview.read_evidence(out)
    out.write_bytes(data)
    (tmp_path / "f.csv.manifest.json").unlink()
    with pytest.raises(EvidenceMismatch, match="manifest"):
        idemview.read_evidence(out)


def test_open_errors_are_typed(tmp_path):
    with pytest.raises(CannotConnect):
        idemview.open(str(tmp_path / "missing" / "nope.db"))
    empty = tmp_path / "empty.db"
    e = create_engine(f"sqlite:///{empty}")
    with e.begin() as c:
        c.exec_driver_sql("CREATE TABLE unrelated (id INTEGER PRIMARY KEY)")
    e.dispose()
    with pytest.raises(LayoutMismatch):
        idemview.open(str(empty))
    with pytest.raises(LayoutMismatch) as ei:
        idemview.open(str(empty), layout="oban")
    assert ei.value.exit_code == 4


def test_open_a_saved_connection_by_name(pg_url):
    """A saved connection's name works as on the command line: its password comes from the keyring
    (the tests' in-memory one), its layout is used."""
    import keyring
    from sqlalchemy.engine import make_url

    from idemview.config import Connection, ConnectionStore, CredentialStore

    w = create_engine(pg_url)
    from tests.conftest import _clear

    _clear(w)
    generate(w, operations=50, seed=2)
    w.dispose()
    conn, _pw = Connection.from_url("payments-prod", pg_url)
    conn.layout = "idemview"
    ConnectionStore().upsert(conn)
    assert CredentialStore().set(conn.id, make_url(pg_url).password or "unused")
    assert keyring.get_password("idemview", conn.id) is not None  # stored in the in-memory keyring
    with idemview.open("payments-prod") as led:
        ops = led.operations(now=ANCHOR)
        assert led.layout.name == "idemview"
    assert len(ops) > 0 and set(ops["ledger"]) == {"payments-prod"}


def test_open_takes_value_maps_and_a_saved_connections_own(tmp_path):
    """status_map= as --map-status does, and a saved connection's extra values are applied as the CLI and
    the GUI apply them (found by a tester: the API ignored them)."""
    from idemview.config import Connection, ConnectionStore

    p = tmp_path / "ledger.db"
    w = create_engine(f"sqlite:///{p}")
    generate(w, operations=60, seed=3)
    w.dispose()
    with idemview.open(str(p), layout="idemview") as led:
        plain = led.operations(now=ANCHOR)
    with idemview.open(str(p), layout="idemview", status_map={"succeeded": "failed"}) as led:
        mapped = led.operations(now=ANCHOR)
    n_succ = int((plain["raw_status"] == "succeeded").sum())
    assert n_succ > 0 and int((mapped["status"] == "failed").sum()) == int((plain["status"] == "failed").sum()) + n_succ
    conn = Connection(name="ledger-file", dialect="sqlite", database=str(p), layout="idemview")
    conn.status_map = {"succeeded": "failed"}
    ConnectionStore().upsert(conn)
    with idemview.open("ledger-file") as led:
        saved = led.operations(now=ANCHOR)
    assert list(saved["status"]) == list(mapped["status"])
