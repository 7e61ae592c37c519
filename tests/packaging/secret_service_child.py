"""Run by tests/packaging/test_os_keyring.py inside ``dbus-run-session`` after gnome-keyring-daemon was
started unlocked on that private bus: saves a connection, stores / reads / deletes its password through
idemview.config's stores, and prints what it saw as one JSON object. The password comes in the
environment (IDEMVIEW_TEST_SECRET) so it is never in a file or a command line."""

import json
import os

from idemview.config import Connection, ConnectionStore, CredentialStore

secret = os.environ.pop("IDEMVIEW_TEST_SECRET")
conn, pw = Connection.from_url("payments-prod", f"postgresql://sre:{secret}@db.internal:5432/payments")
assert pw == secret
ConnectionStore().upsert(conn)
store = CredentialStore()
out = {
    "available": store.available,
    "notice": store.notice,
    "backend": store.backend,
    "stored_in_keyring": store.set(conn.id, pw),
}
# A new store (as a new app start would have) must read it back from the Secret Service, not from memory.
out["read_back"] = CredentialStore().get(conn.id) == secret
store.delete(conn.id)
out["after_delete"] = CredentialStore().get(conn.id)
print(json.dumps(out))
