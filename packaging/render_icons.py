"""Render the app icon's PNGs (16 … 512 px) from its SVG source, with Qt's own SVG renderer.

    QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/render_icons.py

Writes resources/icon-<N>.png (flat: every folder inside a Python package would count as a package of
its own for setuptools; installers copy them to hicolor/<N>x<N>/apps/<APP_ID>.png). The PNGs are committed;
run this again after editing resources/<APP_ID>.svg.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESOURCES = ROOT / "resources"
SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def render(svg: Path, out_dir: Path, sizes=SIZES) -> list[Path]:
    """Render ``svg`` to ``out_dir/icon-N.png`` for each size; returns the paths."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise ValueError(f"{svg} is not a valid SVG")
    written = []
    for n in sizes:
        img = QImage(n, n, QImage.Format.Format_ARGB32_Premultiplied)
        img.fill(Qt.GlobalColor.transparent)
        p = QPainter(img)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        renderer.render(p)
        p.end()
        target = out_dir / f"icon-{n}.png"
        # Best compression: the PNGs are committed.
        if not img.save(str(target), "PNG", 0):
            raise OSError(f"cannot write {target}")
        written.append(target)
    return written


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, str(ROOT))
    from idemview.appinfo import APP_ID

    for path in render(RESOURCES / f"{APP_ID}.svg", RESOURCES):
        print(path.relative_to(ROOT), path.stat().st_size, "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
