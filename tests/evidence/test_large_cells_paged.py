"""Cells read from the database in pages (``idemview.evidence.pages``, issue 27 item 1) on SQLite,
``postgresql+psycopg``, ``mysql+pymysql`` and ``mariadb+pymysql``: the page size and threshold are
shrunk so that page edges fall inside a multi-byte character, inside a secret, inside a JSON string
escape (``\\uXXXX`` and a surrogate pair), and the export equals the whole-cell mask byte for byte. A
NULL cell stays NULL; a cell that changes length between the SELECT and its pages stops the export
with a clear message (nothing published).
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from datetime import UTC, datetime

import pytest
from sqlalchemy import create_engine, text

from idemview.cli import main as cli_main
from idemview.domain.filters import Filter
from idemview.evidence import pages
from idemview.evidence.plan import export_evidence
from idemview.evidence.writer import ColumnSpec, _make_formatter
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.rawtext import RawText
from idemview.ledger.reader import Ledger
from idemview.masking import stream
from idemview.masking.masker import Masker
from idemview.services.demo import reference_metadata

KEY = b"P" * 32
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SECRETS = ("alice@example.com", "4111 1111 1111 1111", "abcDEF1234567890xyzQRS", "s3cretpw9")
PAGE = 1000  # characters per page in these tests


def _doc(n: int) -> str:
    """A JSON document whose strings hold multi-byte characters, \\u escapes, surrogate pairs and secrets."""
    one = '{"id":"it_%05d","note":"caf\\u00e9 \u00e9\u00e8 \U0001f600 \\ud83d\\ude00 x","contact":"%s","q":%d}'
    items = [one % (i, "alice@example.com" if i % 7 == 3 else "nobody", i) for i in range(n)]
    return '{"items":[' + ",".join(items) + '],"password":"s3cretpw9","tail":"\\ud83d\\ude00"}'


def _text(n: int) -> str:
    unit = (
        "h\u00e9llo \U0001f600 alice@example.com paid 4111 1111 1111 1111; "
        "Authorization: Bearer abcDEF1234567890xyzQRS\n"
    )
    return (unit * (n // len(unit) + 1))[:n]


def _cells() -> dict[str, tuple[str | None, str | None]]:
    doc = _doc(300)
    flat = json.dumps(_text(40_000), ensure_ascii=False)
    escaped = json.dumps(_text(30_000))  # every non-ASCII character a \\u escape (surrogate pairs too)
    return {
        "doc": (doc, _text(25_000)),
        "flat": (flat, None),
        "escaped": (escaped, "short"),
        "null": (None, None),
        "broken": (doc[:-3], None),
    }


def _load(eng, cells) -> None:
    md = reference_metadata()
    md.drop_all(eng)
    md.create_all(eng)
    with eng.begin() as c:
        if eng.dialect.name in ("mysql", "mariadb"):  # the reference DDL's TEXT holds 64 KiB there
            c.execute(text("ALTER TABLE operations MODIFY response_body LONGTEXT, MODIFY error LONGTEXT"))
        for i, (k, (body, err)) in enumerate(cells.items(), 1):
            c.execute(
                text(
                    "INSERT INTO operations (id, scope, idempotency_key, kind, status, attempt_count, "
                    "created_at, response_body, error) VALUES (:i, 's', :k, 'pay', 'succeeded', 1, "
                    "'2026-11-30 11:00:00', :b, :e)"
                ),
                {"i": i, "k": k, "b": body, "e": err},
            )


def _small_pages(monkeypatch) -> list[int]:
    """Pages of PAGE characters for cells of 5,000+ characters; the masked pieces small too. Returns a
    list that counts page reads."""
    monkeypatch.setattr(pages, "PAGE_MIN", 5000)
    monkeypatch.setattr(pages, "PAGE_CHARS", PAGE)
    monkeypatch.setattr(stream, "DROP", 2000)
    monkeypatch.setattr(stream, "TEXT_PIECE", 4000)
    monkeypatch.setattr(stream, "CARRY", 300)
    monkeypatch.setattr(stream, "SMALL", 600)
    reads = [0]
    real = pages.PageReader.pages

    def counted(self, cell):
        for p in real(self, cell):
            reads[0] += 1
            yield p

    monkeypatch.setattr(pages.PageReader, "pages", counted)
    return reads


def _export(url: str) -> tuple[str, dict]:
    led = Ledger(open_engine(url), load_preset("idemview"))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = f"{tmp}/cells.csv"
            m = Masker(key=KEY)
            export_evidence(led, Filter(), path, now=NOW, masker=m)
            return open(path, encoding="utf-8", newline="").read(), m.counts
    finally:
        led.engine.dispose()


def _rows(data: str) -> list[dict[str, str]]:
    old = csv.field_size_limit(1 << 26)
    try:
        return list(csv.DictReader(io.StringIO(data, newline="")))
    finally:
        csv.field_size_limit(old)


def test_paged_cells_equal_the_whole_cell_mask_on_every_engine(dialect_db, monkeypatch):
    eng, url = dialect_db
    cells = _cells()
    _load(eng, cells)
    whole, whole_counts = _export(url)  # every cell selected whole (threshold untouched)
    reads = _small_pages(monkeypatch)
    data, counts = _export(url)
    assert reads[0] > 100  # the cells did come in pages
    assert data == whole
    assert counts == whole_counts
    rows = {r["idempotency_key"]: r for r in _rows(data)}
    ref = Masker(key=KEY)
    as_json = _make_formatter(ColumnSpec("response", "json"), ref, "")
    as_text = _make_formatter(ColumnSpec("error"), ref, "")
    for k, (body, err) in cells.items():
        want = "" if body is None else as_json(body if k == "broken" else json.loads(body))
        assert rows[k]["response"] == want, k
        assert rows[k]["error"] == ("" if err is None else as_text(err)), k
    for s in SECRETS:
        assert s not in data, s
    assert "\U0001f600" in rows["escaped"]["response"]  # a surrogate pair decoded as one character


def _wal(eng) -> None:
    """SQLite: WAL, so that a writer may commit while the export reads (with a rollback journal the
    export's read lock makes it wait: no change can happen mid-export at all)."""
    if eng.dialect.name == "sqlite":
        with eng.connect() as c:
            c.exec_driver_sql("PRAGMA journal_mode = WAL")


def _rewrite_at_page(monkeypatch, eng, at: int, sql: str) -> None:
    """Run ``sql`` (committed, another connection) when page ``at`` of a cell is about to be read."""
    real = pages.PageReader.pages

    def rewritten(self, cell):
        for i, p in enumerate(real(self, cell)):
            yield p
            if i + 1 == at:
                with eng.begin() as c:
                    c.execute(text(sql))

    def first(self, cell):
        if at == 0:
            with eng.begin() as c:
                c.execute(text(sql))
        yield from rewritten(self, cell)

    monkeypatch.setattr(pages.PageReader, "pages", first)


def test_a_cell_rewritten_between_its_pages_comes_out_in_one_version(dialect_db, monkeypatch):
    eng, url = dialect_db
    _load(eng, {"doc": (_doc(300), None)})
    _wal(eng)
    before, _ = _export(url)
    _small_pages(monkeypatch)
    # same length, other text, committed after the cell's second page: the pages are one snapshot
    _rewrite_at_page(
        monkeypatch, eng, 2, "UPDATE operations SET response_body = REPLACE(response_body, 'nobody', 'nobodx')"
    )
    data, _ = _export(url)
    assert data == before
    with eng.connect() as c:
        assert "nobodx" in c.execute(text("SELECT response_body FROM operations")).scalar()


def test_a_cell_that_changed_length_before_its_pages_is_refused_or_whole(dialect_db, monkeypatch, tmp_path, capsys):
    eng, url = dialect_db
    _load(eng, {"doc": (_doc(300), None)})
    _wal(eng)
    grow = "UPDATE operations SET response_body = CONCAT(response_body, ' ')"
    if eng.dialect.name == "sqlite":
        grow = "UPDATE operations SET response_body = response_body || ' '"
    elif eng.dialect.name == "postgresql":
        grow = "UPDATE operations SET response_body = response_body || ' '"
    _small_pages(monkeypatch)
    _rewrite_at_page(monkeypatch, eng, 0, grow)
    led = Ledger(open_engine(url), load_preset("idemview"))
    out = tmp_path / "out.csv"
    try:
        if eng.dialect.name == "sqlite":
            # SQLite's probe gives no length (it would load the text twice): the newer version, whole
            export_evidence(led, Filter(), str(out), now=NOW, masker=Masker(key=KEY))
            monkeypatch.undo()
            again, _ = _export(url)
            assert open(out, encoding="utf-8", newline="").read() == again
            return
        with pytest.raises(pages.CellChanged, match=r"response of record 1 changed while it was exported"):
            export_evidence(led, Filter(), str(out), now=NOW, masker=Masker(key=KEY))
    finally:
        led.engine.dispose()
    assert not out.exists()
    assert [p for p in os.listdir(tmp_path) if p.startswith("out")] == []
    # the CLI says it in one line, exit code 2, nothing written
    rc = cli_main(["export", url, "--rows", "operations", "--out", str(out), "--now", NOW.isoformat()])
    err = capsys.readouterr().err
    assert rc == 2
    assert "changed while it was exported" in err and "export it again" in err and "Traceback" not in err
    assert not out.exists()


def _export_manifest(url: str) -> tuple[str, dict, dict]:
    """:func:`_export` and the manifest, without its ``exported_at`` (wall clock)."""
    led = Ledger(open_engine(url), load_preset("idemview"))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = f"{tmp}/cells.csv"
            m = Masker(key=KEY)
            export_evidence(led, Filter(), path, now=NOW, masker=m)
            manifest = json.load(open(path + ".manifest.json", encoding="utf-8"))
            manifest.pop("exported_at")
            return open(path, encoding="utf-8", newline="").read(), m.counts, manifest
    finally:
        led.engine.dispose()


def _hostile(n: int, at: str, seed: int = 0) -> bytes:
    """About ``n`` bytes of UTF-8 text with secrets and multi-byte characters, and bytes that are not
    UTF-8 (a lone 0xff, a cut 3-byte sequence) ``at`` the start, across the first page edge, or at
    the very end."""
    base = _text(n).encode()
    bad = b"\xff\xe2\x82"
    if at == "start":
        return bad + base
    if at == "end":
        return base + bad
    cut = PAGE - 1  # the blob's first page ends inside the bad bytes
    return base[:cut] + bad + base[cut:]


def _load_bytes(eng, cells: dict[str, tuple[bytes, bytes]]) -> None:
    """SQLite rows whose response and error are TEXT cells holding ``cells``' bytes as they are."""
    _load(eng, {k: (None, None) for k in cells})
    with eng.begin() as c:
        for i, (body, err) in enumerate(cells.values(), 1):
            c.execute(
                text("UPDATE operations SET response_body = CAST(:b AS TEXT), error = CAST(:e AS TEXT) WHERE id = :i"),
                {"i": i, "b": body, "e": err},
            )
        assert c.execute(text("SELECT count(*) FROM operations WHERE typeof(error) = 'text'")).scalar() == len(cells)


@pytest.mark.parametrize("at", ["start", "middle", "end"])
def test_a_paged_sqlite_cell_that_is_not_utf8_exports_as_the_whole_cell(tmp_path, monkeypatch, at):
    eng = create_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    json_bad = b'{"contact":"alice@example.com","x":"' + _hostile(9000, at) + b'","password":"s3cretpw9"}'
    json_top = _hostile(9000, at)  # not a JSON document at all
    cells = {
        "text": (_doc(300).encode(), _hostile(9000, at)),
        "json": (json_bad, b"short \xff"),
        "top": (json_top, _hostile(20_000, at)),
    }
    _load_bytes(eng, cells)
    url = str(tmp_path / "ledger.db")
    whole, whole_counts, whole_manifest = _export_manifest(url)  # nothing paged (8 MiB threshold)
    reads = _small_pages(monkeypatch)
    data, counts, manifest = _export_manifest(url)
    assert reads[0] > 20  # the valid cells did come in pages
    assert data == whole
    assert counts == whole_counts and sum(counts.values()) > 0
    assert manifest == whole_manifest
    rows = {r["idempotency_key"]: r for r in _rows(data)}
    if at != "end":  # at the end the bytes are part of a masked Authorization value
        assert "\\xff\\xe2\\x82" in rows["text"]["error"] and "\\xff\\xe2\\x82" in rows["top"]["error"]
    as_text = _make_formatter(ColumnSpec("error"), Masker(key=KEY), "")
    for k in ("text", "top"):  # nothing lost: the masked escaped text of every byte
        assert rows[k]["error"] == as_text(RawText(cells[k][1])), k
    for s in SECRETS:
        assert s not in data, s
    eng.dispose()


def test_random_bytes_in_paged_sqlite_cells_export_as_the_whole_cells(tmp_path, monkeypatch):
    """A variant: random bytes (almost surely not UTF-8; no NUL, where SQLite's length() stops) of
    several sizes, and a valid cell between."""
    rnd = __import__("random").Random(27)
    eng = create_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    cells = {
        f"r{i}": (bytes(rnd.randrange(1, 256) for _ in range(n)), bytes(rnd.randrange(1, 256) for _ in range(n)))
        for i, n in enumerate((5000, 7919, 12_000))
    }
    cells["ok"] = (_doc(300).encode(), _text(25_000).encode())
    _load_bytes(eng, cells)
    url = str(tmp_path / "ledger.db")
    whole, whole_counts = _export(url)
    _small_pages(monkeypatch)
    data, counts = _export(url)
    assert data == whole
    assert counts == whole_counts
    assert len(_rows(data)) == 4
    eng.dispose()


def test_a_driver_page_in_bytes_reads_the_cell_whole(monkeypatch):
    """The substr path (PostgreSQL, MySQL/MariaDB): a first page that a driver sends as bytes gives the
    whole cell as the SELECT would, before any page; bytes after a text page stop the export with a
    message (never part of a cell). (SQL_ASCII has its own byte pages: the test below.)"""

    class Rows:
        def __init__(self, rows):
            self.rows = rows

        def fetchall(self):
            return self.rows

    class Conn:
        def __init__(self, pages_):
            self.pages = pages_

        def execute(self, q):
            return Rows([self.pages.pop(0)])

    reader = pages.PageReader.__new__(pages.PageReader)
    reader.dialect, reader.table = "postgresql", __import__("sqlalchemy").table("operations")
    reader.rid = __import__("sqlalchemy").column("id")
    reader.exprs = {"p_error": __import__("sqlalchemy").column("error")}
    cell = pages.PagedCell(reader, "p_error", 1, 6000, lambda x: x)
    c = Conn([(b"ab\xff", 6000), (b"ab\xffcd", 6000)])
    with pytest.raises(pages.ReadWhole) as e:
        next(reader._substr_pages(c, cell))
    assert e.value.value == b"ab\xffcd"
    monkeypatch.setattr(pages, "PAGE_CHARS", PAGE)
    c = Conn([("x" * PAGE, 6000), (b"\xff", 6000)])
    it = reader._substr_pages(c, cell)
    assert next(it) == "x" * PAGE
    with pytest.raises(pages.CellChanged, match="bytes instead of text"):
        next(it)


@pytest.fixture
def sql_ascii_url(pg_url):
    """A PostgreSQL database in SQL_ASCII (any bytes in a text cell; lengths count bytes), dropped after."""
    from sqlalchemy import create_engine as ce
    from sqlalchemy.engine import make_url

    name = make_url(pg_url).database + "_ascii"
    admin = ce(make_url(pg_url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        c.execute(
            text(f"CREATE DATABASE \"{name}\" ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'")
        )
    yield make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def test_paged_cells_of_a_sql_ascii_database_equal_the_whole_cells(sql_ascii_url, monkeypatch):
    """PostgreSQL SQL_ASCII: pages are cut by bytes (inside é and emoji here) and some cells are not
    UTF-8; the export equals the unpaged one byte for byte."""
    import psycopg
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.schema import CreateTable

    cells = {
        "valid": (_doc(300).encode(), _text(25_000).encode()),
        "start": (_hostile(9000, "start"), _hostile(9000, "start")),
        "middle": (b'{"a":"alice@example.com","x":"' + _hostile(9000, "middle") + b'"}', _hostile(20_000, "middle")),
        "end": (_hostile(9000, "end"), _hostile(9000, "end")),
    }
    dsn = sql_ascii_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as c:
        for t in reference_metadata().sorted_tables:
            c.execute(str(CreateTable(t).compile(dialect=postgresql.dialect())))
        for i, (k, (body, err)) in enumerate(cells.items(), 1):
            c.execute(
                "INSERT INTO operations (id, scope, idempotency_key, kind, status, attempt_count, created_at, "
                "response_body, error) VALUES (%s, 's', %s, 'pay', 'succeeded', 1, '2026-11-30 11:00:00', "
                "convert_from(%s, 'SQL_ASCII'), convert_from(%s, 'SQL_ASCII'))",
                (i, k, body, err),
            )
    whole, whole_counts = _export(sql_ascii_url)
    reads = _small_pages(monkeypatch)
    data, counts = _export(sql_ascii_url)
    assert reads[0] > 20
    assert data == whole
    assert counts == whole_counts
    rows = {r["idempotency_key"]: r for r in _rows(data)}
    as_text = _make_formatter(ColumnSpec("error"), Masker(key=KEY), "")
    assert rows["valid"]["error"] == as_text(_text(25_000))  # no character cut by a page edge
    assert rows["middle"]["error"] == as_text(RawText(cells["middle"][1]))
    for s in SECRETS:
        assert s not in data, s
