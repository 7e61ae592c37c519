"""DynamoDB ledgers against dynalite (a real DynamoDB-API server), written by AWS Powertools itself.

A module fixture starts dynalite (``tests/dynalite_server.py``; skipped without Node.js on a developer's
machine, failed with ``CI=true``) and lets Powertools' ``idempotent_function`` with its
``DynamoDBPersistenceLayer`` write the ledger: completed charges (with payload validation), a replay, a
failing refund (Powertools deletes its item), an invocation that died in progress (a child process that
exits inside the function, with a Lambda context so the lease is written), a receipt with a 1-second dedup
window (expired when scanned 10 minutes later, the item still present as TTL deletion lags), and the
composite-key form (``sort_key_attr="sk"``) in a table of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import ON_CI
from tests.dynalite_server import AWS_ENV, create_table, env_without_aws, start_dynalite, writer_client

UTC = UTC
SIMPLE, COMPOSITE = "idempotency", "idempotency_shared"
LAMBDA = "checkout"


def charge_card(order):
    return {"charge_id": f"ch_{order['order_id']}", "amount": order["amount"]}


def refund_payment(order):
    raise RuntimeError("card declined")


def send_receipt(order):
    return {"email_id": f"em_{order['order_id']}"}


def reserve_stock(order):
    return {"reservation": order["sku"]}


_DIE_IN_PROGRESS = """
import os, sys
import boto3
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer, IdempotencyConfig, idempotent_function)

class Context:  # what Powertools reads of a Lambda context: the time left
    function_name = "checkout"
    memory_limit_in_mb = 128
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:checkout"
    aws_request_id = "req-1"
    def get_remaining_time_in_millis(self):
        return 30000

client = boto3.client("dynamodb", endpoint_url=sys.argv[1], region_name="us-east-1")
config = IdempotencyConfig()
config.register_lambda_context(Context())

def provision_account(order):
    os._exit(0)  # the Lambda is killed mid-call: the record stays INPROGRESS

idempotent_function(data_keyword_argument="order", config=config,
    persistence_store=DynamoDBPersistenceLayer(table_name=sys.argv[2], boto3_client=client))(provision_account)(
    order={"user": "u-7"})
"""


def _idempotent(fn, endpoint, table, **cfg):
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )

    kw = {"sort_key_attr": "sk"} if table == COMPOSITE else {}
    layer = DynamoDBPersistenceLayer(table_name=table, boto3_client=writer_client(endpoint), **kw)
    return idempotent_function(data_keyword_argument="order", persistence_store=layer, config=IdempotencyConfig(**cfg))(
        fn
    )


def _write_ledgers(endpoint: str) -> float:
    """Powertools writes both tables; returns the epoch seconds when it started."""
    w = writer_client(endpoint)
    create_table(w, SIMPLE)
    create_table(w, COMPOSITE, ("id", "sk"))
    t0 = time.time()
    charge = _idempotent(charge_card, endpoint, SIMPLE, payload_validation_jmespath="amount")
    for i in range(3):
        charge(order={"order_id": f"o-{i}", "amount": 10 + i})
    assert charge(order={"order_id": "o-0", "amount": 10}) == {"charge_id": "ch_o-0", "amount": 10}  # a replay
    refund = _idempotent(refund_payment, endpoint, SIMPLE)
    with pytest.raises(RuntimeError):
        refund(order={"order_id": "o-1"})
    _idempotent(send_receipt, endpoint, SIMPLE, expires_after_seconds=1)(order={"order_id": "o-2"})
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    subprocess.run([sys.executable, "-c", _DIE_IN_PROGRESS, endpoint, SIMPLE], check=True, env=env, timeout=60)
    stock = _idempotent(reserve_stock, endpoint, COMPOSITE)
    stock(order={"sku": "A-1"})
    stock(order={"sku": "B-2"})
    return t0


@pytest.fixture(scope="module")
def dynalite():
    """(endpoint URL, epoch seconds before the ledger was written) of a dynalite holding both ledgers."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in {**AWS_ENV, "AWS_LAMBDA_FUNCTION_NAME": LAMBDA, "AWS_DEFAULT_REGION": "us-east-1"}.items():
            mp.setenv(k, v)
        try:
            proc, endpoint = start_dynalite()
        except (RuntimeError, OSError) as e:
            msg = f"dynalite cannot run: {e}"
            if ON_CI:
                pytest.fail(msg + " (CI=true: server tests must run)")
            pytest.skip(msg)
        try:
            yield endpoint, _write_ledgers(endpoint)
        finally:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def aws(monkeypatch):
    """Dummy credentials in the environment (the AWS chain), no profile files, no instance metadata."""
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    for k, v in AWS_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)


def _url(endpoint: str, table: str = SIMPLE) -> str:
    return f"dynamodb://{table}?region=us-east-1&endpoint_url={endpoint}"


def _scan(capsys, url: str, *extra: str) -> tuple[int, dict | None, str]:
    from idemview.cli import main

    code = main(["scan", url, "--format", "json", *extra])
    cap = capsys.readouterr()
    return code, (json.loads(cap.out) if code == 0 else None), cap.err


def test_powertools_ledger_scans_with_expired_and_stuck(dynalite, aws, capsys):
    from idemview.cli import main

    endpoint, t0 = dynalite
    now = datetime.fromtimestamp(t0, UTC) + timedelta(minutes=10)
    code, out, err = _scan(capsys, _url(endpoint), "--now", now.isoformat())
    assert code == 0, err
    assert out["layout"] == "powertools-dynamodb"
    # 3 charges + the receipt + the dead provisioning; the failed refund left no item (Powertools deletes it)
    assert out["operations"] == 5 and out["attempts"] == 0
    assert out["counts"] == {"expired_key": 1, "stuck_in_progress": 1}
    by_kind = {f["kind"]: f for f in out["findings"]}
    assert by_kind["expired_key"]["scope"] == f"{LAMBDA}.{__name__}.send_receipt"
    assert by_kind["stuck_in_progress"]["scope"] == f"{LAMBDA}.__main__.provision_account"
    assert by_kind["stuck_in_progress"]["action"] == "access"
    assert out["snapshot"]["table"] == SIMPLE and out["snapshot"]["scanned"] == 5
    assert out["snapshot"]["key_schema"] == ["id"] and out["server_time"]
    assert {"replay_after_expiry", "duplicate_effect", "key_conflict", "unresolved_failure"} <= set(
        out["not_checkable"]
    )
    assert "expired_key" not in out["not_checkable"]
    # the same scan at the writing time: nothing has expired yet, the lease (30 s) not either
    code, out, _err = _scan(capsys, _url(endpoint), "--now", datetime.fromtimestamp(t0, UTC).isoformat())
    assert code == 0 and out["counts"] == {}
    assert main(["scan", _url(endpoint), "--now", now.isoformat()]) == 0
    text = capsys.readouterr().out
    assert "(dynamodb)" in text and "server's Date at the snapshot" in text and "5 items scanned" in text


def test_records_carry_powertools_values(dynalite, aws):
    from idemview.domain.model import Status
    from idemview.ledger.dynamodb_snapshot import open_dynamodb_ledger

    endpoint, t0 = dynalite
    ledger = open_dynamodb_ledger(_url(endpoint))
    ops = list(ledger.iter_operations())
    by_fn: dict[str, list] = {}
    for o in ops:
        by_fn.setdefault(o.scope.rsplit(".", 1)[-1], []).append(o)
    assert {k: len(v) for k, v in by_fn.items()} == {"charge_card": 3, "send_receipt": 1, "provision_account": 1}
    charges = sorted(by_fn["charge_card"], key=lambda o: o.response.value["charge_id"])
    assert [o.response.value for o in charges] == [{"charge_id": f"ch_o-{i}", "amount": 10 + i} for i in range(3)]
    c = charges[0]
    assert c.status == Status.COMPLETED and c.raw_status == "COMPLETED" and c.kind == f"{__name__}.charge_card"
    assert len(c.fingerprint) == 32 and len({o.fingerprint for o in charges}) == 3  # md5 of the amount
    assert len(c.key) == 32  # the md5 of the payload after "<function>#"
    # expiration (epoch s) = write time + expires_after_seconds (3600 by default)
    assert -2 <= c.expires_at.timestamp() - (t0 + 3600) < 60  # whole seconds (int() of the float)
    stuck = by_fn["provision_account"][0]
    assert stuck.status == Status.IN_PROGRESS and stuck.raw_status == "INPROGRESS" and stuck.response is None
    # in_progress_expiration (epoch ms) = write time + the context's 30,000 ms left
    assert -2 <= stuck.lock_expires_at.timestamp() - (t0 + 30) < 60
    assert ledger.detection.startswith("detected powertools-dynamodb (100%)")


def test_composite_key_form(dynalite, aws, capsys):
    from idemview.cli import main

    endpoint, t0 = dynalite
    assert main(["detect", _url(endpoint, COMPOSITE)]) == 0
    assert capsys.readouterr().out.startswith("powertools-dynamodb-composite\tconfidence 1.00")
    later = datetime.fromtimestamp(t0, UTC) + timedelta(hours=2)
    code, out, err = _scan(capsys, _url(endpoint, COMPOSITE), "--now", later.isoformat())
    assert code == 0, err
    assert out["layout"] == "powertools-dynamodb-composite" and out["operations"] == 2
    assert out["counts"] == {"expired_key": 2}  # the default hour has passed; the items are still there
    assert {f["scope"] for f in out["findings"]} == {f"{LAMBDA}.{__name__}.reserve_stock"}
    # the simple-key preset does not fit a composite key: exit 4, naming both keys
    assert main(["scan", _url(endpoint, COMPOSITE), "--layout", "powertools-dynamodb"]) == 4
    err = capsys.readouterr().err
    assert "expects the primary key (id) but table 'idempotency_shared' has (id, sk)" in err


def test_a_call_other_than_a_read_is_refused_before_sending(dynalite, aws):
    from idemview.ledger.dynamodb_snapshot import DynamoWriteRefused, connect_dynamodb, parse_dynamodb_url

    endpoint, _t0 = dynalite
    target = parse_dynamodb_url(_url(endpoint))
    client = connect_dynamodb(target)
    before = writer_client(endpoint).scan(TableName=SIMPLE)["Count"]
    with pytest.raises(DynamoWriteRefused, match="refuses to call DynamoDB DeleteItem"):
        client.delete_item(TableName=SIMPLE, Key={"id": {"S": "x"}})
    with pytest.raises(DynamoWriteRefused, match="PutItem"):
        client.put_item(TableName=SIMPLE, Item={"id": {"S": "planted"}})
    with pytest.raises(DynamoWriteRefused, match="DeleteTable"):
        client.delete_table(TableName=SIMPLE)
    assert writer_client(endpoint).scan(TableName=SIMPLE)["Count"] == before
    # the reads idemview needs pass the same hook
    assert client.describe_table(TableName=SIMPLE)["Table"]["TableName"] == SIMPLE
    assert client.get_item(TableName=SIMPLE, Key={"id": {"S": "nope"}}).get("Item") is None


def test_missing_table_exits_3_naming_it(dynalite, aws, capsys):
    from idemview.cli import main

    endpoint, _t0 = dynalite
    assert main(["scan", _url(endpoint, "no_such_table")]) == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "no DynamoDB table 'no_such_table' in us-east-1" in err and "check the table name" in err


def test_no_credentials_one_line_exit_3_and_no_secret_printed(dynalite, tmp_path):
    endpoint, _t0 = dynalite
    env = env_without_aws()
    r = subprocess.run(
        [sys.executable, "-m", "idemview", "scan", _url(endpoint)], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 3 and r.stdout == ""
    line = r.stderr.strip()
    assert line.count("\n") == 0 and "no AWS credentials" in line and "AWS_PROFILE" in line
    # credentials in the URL: refused (exit 2) without echoing them, nothing sent
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    r = subprocess.run(
        [sys.executable, "-m", "idemview", "scan", f"dynamodb://AKIAEXAMPLE:{secret}@{SIMPLE}?region=us-east-1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "must not carry credentials" in r.stderr
    assert secret not in r.stderr + r.stdout and "AKIAEXAMPLE" not in r.stderr
    # wrong credentials are not echoed either (dynalite accepts any: the environment's secret is checked
    # against every output of a scan and a missing-table error)
    env.update(AWS_ENV)
    for url in (_url(endpoint), _url(endpoint, "no_such_table")):
        r = subprocess.run(
            [sys.executable, "-m", "idemview", "scan", url, "--format", "json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode in (0, 3)
        assert AWS_ENV["AWS_SECRET_ACCESS_KEY"] not in r.stdout + r.stderr
        assert AWS_ENV["AWS_ACCESS_KEY_ID"] not in r.stdout + r.stderr


def test_progress_and_cancel_between_pages(dynalite, aws):
    from idemview.errors import Cancelled
    from idemview.ledger.dynamodb_snapshot import open_dynamodb_ledger
    from idemview.services.cancel import CancelToken

    endpoint, _t0 = dynalite
    seen: list[tuple[int, int]] = []
    ledger = open_dynamodb_ledger(_url(endpoint), batch=2, progress=lambda s, n: seen.append((s, n)))
    assert seen == [(2, 2), (4, 4), (5, 5)] and ledger.snapshot.pages == 3
    token = CancelToken()

    def stop(scanned, loaded):
        token.cancel()

    with pytest.raises(Cancelled):
        open_dynamodb_ledger(_url(endpoint), batch=2, progress=stop, token=token)


def test_generic_layout_from_a_file(dynalite, aws, capsys, tmp_path):
    """dynamodb-generic on items a service wrote by hand (a plain writing client), with a failure."""
    from idemview.cli import main

    endpoint, t0 = dynalite
    w = writer_client(endpoint)
    create_table(w, "orders_idem", ("pk",))
    exp = int(t0) + 60
    for pk, status in (("tenant-a#k1", "completed"), ("tenant-a#k2", "failed"), ("k3", "running")):
        w.put_item(
            TableName="orders_idem",
            Item={
                "pk": {"S": pk},
                "status": {"S": status},
                "kind": {"S": "send_invoice"},
                "attempts": {"N": "7" if pk.endswith("k2") else "1"},
                "expires_at": {"N": str(exp)},
                "created_at": {"S": "2026-12-01T10:00:00Z"},
            },
        )
    later = datetime.fromtimestamp(t0, UTC) + timedelta(hours=1)
    code, out, err = _scan(capsys, _url(endpoint, "orders_idem"), "--now", later.isoformat())
    assert code == 0, err
    assert out["layout"] == "dynamodb-generic" and out["operations"] == 3
    assert out["counts"] == {"expired_key": 3, "unresolved_failure": 1, "retry_storm": 1}
    fail = next(f for f in out["findings"] if f["kind"] == "unresolved_failure")
    assert (fail["scope"], fail["key"]) == ("tenant-a", "k2")
    bad = tmp_path / "bad.toml"
    bad.write_text('[layout]\nname = "x"\n[dynamodb]\nkey_schema = ["pk"]\nkey_attribute = "nope"\n')
    assert main(["scan", _url(endpoint, "orders_idem"), "--layout", str(bad)]) == 2
    assert "key_attribute 'nope' is not in key_schema" in capsys.readouterr().err


def test_python_api_and_the_gui_opener_read_the_same_snapshot(dynalite, aws):
    import idemview
    from idemview.services.cancel import CancelToken
    from idemview.services.session import OpenSpec, open_ledger

    endpoint, t0 = dynalite
    frames = idemview.open(_url(endpoint))
    ops = frames.operations()
    assert len(ops) == 5 and set(ops["status"]) == {"completed", "in_progress"}
    opened = open_ledger(OpenSpec(url=_url(endpoint), name="payments idempotency"), CancelToken())
    assert (opened.n_ops, opened.n_att, opened.read_only) == (5, 0, True)
    assert (
        opened.detection.startswith("detected powertools-dynamodb (100%)")
        and "snapshot of 5 records" in opened.detection
    )
    assert opened.where == _url(endpoint) and opened.ledger.name == "payments idempotency"
