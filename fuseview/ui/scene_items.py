"""The items a GraphScene is made of: boxes, group frames, tags, edge routes and the zoomed-out overview."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QImage, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsPathItem,
    QGraphicsScene,
    QGraphicsSceneContextMenuEvent,
    QGraphicsSceneMouseEvent,
    QMenu,
    QStyle,
    QStyleOptionGraphicsItem,
    QWidget,
)

from fuseview.colors import FOCUS
from fuseview.graph.document import GraphDocument, shape_text
from fuseview.graph.geometry import Box, Frame, Layout, Route
from fuseview.ui import style


class GraphSceneBase(QGraphicsScene):
    """What the items ask of the scene they sit in (ui.graph_scene.GraphScene is the one kind)."""

    expand_requested = Signal(tuple)
    collapse_requested = Signal(tuple)
    context_hook: Callable | None = None  # (item, menu): the window adds its actions to an item's menu


def _is_graph_scene(scene: object) -> bool:
    return isinstance(scene, GraphSceneBase)


# Below these on-screen sizes a box is a plain coloured rectangle: text would be unreadable anyway and
# skipping it is what keeps a zoomed-out 10,000-box view smooth.
_MIN_TEXT_PX = 5.0
# Zoomed out past the point where the 11 px label falls under _MIN_TEXT_PX on screen, the label is drawn
# at this on-screen size instead (elided to the box) for as long as it fits the box's height: op types stay
# readable down to about 25 % zoom, where Netron's fixed 11 px text is under 3 px.
_HELD_LABEL_PX = 7.0
_MIN_DETAIL_PX = 7.0
# a held label too wide (or, below the 0.3 zoom, too tall) for its box shrinks down to this on-screen size
# before it is elided ("Ma…"): MatMul in its 80 px box holds at the ~0.25 zoom of a graph fitted across
_FIT_LABEL_PX = 4.0
_LABEL_PX = 11
_SUB_PX = 9
SCENE_MARGIN = 40.0

Z_FRAME, Z_ROUTE, Z_BOX, Z_TAG = -10.0, 0.0, 10.0, 11.0


FOCUS_COLOR = FOCUS


def _tint(pale: QColor, mark: QColor, amount: float = 0.28) -> QColor:
    """pale mixed with a little of mark: a box inside a candidate."""
    return QColor(
        int(pale.red() * (1 - amount) + mark.red() * amount),
        int(pale.green() * (1 - amount) + mark.green() * amount),
        int(pale.blue() * (1 - amount) + mark.blue() * amount),
    )


def heat_color(share: float) -> QColor:
    """Colour of a heat-map share 0..1: pale yellow through orange to dark red."""
    stops = ((0.0, (255, 247, 204)), (0.35, (253, 174, 97)), (0.7, (227, 74, 51)), (1.0, (153, 0, 13)))
    v = min(max(float(share), 0.0), 1.0)
    for (a, ca), (b, cb) in zip(stops, stops[1:], strict=False):
        if v <= b:
            t = (v - a) / (b - a)
            return QColor(*(int(x + (y - x) * t) for x, y in zip(ca, cb, strict=True)))
    return QColor(*stops[-1][1])


def _lod(painter: QPainter) -> float:
    return QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())


_FLAG = QGraphicsItem.GraphicsItemFlag
_BOX_FLAGS = _FLAG.ItemIsSelectable | _FLAG.ItemUsesExtendedStyleOption


class BoxItem(QGraphicsItem):
    """A node, graph input/output or collapsed group, drawn with level of detail."""

    def __init__(self, box: Box, category: str, sublabel: str | None = None):
        super().__init__()
        self.box = box
        self.sublabel = box.sublabel if sublabel is None else sublabel
        self.key = box.key
        self.category = category
        self.highlighted = False
        # fusion overlay: candidate colour (None: not in a candidate), faded (rejected), the focused
        # candidate's outline, how many candidates a collapsed group holds, heat-map fill
        self.mark: QColor | None = None
        self.mark_faded = False
        self.focused = False
        self.badge = 0
        self.swatches: list[QColor] = []  # a group of several rules: neutral outline, one swatch per rule
        self.heat: QColor | None = None
        self._base_tip = ""
        self._rect = QRectF(0, 0, box.w, box.h)
        self._texts: tuple[str, str] | None = None
        # (font px asked, font px drawn, text) of the label held readable zoomed out
        self._held: tuple[int, int, str] | None = None
        self.setPos(box.x, box.y)
        self.setZValue(Z_BOX)
        self.setFlags(_BOX_FLAGS)  # one call, not two setFlag: thousands of boxes are built on the UI thread
        tip = "\n".join(
            t for t in (box.label, box.sublabel, self.sublabel if self.sublabel != box.sublabel else "") if t
        )
        if box.kind == "group":
            tip += "\n(double-click to expand)"
        self._base_tip = tip
        self.setToolTip(tip)

    def set_extra_tip(self, text: str) -> None:
        """Append text (e.g. near-miss reasons) to the box's tooltip; '' restores the plain tooltip."""
        self.setToolTip(self._base_tip + ("\n\n" + text if text else ""))

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt API
        return self._rect.adjusted(-3, -3, 3, 3)

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addRect(self._rect)
        return path

    def set_highlighted(self, on: bool) -> None:
        """Mark the box as a search/op-type hit."""
        if on != self.highlighted:
            self.highlighted = on
            self.update()

    def held_label(self, lod: float) -> tuple[int, str] | None:
        """(scene font px, text) of the label held readable at this zoom: the whole op type at 7 px on
        screen, else shrunk to fit the box (down to 4 px), else elided; None if it cannot fit."""
        px = math.ceil(_HELD_LABEL_PX / max(lod, 1e-6))
        tallest = math.floor(self._rect.height() * 0.9)
        if px > tallest:  # a little below the 0.3 zoom (a graph fitted across): as tall as the box allows
            if tallest * lod < _FIT_LABEL_PX:
                return None
            px = tallest
        if self._held is None or self._held[0] != px:
            w = self._rect.width() - (11 if self.box.kind == "node" else 8)  # left inset, 2 px right
            fm = QFontMetricsF(style.font(px, True))
            full = fm.horizontalAdvance(self.box.label)
            exact = px * w / full if full > w else px
            if exact * lod >= _FIT_LABEL_PX:  # the whole label, a little smaller (judged before rounding)
                self._held = (px, max(1, math.floor(exact)), self.box.label)
            else:
                self._held = (px, px, fm.elidedText(self.box.label, Qt.TextElideMode.ElideRight, w))
        _px, size, text = self._held
        return (size, text) if len(text.rstrip("…")) >= 2 else None

    def _paint_held_label(self, painter: QPainter, lod: float) -> None:
        held = self.held_label(lod)
        if held is None:
            return
        px, text = held
        r = self._rect
        left = r.x() + (9 if self.box.kind == "node" else 6)
        painter.setPen(QColor("#ffffff") if self.box.kind in ("input", "output") else QColor(style.TEXT))
        painter.setFont(style.font(px, True))
        where = QRectF(left, r.y(), r.right() - left - 2, r.height())
        painter.drawText(where, Qt.AlignmentFlag.AlignVCenter, text)

    def _elided(self) -> tuple[str, str]:
        if self._texts is None:
            w = self._rect.width() - (16 if self.box.kind == "node" else 12)
            label_fm = QFontMetricsF(style.font(_LABEL_PX, True))
            sub_fm = QFontMetricsF(style.font(_SUB_PX))
            label = label_fm.elidedText(self.box.label, Qt.TextElideMode.ElideRight, w)
            sub = sub_fm.elidedText(self.sublabel, Qt.TextElideMode.ElideMiddle, w) if self.sublabel else ""
            self._texts = (label, sub)
        return self._texts

    def _paint_swatches(self, painter: QPainter) -> None:
        # the rules inside a group of several: a row of small squares along its bottom edge
        r, side = self._rect, 7.0
        painter.setPen(QPen(QColor("#ffffff"), 0.8))
        for i, color in enumerate(self.swatches[: max(1, int((r.width() - 12) // (side + 2)))]):
            painter.setBrush(color)
            painter.drawRect(QRectF(r.x() + 6 + i * (side + 2), r.bottom() - side - 3, side, side))

    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        strong, pale = style.colors(self.category)
        r = self._rect
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        lod = _lod(painter)
        on_screen_h = r.height() * lod
        if self.heat is not None:
            pale = self.heat
        elif self.mark is not None and not self.mark_faded and not self.swatches:
            pale = _tint(pale, self.mark)
        if on_screen_h < _MIN_DETAIL_PX and not selected and not self.highlighted and not self.focused:
            fill = strong if self.box.kind != "node" else pale.darker(115)
            if self.heat is not None:
                fill = self.heat
            elif self.mark is not None:
                fill = self.mark if not self.mark_faded else QColor("#c4c8ce")
            painter.fillRect(r, fill)
            return
        kind = self.box.kind
        if kind == "group":
            # a stacked-card look says "there is more inside"
            painter.setPen(QPen(strong, 1.0))
            painter.setBrush(pale.darker(106))
            painter.drawRoundedRect(r.translated(4, 4), 5, 5)
        painter.setBrush(pale)
        painter.setPen(QPen(strong, 1.0))
        if kind in ("input", "output"):
            painter.drawRoundedRect(r, r.height() / 2, r.height() / 2)
        else:
            painter.drawRoundedRect(r, 4, 4)
            if kind == "node":
                painter.fillRect(QRectF(r.x() + 0.5, r.y() + 3, 5, r.height() - 6), strong)
        if selected or self.mark is not None or self.highlighted or self.focused or self.swatches:
            self._paint_marks(painter, r, selected)  # the rarer boxes: kept out of the plain box's path
        if _LABEL_PX * lod < _MIN_TEXT_PX:
            self._paint_held_label(painter, lod)
            return
        label, sub = self._elided()
        left = r.x() + (10 if kind == "node" else 8)
        text_w = r.width() - (left - r.x()) - 4
        dark = kind in ("input", "output")
        painter.setPen(QColor("#ffffff") if dark else QColor(style.TEXT))
        painter.setFont(style.font(_LABEL_PX, True))
        show_sub = bool(sub) and r.height() >= 28 and _SUB_PX * lod >= _MIN_TEXT_PX
        if not show_sub:
            painter.drawText(QRectF(left, r.y(), text_w, r.height()), Qt.AlignmentFlag.AlignVCenter, label)
            return
        half = r.height() / 2
        painter.drawText(QRectF(left, r.y() + 2, text_w, half - 1), Qt.AlignmentFlag.AlignBottom, label)
        painter.setPen(QColor("#cfd8e3") if dark else QColor(style.SUBTEXT))
        painter.setFont(style.font(_SUB_PX))
        painter.drawText(QRectF(left, r.y() + half + 1, text_w, half - 3), Qt.AlignmentFlag.AlignTop, sub)

    def _paint_marks(self, painter: QPainter, r: QRectF, selected: bool) -> None:
        """The outlines over the box: its candidate mark, highlight, focus, swatches, badge, selection."""
        if self.mark is not None:
            painter.setBrush(Qt.BrushStyle.NoBrush)
            color = QColor(self.mark)
            if self.mark_faded:
                color.setAlpha(90)
            pen = QPen(color, 2.5)
            if self.mark_faded or self.swatches:
                pen.setStyle(Qt.PenStyle.DashLine)
            painter.setPen(pen)
            painter.drawRoundedRect(r.adjusted(-0.5, -0.5, 0.5, 0.5), 4.5, 4.5)
        if self.highlighted:
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(QPen(QColor(style.HIGHLIGHT), 4.0))
            painter.drawRoundedRect(r.adjusted(-1, -1, 1, 1), 5, 5)
        if self.focused:
            painter.setBrush(Qt.BrushStyle.NoBrush)
            pen = QPen(QColor(FOCUS_COLOR), 3.0, Qt.PenStyle.DashLine)
            painter.setPen(pen)
            painter.drawRoundedRect(r.adjusted(-4, -4, 4, 4), 6, 6)
        if self.swatches:
            self._paint_swatches(painter)
        if self.badge and self.mark is not None:
            d = 16.0
            badge = QRectF(r.right() - d * 0.7, r.top() - d * 0.4, d, d)
            painter.setPen(QPen(QColor("#ffffff"), 1.0))
            painter.setBrush(self.mark)
            painter.drawEllipse(badge)
            painter.setFont(style.font(9, True))
            painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, str(min(self.badge, 99)))
        if selected:
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(QPen(QColor(style.SELECTION), 2.5))
            painter.drawRoundedRect(r.adjusted(-1.5, -1.5, 1.5, 1.5), 5, 5)

    def mouseDoubleClickEvent(self, event: QGraphicsSceneMouseEvent) -> None:  # noqa: N802 - Qt API
        scene = self.scene()
        if self.box.kind == "group" and _is_graph_scene(scene):
            scene.expand_requested.emit(tuple(self.box.scope))
            event.accept()
            return
        super().mouseDoubleClickEvent(event)

    def contextMenuEvent(self, event: QGraphicsSceneContextMenuEvent) -> None:  # noqa: N802 - Qt API
        scene = self.scene()
        if not _is_graph_scene(scene):
            return
        menu = QMenu()
        if scene.context_hook is not None:
            scene.context_hook(self, menu)
        if self.box.kind == "group":
            menu.addAction(
                f"Expand {self.box.label}", lambda: scene.expand_requested.emit(tuple(self.box.scope))
            )
        if self.box.kind == "node" and self.box.scope:
            scope = tuple(self.box.scope)
            menu.addAction(f"Collapse {'/'.join(scope)}", lambda: scene.collapse_requested.emit(scope))
        if not menu.isEmpty():
            menu.exec(event.screenPos())


class FrameItem(QGraphicsItem):
    """The outline of an expanded group; its header collapses it (double-click or context menu)."""

    HEADER = 18.0

    def __init__(self, frame: Frame, depth: int):
        super().__init__()
        self.frame = frame
        self.key = frame.key
        self._rect = QRectF(0, 0, frame.w, frame.h)
        self.setPos(frame.x, frame.y)
        self.setZValue(Z_FRAME + depth * 0.01)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption, True)
        self.setToolTip(f"{'/'.join(frame.scope)}\n(double-click the header to collapse)")

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt API
        return self._rect.adjusted(-1, -1, 1, 1)

    def header_rect(self) -> QRectF:
        """The clickable title strip at the top of the frame."""
        return QRectF(0, 0, self._rect.width(), min(self.HEADER, self._rect.height()))

    def shape(self) -> QPainterPath:
        # Only the header is "solid": a click inside the frame reaches the background (pan) or the boxes.
        path = QPainterPath()
        path.addRect(self.header_rect())
        return path

    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        lod = _lod(painter)
        r = self._rect
        painter.setBrush(style.FRAME_FILL)
        pen = QPen(QColor(style.FRAME_BORDER), 1.0)
        pen.setCosmetic(lod < 0.5)
        painter.setPen(pen)
        painter.drawRoundedRect(r, 6, 6)
        if _SUB_PX * lod < _MIN_TEXT_PX:
            return
        painter.setPen(QColor(style.PALETTE["group"][0]))
        painter.setFont(style.font(_SUB_PX + 1, True))
        painter.drawText(
            QRectF(8, 2, r.width() - 16, self.HEADER - 2),
            Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
            "▾ " + self.frame.label,
        )

    def mouseDoubleClickEvent(self, event: QGraphicsSceneMouseEvent) -> None:  # noqa: N802 - Qt API
        scene = self.scene()
        if _is_graph_scene(scene) and self.frame.scope:
            scene.collapse_requested.emit(tuple(self.frame.scope))
            event.accept()

    def contextMenuEvent(self, event: QGraphicsSceneContextMenuEvent) -> None:  # noqa: N802 - Qt API
        scene = self.scene()
        if _is_graph_scene(scene) and self.frame.scope:
            menu = QMenu()
            menu.addAction(
                f"Collapse {self.frame.label}", lambda: scene.collapse_requested.emit(self.frame.scope)
            )
            menu.exec(event.screenPos())


class TagItem(QGraphicsItem):
    """A small text tag (a stub edge's source, an aggregated edge's count), hidden when zoomed out."""

    def __init__(self, text: str, anchor: QPointF, align_right: bool = False):
        super().__init__()
        self.text = text
        fm = QFontMetricsF(style.font(_SUB_PX))
        w = min(fm.horizontalAdvance(text) + 6, 160.0)
        self._rect = QRectF(-w if align_right else 0, -fm.height(), w, fm.height())
        self.setPos(anchor)
        self.setZValue(Z_TAG)

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt API
        return self._rect

    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        if _SUB_PX * _lod(painter) < _MIN_TEXT_PX + 1:
            return
        painter.setFont(style.font(_SUB_PX))
        painter.setPen(QColor(style.SUBTEXT))
        fm = QFontMetricsF(style.font(_SUB_PX))
        text = fm.elidedText(self.text, Qt.TextElideMode.ElideMiddle, self._rect.width() - 4)
        painter.drawText(self._rect.adjusted(3, 0, -3, 0), Qt.AlignmentFlag.AlignVCenter, text)


def route_path(points: tuple[tuple[float, float], ...], arrow: float = 6.0) -> QPainterPath:
    """A smoothed polyline through the route's points, ending in an open arrowhead."""
    path = QPainterPath()
    if len(points) < 2:
        return path
    pts = [QPointF(x, y) for x, y in points]
    path.moveTo(pts[0])
    if len(pts) == 2:
        path.lineTo(pts[1])
    else:
        for i in range(1, len(pts) - 1):
            mid = (pts[i] + pts[i + 1]) / 2 if i < len(pts) - 2 else pts[i + 1]
            path.quadTo(pts[i], mid)
    end, before = pts[-1], pts[-2]
    dx, dy = end.x() - before.x(), end.y() - before.y()
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    for side in (-1, 1):
        path.moveTo(end)
        path.lineTo(
            end.x() - arrow * ux + side * arrow * 0.55 * uy, end.y() - arrow * uy - side * arrow * 0.55 * ux
        )
    return path


@lru_cache(maxsize=64)
def _route_pen(count: int, stub: bool, on: bool) -> QPen:
    width = 1.2 + min(count - 1, 6) * 0.5
    color = QColor(style.EDGE_ACTIVE if on else ("#b3bac4" if stub else style.EDGE))
    pen = QPen(color, width * (1.6 if on else 1.0))
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    return pen


def route_paths(layout: Layout) -> list[QPainterPath]:
    """The drawn path of every route of a layout (plain data: a worker thread may build them)."""
    return [route_path(r.points) for r in layout.routes]


_NO_BUTTON = Qt.MouseButton.NoButton


class RouteItem(QGraphicsPathItem):
    """An edge (painted by Qt in C++: no Python call per frame)."""

    def __init__(self, route: Route, path: QPainterPath | None = None):
        super().__init__(path if path is not None else route_path(route.points))
        self.route = route
        self.set_active(False)  # sets the pen and the z value
        self.setAcceptedMouseButtons(_NO_BUTTON)

    def set_active(self, on: bool) -> None:
        """Draw the edge in the accent colour (it touches the selection)."""
        self.setPen(_route_pen(self.route.count, self.route.stub, on))
        self.setZValue(Z_ROUTE + (1 if on else 0))


# Below this zoom one cached picture of the whole graph replaces the items: at fit zoom a 10,000-box
# graph would otherwise cost one Python paint call per box and edge on every frame.
OVERVIEW_SCALE = 0.06
_OVERVIEW_MAX_SIDE = 16384
# and at most this many pixels (64 MB): a lazy scene shows the picture wherever the view holds too many boxes
# to paint one by one, not only below OVERVIEW_SCALE, and a 100-chain graph at 50 % zoom would be 94 M pixels
_OVERVIEW_MAX_PIXELS = 1 << 24


class OverviewItem(QGraphicsItem):
    """The whole graph as one cached image per zoom octave, shown only when zoomed far out."""

    def __init__(self, scene: QGraphicsScene):
        super().__init__()
        self._bounds = scene.sceneRect()
        self._cache: dict[int, tuple[QImage, float]] = {}
        self.setZValue(Z_BOX - 1)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption, True)

    def forget_pictures(self) -> None:
        """Drop the cached pictures (items were added or changed since they were drawn)."""
        self._cache.clear()

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt API
        return self._bounds

    def _image(self, lod: float) -> tuple[QImage, float]:
        octave = math.floor(math.log2(max(lod, 1e-6)))
        hit = self._cache.get(octave)
        if hit is None:
            w, h = self._bounds.width(), self._bounds.height()
            scale = min(2.0 ** (octave + 1), _OVERVIEW_MAX_SIDE / max(w, h),
                        math.sqrt(_OVERVIEW_MAX_PIXELS / max(w * h, 1.0)))
            # a coarser octave is the finest picture drawn so far, scaled down: drawing 50,000 boxes again
            # at each octave of a zoom-out cost ~0.4 s a step
            finer = [c for c in self._cache.values() if c[1] >= scale]
            if not finer:
                hit = (self.scene().draw_overview(scale), scale)
            else:
                img, s = min(finer, key=lambda c: c[1])
                size = (max(1, round(img.width() * scale / s)), max(1, round(img.height() * scale / s)))
                smooth = Qt.TransformationMode.SmoothTransformation
                down = img.scaled(*size, Qt.AspectRatioMode.IgnoreAspectRatio, smooth) if s > scale else img
                hit = (down, min(s, scale))
            self._cache[octave] = hit
        return hit

    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        img, scale = self._image(_lod(painter))
        exposed = option.exposedRect.intersected(self._bounds)
        if exposed.isEmpty():
            return
        source = QRectF(
            (exposed.x() - self._bounds.x()) * scale,
            (exposed.y() - self._bounds.y()) * scale,
            exposed.width() * scale,
            exposed.height() * scale,
        )
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, True)
        painter.drawImage(exposed, img, source)
        # selection and highlights stay live on top of the cached picture
        # self.scene(), not a stored reference: an item holding its scene makes a cycle that Python's
        # garbage collector may break on any thread, destroying the scene under the UI thread's feet
        scene = self.scene()
        for color, rects in scene.overlay_rects():
            pen = QPen(color, 3.0)
            pen.setCosmetic(True)
            painter.setPen(pen)
            painter.setBrush(color)
            painter.drawRects(rects)


def short_shape(shape) -> str:
    """A shape for a box: shape inference's invented dims (unk__12) shown as ?, named ones kept."""
    return shape_text(shape, hide_invented=True)


def node_sublabel(box: Box, graph: GraphDocument) -> str:
    """What a node box shows under its op type: its output's shape (the name is in the inspector)."""
    if box.kind != "node" or box.node is None:
        return box.sublabel
    n = graph.nodes[box.node]
    shapes = [short_shape(graph.tensors[o].shape) for o in n.outputs if o in graph.tensors]
    known = [sh for sh in shapes if sh != "?"]
    if not known:
        tail = n.name.rsplit("/", 1)[-1]
        return "?" if tail.startswith(n.op_type) else tail  # 'Reshape_3' says nothing the label doesn't
    return known[0] if len(n.outputs) == 1 else f"{known[0]} +{len(n.outputs) - 1}"


def category_of(box: Box, graph: GraphDocument) -> str:
    if box.kind == "node" and box.node is not None:
        n = graph.nodes[box.node]
        return style.op_category(n.op_type, n.domain)
    return box.kind


def layout_rect(layout: Layout) -> QRectF:
    """The laid-out graph's extent (what itemsBoundingRect gives, without walking thousands of items)."""
    return QRectF(-3, -3, max(layout.width, 1.0) + 6, max(layout.height, 1.0) + 6)
