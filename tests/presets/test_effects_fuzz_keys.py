"""The cross-database effects merge (idemview/ledger/effects.py: two link streams in byte order)
against the obvious set comparison, on keys built to sort differently under each engine's default
collation: case, precomposed vs combining accents, trailing spaces and tabs (MariaDB's PAD SPACE),
astral characters, NULL links. Every pair of engines, both directions."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from tests.presets.test_effects import _cross, att, charge, op

ALPHABET = ["a", "A", "z", "Z", "\u00e9", "e\u0301", " ", "\t", "_", "~", "\u00df", "\U0001f600", "\u0101", "0"]


def _keys(seed: int, n: int) -> list[str]:
    rnd = random.Random(seed)
    out: set[str] = set()
    while len(out) < n:
        out.add("k" + "".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 3))))
    return sorted(out)


def _case(seed: int):
    rnd = random.Random(seed + 1)
    keys = _keys(seed, 40)
    op_keys = [k for k in keys if rnd.random() < 0.7]
    ops = [op(i, k, "succeeded") for i, k in enumerate(op_keys, start=1)]
    atts = [att(i, k, "succeeded") for i, k in enumerate(op_keys, start=1)]
    charged = [k for k in keys for _ in range(rnd.choice([0, 1, 1, 2]))] + [None, None]
    rnd.shuffle(charged)
    charges = [charge(i, k) for i, k in enumerate(charged, start=1)]
    n = Counter(k for k in charged if k is not None)
    want = {("duplicate_effect", "s1", k) for k in op_keys if n[k] > 1}
    want |= {("orphan_effect", "", k) for k in n if k not in set(op_keys)}
    return ops, atts, charges, want


def _url(kind: str, tmp_path, pg_url, mysql_url, name: str) -> str:
    if kind == "sqlite":
        return str(tmp_path / f"{name}.db")
    if kind == "postgresql":
        return pg_url
    return make_url(mysql_url).set(drivername=f"{kind}+pymysql").render_as_string(hide_password=False)


def _writable(url: str, kind: str, mysql_url: str):
    if kind == "sqlite":
        return create_engine(f"sqlite:///{url}")
    return create_engine(mysql_url if kind in ("mysql", "mariadb") else url)


PAIRS = [
    ("sqlite", "postgresql"),
    ("postgresql", "sqlite"),
    ("sqlite", "mariadb"),
    ("sqlite", "mysql"),
    ("mariadb", "postgresql"),
    ("postgresql", "mysql"),
]


@pytest.mark.postgres
@pytest.mark.mysql
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize(("ledger", "effects"), PAIRS)
def test_cross_merge_equals_set_comparison(tmp_path, pg_url, mysql_url, ledger, effects, seed):
    from tests.conftest import _clear

    ops, atts, charges, want = _case(seed)
    lu = _url(ledger, tmp_path, pg_url, mysql_url, "ledger")
    fu = _url(effects, tmp_path, pg_url, mysql_url, "charges")
    lw, fw = _writable(lu, ledger, mysql_url), _writable(fu, effects, mysql_url)
    for w in (lw, fw):
        if w.dialect.name != "sqlite":
            _clear(w)
    try:
        got = _cross(lw, lu, fw, fu, ops, atts, charges, True)
    finally:
        lw.dispose()
        fw.dispose()
    assert got == want
