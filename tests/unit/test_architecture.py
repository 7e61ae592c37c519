"""The core works without Qt (DESIGN §10): every module outside ``idemview/qt`` imports with PySide6,
shiboken6 and pyqtgraph made unimportable by ``.ci/noqt/sitecustomize.py`` (the blocker ``make test``
uses for the core folders), and the blocker really blocks."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import idemview

ROOT = Path(__file__).resolve().parents[2]
NOQT = ROOT / ".ci" / "noqt"


def _core_modules() -> list[str]:
    mods = [m.name for m in pkgutil.walk_packages(idemview.__path__, "idemview.")]
    return sorted(m for m in mods if not m.startswith("idemview.qt") and m != "idemview.__main__")


def _run_without_qt(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(NOQT), str(ROOT)]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)


def test_every_core_module_imports_without_qt():
    mods = _core_modules()
    assert {"idemview.api", "idemview.cli", "idemview.errors", "idemview.ledger.reader"} <= set(mods)
    code = (
        "import importlib, sys\n"
        f"for m in {mods!r}:\n"
        "    importlib.import_module(m)\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph')))\n"
    )
    r = _run_without_qt(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"


def test_the_blocker_blocks_qt():
    r = _run_without_qt("import idemview.qt.workers")
    assert r.returncode != 0
    assert "No module named 'PySide6'" in r.stderr
