"""Write a GraphScene to an SVG or PNG file (the same drawing as the window), atomically."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QRectF, QSize
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QGraphicsScene

from fuseview.atomic import write_atomic as _write_atomic
from fuseview.errors import FuseviewError
from fuseview.ui import style
from fuseview.ui.graph_scene import GraphScene

MAX_PNG_SIDE = 16384
MAX_PNG_PIXELS = 120_000_000  # ~480 MB of ARGB: past this a PNG is useless and the allocation risky
IMAGE_SUFFIXES = (".svg", ".png")


def check_image_path(path: str | os.PathLike) -> Path:
    """The output path if its suffix is .svg or .png and its folder exists; FuseviewError otherwise."""
    p = Path(path)
    if p.suffix.lower() not in IMAGE_SUFFIXES:
        raise FuseviewError(f"{p}: output must end in .svg or .png")
    if not p.parent.resolve().is_dir():
        raise FuseviewError(f"{p.parent}: no such folder")
    return p


def png_size(source: QRectF, scale: float = 1.0) -> tuple[int, int, float]:
    """Pixel width, height and the effective scale of a PNG of source, capped in side and area."""
    w, h = max(source.width(), 1.0), max(source.height(), 1.0)
    s = scale
    s = min(s, MAX_PNG_SIDE / w, MAX_PNG_SIDE / h)
    if w * h * s * s > MAX_PNG_PIXELS:
        s = (MAX_PNG_PIXELS / (w * h)) ** 0.5
    return max(1, int(w * s)), max(1, int(h * s)), s


def _render(scene: QGraphicsScene, painter: QPainter, target: QRectF, source: QRectF) -> None:
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    painter.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
    scene.render(painter, target, source)


def write_atomic(path: Path, write) -> None:
    """write(tmp) into a temp file beside path, then rename it over path; an empty result is an error."""
    _write_atomic(path, write, allow_empty=False)


def render_scene(scene: QGraphicsScene, path: str | os.PathLike, scale: float = 1.0) -> dict:
    """Draw the whole scene into path (.svg or .png); returns {"width", "height", "scale"} of the image."""
    out = check_image_path(path)
    if isinstance(scene, GraphScene):
        scene = scene.whole()  # a lazy scene holds items only where the window looked
    source = scene.sceneRect()
    if out.suffix.lower() == ".png":
        w, h, s = png_size(source, scale)

        def write(tmp: str) -> None:
            img = QImage(w, h, QImage.Format.Format_ARGB32_Premultiplied)
            if img.isNull():
                raise FuseviewError(f"{out}: cannot allocate a {w}x{h} image")
            img.fill(QColor(style.BACKGROUND))
            painter = QPainter(img)
            _render(scene, painter, QRectF(0, 0, w, h), source)
            painter.end()
            if not img.save(tmp, "PNG"):
                raise FuseviewError(f"{out}: cannot write PNG")

        write_atomic(out, write)
        return {"width": w, "height": h, "scale": s}

    from PySide6.QtSvg import QSvgGenerator

    w, h = int(source.width() * scale) + 1, int(source.height() * scale) + 1

    def write_svg(tmp: str) -> None:
        gen = QSvgGenerator()
        gen.setFileName(tmp)
        gen.setSize(QSize(w, h))
        gen.setViewBox(QRectF(0, 0, w, h))
        gen.setResolution(96)
        gen.setTitle(out.stem)
        gen.setDescription("drawn by fuseview")
        painter = QPainter(gen)
        painter.fillRect(QRectF(0, 0, w, h), QColor(style.BACKGROUND))
        _render(scene, painter, QRectF(0, 0, w, h), source)
        painter.end()

    write_atomic(out, write_svg)
    return {"width": w, "height": h, "scale": scale}
