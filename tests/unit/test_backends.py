"""Issue 25 item 1: a backend is one package behind one contract, found through the ``idemview.backends``
entry point group, and every path (CLI, API, the GUI's opener, a saved connection, ``idemview open NAME``)
opens a ledger through the one opener (:mod:`idemview.services.opener`).

The toy backend of ``tests/toybackend.py`` (``toy://PATH``, registered from outside the package through an
entry point) stands for a third party's: it is matched and opened by ``scan``, ``idemview.open`` and the GUI's
``open_ledger``, and reached from a saved connection of its own dialect."""

from __future__ import annotations

import ast
import json
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

from idemview.backends import backend_for, backend_for_dialect, backends, registry
from idemview.cli import main
from idemview.config import Connection, ConnectionStore
from idemview.errors import InputError
from idemview.services.cancel import CancelToken
from idemview.services.opener import spec_for_connection, spec_for_target
from tests import toybackend

ROOT = Path(__file__).resolve().parents[2]
NOW = "2026-11-30T12:00:00Z"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    assert main(["demo", str(path), "--operations", "200", "--seed", "7"]) == 0
    return path


@pytest.fixture
def toy(tmp_path, monkeypatch):
    toybackend.install_entry_point(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    added = registry.load_plugins()
    toybackend.OPENED.clear()
    try:
        yield added
    finally:
        registry.unregister("toy")


def test_the_registry_lists_the_four_builtins_from_the_entry_points():
    names = [b.name for b in backends()]
    assert set(names) >= {"sql", "dump", "redis", "dynamodb"}
    assert names[-1] == "sql"  # the catch-all is asked last
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["idemview.backends"]
    assert declared == registry.BUILTIN  # the fallback for stale metadata says what pyproject says
    installed = {ep.name: ep for ep in entry_points(group=registry.ENTRY_POINTS)}
    assert {k: installed[k].value for k in declared if k in installed} == declared
    for name in declared:  # the entry point, and the import a bundle without metadata uses, are one object
        assert installed[name].load() is registry._builtin(name) is registry.backend_named(name)


@pytest.mark.parametrize(
    ("target", "name"),
    [
        ("redis://cache:6379/0", "redis"),
        ("rediss://u@cache/2", "redis"),
        ("dynamodb://idempotency?region=eu-west-1", "dynamodb"),
        ("exports/celery_taskmeta.parquet", "dump"),
        ("exports/jobs.ndjson", "dump"),
        ("duckdb:///srv/dump", "dump"),
        ("postgresql://app@db/payments", "sql"),
        ("mariadb+pymysql://app@db/payments", "sql"),
        ("ledger.db", "sql"),
    ],
)
def test_a_target_finds_its_backend(target, name):
    assert backend_for(target).name == name


def test_a_folder_is_a_dump_and_a_url_object_keeps_its_backend(tmp_path):
    assert backend_for(str(tmp_path)).name == "dump"
    assert backend_for(URL.create("duckdb", database=str(tmp_path))).name == "dump"
    assert backend_for(URL.create("redis", host="h")).name == "redis"
    assert backend_for(URL.create("sqlite", database="x.db")).name == "sql"


@pytest.mark.parametrize(
    ("conn", "url"),
    [
        (Connection("local", "sqlite", database="/data/ledger.db"), "sqlite:////data/ledger.db"),
        (
            Connection(
                "pg", "postgresql", host="db", port=5433, database="pay", user="app", tls={"sslmode": "require"}
            ),
            "postgresql+psycopg://app@db:5433/pay?sslmode=require",
        ),
        (Connection("cache", "redis", host="cache", port=6380, database="1"), "redis://cache:6380/1"),
        (Connection("dump", "duckdb", database="/dumps/2026-11-30"), "duckdb:////dumps/2026-11-30"),
        (
            Connection(
                "ddb",
                "dynamodb",
                database="idempotency",
                tls={"region": "eu-west-1", "endpoint_url": "http://127.0.0.1:8000"},
            ),
            "dynamodb://idempotency?region=eu-west-1&endpoint_url=http://127.0.0.1:8000",
        ),
        (
            Connection("ddb-aws", "dynamodb", database="orders.v2", tls={"profile": "ops"}),
            "dynamodb://orders.v2?profile=ops",
        ),
    ],
)
def test_each_kind_of_saved_connection_round_trips_to_its_target(conn, url):
    ConnectionStore().upsert(conn)
    back = ConnectionStore().find(conn.name)
    assert back == conn  # every field, the backend's URL options included
    spec = spec_for_connection(back)
    assert str(spec.url) == url
    assert backend_for(spec.url) is backend_for_dialect(conn.dialect)
    if conn.dialect == "dynamodb":  # what the URL names is what DynamoDB's own parser reads
        from idemview.ledger.dynamodb_snapshot import parse_dynamodb_url

        t = parse_dynamodb_url(spec.url)
        assert (t.table, t.region, t.endpoint_url, t.profile) == (
            conn.database,
            conn.tls.get("region"),
            conn.tls.get("endpoint_url"),
            conn.tls.get("profile"),
        )


def test_the_dialog_fields_come_from_the_backend():
    kinds = {b.name: {f.key: f.kind for f in b.fields(b.choices[0].dialect)} for b in backends()}
    assert "password" not in kinds["dynamodb"] and "ssh" not in kinds["dynamodb"]  # the AWS chain only
    assert {"database", "tls.region", "tls.endpoint_url"} <= set(kinds["dynamodb"])
    assert kinds["dump"]["database"] == "path"  # a file or a folder
    assert kinds["sql"] == {"database": "file"}  # SQLite: the file alone
    assert {"host", "port", "user", "password", "ssh"} <= set(kinds["redis"])
    pg = {f.key for f in backend_for_dialect("postgresql").fields("postgresql")}
    assert "tls.sslmode" in pg and "tls.sslmode" not in {f.key for f in backend_for_dialect("mysql").fields("mysql")}


def test_ssh_applies_to_network_backends_only():
    from idemview.services.opener import OpenSpec, open_source

    for url in ("dynamodb://idempotency?region=eu-west-1", "exports/jobs.parquet"):
        with pytest.raises(InputError, match="--ssh does not apply"):
            open_source(OpenSpec(url=url, name="x", ssh="ops@bastion"))
    assert backend_for("postgresql://db/x").network and backend_for("redis://h").network


def test_a_third_party_backend_is_matched_and_opened_on_every_path(toy, demo, capsys, monkeypatch):
    """CLI scan and detect, the Python API, the GUI's open_ledger, a saved connection of the toy's dialect
    (CLI by name, ``idemview open NAME``, the start page's spec): all reach ToyBackend.open."""
    import idemview
    from idemview.services.session import open_ledger

    assert toy == ["toy"] and backend_for(f"toy://{demo}") is toybackend.BACKEND
    target = f"toy://{demo}"
    assert main(["scan", target, "--now", NOW, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["scan", str(demo), "--now", NOW, "--format", "json"]) == 0  # the same file through SQL
    direct = json.loads(capsys.readouterr().out)
    assert doc["operations"] == direct["operations"] > 0 and doc["counts"] == direct["counts"]
    assert main(["detect", target]) == 0 and capsys.readouterr().out.startswith("idemview\t")
    with idemview.open(target) as led:
        assert led.ledger.source.backend == "toy"
        assert len(led.operations(now=NOW)) == doc["operations"]
    o = open_ledger(spec_for_target(target), CancelToken())
    try:
        assert o.ledger.source.backend == "toy" and o.n_ops == doc["operations"] and o.where == "toy://…"
    finally:
        o.close()
    ConnectionStore().upsert(Connection("toy ledger", "toy", database=str(demo), layout="idemview"))
    assert main(["scan", "toy ledger", "--now", NOW, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["operations"] == doc["operations"]
    saved = spec_for_target("toy ledger")  # idemview open NAME, and the start page (spec_for_connection)
    assert saved.url == target and saved.layout == "idemview"
    o = open_ledger(saved, CancelToken())
    o.close()
    assert toybackend.OPENED == [target] * 5  # scan, api, gui, saved scan, saved gui (detect does not open)


def test_an_unknown_toy_target_without_the_plugin_is_not_toy(demo):
    assert backend_for(f"toy://{demo}").name == "sql"  # not registered here: SQLAlchemy says what is wrong


# ----------------------------------------------------------------- the one opener, by the source


#: Functions that open a ledger's store. Only the backends call them (through services/opener.py); the
#: modules listed beside them call them for another reason, said there.
OPENERS = {"open_redis_ledger", "open_dynamodb_ledger", "tunnel_target", "open_engine", "open_source"}
ALLOWED = {
    "open_source": {
        "idemview/services/opener.py",
        "idemview/services/session.py",
        "idemview/cli.py",
        "idemview/api.py",
    },
    "open_engine": {
        "idemview/backends/sql.py",
        "idemview/ledger/connect.py",  # its definition
        "idemview/ledger/effects.py",  # a layout's [effects] database: a second source, not a ledger
        "idemview/services/scanproc.py",  # the findings process reopens the URL the opener resolved
    },
    "tunnel_target": {"idemview/backends/base.py", "idemview/ledger/tunnel.py"},
    "open_redis_ledger": {"idemview/backends/redis.py"},
    "open_dynamodb_ledger": {"idemview/backends/dynamodb.py"},
}


def _calls(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in OPENERS:
                out.add(name)
    return out


def test_only_the_backends_open_a_store_and_only_the_opener_calls_them():
    found: dict[str, set[str]] = {name: set() for name in OPENERS}
    for p in sorted((ROOT / "idemview").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if rel.startswith(("idemview/ledger/redis_snapshot", "idemview/ledger/dynamodb_snapshot")):
            continue  # the snapshot modules (and their packages) define and test their own openers
        for name in _calls(p):
            found[name].add(rel)
    for name, where in found.items():
        assert where <= ALLOWED[name], f"{name} called outside the one opener: {sorted(where - ALLOWED[name])}"
    # the backends' own open is called by the opener alone
    for p in sorted((ROOT / "idemview").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        src = p.read_text("utf-8")
        if rel != "idemview/services/opener.py" and not rel.startswith("idemview/backends/"):
            assert "backend.open(" not in src and ".through(" not in src, rel


def test_no_front_end_probes_a_ledger_for_a_snapshot():
    for p in sorted((ROOT / "idemview").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if rel.startswith(("idemview/ledger/redis_snapshot", "idemview/ledger/dynamodb_snapshot")):
            continue
        assert 'getattr(ledger, "snapshot"' not in p.read_text("utf-8"), rel
        assert 'getattr(self.ledger, "snapshot"' not in p.read_text("utf-8"), rel


def test_the_thresholds_given_reach_a_third_party_backend_or_are_refused(toy, demo, capsys, monkeypatch):
    """``--retry-threshold``/``--lock-timeout``/``--retention`` given for a backend's ledger are applied
    (the toy, the minimal backend ARCHITECTURE.md shows, reads as SQL does with them); a backend whose
    ``open`` drops them is refused (exit 2) rather than read other than asked."""
    from idemview.ledger.reader import Ledger

    target = f"toy://{demo}"
    flags = ["--retry-threshold", "1", "--lock-timeout", "1", "--retention", "60"]
    counts = {}
    for t in (target, str(demo)):
        assert main(["scan", t, "--now", NOW, "--format", "json", *flags]) == 0, capsys.readouterr().err
        counts[t] = json.loads(capsys.readouterr().out)["counts"]
    assert counts[target] == counts[str(demo)]
    assert main(["scan", str(demo), "--now", NOW, "--format", "json"]) == 0
    assert counts[target]["retry_storm"] > json.loads(capsys.readouterr().out)["counts"]["retry_storm"]

    real_init = Ledger.__init__

    def forgetful(self, engine, layout, *a, **kw):  # a backend that builds its Ledger without the thresholds
        for k in ("lock_timeout_s", "retry_threshold", "retention_s"):
            kw.pop(k, None)
        real_init(self, engine, layout, *a, **kw)

    monkeypatch.setattr(Ledger, "__init__", forgetful)
    assert main(["scan", target, "--now", NOW, "--retry-threshold", "1"]) == 2
    err = capsys.readouterr().err
    assert "Toy store" in err and "a retry threshold" in err, err
