"""Copy link: the ``idemview open …`` command that opens one operation as this window shows it.

A link carries what a colleague needs to see the same findings (issue 20 §2): the ledger (a saved
connection's *name* when there is one — their own keyring supplies the password — else the URL without
its password, or the file), the layout (a preset's name or a layout file; a detected layout by the
name of the preset detection chose), the schema when one was given, the ``now`` the findings were
computed for, and the operation's idempotency key and scope. Never a password. A path under the
user's home is written ``~/…`` so it names the reader's own home, not someone else's.

Key and scope use the ``--key=KEY`` form: a key that starts with ``-`` would otherwise be read as an
option (issue 19 §16). The command is quoted for a POSIX shell (:func:`shlex.quote`).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL, make_url


@dataclass(frozen=True)
class DeepLink:
    """What ``idemview open`` receives: ``target`` (saved connection name, URL or file), optional
    ``key`` / ``scope`` (raw, as the ledger stores them), ``layout`` (preset name or file), ``schema``
    and ``now`` (aware, UTC; the instant findings are computed for)."""

    target: str
    key: str | None = None
    scope: str | None = None
    layout: str | None = None
    schema: str | None = None
    now: datetime | None = None

    def argv(self) -> list[str]:
        """The command's argv after ``idemview`` (what the CLI parser reads)."""
        out = ["open", self.target]
        for opt, v in (("key", self.key), ("scope", self.scope), ("layout", self.layout), ("schema", self.schema)):
            if v is not None and v != "":
                out.append(f"--{opt}={v}")
        if self.now is not None:
            out.append("--now=" + self.now.astimezone(UTC).isoformat().replace("+00:00", "Z"))
        return out

    def command(self) -> str:
        """The shell command: ``idemview open TARGET --key=KEY …``, each word quoted for a POSIX shell;
        a ``~/`` prefix is left unquoted so the shell expands it to the reader's home."""
        return " ".join(["idemview", *(_quote(a) for a in self.argv())])


def _quote(word: str) -> str:
    for lead in ("~/", "--layout=~/"):
        if word.startswith(lead):
            return lead + shlex.quote(word[len(lead) :])
    return shlex.quote(word)


def portable_path(path: str) -> str:
    """``path`` with the user's home written ``~/`` (so a link names the reader's home); else unchanged."""
    try:
        home = Path.home().resolve()
        p = Path(path).expanduser().resolve()
        rel = p.relative_to(home)
    except (ValueError, OSError, RuntimeError):
        return path
    return "~/" + rel.as_posix()


def _target(spec: Any) -> str:
    if spec.connection_id:
        return spec.name
    u = spec.url
    try:
        u = make_url(u) if not isinstance(u, URL) else u
    except Exception:  # noqa: BLE001 - a bare path (a SQLite file, a dump)
        return portable_path(str(spec.url))
    if u.get_backend_name() == "sqlite" and u.database:
        return portable_path(u.database)
    # URL.set(password=None) means "unchanged": _replace really drops it (never ``***`` either: a link
    # must still work when the password is supplied another way)
    return u._replace(password=None).render_as_string(hide_password=False) if u.password else str(spec.url)


def _layout(spec: Any, layout_obj: Any = None) -> str | None:
    """The layout as a link can name it: the spec's file or preset name; else (detected, or an object)
    the name of the shipped preset it is, when it is one; None when a link cannot name it."""
    lay = spec.layout
    if isinstance(lay, str) and lay:
        return portable_path(lay) if (lay.endswith(".toml") or os.sep in lay) else lay
    name = getattr(layout_obj if layout_obj is not None else lay, "name", None)
    if name:
        from idemview.layouts.layout import preset_names

        if name in preset_names():
            return name
    return None


def deep_link(spec: Any, scope: str | None, key: str, *, layout: Any = None, now: datetime | None = None) -> DeepLink:
    """The :class:`DeepLink` of the operation (``scope``, ``key``) of the ledger opened from ``spec`` (an
    :class:`~idemview.services.session.OpenSpec`); ``layout`` the Layout in use (names a detected one),
    ``now`` the instant the findings on screen were computed for."""
    return DeepLink(
        target=_target(spec),
        key=key,
        scope=scope or None,
        layout=_layout(spec, layout),
        schema=getattr(spec, "schema", None) or None,
        now=now,
    )
