"""Issue 27 item 2: the intent reference is a body hash on every engine (DESIGN §2), SQLite included,
through one chokepoint: every SQLite connection idemview opens carries idemview's ``md5``
(:mod:`idemview.ledger.sqlite_functions`).

- the function itself equals ``hashlib.md5`` (text as UTF-8, blobs as bytes, NULL as NULL);
- no module opens SQLite another way (a static check over the package: a new connection path that
  skips :func:`connect_sqlite` fails here), and every connection made while idemview opens a SQLite
  ledger, a memory snapshot (Redis, DynamoDB) or writes the demo answers ``md5``;
- the same rows give the same ``intent_ref`` on SQLite, PostgreSQL, MySQL/MariaDB under both dialect
  names and a DuckDB dump (Parquet) of them: one Python oracle for all.
"""

from __future__ import annotations

import ast
import hashlib
import pickle
import sqlite3
from datetime import timedelta
from pathlib import Path

import idemview
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.ledger.sqlite_functions import connect_sqlite
from tests.conftest import ANCHOR
from tests.ledgers import load
from tests.presets.test_planted_job_queues import dcr_md, dcr_row
from tests.presets.test_planted_stripe_powertools_celery import cel_row, celery_md

M = timedelta(minutes=1)
US = "\x1f"
PKG = Path(idemview.__file__).resolve().parent


def _md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


def test_md5_equals_hashlib_for_text_blobs_numbers_and_null():
    c = connect_sqlite(":memory:")
    try:
        q = "SELECT md5(?)"
        assert c.execute(q, ("",)).fetchone()[0] == "d41d8cd98f00b204e9800998ecf8427e"
        assert c.execute(q, ("héllo €\U0001f600",)).fetchone()[0] == _md5("héllo €\U0001f600".encode())
        assert c.execute(q, (b"\x80\x04\xff",)).fetchone()[0] == _md5(b"\x80\x04\xff")
        assert c.execute(q, (1999,)).fetchone()[0] == _md5(b"1999")
        assert c.execute(q, (None,)).fetchone()[0] is None
        # a TEXT cell that is not UTF-8, handed over as its bytes (what intent_hash does): no error
        c.execute("CREATE TABLE t (v TEXT)")
        c.execute("INSERT INTO t VALUES (CAST(x'61ff62' AS TEXT))")
        assert c.execute("SELECT md5(CAST(v AS BLOB)) FROM t").fetchone()[0] == _md5(b"a\xffb")
        # deterministic: allowed where SQLite requires it (an index on an expression)
        c.execute("CREATE INDEX ix ON t (md5(CAST(v AS BLOB)))")
    finally:
        c.close()


# create_engine without a creator= is allowed only where the engine is not SQLite's: (file, function)
_ENGINES_WITHOUT_CREATOR = {
    ("ledger/connect.py", "open_engine"),  # another dialect (SQLite goes to _sqlite_engine)
    ("ledger/connect.py", "_postgresql_engine"),
    ("ledger/connect.py", "_mysql_engine"),
}


class _Paths(ast.NodeVisitor):
    def __init__(self, rel: str) -> None:
        self.rel, self.func, self.bad = rel, "<module>", []

    def _in(self, node) -> None:
        saved, self.func = self.func, node.name
        self.generic_visit(node)
        self.func = saved

    visit_FunctionDef = visit_AsyncFunctionDef = _in

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module == "sqlite3" and any(a.name in ("connect", "Connection") for a in node.names):
            self.bad.append(f"{self.rel}:{node.lineno} imports sqlite3.connect/Connection")

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
        if owner == "sqlite3" and name in ("connect", "Connection"):
            self.bad.append(f"{self.rel}:{node.lineno} sqlite3.{name}() (use sqlite_functions.connect_sqlite)")
        if name == "create_engine" and not any(k.arg == "creator" for k in node.keywords):
            if (self.rel, self.func) not in _ENGINES_WITHOUT_CREATOR:
                self.bad.append(f"{self.rel}:{node.lineno} create_engine without creator=connect_sqlite-based")
        self.generic_visit(node)


def test_no_module_opens_sqlite_but_through_connect_sqlite():
    bad: list[str] = []
    seen = 0
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG).as_posix()
        if rel == "ledger/sqlite_functions.py":
            continue
        v = _Paths(rel)
        v.visit(ast.parse(p.read_text(encoding="utf-8")))
        bad += v.bad
        seen += 1
    assert seen > 100  # the walk did see the package
    assert bad == []


def test_the_static_check_sees_a_new_path():
    """The variant: the visitor flags each way a new module could open SQLite on its own."""
    src = (
        "import sqlite3\nfrom sqlalchemy import create_engine\n"
        "def f():\n    sqlite3.connect('x')\n    create_engine('sqlite:///x')\n"
        "from sqlite3 import connect\n"
    )
    v = _Paths("new/module.py")
    v.visit(ast.parse(src))
    assert len(v.bad) == 3


def test_every_connection_made_while_opening_sqlite_ledgers_has_md5(tmp_path, monkeypatch):
    """Every sqlite3 connection made while idemview opens a SQLite ledger and reads intent_ref, builds a
    memory snapshot (what Redis and DynamoDB snapshots are) and writes the demo answers md5."""
    from idemview.ledger import memory_snapshot as mem
    from idemview.services.demo import write_demo

    made: list[sqlite3.Connection] = []
    real = sqlite3.connect

    def spy(*a, **k):
        c = real(*a, **k)
        made.append(c)
        return c

    path = tmp_path / "celery.db"
    w = _writable(path)
    load(w, celery_md(), {"celery_taskmeta": [cel_row(1, "t1", "SUCCESS", ANCHOR)]})
    w.dispose()
    monkeypatch.setattr(sqlite3, "connect", spy)
    eng = open_engine(str(path))
    uri, keeper, _ix = mem.new_memory_db("md5test")
    snap = mem.memory_engine(uri, keeper)
    try:
        led = Ledger(eng, load_preset("celery"))
        assert led.records("", "t1")[0].intent_ref == _md5(
            ("billing.tasks.charge" + US + b"[]".hex() + US + b'{"order": 1}'.hex()).encode()
        )
        with snap.connect() as c:
            assert c.exec_driver_sql("SELECT md5('a')").scalar() == _md5(b"a")
        write_demo(tmp_path / "demo.db", operations=20)
        assert len(made) >= 4
        for c in made:
            try:
                got = c.execute("SELECT md5('x')").fetchone()[0]
            except sqlite3.ProgrammingError:  # closed already (the demo's): it was checked by its use
                continue
            assert got == _md5(b"x")
    finally:
        eng.dispose()
        snap.dispose()
        keeper.close()


def _writable(path: Path):
    from sqlalchemy import create_engine

    return create_engine(f"sqlite:///{path}")


def _celery_rows() -> tuple[list[dict], dict[str, str | None]]:
    """Rows that differ in what an engine could hash differently, and their reference by the oracle:
    md5 of name, args, kwargs joined by 0x1F, NULL as '', the binary columns as lowercase hex."""
    pickled = pickle.dumps({"amount": 1999, "who": "zoë"})  # not UTF-8
    cases = [
        ("ascii", "billing.tasks.charge", b'["cus_9"]', b'{"cents": 1999}'),
        ("unicode", "billing.tâches.€", '["zoë", "\U0001f600"]'.encode(), b"{}"),
        ("pickled", "billing.tasks.charge", pickled, None),
        ("null-args", "mail.send", None, b'{"to": "a"}'),
        ("empty-args", "mail.send", b"", b'{"to": "a"}'),
        ("null-name", None, b'["x"]', b"{}"),
        ("no-args", "maint.tick", b"[]", b"{}"),  # unless_empty: no intent
    ]
    rows, want = [], {}
    for i, (tid, name, args, kwargs) in enumerate(cases, start=1):
        r = cel_row(i, tid, "SUCCESS", ANCHOR - i * M)
        r.update(name=name, args=args, kwargs=kwargs)
        rows.append(r)
        body = US.join([name or "", (args or b"").hex(), (kwargs or b"").hex()])
        want[tid] = None if tid == "no-args" else _md5(body.encode())
    return rows, want


def _refs(url: str, preset: str, keys) -> dict[str, str | None]:
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset(preset))
        return {k: led.records("", k)[0].intent_ref for k in keys}
    finally:
        eng.dispose()


def test_celery_intent_ref_is_one_md5_on_every_engine(dialect_db, tmp_path):
    """SQLite, postgresql+psycopg, mysql+pymysql, mariadb+pymysql: the oracle's value, row for row;
    on SQLite also a Parquet dump of the same file (DuckDB's md5)."""
    writable, url = dialect_db
    rows, want = _celery_rows()
    load(writable, celery_md(), {"celery_taskmeta": rows})
    assert _refs(url, "celery", want) == want
    if writable.dialect.name == "sqlite":
        from tests.unit.test_dumps import dump_sqlite

        dump_sqlite(Path(url), tmp_path / "dump", "parquet")
        assert _refs(str(tmp_path / "dump"), "celery", want) == want


def test_django_celery_results_text_columns_hash_alike_on_every_engine(dialect_db):
    """The variant with text columns (django-celery-results keeps name and arguments as text)."""
    writable, url = dialect_db
    texts = {"t-ascii": ("shop.capture", "\"('ord_7',)\""), "t-uni": ("shop.zoë", "\"('€ 5', '\U0001f600')\"")}
    rows = []
    for i, (tid, (name, args)) in enumerate(texts.items(), start=1):
        r = dcr_row(i, tid, "SUCCESS", ANCHOR - 2 * M, ANCHOR - M)
        r.update(task_name=name, task_args=args, task_kwargs='"{}"', periodic_task_name=None)
        rows.append(r)
    load(writable, dcr_md(), {"django_celery_results_taskresult": rows})
    want = {tid: _md5(US.join([n, a, '"{}"']).encode()) for tid, (n, a) in texts.items()}
    assert _refs(url, "django-celery-results", want) == want
