"""Issue #13 §5–§6: an export started from the window masks with the session's key (the tags in the file
are the tags on screen, the manifest says so and carries the sentence in the zone shown); the CLI keeps
a key per export."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from idemview.masking.masker import TAG_RE
from tests.gui.conftest import load_all, open_and_wait, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def _export(qtbot, window, out):
    window.export_done_box = None
    window.export_current()
    dlg = window.export_dialog
    dlg.path.setText(str(out))
    dlg.export_btn.click()
    qtbot.waitUntil(lambda: getattr(window, "export_done_box", None) is not None, timeout=60000)
    return json.loads(open(str(out) + ".manifest.json").read())


def test_gui_export_tags_match_the_screen(qtbot, window, demo_db, tmp_path):
    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    load_all(qtbot, tab)
    on_screen = set()
    for r in tab.model.rows():
        for v in (r.key, r.scope, r.intent):
            on_screen.update(TAG_RE.findall(v or ""))
    assert on_screen, "the demo should show masked values in the grid"
    window.zone_btn.setChecked(True)  # local times: the manifest keeps both sentences
    m = _export(qtbot, window, tmp_path / "all.csv")
    window.zone_btn.setChecked(False)
    text = (tmp_path / "all.csv").read_text(encoding="utf-8")
    in_file = set(TAG_RE.findall(text))
    assert on_screen <= in_file
    assert m["masking_key"]["scope"] == "session" and "screen" in m["masking_key"]["note"]
    assert m["filter"]["sentence"] == "All operations"
    assert m["filter"]["sentence_shown"] == "All operations"


def test_gui_export_sentence_shown_in_local_time(qtbot, window, demo_db, tmp_path):
    from datetime import timedelta

    from tests.gui.conftest import HOUR

    path, _ = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    since, until = HOUR - timedelta(hours=2), HOUR - timedelta(hours=1)
    tab.overview.select_window(since, until)
    qtbot.waitUntil(lambda: tab.flt.since == since, timeout=5000)
    window.zone_btn.setChecked(True)
    shown = tab.filterbar.sentence_text()
    assert "local" in shown
    local = since.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    assert local in shown
    m = _export(qtbot, window, tmp_path / "w.csv")
    window.zone_btn.setChecked(False)
    assert m["filter"]["sentence_shown"] == shown
    assert m["filter"]["sentence"].endswith("UTC") and since.strftime("%Y-%m-%d %H:%M:%S") in m["filter"]["sentence"]
    assert tab.filterbar.sentence_text() == m["filter"]["sentence"]


def test_cli_export_keeps_a_key_per_export(demo_db, tmp_path):
    path, _ = demo_db
    tags = []
    for name in ("a.csv", "b.csv"):
        out = tmp_path / name
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from idemview.cli import main; sys.exit(main())",
                "export",
                str(path),
                "--layout",
                "idemview",
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr
        m = json.loads((tmp_path / (name + ".manifest.json")).read_text())
        assert m["masking_key"]["scope"] == "export"
        with open(out, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        tags.append([t for row in rows for v in row.values() for t in TAG_RE.findall(v or "")])
    assert tags[0] and len(tags[0]) == len(tags[1]) and tags[0] != tags[1]
