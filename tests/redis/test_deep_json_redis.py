"""Redis records holding JSON nested 2,000 / 100,000 levels: scan, detect and export complete, the
record is counted unreadable and the rest is read (issue 19 item 11; the parse goes through
``idemview.domain.jsontext.loads``)."""

from __future__ import annotations

import json

import pytest

from idemview.cli import main
from tests.redis.conftest import put_celery, server_now


@pytest.mark.parametrize("n", [2000, 100_000])
def test_deep_record_is_unreadable_not_fatal(redis_db, tmp_path, capsys, n):
    url, raw = redis_db
    t = server_now(raw)
    put_celery(raw, "ok-1", "SUCCESS", done=t)
    put_celery(raw, "ok-2", "FAILURE", done=t, traceback="boom")
    deep = '{"status": "SUCCESS", "task_id": "deep", "result": ' + "[" * n + "1" + "]" * n + "}"
    raw.set("celery-task-meta-deep", deep, ex=3600)
    now = t.isoformat()
    assert main(["scan", url, "--now", now, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["operations"] == 2
    assert main(["detect", url]) == 0
    assert "celery-redis" in capsys.readouterr().out
    out = tmp_path / "ev.csv"
    assert main(["export", url, "--out", str(out), "--now", now]) == 0
    assert out.read_text("utf-8").count("ok-") == 2
