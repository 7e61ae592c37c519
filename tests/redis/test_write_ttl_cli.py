"""Issue 26 leftover: the Redis write TTL (the TTL the store sets at every write, Celery's
``result_expires``) from the command line (``--write-ttl SECONDS``), a saved connection (its "Write TTL"
field, the URL option ``write_ttl``) and the Python API (``write_ttl_s``), through the one opener: a Celery
STARTED record whose ``date_done`` is null gets its write time from the TTL given, not the layout's
1-day default. Refused for a ledger that is no Redis one, and when it is no number of seconds."""

from __future__ import annotations

import csv
from datetime import datetime

import pytest

from idemview.cli import main
from idemview.config import Connection
from idemview.services.opener import open_source, spec_for_connection
from tests.redis.conftest import put_celery, put_generic, server_now

#: Celery configured with result_expires = 1 h; the record was written 15 minutes before the read.
TTL, AGE = 3600, 900


def _created(path) -> datetime:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and rows[0]["idempotency_key"] == "s-1"
    return datetime.fromisoformat(rows[0]["created_at"].replace("Z", "+00:00"))


def test_write_ttl_on_the_command_line_dates_a_started_record(redis_db, tmp_path, capsys):
    url, raw = redis_db
    now = server_now(raw)
    put_celery(raw, "s-1", "STARTED", done=None, ttl_s=TTL - AGE)
    out = tmp_path / "ops.csv"
    args = ["export", url, "--layout", "celery-redis-extended", "--rows", "operations", "--out", str(out)]
    assert main([*args, "--write-ttl", str(TTL)]) == 0, capsys.readouterr().err
    assert abs((now - _created(out)).total_seconds() - AGE) < 5
    # without it, the layout's 1-day default dates the same record 23 hours too early
    assert main([*args, "--force"]) == 0, capsys.readouterr().err
    assert abs((now - _created(out)).total_seconds() - (86400 - TTL + AGE)) < 5
    # scan says where the write time came from, with the TTL given
    assert main(["scan", url, "--layout", "celery-redis-extended", "--write-ttl", str(TTL), "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert "write time is read from their TTL" in text and f"{TTL:g} s" in text


def test_write_ttl_of_a_saved_connection_and_of_the_api(redis_db, capsys):
    import idemview

    url, raw = redis_db
    now = server_now(raw)
    put_celery(raw, "s-1", "STARTED", done=None, ttl_s=TTL - AGE)
    host, port = url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)
    db = url.rsplit("/", 1)[1]
    c = Connection("celery", "redis", host=host, port=int(port), database=db, layout="celery-redis-extended")
    c.tls = {"write_ttl": TTL}  # what the dialog's "Write TTL (s)" row saves
    o = open_source(spec_for_connection(c))
    try:
        (rec,) = o.ledger.records("", "s-1")
        assert abs((now - rec.created_at).total_seconds() - AGE) < 5
    finally:
        o.close()
    with idemview.open(url, "celery-redis-extended", write_ttl_s=TTL) as frames:
        created = frames.operations()["created_at"].iloc[0].to_pydatetime()
    assert abs((now - created).total_seconds() - AGE) < 5
    assert o.ledger.source.snapshot.url.endswith(f"/{db}")  # the option never reaches redis-py or a manifest


def test_write_ttl_is_refused_where_it_does_not_apply(redis_db, tmp_path, capsys):
    url, _raw = redis_db
    db = tmp_path / "demo.db"
    assert main(["demo", str(db), "--operations", "10", "--seed", "1"]) == 0
    capsys.readouterr()
    assert main(["scan", str(db), "--write-ttl", "60"]) == 2
    err = capsys.readouterr().err
    assert "a write TTL" in err and "does not apply to this ledger (SQL database; only Redis takes it)" in err
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "operations.csv").write_text("id\n1\n", encoding="utf-8")
    assert main(["scan", str(dump), "--write-ttl", "60"]) == 2  # said in words, before anything is read
    assert "does not apply to this ledger (Dump file / folder; only Redis takes it)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ei:  # a usage error, before anything connects
        main(["scan", url, "--write-ttl", "-5"])
    assert ei.value.code == 2 and "--write-ttl" in capsys.readouterr().err
    assert main(["scan", url + "?write_ttl=soon", "--layout", "celery-redis"]) == 2
    assert "write_ttl" in capsys.readouterr().err
    import idemview
    from idemview.errors import InputError

    with pytest.raises(InputError, match="does not apply"):
        idemview.open(str(db), write_ttl_s=60)


def test_a_write_ttl_the_layout_cannot_use_is_said_not_ignored(redis_db, tmp_path, capsys):
    """idem-generic reads no time from a record's TTL (no ``[expiry] write_time_fields``): a write TTL
    given for it changes nothing, and the scan says so (stderr and the snapshot's notes) instead of
    silently reading the ledger other than asked; the notes of a layout that does use it name the
    option that set it, not only the layout entry it overrode."""
    import json

    url, raw = redis_db
    put_generic(raw, "pay", "k-1", status="completed", created_at=server_now(raw))
    assert main(["scan", url, "--layout", "idem-generic", "--write-ttl", "3600", "--format", "json"]) == 0
    cap = capsys.readouterr()
    said = "the write TTL given (3600 s) is not used: layout idem-generic reads no time from a record's TTL"
    assert said in cap.err
    assert any(n.startswith(said) for n in json.loads(cap.out)["snapshot"]["notes"])
    # without one given, nothing is said
    assert main(["scan", url, "--layout", "idem-generic", "--format", "json"]) == 0
    cap = capsys.readouterr()
    assert "write TTL" not in cap.err and json.loads(cap.out)["snapshot"]["notes"] == []
    # a layout that uses it: its notes point at --write-ttl (which overrides the layout's entry)
    put_celery(raw, "s-1", "STARTED", done=None, ttl_s=TTL - AGE)
    assert main(["scan", url, "--layout", "celery-redis", "--write-ttl", "60", "--format", "json"]) == 0
    notes = json.loads(capsys.readouterr().out)["snapshot"]["notes"]
    assert notes and all("--write-ttl" in n for n in notes), notes


def test_a_write_ttl_of_zero_is_refused_everywhere(redis_db, capsys):
    """0 is no TTL a store sets at every write (Celery: result_expires 0 means results never expire; Redis
    refuses SET EX 0): with it every record "has more TTL left than 0 s". Refused as input (exit 2) on the
    command line, in the URL and in the API, as a negative one is, before anything connects."""
    import idemview
    from idemview.errors import InputError

    url, raw = redis_db
    put_celery(raw, "s-1", "STARTED", done=None, ttl_s=TTL - AGE)
    with pytest.raises(SystemExit) as ei:
        main(["scan", url, "--layout", "celery-redis", "--write-ttl", "0"])
    assert ei.value.code == 2 and "above 0" in capsys.readouterr().err
    assert main(["scan", url + "?write_ttl=0", "--layout", "celery-redis"]) == 2
    assert "write_ttl: '0' must be above 0 seconds" in capsys.readouterr().err
    with pytest.raises(InputError, match="above 0"):
        idemview.open(url, "celery-redis", write_ttl_s=0)
    assert main(["scan", url, "--layout", "celery-redis", "--write-ttl", "0.5"]) == 0  # any positive one
