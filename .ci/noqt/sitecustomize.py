"""Make PySide6, shiboken6 and pyqtgraph unimportable, as if they were not installed.

Used by ``make test`` for the core test folders (``PYTHONPATH=.ci/noqt``): the core (everything outside
``idemview/qt``) must work without Qt (DESIGN §10). Cheaper on CI than a second virtualenv.
"""

import importlib.abc
import sys

_BLOCKED = ("PySide6", "shiboken6", "pyqtgraph")


class _NoQt(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".", 1)[0] in _BLOCKED:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (blocked: core tests run without Qt)", name=fullname
            )
        return None


sys.meta_path.insert(0, _NoQt())
