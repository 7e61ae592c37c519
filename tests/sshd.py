"""A real OpenSSH server on loopback for the tunnel tests and the tunnel bench (issue 23 item 1).

:func:`start_sshd` writes its own ``sshd_config``, host keys, client keys and ``authorized_keys`` in a
temporary folder, starts Debian's ``/usr/sbin/sshd`` (openssh-server) in the foreground on a free port of
``127.0.0.1`` as the current user, and waits until it answers. Nothing outside the folder is read or written
(``StrictModes no``; the privilege-separation folder ``/run/sshd`` is created when running as root).
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = os.environ.get("IDEMVIEW_SSHD", "/usr/sbin/sshd")
SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"
PASSPHRASE = "correct horse battery staple 7"  # the test key's passphrase (a test value, not a secret)


@dataclass
class Sshd:
    """A running sshd: ``port`` on 127.0.0.1, ``user`` allowed to log in with ``key`` (no passphrase) or
    ``key_enc`` (:data:`PASSPHRASE`); ``other_key`` is not authorised. ``host_pub`` is the server's host key
    (``TYPE BASE64``), ``other_host_pub`` a different key (for "changed host key")."""

    folder: Path
    port: int
    user: str
    key: Path
    key_enc: Path
    other_key: Path
    host_pub: str
    other_host_pub: str
    proc: subprocess.Popen

    @property
    def spec(self) -> str:
        """``USER@127.0.0.1:PORT`` for ``--ssh``."""
        return f"{self.user}@127.0.0.1:{self.port}"

    def known_hosts_line(self, changed: bool = False) -> str:
        """The ``known_hosts`` line for this server (``changed``: with the other host key)."""
        return f"[127.0.0.1]:{self.port} {self.other_host_pub if changed else self.host_pub}\n"

    def write_home(self, home: Path, *, known: bool = True, changed: bool = False) -> Path:
        """Make ``home/.ssh/known_hosts`` hold this server's key (``known``), a different key
        (``changed``) or nothing; returns ``home``."""
        d = home / ".ssh"
        d.mkdir(parents=True, exist_ok=True)
        (d / "known_hosts").write_text(self.known_hosts_line(changed) if known else "", "utf-8")
        return home

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path, passphrase: str = "") -> str:
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", passphrase, "-C", "idemview-test", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


def start_sshd(folder: Path, timeout_s: float = 10.0) -> Sshd:
    """Start sshd in ``folder`` (created); raises ``FileNotFoundError`` when sshd is not installed and
    ``RuntimeError`` when it does not answer within ``timeout_s`` seconds (with its log)."""
    if not Path(SSHD).is_file():
        raise FileNotFoundError(f"{SSHD} (apt-get install openssh-server)")
    folder.mkdir(parents=True, exist_ok=True)
    host_pub = _keygen(folder / "host_ed25519")
    other_host_pub = _keygen(folder / "other_host_ed25519")
    pubs = [_keygen(folder / "client"), _keygen(folder / "client_enc", PASSPHRASE)]
    _keygen(folder / "stranger")
    (folder / "authorized_keys").write_text("".join(p + "\n" for p in pubs))
    port = _free_port()
    cfg = folder / "sshd_config"
    cfg.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {folder / 'host_ed25519'}",
                f"AuthorizedKeysFile {folder / 'authorized_keys'}",
                f"PidFile {folder / 'sshd.pid'}",
                "StrictModes no",
                "UsePAM no",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "PermitRootLogin prohibit-password",
                "AllowTcpForwarding local",
                "X11Forwarding no",
                "PermitTTY no",
                "LogLevel ERROR",
                "",
            ]
        )
    )
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    log = open(folder / "sshd.log", "wb")  # noqa: SIM115 - the server writes to it while it runs
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                if s.recv(4).startswith(b"SSH-"):
                    break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
    if proc.poll() is not None:
        raise RuntimeError(f"sshd did not start: {(folder / 'sshd.log').read_text(errors='replace')[-500:]}")
    return Sshd(
        folder,
        port,
        getpass.getuser(),
        folder / "client",
        folder / "client_enc",
        folder / "stranger",
        host_pub,
        other_host_pub,
        proc,
    )
