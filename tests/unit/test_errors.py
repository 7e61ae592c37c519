"""Typed errors (idemview/errors.py): the old class names are the typed ones, and the CLI's exit code
follows the type, not the message text."""

from __future__ import annotations

import pytest

from idemview import errors
from idemview.cli import CliError, main
from idemview.evidence.plan import check_target
from idemview.layouts.layout import LayoutError, LayoutMismatchError
from idemview.ledger.connect import ConnectError, open_engine
from idemview.services.cancel import Cancelled


def test_layout_error_type_follows_missing():
    bad = LayoutError("unknown key 'tabel'")
    assert isinstance(bad, errors.InvalidLayout) and isinstance(bad, ValueError)
    assert not isinstance(bad, errors.LayoutMismatch) and bad.exit_code == 2 and bad.missing == []
    miss = LayoutError("the operations table jobs is not in the database", ["table jobs"])
    assert type(miss) is LayoutMismatchError
    assert isinstance(miss, errors.LayoutMismatch) and isinstance(miss, LayoutError)
    assert miss.exit_code == 4 and miss.missing == ["table jobs"] and str(miss).startswith("the operations")


def test_old_names_are_the_typed_errors(tmp_path):
    assert issubclass(ConnectError, errors.CannotConnect) and issubclass(ConnectError, RuntimeError)
    assert issubclass(Cancelled, errors.Cancelled)
    assert issubclass(CliError, errors.IdemviewError)
    with pytest.raises(errors.CannotConnect) as ei:
        open_engine(str(tmp_path / "no" / "such.db"))
    assert ei.value.exit_code == 3


def test_export_targets(tmp_path):
    out = tmp_path / "x.csv"
    out.write_text("already here")
    with pytest.raises(errors.TargetExists, match="already exists"):
        check_target(out)
    with pytest.raises(errors.TargetRefused, match="does not exist"):
        check_target(tmp_path / "missing" / "x.csv")
    with pytest.raises(errors.TargetRefused, match="not a regular file"):
        check_target(tmp_path)
    assert check_target(out, overwrite=True) == out


class _Odd(errors.IdemviewError):
    exit_code = 4


def test_cli_maps_any_typed_error_to_its_exit_code(monkeypatch, capsys):
    """A typed error raised anywhere below the CLI exits with its own code, whatever its message."""
    import idemview.cli as cli

    def boom(_args):
        raise _Odd("password=hunter2 in a message that mentions 'cannot connect'")

    monkeypatch.setattr(cli, "cmd_presets", boom)
    assert main(["presets"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("idemview: ") and "hunter2" not in err
