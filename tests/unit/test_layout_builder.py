"""The layout editor's core (no Qt): reflection, samples, guesses, model <-> TOML, saving."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    insert,
    text,
)

from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import LayoutError, all_presets, load_layout, load_preset, parse_layout
from idemview.ledger.builder import (
    ColumnInfo,
    blank_model,
    build_layout,
    find_table,
    guess_status,
    guess_time_encoding,
    layout_path_for,
    layout_text,
    model_from_layout,
    reflect_schema,
    sample_distinct,
    sample_values,
    save_layout,
)
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger

UTC = UTC
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
NOW_S = int(NOW.timestamp())


def _dedup_table(md: MetaData, schema: str | None = None) -> Table:
    return Table(
        "payments_dedup",
        md,
        Column("req_id", String(64)),
        Column("tenant", String(32)),
        Column("state", String(16)),
        Column("first_seen", BigInteger),
        Column("done_at", Text),
        Column("tries", Integer),
        Column("seen_at", DateTime(timezone=True)),
        Column("seen_ms", BigInteger),
        schema=schema,
    )


ROWS = [
    dict(req_id="r-ok-1", tenant="t1", state="DONE", first_seen=NOW_S - 3600, done_at="2026-11-30T11:01:00Z", tries=1),
    dict(
        req_id="r-ok-2",
        tenant="t1",
        state="DONE",
        first_seen=NOW_S - 3000,
        done_at="2026-11-30 11:11:00+00:00",
        tries=2,
    ),
    dict(req_id="r-fail", tenant="t2", state="FAILED", first_seen=NOW_S - 2000, done_at=None, tries=3),
    dict(req_id="r-run", tenant="t2", state="PROCESSING", first_seen=NOW_S - 1000, done_at=None, tries=1),
]

# r-run has held its lock (first_seen) for 1000 s > 300 s; r-fail failed after 3 tries (> 2).
EXPECTED = {("unresolved_failure", "r-fail"), ("retry_storm", "r-fail"), ("stuck_in_progress", "r-run")}


def _fill(writable, schema=None):
    md = MetaData()
    t = _dedup_table(md, schema)
    md.drop_all(writable)
    md.create_all(writable)
    rows = [dict(r, seen_at=NOW, seen_ms=(NOW_S - 60) * 1000) for r in ROWS]
    with writable.begin() as c:
        c.execute(insert(t), rows)


def _model(schema=None) -> dict:
    m = blank_model("payments", "payments_dedup", schema)
    ops = m["operations"]
    ops.update(
        key=["req_id"],
        scope=["tenant"],
        status={
            "column": "state",
            "map": {"DONE": "completed", "FAILED": "failed", "PROCESSING": "in_progress"},
            "default": "unknown",
        },
        times={
            "created_at": {"column": "first_seen", "encoding": "epoch_s"},
            "completed_at": {"column": "done_at", "encoding": "iso_text"},
            "locked_at": {"column": "first_seen", "encoding": "epoch_s"},
        },
        fields={"attempt_count": "tries"},
    )
    m["attempts"] = {"source": "counter"}
    m["expiry"] = {"lock_timeout_seconds": 300.0}
    m["tunables"] = {"retry_threshold": 2}
    return m


# ------------------------------------------------------------------------------ reflection & samples


def test_reflect_and_sample_on_each_engine(db):
    writable, url = db
    _fill(writable)
    eng = open_engine(url)
    try:
        tables = reflect_schema(eng)
        t = find_table(tables, "payments_dedup")
        assert t is not None and t.schema is None
        assert t.column_names()[:6] == ["req_id", "tenant", "state", "first_seen", "done_at", "tries"]
        assert t.column("first_seen").family == "integer"
        assert t.column("done_at").family == "text"
        assert t.column("seen_at").family == "datetime"
        assert find_table(tables, "PAYMENTS_DEDUP") is t  # case-insensitive fallback

        assert sample_distinct(eng, "payments_dedup", "state") == [("DONE", 2), ("FAILED", 1), ("PROCESSING", 1)]
        assert sample_distinct(eng, "payments_dedup", "done_at", limit=1)[0] == (None, 2)
        # the guess from samples read through the read-only engine
        for col, want in [
            ("first_seen", "epoch_s"),
            ("done_at", "iso_text"),
            ("seen_at", "datetime"),
            ("seen_ms", "epoch_ms"),
            ("tries", None),
            ("state", None),
        ]:
            got = guess_time_encoding(t.column(col), sample_values(eng, "payments_dedup", col))
            assert got == want, col
    finally:
        eng.dispose()


def test_reflect_other_schema_postgresql(pg_url):
    from sqlalchemy import create_engine

    w = create_engine(pg_url)
    with w.begin() as c:
        c.execute(text("DROP SCHEMA IF EXISTS ledger CASCADE"))
        c.execute(text("CREATE SCHEMA ledger"))
    _fill(w, schema="ledger")
    eng = open_engine(pg_url)
    try:
        t = find_table(reflect_schema(eng), "payments_dedup", "ledger")
        assert t is not None and t.schema == "ledger" and t.label == "ledger.payments_dedup"
        assert not any(x.schema and x.schema.startswith(("pg_", "information_schema")) for x in reflect_schema(eng))
        assert sample_distinct(eng, "payments_dedup", "tenant", schema="ledger") == [("t1", 2), ("t2", 2)]
        # a model built for that schema scans through it
        lay = build_layout(_model(schema="ledger"))
        fs = FindingEngine(Ledger(eng, lay), NOW).run()
        assert {(f.kind.value, f.key) for f in fs} == EXPECTED
    finally:
        eng.dispose()
        with w.begin() as c:
            c.execute(text("DROP SCHEMA IF EXISTS ledger CASCADE"))
        w.dispose()


# ------------------------------------------------------------------------------------------ guesses


@pytest.mark.parametrize(
    "family,samples,want",
    [
        ("datetime", [], "datetime"),
        ("date", [], "datetime"),
        ("integer", [1764504000, 1764500000], "epoch_s"),
        ("integer", [1764504000123], "epoch_ms"),
        ("number", [1764504000.5], "epoch_s"),
        ("text", ["1764504000"], "epoch_s"),
        ("text", ["2026-11-30T12:00:00Z", "2026-11-30 12:00:00.123+01:00", "2026-11-30"], "iso_text"),
        ("text", ["2026-11-30T12:00:00Z", "tomorrow"], None),
        ("integer", [1, 2, 3], None),
        ("integer", [1764504000, 3], None),  # mixed magnitudes: not a time
        ("text", [], None),
        ("other", [datetime(2026, 1, 1)], "datetime"),
    ],
)
def test_guess_time_encoding(family, samples, want):
    assert guess_time_encoding(ColumnInfo("c", "X", family), samples) == want


@pytest.mark.parametrize(
    "raw,want",
    [
        ("PROCESSING", "in_progress"),
        ("done", "completed"),
        ("SUCCESS", "completed"),
        ("Failed", "failed"),
        ("pending", "new"),
        ("in-progress", "in_progress"),
        ("weird", "unknown"),
        (None, "unknown"),
        (3, "unknown"),
    ],
)
def test_guess_status(raw, want):
    assert guess_status(raw) == want


# --------------------------------------------------------------------------------- model <-> TOML


def _fields(lay):
    return {f.name: getattr(lay, f.name) for f in dataclasses.fields(lay) if f.name not in ("text", "origin")}


@pytest.mark.parametrize("preset", [p.name for p in all_presets()])
def test_every_preset_round_trips(preset):
    lay = load_preset(preset)
    again = parse_layout(layout_text(model_from_layout(lay)))
    assert _fields(again) == _fields(lay)


def test_model_is_a_fresh_copy():
    lay = load_preset("stripe-style")
    m = model_from_layout(lay)
    m["operations"]["status"]["rules"].clear()
    assert lay.status.rules and model_from_layout(lay)["operations"]["status"]["rules"]


def test_layout_text_drops_unset_entries_and_validates():
    m = _model()
    m["operations"]["kind"] = ""  # "not chosen" in the editor
    m["operations"]["row_id"] = None
    m["operations"]["scope"] = []
    t = layout_text(m)
    assert "kind" not in t and "row_id" not in t and "scope" not in t
    assert "lock_timeout_seconds = 300\n" in t  # whole seconds written as an int
    lay = parse_layout(t)
    assert lay.key == ["req_id"] and lay.times["completed_at"].encoding == "iso_text"


def test_layout_text_keeps_meaningful_empties():
    m = model_from_layout(load_preset("stripe-style"))
    lay = parse_layout(layout_text(m))
    assert lay.status.rules[-1].when == () and lay.status.rules[-1].status == "new"
    m["operations"]["status"] = {"rules": [{"when": [{"column": "recovery_point", "eq": ""}], "status": "new"}]}
    assert parse_layout(layout_text(m)).status.rules[0].when[0].value == ""


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda m: m["operations"].update(key=[]), "operations.key is required"),
        (lambda m: m["operations"]["status"]["map"].update(DONE="finished"), "not one of"),
        (lambda m: m["operations"]["times"]["created_at"].update(encoding="epoch_us"), "encoding 'epoch_us'"),
        (lambda m: m["expiry"].update(retention_seconds=60, retention_from="updated_at"), "retention_from"),
        (lambda m: m["layout"].update(name=""), "name is required"),
    ],
)
def test_invalid_models_raise_layout_error(mutate, message):
    m = _model()
    mutate(m)
    with pytest.raises(LayoutError, match=message):
        layout_text(m)


# ------------------------------------------------------------------------------------------ saving


def test_save_beside_the_connection(tmp_path, monkeypatch, sqlite_db):
    monkeypatch.setenv("IDEMVIEW_CONFIG_DIR", str(tmp_path / "cfg"))
    p = layout_path_for("0123abcd")
    assert p == tmp_path / "cfg" / "layouts" / "0123abcd.toml"
    writable, path = sqlite_db
    _fill(writable)
    out = save_layout(_model(), connection_id="0123abcd")
    assert out == p and p.read_text("utf-8").startswith('[layout]\nname = "payments"')
    assert not [x for x in p.parent.iterdir() if x.name.endswith(".tmp")]
    eng = open_engine(path)
    try:
        fs = FindingEngine(Ledger(eng, load_layout(str(p))), NOW).run()
    finally:
        eng.dispose()
    assert {(f.kind.value, f.key) for f in fs} == EXPECTED


def test_invalid_model_writes_nothing(tmp_path):
    target = tmp_path / "x.toml"
    target.write_text("old", "utf-8")
    m = _model()
    m["operations"]["key"] = []
    with pytest.raises(LayoutError):
        save_layout(m, path=target)
    assert target.read_text("utf-8") == "old"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["x.toml"]


@pytest.mark.parametrize("bad", ["../evil", "a/b", "", ".hidden", "x" * 200])
def test_layout_path_rejects_crafted_ids(bad):
    with pytest.raises(ValueError):
        layout_path_for(bad)
