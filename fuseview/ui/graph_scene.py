"""The graph as a QGraphicsScene built from a Layout: boxes, group frames and edge routes."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping

from PySide6.QtCore import QPointF, QRectF, QTimer
from PySide6.QtGui import QColor, QImage, QPainterPath
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene

from fuseview.graph.document import GraphDocument
from fuseview.graph.geometry import Layout
from fuseview.session.panes import Marks, PaneState
from fuseview.ui import style
from fuseview.ui.scene_index import SceneIndex
from fuseview.ui.scene_items import (
    FOCUS_COLOR,
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
from fuseview.ui.scene_overview import draw_overview

# the items live in ui/scene_items.py; these names stay importable from here
__all__ = [
    "OVERVIEW_SCALE", "BoxItem", "FrameItem", "GraphScene", "RouteItem", "TagItem", "heat_color",
    "layout_rect", "node_sublabel", "route_path", "route_paths", "short_shape",
]


# A layout with more items than this gets Qt items only for what a view shows (lazy): a 50,000-node flat
# graph would otherwise be 100,000 items, made in ~3 s on the UI thread and held by Qt's index.
LAZY_ITEMS = 5000
# A lazy scene shows the overview picture instead of items where the view shows more boxes than this
# (painting each costs a Python call per frame); it makes items up to a quarter viewport past each side
_VISIBLE_CAP = 1000
_AREA_MARGIN = 0.25
# ...the items in view before it paints, the others in slices of this many seconds between events
_AHEAD_SLICE_S = 0.008
# ...and drops the items far from the view once it holds more than this many boxes (or routes)
_KEEP_ITEMS = 6000


def is_big(layout: Layout) -> bool:
    """Whether a layout's scene is made lazily: more than LAZY_ITEMS boxes, routes and frames."""
    return len(layout.boxes) + len(layout.routes) + len(layout.frames) > LAZY_ITEMS


def layout_paths(layout: Layout) -> list[QPainterPath] | None:
    """The edge paths a worker builds beside a layout: none for a big one (its scene makes each path
    when the route's item is made, for the few the view shows)."""
    return None if is_big(layout) else route_paths(layout)


class _LazyBoxes(Mapping[str, BoxItem]):
    """A lazy scene's boxes by key: every laid-out box is in it; its item is made when first asked for."""

    def __init__(self, scene: GraphScene) -> None:
        self._scene = scene

    def __getitem__(self, key: str) -> BoxItem:
        return self._scene._box_item(self._scene.index.box_of[key])

    def __contains__(self, key: object) -> bool:
        return key in self._scene.index.box_of

    def __iter__(self) -> Iterator[str]:
        return iter(self._scene.index.box_of)

    def __len__(self) -> int:
        return len(self._scene.index.box_of)


class GraphScene(GraphSceneBase):
    """A drawn Layout: items keyed like the Layout's boxes, frames and routes.

    Overlays (marks, focus, highlight, heat, near-miss tips) are kept by box key and put on each box item
    when it is made, so a lazy scene's items show them wherever the view goes."""

    def __init__(
        self,
        graph: GraphDocument,
        layout: Layout,
        parent=None,
        paths: list[QPainterPath] | None = None,
        incremental: bool = False,
        state: PaneState | None = None,
        lazy: bool = False,
    ):
        """incremental: add no item yet; the caller calls build_some() until it returns True (lets a
        big graph be built across event-loop turns instead of freezing the window). state: the pane's
        overlay data it draws (the session's; its own empty one when not given). lazy: make the items of
        the boxes and routes only where a view looks (GraphView calls show_area before it paints); boxes
        then still holds every laid-out key, making the item of one when it is looked up."""
        super().__init__(parent)
        self.graph = graph
        self.layout = layout
        self.lazy = lazy
        self.index = SceneIndex(layout)
        self._paths = paths  # route_paths(layout), when a worker built them already
        self._items: dict[str, BoxItem] = {}  # the box items made, by key
        self.boxes: Mapping[str, BoxItem] = _LazyBoxes(self) if lazy else self._items
        self.frames: dict[str, FrameItem] = {}
        self._route_items: dict[int, RouteItem] = {}  # by index into layout.routes
        self._tags: dict[int, TagItem] = {}
        self._active: set[int] = set()  # routes touching the selection
        self._highlight: dict[str, None] = {}  # overlays by box key (dicts: ordered sets)
        self._focus: dict[str, None] = {}
        self._marks: dict[str, tuple[QColor, bool, int, list[QColor]]] = {}
        self._heat: dict[str, float] = {}
        self._tips: dict[str, str] = {}
        self._categories: list[str] | None = None
        self._ahead: tuple[list[int], list[int]] = ([], [])  # box and route indices still to make
        self._ahead_timer = QTimer(self)
        self._ahead_timer.setSingleShot(True)
        self._ahead_timer.setInterval(0)
        self._ahead_timer.timeout.connect(self._make_ahead)
        # what is drawn over the graph, as plain data owned by the session; the set_* methods below only draw
        self.state = state if state is not None else PaneState()
        self.selectionChanged.connect(self._mirror_selection)
        # called as hook(box_item, menu) before a box's context menu is shown (the workbench adds to it)
        self.context_hook = None
        self.overview_on = False
        # a lazy scene holds a few thousand items, added and dropped as the view moves: a list beats a tree
        self.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.NoIndex if lazy
                                else QGraphicsScene.ItemIndexMethod.BspTreeIndex)
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
        if incremental and not lazy:
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

    @property
    def routes(self) -> list[RouteItem]:
        """The route items made (every drawn route, unless lazy)."""
        return list(self._route_items.values())

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

    def _build_steps(self):
        """Add the items in layout order, yielding every few items (an incremental build stops there);
        a lazy scene adds only the frames (few, and they hold the group headers)."""
        for f in self.layout.frames:
            item = FrameItem(f, len(f.scope))
            self._add(item)
            self.frames[f.key] = item
        yield
        if self.lazy:
            return
        for i in range(len(self.layout.boxes)):
            self._box_item(i)
            if i % 32 == 31:
                yield
        for i, r in enumerate(self.layout.routes):
            if i % 64 == 63:
                yield
            if len(r.points) >= 2:
                self._route_item(i)

    def _box_item(self, i: int) -> BoxItem:
        """The item of layout.boxes[i], made (with its overlays) if it is not yet."""
        b = self.layout.boxes[i]
        item = self._items.get(b.key)
        if item is None:
            item = BoxItem(b, category_of(b, self.graph), node_sublabel(b, self.graph))
            self._dress(item)
            self._add(item)
            self._items[b.key] = item
        return item

    def _dress(self, item: BoxItem) -> None:
        k = item.key
        item.highlighted = k in self._highlight
        item.focused = k in self._focus
        mark = self._marks.get(k)
        if mark is not None:
            item.mark, item.mark_faded, item.badge, item.swatches = mark[0], mark[1], mark[2], list(mark[3])
        share = self._heat.get(k)
        item.heat = heat_color(share) if share is not None else None
        if k in self._tips:
            item.set_extra_tip(self._tips[k])

    def _route_item(self, i: int) -> RouteItem:
        """The item of layout.routes[i] (of two points or more), with its tag, made if it is not yet."""
        item = self._route_items.get(i)
        if item is not None:
            return item
        r = self.layout.routes[i]
        item = RouteItem(r, self._paths[i] if self._paths is not None else None)
        if i in self._active:
            item.set_active(True)
        self._add(item)
        self._route_items[i] = item
        if r.stub:
            x, y = r.points[0]
            src = self.index.box_of.get(r.src)
            label = self.layout.boxes[src].label if src is not None else r.tensor
            self._tags[i] = TagItem(label, QPointF(x + 3, y + 2))
        elif r.count > 1:
            x, y = r.points[-1]
            self._tags[i] = TagItem(f"×{r.count}", QPointF(x + 4, y - 4))
        if i in self._tags:
            self._add(self._tags[i])
        return item

    def show_area(self, rect: QRectF) -> None:
        """A lazy scene: make the items of the boxes and routes in and near rect (what a view is about to
        paint), or show the overview picture when rect holds too many boxes to paint one by one."""
        if not self.lazy or self.building:
            return
        ix = self.index
        seen = (rect.left(), rect.top(), rect.right(), rect.bottom())
        shown = ix.boxes_in(*seen)
        far = len(shown) > _VISIBLE_CAP
        if not far:
            mx, my = rect.width() * _AREA_MARGIN, rect.height() * _AREA_MARGIN
            area = (rect.left() - mx, rect.top() - my, rect.right() + mx, rect.bottom() + my)
            boxes, routes = ix.boxes_in(*area).tolist(), ix.routes_in(*area).tolist()
            self._drop_far(set(boxes), set(routes))
            for i in shown.tolist():
                self._box_item(i)
            for i in ix.routes_in(*seen).tolist():
                self._route_item(i)
            # the rest of the area around the view is made between events, before a pan reaches it
            self._ahead = (boxes, routes)
            self._ahead_timer.start()
        self.set_overview(far)

    def _make_ahead(self) -> None:
        """Make some of the items around the view (the rest on the next turn of the event loop)."""
        boxes, routes = self._ahead
        end = time.perf_counter() + _AHEAD_SLICE_S
        while boxes and time.perf_counter() < end:
            for i in boxes[-32:]:
                self._box_item(i)
            del boxes[-32:]
        while routes and time.perf_counter() < end:
            for i in routes[-32:]:
                self._route_item(i)
            del routes[-32:]
        if boxes or routes:
            self._ahead_timer.start()

    def _drop_far(self, boxes: set[int], routes: set[int]) -> None:
        """Remove the items outside the wanted ones once there are too many (selected boxes and the
        routes lit by the selection stay)."""
        if len(self._items) > _KEEP_ITEMS:
            for key, item in list(self._items.items()):
                if self.index.box_of[key] not in boxes and not item.isSelected():
                    self.removeItem(item)
                    del self._items[key]
        if len(self._route_items) > _KEEP_ITEMS:
            for i, route in list(self._route_items.items()):
                if i not in routes and i not in self._active:
                    self.removeItem(route)
                    del self._route_items[i]
                    tag = self._tags.pop(i, None)
                    if tag is not None:
                        self.removeItem(tag)

    def whole(self) -> GraphScene:
        """This scene with an item for every box and route (what an export draws): itself unless lazy,
        else an eager copy wearing the same overlays and selection."""
        if not self.lazy:
            return self
        copy = GraphScene(self.graph, self.layout, incremental=True)
        copy._highlight, copy._focus, copy._marks = self._highlight, self._focus, self._marks
        copy._heat, copy._tips = self._heat, self._tips
        copy.build_some(math.inf)
        copy.select_keys(self.selected_keys())
        return copy

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
                item.setVisible(True)  # Qt selects no hidden item (all are, under the overview picture)
                item.setSelected(True)
        self.blockSignals(False)
        self.selectionChanged.emit()

    def _laid_out(self, keys) -> dict[str, None]:
        return {k: None for k in keys if k in self.index.box_of}

    def set_highlight(self, keys: list[str] | set[str]) -> int:
        """Highlight these boxes (and un-highlight the others); returns how many are drawn."""
        for k in self._highlight:
            item = self._items.get(k)
            if item is not None:
                item.set_highlighted(False)
        self._highlight = self._laid_out(keys)
        for k in self._highlight:
            item = self._items.get(k)
            if item is not None:
                item.set_highlighted(True)
        if self.overview_on:
            self.overview.update()
        return len(self._highlight)

    def set_marks(
        self, colors: dict[str, QColor], faded: set[str] | None = None, badges: dict[str, int] | None = None,
        swatches: dict[str, list[str]] | None = None,
    ) -> int:
        """Colour candidate boxes by key (faded: rejected ones; badges: candidate count on groups; swatches:
        the rules' colours on a group holding several rules, drawn neutral)."""
        for k in self._marks:
            item = self._items.get(k)
            if item is not None:
                item.mark, item.mark_faded, item.badge, item.swatches = None, False, 0, []
                item.update()
        faded = faded or set()
        badges = badges or {}
        swatches = swatches or {}
        self._marks = {
            k: (QColor(color), k in faded, badges.get(k, 0), [QColor(c) for c in swatches.get(k, [])])
            for k, color in colors.items() if k in self.index.box_of
        }
        for k in self._marks:
            item = self._items.get(k)
            if item is not None:
                self._dress(item)
                item.update()
        self._refresh_overview()
        return len(self._marks)

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
        return {k: m[0].name() for k, m in self._marks.items()}

    def set_focus(self, keys: list[str] | set[str]) -> int:
        """Outline these boxes (the candidate being looked at); returns how many are drawn."""
        for k in self._focus:
            item = self._items.get(k)
            if item is not None:
                item.focused = False
                item.update()
        self._focus = self._laid_out(keys)
        for k in self._focus:
            item = self._items.get(k)
            if item is not None:
                item.focused = True
                item.update()
        self._refresh_overview()
        return len(self._focus)

    def set_extra_tip(self, key: str, text: str) -> None:
        """Append text (e.g. near-miss reasons) to a box's tooltip, now or when its item is made."""
        self._tips[key] = text
        item = self._items.get(key)
        if item is not None:
            item.set_extra_tip(text)

    def highlighted_items(self) -> list[BoxItem]:
        """The box items drawn highlighted (op-type search hits; a lazy scene's made ones only)."""
        return [it for k in self._highlight if (it := self._items.get(k)) is not None]

    def focused_items(self) -> list[BoxItem]:
        """The box items drawn outlined (the candidate being looked at; a lazy scene's made ones only)."""
        return [it for k in self._focus if (it := self._items.get(k)) is not None]

    def focused_keys(self) -> list[str]:
        """Keys of the outlined boxes."""
        return list(self._focus)

    def keys_rect(self, keys) -> QRectF:
        """Scene rectangle around the drawn boxes with these keys (empty when none is drawn)."""
        ext = self.index.extent(keys)
        return QRectF() if ext is None else QRectF(ext[0], ext[1], ext[2] - ext[0], ext[3] - ext[1])

    def marked_rect(self) -> QRectF:
        """Scene rectangle around the boxes that wear a candidate mark (empty when none)."""
        return self.keys_rect(self._marks)

    def focus_rect(self) -> QRectF:
        """Scene rectangle around the outlined boxes (empty when none)."""
        return self.keys_rect(self._focus)

    def set_heatmap(self, values: dict[str, float] | None) -> int:
        """Fill boxes by a share 0..1 per box key (a time heat map); None turns it off."""
        for k in self._heat:
            item = self._items.get(k)
            if item is not None:
                item.heat = None
                item.update()
        values = {k: v for k, v in (values or {}).items() if k in self.index.box_of}
        top = max(values.values(), default=0.0)
        # scaled by the hottest box: with hundreds of nodes absolute shares are all pale
        self._heat = {k: v / top if top > 0 else 0.0 for k, v in values.items()}
        for k, share in self._heat.items():
            item = self._items.get(k)
            if item is not None:
                item.heat = heat_color(share)
                item.update()
        self._refresh_overview()
        return len(self._heat)

    def heat_keys(self) -> list[str]:
        """Keys of the boxes the heat map colours."""
        return list(self._heat)

    def _refresh_overview(self) -> None:
        if self.overview_on:
            self.overview.forget_pictures()
            self.overview.update()

    def highlighted_keys(self) -> list[str]:
        """Keys of the highlighted boxes."""
        return list(self._highlight)

    def _on_selection(self) -> None:
        for i in self._active:
            item = self._route_items.get(i)
            if item is not None:
                item.set_active(False)
        selected = self.selected_keys()
        # Lighting up edges of a huge selection (select-all of an op type) would cost more than it shows.
        self._active = {i for k in selected[:200] for i in self.index.routes_of(k)}
        for i in self._active:
            self._route_item(i).set_active(True)
        if self.overview_on:
            self.overview.update()

    def _made_items(self) -> Iterator[QGraphicsItem]:
        yield from self.frames.values()
        yield from self._items.values()
        yield from self._route_items.values()
        yield from self._tags.values()

    def set_overview(self, on: bool) -> None:
        """Swap the items for the cached whole-graph picture (on) or back (off)."""
        if on == self.overview_on:
            return
        self.overview_on = on
        for item in self._made_items():
            # Qt drops a hidden item from the selection: the selected boxes stay, drawn over the picture
            if not (on and item.isSelected()):
                item.setVisible(not on)
        self.overview.setVisible(on)

    def use_zoom(self, scale: float) -> None:
        """Pick items or the overview picture for a zoom level (views call this when zooming); a lazy
        scene picks by how many boxes the view shows instead (show_area)."""
        if not self.lazy:
            self.set_overview(scale < OVERVIEW_SCALE)

    def overlay_rects(self) -> list[tuple[QColor, list[QRectF]]]:
        """What stays live over the overview picture: highlighted, focused and selected boxes' rectangles."""
        out = []
        for color, keys in ((style.HIGHLIGHT, self._highlight), (FOCUS_COLOR, self._focus),
                            (style.SELECTION, self.selected_keys())):
            idx = [self.index.box_of[k] for k in keys]
            if idx:
                ix = self.index
                out.append((QColor(color), [QRectF(x0, y0, x1 - x0, y1 - y0) for x0, y0, x1, y1 in zip(
                    ix.box_x0[idx].tolist(), ix.box_y0[idx].tolist(), ix.box_x1[idx].tolist(),
                    ix.box_y1[idx].tolist(), strict=True)]))
        return out

    def draw_overview(self, scale: float) -> QImage:
        """The whole graph at scale as an image: boxes as filled rectangles, edges as hairlines."""
        return draw_overview(self, scale)

    def categories(self) -> list[str]:
        """Each laid-out box's colour category (worked out once, when the overview is first drawn)."""
        if self._categories is None:
            self._categories = [category_of(b, self.graph) for b in self.layout.boxes]
        return self._categories

    def box_overlay(self, key: str) -> tuple[float | None, tuple[QColor, bool, int, list[QColor]] | None]:
        """A box's heat share (0..1 of the hottest) and candidate mark (colour, faded, badge, swatches)."""
        return self._heat.get(key), self._marks.get(key)

    def counts(self) -> dict[str, int]:
        """Laid-out boxes, drawn routes and frames (a lazy scene makes items for fewer)."""
        return {"boxes": len(self.layout.boxes), "routes": self.index.drawn_routes,
                "frames": len(self.frames)}

    def made_counts(self) -> dict[str, int]:
        """The Qt items made for boxes and routes (all of them, unless lazy)."""
        return {"boxes": len(self._items), "routes": len(self._route_items)}
