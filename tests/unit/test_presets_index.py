"""docs/presets.md lists every shipped layout (issue 26: "docs/presets.md has its row"), and every page it
links to exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("presets", "kv_presets", "dynamodb_presets")


def shipped() -> set[str]:
    import tomllib

    names = set()
    for folder in FOLDERS:
        for f in (ROOT / "idemview" / "layouts" / folder).glob("*.toml"):
            names.add(tomllib.loads(f.read_text("utf-8"))["layout"]["name"])
    return names


def test_every_shipped_layout_has_a_row():
    text = (ROOT / "docs" / "presets.md").read_text("utf-8")
    rows = set(re.findall(r"^\| `([^`]+)` \|", text, re.M))
    assert len(shipped()) >= 40
    assert shipped() - rows == set()
    assert rows - shipped() == set()


def test_each_linked_page_exists():
    text = (ROOT / "docs" / "presets.md").read_text("utf-8")
    links = re.findall(r"\]\(([^)#]+)", text)
    assert links
    for link in links:
        assert (ROOT / "docs" / link).resolve().is_file(), link
