"""Unknown values are visible (issue 12, DESIGN §9): ``scan`` reports raw status / outcome values the
layout does not map, computed in SQL; the user maps extra values in a connection's settings or with
``--map-status`` / ``--map-outcome`` without editing the preset; ``Filter.unmapped_status`` narrows to
them; the layout's declarative additions (``null``, ``key_required``, ``unless``) are validated."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from idemview.cli import main
from idemview.config import Connection, ConnectionStore
from idemview.domain.filters import Filter
from idemview.layouts.layout import LayoutError, load_preset, parse_layout, parse_value_map, with_value_maps
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load
from tests.presets.systems import CORE

NOW_ISO = "2026-11-30T12:00:00Z"
M = timedelta(minutes=1)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("IDEMVIEW_CONFIG_DIR", str(tmp_path / "config"))


def celery_ledger(writable, statuses):
    c = CORE()
    load(
        writable,
        c.celery_md(),
        {"celery_taskmeta": [c.cel_row(i + 1, f"t-{i}", s, ANCHOR - (i + 2) * 60 * M) for i, s in enumerate(statuses)]},
    )


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_scan_json_counts_unmapped_status_values(db, capsys):
    writable, url = db
    celery_ledger(writable, ["SUCCESS", "PROGRESS", "PROGRESS", "FAILURE", "REVOKED", None])
    code, out, err = run(capsys, "scan", url, "--layout", "celery", "--now", NOW_ISO, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["unmapped"] == {"status": {"PROGRESS": 2, "(null)": 1}, "outcome": {}}
    # Celery's rule for states outside its list (NULL included): not ready, so unfinished -> stuck
    # after an hour
    stuck = {f["key"] for f in doc["findings"] if f["kind"] == "stuck_in_progress"}
    assert stuck == {"t-1", "t-2", "t-5"}


def test_scan_text_lists_unmapped_values(db, capsys):
    writable, url = db
    celery_ledger(writable, ["SUCCESS", "PROGRESS"])
    code, out, err = run(capsys, "scan", url, "--layout", "celery", "--now", NOW_ISO)
    assert code == 0, err
    line = next(l for l in out.splitlines() if l.startswith("unmapped status values"))
    assert "'PROGRESS' 1" in line and "--map-status" in line and "read as in_progress" in line


def test_map_status_option_maps_an_unknown_value(db, capsys):
    writable, url = db
    celery_ledger(writable, ["SUCCESS", "PROGRESS", "CHARGE_DECLINED"])
    code, out, err = run(
        capsys,
        "scan",
        url,
        "--layout",
        "celery",
        "--now",
        NOW_ISO,
        "--format",
        "json",
        "--map-status",
        "CHARGE_DECLINED=failed",
        "--map-status",
        "PROGRESS=in_progress",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["unmapped"] == {"status": {}, "outcome": {}}
    assert {(f["kind"], f["key"]) for f in doc["findings"]} >= {("unresolved_failure", "t-2")}


def test_a_saved_connection_maps_values_and_names_the_schema(sqlite_db, capsys):
    writable, path = sqlite_db
    celery_ledger(writable, ["SUCCESS", "CHARGE_DECLINED"])
    ConnectionStore().upsert(
        Connection(
            name="billing", dialect="sqlite", database=path, layout="celery", status_map={"CHARGE_DECLINED": "failed"}
        )
    )
    code, out, err = run(capsys, "scan", "billing", "--now", NOW_ISO, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["unmapped"]["status"] == {}
    assert [f["key"] for f in doc["findings"] if f["kind"] == "unresolved_failure"] == ["t-1"]
    # the connection's map survives a save/load round trip (no secret in it)
    assert ConnectionStore().find("billing").status_map == {"CHARGE_DECLINED": "failed"}


@pytest.mark.parametrize("arg,msg", [("NOEQUALS", "expected RAW=STATUS"), ("X=bogus", "not one of")])
def test_malformed_map_is_a_usage_error(sqlite_db, capsys, arg, msg):
    writable, path = sqlite_db
    celery_ledger(writable, ["SUCCESS"])
    code, out, err = run(capsys, "scan", path, "--layout", "celery", "--map-status", arg)
    assert code == 2 and msg in err and "Traceback" not in err


def test_unmapped_outcomes_and_the_filter(db):
    """Attempt outcomes outside the map are counted too; Filter(unmapped_status=True) narrows the grid
    to the records whose status is unmapped, compiled to SQL."""
    from idemview.services.demo import reference_metadata

    writable, url = db
    t = ANCHOR.replace(tzinfo=None)
    ops = [
        {"id": i, "scope": "s", "idempotency_key": f"k{i}", "kind": "charge", "status": st, "created_at": t}
        for i, st in enumerate(["succeeded", "paused", "failed", "paused"], 1)
    ]
    atts = [
        {"id": 1, "scope": "s", "idempotency_key": "k1", "attempt_no": 1, "outcome": "succeeded", "started_at": t},
        {"id": 2, "scope": "s", "idempotency_key": "k2", "attempt_no": 1, "outcome": "throttled", "started_at": t},
    ]
    load(writable, reference_metadata(), {"operations": ops, "attempts": atts})
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("idemview"))
        assert led.unmapped_counts() == {"status": {"paused": 2}, "outcome": {"throttled": 1}}
        rows = led.page(Filter(unmapped_status=True)).rows
        assert sorted(r.key for r in rows) == ["k2", "k4"]
        # a findings export under that filter keeps only those operations' findings (the filter was
        # copied field by field there, without unmapped_status, and every finding came out)
        from idemview.evidence.plan import plan_export

        # findings rows: ledger, kind, severity, action, scope, idempotency_key, …
        every = {r[5] for r in plan_export(led, Filter(), "findings", ANCHOR).rows}
        only = {r[5] for r in plan_export(led, Filter(unmapped_status=True), "findings", ANCHOR).rows}
        assert "k3" in every and only <= {"k2", "k4"}
        led2 = Ledger(eng, with_value_maps(load_preset("idemview"), {"paused": "new"}, {"throttled": "rejected"}))
        assert led2.unmapped_counts() == {"status": {}, "outcome": {}}
        assert {r.key: r.status.value for r in led2.page().rows}["k2"] == "new"
    finally:
        eng.dispose()


def test_filter_round_trip_and_sentence():
    f = Filter(unmapped_status=True)
    assert not f.is_empty()
    assert Filter.from_dict(f.to_dict()) == f
    assert f.sentence() == "Operations with a status the layout does not map"


def test_value_maps_apply_to_derived_states_through_their_raw_column():
    lay = with_value_maps(load_preset("stripe-style"), {"legacy_done": "completed"})
    assert lay.status.rules[0].status == "completed" and lay.status.rules[0].when[0].column == "recovery_point"
    with pytest.raises(LayoutError, match="no raw value column"):
        with_value_maps(load_preset("good_job"), {"x": "failed"})
    assert parse_value_map({"A": "failed"}) == {"A": "failed"}


BASE = """
[layout]
name = "t"
[operations]
table = "jobs"
key = ["k", "slot"]
"""


@pytest.mark.parametrize(
    "extra,msg",
    [
        ('key_required = ["slot"]\n', "needs key_fallback"),
        ('key_fallback = "id"\nkey_required = ["other"]\n', "names key columns"),
        ('status = { column = "s", null = "bogus" }\n', "null"),
        ('status = { column = "s", otherwise = "new" }\n', "unknown entries"),
        ('[operations.fields]\nrequest = { column = "r", unless = [{ column = "c", is_null = true }] }\n', "unless"),
        ('[operations.times]\nlocked_at = { column = "hb", unless = { column = "s", eq = "x" } }\n', "unless"),
        ('[operations.times]\nlocked_at = { column = "hb", until = "x" }\n', "unknown entries"),
    ],
)
def test_layout_additions_are_validated(extra, msg):
    with pytest.raises(LayoutError, match=msg):
        parse_layout(BASE + extra)


def test_layout_additions_parse():
    lay = parse_layout(
        BASE + 'key_fallback = "id"\nkey_required = ["slot"]\n'
        'status = { column = "s", map = { a = "new" }, null = "new", default = "failed" }\n'
        '[operations.fields]\nintent_ref = { column = "args", unless = [{ column = "cron", '
        "is_null = false }] }\n"
    )
    assert lay.key_required == ["slot"] and lay.status.null == "new" and lay.status.default == "failed"
    assert lay.fields["intent_ref"].unless[0].column == "cron"
    assert {"slot", "id", "cron"} <= lay.operations_columns()
    lay = parse_layout(
        BASE + '[operations.times]\nlock_expires_at = { column = "deadline", unless = '
        '[{ column = "state", ne = "deferred" }] }\n'
    )
    assert lay.times["lock_expires_at"].unless[0].op == "ne" and "state" in lay.operations_columns()
