"""Every value a user gives is validated up front by one parser per kind (issue #19 items 13, 18;
``idemview.ledger.inputs``): the CLI exits 2 with one line and prints nothing else; the Python API
takes what the CLI takes (ISO text, datetime, pandas.Timestamp) and raises TypeError for the rest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import idemview
from idemview.cli import main
from idemview.errors import EXIT_USAGE, InputError
from idemview.ledger.inputs import MAX_COUNT, MAX_SECONDS, count_value, instant_value, seconds_value
from idemview.services.demo import write_demo

NOW = "2026-06-15T12:00:00Z"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    p = tmp_path_factory.mktemp("args") / "demo.db"
    write_demo(p, operations=120, seed=2)
    return str(p)


BAD = [
    ["--now", "0001-01-01T00:00:00+01:00"],
    ["--now", "9999-12-31T23:30:00-01:00"],
    ["--now", "1969-07-20T20:17:00Z"],
    ["--now", "nan"],
    ["--now", ""],
    ["--retry-threshold", "1e23"],
    ["--retry-threshold", "100000000000000000000000"],
    ["--retry-threshold", "-1"],
    ["--lock-timeout", "1e300"],
    ["--lock-timeout", "NaN"],
    ["--lock-timeout", "inf"],
    ["--lock-timeout", "-0.5"],
    ["--retention", "1e30"],
    ["--timeout", "-inf"],
]


@pytest.mark.parametrize("command", ["scan", "export"])
@pytest.mark.parametrize("bad", BAD, ids=lambda b: " ".join(b))
def test_bad_argument_exit_2_one_line_nothing_else(demo_db, tmp_path, capsys, command, bad):
    argv = [command, demo_db, *bad]
    if command == "export":
        argv += ["--out", str(tmp_path / "x.csv")]
    with pytest.raises(SystemExit) as ei:
        main(argv)
    out, err = capsys.readouterr()
    assert ei.value.code == EXIT_USAGE
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and bad[0] in err
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("flag", ["--since", "--until"])
@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-05:00", "yesterday"])
def test_export_time_bounds_validated(demo_db, tmp_path, capsys, flag, value):
    with pytest.raises(SystemExit) as ei:
        main(["export", demo_db, "--out", str(tmp_path / "x.csv"), flag, value])
    assert ei.value.code == EXIT_USAGE
    assert capsys.readouterr().out == ""
    assert not (tmp_path / "x.csv").exists()


def test_limits_at_the_edge_are_accepted(demo_db, capsys):
    args = ["scan", demo_db, "--now", NOW, "--format", "json", "--lock-timeout", str(MAX_SECONDS)]
    assert main([*args, "--retry-threshold", str(MAX_COUNT)]) == 0
    assert capsys.readouterr().out.startswith("{")


@given(st.floats(allow_nan=True, allow_infinity=True))
@settings(max_examples=200, deadline=None)
def test_seconds_parser_total(x):
    try:
        v = seconds_value(repr(x))
    except InputError:
        assert not (0 <= x <= MAX_SECONDS)
    else:
        assert v == x and 0 <= v <= MAX_SECONDS


@given(st.integers())
@settings(max_examples=200, deadline=None)
def test_count_parser_total(n):
    try:
        assert count_value(str(n)) == n
    except InputError:
        assert not 0 <= n <= MAX_COUNT


@given(st.datetimes(timezones=st.timezones()))
@settings(max_examples=200, deadline=None)
def test_instant_parser_total(t):
    """Every aware datetime and its ISO text: the same UTC instant, or InputError — never OverflowError."""
    try:
        u = instant_value(t.isoformat())
    except InputError:
        with pytest.raises(InputError):
            instant_value(t)
        return
    assert u == datetime.fromisoformat(t.isoformat()) and u.tzinfo is UTC
    assert instant_value(t) == t.astimezone(UTC)


# -------------------------------------------------------------------------- item 18: the API


def test_api_takes_what_the_cli_takes(demo_db):
    led = idemview.open(demo_db)
    base = led.findings(now=datetime(2026, 6, 15, 12, tzinfo=UTC))
    assert len(base) > 0
    for now in (
        NOW,
        "2026-06-15T12:00:00",  # naive text: UTC, as on the command line
        "2026-06-15T14:00:00+02:00",
        pd.Timestamp("2026-06-15T12:00:00Z"),
        pd.Timestamp("2026-06-15 07:00", tz="US/Eastern") + pd.Timedelta(hours=1),
        datetime(2026, 6, 15, 13, tzinfo=timezone(timedelta(hours=1))),
    ):
        got = led.findings(now=now)
        assert got[["kind", "idempotency_key"]].equals(base[["kind", "idempotency_key"]]), now
    ops = led.operations({"since": "2020-01-01T00:00:00Z", "until": pd.Timestamp("2030-01-01", tz="UTC")}, now=NOW)
    same = led.operations(
        {"since": datetime(2020, 1, 1, tzinfo=UTC), "until": datetime(2030, 1, 1, tzinfo=UTC)}, now=NOW
    )
    assert 0 < len(ops) == len(same)


@pytest.mark.parametrize("bad", [12345, 1.7e9, b"2026-06-15", [NOW], pd.Timedelta(1), object()])
def test_api_refuses_other_types_with_type_error(demo_db, bad):
    led = idemview.open(demo_db)
    with pytest.raises(TypeError, match="ISO-8601 string, a datetime or a pandas.Timestamp"):
        led.findings(now=bad)


@pytest.mark.parametrize(
    "bad", ["0001-01-01T00:00:00+01:00", "not a time", datetime(2026, 6, 15), pd.NaT, pd.Timestamp("2026-06-15")]
)
def test_api_refuses_bad_instants_with_input_error(demo_db, bad):
    led = idemview.open(demo_db)
    with pytest.raises(InputError):
        led.findings(now=bad)
