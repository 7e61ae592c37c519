"""The backends idemview knows, found through the ``idemview.backends`` entry point group.

The built-in backends are registered exactly as a third party's would be: each an entry point of
idemview's own distribution (``pyproject.toml``)::

    [project.entry-points."idemview.backends"]
    sql = "idemview.backends.sql:BACKEND"

An entry point names a :class:`~idemview.backends.base.Backend` instance, a list of them, or a function
returning either. :func:`register` adds one at run time (tests, scripts). A backend that fails to load is
logged and skipped: a broken plug-in never stops the program.
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

from idemview.backends.base import Backend, Target, set_known_schemes
from idemview.errors import InputError

log = logging.getLogger(__name__)

#: The entry point group backends are registered under.
ENTRY_POINTS = "idemview.backends"
#: The built-in backends as ``pyproject.toml`` registers them (name -> object reference). The entry points
#: are how they are found; these are imported by name only for a name the installed metadata lacks (a
#: frozen bundle carries no distribution metadata; an editable install made before they were declared).
#: A test keeps this table equal to ``pyproject.toml``'s.
BUILTIN = {
    "sql": "idemview.backends.sql:BACKEND",
    "dump": "idemview.backends.dump:BACKEND",
    "redis": "idemview.backends.redis:BACKEND",
    "dynamodb": "idemview.backends.dynamodb:BACKEND",
}


def _builtin(name: str) -> object:
    """The built-in backend ``name`` (one of :data:`BUILTIN`), imported by a plain import statement so a
    bundler sees the module."""
    if name == "sql":
        from idemview.backends import sql as m
    elif name == "dump":
        from idemview.backends import dump as m  # type: ignore[no-redef]
    elif name == "redis":
        from idemview.backends import redis as m  # type: ignore[no-redef]
    else:
        from idemview.backends import dynamodb as m  # type: ignore[no-redef]
    return m.BACKEND


_BACKENDS: dict[str, Backend] = {}
_loaded = False


def register(backend: Backend, *, replace: bool = False) -> Backend:
    """Add ``backend`` under its ``name``. Raises ``ValueError`` when that name is taken (unless
    ``replace``) or the object is no :class:`Backend`."""
    if not isinstance(backend, Backend) or not backend.name:
        raise ValueError(f"{backend!r} is not a Backend with a name")
    old = _BACKENDS.get(backend.name)
    if old is not None and old is not backend and not replace:
        raise ValueError(f"a backend named {backend.name!r} is registered already")
    _BACKENDS[backend.name] = backend
    _schemes_changed()
    return backend


def unregister(name: str) -> None:
    """Remove the backend named ``name`` (tests); nothing if none is."""
    _BACKENDS.pop(name, None)
    _schemes_changed()


def _schemes_changed() -> None:
    set_known_schemes({c.dialect for b in _BACKENDS.values() for c in b.choices})


def _add(obj: object, where: str) -> list[str]:
    if callable(obj) and not isinstance(obj, Backend):
        obj = obj()
    found = [obj] if isinstance(obj, Backend) else list(obj)  # type: ignore[call-overload]
    names = []
    for b in found:
        if not isinstance(b, Backend):
            raise TypeError(f"{b!r} is not a Backend")
        if _BACKENDS.get(b.name) is not b:
            register(b)
        names.append(b.name)
    return names


def load_plugins() -> list[str]:
    """Register every backend the ``idemview.backends`` entry points name that is not registered yet;
    returns the names added. Logged and skipped: an entry point that fails to load or clashes."""
    global _loaded
    before = set(_BACKENDS)
    seen: set[str] = set()
    for ep in entry_points(group=ENTRY_POINTS):
        seen.add(ep.name)
        try:
            _add(ep.load(), ep.value)
        except Exception as e:  # noqa: BLE001 - any plug-in failure is reported and skipped
            log.warning("backend plug-in %s could not be loaded: %s", ep.value, e)
    for name, ref in BUILTIN.items():  # no metadata for it (see BUILTIN)
        if name not in seen and name not in _BACKENDS:
            _add(_builtin(name), ref)
    _loaded = True
    return [n for n in _BACKENDS if n not in before]


def backends() -> list[Backend]:
    """Every registered backend, the ones to ask first first (highest :attr:`Backend.priority`, then
    by name)."""
    if not _loaded:
        load_plugins()
    return sorted(_BACKENDS.values(), key=lambda b: (-b.priority, b.name))


def backend_named(name: str) -> Backend:
    """The backend registered as ``name``. Raises ``KeyError``."""
    for b in backends():
        if b.name == name:
            return b
    raise KeyError(name)


def backend_for(target: Target) -> Backend:
    """The backend whose :meth:`~Backend.matches` accepts ``target``, asked in :func:`backends` order.
    Raises :class:`InputError` (exit 2) when none does."""
    for b in backends():
        if b.matches(target):
            return b
    raise InputError("not a ledger idemview can open: expected a database URL, a dump file or folder, or a file")


def backend_for_dialect(dialect: str) -> Backend:
    """The backend a saved connection of ``dialect`` belongs to: the one listing it among its
    :attr:`~Backend.choices`, else the SQL backend (any other installed SQLAlchemy dialect)."""
    for b in backends():
        if b.owns_dialect(dialect):
            return b
    return backend_named("sql")
