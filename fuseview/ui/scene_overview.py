"""The overview picture of a GraphScene: the whole graph as one image, boxes as filled rectangles."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QByteArray, QDataStream, QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QImage, QPainter, QPainterPath, QPen, QPolygonF

from fuseview.graph.geometry import Layout
from fuseview.ui import style
from fuseview.ui.scene_index import SceneIndex
from fuseview.ui.scene_items import heat_color

# a box's heat share and candidate mark (colour, faded, badge, swatches), either None
Overlay = tuple[float | None, tuple[QColor, bool, int, list[QColor]] | None]


class GraphScene(Protocol):
    """What the picture reads of a ui.graph_scene.GraphScene."""

    layout: Layout
    lazy: bool
    index: SceneIndex

    def sceneRect(self) -> QRectF: ...  # noqa: N802, D102 - Qt API

    def categories(self) -> list[str]: ...  # noqa: D102

    def box_overlay(self, key: str) -> Overlay: ...  # noqa: D102


def _box_colors(scene: GraphScene) -> list[QColor]:
    """Each laid-out box's fill in the overview: heat, else its candidate mark, else its category's."""
    categories = scene.categories()
    plain: dict[tuple[str, bool], QColor] = {}
    colors = []
    for b, cat in zip(scene.layout.boxes, categories, strict=True):
        share, mark = scene.box_overlay(b.key)
        if share is not None:
            colors.append(heat_color(share))
        elif mark is not None and not mark[1]:
            colors.append(mark[0])
        else:
            kind = b.kind != "node"
            color = plain.get((cat, kind))
            if color is None:
                strong, pale = style.colors(cat)
                color = plain[(cat, kind)] = strong if kind else pale.darker(140)
            colors.append(color)
    return colors


def _routes_path(index: SceneIndex) -> QPainterPath:
    """Every drawn route of a layout in one path, read from its stream form (SceneIndex.routes_stream)."""
    path = QPainterPath()
    data = QByteArray(index.routes_stream())  # held: the stream reads it in place
    stream = QDataStream(data)
    stream >> path
    return path


def draw_overview(scene: GraphScene, scale: float) -> QImage:
    """The whole graph at scale as an image: boxes as filled rectangles, edges as hairlines."""
    b = scene.sceneRect()
    img = QImage(
        max(1, int(b.width() * scale)),
        max(1, int(b.height() * scale)),
        QImage.Format.Format_ARGB32_Premultiplied,
    )
    img.fill(QColor(style.BACKGROUND))
    p = QPainter(img)
    p.scale(scale, scale)
    p.translate(-b.x(), -b.y())
    pen = QPen(QColor(style.FRAME_BORDER), 1.0)
    pen.setCosmetic(True)
    p.setPen(pen)
    p.setBrush(style.FRAME_FILL)
    for f in scene.layout.frames:
        p.drawRect(QRectF(f.x, f.y, f.w, f.h))
    edge = QColor(style.EDGE)
    edge.setAlpha(150)
    pen = QPen(edge, 1.0)
    pen.setCosmetic(True)
    p.setPen(pen)
    p.setBrush(Qt.BrushStyle.NoBrush)
    if scene.lazy:
        p.drawPath(_routes_path(scene.index))
    else:
        for r in scene.layout.routes:
            if len(r.points) >= 2:
                p.drawPolyline(QPolygonF([QPointF(x, y) for x, y in r.points]))
    p.setPen(Qt.PenStyle.NoPen)
    by_color: dict[int, tuple[QColor, list[QRectF]]] = {}
    for box, color in zip(scene.layout.boxes, _box_colors(scene), strict=True):
        by_color.setdefault(color.rgba(), (color, []))[1].append(QRectF(box.x, box.y, box.w, box.h))
    for color, rects in by_color.values():
        p.setBrush(color)
        p.drawRects(rects)
    p.end()
    return img

