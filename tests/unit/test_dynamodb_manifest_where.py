"""The export manifest of a DynamoDB ledger names where the table was read: its region and endpoint URL
(a local DynamoDB, dynalite here), never a credential. It used to record only ``dynamodb://TABLE``: the
same table name in another region or on another endpoint is another ledger."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.conftest import ON_CI
from tests.dynalite_server import AWS_ENV, create_table, start_dynalite, writer_client

TABLE = "IdempotencyTable"


@pytest.fixture
def dynalite(monkeypatch):
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    for k, v in AWS_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    try:
        proc, endpoint = start_dynalite()
    except (RuntimeError, OSError) as e:
        if ON_CI:
            pytest.fail(f"dynalite cannot run: {e} (CI=true: server tests must run)")
        pytest.skip(f"dynalite cannot run: {e}")
    try:
        w = writer_client(endpoint)
        create_table(w, TABLE)
        now = int(time.time())
        w.put_item(
            TableName=TABLE,
            Item={
                "id": {"S": "payments.charge#5f1a0c2e9b7d4e31a2c4f6b8d0e2a4c6"},
                "expiration": {"N": str(now + 3600)},
                "status": {"S": "COMPLETED"},
                "data": {"S": '{"charge_id": "ch_1"}'},
            },
        )
        yield endpoint
    finally:
        proc.kill()
        proc.wait(10)


def test_the_manifest_names_the_region_and_the_endpoint(dynalite, tmp_path, capsys):
    from idemview.cli import main

    out = tmp_path / "ops.csv"
    url = f"dynamodb://{TABLE}?region=eu-west-3&endpoint_url={dynalite}"
    code = main(["export", url, "--layout", "powertools-dynamodb", "--rows", "operations", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    ledger = manifest["ledger"]
    assert ledger["region"] == "eu-west-3"
    assert ledger["endpoint_url"] == dynalite
    assert ledger["database"] == TABLE
    text = json.dumps(manifest)
    assert AWS_ENV["AWS_SECRET_ACCESS_KEY"] not in text and AWS_ENV["AWS_ACCESS_KEY_ID"] not in text
