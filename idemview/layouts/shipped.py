"""Layouts shipped with idemview (TOML data files in ``idemview/layouts/presets``) and layouts loaded by
name or file path."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from idemview.errors import InputError
from idemview.layouts.parse import parse_layout
from idemview.layouts.spec import Layout, LayoutError
from idemview.paths import note_source, readable_file


def shipped_names(package: str) -> list[str]:
    """Names of the TOML data files shipped in ``package`` (e.g. ``idemview.layouts.presets``), sorted."""
    return sorted(p.name[:-5] for p in resources.files(package).iterdir() if p.name.endswith(".toml"))


def shipped_text(package: str, name: str) -> str | None:
    """The text of ``package``'s ``<name>.toml``, or ``None`` when it ships no such file."""
    res = resources.files(package) / f"{name}.toml"
    return res.read_text("utf-8") if res.is_file() else None


def preset_names() -> list[str]:
    """Names of the shipped layouts (TOML data files in ``idemview/layouts/presets``), sorted."""
    return shipped_names("idemview.layouts.presets")


def load_preset(name: str) -> Layout:
    """Load a shipped layout by name. Raises :class:`LayoutError` naming the known presets."""
    text = shipped_text("idemview.layouts.presets", name)
    if text is None:
        raise LayoutError(f"no preset named {name!r}; known presets: {', '.join(preset_names())}")
    return parse_layout(text, origin=f"preset {name}")


def load_layout(spec: str) -> Layout:
    """A preset name, or a path to a layout TOML file. Raises :class:`LayoutError`.

    A shipped preset's name means the preset, even where a file or folder of that name exists in the
    working directory ("idemview" is the repo's own folder); a path ending ``.toml`` is always a file."""
    if not spec.endswith(".toml") and spec in preset_names():
        return load_preset(spec)
    p = Path(spec)
    if spec.endswith(".toml") or p.is_file():
        try:
            readable_file(p, "layout")
        except InputError as e:
            raise LayoutError(str(e)) from None
        note_source(p)  # a layout is never written over by an export or the demo
        try:
            text = p.read_text("utf-8")
        except OSError as e:
            raise LayoutError(f"cannot read layout file {spec}: {e.strerror}") from None
        return parse_layout(text, origin=str(p))
    return load_preset(spec)


def all_presets() -> list[Layout]:
    return [load_preset(n) for n in preset_names()]
