"""CredentialStore.backend_name(): the plain name the connection dialog shows for where passwords go."""

from __future__ import annotations

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail

from idemview.config import CredentialStore


class _Memory(KeyringBackend):
    """A working keyring (in memory) with a known name."""

    priority = 1

    def __init__(self, name="Test Vault"):
        super().__init__()
        self._name, self._d = name, {}

    @property
    def name(self):
        return self._name

    def get_password(self, service, username):
        return self._d.get((service, username))

    def set_password(self, service, username, password):
        self._d[(service, username)] = password

    def delete_password(self, service, username):
        self._d.pop((service, username), None)


class _Chain(_Memory):
    @property
    def backends(self):
        return [_Memory("SecretService Keyring"), _Memory("KWallet")]


@pytest.fixture
def use_keyring():
    before = keyring.get_keyring()
    yield keyring.set_keyring
    keyring.set_keyring(before)


def test_names_the_working_backend(use_keyring):
    use_keyring(_Memory())
    store = CredentialStore()
    assert store.available and store.backend_name() == "Test Vault"


def test_a_chain_lists_its_members(use_keyring):
    use_keyring(_Chain())
    assert CredentialStore().backend_name() == "SecretService Keyring, KWallet"


def test_without_a_keyring_says_passwords_stay_in_memory(use_keyring):
    use_keyring(fail.Keyring())
    store = CredentialStore()
    assert not store.available
    assert store.backend_name() == "this session's memory"
