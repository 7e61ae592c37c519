"""Issue 20 §2 and issue 19 §16: Copy link carries the layout, the `now` of the findings and a saved
connection's name (never a password, never a path to someone else's home), and the command it gives
runs: its argv goes through the CLI parser, even for a key that starts with ``-``."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from idemview.domain.model import FindingKind
from tests.gui.conftest import open_and_wait, spec_for

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("propagateSizeHints"),
]


def _parse(link: str):
    from idemview.cli import build_parser

    words = shlex.split(link)
    assert words[0] == "idemview"
    return build_parser().parse_args(words[1:])


def test_a_demo_tabs_link_opens_the_same_layout_now_and_counts(qtbot, window, demo_db):
    path, planted = demo_db
    tab = open_and_wait(qtbot, window, spec_for(path))
    assert tab.ledger.effects is not None  # the demo's layout reconciles with its charges file
    scope, key = sorted(planted.incidents["duplicate_effect"])[0]
    tab.open_operation(scope, key)
    qtbot.waitUntil(lambda: tab.detail.detail is not None and tab.detail.detail.key_raw == key, timeout=20000)
    link = tab.copy_link()
    args = _parse(link)
    assert (args.command, args.url, args.key, args.scope) == ("open", str(path), key, scope)
    assert args.layout == str(spec_for(path).layout) and args.now == tab.findings.now
    assert "password" not in link.lower()
    # opened "elsewhere": a second window reads the link as `idemview open` passes it
    other = window.open_link(args.url, args.key, args.scope, layout=args.layout, schema=args.schema, now=args.now)
    qtbot.waitUntil(lambda: other.scan_complete() and other.detail.detail is not None, timeout=60000)
    assert other.ledger.layout.name == tab.ledger.layout.name
    assert other.findings.now == tab.findings.now
    assert other.findings.counts == tab.findings.counts
    # the demo's planted doubles (attempts and effect records), not another layout's fewer
    assert other.findings.counts[FindingKind.DUPLICATE_EFFECT] == len(planted.incidents["duplicate_effect"])
    assert FindingKind.HIDDEN_SUCCESS not in other.findings.unsupported
    assert other.findings.counts[FindingKind.HIDDEN_SUCCESS] >= 1
    assert other.ledger.effects is not None
    qtbot.waitUntil(lambda: other.detail.detail.key_raw == key and len(other.detail.detail.effects) >= 2, timeout=20000)


def test_a_key_starting_with_a_dash_gives_a_link_the_parser_reads():
    from idemview.services.session import OpenSpec, deep_link

    spec = OpenSpec(url="postgresql+psycopg://app:pw@db/x", name="x", layout="stripe")
    for key, scope in (("-rf", "-acme"), ("--key", "a b'c"), ("-", "")):
        args = _parse(deep_link(spec, scope, key))
        assert args.key == key and (args.scope or "") == scope and args.layout == "stripe"
        assert args.url == "postgresql+psycopg://app@db/x"


def test_a_path_under_home_is_written_for_the_readers_home(monkeypatch, tmp_path):
    from idemview.services.links import portable_path
    from idemview.services.session import OpenSpec, deep_link, spec_for_target

    monkeypatch.setenv("HOME", str(tmp_path))
    led = tmp_path / "ledgers" / "my ledger.db"
    led.parent.mkdir()
    led.write_bytes(b"")
    assert portable_path(str(led)) == "~/ledgers/my ledger.db"
    link = deep_link(OpenSpec(url=str(led), name="l", layout=str(tmp_path / "lay.toml")), "s", "k")
    assert str(tmp_path) not in link
    assert link.startswith("idemview open ~/")
    args = _parse(link)
    assert args.layout == "~/lay.toml"
    # the reader's shell expands ~/ ; a launcher that does not is expanded by idemview
    assert Path(spec_for_target(args.url).url) == led
