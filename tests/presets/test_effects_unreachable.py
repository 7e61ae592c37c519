"""An ``[effects]`` database that cannot be opened (issue 16, found by a tester): the scan must not pass
quietly without the charges. Exit 3 with one line naming the layout, unless the section says
``optional = true``, in which case the effect kinds are listed as not checkable."""

from __future__ import annotations

import json

import pytest

from idemview.cli import main
from idemview.services.demo import write_demo
from idemview.services.demo_effects import effects_path_for, layout_path_for

NOW = "2026-11-30T12:00:00Z"


@pytest.fixture
def demo(tmp_path):
    p = tmp_path / "demo.db"
    write_demo(p)
    return p


def _scan(capsys, ledger, layout):
    code = main(["scan", str(ledger), "--layout", str(layout), "--now", NOW, "--format", "json"])
    out, err = capsys.readouterr()
    return code, out, err


def test_missing_effects_file_is_exit_3(demo, capsys):
    effects_path_for(demo).unlink()
    code, out, err = _scan(capsys, demo, layout_path_for(demo))
    assert code == 3 and out == ""
    assert err.count("\n") == 1 and "effects database" in err and "Traceback" not in err


def test_unreachable_effects_server_is_exit_3_without_its_password(demo, tmp_path, capsys):
    lay = tmp_path / "pg-effects.toml"
    text = layout_path_for(demo).read_text()
    # nothing listens on port 1: the effects server is down
    bad = "postgresql+psycopg://ops:Sekr3t-Pa55@127.0.0.1:1/payments"
    lay.write_text(text.replace(f'connection = "{effects_path_for(demo).name}"', f'connection = "{bad}"'))
    assert bad in lay.read_text()
    # a server written in a layout file is refused (exit 2) before anything connects, its password unsaid
    code, out, err = _scan(capsys, demo, lay)
    assert code == 2 and out == ""
    assert "Sekr3t" not in err and "Pa55" not in err and "names a database server" in err
    # the same server as the user's saved connection (password in the keyring), named in the layout
    from idemview.config import Connection, ConnectionStore, CredentialStore

    c = Connection(
        name="pay effects",
        dialect="postgresql",
        driver="psycopg",
        host="127.0.0.1",
        port=1,
        database="payments",
        user="ops",
    )
    ConnectionStore().upsert(c)
    CredentialStore().set(c.id, "Sekr3t-Pa55")
    lay.write_text(text.replace(f'connection = "{effects_path_for(demo).name}"', 'connection = "pay effects"'))
    code, out, err = _scan(capsys, demo, lay)
    assert code == 3 and out == ""
    assert "Sekr3t" not in err and "Pa55" not in err and "effects database" in err


def test_optional_effects_section_reports_not_checkable(demo, tmp_path, capsys):
    effects_path_for(demo).unlink()
    lay = tmp_path / "optional.toml"
    lay.write_text(layout_path_for(demo).read_text().replace("[effects]\n", "[effects]\noptional = true\n"))
    code, out, err = _scan(capsys, demo, lay)
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc["not_checkable"]) >= {"hidden_success", "orphan_effect"}
    assert all("cannot be opened" in doc["not_checkable"][k] for k in ("hidden_success", "orphan_effect"))
    assert not any(f["kind"] in ("hidden_success", "orphan_effect") for f in doc["findings"])


def test_export_effects_without_effects_is_a_usage_error(demo, tmp_path, capsys):
    """Found by a tester: it read "unexpected error: ValueError"."""
    code = main(["export", str(demo), "--layout", "idemview", "--rows", "effects", "--out", str(tmp_path / "x.csv")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "no effect records" in err and "unexpected" not in err
    assert not (tmp_path / "x.csv").exists()
