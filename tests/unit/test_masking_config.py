"""The ``[masking]`` table of the settings file applies everywhere a Masker is made (issue 19 item 9):
CLI scan and export, the Python API, the GUI's session masker, the findings process, messages and logs;
the export manifest lists it. One factory (``idemview.config.new_masker``) makes every Masker."""

from __future__ import annotations

import ast
import json
import logging
import os
from pathlib import Path

import pytest

from idemview.cli import main
from idemview.config import config_dir, masking_rules, new_masker
from idemview.masking.masker import MaskingLogFilter, mask_message

NOW = "2026-11-30T12:00:00Z"
SETTINGS = """
[masking]
fields = ["member_no", {name = "tax_ref", kind = "tax_id", credential = false}]
patterns = [{kind = "acme_key", regex = "acme_[a-z0-9]{16}"}]
"""
ACME = "acme_0123456789abcdef"


@pytest.fixture
def settings():
    p = config_dir() / "settings.toml"
    p.write_text(SETTINGS, encoding="utf-8")
    return p


def test_factory_applies_the_settings(settings):
    m = new_masker()
    out = m.mask_value({"member_no": 1234, "tax_ref": "DE-99", "note": f"key {ACME}"})
    assert out["member_no"].startswith("[sensitive#") and out["tax_ref"].startswith("[tax_id#")
    assert ACME not in out["note"] and "[acme_key#" in out["note"]
    assert m.rules.describe()["settings"] == {
        "file": str(settings),
        "masking": {
            "fields": ["member_no", {"name": "tax_ref", "kind": "tax_id", "credential": False}],
            "patterns": [{"kind": "acme_key", "regex": "acme_[a-z0-9]{16}"}],
        },
    }
    # messages and logs: the process-wide message masker follows the settings
    assert ACME not in mask_message(f"upstream said {ACME}")
    rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed with %s", (ACME,), None)
    MaskingLogFilter().filter(rec)
    assert ACME not in rec.getMessage() and "[acme_key#" in rec.getMessage()


def test_settings_change_is_picked_up_and_absence_means_defaults(settings):
    assert masking_rules().source == str(settings)
    settings.unlink()
    assert masking_rules().source == "" and "member_no" not in masking_rules().extra_fields
    assert new_masker().mask_value({"member_no": 5}) == {"member_no": 5}


def test_export_and_manifest_and_api_and_gui(settings, tmp_path, capsys):
    import sqlite3

    db = tmp_path / "l.db"
    assert main(["demo", str(db)]) == 0
    c = sqlite3.connect(db)
    c.execute("UPDATE operations SET error=? WHERE rowid=(SELECT min(rowid) FROM operations)", (f"boom {ACME}",))
    c.commit()
    c.close()
    out = tmp_path / "ev.csv"
    assert main(["export", str(db), "--out", str(out), "--now", NOW]) == 0
    assert ACME not in out.read_text("utf-8") and "[acme_key#" in out.read_text("utf-8")
    man = json.loads(Path(str(out) + ".manifest.json").read_text("utf-8"))
    assert man["masking"]["rules"]["settings"]["file"] == str(settings)
    assert man["masking"]["counts"]["acme_key"] == 1
    capsys.readouterr()

    import idemview

    ops = idemview.open(str(db)).operations()
    assert not ops["error"].dropna().str.contains(ACME).any()
    assert ops["error"].dropna().str.contains(r"\[acme_key#", regex=True).any()

    from idemview.services.session import SharedMasker

    gui = SharedMasker()
    assert ACME not in gui.text(f"x {ACME}") and ACME not in gui.free_text(f"x {ACME}")
    assert "[acme_key#" in gui.export_masker().mask_text(ACME)


def test_bad_settings_are_one_line_exit_2(tmp_path, capsys):
    (config_dir() / "settings.toml").write_text('[masking]\npatterns = [{kind = "x", regex = "("}]\n')
    db = tmp_path / "l.db"
    assert main(["demo", str(db)]) == 0
    capsys.readouterr()
    assert main(["export", str(db), "--out", str(tmp_path / "e.csv"), "--now", NOW]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "settings.toml" in err and "invalid regex" in err
    (config_dir() / "settings.toml").write_text('[masking]\ndisable = ["named_value"]\n')
    assert main(["scan", str(db), "--now", NOW]) == 2
    assert "cannot be disabled" in capsys.readouterr().err


def test_every_masker_is_made_by_the_factory():
    """No module outside the masking layer and the factory constructs a Masker itself."""
    root = Path(__file__).resolve().parents[2] / "idemview"
    offenders = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("masking/") or rel == "config.py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name == "Masker":
                    offenders.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.keyword) and node.arg == "default_factory":
                v = node.value
                if isinstance(v, ast.Name) and v.id == "Masker":
                    offenders.append(f"{rel}:{node.lineno}")
    assert offenders == [], offenders
    assert os.path.exists(root / "config.py")
