"""SSH tunnels to ledgers behind a bastion (DESIGN §5.3, issue 23 item 1).

``--ssh USER@HOST[:PORT]`` (and ``--ssh-key PATH``) make idemview reach the database through the SSH host:
a local forward bound on ``127.0.0.1`` at an ephemeral port, to the database host and port *as seen from the
SSH host*; the ledger's URL is rewritten to the local end (:func:`through_tunnel`), and everything else —
the read-only chokepoint (:func:`idemview.ledger.connect.open_engine` and its driver options) included —
applies to the rewritten URL unchanged.

Host keys are checked against ``~/.ssh/known_hosts`` (``$HOME`` as the process sees it): an unknown or a
changed key is refused (:class:`HostKeyUnknown`, :class:`HostKeyChanged`) with a message naming the host
and the line that accepts it; nothing is ever added to the file. A key passphrase or an SSH password comes
from the keyring (:func:`ssh_secret`: service ``idemview``, user name ``<connection id>:ssh`` for a saved
connection, else ``ssh:HOST:PORT:USER``), never from a file or a log. Errors are
:class:`~idemview.errors.CannotConnect` (exit 3) or :class:`~idemview.errors.InputError` (exit 2), one line,
no secret. Library: paramiko (``SSHClient`` and a ``direct-tcpip`` channel per accepted connection).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import URL

from idemview.errors import CannotConnect, InputError

log = logging.getLogger(__name__)

DEFAULT_SSH_PORT = 22
CONNECT_TIMEOUT_S = 10.0
#: Default database ports, by SQLAlchemy backend name (the port the SSH host forwards to when the URL has none).
DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "redis": 6379, "rediss": 6379}

_SPEC_RE = re.compile(r"^(?P<user>[^@\s:/]+)@(?P<host>\[[0-9A-Fa-f:.]+\]|[^@\s:/\[\]]+)(?::(?P<port>\d{1,5}))?$")


class TunnelError(CannotConnect):
    """The SSH tunnel cannot be opened (bastion unreachable, authentication refused, forward refused):
    exit code 3; the message names the SSH host, never a secret."""


class HostKeyUnknown(TunnelError):
    """The SSH host's key is not in ``known_hosts``: refused (never accepted silently)."""


class HostKeyChanged(TunnelError):
    """The SSH host presents a key other than the one ``known_hosts`` holds for it: refused."""


@dataclass(frozen=True)
class SshSpec:
    """Where the tunnel starts: ``user@host:port`` (port default 22) and an optional private key file.

    Built with :meth:`parse` from the ``--ssh`` / ``--ssh-key`` values or a saved connection's
    ``ssh`` / ``ssh_key`` fields."""

    user: str
    host: str
    port: int = DEFAULT_SSH_PORT
    key_path: str | None = None

    @classmethod
    def parse(cls, text: str, key_path: str | None = None) -> SshSpec:
        """``USER@HOST[:PORT]`` (an IPv6 host in brackets). Raises :class:`InputError` (exit 2) for
        anything else, or a ``key_path`` that is not a readable file."""
        m = _SPEC_RE.match((text or "").strip())
        port = int(m.group("port")) if m and m.group("port") else DEFAULT_SSH_PORT
        if not m or not 0 < port < 65536:
            raise InputError(f"--ssh {text!r}: expected USER@HOST or USER@HOST:PORT (e.g. deploy@bastion:2222)")
        if key_path:
            p = Path(os.path.expanduser(key_path))
            if not p.is_file():
                raise InputError(f"--ssh-key {key_path!r}: no such file (a private key, e.g. ~/.ssh/id_ed25519)")
            key_path = str(p)
        return cls(m.group("user"), m.group("host").strip("[]"), port, key_path or None)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user}@{host}" + (f":{self.port}" if self.port != DEFAULT_SSH_PORT else "")

    def keyring_user(self, connection_id: str | None = None) -> str:
        """The keyring user name of this tunnel's passphrase or password (service ``idemview``):
        ``<connection id>:ssh`` for a saved connection, else ``ssh:HOST:PORT:USER`` (no ``user@host``
        in it: messages mask that shape as an e-mail address)."""
        return f"{connection_id}:ssh" if connection_id else f"ssh:{self.host}:{self.port}:{self.user}"


def ssh_secret(spec: SshSpec, connection_id: str | None = None, store=None) -> str | None:
    """The key passphrase or SSH password for ``spec`` from the keyring (``store``: a
    :class:`idemview.config.CredentialStore`, default a new one), or None. Registered with the masker so
    no message shows it."""
    from idemview.config import CredentialStore
    from idemview.masking.masker import register_secret

    store = store or CredentialStore()
    secret = store.get(spec.keyring_user(connection_id))
    if secret is None and connection_id:
        secret = store.get(spec.keyring_user())
    register_secret(secret)
    return secret


def known_hosts_path() -> Path:
    """``~/.ssh/known_hosts`` of the current ``$HOME``."""
    return Path(os.path.expanduser("~")) / ".ssh" / "known_hosts"


def _host_label(host: str, port: int) -> str:
    return host if port == DEFAULT_SSH_PORT else f"[{host}]:{port}"


def _accept_hint(spec: SshSpec) -> str:
    port = f"-p {spec.port} " if spec.port != DEFAULT_SSH_PORT else ""
    return (
        f"if the host's owner confirms that key, accept it with `ssh-keyscan {port}{spec.host} >> "
        f"~/.ssh/known_hosts` (or `ssh {port}{spec.user}@{spec.host}`, answering yes)"
    )


def _shown(path: Path) -> str:
    """``path`` with the home folder written ``~``."""
    home = Path(os.path.expanduser("~"))
    try:
        return "~/" + path.relative_to(home).as_posix()
    except ValueError:
        return str(path)


def _policy(spec: SshSpec):
    import paramiko

    class _Refuse(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client, hostname, key):
            raise HostKeyUnknown(
                f"SSH host {_host_label(spec.host, spec.port)} is not in {_shown(known_hosts_path())}: refused; "
                f"{_accept_hint(spec)} (its {key.get_name()} key is {key.fingerprint})"
            )

    return _Refuse()


@dataclass
class Tunnel:
    """An open local forward ``127.0.0.1:local_port`` → ``remote_host:remote_port`` via ``spec``.

    :meth:`close` (or leaving the ``with`` block) stops listening, closes every forwarded connection and
    the SSH session; idempotent. ``remote_host`` / ``remote_port`` are as seen from the SSH host."""

    spec: SshSpec
    remote_host: str
    remote_port: int
    local_port: int = 0
    _client: object = None
    #: Why the SSH host last refused to open a forward (e.g. ``ChannelException``), or None.
    forward_error: str | None = None
    _server: socket.socket | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _socks: list[socket.socket] = field(default_factory=list)
    _closed: threading.Event = field(default_factory=threading.Event)

    @property
    def is_open(self) -> bool:
        return not self._closed.is_set()

    def _serve(self) -> None:
        assert self._server is not None
        while not self._closed.is_set():
            try:
                conn, _addr = self._server.accept()
            except OSError:  # closed under us
                return
            t = threading.Thread(target=self._forward, args=(conn,), name="idemview-ssh-forward", daemon=True)
            t.start()
            self._threads.append(t)

    def _forward(self, conn: socket.socket) -> None:
        import paramiko  # already loaded: the SSH session exists

        self._socks.append(conn)
        try:
            transport = self._client.get_transport()  # type: ignore[attr-defined]
            chan = transport.open_channel(
                "direct-tcpip", (self.remote_host, self.remote_port), conn.getsockname(), timeout=CONNECT_TIMEOUT_S
            )
        except Exception as e:  # the SSH host cannot reach the database: the driver sees a closed socket
            text_ = getattr(e, "text", None) or str(e)  # paramiko's ChannelException carries the reason
            self.forward_error = (str(text_).splitlines() or [""])[0][:120] or type(e).__name__
            log.debug("SSH host %s cannot reach %s:%s", self.spec, self.remote_host, self.remote_port)
            conn.close()
            return
        try:
            _pump(conn, chan, self._closed)
        except (OSError, EOFError):  # either end closed (or the tunnel did) while copying
            pass
        finally:
            try:
                chan.close()
            except (OSError, EOFError, paramiko.SSHException):
                # the tunnel was closed under this forward (close() ends the SSH session while a pump is
                # still copying): the channel is gone with it; nothing to close
                pass
            conn.close()

    def close(self) -> None:
        """Stop the tunnel (listening socket, forwarded connections, SSH session)."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._server is not None:
            try:
                self._server.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._server.close()
        for s in list(self._socks):
            try:
                s.shutdown(socket.SHUT_RDWR)  # wakes a forward's thread blocked in recv (close alone does not)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass
        if self._client is not None:
            self._client.close()  # type: ignore[attr-defined]
        for t in self._threads:
            t.join(timeout=2.0)
        _OPEN.discard(self)

    def __enter__(self) -> Tunnel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


def _pump(conn: socket.socket, chan, closed: threading.Event) -> None:
    """Copy bytes both ways until either side closes (or the tunnel does: closing the SSH session closes
    the channel, which ends both directions).

    One thread per direction, each blocked in its own ``recv``; never ``select()`` on the channel. Why:
    ``Channel.fileno()`` makes an OS pipe whose descriptors paramiko may close while another thread
    still waits on or reads that number; once the number is reused by another tunnel's SSH socket, a
    stray read there corrupts that session and drops its forwards ("Lost connection to MySQL server").
    ``closed`` is kept for the caller's signature; the channel's own closing is what ends the copy."""
    del closed

    def upstream() -> None:  # local client -> SSH host
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                chan.sendall(data)
        except (OSError, EOFError):
            pass
        finally:
            try:
                chan.close()  # the client is gone: end the forward (downstream's recv returns b"")
            except Exception:  # a dead session has nothing to close (paramiko raises EOFError, SSHException)
                pass

    t = threading.Thread(target=upstream, name="idemview-ssh-upstream", daemon=True)
    t.start()
    try:
        while True:
            data = chan.recv(65536)
            if not data:
                break
            conn.sendall(data)
    finally:
        try:
            conn.shutdown(socket.SHUT_RDWR)  # wakes upstream's recv
        except OSError:
            pass
        t.join(timeout=2.0)


#: Tunnels open in this process (closed by :func:`close_all`, e.g. when a command ends).
_OPEN: set[Tunnel] = set()


def close_all() -> None:
    """Close every tunnel this process still has open."""
    for t in list(_OPEN):
        t.close()


def _try_load(path: str, secret: str | None):
    """(key or None, encrypted?, first reason) trying each key type paramiko reads."""
    import paramiko

    encrypted, why = False, ""
    for cls in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return cls.from_private_key_file(path, password=secret), True, ""
        except paramiko.PasswordRequiredException:
            encrypted = True
        except (paramiko.SSHException, ValueError, OSError, TypeError) as e:
            why = why or (str(e).splitlines() or [""])[0][:120] or type(e).__name__
    return None, encrypted, why


def _load_key(spec: SshSpec, secret: str | None):
    """The private key of ``spec.key_path`` (a ``paramiko.PKey``: Ed25519, ECDSA or RSA), decrypted with
    ``secret``. Raises :class:`TunnelError` (passphrase missing or wrong: exit 3) or :class:`InputError`
    (not a key idemview can read)."""
    assert spec.key_path is not None
    store_hint = f"store it with `keyring set idemview {spec.keyring_user()}` (or in the connection dialog)"
    key, encrypted, why = _try_load(spec.key_path, secret)
    if key is not None:
        return key
    if secret is not None and not encrypted:
        encrypted = _try_load(spec.key_path, None)[1]
        if encrypted:
            raise TunnelError(f"the keyring's passphrase does not open the SSH key {spec.key_path}: {store_hint}")
    if encrypted:
        raise TunnelError(
            f"the SSH key {spec.key_path} is protected by a passphrase and the keyring has none for it: {store_hint}"
        )
    raise InputError(f"--ssh-key {spec.key_path}: not a private key idemview can read ({why})")


def _connect_client(spec: SshSpec, secret: str | None, known_hosts: Path, timeout_s: float):
    """A connected, authenticated ``paramiko.SSHClient``; raises :class:`TunnelError` subclasses."""
    import paramiko

    client = paramiko.SSHClient()
    if known_hosts.is_file():
        try:
            client.load_host_keys(str(known_hosts))
        except (OSError, paramiko.SSHException) as e:
            client.close()
            raise InputError(f"cannot read {known_hosts}: {type(e).__name__}") from None
    client.set_missing_host_key_policy(_policy(spec))
    where = f"SSH host {_host_label(spec.host, spec.port)}"
    try:
        pkey = _load_key(spec, secret) if spec.key_path else None
    except BaseException:
        client.close()
        raise
    try:
        client.connect(
            spec.host,
            port=spec.port,
            username=spec.user,
            pkey=pkey,
            password=None if spec.key_path else secret,
            look_for_keys=spec.key_path is None,
            allow_agent=True,
            timeout=timeout_s,
            banner_timeout=timeout_s,
            auth_timeout=timeout_s,
        )
        return client
    except TunnelError:
        client.close()
        raise
    except paramiko.BadHostKeyException as e:
        client.close()
        raise HostKeyChanged(
            f"{where} presents a {e.key.get_name()} key other than the one in {_shown(known_hosts)}: refused (the host "
            f"was replaced, or someone is in between); if its owner confirms the new key ({e.key.fingerprint}), run "
            f"`ssh-keygen -R {_host_label(spec.host, spec.port)}` and accept it again: "
            f"{_accept_hint(spec).split('accept it with ')[-1]}"
        ) from None
    except paramiko.AuthenticationException:
        client.close()
        how = f"the key {spec.key_path}" if spec.key_path else "the SSH agent, ~/.ssh keys or the keyring's password"
        raise TunnelError(f"{where} refused the login of {spec.user!r} with {how} (wrong key or passphrase?)") from None
    except paramiko.SSHException as e:
        client.close()
        why = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
        raise TunnelError(f"{where}: SSH failed ({why})") from None
    except (OSError, EOFError) as e:
        client.close()
        why = e.strerror or type(e).__name__ if isinstance(e, OSError) else "connection closed"
        if isinstance(e, socket.timeout | TimeoutError):
            why = f"no answer within {timeout_s:g} s"
        raise TunnelError(f"cannot reach {where}: {why}") from None


def open_tunnel(
    spec: SshSpec,
    remote_host: str,
    remote_port: int,
    *,
    secret: str | None = None,
    known_hosts: Path | None = None,
    timeout_s: float = CONNECT_TIMEOUT_S,
) -> Tunnel:
    """Open a tunnel: SSH to ``spec`` (host key checked against ``known_hosts``, default
    :func:`known_hosts_path`), then listen on ``127.0.0.1:<ephemeral>`` and forward each connection to
    ``remote_host:remote_port`` as the SSH host sees it. ``secret`` is the key passphrase (with
    ``spec.key_path``) or the SSH password (without). ``timeout_s``: seconds for the TCP connect, banner
    and authentication. Raises :class:`HostKeyUnknown`, :class:`HostKeyChanged`, :class:`TunnelError`
    (exit 3) or :class:`InputError` (exit 2: an unreadable key file or known_hosts)."""
    from idemview.masking.masker import register_secret

    register_secret(secret)
    # paramiko logs refused forwards and failed handshakes itself; the one-line errors here say it instead
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    client = _connect_client(spec, secret, known_hosts or known_hosts_path(), timeout_s)
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    t = Tunnel(spec, remote_host, remote_port, server.getsockname()[1], _client=client, _server=server)
    th = threading.Thread(target=t._serve, name="idemview-ssh-tunnel", daemon=True)
    th.start()
    t._threads.append(th)
    _OPEN.add(t)
    return t


def remote_endpoint(url: URL) -> tuple[str, int]:
    """(host, port) a server URL names, with the backend's default port; raises :class:`InputError` for a
    URL without a host (SQLite, a socket path) or a backend without a known default port."""
    backend = url.get_backend_name()
    if backend == "sqlite" or not url.host:
        raise InputError(
            "--ssh applies to a database server (PostgreSQL, MySQL/MariaDB, Redis), "
            "not a local file or a URL without a host"
        )
    port = url.port or DEFAULT_PORTS.get(backend)
    if port is None:
        raise InputError(f"--ssh: the URL names no port and {backend!r} has no default idemview knows; add :PORT")
    return url.host, int(port)


def through_tunnel(url: URL, spec: SshSpec, *, secret: str | None = None, known_hosts: Path | None = None):
    """``(rewritten URL, Tunnel)``: a tunnel to the URL's host and port (as seen from the SSH host) and
    the same URL pointed at its local end (``127.0.0.1:<port>``); user, password, database and options are
    kept, so the read-only chokepoint applies to the rewritten URL as to the original. Raises what
    :func:`remote_endpoint` and :func:`open_tunnel` raise."""
    host, port = remote_endpoint(url)
    tunnel = open_tunnel(spec, host, port, secret=secret, known_hosts=known_hosts)
    return url.set(host="127.0.0.1", port=tunnel.local_port), tunnel


def through_tunnel_str(url: str, spec: SshSpec, *, secret: str | None = None, known_hosts: Path | None = None):
    """:func:`through_tunnel` for a URL kept as a string (``redis://``/``rediss://``):
    ``(rewritten URL string, Tunnel)``; the user info, path and query are kept verbatim."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise InputError("the URL's port is not a number") from None
    if not parts.hostname:
        raise InputError("--ssh applies to a server URL with a host (redis://HOST:PORT/DB)")
    tunnel = open_tunnel(
        spec, parts.hostname, port or DEFAULT_PORTS.get(scheme, 6379), secret=secret, known_hosts=known_hosts
    )
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (userinfo + "@" if "@" in parts.netloc else "") + f"127.0.0.1:{tunnel.local_port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), tunnel


def explain_failure(tunnel: Tunnel, error: Exception) -> TunnelError | None:
    """A clearer error when the database behind ``tunnel`` could not be reached *through* it (the SSH
    host refused or could not open the forward): a :class:`TunnelError` naming both ends, else None."""
    why = tunnel.forward_error
    if why is None:
        return None
    where = _host_label(tunnel.spec.host, tunnel.spec.port)
    return TunnelError(
        f"SSH host {where} cannot reach {tunnel.remote_host}:{tunnel.remote_port} ({why}); the database host "
        "and port are as seen from the SSH host"
    )


def tunnel_target(
    target,
    spec: SshSpec,
    connection_id: str | None = None,
    *,
    known_hosts: Path | None = None,
    secret: str | None = None,
):
    """``(target through the tunnel, Tunnel)`` for a ledger target: a SQLAlchemy :class:`URL` or a
    ``redis://`` / ``rediss://`` URL string, its passphrase or SSH password ``secret`` (typed in the
    connection dialog), else read from the keyring (:func:`ssh_secret` with ``connection_id``). Called by
    the network backends' ``through`` (:mod:`idemview.backends`), which the one opener
    (:mod:`idemview.services.opener`) calls for the CLI, the GUI and the API. Raises what
    :func:`through_tunnel` raises."""
    secret = secret or ssh_secret(spec, connection_id)
    if isinstance(target, str):
        return through_tunnel_str(target, spec, secret=secret, known_hosts=known_hosts)
    return through_tunnel(target, spec, secret=secret, known_hosts=known_hosts)
