"""A CSV dump without its header row: DuckDB reads its first row as the column names, so the "layout does
not fit" message (exit 4) used to list that row's values as the columns the table has. A CSV whose column
names include a value (a number, an ISO date or time, a UUID) is said to seem headerless instead, and no
name of it is printed."""

from __future__ import annotations

import pytest

from idemview.cli import main
from idemview.ledger.dumps import looks_like_value

ROWS = (
    "1,a4f1b2c3-0000-4000-8000-000000000001,SUCCESS,2026-11-30T12:00:00Z\n"
    "2,b4f1b2c3-0000-4000-8000-000000000002,FAILURE,2026-11-30T12:01:00Z\n"
)


def test_a_headerless_csv_is_said_and_its_values_are_not_printed(tmp_path, capsys):
    f = tmp_path / "celery_taskmeta.csv"
    f.write_text(ROWS)
    assert main(["scan", str(f), "--layout", "celery"]) == 4
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "table celery_taskmeta has no column date_done, id, result, status, task_id, traceback" in err
    assert "this CSV seems to have no header row" in err
    for value in ("a4f1b2c3", "SUCCESS", "2026-11-30", "it has: 1"):
        assert value not in err, err


def test_a_csv_with_a_header_still_lists_its_columns(tmp_path, capsys):
    f = tmp_path / "celery_taskmeta.csv"
    f.write_text("row_no,uuid,state,finished\n" + ROWS)
    assert main(["scan", str(f), "--layout", "celery"]) == 4
    err = capsys.readouterr().err
    assert "(it has: finished, row_no, state, uuid)" in err and "no header row" not in err


@pytest.mark.parametrize(
    "name",
    [
        "1",
        "-3.5",
        "1e5",
        "2026-11-30",
        "2026-11-30 12:00:00.123+00:00",
        "2026-11-30T12:00Z",
        "12:00:01",
        "A4F1B2C3-0000-4000-8000-000000000001",
    ],
)
def test_values_a_header_would_not_hold(name):
    assert looks_like_value(name)


@pytest.mark.parametrize("name", ["id", "status", "date_done", "column0", "2024_total", "v1", "e", "-"])
def test_column_names(name):
    assert not looks_like_value(name)
