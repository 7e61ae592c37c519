"""A fake MySQL server on loopback that asks every client for a local file (``LOAD DATA LOCAL``).

It speaks just enough of the client/server protocol (MySQL Internals, "Connection Phase" and
``COM_QUERY`` response: ``Protocol::HandshakeV10``, ``HandshakeResponse41``, OK packet, and the
``0xFB`` LOCAL INFILE request) for PyMySQL to log in without a password, then answers the first
query with a request for ``wanted`` and records what the client sent. Used by the read-only tests:
a real socket and the real driver, no mock.
"""

from __future__ import annotations

import socket
import struct
import threading

CLIENT_LOCAL_FILES = 0x80
_CAPS = (
    0x1 | 0x4 | 0x8 | CLIENT_LOCAL_FILES | 0x200 | 0x2000 | 0x8000 | (1 << 17) | (1 << 19) | (1 << 21)
)  # long password, long flag, connect with db, LOCAL FILES, 4.1 protocol, transactions, secure conn,
#   multi results, plugin auth, lenenc auth data


class FakeMySQL:
    """``with FakeMySQL(wanted) as srv:`` serves on ``srv.port`` until the block ends.

    ``connections``: accepted connections; ``client_flags``: the capability flags of each handshake
    response; ``requests``: LOCAL INFILE requests sent; ``received``: bytes of every reply to them (the
    file, if a client sent it)."""

    def __init__(self, wanted: str):
        self.wanted = wanted
        self.connections = 0
        self.client_flags: list[int] = []
        self.received = b""
        self.requests = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> FakeMySQL:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        self._sock.close()

    # ---------------------------------------------------------------------------- protocol

    @staticmethod
    def _send(c: socket.socket, seq: int, payload: bytes) -> None:
        c.sendall(struct.pack("<I", len(payload))[:3] + bytes([seq & 0xFF]) + payload)

    @staticmethod
    def _recv(c: socket.socket) -> tuple[int, bytes] | None:
        head = b""
        while len(head) < 4:
            part = c.recv(4 - len(head))
            if not part:
                return None
            head += part
        n = int.from_bytes(head[:3], "little")
        body = b""
        while len(body) < n:
            part = c.recv(n - len(body))
            if not part:
                return None
            body += part
        return head[3], body

    def _ok(self, c: socket.socket, seq: int) -> None:
        self._send(c, seq, b"\x00\x00\x00" + struct.pack("<HH", 0, 0))

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                c, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            c.settimeout(5)
            try:
                self._session(c)
            except OSError:
                pass
            finally:
                c.close()

    def _session(self, c: socket.socket) -> None:
        salt = b"abcdefgh" + b"ijklmnopqrst"
        hello = (
            b"\x0a"
            + b"5.7.99-fake\x00"
            + struct.pack("<I", 7)
            + salt[:8]
            + b"\x00"
            + struct.pack("<H", _CAPS & 0xFFFF)
            + bytes([45])
            + struct.pack("<H", 0)  # status: autocommit off (nothing for the client to change)
            + struct.pack("<H", _CAPS >> 16)
            + bytes([21])
            + b"\x00" * 10
            + salt[8:]
            + b"\x00"
            + b"mysql_native_password\x00"
        )
        self._send(c, 0, hello)
        got = self._recv(c)
        if got is None:
            return
        seq, resp = got
        self.client_flags.append(struct.unpack("<I", resp[:4])[0])
        self._ok(c, seq + 1)
        pending = None
        while not self._stop.is_set():
            got = pending or self._recv(c)
            pending = None
            if got is None:
                return
            seq, body = got
            if body[:1] == b"\x01":  # COM_QUIT
                return
            # every query but the driver's own SET NAMES (PyMySQL reads only an OK packet for it) gets a
            # request for the file as its answer
            if body[:1] == b"\x03" and not body[1:].upper().startswith(b"SET NAMES"):
                self.requests += 1
                self._send(c, 1, b"\xfb" + self.wanted.encode())
                while True:  # the client's reply: the file in packets (seq 2, 3...), then an empty one
                    part = self._recv(c)
                    if part is None:
                        return
                    pseq, data = part
                    if pseq == 0:  # a new command: the client declined to send the file
                        pending = part
                        break
                    if not data:
                        self._ok(c, pseq + 1)
                        break
                    self.received += data
                continue
            self._ok(c, 1)
