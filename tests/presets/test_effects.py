"""Reconciliation with downstream effect records (issue #16): planted hidden successes, double
charges and orphans are found exactly, in the same database (SQLite, PostgreSQL, MariaDB: SQL joins)
and across databases (SQLite ledger + PostgreSQL effects, PostgreSQL ledger + MariaDB effects: a
streamed merge); a clean pair reports nothing."""

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import BigInteger, Column, DateTime, Integer, MetaData, String, Table, create_engine
from sqlalchemy.engine import make_url

from idemview.domain.model import FindingKind
from idemview.findings.engine import FindingEngine
from idemview.layouts.layout import LayoutError, load_preset, parse_layout
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.services.demo import reference_metadata
from tests.conftest import ANCHOR
from tests.ledgers import load
from tests.presets.test_planted_stripe_powertools_celery import stripe_clean, stripe_md, stripe_row

NOW = ANCHOR
H = timedelta(hours=1)
EFFECT_KINDS = {"duplicate_effect", "hidden_success", "orphan_effect"}
naive = lambda t: t.replace(tzinfo=None)  # noqa: E731


def charges_md() -> MetaData:
    md = MetaData()
    Table(
        "charges",
        md,
        Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
        Column("charge_id", String(64), nullable=False),
        Column("idem_key", String(128)),
        Column("amount", Integer),
        Column("currency", String(3)),
        Column("created_at", DateTime),
    )
    return md


CHARGES_SECTION = """
[effects]
table = "charges"
{connection}
link = {{ effect = "idem_key", operation = "key" }}
id = "id"
reference = "charge_id"
time = {{ column = "created_at", encoding = "datetime" }}
show = ["amount", "currency"]
"""


def reference_layout(connection: str | None = None, origin: str = "test"):
    conn = f'connection = "{connection}"' if connection else ""
    return parse_layout(load_preset("idemview").text + CHARGES_SECTION.format(connection=conn), origin)


def op(i, key, status, *, scope="s1", created=None, locked=None, lock_exp=None):
    created = created or NOW - 2 * H
    return {
        "id": i,
        "scope": scope,
        "idempotency_key": key,
        "kind": "payment.capture",
        "status": status,
        "attempt_count": 1,
        "created_at": naive(created),
        "expires_at": naive(created + 24 * H),
        "locked_at": naive(locked) if locked else None,
        "lock_expires_at": naive(lock_exp) if lock_exp else None,
        "completed_at": naive(created + timedelta(seconds=5)) if status == "succeeded" else None,
    }


def att(i, key, outcome, *, scope="s1", no=1):
    return {
        "id": i,
        "scope": scope,
        "idempotency_key": key,
        "attempt_no": no,
        "outcome": outcome,
        "started_at": naive(NOW - 2 * H),
        "finished_at": naive(NOW - 2 * H + timedelta(seconds=30)),
    }


def charge(i, key, *, at=None, ref=None):
    return {
        "id": i,
        "charge_id": ref or f"ch_{i:04d}",
        "idem_key": key,
        "amount": 1250,
        "currency": "usd",
        "created_at": naive(at or NOW - H),
    }


CLEAN_OPS = [
    op(1, "k-ok-1", "succeeded"),
    op(2, "k-ok-2", "succeeded"),
    op(3, "k-failed-no-charge", "failed"),
    op(4, "k-running", "running", locked=NOW - H / 60, lock_exp=NOW + H),
]
CLEAN_ATTS = [
    att(1, "k-ok-1", "succeeded"),
    att(2, "k-ok-2", "timed_out"),
    att(3, "k-ok-2", "succeeded", no=2),
    att(4, "k-failed-no-charge", "failed"),
]
CLEAN_CHARGES = [charge(1, "k-ok-1"), charge(2, "k-ok-2"), charge(3, "k-running")]

PLANTED_OPS = CLEAN_OPS + [
    op(10, "k-double", "succeeded"),  # charged twice
    op(11, "k-failed-but-charged", "failed"),  # hidden success (failed)
    op(12, "k-stuck-but-charged", "running", locked=NOW - 2 * H, lock_exp=NOW - H),  # hidden (stuck)
    op(13, "k-timeout-but-charged", "failed", scope="s2"),  # hidden (timed out + failed)
    op(14, "k-retried", "failed"),
    op(15, "k-retried", "succeeded"),  # failed then completed: clean
    op(16, "Case-Key", "succeeded"),  # case differs from the charge's
]
PLANTED_ATTS = CLEAN_ATTS + [
    att(10, "k-double", "succeeded"),
    att(11, "k-failed-but-charged", "failed"),
    att(12, "k-timeout-but-charged", "timed_out", scope="s2"),
    att(13, "k-retried", "failed"),
    att(14, "k-retried", "succeeded", no=2),
    att(15, "Case-Key", "succeeded"),
]
PLANTED_CHARGES = CLEAN_CHARGES + [
    charge(10, "k-double"),
    charge(11, "k-double"),
    charge(12, "k-failed-but-charged"),
    charge(13, "k-stuck-but-charged"),
    charge(14, "k-timeout-but-charged"),
    charge(15, "k-retried"),
    charge(16, "Case-Key"),
    charge(17, "case-key"),  # only the exact spelling matches
    charge(18, "k-never-recorded"),
    charge(19, "k-ok-1 "),  # a trailing space is another link (MariaDB's PAD SPACE would merge it)
]
PLANTED = {
    ("duplicate_effect", "s1", "k-double"),
    ("hidden_success", "s1", "k-failed-but-charged"),
    ("hidden_success", "s1", "k-stuck-but-charged"),
    ("hidden_success", "s2", "k-timeout-but-charged"),
    ("orphan_effect", "", "case-key"),
    ("orphan_effect", "", "k-never-recorded"),
    ("orphan_effect", "", "k-ok-1 "),
}


def load_reference(writable, ops, atts):
    md = reference_metadata()
    load(writable, md, {"operations": ops, "attempts": atts})


def effect_findings(ledger) -> tuple[set, list]:
    fs = FindingEngine(ledger, NOW).run()
    return {
        (f.kind.value, f.scope, f.key)
        for f in fs
        if f.kind.value in EFFECT_KINDS and ("effect record" in f.explanation or f.kind.value != "duplicate_effect")
    }, fs


def test_same_database_planted(db):
    writable, url = db
    load_reference(writable, PLANTED_OPS, PLANTED_ATTS)
    load(writable, charges_md(), {"charges": PLANTED_CHARGES})
    eng = open_engine(url)
    try:
        led = Ledger(eng, reference_layout())
        assert led.effects.same_database
        got, fs = effect_findings(led)
    finally:
        eng.dispose()
    assert got == PLANTED
    dup = next(f for f in fs if f.kind == FindingKind.DUPLICATE_EFFECT and f.key == "k-double")
    assert sorted(e["reference"] for e in dup.evidence if "reference" in e) == ["ch_0010", "ch_0011"]
    assert dup.evidence[0]["amount"] == 1250
    # the sentence's count travels as the evidence's last row (issue 19, item 19)
    assert dup.evidence[-1]["effect_records"] == 2 and "2 effect records" in dup.explanation
    stuck = next(f for f in fs if f.kind == FindingKind.HIDDEN_SUCCESS and f.key == "k-stuck-but-charged")
    assert "stuck in progress" in stuck.explanation and stuck.evidence[0]["reference"] == "ch_0013"


def test_same_database_clean(db):
    writable, url = db
    load_reference(writable, CLEAN_OPS, CLEAN_ATTS)
    load(writable, charges_md(), {"charges": CLEAN_CHARGES})
    eng = open_engine(url)
    try:
        got, _ = effect_findings(Ledger(eng, reference_layout()))
    finally:
        eng.dispose()
    assert got == set()


def _cross(ledger_w, ledger_url, fx_w, fx_url, ops, atts, charges, via_layout: bool):
    load_reference(ledger_w, ops, atts)
    load(fx_w, charges_md(), {"charges": charges})
    eng = open_engine(ledger_url)
    fx = None
    try:
        if via_layout:
            # a file named in a layout must lie in the layout file's folder (issue #19 item 3)
            origin = "test" if "://" in fx_url else str(Path(fx_url).parent / "layout.toml")
            led = Ledger(eng, reference_layout(connection=fx_url, origin=origin))
        else:
            fx = open_engine(fx_url)
            led = Ledger(eng, reference_layout(connection="ignored-when-an-engine-is-given"), effects_engine=fx)
        assert not led.effects.same_database
        got, _ = effect_findings(led)
        assert led.effects.describe()["dialect"] == make_url(fx_url).get_backend_name() if "://" in fx_url else True
    finally:
        eng.dispose()
        if fx is not None:
            fx.dispose()
        if led.effects is not None and via_layout:
            led.effects.engine.dispose()
    return got


@pytest.mark.postgres
@pytest.mark.parametrize("via_layout", [True, False])
def test_sqlite_ledger_postgresql_effects(tmp_path, pg_url, via_layout):
    lw = create_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    fw = create_engine(pg_url)
    try:
        got = _cross(
            lw, str(tmp_path / "ledger.db"), fw, pg_url, PLANTED_OPS, PLANTED_ATTS, PLANTED_CHARGES, via_layout
        )
        assert got == PLANTED
        clean = _cross(lw, str(tmp_path / "ledger.db"), fw, pg_url, CLEAN_OPS, CLEAN_ATTS, CLEAN_CHARGES, via_layout)
        assert clean == set()
    finally:
        lw.dispose()
        fw.dispose()


@pytest.mark.postgres
@pytest.mark.mysql
@pytest.mark.parametrize("dialect", ["mysql", "mariadb"])
def test_postgresql_ledger_mariadb_effects(pg_url, mysql_url, dialect):
    fx_url = make_url(mysql_url).set(drivername=f"{dialect}+pymysql").render_as_string(hide_password=False)
    lw, fw = create_engine(pg_url), create_engine(mysql_url)
    try:
        assert _cross(lw, pg_url, fw, fx_url, PLANTED_OPS, PLANTED_ATTS, PLANTED_CHARGES, True) == PLANTED
        assert _cross(lw, pg_url, fw, fx_url, CLEAN_OPS, CLEAN_ATTS, CLEAN_CHARGES, True) == set()
    finally:
        lw.dispose()
        fw.dispose()


def nocase_charges_md() -> MetaData:
    """charges whose link column compares loosely on SQLite (COLLATE NOCASE): its index sorts and
    groups 'Case-Key' with 'case-key', the reconciliation must not."""
    md = charges_md()
    md.tables["charges"].c.idem_key.type = String(128, collation="NOCASE")
    return md


def test_sqlite_ledger_sqlite_effects_nocase_column(tmp_path):
    from sqlalchemy import Index

    lw = create_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    fw = create_engine(f"sqlite:///{tmp_path / 'charges.db'}")
    md = nocase_charges_md()
    Index("ix_charges_idem_key", md.tables["charges"].c.idem_key)
    try:
        load_reference(lw, PLANTED_OPS, PLANTED_ATTS)
        load(fw, md, {"charges": PLANTED_CHARGES})
        eng, fx = open_engine(str(tmp_path / "ledger.db")), open_engine(str(tmp_path / "charges.db"))
        try:
            led = Ledger(eng, reference_layout(connection="ignored"), effects_engine=fx)
            assert not led.effects.same_database
            got, fs = effect_findings(led)
        finally:
            eng.dispose()
            fx.dispose()
    finally:
        lw.dispose()
        fw.dispose()
    assert got == PLANTED
    # the evidence of 'Case-Key' is not joined by the loose index: no duplicate, and the orphan
    # 'case-key' lists its own record only
    orphan = next(f for f in fs if f.kind == FindingKind.ORPHAN_EFFECT and f.key == "case-key")
    assert [e["reference"] for e in orphan.evidence if "reference" in e] == ["ch_0017"]
    assert orphan.evidence[-1]["effect_records"] == 1


@pytest.mark.postgres
@pytest.mark.mysql
@pytest.mark.parametrize("effects", ["postgresql", "sqlite"])
def test_mariadb_ledger_cross_effects(tmp_path, pg_url, mysql_url, effects):
    """A MySQL/MariaDB ledger (binary-cast keys: lookups instead of the (scope, key) join) merged with
    effects on another engine; its keys compare exactly though its collation would not."""
    fx_url = pg_url if effects == "postgresql" else str(tmp_path / "charges.db")
    lw = create_engine(mysql_url)
    fw = create_engine(pg_url if effects == "postgresql" else f"sqlite:///{tmp_path / 'charges.db'}")
    try:
        assert _cross(lw, mysql_url, fw, fx_url, PLANTED_OPS, PLANTED_ATTS, PLANTED_CHARGES, True) == PLANTED
        assert _cross(lw, mysql_url, fw, fx_url, CLEAN_OPS, CLEAN_ATTS, CLEAN_CHARGES, True) == set()
    finally:
        lw.dispose()
        fw.dispose()


REF_SECTION = """
[effects]
table = "charges"
connection = "ignored"
link = { effect = "charge_id", operation = "effect_ref" }
id = "id"
time = { column = "created_at", encoding = "datetime" }
"""


def _with_ref(row, ref):
    return {**row, "effect_ref": ref}


REF_OPS = [
    _with_ref(op(1, "k-ok", "succeeded"), "ch_ok"),
    _with_ref(op(2, "k-twice", "succeeded"), "ch_twice"),  # one reference charged twice
    _with_ref(op(3, "k-failed", "failed"), "ch_failed"),  # hidden success
    _with_ref(op(4, "k-split", "failed"), "ch_split_1"),  # two records, two references, one charge each:
    _with_ref(op(5, "k-split", "succeeded"), "ch_split_2"),  # two effects for one operation
    _with_ref(op(6, "k-none", "failed"), None),
]
REF_CHARGES = [
    charge(1, "x", ref="ch_ok"),
    charge(2, "x", ref="ch_twice"),
    charge(3, "x", ref="ch_twice"),
    charge(4, "x", ref="ch_failed"),
    charge(5, "x", ref="ch_split_1"),
    charge(6, "x", ref="ch_split_2"),
    charge(7, "x", ref="ch_lost"),
]


@pytest.mark.parametrize("effects", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_cross_link_on_effect_ref(tmp_path, request, effects):
    """Across databases with a link that is not the key: operations with several records are summed
    over all their links."""
    lw = create_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    fx_url = request.getfixturevalue("pg_url") if effects == "postgresql" else str(tmp_path / "charges.db")
    fw = create_engine(fx_url if effects == "postgresql" else f"sqlite:///{fx_url}")
    try:
        load_reference(lw, REF_OPS, [])
        load(fw, charges_md(), {"charges": REF_CHARGES})
        eng, fx = open_engine(str(tmp_path / "ledger.db")), open_engine(fx_url)
        try:
            layout = parse_layout(load_preset("idemview").text + REF_SECTION, "test")
            got, _ = effect_findings(Ledger(eng, layout, effects_engine=fx))
        finally:
            eng.dispose()
            fx.dispose()
    finally:
        lw.dispose()
        fw.dispose()
    assert got == {
        ("duplicate_effect", "s1", "k-twice"),
        ("duplicate_effect", "s1", "k-split"),
        ("hidden_success", "s1", "k-failed"),
        ("orphan_effect", "", "ch_lost"),
    }


# ------------------------------------------------------------------------ stripe-style + rides


def rides_md() -> MetaData:
    """rocket-rides-atomic schema.sql: rides (idempotency_key_id is a UNIQUE foreign key there)."""
    md = MetaData()
    Table(
        "rides",
        md,
        Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("idempotency_key_id", BigInteger, unique=True),
        Column("origin_lat", Integer),
        Column("target_lat", Integer),
        Column("stripe_charge_id", String(50), unique=True),
        Column("user_id", BigInteger, nullable=False),
    )
    return md


def ride(i, key_id, charge, *, user=1, at=None):
    return {
        "id": i,
        "created_at": naive(at or NOW - H),
        "idempotency_key_id": key_id,
        "origin_lat": 0,
        "target_lat": 1,
        "stripe_charge_id": charge,
        "user_id": user,
    }


def test_stripe_style_rides(db):
    writable, url = db
    rows = stripe_clean() + [
        # the charge went through, then the request died before 'finished': the key is stuck
        stripe_row(10, "stuck-key-0000000000001", 7, created=NOW - H, locked=NOW - H, point="charge_created"),
        # the ride exists but its charge was never made: no effect (where stripe_charge_id is not null)
        stripe_row(11, "ride-no-charge-00000001", 7, created=NOW - H, locked=NOW - H, point="ride_created"),
    ]
    load(writable, stripe_md(), {"idempotency_keys": rows})
    load(
        writable,
        rides_md(),
        {
            "rides": [
                ride(1, 1, "ch_ok_1"),
                ride(2, 10, "ch_stuck"),
                ride(3, 11, None),
                ride(4, 999, "ch_lost", at=NOW - 2 * H),  # its key row is gone: an orphan within 72 h
                ride(5, 998, "ch_old", at=NOW - 100 * H),  # older than the 72 h retention: not judged
                ride(6, None, "ch_reaped"),  # ON DELETE SET NULL: no link at all
            ]
        },
    )
    eng = open_engine(url)
    try:
        got, _ = effect_findings(Ledger(eng, load_preset("stripe-style")))
    finally:
        eng.dispose()
    assert got == {("hidden_success", "7", "stuck-key-0000000000001"), ("orphan_effect", "", "999")}


def test_optional_effects_table_missing_is_not_checkable(sqlite_db):
    writable, path = sqlite_db
    load(writable, stripe_md(), {"idempotency_keys": stripe_clean()})
    eng = open_engine(path)
    try:
        led = Ledger(eng, load_preset("stripe-style"))
        assert led.effects is None
        why = FindingEngine(led, NOW).unsupported()
        assert why[FindingKind.HIDDEN_SUCCESS] == "the effects table rides is not in the database"
        assert FindingKind.ORPHAN_EFFECT in why
    finally:
        eng.dispose()


def test_required_effects_table_missing_is_a_layout_mismatch(sqlite_db):
    writable, path = sqlite_db
    load_reference(writable, CLEAN_OPS, CLEAN_ATTS)
    eng = open_engine(path)
    try:
        with pytest.raises(LayoutError) as e:
            Ledger(eng, reference_layout())
        assert e.value.missing == ["table charges"]
    finally:
        eng.dispose()


@pytest.mark.parametrize(
    "section, message",
    [
        ('[effects]\nlink = { effect = "a", operation = "key" }\n', "[effects] table is required"),
        ('[effects]\ntable = "t"\n', "link = "),
        ('[effects]\ntable = "t"\nlink = { effect = "a" }\n', "link = "),
        (
            '[effects]\ntable = "t"\nlink = { effect = "a", operation = "key" }\ncolour = "red"\n',
            "unknown entries: colour",
        ),
        ('[effects]\ntable = "t"\nlink = { effect = "a", operation = "key" }\noptional = "yes"\n', "optional takes"),
    ],
)
def test_effects_section_errors(section, message):
    with pytest.raises(LayoutError) as e:
        parse_layout(load_preset("idemview").text + "\n" + section, "test")
    assert message in str(e.value)


def test_demo_effects_found_exactly(tmp_path):
    import sqlite3

    from idemview.layouts.layout import load_layout
    from idemview.services.demo import write_demo
    from idemview.services.demo_effects import effects_path_for, layout_path_for

    p = tmp_path / "demo.db"
    planted = write_demo(p, operations=400, seed=5)
    with sqlite3.connect(effects_path_for(p)) as c:
        stored = {tuple(r) for r in c.execute("SELECT kind, scope, idempotency_key FROM idemview_demo_planted")}
    want = stored  # what the effects file says was planted
    assert {k for k, _, _ in want} == EFFECT_KINDS and len(want) >= 6
    assert all((s, key) in planted.incidents[k] for k, s, key in want)
    eng = open_engine(str(p))
    try:
        led = Ledger(eng, load_layout(str(layout_path_for(p))))
        fs = FindingEngine(led, planted.anchor).run()
    finally:
        eng.dispose()
        led.effects.engine.dispose()
    effect_dups = {
        ("duplicate_effect", f.scope, f.key)
        for f in fs
        if f.kind == FindingKind.DUPLICATE_EFFECT and "effect records in charges" in f.explanation
    }
    got = {(f.kind.value, f.scope, f.key) for f in fs if f.kind.value in ("hidden_success", "orphan_effect")}
    # every double charge planted is found (ledger duplicates that charged twice show it as well)
    assert effect_dups >= {x for x in want if x[0] == "duplicate_effect"}
    assert got == {x for x in want if x[0] != "duplicate_effect"}
