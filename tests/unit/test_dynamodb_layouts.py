"""DynamoDB pieces that need no server: the URL, the layouts, item decoding, what cannot be checked, and
the throttling retry/backoff path (the one case a botocore Stubber stands in for DynamoDB: dynalite
cannot throttle)."""

from __future__ import annotations

import pytest

from idemview.domain.model import FindingKind
from idemview.errors import EXIT_CONNECT, EXIT_LAYOUT, EXIT_USAGE
from idemview.layouts.dynamodb import load_dynamodb_preset, parse_dynamodb_layout
from idemview.layouts.layout import LayoutError
from idemview.ledger import dynamodb_snapshot as ds


@pytest.mark.parametrize(
    "url, table, region, endpoint",
    [
        ("dynamodb://idempotency?region=eu-west-1", "idempotency", "eu-west-1", None),
        (
            "dynamodb://t.b-1_x?region=us-east-1&endpoint_url=http://127.0.0.1:8000",
            "t.b-1_x",
            "us-east-1",
            "http://127.0.0.1:8000",
        ),
        ("dynamodb://abc", "abc", None, None),
    ],
)
def test_url_parses(url, table, region, endpoint):
    t = ds.parse_dynamodb_url(url)
    assert (t.table, t.region, t.endpoint_url) == (table, region, endpoint)
    assert ds.parse_dynamodb_url(t.url) == t


@pytest.mark.parametrize(
    "url, words",
    [
        ("dynamodb://AKIAX:se/cr+et@tbl?region=us-east-1", "must not carry credentials"),
        ("dynamodb://AKIAX:secret@tbl", "must not carry credentials"),
        ("dynamodb://ab?region=us-east-1", "3-255 letters"),
        ("dynamodb://tbl/x?region=us-east-1", "no path after it"),
        ("dynamodb://tbl?region=us-east-1&aws_secret_access_key=s3cr3t", "must not carry credentials"),
        ("dynamodb://tbl?region=us-east-1&consistent=no", "unknown dynamodb:// option"),
        ("dynamodb://tbl?region=EU WEST", "AWS region name"),
        ("dynamodb://tbl?endpoint_url=http://u:p@h:1", "endpoint_url must be"),
        ("dynamodb://tbl?endpoint_url=file:///etc/passwd", "endpoint_url must be"),
        # found by tester: the second region silently won
        ("dynamodb://tbl?region=us-east-1&region=eu-west-1", "option 'region' is given twice"),
    ],
)
def test_bad_urls_are_input_errors_without_the_secret(url, words):
    with pytest.raises(ds.DynamoUrlError) as e:
        ds.parse_dynamodb_url(url)
    assert words in str(e.value) and e.value.exit_code == EXIT_USAGE
    assert not any(s in str(e.value) for s in ("AKIAX", ":secret", "cr+et", "s3cr3t"))


def test_presets_use_powertools_attribute_names():
    simple = load_dynamodb_preset("powertools-dynamodb")
    assert simple.key_schema == ("id",) and (simple.expires_attribute, simple.expires_encoding) == (
        "expiration",
        "epoch_s",
    )
    assert simple.kv.fields["lock_expires_at"].fields == ("in_progress_expiration",)
    assert simple.kv.fields["lock_expires_at"].encoding == "epoch_ms"
    assert simple.kv.fields["fingerprint"].fields == ("validation",)
    assert simple.kv.fields["response"].fields == ("data",)
    assert simple.kv.status_map == {"INPROGRESS": "in_progress", "COMPLETED": "completed", "EXPIRED": "completed"}
    assert simple.split({"id": "checkout.app.handlers.charge#0f3a"}) == (
        "checkout.app.handlers.charge",
        "0f3a",
        "app.handlers.charge",
    )
    assert simple.split({"id": "payments#9b"}) == ("payments", "9b", "payments")  # a key_prefix
    assert simple.split({"id": 7}) is None and simple.split({}) is None
    composite = load_dynamodb_preset("powertools-dynamodb-composite")
    assert composite.key_schema == ("id", "sk") and composite.key_attribute == "sk"
    assert composite.split({"id": "idempotency#checkout", "sk": "checkout.h.f#ab"}) == ("checkout.h.f", "ab", "h.f")


@pytest.mark.parametrize(
    "extra, words",
    [
        ("", "[dynamodb] is required"),
        ('[dynamodb]\nkey_schema = ["id"]\nkey_attribute = "sk"\n', "is not in key_schema"),
        ('[dynamodb]\nkey_schema = ["a", "b", "c"]\n', "at most one sort key"),
        ('[dynamodb]\nkey_schema = ["id"]\nttl = 3\n', "unknown entries: ttl"),
        ('[dynamodb]\nkey_schema = ["id"]\nexpires_at = {attribute = "e", encoding = "days"}\n', "encoding 'days'"),
        ('[dynamodb]\nkey_schema = ["id"]\nkey_regex = "(?P<nokey>.*)"\n', "named capture (?P<key>"),
        ('[kv]\nmatch = "*"\n[dynamodb]\nkey_schema = ["id"]\n', "[kv] belongs to Redis layouts"),
        ('[dynamodb]\nkey_schema = ["id"]\n[lock]\nkey = "{scope}:{key}"\n', "Redis keys beside a record"),
    ],
)
def test_bad_layouts_say_what_is_wrong(extra, words):
    text = '[layout]\nname = "mine"\n[status]\nfield = "status"\n' + extra
    with pytest.raises(LayoutError) as e:
        parse_dynamodb_layout(text, "mine.toml")
    assert words in str(e.value) and e.value.exit_code == EXIT_USAGE


def test_item_decoding_covers_every_type():
    item = {
        "s": {"S": "x"},
        "n": {"N": "42"},
        "f": {"N": "1.5e3"},
        "b": {"B": b"\x00\xff"},
        "b64": {"B": "AP8="},  # the fast Scan parse leaves base64 text
        "t": {"BOOL": True},
        "z": {"NULL": True},
        "m": {"M": {"a": {"L": [{"N": "1"}, {"S": "two"}]}}},
        "ss": {"SS": ["b", "a"]},
        "ns": {"NS": ["3", "1"]},
    }
    assert ds.decode_item(item) == {
        "s": "x",
        "n": 42,
        "f": 1500.0,
        "b": "AP8=",
        "b64": "AP8=",
        "t": True,
        "z": None,
        "m": {"a": [1, "two"]},
        "ss": ["a", "b"],
        "ns": [1, 3],
    }
    with pytest.raises(ValueError):
        ds.decode_item({"x": {"Q": "?"}})


def test_expired_key_checkable_one_item_kinds_not():
    nc = ds.dynamodb_not_checkable(load_dynamodb_preset("powertools-dynamodb"))
    assert FindingKind.EXPIRED_KEY not in nc and FindingKind.STUCK_IN_PROGRESS not in nc
    assert "overwrites the expired item" in nc[FindingKind.REPLAY_AFTER_EXPIRY]
    assert "deletes the item when a call fails" in nc[FindingKind.UNRESOLVED_FAILURE]
    assert {FindingKind.DUPLICATE_EFFECT, FindingKind.KEY_CONFLICT, FindingKind.RETRY_STORM} <= set(nc)
    generic = ds.dynamodb_not_checkable(load_dynamodb_preset("dynamodb-generic"))
    assert FindingKind.UNRESOLVED_FAILURE not in generic and FindingKind.RETRY_STORM not in generic


def test_an_unreadable_expiry_is_counted_unknown_not_none():
    """Tester's notes: a non-numeric ``expiration`` was counted "no expiry", a negative epoch showed as
    "20789.0 days ago". Both are unreadable now: expiry unknown (NULL), counted apart from a missing one."""
    m = ds._ItemMapper(load_dynamodb_preset("powertools-dynamodb"))

    def item(k, exp):
        d = {"id": {"S": f"fn#{k}"}, "status": {"S": "COMPLETED"}}
        if exp is not None:
            d["expiration"] = exp
        return d

    counts, ops, _atts = m.page(
        [
            item("ok", {"N": "1700000000"}),
            item("text", {"S": "tomorrow"}),
            item("negative", {"N": "-1796000000"}),
            item("zero", {"N": "0"}),
            item("missing", None),
            item("numeric-text", {"S": "1700000000"}),  # a string where DynamoDB's TTL needs a number
        ]
    )
    assert counts == (6, 0, 0, 1, 4)
    expires = {op[2]: op[5] for op in ops}
    assert expires["ok"] == "2023-11-14 22:13:20.000000"
    assert [expires[k] for k in ("text", "negative", "zero", "missing", "numeric-text")] == [None] * 5


@pytest.fixture
def stubbed(monkeypatch):
    """A read-only idemview client whose answers come from a botocore Stubber (nothing is sent)."""
    from botocore.stub import Stubber

    for k, v in {"AWS_ACCESS_KEY_ID": "AKIDSTUB", "AWS_SECRET_ACCESS_KEY": "stub-secret"}.items():
        monkeypatch.setenv(k, v)
    target = ds.parse_dynamodb_url("dynamodb://idem?region=us-east-1&endpoint_url=http://127.0.0.1:9")
    client = ds.connect_dynamodb(target)
    with Stubber(client) as stub:
        yield target, client, stub


def _table():
    return {
        "Table": {
            "TableName": "idem",
            "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
            "ItemCount": 2,
        }
    }


def _items(*keys):
    return [
        {"id": {"S": f"checkout.app.pay#{k}"}, "status": {"S": "COMPLETED"}, "expiration": {"N": "1700000000"}}
        for k in keys
    ]


def test_throttling_is_retried_with_backoff_then_read(stubbed, monkeypatch):
    target, client, stub = stubbed
    monkeypatch.setattr(ds, "BACKOFF_BASE_S", 0.001)
    stub.add_response("describe_table", _table())
    stub.add_client_error("scan", service_error_code="ProvisionedThroughputExceededException", http_status_code=400)
    stub.add_client_error("scan", service_error_code="ThrottlingException", http_status_code=400)
    stub.add_response("scan", {"Items": _items("a1"), "LastEvaluatedKey": {"id": {"S": "checkout.app.pay#a1"}}})
    stub.add_client_error("scan", service_error_code="InternalServerError", http_status_code=500)
    stub.add_response("scan", {"Items": _items("b2")})
    engine, info = ds.snapshot(client, target, load_dynamodb_preset("powertools-dynamodb"))
    stub.assert_no_pending_responses()
    assert (info.retries, info.pages, info.loaded, info.item_count_estimate) == (3, 2, 2, 2)
    with engine.connect() as c:
        rows = c.exec_driver_sql("SELECT idempotency_key, expires_at FROM operations ORDER BY 1").all()
    assert rows == [("a1", "2023-11-14 22:13:20.000000"), ("b2", "2023-11-14 22:13:20.000000")]


def test_backoff_waits_grow_and_are_capped_then_one_line(stubbed, monkeypatch):
    target, client, stub = stubbed
    waits: list[float] = []
    monkeypatch.setattr(ds.random, "uniform", lambda lo, hi: hi)  # the ceiling of each full-jitter wait
    for _ in range(6):
        stub.add_client_error("scan", service_error_code="RequestLimitExceeded", http_status_code=400)
    with pytest.raises(ds.Throttled) as e:
        ds.call_with_backoff(client, "scan", {"TableName": "idem"}, target=target, sleep=waits.append, attempts=6)
    msg = str(e.value)
    assert e.value.exit_code == EXIT_CONNECT and "\n" not in msg
    assert "throttled scan on table 'idem'" in msg and "6 times (RequestLimitExceeded)" in msg
    assert "read capacity" in msg and "stub-secret" not in msg
    # five waits of 0.05, 0.1, 0.2, 0.4, 0.8 s, slept in slices of at most 0.2 s
    assert round(sum(waits), 6) == round(0.05 + 0.1 + 0.2 + 0.4 + 0.8, 6) and max(waits) <= 0.2


def test_other_errors_are_not_retried(stubbed):
    target, client, stub = stubbed
    stub.add_client_error("describe_table", service_error_code="ResourceNotFoundException", http_status_code=400)
    with pytest.raises(ds.TableNotFound) as e:
        ds.describe_table(client, target)
    assert e.value.exit_code == EXIT_CONNECT and "no DynamoDB table 'idem' in us-east-1" in str(e.value)
    stub.add_client_error("scan", service_error_code="AccessDeniedException", http_status_code=400)
    with pytest.raises(ds.CannotConnect, match="grant dynamodb:DescribeTable and dynamodb:Scan"):
        ds.call_with_backoff(client, "scan", {"TableName": "idem"}, target=target)
    stub.assert_no_pending_responses()


def test_a_layout_whose_key_differs_does_not_fit(stubbed):
    target, client, stub = stubbed
    stub.add_response("describe_table", _table())
    with pytest.raises(LayoutError) as e:
        ds.snapshot(client, target, load_dynamodb_preset("powertools-dynamodb-composite"))
    assert e.value.exit_code == EXIT_LAYOUT and "expects the primary key (id, sk)" in str(e.value)


def test_no_region_and_an_unknown_profile_are_one_line(monkeypatch, capsys):
    from idemview.cli import main

    for k in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    assert main(["scan", "dynamodb://idempotency"]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        "idemview: no AWS region for dynamodb://idempotency: add ?region=REGION to the URL or set AWS_REGION\n"
    )
    assert main(["scan", "dynamodb://idempotency?region=eu-west-1&profile=nope"]) == EXIT_CONNECT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "AWS profile 'nope' is not in the AWS config files" in err


@pytest.mark.parametrize(
    "url, what_to_do",
    [
        ("dynamodb://AKIAX:secret@tbl?region=us-east-1", "(remove the part before '@'); use the AWS chain"),
        ("dynamodb://tbl?region=us-east-1&aws_secret_access_key=s3cr3t", "(remove the option); use the AWS chain"),
    ],
)
def test_a_credential_in_the_url_says_what_to_remove_through_the_cli(url, what_to_do, capsys):
    # found by tester: "carries no credentials: remove ..." read as "credentials: <secret>" to the CLI's
    # message masker, which printed "[credential#…]" in place of what to remove
    from idemview.cli import main

    assert main(["scan", url]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and what_to_do in err and "[credential#" not in err
    assert "AKIAX" not in err and "s3cr3t" not in err and ":secret" not in err


def test_an_unknown_profile_from_aws_profile_is_named(monkeypatch, capsys):
    # found by tester: AWS_PROFILE=nope printed "AWS profile None is not in the AWS config files"
    from idemview.cli import main

    monkeypatch.setenv("AWS_PROFILE", "nope-from-env")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    assert main(["scan", "dynamodb://idempotency?region=eu-west-1"]) == EXIT_CONNECT
    err = capsys.readouterr().err
    assert err == (
        "idemview: AWS profile 'nope-from-env' (from AWS_PROFILE) is not in the AWS config files (~/.aws/config):"
        " check the profile name\n"
    )
