"""duplicate_effect's sentence names the distinct effect references of its evidence. SQLite keeps
whatever type a row was written with, and a layout may map ``effect_ref`` to a number column: refs of
mixed types (text and BLOB, text and integer) could be neither sorted nor joined, and the TypeError
ended the whole scan/export ("'<' not supported between instances of 'str' and 'bytes'")."""

from __future__ import annotations

from idemview.findings.explain import duplicate_effect


def test_blob_and_text_effect_refs():
    ev = [
        {"outcome": "succeeded", "effect_ref": "ch_2"},
        {"outcome": "succeeded", "effect_ref": b"ch_1"},
        {"outcome": "succeeded", "effect_ref": b"\xffch_3"},
    ]
    s = duplicate_effect("s1", "k1", ev)
    assert "3 distinct side effects were recorded (\\xffch_3, ch_1, ch_2)" in s


def test_integer_and_text_effect_refs():
    ev = [{"outcome": "succeeded", "effect_ref": 1999}, {"outcome": "succeeded", "effect_ref": "ch_9"}]
    assert "2 distinct side effects were recorded (1999, ch_9)" in duplicate_effect("s1", "k1", ev)
