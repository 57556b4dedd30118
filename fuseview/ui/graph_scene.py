"""The graph as a QGraphicsScene built from a Layout: boxes, group frames and edge routes."""

from __future__ import annotations

import math
import time
from functools import lru_cache

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QImage, QPainter, QPainterPath, QPen, QPolygonF
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
from fuseview.graph.document import GraphDocument
from fuseview.graph.geometry import Box, Frame, Layout, Route
from fuseview.session.panes import Marks, PaneState
from fuseview.ui import style

# Below these on-screen sizes a box is a plain coloured rectangle: text would be unreadable anyway and
# skipping it is what keeps a zoomed-out 10,000-box view smooth.
_MIN_TEXT_PX = 5.0
# Zoomed out past the point where the 11 px label falls under _MIN_TEXT_PX on screen, the label is drawn
# at this on-screen size instead (elided to the box) for as long as it fits the box's height: op types stay
# readable down to about 25 % zoom, where Netron's fixed 11 px text is under 3 px.
_HELD_LABEL_PX = 7.0
_MIN_DETAIL_PX = 7.0
_LABEL_PX = 11
_SUB_PX = 9
_MARGIN = 40.0

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
        self.heat: QColor | None = None
        self._base_tip = ""
        self._rect = QRectF(0, 0, box.w, box.h)
        self._texts: tuple[str, str] | None = None
        self._held: tuple[int, str] | None = None  # (font px, text) of the label held readable zoomed out
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
        """(scene font px, elided text) of the label held readable at this zoom; None if it cannot fit."""
        px = math.ceil(_HELD_LABEL_PX / max(lod, 1e-6))
        if px > self._rect.height() * 0.9:
            return None
        if self._held is None or self._held[0] != px:
            w = self._rect.width() - (14 if self.box.kind == "node" else 10)
            fm = QFontMetricsF(style.font(px, True))
            text = fm.elidedText(self.box.label, Qt.TextElideMode.ElideRight, w)
            self._held = (px, text)
        px, text = self._held
        return (px, text) if len(text.rstrip("…")) >= 2 else None

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
        elif self.mark is not None and not self.mark_faded:
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
        if self.mark is not None:
            painter.setBrush(Qt.BrushStyle.NoBrush)
            color = QColor(self.mark)
            if self.mark_faded:
                color.setAlpha(90)
            pen = QPen(color, 2.5)
            if self.mark_faded:
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

    def mouseDoubleClickEvent(self, event: QGraphicsSceneMouseEvent) -> None:  # noqa: N802 - Qt API
        scene = self.scene()
        if self.box.kind == "group" and isinstance(scene, GraphScene):
            scene.expand_requested.emit(tuple(self.box.scope))
            event.accept()
            return
        super().mouseDoubleClickEvent(event)

    def contextMenuEvent(self, event: QGraphicsSceneContextMenuEvent) -> None:  # noqa: N802 - Qt API
        scene = self.scene()
        if not isinstance(scene, GraphScene):
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
        if isinstance(scene, GraphScene) and self.frame.scope:
            scene.collapse_requested.emit(tuple(self.frame.scope))
            event.accept()

    def contextMenuEvent(self, event: QGraphicsSceneContextMenuEvent) -> None:  # noqa: N802 - Qt API
        scene = self.scene()
        if isinstance(scene, GraphScene) and self.frame.scope:
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


class OverviewItem(QGraphicsItem):
    """The whole graph as one cached image per zoom octave, shown only when zoomed far out."""

    def __init__(self, scene: GraphScene):
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
            scale = min(
                2.0 ** (octave + 1), _OVERVIEW_MAX_SIDE / max(self._bounds.width(), self._bounds.height())
            )
            hit = (self.scene().draw_overview(scale), scale)
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
        marks = [(it, QColor(style.HIGHLIGHT)) for it in scene.highlighted_items()]
        marks += [(it, QColor(FOCUS_COLOR)) for it in scene.focused_items()]
        marks += [(it, QColor(style.SELECTION)) for it in scene.selectedItems() if isinstance(it, BoxItem)]
        for it, color in marks:
            pen = QPen(color, 3.0)
            pen.setCosmetic(True)
            painter.setPen(pen)
            painter.setBrush(color)
            painter.drawRect(it.sceneBoundingRect())


def short_shape(shape) -> str:
    """A shape for a box: shape inference's invented dims (unk__12) shown as ?, named ones kept."""
    if shape is None:
        return "?"
    dims = ["?" if d is None or (isinstance(d, str) and d.startswith("unk__")) else str(d) for d in shape]
    return "[" + ", ".join(dims) + "]"


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


def _category_of(box: Box, graph: GraphDocument) -> str:
    if box.kind == "node" and box.node is not None:
        n = graph.nodes[box.node]
        return style.op_category(n.op_type, n.domain)
    return box.kind


def layout_rect(layout: Layout) -> QRectF:
    """The laid-out graph's extent (what itemsBoundingRect gives, without walking thousands of items)."""
    return QRectF(-3, -3, max(layout.width, 1.0) + 6, max(layout.height, 1.0) + 6)


class GraphScene(QGraphicsScene):
    """A drawn Layout: items keyed like the Layout's boxes, frames and routes."""

    expand_requested = Signal(tuple)
    collapse_requested = Signal(tuple)

    def __init__(
        self,
        graph: GraphDocument,
        layout: Layout,
        parent=None,
        paths: list[QPainterPath] | None = None,
        incremental: bool = False,
        state: PaneState | None = None,
    ):
        """incremental: add no item yet; the caller calls build_some() until it returns True (lets a
        big graph be built across event-loop turns instead of freezing the window). state: the pane's
        overlay data it draws (the session's; its own empty one when not given)."""
        super().__init__(parent)
        self.graph = graph
        self.layout = layout
        self._paths = paths  # route_paths(layout), when a worker built them already
        self.boxes: dict[str, BoxItem] = {}
        self.frames: dict[str, FrameItem] = {}
        self.routes: list[RouteItem] = []
        self._routes_of: dict[str, list[RouteItem]] = {}
        self._active: list[RouteItem] = []
        self._highlighted: list[BoxItem] = []
        self._details: list[QGraphicsItem] = []
        self._marked: list[BoxItem] = []
        self._focused: list[BoxItem] = []
        self._heated: list[BoxItem] = []
        # what is drawn over the graph, as plain data owned by the session; the set_* methods below only draw
        self.state = state if state is not None else PaneState()
        self.selectionChanged.connect(self._mirror_selection)
        # called as hook(box_item, menu) before a box's context menu is shown (the workbench adds to it)
        self.context_hook = None
        self.overview_on = False
        self.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.BspTreeIndex)
        self.setBackgroundBrush(QColor(style.BACKGROUND))
        lay = layout
        self.setSceneRect(
            QRectF(-_MARGIN, -_MARGIN, max(lay.width, 1.0) + 2 * _MARGIN, max(lay.height, 1.0) + 2 * _MARGIN)
        )
        self.overview = OverviewItem(self)
        self.overview.setVisible(False)
        self.addItem(self.overview)
        self._pending = self._build_steps()
        if incremental:
            # The index depth Qt would pick for the finished scene: growing item by item it would
            # otherwise rebuild its tree each time the count doubles.
            self.setBspTreeDepth(max(5, math.ceil(math.log2(max(2, self.item_estimate())))))
        else:
            self.build_some(math.inf)
        self.selectionChanged.connect(self._on_selection)

    def item_estimate(self) -> int:
        """About how many items the layout makes (boxes, frames, routes; not their tags)."""
        return len(self.layout.boxes) + len(self.layout.frames) + len(self.layout.routes)

    @property
    def building(self) -> bool:
        """Whether items are still being added (an incremental scene before build_some said done)."""
        return self._pending is not None

    def build_some(self, budget_s: float) -> bool:
        """Add items for about budget_s seconds; True once every item of the layout is in the scene."""
        if self._pending is None:
            return True
        end = time.perf_counter() + budget_s
        for _ in self._pending:
            if time.perf_counter() >= end:
                return False
        self._pending = None
        self.overview.forget_pictures()  # a picture drawn while building misses items
        if self.overview_on:
            self.overview.update()
        return True

    def _add(self, item: QGraphicsItem) -> None:
        if self.overview_on:
            item.setVisible(False)
        self.addItem(item)
        self._details.append(item)

    def _build_steps(self):
        """Add the items in layout order, yielding every few items (an incremental build stops there)."""
        lay, graph = self.layout, self.graph
        labels = {b.key: b.label for b in lay.boxes}
        for f in lay.frames:
            item = FrameItem(f, len(f.scope))
            self._add(item)
            self.frames[f.key] = item
        yield
        for i, b in enumerate(lay.boxes):
            item = BoxItem(b, _category_of(b, graph), node_sublabel(b, graph))
            self._add(item)
            self.boxes[b.key] = item
            if i % 32 == 31:
                yield
        for i, r in enumerate(lay.routes):
            if i % 64 == 63:
                yield
            if len(r.points) < 2:
                continue
            item = RouteItem(r, self._paths[i] if self._paths is not None else None)
            self._add(item)
            self.routes.append(item)
            self._routes_of.setdefault(r.src, []).append(item)
            self._routes_of.setdefault(r.dst, []).append(item)
            if r.stub:
                x, y = r.points[0]
                self._add(TagItem(labels.get(r.src, r.tensor), QPointF(x + 3, y + 2)))
            elif r.count > 1:
                x, y = r.points[-1]
                self._add(TagItem(f"×{r.count}", QPointF(x + 4, y - 4)))

    def item_for_key(self, key: str) -> BoxItem | None:
        """The box item with this layout key, if drawn."""
        return self.boxes.get(key)

    def selected_keys(self) -> list[str]:
        """Keys of the selected boxes, in layout order."""
        return [it.key for it in self.selectedItems() if isinstance(it, BoxItem)]

    def select_keys(self, keys: list[str]) -> None:
        """Replace the selection by these boxes (unknown keys are ignored)."""
        self.blockSignals(True)
        self.clearSelection()
        for k in keys:
            item = self.boxes.get(k)
            if item is not None:
                item.setSelected(True)
        self.blockSignals(False)
        self.selectionChanged.emit()

    def set_highlight(self, keys: list[str] | set[str]) -> int:
        """Highlight these boxes (and un-highlight the others); returns how many are drawn."""
        for item in self._highlighted:
            item.set_highlighted(False)
        self._highlighted = [self.boxes[k] for k in keys if k in self.boxes]
        for item in self._highlighted:
            item.set_highlighted(True)
        if self.overview_on:
            self.overview.update()
        return len(self._highlighted)

    def set_marks(
        self, colors: dict[str, QColor], faded: set[str] | None = None, badges: dict[str, int] | None = None
    ) -> int:
        """Colour candidate boxes by key (faded: rejected ones; badges: candidate count on groups)."""
        for item in self._marked:
            item.mark, item.mark_faded, item.badge = None, False, 0
            item.update()
        faded = faded or set()
        badges = badges or {}
        self._marked = []
        for k, color in colors.items():
            item = self.boxes.get(k)
            if item is None:
                continue
            item.mark, item.mark_faded, item.badge = QColor(color), k in faded, badges.get(k, 0)
            item.update()
            self._marked.append(item)
        self._refresh_overview()
        return len(self._marked)

    def _mirror_selection(self) -> None:
        self.state.selection = self.selected_keys()

    def draw_state(self, state: PaneState) -> None:
        """Draw (and keep) a whole pane state: marks, focus, highlight, heat (selection is the user's)."""
        self.state = state
        self.draw_marks(state.marks)
        self.set_focus(state.focus)
        self.set_highlight(state.highlight)
        self.set_heatmap(state.heat)

    def draw_part(self, part: str, state: PaneState) -> None:
        """Draw one part of a pane state: marks, focus, highlight or heat (the session's pane event)."""
        if part == "marks":
            self.draw_marks(state.marks)
        elif part == "focus":
            self.set_focus(state.focus)
        elif part == "highlight":
            self.set_highlight(state.highlight)
        elif part == "heat":
            self.set_heatmap(state.heat)

    def draw_marks(self, marks: Marks) -> int:
        """Draw a pane's candidate marks (fuseview.session.panes.Marks); returns how many boxes wear one."""
        return self.set_marks({k: QColor(c) for k, c in marks.colors.items()}, marks.faded, marks.badges)

    def marked_keys(self) -> dict[str, str]:
        """Key -> candidate colour name of every marked box."""
        return {it.key: it.mark.name() for it in self._marked if it.mark is not None}

    def set_focus(self, keys: list[str] | set[str]) -> int:
        """Outline these boxes (the candidate being looked at); returns how many are drawn."""
        for item in self._focused:
            item.focused = False
            item.update()
        self._focused = [self.boxes[k] for k in keys if k in self.boxes]
        for item in self._focused:
            item.focused = True
            item.update()
        self._refresh_overview()
        return len(self._focused)

    def highlighted_items(self) -> list[BoxItem]:
        """The boxes drawn highlighted (op-type search hits)."""
        return list(self._highlighted)

    def focused_items(self) -> list[BoxItem]:
        """The boxes drawn outlined (the candidate being looked at)."""
        return list(self._focused)

    def focused_keys(self) -> list[str]:
        """Keys of the outlined boxes."""
        return [it.key for it in self._focused]

    def keys_rect(self, keys) -> QRectF:
        """Scene rectangle around the drawn boxes with these keys (empty when none is drawn)."""
        rect = QRectF()
        for k in keys:
            item = self.boxes.get(k)
            if item is not None:
                rect = rect.united(item.sceneBoundingRect())
        return rect

    def focus_rect(self) -> QRectF:
        """Scene rectangle around the outlined boxes (empty when none)."""
        rect = QRectF()
        for it in self._focused:
            rect = rect.united(it.sceneBoundingRect())
        return rect

    def set_heatmap(self, values: dict[str, float] | None) -> int:
        """Fill boxes by a share 0..1 per box key (a time heat map); None turns it off."""
        for item in self._heated:
            item.heat = None
            item.update()
        self._heated = []
        top = max(values.values(), default=0.0) if values else 0.0
        for k, v in (values or {}).items():
            item = self.boxes.get(k)
            if item is None:
                continue
            # scaled by the hottest box: with hundreds of nodes absolute shares are all pale
            item.heat = heat_color(v / top if top > 0 else 0.0)
            item.update()
            self._heated.append(item)
        self._refresh_overview()
        return len(self._heated)

    def heat_keys(self) -> list[str]:
        """Keys of the boxes the heat map colours."""
        return [it.key for it in self._heated]

    def _refresh_overview(self) -> None:
        if self.overview_on:
            self.overview.forget_pictures()
            self.overview.update()

    def highlighted_keys(self) -> list[str]:
        """Keys of the highlighted boxes."""
        return [it.key for it in self._highlighted]

    def _on_selection(self) -> None:
        for item in self._active:
            item.set_active(False)
        selected = self.selected_keys()
        # Lighting up edges of a huge selection (select-all of an op type) would cost more than it shows.
        self._active = [r for k in selected[:200] for r in self._routes_of.get(k, [])]
        for item in self._active:
            item.set_active(True)
        if self.overview_on:
            self.overview.update()

    def set_overview(self, on: bool) -> None:
        """Swap the items for the cached whole-graph picture (on) or back (off)."""
        if on == self.overview_on:
            return
        self.overview_on = on
        for item in self._details:
            item.setVisible(not on)
        self.overview.setVisible(on)

    def use_zoom(self, scale: float) -> None:
        """Pick items or the overview picture for a zoom level (views call this when zooming)."""
        self.set_overview(scale < OVERVIEW_SCALE)

    def draw_overview(self, scale: float) -> QImage:
        """The whole graph at scale as an image: boxes as filled rectangles, edges as hairlines."""
        b = self.sceneRect()
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
        for f in self.layout.frames:
            p.drawRect(QRectF(f.x, f.y, f.w, f.h))
        edge = QColor(style.EDGE)
        edge.setAlpha(150)
        pen = QPen(edge, 1.0)
        pen.setCosmetic(True)
        p.setPen(pen)
        p.setBrush(Qt.BrushStyle.NoBrush)
        for r in self.layout.routes:
            if len(r.points) >= 2:
                p.drawPolyline(QPolygonF([QPointF(x, y) for x, y in r.points]))
        p.setPen(Qt.PenStyle.NoPen)
        by_color: dict[int, tuple[QColor, list[QRectF]]] = {}
        for item in self.boxes.values():
            strong, pale = style.colors(item.category)
            color = strong if item.box.kind != "node" else pale.darker(140)
            if item.heat is not None:
                color = item.heat
            elif item.mark is not None and not item.mark_faded:
                color = item.mark
            by_color.setdefault(color.rgba(), (color, []))[1].append(
                item.sceneBoundingRect().adjusted(3, 3, -3, -3)
            )
        for color, rects in by_color.values():
            p.setBrush(color)
            p.drawRects(rects)
        p.end()
        return img

    def counts(self) -> dict[str, int]:
        """Drawn boxes, routes and frames."""
        return {"boxes": len(self.boxes), "routes": len(self.routes), "frames": len(self.frames)}
