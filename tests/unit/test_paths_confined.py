"""What a file path may name, by construction (issue #19 items 3, 4, 5; ``idemview.paths``):

3. a path written in a layout stays in the layout file's folder;
4. no command writes over a ledger, an effects source, a layout or the saved connections, ``--force``
   or not (one write gate: ``paths.check_write_target``);
5. a FIFO, device or socket as a ledger (or layout) path is refused in one line, never opened.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from idemview.cli import main
from idemview.errors import EXIT_OK, EXIT_USAGE, TargetRefused
from idemview.ledger.effects import open_effects_engine
from idemview.paths import PathOutsideLayout, check_write_target, confined
from idemview.services.demo import write_demo

NOW = "2026-06-15T12:00:00Z"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def demo(tmp_path):
    """(ledger, effects db, layout) of a small demo in tmp/app/."""
    app = tmp_path / "app"
    app.mkdir()
    led = app / "prod.db"
    write_demo(led, operations=120, seed=5)
    return led, app / "prod-effects.db", app / "prod-layout.toml"


def _point_effects_at(layout: Path, connection: str) -> None:
    text = layout.read_text()
    lines = [f'connection = "{connection}"' if ln.startswith("connection = ") else ln for ln in text.splitlines()]
    layout.write_text("\n".join(lines) + "\n")


# ------------------------------------------------------------------------- item 3


@pytest.mark.parametrize(
    "connection",
    ["../otherapp/cookies.sqlite", "{other}", "sqlite:///../otherapp/cookies.sqlite", "sqlite:///{other}", "link.db"],
)
def test_layout_cannot_read_another_applications_file(demo, tmp_path, capsys, connection):
    led, fx, layout = demo
    other = tmp_path / "otherapp" / "cookies.sqlite"
    other.parent.mkdir()
    shutil.copy(fx, other)  # a readable database with the very table the layout asks for
    (layout.parent / "link.db").symlink_to(other)  # inside the folder by name, outside by target
    _point_effects_at(layout, connection.format(other=other))
    code = main(["scan", str(led), "--layout", str(layout), "--now", NOW, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE
    assert out == ""
    assert "leaves the layout's folder" in err and len(err.strip().splitlines()) == 1


def test_layout_may_name_a_file_beside_it(demo, capsys):
    led, fx, layout = demo
    sub = layout.parent / "data"
    sub.mkdir()
    shutil.copy(fx, sub / "charges.db")
    _point_effects_at(layout, "data/charges.db")
    assert main(["scan", str(led), "--layout", str(layout), "--now", NOW, "--format", "json"]) == EXIT_OK
    assert '"duplicate_effect"' in capsys.readouterr().out


def test_confined_rules(tmp_path):
    assert confined("a/b.db", tmp_path) == (tmp_path / "a" / "b.db").resolve()
    for bad in ("../x.db", "/etc/passwd", "a/../../x.db"):
        with pytest.raises(PathOutsideLayout):
            confined(bad, tmp_path)
    with pytest.raises(PathOutsideLayout):  # a layout that is not a file has no folder to name files in
        open_effects_engine(str(tmp_path / "x.db"), None)


# ------------------------------------------------------------------------- item 4


def test_export_never_replaces_the_effects_database(demo, capsys):
    led, fx, layout = demo
    before = fx.read_bytes()
    for out in (fx, layout, led):
        code = main(["export", str(led), "--layout", str(layout), "--now", NOW, "--out", str(out), "--force"])
        assert code == EXIT_USAGE, out
        assert "never writes over" in capsys.readouterr().err or out == led
    assert fx.read_bytes() == before
    assert layout.read_text().startswith("#")


def test_export_never_replaces_the_saved_connections(demo, tmp_path, capsys):
    from idemview.config import config_dir

    led, _fx, layout = demo
    conns = config_dir() / "connections.toml"
    conns.parent.mkdir(parents=True, exist_ok=True)
    conns.write_text("# my saved connections\n")
    code = main(["export", str(led), "--layout", str(layout), "--now", NOW, "--out", str(conns), "--force"])
    assert code == EXIT_USAGE
    assert conns.read_text() == "# my saved connections\n"
    assert "saved connections" in capsys.readouterr().err


def test_demo_never_replaces_a_users_layout_or_database(tmp_path, capsys):
    led = tmp_path / "prod.db"
    layout = tmp_path / "prod-layout.toml"
    layout.write_text('[layout]\nname = "mine"\n')
    assert main(["demo", str(led), "--operations", "50"]) == EXIT_USAGE
    assert layout.read_text() == '[layout]\nname = "mine"\n'
    assert not led.exists()
    assert "prod-layout.toml" in capsys.readouterr().err
    # --force replaces a demo ledger path only, never a real database beside it
    layout.unlink()
    fx = tmp_path / "prod-effects.db"
    import sqlite3

    with sqlite3.connect(fx) as c:
        c.execute("CREATE TABLE charges (id INTEGER)")
    c.close()
    before = fx.read_bytes()
    assert main(["demo", str(led), "--operations", "50", "--force"]) == EXIT_USAGE
    assert fx.read_bytes() == before
    # a demo replaces what an earlier demo wrote
    fx.unlink()
    assert main(["demo", str(led), "--operations", "50"]) == EXIT_OK
    assert main(["demo", str(led), "--operations", "60"]) == EXIT_OK


def test_demo_force_never_replaces_a_real_ledger(tmp_path):
    import sqlite3

    real = tmp_path / "orders.db"
    with sqlite3.connect(real) as c:
        c.execute("CREATE TABLE operations (k TEXT)")
    c.close()
    before = real.read_bytes()
    assert main(["demo", str(real), "--force"]) == EXIT_USAGE
    assert real.read_bytes() == before


def test_export_and_report_never_replace_a_hard_link_to_a_source(demo, tmp_path, capsys):
    """A hard link is the same file under another name: the gate compares files, not spellings."""
    from idemview.config import config_dir

    led, _fx, layout = demo
    conns = config_dir() / "connections.toml"
    conns.parent.mkdir(parents=True, exist_ok=True)
    conns.write_text("# my saved connections\n")
    links = {layout: tmp_path / "team-layout.toml", conns: tmp_path / "conns-copy.toml"}
    for src, link in links.items():
        os.link(src, link)
    before = {src: src.read_bytes() for src in links}
    for link in links.values():
        for cmd in ("export", "report"):
            code = main([cmd, str(led), "--layout", str(layout), "--now", NOW, "--out", str(link), "--force"])
            assert code == EXIT_USAGE, (cmd, link)
            assert "never writes over" in capsys.readouterr().err
            assert link.stat().st_nlink == 2  # still the same file, not a new one renamed over the name
    assert {src: src.read_bytes() for src in links} == before


def test_force_never_replaces_a_layout_this_process_did_not_load(demo, tmp_path, capsys):
    """A layout is refused by what it is (a TOML file with [operations]), not only when it was loaded:
    a scan with a preset or a detected layout may not write over the team's layout either."""
    led, _fx, layout = demo
    other = tmp_path / "billing-layout.toml"
    other.write_text(layout.read_text())
    for cmd in ("export", "report"):
        assert main([cmd, str(led), "--now", NOW, "--out", str(other), "--force"]) == EXIT_USAGE
        assert "is an idemview layout" in capsys.readouterr().err
    assert other.read_text() == layout.read_text()
    # a TOML file that is no layout is the user's to replace with --force
    plain = tmp_path / "notes.toml"
    plain.write_text('title = "x"\n')
    assert check_write_target(plain, overwrite=True) == plain


def test_write_gate_allows_a_plain_file(tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("old")
    with pytest.raises(TargetRefused):
        check_write_target(tmp_path / "nope" / "x.csv")
    assert check_write_target(out, overwrite=True) == out


# ------------------------------------------------------------------------- item 5


def _run(*args: str) -> subprocess.CompletedProcess:
    # a subprocess: a blocked open() would hang this test run instead of failing it
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "idemview", *args], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_fifo_ledger_is_refused(tmp_path):
    fifo = tmp_path / "ledger.db"
    os.mkfifo(fifo)
    for args in (
        ["scan", str(fifo)],
        ["detect", f"sqlite:///{fifo}"],
        ["export", str(fifo), "--out", str(tmp_path / "x.csv")],
    ):
        r = _run(*args)
        assert r.returncode == EXIT_USAGE, (args, r.stderr)
        assert "FIFO" in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert r.stdout == ""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_fifo_layout_and_socket_and_device_are_refused(tmp_path, sqlite_db):
    _eng, path = sqlite_db
    _eng.connect().close()
    fifo = tmp_path / "layout.toml"
    os.mkfifo(fifo)
    r = _run("scan", path, "--layout", str(fifo))
    assert r.returncode == EXIT_USAGE and "FIFO" in r.stderr
    sock_path = tmp_path / "s.db"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock_path))
    try:
        r = _run("scan", str(sock_path))
        assert r.returncode == EXIT_USAGE and "socket" in r.stderr
    finally:
        s.close()
    r = _run("scan", "sqlite:////dev/null")
    assert r.returncode == EXIT_USAGE and "character device" in r.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_fifo_link_in_the_gui_session_is_refused(tmp_path):
    """The GUI's ``idemview open`` link runs services.session.open_ledger on a worker: the same refusal."""
    from idemview.paths import NotARegularFile
    from idemview.services.cancel import CancelToken
    from idemview.services.session import open_ledger, spec_for_target

    fifo = tmp_path / "ledger.sqlite"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFile):
        open_ledger(spec_for_target(str(fifo)), CancelToken())


@pytest.mark.postgres
def test_layout_cannot_choose_a_database_server_a_saved_connection_can(demo, pg_url, capsys):
    """A server URL written in a layout file would be opened with the user's own credentials (keyring,
    ~/.pgpass): refused before anything connects. The user's saved connection, named in the layout, is
    the way to point a shared layout at a server (found by a tester after issue #19 landed)."""
    from sqlalchemy import MetaData, create_engine, insert, select
    from sqlalchemy.engine import make_url

    from idemview.config import Connection, ConnectionStore

    led, fx, layout = demo
    src, dst = create_engine(f"sqlite:///{fx}"), create_engine(pg_url)
    md = MetaData()
    md.reflect(src)
    md.drop_all(dst)
    md.create_all(dst)
    with src.connect() as a, dst.begin() as b:
        for t in md.sorted_tables:
            rows = [dict(r._mapping) for r in a.execute(select(t))]
            if rows:
                b.execute(insert(t), rows)
    src.dispose()
    dst.dispose()
    _point_effects_at(layout, pg_url)
    code = main(["scan", str(led), "--layout", str(layout), "--now", NOW, "--format", "json"])
    out, err = capsys.readouterr()
    assert (code, out) == (EXIT_USAGE, "")
    assert "names a database server" in err and len(err.strip().splitlines()) == 1
    u = make_url(pg_url)
    ConnectionStore().upsert(
        Connection(
            name="team charges",
            dialect="postgresql",
            driver="psycopg",
            host=u.host or "",
            port=u.port,
            database=u.database or "",
            user=u.username or "",
        )
    )
    _point_effects_at(layout, "team charges")
    assert main(["scan", str(led), "--layout", str(layout), "--now", NOW, "--format", "json"]) == EXIT_OK
    assert '"duplicate_effect"' in capsys.readouterr().out
