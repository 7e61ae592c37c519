"""The key-value preset contract: every shipped key-value preset opens on an empty Redis database, every
finding kind it can check runs and finds nothing, every kind it cannot is given a reason; and the
sections that read keys beside the records ([states], [lock], [duplicates]) refuse bad values with one
line (issue #26)."""

from __future__ import annotations

import pytest

from idemview.domain.model import FindingKind
from idemview.findings.engine import FindingEngine
from idemview.layouts.kv import kv_preset_names, parse_kv_layout
from idemview.layouts.layout import LayoutError
from tests.redis.conftest import server_now


@pytest.mark.parametrize("name", kv_preset_names())
def test_every_kv_preset_opens_empty_and_runs_every_kind(redis_db, name):
    from idemview.ledger.redis_snapshot import open_redis_ledger

    url, raw = redis_db
    raw.set("unrelated", "x")
    ledger = open_redis_ledger(url, layout=name)
    assert ledger.counts()[0] == 0
    fe = FindingEngine(ledger, server_now(raw))
    assert fe.run() == []
    nc = fe.unsupported()
    assert all(isinstance(v, str) and v for v in nc.values())
    assert FindingKind.EXPIRED_KEY in nc  # an expired key is gone in every key-value store


HEAD = '[layout]\nname = "x"\n[kv]\nmatch = "q:*"\nencoding = "hash"\n'


@pytest.mark.parametrize(
    "body, words",
    [
        ('[states]\nkey = "q:{scope}"\nwait = "list"\n', "{state}"),
        ('[states]\nkey = "q:{scope}:{state}"\nwait = "hash"\n', "list, zset"),
        ('[states]\nkey = "q:{scope}:{state}"\n', "names no state"),
        ('[status]\nfield = "s"\n[lock]\nkey = "q:{key}:lock"\n', "{scope}"),
        ('[status]\nfield = "s"\n[lock]\nkey = "q:{scope}:{key}:{nope}"\n', "may name only"),
        # BullMQ's Redis Cluster prefix ("{myapp}", a hash tag): a literal brace is doubled, as in Python
        ('[status]\nfield = "s"\n[lock]\nkey = "{myapp}:{scope}:{key}:lock"\n', "{{myapp}}:{scope}"),
        ('[status]\nfield = "s"\n[duplicates]\nabsent_reason = "x"\n', "group_field"),
        ('[status]\nfield = "s"\n[duplicates]\ngroup_field = "d"\nextra = 1\n', "knows only"),
        ('[status]\nfield = "s"\n[duplicates]\ngroup_field = "d"\nlock_type_field = "lock"\n', "go together"),
        ('[status]\nfield = "s"\n[duplicates]\ngroup_field = "d"\nlock_type_field = "l"\nholds = {a = 1}\n', "list"),
        ('[status]\nfield = "s"\n[members]\nkey_field = "jid"\n', "names no"),
        (
            '[status]\nfield = "s"\n[members]\n[[members.source]]\nmatch = "q"\ntype = "list"\nstate = "x"\n',
            "key_field",
        ),
        ('[status]\nfield = "s"\n[members]\nkey_field = "j"\n[[members.source]]\nmatch = "q"\ntype = "set"\n', "list"),
        (
            '[status]\nfield = "s"\n[members]\nkey_field = "j"\n[[members.source]]\nmatch = "q"\ntype = "list"\n',
            "state",
        ),
        (
            '[status]\nfield = "s"\n[members]\nkey_field = "j"\n[[members.source]]\nmatch = "q"\nnope = 1\n',
            "knows only",
        ),
    ],
)
def test_bad_joined_sections_are_one_line_errors(body, words):
    with pytest.raises(LayoutError) as e:
        parse_kv_layout(HEAD.replace('"hash"', '"json"') + body if "[members]" in body else HEAD + body)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_states_make_the_status_field_optional():
    kv = parse_kv_layout(
        HEAD + '[states]\nkey = "q:{scope}:{state}"\nrunning = "list"\n[status]\nmap = { running = "in_progress" }\n'
    )
    assert kv.states == {"running": "list"} and kv.status_field is None
