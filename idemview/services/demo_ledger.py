"""Where the demo ledger lives and when it is (re)written (``idemview --demo``, the start page's
"Open the demo ledger"). No Qt: the GUI calls :func:`ensure_demo` on a worker thread, never on the GUI
thread (writing the demo takes seconds).

The demo (:func:`idemview.services.demo.write_demo`) is anchored to the current UTC hour so its planted
incidents look recent; it is regenerated when the file or its layout is missing or the file is older than
:data:`DEMO_MAX_AGE_S` (one day).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when used: the GUI's start-up imports this module
    from idemview.services.session import OpenSpec

DEMO_MAX_AGE_S = 86400
DEMO_NAME = "demo ledger"


def demo_path() -> Path:
    """The demo ledger's file in the data directory (``<data_dir>/demo.db``)."""
    from idemview.config import data_dir

    return data_dir() / "demo.db"


def demo_is_current(path: Path | None = None) -> bool:
    """True when the demo at ``path`` (default :func:`demo_path`) and its layout exist and the file is
    younger than :data:`DEMO_MAX_AGE_S` seconds: opening it needs no writing. Only ``stat`` calls."""
    from idemview.services.demo_effects import layout_path_for

    p = path or demo_path()
    try:
        return layout_path_for(p).exists() and time.time() - p.stat().st_mtime <= DEMO_MAX_AGE_S
    except OSError:
        return False


def ensure_demo(path: Path | None = None) -> Path:
    """The demo ledger's path, (re)written (anchored to the current UTC hour) unless
    :func:`demo_is_current`. Blocks for the write: call it off the GUI thread. Raises ``OSError`` when the
    data directory cannot be written."""
    from idemview.services.demo import write_demo

    p = path or demo_path()
    if not demo_is_current(p):
        anchor = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        write_demo(p, anchor=anchor)
    return p


def spec_for_demo(path: Path) -> OpenSpec:
    """The :class:`OpenSpec` of the demo at ``path`` (already written): its layout reconciles with its
    charges file (hidden successes, double charges, orphans); ``idemview`` when the layout is missing."""
    from idemview.services.demo_effects import layout_path_for
    from idemview.services.session import OpenSpec

    lay = layout_path_for(path)
    return OpenSpec(url=str(path), name=DEMO_NAME, layout=str(lay) if lay.exists() else "idemview")


def demo_spec(path: Path | None = None) -> OpenSpec:
    """:func:`ensure_demo` then :func:`spec_for_demo` (blocks while the demo is written)."""
    return spec_for_demo(ensure_demo(path))
