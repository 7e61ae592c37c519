"""Typed errors of idemview, at the bottom layer so every layer can raise them.

Callers decide by type, never by message text: the CLI maps :attr:`IdemviewError.exit_code` to its exit
status (DESIGN §9: 2 usage or input error, 3 cannot connect, 4 layout does not fit the database), the
GUI shows ``str(error)``. Every message is one line, safe to show (no password).

The classes that existed before this module keep their names and now derive from these:
``layouts.layout.LayoutError`` (an :class:`InvalidLayout`; with ``missing`` it is a
:class:`LayoutMismatch`), ``ledger.connect.ConnectError`` (:class:`CannotConnect`) and
``services.cancel.Cancelled`` (:class:`Cancelled`).
"""

from __future__ import annotations

EXIT_OK, EXIT_USAGE, EXIT_CONNECT, EXIT_LAYOUT = 0, 2, 3, 4


class IdemviewError(Exception):
    """Base of every error idemview raises on purpose; ``exit_code`` is the CLI's exit status for it."""

    exit_code: int = EXIT_USAGE


class InputError(IdemviewError, ValueError):
    """Bad input from the user (an argument, a file, a value): exit code 2. A ``ValueError`` too, so
    code written against the older untyped errors keeps catching it."""


class InvalidLayout(InputError):
    """A layout file or preset that is malformed (unknown key, bad predicate, not TOML): exit code 2."""


class LayoutMismatch(InvalidLayout):
    """A well-formed layout that does not fit the database (a table, column or schema it names is
    missing): exit code 4. ``missing`` lists what the database lacks, e.g. ``["table oban_jobs"]``."""

    exit_code = EXIT_LAYOUT
    missing: list[str] = []


class CannotConnect(IdemviewError, RuntimeError):
    """The ledger cannot be reached or opened (server down, bad credentials, not a database file):
    exit code 3."""

    exit_code = EXIT_CONNECT


class Cancelled(IdemviewError):
    """Work stopped because the user (or a closing window) cancelled it; nothing was written."""


class QueryCancelled(Cancelled):
    """The database stopped a running statement because it was asked to: our own cancel (the GUI's
    Cancel, Ctrl-C, a closing tab), ``KILL QUERY``, ``pg_cancel_backend``, ``sqlite3.interrupt``.
    Raised by :func:`idemview.ledger.errors.classify` from the driver's code, never from its words.
    ``code`` is that code (``"57014"``, ``1317``, ``"SQLITE_INTERRUPT"``)."""

    code: str | int | None = None


class QueryTimedOut(IdemviewError):
    """The database stopped a statement that ran past its time limit (PostgreSQL ``statement_timeout``,
    MariaDB ``max_statement_time``, MySQL ``max_execution_time``, idemview's SQLite progress-handler
    deadline): exit code 3, like the CLI's ``--timeout`` message."""

    exit_code = EXIT_CONNECT
    code: str | int | None = None


class ConnectionLost(CannotConnect):
    """The session to the ledger went away (server shut down or restarted, connection killed or reset,
    SQLite file gone): reconnecting may help. Exit code 3."""

    code: str | int | None = None


class TargetExists(InputError):
    """An export target (the CSV or its manifest) already exists and overwriting was not asked for."""


class TargetRefused(InputError):
    """An export target that cannot be used: the ledger file itself, a folder, a device, a symlink, or
    a folder that does not exist."""


class EvidenceMismatch(IdemviewError, ValueError):
    """An evidence file whose SHA-256, size or row count differs from its manifest (it was changed
    after export, or the manifest belongs to another file), or whose manifest is missing/unreadable."""


__all__ = [
    "EXIT_CONNECT",
    "EXIT_LAYOUT",
    "EXIT_OK",
    "EXIT_USAGE",
    "Cancelled",
    "CannotConnect",
    "ConnectionLost",
    "EvidenceMismatch",
    "IdemviewError",
    "InputError",
    "InvalidLayout",
    "LayoutMismatch",
    "QueryCancelled",
    "QueryTimedOut",
    "TargetExists",
    "TargetRefused",
]
