"""Issue 23 item 4 and issue 25 item 1 in the connection dialog: its "Database" list and each type's fields
come from the backends. DynamoDB shows table, region, endpoint URL and profile and no credential field (the
AWS chain is named); a dump shows a file *or folder* picker; Test runs each backend's own test off the GUI
thread (against dynalite and a real Parquet dump); saved connections of each kind round-trip and open."""

from __future__ import annotations

import pytest

from idemview.config import ConnectionStore, CredentialStore
from idemview.services.cancel import CancelToken
from idemview.services.session import SharedMasker
from tests.conftest import ON_CI


@pytest.fixture
def dialog(qtbot, tmp_path):
    from idemview.qt.connections import ConnectionDialog

    store = ConnectionStore(tmp_path / "connections.toml")
    dlg = ConnectionDialog(CredentialStore(), SharedMasker(), store=store)
    qtbot.addWidget(dlg)
    dlg.show()
    yield dlg, store
    dlg.reject()


def _choose(dlg, dialect: str) -> None:
    i = dlg.type.findData(dialect)
    assert i >= 0, dialect
    dlg.type.setCurrentIndex(i)


def _labels(dlg) -> list[str]:
    """The texts of the server box's row labels and notes, in order (what a person reads)."""
    from PySide6.QtWidgets import QFormLayout, QLabel

    out = []
    sf = dlg.server_form
    for r in range(sf.rowCount()):
        for role in (QFormLayout.ItemRole.LabelRole, QFormLayout.ItemRole.SpanningRole):
            item = sf.itemAt(r, role)
            w = item.widget() if item is not None else None
            if isinstance(w, QLabel) and w.text():
                out.append(w.text())
    return out


def _test(qtbot, dlg) -> str:
    dlg.test()
    assert not dlg.test_btn.isEnabled()  # running on a worker: the button waits
    qtbot.waitUntil(lambda: dlg.test_btn.isEnabled(), timeout=60_000)
    return dlg.result.text()


def test_every_backend_offers_its_types(dialog):
    dlg, _ = dialog
    offered = [dlg.type.itemData(i) for i in range(dlg.type.count())]
    assert offered[0] == "sqlite"  # the first entry stays the SQLite file
    assert {"sqlite", "postgresql", "mysql", "mariadb", "redis", "rediss", "dynamodb", "duckdb"} <= set(offered)
    assert dlg.type.itemText(offered.index("dynamodb")) == "DynamoDB"
    assert dlg.type.itemText(offered.index("duckdb")) == "Dump file / folder"


def test_dynamodb_fields_have_no_credential_and_round_trip(dialog):
    dlg, store = dialog
    dlg.new()
    dlg.name.setText("powertools prod")
    _choose(dlg, "dynamodb")
    labels = _labels(dlg)
    assert labels[:4] == ["Table", "Region", "Endpoint URL", "AWS profile"]
    assert any("AWS chain" in t for t in labels)  # where the credentials come from, said
    for hidden in (dlg.password, dlg.user, dlg.host, dlg.ssh, dlg.ssh_secret, dlg.remember, dlg.schema):
        assert not hidden.isVisible()
    assert dlg.dbname.isVisible()
    dlg.dbname.setText("idempotency")
    dlg.options["region"].setText("eu-west-1")
    dlg.options["endpoint_url"].setText("http://127.0.0.1:8000")
    saved = dlg.save()
    assert (saved.dialect, saved.database, saved.tls) == (
        "dynamodb",
        "idempotency",
        {"region": "eu-west-1", "endpoint_url": "http://127.0.0.1:8000"},
    )
    assert saved.host == "" and saved.user == "" and saved.port is None and saved.ssh == ""
    back = ConnectionStore(store.path).find("powertools prod")
    assert back == saved
    # shown again after another type: the fields hold the saved values
    _choose(dlg, "postgresql")
    assert dlg.host.isVisible() and not dlg.options["region"].isVisible()
    dlg._show(back)
    assert dlg.options["region"].text() == "eu-west-1" and dlg.dbname.text() == "idempotency"
    assert dlg.type.currentData() == "dynamodb"
    dlg.connect_()
    assert dlg.spec.url == "dynamodb://idempotency?region=eu-west-1&endpoint_url=http://127.0.0.1:8000"
    assert dlg.spec.password is None and dlg.spec.ssh == ""


def test_dynamodb_test_button_reads_the_table(dialog, qtbot, monkeypatch):
    from tests.dynalite_server import AWS_ENV, create_table, start_dynalite, writer_client

    for k, v in AWS_ENV.items():  # the AWS chain: the environment
        monkeypatch.setenv(k, v)
    try:
        proc, endpoint = start_dynalite()
    except (RuntimeError, OSError) as e:
        if ON_CI:
            pytest.fail(f"dynalite cannot run: {e} (CI=true: server tests must run)")
        pytest.skip(f"dynalite cannot run: {e}")
    try:
        create_table(writer_client(endpoint), "idempotency")
        dlg, _ = dialog
        dlg.new()
        _choose(dlg, "dynamodb")
        dlg.dbname.setText("idempotency")
        dlg.options["region"].setText("us-east-1")
        dlg.options["endpoint_url"].setText(endpoint)
        msg = _test(qtbot, dlg)
        assert msg.startswith("✓ table idempotency (0 items, about) · read calls only"), msg
        assert "detected powertools" in msg, msg  # the key schema (id) fits Powertools' table
        dlg.dbname.setText("no-such-table")  # a variant: the table is missing
        msg = _test(qtbot, dlg)
        assert msg.startswith("⚠") and "no-such-table" in msg, msg
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    """(folder of Parquet files, the SQLite ledger they were dumped from) of a small demo ledger."""
    from idemview.cli import main
    from tests.unit.test_dumps import dump_sqlite

    base = tmp_path_factory.mktemp("dump")
    db = base / "demo.db"
    assert main(["demo", str(db), "--operations", "120", "--seed", "3"]) == 0
    files = dump_sqlite(db, base / "parquet", "parquet")
    return files[0].parent, db


def test_dump_folder_is_picked_tested_saved_and_opened(dialog, qtbot, dump):
    from idemview.services.session import open_ledger

    folder, db = dump
    dlg, store = dialog
    dlg.new()
    dlg.name.setText("incident dump")
    _choose(dlg, "duckdb")
    assert _labels(dlg)[0] == "File or folder"
    assert dlg.file.isVisible() and dlg.browse.isVisible() and dlg.browse_dir.isVisible()  # file or folder
    for hidden in (dlg.host, dlg.password, dlg.ssh, dlg.options.get("region")):
        assert hidden is None or not hidden.isVisible()
    dlg.file.setText(str(folder))
    msg = _test(qtbot, dlg)
    assert msg.startswith("✓ reachable · read-only session confirmed · detected idemview"), msg
    saved = dlg.save()
    assert (saved.dialect, saved.database, saved.host, saved.ssh) == ("duckdb", str(folder), "", "")
    assert ConnectionStore(store.path).find("incident dump") == saved
    dlg.connect_()
    o = open_ledger(dlg.spec, CancelToken())
    try:
        assert o.ledger.source.backend == "dump" and o.read_only
        import sqlite3

        with sqlite3.connect(db) as c:
            (n,) = c.execute("SELECT count(*) FROM operations").fetchone()
        assert o.n_ops == n > 0
    finally:
        o.close()


def test_a_missing_dump_is_one_line(dialog, qtbot, tmp_path):
    dlg, _ = dialog
    dlg.new()
    _choose(dlg, "duckdb")
    dlg.file.setText(str(tmp_path / "nope.parquet"))
    msg = _test(qtbot, dlg)
    assert msg.startswith("⚠") and "nope.parquet" in msg and "\n" not in msg, msg


def test_sqlite_keeps_its_file_row_and_servers_their_fields(dialog):
    dlg, _ = dialog
    dlg.new()
    _choose(dlg, "sqlite")
    assert _labels(dlg) == ["File"] and dlg.file.isVisible() and not dlg.browse_dir.isVisible()
    _choose(dlg, "postgresql")
    pg = ["Host", "Port", "Database", "User", "Password", "TLS (sslmode)", "SSH tunnel", "SSH key", "SSH passphrase"]
    assert _labels(dlg) == pg  # each row once (the schema is the form's own row, below)
    assert dlg.sslmode.isVisible() and dlg.ssh.isVisible() and dlg.port.value() == 5432
    _choose(dlg, "redis")
    assert not dlg.sslmode.isVisible() and dlg.ssh.isVisible() and not dlg.schema.isVisible()


def test_a_pasted_dynamodb_url_or_dump_path_fills_its_backends_fields(dialog, tmp_path):
    dlg, _ = dialog
    dlg.new()
    dlg.url.setText("dynamodb://orders.v2?region=eu-west-1&endpoint_url=http://127.0.0.1:8000")
    dlg.split_btn.click()
    assert dlg.type.currentData() == "dynamodb" and dlg.dbname.text() == "orders.v2"
    assert dlg.options["region"].text() == "eu-west-1"
    assert dlg.options["endpoint_url"].text() == "http://127.0.0.1:8000"
    c = dlg.form_connection()
    assert (c.dialect, c.host, c.tls["region"]) == ("dynamodb", "", "eu-west-1")
    dlg.url.setText("dynamodb://AKIAEXAMPLE:s3cr3t@orders?region=eu-west-1")  # a credential: refused, not kept
    dlg.split_btn.click()
    assert "AWS chain" in dlg.result.text() and "s3cr3t" not in dlg.result.text()
    assert dlg.dbname.text() == "orders.v2"
    dlg.url.setText(str(tmp_path / "jobs.parquet"))
    dlg.split_btn.click()
    assert dlg.type.currentData() == "duckdb" and dlg.file.text() == str(tmp_path / "jobs.parquet")


def test_a_third_party_backend_brings_its_fields_and_opens_from_the_dialog(qtbot, tmp_path, monkeypatch, dump):
    """The toy backend of tests/toybackend.py, registered through an entry point: the dialog offers it with
    its own rows, and its Connect spec opens through the GUI's opener."""
    from idemview.backends import registry
    from idemview.qt.connections import ConnectionDialog
    from idemview.services.session import open_ledger
    from tests import toybackend

    toybackend.install_entry_point(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert registry.load_plugins() == ["toy"]
    toybackend.OPENED.clear()
    try:
        dlg = ConnectionDialog(CredentialStore(), SharedMasker(), store=ConnectionStore(tmp_path / "c.toml"))
        qtbot.addWidget(dlg)
        dlg.show()
        dlg.new()
        dlg.name.setText("toy")
        _choose(dlg, "toy")
        assert _labels(dlg) == ["Toy file", "A toy backend."] and dlg.file.isVisible()
        _folder, db = dump
        dlg.file.setText(str(db))
        dlg.connect_()
        assert dlg.spec.url == f"toy://{db}"
        o = open_ledger(dlg.spec, CancelToken())
        try:
            assert o.ledger.source.backend == "toy" and o.n_ops > 0
        finally:
            o.close()
        assert toybackend.OPENED == [f"toy://{db}"]
    finally:
        registry.unregister("toy")
