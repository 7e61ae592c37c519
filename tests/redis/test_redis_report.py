"""The incident report of a Redis ledger (issue 24; read through its snapshot like every Redis path):
the manifest and the page name Redis and the snapshot, a secret in a value is masked, the manifest
verifies."""

from __future__ import annotations

import json
from datetime import timedelta

import idemview
from idemview.cli import main
from tests.redis.conftest import put_generic, server_now


def test_report_of_a_redis_ledger(redis_db, tmp_path, capsys):
    url, raw = redis_db
    now = server_now(raw)
    t = now - timedelta(hours=2)
    bearer = "Zm9vYmFyYmF6cXV4cXV1eGNvcmdl"
    put_generic(
        raw, "globex", "k-fail", status="failed", created_at=t, attempts=9, error=f"gateway timeout (Bearer {bearer})"
    )
    put_generic(raw, "acme", "k-ok", status="succeeded", created_at=t, attempts=1)
    out = tmp_path / "redis.html"
    iso = now.isoformat().replace("+00:00", "Z")
    assert main(["report", url, "--now", iso, "--out", str(out)]) == 0, capsys.readouterr().err
    m = idemview.read_report(out)
    assert m["ledger"]["dialect"] == "redis" and m["report"]["operations"] == 1
    # the bearer token in the error column is also a secret the ledger keeps (the ledger audit)
    assert m["report"]["counts"] == {"unresolved_failure": 1, "retry_storm": 1, "secret_at_rest": 1}
    page = out.read_text(encoding="utf-8")
    assert "k-fail" in page and "k-ok" not in page
    assert bearer[:8] not in page + json.dumps(m) and "[bearer#" in page
