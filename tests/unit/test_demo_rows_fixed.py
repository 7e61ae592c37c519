"""The demo ledger is the same, row for row, for the same seed and anchor (issue 25 item 6: ``generate``
and ``write_demo_effects`` were split into scenario builders without changing a byte of what they
write). The digests below were taken from the code before the split (main at 2601ac7)."""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime

import pytest

from idemview.services.demo import write_demo


def _rows_digest(path, tables: list[str]) -> str:
    h = hashlib.sha256()
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
        for t in tables:
            cols = [r[1] for r in c.execute(f"PRAGMA table_info({t})")]
            h.update(f"{t}({','.join(cols)})\n".encode())
            for row in c.execute(f"SELECT * FROM {t} ORDER BY {', '.join(cols)}"):
                h.update((repr(row) + "\n").encode())
    c.close()
    return h.hexdigest()


def _planted_digest(planted) -> str:
    h = hashlib.sha256()
    for kind in sorted(planted.incidents):
        h.update(f"{kind}:{planted.incidents[kind]!r}\n".encode())
    h.update(f"{planted.operations} {planted.attempts} {planted.anchor.isoformat()}".encode())
    return h.hexdigest()


CASES = {
    # (seed, anchor, operations): (ledger rows, effects rows, the layout's [effects], planted) digests
    (7, datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC), 2000): (
        "f9d21301a0029ba95d3bd7624f9e5e7fccd9ec1ab6a391f9458d15ca671a6fab",
        "fea63271e07af97b0b2b748c48f603d207df29c859eb6448188f5c8d81312663",
        "125dd9a35322972c12947bfb7e2d8d945066b3b038e1405ed27321427e0c29e1",
        "1e401fc7afc09eec863c96d5815af4c6763bb974fd1e44ab9a00f066b940c566",
    ),
    (41, datetime(2026, 12, 4, 20, 37, 0, tzinfo=UTC), 300): (
        "7fd9e54f6b71d461b628f24daf4ca2dc73b405dd6b8be70687a1d5fe8e826f71",
        "01849cf931aa5f8098ed78611e2eb504cb1d73da57be2377072abe46ff87a9f9",
        "125dd9a35322972c12947bfb7e2d8d945066b3b038e1405ed27321427e0c29e1",
        "4d57db08d81c2aa7c9612c18fbd8ec354d7823fbb8fe31f7d83f13e907dde43f",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_demo_writes_the_same_rows_for_the_same_seed_and_anchor(tmp_path, case):
    seed, anchor, operations = case
    db = tmp_path / "demo.db"
    planted = write_demo(db, operations=operations, seed=seed, anchor=anchor)
    layout = (tmp_path / "demo-layout.toml").read_text("utf-8")
    got = (
        _rows_digest(db, ["operations", "attempts", "idemview_demo_planted"]),
        _rows_digest(tmp_path / "demo-effects.db", ["charges", "idemview_demo_planted"]),
        # the demo's own part of the layout (the rest is the idemview preset, which may change)
        hashlib.sha256(layout[layout.index("\n[effects]") :].encode()).hexdigest(),
        _planted_digest(planted),
    )
    assert got == CASES[case]
