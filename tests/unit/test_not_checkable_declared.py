"""Issue 25 round 2, the one "not checkable" list: what a backend declares it cannot check
(``Backend.not_checkable``) reaches ``ledger.source.not_checkable``, the findings engine never queries
those kinds, and ``scan --format json`` gives the backend's reason for each; the layout's own reasons
(``deletes_completed``) are kept beside. SQL and a dump (built-in backends declaring nothing: the
declaration is patched in), DynamoDB (its built-in declaration, on dynalite); Redis is in
tests/redis/test_not_checkable_redis.py."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

from idemview.backends import backend_named
from idemview.cli import main
from idemview.domain.model import FindingKind
from idemview.services.opener import OpenSpec, open_source
from tests.conftest import ON_CI
from tests.not_checkable_check import forbid, scan_json

K = FindingKind
NOW = "2026-11-30T12:00:00Z"
#: What the patched backend declares (two kinds the demo ledger has: a profile kind and a row-filter kind).
DECLARED = {
    K.DUPLICATE_EFFECT: "declared by the backend: this store keeps one record per key",
    K.EXPIRED_KEY: "declared by the backend: this store deletes expired records",
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    db = tmp_path_factory.mktemp("declared") / "demo.db"
    assert main(["demo", str(db), "--operations", "50", "--seed", "1"]) == 0
    return db


@pytest.fixture(scope="module")
def dump(demo, tmp_path_factory):
    from tests.unit.test_dumps import dump_sqlite

    out = tmp_path_factory.mktemp("declared-dump") / "demo"
    dump_sqlite(demo, out, "parquet")
    return out


def _declare(monkeypatch, backend: str) -> None:
    monkeypatch.setattr(backend_named(backend), "not_checkable", lambda ledger: dict(DECLARED))


@pytest.mark.parametrize("which", ["sql", "dump"])
def test_a_kind_the_backend_declares_never_runs_and_says_why(which, demo, dump, monkeypatch, capsys):
    target = str(demo if which == "sql" else dump)
    before = scan_json(capsys, target, "--now", NOW, "--layout", "idemview")
    assert before["counts"]["duplicate_effect"] > 0 and before["counts"]["expired_key"] > 0  # the ledger has them
    assert not set(before["not_checkable"]) & {k.value for k in DECLARED}

    _declare(monkeypatch, which)
    o = open_source(OpenSpec(url=target, name=""))
    try:
        assert o.backend.name == which and o.ledger.source.backend == which
        assert dict(o.ledger.source.not_checkable) == DECLARED
    finally:
        o.close()
    calls = forbid(monkeypatch, DECLARED)
    out = scan_json(capsys, target, "--now", NOW, "--layout", "idemview")
    assert calls == []
    for k, why in DECLARED.items():
        assert out["not_checkable"][k.value] == why
        assert k.value not in out["counts"]
    assert not any(f["kind"] in {k.value for k in DECLARED} for f in out["findings"])
    # every other kind is as before: the declaration takes out exactly its kinds
    assert out["counts"] == {k: n for k, n in before["counts"].items() if k not in {d.value for d in DECLARED}}
    assert {k: v for k, v in out["not_checkable"].items() if K(k) not in DECLARED} == before["not_checkable"]


def test_the_layouts_own_reasons_are_kept_beside_the_backends(tmp_path, monkeypatch):
    """A layout whose system deletes completed records (``deletes_completed``) rules out duplicate_intent
    and, without effect records, duplicate_effect by itself; a backend's declaration adds to it, its
    reason winning where both name a kind (duplicate_effect)."""
    from dataclasses import replace

    from sqlalchemy.engine import URL

    from idemview.findings.engine import not_checkable
    from idemview.layouts.layout import load_preset
    from idemview.ledger.connect import open_engine
    from idemview.ledger.reader import Ledger
    from idemview.ledger.source import LedgerSource

    db = tmp_path / "l.db"
    assert main(["demo", str(db), "--operations", "10", "--seed", "2"]) == 0
    lay = replace(load_preset("idemview"), deletes_completed="the worker deletes a finished job's row")
    eng = open_engine(URL.create("sqlite", database=str(db)))
    try:
        led = Ledger(eng, lay)
        own = dict(led.source.not_checkable)
        # no [effects] either: a key that succeeded twice leaves no row
        assert set(own) == {K.DUPLICATE_INTENT, K.DUPLICATE_EFFECT}
        assert all("the worker deletes a finished job's row" in why for why in own.values())
        led.source = LedgerSource("sql", None, dict(DECLARED))
        assert dict(led.source.not_checkable) == {K.DUPLICATE_INTENT: own[K.DUPLICATE_INTENT], **DECLARED}
        assert {k: not_checkable(led)[k] for k in led.source.not_checkable} == dict(led.source.not_checkable)
    finally:
        eng.dispose()


# ------------------------------------------------------------------------------------------- DynamoDB


@pytest.fixture(scope="module")
def dynalite():
    """(endpoint, table) of a dynalite holding a Powertools-shaped table: a completed item whose
    expiration passed (an expired_key, checkable) and one in progress."""
    from tests.dynalite_server import AWS_ENV, create_table, start_dynalite, writer_client

    with pytest.MonkeyPatch.context() as mp:
        for k, v in AWS_ENV.items():
            mp.setenv(k, v)
        try:
            proc, endpoint = start_dynalite()
        except (RuntimeError, OSError) as e:
            if ON_CI:
                pytest.fail(f"dynalite cannot run: {e} (CI=true: server tests must run)")
            pytest.skip(f"dynalite cannot run: {e}")
        try:
            w = writer_client(endpoint)
            create_table(w, "idem")
            past = int((datetime.now(UTC) - timedelta(hours=2)).timestamp())
            later = int((datetime.now(UTC) + timedelta(hours=2)).timestamp())
            w.put_item(
                TableName="idem",
                Item={"id": {"S": "pay.charge#a1"}, "status": {"S": "COMPLETED"}, "expiration": {"N": str(past)}},
            )
            w.put_item(
                TableName="idem",
                Item={"id": {"S": "pay.charge#b2"}, "status": {"S": "COMPLETED"}, "expiration": {"N": str(later)}},
            )
            yield endpoint, "idem"
        finally:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def aws(monkeypatch):
    from tests.dynalite_server import AWS_ENV

    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    for k, v in AWS_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)


def test_dynamodb_declares_its_kinds_they_never_run_and_the_scan_says_why(dynalite, aws, monkeypatch, capsys):
    from idemview.layouts.dynamodb import load_dynamodb_preset
    from idemview.ledger.dynamodb_snapshot import dynamodb_not_checkable

    endpoint, table = dynalite
    url = f"dynamodb://{table}?region=us-east-1&endpoint_url={endpoint}"
    want = dynamodb_not_checkable(load_dynamodb_preset("powertools-dynamodb"))
    declared = [K.REPLAY_AFTER_EXPIRY, K.DUPLICATE_EFFECT, K.KEY_CONFLICT]
    assert set(declared) <= set(want)
    o = open_source(OpenSpec(url=url, name=""))
    try:
        src = o.ledger.source
        assert (src.backend, src.dialect, src.store_layout.name) == ("dynamodb", "dynamodb", "powertools-dynamodb")
        assert dict(src.not_checkable) == backend_named("dynamodb").not_checkable(o.ledger) == want
        assert src.identity is not None and src.identity["database"] == table
    finally:
        o.close()
    calls = forbid(monkeypatch, declared)
    out = scan_json(capsys, url, "--layout", "powertools-dynamodb")
    assert calls == []
    for k in declared:
        assert out["not_checkable"][k.value] == want[k]
        assert k.value not in out["counts"]
    assert out["counts"] == {"expired_key": 1}  # a kind it can check ran and found the expired item


@pytest.mark.parametrize("which", ["sql", "dump"])
def test_a_finding_filter_on_a_declared_kind_selects_nothing_and_never_queries_it(
    which, demo, dump, monkeypatch, capsys, tmp_path
):
    """The one list holds for filters too: ``export --finding KIND`` (and the API's, the grid's filter)
    of a kind the backend declares not checkable selects no operation and never runs the kind's SQL,
    as the scan lists it as not checkable rather than finding it; a checkable kind still filters."""
    import csv

    import idemview

    target = str(demo if which == "sql" else dump)

    declared: dict = {}

    def exported(kind: str) -> int:
        out = tmp_path / f"{kind}.csv"
        args = ["export", target, "--layout", "idemview", "--now", NOW, "--finding", kind, "--out", str(out)]
        assert main([*args, "--force"]) == 0, capsys.readouterr().err
        err = capsys.readouterr().err
        why = declared.get(K(kind))  # said, so that an empty export does not read as "none found"
        assert (f"note: {kind} is not checkable on this ledger ({why}): it selects nothing" in err) == (why is not None)
        with open(out, newline="", encoding="utf-8") as f:
            return len(list(csv.DictReader(f)))

    assert exported("expired_key") > 0  # the ledger has them
    _declare(monkeypatch, which)
    declared.update(DECLARED)
    calls = forbid(monkeypatch, DECLARED)
    assert exported("expired_key") == 0 and exported("duplicate_effect") == 0
    assert calls == []
    assert exported("unresolved_failure") > 0  # a kind it can check still filters
    now = datetime.fromisoformat(NOW.replace("Z", "+00:00"))
    with idemview.open(target, "idemview") as frames:
        assert len(frames.operations({"findings": ["expired_key"]}, now=now)) == 0
        assert len(frames.operations({"findings": ["unresolved_failure"]}, now=now)) > 0
    assert calls == []
