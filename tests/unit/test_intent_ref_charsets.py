"""intent_ref is one md5 of the UTF-8 text on every engine (idemview/ledger/intent_sql.py), whatever
character set the ledger's own tables or file use:

- a MySQL/MariaDB table in ``latin1`` (the server default before MySQL 8 / MariaDB 11.6, so many
  Celery databases): ``CONCAT_WS`` takes the column's character set and ``MD5`` hashed its latin1
  bytes, so a non-ASCII task name gave another reference than PostgreSQL and SQLite;
- a PostgreSQL database in ``LATIN1``: ``md5(text)`` hashes the database's encoding;
- a SQLite file in ``PRAGMA encoding = 'UTF-16le'``: ``CAST(text AS BLOB)`` hands the md5 UTF-16 bytes.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from sqlalchemy import MetaData, create_engine, text

from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load
from tests.presets.test_planted_job_queues import dcr_md, dcr_row

US = "\x1f"
M = timedelta(minutes=1)
TEXTS = {"t-ascii": ("shop.capture", "\"('ord_7',)\""), "t-uni": ("shop.zoë", "\"('café 5',)\"")}


def _rows() -> list[dict]:
    rows = []
    for i, (tid, (name, args)) in enumerate(TEXTS.items(), start=1):
        r = dcr_row(i, tid, "SUCCESS", ANCHOR - 2 * M, ANCHOR - M)
        r.update(task_name=name, task_args=args, task_kwargs='"{}"', periodic_task_name=None)
        rows.append(r)
    return rows


def _want() -> dict[str, str]:
    return {t: hashlib.md5(US.join([n, a, '"{}"']).encode()).hexdigest() for t, (n, a) in TEXTS.items()}


def _refs(url: str) -> dict[str, str | None]:
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("django-celery-results"))
        return {k: led.records("", k)[0].intent_ref for k in TEXTS}
    finally:
        eng.dispose()


def _latin1(md: MetaData) -> MetaData:
    for t in md.tables.values():
        t.kwargs["mysql_charset"] = "latin1"
        t.kwargs["mariadb_charset"] = "latin1"
    return md


def test_mysql_latin1_table_hashes_the_utf8_text(mysql_url):
    for dialect in ("mysql+pymysql", "mariadb+pymysql"):
        url = mysql_url.replace("mysql+pymysql", dialect, 1) if dialect != "mysql+pymysql" else mysql_url
        w = create_engine(mysql_url)
        with w.begin() as c:
            c.execute(text("DROP TABLE IF EXISTS django_celery_results_taskresult"))
        load(w, _latin1(dcr_md()), {"django_celery_results_taskresult": _rows()})
        with w.connect() as c:
            cs = c.execute(
                text(
                    "SELECT CCSA.character_set_name FROM information_schema.TABLES T JOIN "
                    "information_schema.COLLATION_CHARACTER_SET_APPLICABILITY CCSA "
                    "ON CCSA.collation_name = T.table_collation WHERE T.table_schema = DATABASE() "
                    "AND T.table_name = 'django_celery_results_taskresult'"
                )
            ).scalar()
        w.dispose()
        assert cs == "latin1"
        assert _refs(url) == _want(), dialect


@pytest.mark.xfail(
    strict=True,
    reason="intent_sql hashes CAST(text AS BLOB): in a UTF-16 SQLite file those are UTF-16 bytes, so the "
    "reference differs from every other engine's; a fix needs md5 to know the file's encoding (not small)",
)
def test_sqlite_utf16_file_hashes_the_utf8_text(tmp_path):
    path = tmp_path / "utf16.db"
    w = create_engine(f"sqlite:///{path}")
    with w.connect() as c:
        c.exec_driver_sql("PRAGMA encoding = 'UTF-16le'")
        c.commit()
    load(w, dcr_md(), {"django_celery_results_taskresult": _rows()})
    with w.connect() as c:
        assert c.exec_driver_sql("PRAGMA encoding").scalar() == "UTF-16le"
    w.dispose()
    assert _refs(str(path)) == _want()


@pytest.mark.postgres
def test_postgresql_latin1_database_hashes_the_utf8_text():
    from sqlalchemy.engine import make_url

    from tests.conftest import DBNAME, PG_ADMIN

    name = DBNAME + "_latin1"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
            c.execute(
                text(f"CREATE DATABASE \"{name}\" ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
            )
    except Exception as e:  # noqa: BLE001 - no server: as the fixtures do
        admin.dispose()
        pytest.skip(f"PostgreSQL unavailable: {e}")
    url = make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)
    try:
        w = create_engine(url)
        load(w, dcr_md(), {"django_celery_results_taskresult": _rows()})
        with w.connect() as c:
            assert c.execute(text("SHOW server_encoding")).scalar() == "LATIN1"
        w.dispose()
        assert _refs(url) == _want()
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
