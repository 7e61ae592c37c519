"""SSH tunnels (issue 23 item 1, DESIGN §5.3): a real sshd on loopback in front of the real PostgreSQL,
MariaDB (under both dialect names) and Redis. The same scan JSON through the tunnel as direct; host keys
checked against ~/.ssh/known_hosts (unknown or changed: refused, exit 3, the host named, the file left
alone); a wrong key or an unreachable bastion: one line, exit 3, no secret; a key passphrase from the
keyring; the tunnel closed when the command (or the API ledger) closes."""

from __future__ import annotations

import json
import socket

import keyring
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from idemview.cli import main
from idemview.config import Connection, ConnectionStore
from idemview.ledger import tunnel as tunnel_mod
from idemview.ledger.connect import open_engine, session_is_read_only
from idemview.services.demo import generate
from tests.conftest import ANCHOR, _clear
from tests.sshd import PASSPHRASE

NOW = "2026-11-30T12:00:00Z"


@pytest.fixture(scope="module", params=["postgresql+psycopg", "mariadb+pymysql", "mysql+pymysql"])
def server_url(request):
    """URL (with that dialect name) of a small reference ledger on the server, as seen from the SSH host."""
    name = request.param
    base = request.getfixturevalue("pg_url" if name.startswith("postgresql") else "mysql_url")
    w = create_engine(base)
    _clear(w)
    generate(w, operations=150, anchor=ANCHOR)
    w.dispose()
    return make_url(base).set(drivername=name).render_as_string(hide_password=False)


@pytest.fixture
def opened(monkeypatch):
    """Every tunnel the code under test opens (the real :func:`open_tunnel`, recorded)."""
    seen: list[tunnel_mod.Tunnel] = []
    real = tunnel_mod.open_tunnel

    def recording(*a, **kw):
        t = real(*a, **kw)
        seen.append(t)
        return t

    monkeypatch.setattr(tunnel_mod, "open_tunnel", recording)
    return seen


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_scan_json_through_the_tunnel_is_the_direct_one(capsys, sshd, ssh_home, server_url, opened):
    code, direct, _ = run(capsys, "scan", server_url, "--format", "json", "--now", NOW)
    assert code == 0
    code, tunnelled, err = run(
        capsys, "scan", server_url, "--format", "json", "--now", NOW, "--ssh", sshd.spec, "--ssh-key", str(sshd.key)
    )
    assert code == 0, err
    assert json.loads(tunnelled) == json.loads(direct)
    assert json.loads(direct)["operations"] > 150  # the planted incidents on top of the ordinary ones
    # the one tunnel went to the database's host and port as the SSH host sees them, and is closed now
    assert len(opened) == 1
    t = opened[0]
    u = make_url(server_url)
    assert (t.remote_host, t.remote_port) == (u.host, u.port or (5432 if "postgresql" in server_url else 3306))
    assert not t.is_open and not listening(t.local_port)
    assert not tunnel_mod._OPEN


def test_the_read_only_chokepoint_holds_through_the_tunnel(sshd, ssh_home, server_url):
    spec = tunnel_mod.SshSpec.parse(sshd.spec, str(sshd.key))
    url, t = tunnel_mod.tunnel_target(make_url(server_url), spec)
    try:
        assert (url.host, url.port) == ("127.0.0.1", t.local_port) and listening(t.local_port)
        eng = open_engine(url)
        try:
            assert session_is_read_only(eng)
            with eng.connect() as c, pytest.raises(Exception, match="(?i)read.only"):
                c.execute(text("CREATE TABLE idemview_tunnel_write (x int)"))
        finally:
            eng.dispose()
    finally:
        t.close()
    assert not listening(t.local_port)


@pytest.mark.parametrize("changed", [False, True], ids=["unknown", "changed"])
def test_host_key_not_known_is_refused(capsys, sshd, ssh_home, server_url, changed):
    known = sshd.write_home(ssh_home, known=changed, changed=changed) / ".ssh" / "known_hosts"
    before = known.read_bytes()
    code, out, err = run(capsys, "detect", server_url, "--ssh", sshd.spec, "--ssh-key", str(sshd.key))
    assert code == 3 and out == ""
    line = one_line(err)
    assert f"[127.0.0.1]:{sshd.port}" in line and "refused" in line
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1" in line  # what to do
    if changed:
        assert "other than the one" in line and f"ssh-keygen -R [127.0.0.1]:{sshd.port}" in line
    else:
        assert "is not in" in line
    assert known.read_bytes() == before  # never accepted silently


def test_wrong_key_is_one_line_exit_3(capsys, sshd, ssh_home, server_url):
    code, _out, err = run(capsys, "scan", server_url, "--ssh", sshd.spec, "--ssh-key", str(sshd.other_key))
    line = one_line(err)
    assert code == 3 and "refused the login" in line and str(sshd.other_key) in line


def test_unreachable_bastion_is_one_line_exit_3(capsys, ssh_home, server_url):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _out, err = run(capsys, "detect", server_url, "--ssh", f"ops@127.0.0.1:{port}")
    line = one_line(err)
    assert code == 3 and f"cannot reach SSH host [127.0.0.1]:{port}" in line


def test_database_unreachable_from_the_ssh_host_names_both_ends(capsys, sshd, ssh_home, pg_url):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = make_url(pg_url).set(port=port).render_as_string(hide_password=False)
    code, _out, err = run(capsys, "detect", url, "--ssh", sshd.spec, "--ssh-key", str(sshd.key))
    line = one_line(err)
    assert code == 3 and f"cannot reach 127.0.0.1:{port}" in line and "as seen from the SSH host" in line


def test_passphrase_comes_from_the_keyring_and_is_never_shown(capsys, sshd, ssh_home, server_url, opened):
    args = ["scan", server_url, "--format", "json", "--now", NOW, "--ssh", sshd.spec, "--ssh-key", str(sshd.key_enc)]
    code, out, err = run(capsys, *args)  # no passphrase stored yet: says where to put it
    line = one_line(err)
    assert code == 3 and "passphrase" in line and f"keyring set idemview ssh:127.0.0.1:{sshd.port}:{sshd.user}" in line
    keyring.set_password("idemview", f"ssh:127.0.0.1:{sshd.port}:{sshd.user}", PASSPHRASE)
    code, out, err = run(capsys, *args)
    assert code == 0, err
    assert json.loads(out)["operations"] > 150
    assert PASSPHRASE not in out + err
    assert opened and not any(t.is_open for t in opened)


def test_wrong_passphrase_is_refused_without_showing_it(capsys, sshd, ssh_home, server_url):
    keyring.set_password("idemview", f"ssh:127.0.0.1:{sshd.port}:{sshd.user}", "not the passphrase 123")
    code, out, err = run(capsys, "detect", server_url, "--ssh", sshd.spec, "--ssh-key", str(sshd.key_enc))
    line = one_line(err)
    assert code == 3 and "not the passphrase 123" not in out + err
    assert str(sshd.key_enc) in line and "does not open" in line


def test_saved_connection_with_ssh_fields(capsys, sshd, ssh_home, server_url, opened):
    conn, password = Connection.from_url("behind-bastion", server_url)
    conn.ssh, conn.ssh_key = sshd.spec, str(sshd.key_enc)
    ConnectionStore().upsert(conn)
    keyring.set_password("idemview", f"{conn.id}:ssh", PASSPHRASE)  # the connection's own entry
    saved = ConnectionStore().find("behind-bastion")
    assert saved is not None and (saved.ssh, saved.ssh_key) == (sshd.spec, str(sshd.key_enc))
    assert PASSPHRASE not in ConnectionStore().path.read_text()
    code, out, err = run(capsys, "scan", "behind-bastion", "--format", "json", "--now", NOW)
    assert code == 0, err
    code, direct, _ = run(capsys, "scan", server_url, "--format", "json", "--now", NOW)
    assert json.loads(out) == json.loads(direct)
    assert len(opened) == 1 and not opened[0].is_open


def test_python_api_closes_the_tunnel_with_the_ledger(sshd, ssh_home, server_url, opened):
    import idemview

    with idemview.open(server_url, ssh=sshd.spec, ssh_key=str(sshd.key)) as led:
        assert led.tunnel is opened[0] and listening(led.tunnel.local_port)
        ops = led.operations()
        assert len(ops) > 150
    assert not opened[0].is_open and not listening(opened[0].local_port)


def test_redis_through_the_tunnel(capsys, sshd, ssh_home, redis_db, opened):
    from tests.redis.conftest import put_celery, server_now

    url, raw = redis_db
    t = server_now(raw)
    for i in range(5):
        put_celery(raw, f"task-{i}", "SUCCESS", done=t)
    put_celery(raw, "task-failed", "FAILURE", done=t, traceback="boom")
    code, direct, _ = run(capsys, "scan", url, "--format", "json", "--now", NOW)
    assert code == 0
    code, tunnelled, err = run(
        capsys, "scan", url, "--format", "json", "--now", NOW, "--ssh", sshd.spec, "--ssh-key", str(sshd.key)
    )
    assert code == 0, err
    a, b = json.loads(tunnelled), json.loads(direct)
    # the snapshot names the server as the process reached it (the tunnel's local end), and its own time
    assert a["snapshot"].pop("url") == f"redis://127.0.0.1:{opened[0].local_port}/13"
    assert b["snapshot"].pop("url") == f"{url}"
    for d in (a, b):  # when each snapshot was taken differs; what it read does not
        d.pop("server_time", None)
        d.pop("snapshot")
    assert a == b and b["operations"] == 6 and b["findings"]
    assert len(opened) == 1 and opened[0].remote_port == 6379 and not opened[0].is_open


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--ssh", "no-at-sign"], "expected USER@HOST"),
        (["--ssh", "ops@host:99999"], "expected USER@HOST"),
        (["--ssh", "ops@host", "--ssh-key", "/nonexistent/id_ed25519"], "no such file"),
        (["--ssh-key", "/etc/hostname"], "--ssh-key needs --ssh"),
    ],
)
def test_bad_ssh_arguments_exit_2(capsys, server_url, argv, needle):
    code, _out, err = run(capsys, "detect", server_url, *argv)
    assert code == 2 and needle in one_line(err)


def test_ssh_to_a_sqlite_file_exit_2(capsys, tmp_path, sshd, ssh_home):
    from idemview.services.demo import write_demo

    p = tmp_path / "d.db"
    write_demo(p, operations=20)
    code, _out, err = run(capsys, "detect", str(p), "--ssh", sshd.spec)
    assert code == 2 and "--ssh applies to a database server" in one_line(err)
