"""A dump path that is a symlink is judged by the file it points to (DuckDB reads that file, and its
format is taken from that file's name): a link named ``.csv`` to another file is refused saying what it
is, the link's target and why, not that the name "must end in .csv" (which it does)."""

from __future__ import annotations

import pytest

from idemview.cli import main
from idemview.ledger.dumps import DumpError, list_dump


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


def test_a_csv_link_to_a_file_that_is_no_dump_names_its_target(tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("id,status\n1,done\n")
    link = tmp_path / "operations.csv"
    link.symlink_to(target)
    said = (
        f"{link} is a symlink to {target}, which is not a dump file: a link is read as the file it points to, "
        "and that file's name must end in .csv, .parquet or .jsonl (give the dump file itself)"
    )
    with pytest.raises(DumpError) as ei:
        list_dump(link)
    assert str(ei.value) == said
    assert main(["scan", str(link)]) == 2
    err = _one_line(capsys)
    assert said in err and "must end in .csv" not in err.split("which")[0]
    assert target.read_text() == "id,status\n1,done\n"  # nothing written


def test_a_link_through_another_link_names_the_final_target(tmp_path):
    final = tmp_path / "data.bin"
    final.write_bytes(b"\x00\x01")
    middle = tmp_path / "middle.parquet"
    middle.symlink_to(final)
    link = tmp_path / "ops.parquet"
    link.symlink_to(middle)
    with pytest.raises(DumpError, match=f"^{link} is a symlink to {final}, which is not a dump file"):
        list_dump(link)


def test_a_dangling_dump_link_says_its_target_is_missing(tmp_path):
    link = tmp_path / "operations.csv"
    link.symlink_to(tmp_path / "gone.csv")
    with pytest.raises(DumpError) as ei:
        list_dump(link)
    assert str(ei.value) == f"{link} is a symlink to {tmp_path / 'gone.csv'}, which does not exist"


def test_a_link_to_a_dump_file_still_opens(tmp_path, capsys):
    real = tmp_path / "real.csv"
    real.write_text("a\n1\n")
    link = tmp_path / "operations.csv"
    link.symlink_to(real)
    assert list_dump(link).files == [real]
