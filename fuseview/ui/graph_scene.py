"""The graph as a QGraphicsScene built from a Layout: boxes, group frames and edge routes."""

from __future__ import annotations

import math
import time

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QImage, QPainter, QPainterPath, QPen, QPolygonF
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene

from fuseview.graph.document import GraphDocument
from fuseview.graph.geometry import Layout
from fuseview.session.panes import Marks, PaneState
from fuseview.ui import style
from fuseview.ui.scene_items import (
    OVERVIEW_SCALE,
    SCENE_MARGIN,
    BoxItem,
    FrameItem,
    GraphSceneBase,
    OverviewItem,
    RouteItem,
    TagItem,
    category_of,
    heat_color,
    layout_rect,
    node_sublabel,
    route_path,
    route_paths,
    short_shape,
)

# the items live in ui/scene_items.py; these names stay importable from here
__all__ = [
    "OVERVIEW_SCALE", "BoxItem", "FrameItem", "GraphScene", "RouteItem", "TagItem", "heat_color",
    "layout_rect", "node_sublabel", "route_path", "route_paths", "short_shape",
]


class GraphScene(GraphSceneBase):
    """A drawn Layout: items keyed like the Layout's boxes, frames and routes."""

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
            QRectF(-SCENE_MARGIN, -SCENE_MARGIN, max(lay.width, 1.0) + 2 * SCENE_MARGIN,
                   max(lay.height, 1.0) + 2 * SCENE_MARGIN)
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
            item = BoxItem(b, category_of(b, graph), node_sublabel(b, graph))
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
        self, colors: dict[str, QColor], faded: set[str] | None = None, badges: dict[str, int] | None = None,
        swatches: dict[str, list[str]] | None = None,
    ) -> int:
        """Colour candidate boxes by key (faded: rejected ones; badges: candidate count on groups; swatches:
        the rules' colours on a group holding several rules, drawn neutral)."""
        for item in self._marked:
            item.mark, item.mark_faded, item.badge, item.swatches = None, False, 0, []
            item.update()
        faded = faded or set()
        badges = badges or {}
        swatches = swatches or {}
        self._marked = []
        for k, color in colors.items():
            item = self.boxes.get(k)
            if item is None:
                continue
            item.mark, item.mark_faded, item.badge = QColor(color), k in faded, badges.get(k, 0)
            item.swatches = [QColor(c) for c in swatches.get(k, [])]
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
        return self.set_marks({k: QColor(c) for k, c in marks.colors.items()}, marks.faded, marks.badges,
                              marks.swatches)

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

    def marked_rect(self) -> QRectF:
        """Scene rectangle around the boxes that wear a candidate mark (empty when none)."""
        rect = QRectF()
        for it in self._marked:
            rect = rect.united(it.sceneBoundingRect())
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
