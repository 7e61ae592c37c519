"""The command-line contract of DESIGN §9: commands, JSON shape, exit codes, one-line errors."""

import json
import sqlite3
import subprocess
import sys

import pytest

from idemview.cli import main

ANCHOR = "2026-11-30T12:00:00Z"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    assert main(["demo", str(path), "--operations", "400", "--seed", "9"]) == 0
    return path


def planted(path):
    with sqlite3.connect(path) as c:
        return {
            (k, s, key) for k, s, key in c.execute("SELECT kind, scope, idempotency_key FROM idemview_demo_planted")
        }


def test_presets_lists_the_core_presets(capsys):
    code, out, _ = run(capsys, "presets")
    assert code == 0
    names = {line.split()[0] for line in out.splitlines()}
    assert {"idemview", "stripe-style", "powertools-sql", "celery"} <= names


def test_detect_the_demo(capsys, demo):
    code, out, _ = run(capsys, "detect", str(demo))
    assert code == 0
    assert out.split("\t")[0] == "idemview"
    assert "confidence 1.00" in out


def test_scan_json_reports_exactly_the_planted_incidents(capsys, demo):
    code, out, err = run(capsys, "scan", str(demo), "--now", ANCHOR, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    # DESIGN §9's keys, plus "unmapped" (issue 12), "not_checkable" (kind -> why; issue 11) and
    # "unknown_times" (stored times that are no instant, per field; issue 19)
    assert set(doc) == {
        "now",
        "layout",
        "operations",
        "attempts",
        "counts",
        "unmapped",
        "unknown_times",
        "findings",
        "not_checkable",
    }
    assert doc["unmapped"] == {"status": {}, "outcome": {}}
    assert doc["unknown_times"] == {}
    assert set(doc["not_checkable"]) == {"hidden_success", "orphan_effect"}  # the demo has no [effects]
    assert all("[effects]" in why for why in doc["not_checkable"].values())
    assert doc["now"] == ANCHOR and doc["layout"] == "idemview"
    # ordinary + planted records (4 of them doubles by action class, 3 payments a hidden success charged)
    assert doc["operations"] == 400 + 36
    # ledger findings (secret_at_rest) have null scope and key and name their column (DESIGN §9)
    assert all((f["scope"], f["key"]) == (None, None) and f["column"] for f in doc["findings"] if "column" in f)
    got = {(f["kind"], f["scope"] or "", f["key"] or "") for f in doc["findings"]}
    assert got == planted(demo)
    assert sum(doc["counts"].values()) == len(doc["findings"])
    f0 = doc["findings"][0]
    assert set(f0) == {"kind", "severity", "action", "scope", "key", "explanation", "evidence"}
    assert {f["action"] for f in doc["findings"] if f["kind"] == "duplicate_effect"} == {
        "money",
        "notification",
        "access",
        "read",
    }


def test_scan_json_is_masked(capsys, demo):
    code, out, _ = run(capsys, "scan", str(demo), "--now", ANCHOR, "--format", "json")
    assert "@example.com" not in out and "sk_live_" not in out and "4242424242424242" not in out


def test_scan_text_is_readable(capsys, demo):
    code, out, _ = run(capsys, "scan", str(demo), "--now", ANCHOR)
    assert code == 0
    assert "with layout idemview" in out
    assert "duplicate_effect (10)" in out
    assert "[critical · money] The operation with key" in out
    assert "[low · read] The operation with key" in out


def test_bad_url_is_a_usage_error(capsys):
    code, out, err = run(capsys, "scan", "postgresql://:@:x/y")
    assert code == 2
    assert err.startswith("idemview: ") and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_unreachable_server_exit_3_without_password(capsys):
    code, out, err = run(capsys, "scan", "postgresql://bob:hunter2-secret@127.0.0.1:1/ledger")
    assert code == 3
    assert "hunter2-secret" not in err and "bob" not in err
    assert "cannot connect" in err and len(err.strip().splitlines()) == 1


def test_layout_that_does_not_fit_exit_4(capsys, demo):
    code, out, err = run(capsys, "scan", str(demo), "--layout", "celery")
    assert code == 4
    assert "celery_taskmeta" in err


def test_layout_file_with_missing_column_exit_4(capsys, demo, tmp_path):
    from importlib import resources

    text = (resources.files("idemview.layouts.presets") / "idemview.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('fingerprint = "request_hash"', 'fingerprint = "req_digest"'))
    code, out, err = run(capsys, "scan", str(demo), "--layout", str(bad))
    assert code == 4
    assert "req_digest" in err


def test_malformed_layout_exit_2(capsys, demo, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[layout]\nname = 'x'\n[operations]\n")
    code, out, err = run(capsys, "scan", str(demo), "--layout", str(bad))
    assert code == 2
    assert "[operations] table is required" in err


def test_bad_now_exit_2(capsys, demo):
    with pytest.raises(SystemExit) as ei:
        main(["scan", str(demo), "--now", "yesterday"])
    assert ei.value.code == 2
    assert "not an ISO-8601 instant" in capsys.readouterr().err


def test_unrelated_database_exit_4(capsys, tmp_path):
    p = tmp_path / "other.db"
    with sqlite3.connect(p) as c:
        c.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    code, out, err = run(capsys, "detect", str(p))
    assert code == 4 and "no preset fits" in err
    code, out, err = run(capsys, "scan", str(p))
    assert code == 4


def test_console_script_runs(demo):
    """The installed entry point behaves like main() (no traceback on errors)."""
    r = subprocess.run(
        [sys.executable, "-m", "idemview.cli", "scan", str(demo), "--layout", "nope"], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert "no preset named 'nope'" in r.stderr and "Traceback" not in r.stderr
