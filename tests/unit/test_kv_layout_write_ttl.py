"""A Redis layout's ``[expiry] write_ttl_seconds`` is refused at 0 as ``--write-ttl 0`` is (no store sets a
TTL of 0 at every write: Celery's result_expires 0 means results never expire, Redis refuses SET EX 0)."""

from __future__ import annotations

import pytest

from idemview.layouts.kv import parse_kv_layout
from idemview.layouts.layout import LayoutError

BASE = '[layout]\nname = "x"\n[kv]\nmatch = "a:*"\nencoding = "json"\n[status]\nfield = "s"\n'


def _expiry(body: str):
    return parse_kv_layout(BASE + "[expiry]\n" + body + "\n")


@pytest.mark.parametrize("zero", ["0", "0.0"])
def test_a_write_ttl_of_zero_is_refused_with_the_command_lines_words(zero):
    with pytest.raises(
        LayoutError,
        match=r"expiry\.write_ttl_seconds: 0(\.0)? must be above 0 seconds \(the TTL the store sets at every write\)",
    ):
        _expiry(f'write_ttl_seconds = {zero}\nwrite_time_fields = ["created_at"]')
    with pytest.raises(LayoutError, match="must be above 0 seconds"):
        _expiry(f"write_ttl_seconds = {zero}")


def test_other_expiry_values_are_read_as_before():
    assert _expiry('write_ttl_seconds = 0.5\nwrite_time_fields = ["created_at"]').write_ttl_seconds == 0.5
    assert _expiry("lock_timeout_seconds = 0").lock_timeout_seconds == 0  # 0 stays a valid lock timeout
    with pytest.raises(LayoutError, match="non-negative number of seconds"):
        _expiry("write_ttl_seconds = -1")
