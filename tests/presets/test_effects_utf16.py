"""The effects merge reads both link streams in byte order and compares UTF-8 bytes
(idemview/ledger/effects.py). SQLite's ``COLLATE BINARY`` is ``memcmp`` of the text *as stored*: in a
file made with ``PRAGMA encoding = 'UTF-16le'`` that is UTF-16 order, which differs from UTF-8 order
as soon as a key holds a character past U+007F ('kā' < 'kz' in UTF-16le, 'kz' < 'kā' in UTF-8). The
merge must still pair every link as the obvious set comparison does (a double charge found, no
orphan invented), whichever side is the UTF-16 file."""

from __future__ import annotations

from collections import Counter

import pytest
from sqlalchemy import create_engine

from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.ledgers import load
from tests.presets.test_effects import (
    att,
    charge,
    charges_md,
    effect_findings,
    load_reference,
    op,
    reference_layout,
)

KEYS = ["ka", "kz", "k\u0101", "k\u00e9", "ke\u0301", "k\U0001f600", "kb"]


def _utf16(path):
    w = create_engine(f"sqlite:///{path}")
    with w.connect() as c:
        c.exec_driver_sql("PRAGMA encoding = 'UTF-16le'")
        c.commit()
    return w


def _expected(op_keys, charge_keys) -> set:
    """The obvious set comparison: a key charged twice is a duplicate, a charge with no operation an orphan."""
    n = Counter(charge_keys)
    out = {("duplicate_effect", "s1", k) for k in op_keys if n[k] > 1}
    out |= {("orphan_effect", "", k) for k in n if k not in op_keys}
    return out


_UTF16_MERGE = pytest.mark.xfail(
    strict=True,
    reason="one side's SQLite file is UTF-16: its COLLATE BINARY order (memcmp of UTF-16) is not the UTF-8 "
    "byte order the merge assumes, so links are mis-paired (false orphans, double charges missed); a fix "
    "needs the merge to detect the file's encoding and order another way (not small)",
)


@pytest.mark.parametrize(
    "utf16_side",
    [pytest.param("effects", marks=_UTF16_MERGE), pytest.param("ledger", marks=_UTF16_MERGE), "both"],
)
def test_merge_pairs_links_of_a_utf16_sqlite_file(tmp_path, utf16_side):
    op_keys = KEYS[:-1]  # 'kb' is charged but never recorded: an orphan
    ops = [op(i, k, "succeeded") for i, k in enumerate(op_keys, start=1)]
    atts = [att(i, k, "succeeded") for i, k in enumerate(op_keys, start=1)]
    charge_keys = KEYS + ["kz", "k\u0101"]  # two double charges
    charges = [charge(i, k) for i, k in enumerate(charge_keys, start=1)]
    lp, fp = tmp_path / "ledger.db", tmp_path / "charges.db"
    lw = _utf16(lp) if utf16_side in ("ledger", "both") else create_engine(f"sqlite:///{lp}")
    fw = _utf16(fp) if utf16_side in ("effects", "both") else create_engine(f"sqlite:///{fp}")
    load_reference(lw, ops, atts)
    load(fw, charges_md(), {"charges": charges})
    lw.dispose()
    fw.dispose()
    eng, fx = open_engine(str(lp)), open_engine(str(fp))
    try:
        led = Ledger(eng, reference_layout(connection="ignored-when-an-engine-is-given"), effects_engine=fx)
        assert not led.effects.same_database
        got, _ = effect_findings(led)
    finally:
        eng.dispose()
        fx.dispose()
    assert got == _expected(set(op_keys), charge_keys)
