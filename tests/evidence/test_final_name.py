"""Issue #9 item 10 and the disk-full fault: the final names of an export are claimed without replacing
a file that appeared meanwhile (unless --force), and a failed write leaves nothing behind."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

import idemview.evidence.writer as writer
from idemview.cli import main
from idemview.evidence.writer import ColumnSpec, FinalNameTaken, verify_evidence, write_evidence
from idemview.masking.masker import Masker

COLS = [ColumnSpec("k", "text"), ColumnSpec("n", "integer")]


def _rows(n, on_row=None):
    for i in range(n):
        if on_row is not None and i == n // 2:
            on_row()
        yield (f"key-{i}", i)


def _write(path, rows, **kw):
    return write_evidence(
        path, COLS, rows, masker=Masker(key=b"k" * 32), manifest={"ledger": {"connection": "t"}}, check_every=10, **kw
    )


def _parts(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith(".part"))


@pytest.fixture(params=["link", "no-link"])
def link_mode(request, monkeypatch):
    """Both ways of claiming a name: a hard link, and the fallback where links are unsupported."""
    if request.param == "no-link":

        def no_link(src, dst, *a, **k):
            raise OSError(errno.EPERM, "Operation not permitted")

        monkeypatch.setattr(writer.os, "link", no_link)
    return request.param


def test_csv_created_meanwhile_is_not_replaced(tmp_path, link_mode):
    out = tmp_path / "out.csv"
    with pytest.raises(FinalNameTaken) as e:
        _write(out, _rows(100, lambda: out.write_text("theirs")))
    assert out.read_text() == "theirs"  # not replaced
    assert not Path(str(out) + ".manifest.json").exists()
    kept = [Path(p) for p in e.value.kept]
    assert kept == _parts(tmp_path) or sorted(kept) == _parts(tmp_path)
    assert all(str(p) in str(e.value) for p in kept) and "\n" not in str(e.value)
    csv_part = next(p for p in kept if ".manifest.json" not in p.name)
    assert csv_part.read_bytes().count(b"\r\n") == 101  # the finished export, header + 100 rows


def test_manifest_created_meanwhile_is_not_replaced(tmp_path, link_mode):
    out = tmp_path / "out.csv"
    man = Path(str(out) + ".manifest.json")
    with pytest.raises(FinalNameTaken) as e:
        _write(out, _rows(100, lambda: man.write_text("theirs")))
    assert man.read_text() == "theirs"
    assert not out.exists()  # no CSV without its manifest
    assert len(_parts(tmp_path)) == 2 and str(man) in str(e.value)


def test_overwrite_replaces_deliberately(tmp_path, link_mode):
    out = tmp_path / "out.csv"
    res = _write(out, _rows(100, lambda: out.write_text("theirs")), overwrite=True)
    assert res.rows == 100 and verify_evidence(out) and _parts(tmp_path) == []


def test_normal_export_claims_both_names_and_leaves_no_temp(tmp_path, link_mode):
    out = tmp_path / "out.csv"
    res = _write(out, _rows(100))
    assert res.rows == 100 and verify_evidence(out) and _parts(tmp_path) == []
    assert oct(out.stat().st_mode & 0o777) == "0o600" and out.stat().st_nlink == 1


@pytest.fixture
def demo(tmp_path):
    from idemview.services.demo import write_demo

    db = tmp_path / "demo.db"
    write_demo(db, operations=30)
    return db


def test_cli_stops_with_one_line_naming_the_kept_file(tmp_path, demo, capsys, monkeypatch):
    out = tmp_path / "out.csv"
    real = writer._write_atomic_temp

    def racing(directory, final_name, data):
        out.write_text("theirs")  # another process, while the manifest is being written
        return real(directory, final_name, data)

    monkeypatch.setattr(writer, "_write_atomic_temp", racing)
    code = main(["export", str(demo), "--out", str(out)])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1
    assert out.read_text() == "theirs"
    parts = _parts(tmp_path)
    assert len(parts) == 2 and all(str(p) in err for p in parts) and "not replaced" in err
    # --force replaces on purpose
    out.unlink()
    code = main(["export", str(demo), "--out", str(out), "--force"])
    capsys.readouterr()
    assert code == 0 and out.read_text() != "theirs" and verify_evidence(out)


class _FullDisk:
    """A binary file whose writes fail with ENOSPC once ``room`` bytes are used (a disk filling up)."""

    def __init__(self, f, room):
        self._f, self._room = f, room

    def write(self, data):
        if len(data) > self._room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= len(data)
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


def test_disk_full_during_export_is_one_line_and_leaves_nothing(tmp_path, demo, capsys, monkeypatch):
    real = os.fdopen
    monkeypatch.setattr(writer.os, "fdopen", lambda fd, *a, **k: _FullDisk(real(fd, *a, **k), 2000))
    out = tmp_path / "out.csv"
    code = main(["export", str(demo), "--out", str(out), "--rows", "attempts"])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1, err
    assert "no space left on device" in err and str(out) in err and "Traceback" not in err
    assert not out.exists() and not Path(str(out) + ".manifest.json").exists()
    assert _parts(tmp_path) == []


def test_disk_full_on_a_real_small_filesystem(tmp_path, capsys):
    """The same on a real 64 KiB tmpfs (needs root and mount; skipped where the test cannot mount)."""
    from idemview.services.demo import write_demo

    demo = tmp_path / "demo.db"
    write_demo(demo, operations=1500)
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")
    try:
        out = mnt / "out.csv"
        code = main(["export", str(demo), "--out", str(out), "--rows", "attempts"])
        _, err = capsys.readouterr()
        assert code == 2 and err.count("\n") == 1 and "no space left on device" in err
        assert os.listdir(mnt) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
