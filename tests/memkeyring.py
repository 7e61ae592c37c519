"""An in-memory keyring backend for tests: no test ever probes or writes the real OS keyring.

``tests/conftest.py`` installs a fresh one per test with ``keyring.set_keyring``; subprocesses started by
tests get it through ``PYTHON_KEYRING_BACKEND=tests.memkeyring.MemoryKeyring`` (its store then lives
only as long as that process).
"""

from __future__ import annotations

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError


class MemoryKeyring(KeyringBackend):
    """Passwords in a dict keyed by (service, user name); nothing is persisted."""

    priority = 1  # type: ignore[assignment]  # keyring declares it as a classproperty

    def __init__(self) -> None:
        super().__init__()
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        try:
            del self.store[(service, username)]
        except KeyError:
            raise PasswordDeleteError(f"no password for {username!r} in {service!r}") from None
