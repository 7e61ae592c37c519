"""benchmarks/render_report.py: BENCHMARKS.md from a results folder of `make bench` (no timing asserted).

A folder with a finished step (scan: one target met, one missed), a failed step (effects: exit 1), a
timed-out step (redis), a step that wrote no JSON (gui_sqlite) and steps never run must render ✓, ✗ and
"not measured" per target, the maintained explanation of each miss, and the reason of each absent figure.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rr():
    spec = importlib.util.spec_from_file_location("render_report", ROOT / "benchmarks" / "render_report.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["render_report"] = mod  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules["render_report"]
        raise
    return mod


def _step(sid: str, rc: int | None = 0, timed_out: bool = False, err: str = "") -> dict:
    return {
        "id": sid,
        "title": f"Title of {sid}",
        "command": f"python benchmarks/{sid}.py --json {sid}.json",
        "json": f"{sid}.json",
        "estimate_s": 10,
        "timeout_s": 60,
        "load_start": [1.5, 1.0, 0.5],
        "start": "2026-12-05T00:00:00+00:00",
        "end": "2026-12-05T00:01:00+00:00",
        "wall_s": 60.0,
        "cpu_s": 50.0,
        "exit_code": rc,
        "timed_out": timed_out,
        "load_end": [2.5, 1.0, 0.5],
        "stderr_tail": err,
    }


def _scan(preset: str, engine: str, scan_s: float, floor_s: float) -> dict:
    return {
        "preset": preset,
        "engine": engine,
        "rows": 2_000_000,
        "scan": {"s": scan_s, "rc": 0, "rss_mb": 180.0, "err": ""},
        "floor": {"s": floor_s, "rc": 0, "rss_mb": 30.0, "err": ""},
        "keys_equal": "yes",
        "counts": {"retry_storm": 1000, "expired_key": 4000},
    }


@pytest.fixture
def results(tmp_path: Path) -> Path:
    steps = [
        _step("scan"),
        _step("effects", rc=1, err="Traceback (most recent call last):\nRuntimeError: effects boom"),
        _step("redis", rc=-9, timed_out=True, err="populating keys"),
        _step("gui_sqlite", rc=0),  # exit 0 but no JSON written
    ]
    run = {
        "started": "2026-12-05T00:00:00+00:00",
        "ended": "2026-12-05T00:04:00+00:00",
        "quick": False,
        "machine": {"cores": 2, "commit": "abc1234", "branch": "bench4", "platform": "Linux", "python": "3.11"},
        "load_start": [1.5, 1.0, 0.5],
        "load_end": [2.5, 1.0, 0.5],
        "duration_s": 240.0,
        "estimate_s": 2000,
        "planned": ["scan", "effects", "redis", "gui_sqlite", "export"],
        "steps": steps,
    }
    (tmp_path / "run.json").write_text(json.dumps(run))
    scans = [_scan("celery", "sqlite", 3.0, 2.0), _scan("celery", "postgresql", 13.0, 2.0)]
    (tmp_path / "scan.json").write_text(json.dumps({"scans": scans, "exports": []}))
    (tmp_path / "effects.json").write_text("{not json")  # a failed step's unreadable file counts as absent
    return tmp_path


def _row(md: str, title: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| {title} |"))


def test_targets_marked_met_missed_and_not_measured_with_explanations(rr, results: Path, tmp_path: Path):
    expl = tmp_path / "explanations.md"
    expl.write_text(
        "# intro\n\n## scan_celery_postgresql\n\nThe floor asks less: PG-EXPLANATION-TEXT.\n\n"
        "## scan_celery_sqlite\n\nSQLITE-TEXT (met here, so not shown).\n"
    )
    md = rr.render(rr.load(results), rr.explanations(expl))

    ok = _row(md, "scan ≤ 2× floor: celery, SQLite")
    assert "celery 2M, sqlite" in ok and "1.50× of ≤ 2×" in ok and ok.endswith("| ✓ |")
    miss = _row(md, "scan ≤ 2× floor: celery, PostgreSQL")
    assert "6.50× of ≤ 2×" in miss and miss.endswith("| ✗ |")
    for title in (
        "scan ≤ 2× floor: idemview, SQLite",
        "Redis 1M keys: snapshot + scan ≤ 20 s",
        "GUI first rows ≤ 0.5 s",
    ):
        assert _row(md, title).endswith("| not measured |")

    notes = md.split("### Misses and absent figures, explained", 1)[1].split("\n## ", 1)[0]
    assert "PG-EXPLANATION-TEXT" in notes  # the miss's maintained explanation is placed under the table
    assert "SQLITE-TEXT" not in md  # a met target's text is not
    assert "step `effects` failed (exit 1)" in notes and "RuntimeError: effects boom" in notes
    assert "step `redis` timed out after 60 s" in notes and "populating keys" in notes
    assert "step `gui_sqlite` wrote no results" in notes
    assert "step `cells_doc` was not run" in notes
    assert "step `export` did not finish (the run stopped)" in notes
    # the run's header and one section per step, generated from the JSON
    assert "`abc1234`" in md and "4.0 min" in md and "1.5/1/0.5" in md
    assert "## Title of scan (`scan`)" in md and "| celery | postgresql | 2M | 13.00 |" in md
    assert "No results written." in md.split("(`effects`)", 1)[1]


def test_a_miss_without_a_written_explanation_says_so(rr, results: Path, tmp_path: Path):
    md = rr.render(rr.load(results), rr.explanations(tmp_path / "absent.md"))
    notes = md.split("### Misses and absent figures, explained", 1)[1]
    assert "add a `## scan_celery_postgresql` section" in notes


def test_unknown_result_shapes_are_listed_not_dropped(rr, results: Path):
    (results / "gui_sqlite.json").write_text(json.dumps({"first_rows_s": 0.8, "new_figure_mb": 12.5}))
    md = rr.render(rr.load(results), {})
    assert "| new_figure_mb | 12.5 |" in md
    row = _row(md, "GUI first rows ≤ 0.5 s")
    assert "0.80 s" in row and row.endswith("| ✗ |")
    assert _row(md, "GUI + findings process ≤ 500 MB").endswith("| not measured |")


def test_main_writes_the_report_and_refuses_a_folder_without_run_json(rr, results: Path, tmp_path: Path):
    out = tmp_path / "B.md"
    assert rr.main([str(results), "--out", str(out), "--explanations", str(tmp_path / "none.md")]) == 0
    assert out.read_text().startswith("# idemview benchmarks")
    assert rr.main([str(tmp_path / "nowhere"), "--out", str(out)]) == 2


def test_gui_memory_is_the_sum_at_one_instant_and_repeats_report_the_worst(rr, results: Path):
    one = {"peak_rss_mb": 300.0, "peak_rss_scan_process_mb": 250.0, "rss_sum_peak_mb": 480.0, "ledger_rows": 2_000_000}
    (results / "gui_sqlite.json").write_text(json.dumps(one))
    md = rr.render(rr.load(results), {})
    row = _row(md, "GUI + findings process ≤ 500 MB")
    assert "Celery 2M, sqlite" in row and "480 MB (sum at one instant)" in row and row.endswith("| ✓ |")
    del one["rss_sum_peak_mb"]  # an older gui_stall.py: each process's own peak, summed
    (results / "gui_sqlite.json").write_text(json.dumps(one))
    row = _row(rr.render(rr.load(results), {}), "GUI + findings process ≤ 500 MB")
    assert "300 + 250 = 550 MB" in row and row.endswith("| ✗ |")

    runs = [
        {"engine": "sqlite", "rows": 2_000_000, "first_rows_s": 0.4},
        {"engine": "postgresql", "rows": 2_000_000, "first_rows_s": 9.0},
        {"engine": "sqlite", "rows": 2_000_000, "first_rows_s": 0.45},
    ]
    (results / "gui_sqlite.json").write_text(json.dumps({"runs": runs}))
    row = _row(rr.render(rr.load(results), {}), "GUI first rows ≤ 0.5 s")
    assert "0.45 s, worst of 2 runs" in row and row.endswith("| ✓ |")
