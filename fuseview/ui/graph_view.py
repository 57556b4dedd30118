"""The zoomable, pannable view of a GraphScene."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRect, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QDragEnterEvent,
    QDropEvent,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QTransform,
    QWheelEvent,
)
from PySide6.QtWidgets import QFrame, QGraphicsView, QWidget

from fuseview.ui.graph_scene import GraphScene, layout_rect

MIN_SCALE = 0.0005
# Fit never goes below this zoom (the overview picture still shows the graph's shape): a graph too tall
# for it is shown from its top, as wide as the viewport allows, instead of as a hairline.
FIT_FLOOR = 0.03
MAX_SCALE = 6.0
# a graph shown from its top narrows to fit the pane's width down to this zoom; wider still, it is shown from
# its left edge (its first column whole), never from its middle
TOP_FLOOR = 0.3
# ...but a graph only a little wider than that (down to this zoom) is narrowed to fit the pane's width whole,
# rather than lose a strip at its right edge (the Llama KV original after Apply lost ~90 scene px at 1400 px);
# its labels then stay as tall as their boxes allow, MatMul at 4 px (scene_items._FIT_LABEL_PX)
NEAR_FLOOR = 0.8 * TOP_FLOOR
# below this zoom a graph fitted whole is unreadable: linked panes open at its top (or its focus) instead.
# At 0.25 the narrowest box (80 px) could not hold a six-letter op type ("MatMul") at 4.5 px on screen.
READABLE = 0.3


def across_floor(across: float) -> float:
    """The least zoom a graph shown from its top may take: across itself when it is near TOP_FLOOR."""
    return min(across, TOP_FLOOR) if across >= NEAR_FLOOR else TOP_FLOOR


def _onnx_paths(event) -> list[str]:
    mime = event.mimeData()
    if not mime.hasUrls():
        return []
    return [
        u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile().lower().endswith(".onnx")
    ]


class GraphView(QGraphicsView):
    """Wheel zoom around the cursor, drag to pan, fit, zoom to selection; accepts dropped .onnx files."""

    zoom_changed = Signal(float)
    file_dropped = Signal(str)
    # the view was just centred on these scene rectangles' boxes (search hit, candidate, linked selection):
    # floating legends step aside from them
    centred_on = Signal(QRectF)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        # Items repaint only their own rectangles; full-viewport updates on pan would repaint everything.
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontAdjustForAntialiasing, True)
        self.setCacheMode(QGraphicsView.CacheModeFlag.CacheBackground)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setAcceptDrops(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self._pan_from: QPointF | None = None

    def setScene(self, scene) -> None:  # noqa: N802 - Qt API
        super().setScene(scene)
        self._update_scroll_room()

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt API
        scene = self.scene()
        if isinstance(scene, GraphScene) and scene.lazy:
            scene.show_area(self.visible_scene_rect())  # its items exist only where a view looks
        super().paintEvent(event)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._update_scroll_room()

    def _update_scroll_room(self) -> None:
        scene = self.scene()
        if isinstance(scene, GraphScene):
            scene.use_zoom(self.scale_factor())
        # Half a viewport of room around the graph, so any box (even one at an edge) can be centred.
        scene = self.scene()
        if scene is None:
            return
        s = self.scale_factor() or 1.0
        dx, dy = self.viewport().width() / s / 2, self.viewport().height() / s / 2
        self.setSceneRect(scene.sceneRect().adjusted(-dx, -dy, dx, dy))

    # zoom -----------------------------------------------------------------------------------------
    def scale_factor(self) -> float:
        """Current zoom: scene units to pixels."""
        return self.transform().m11()

    def zoom_by(self, factor: float) -> None:
        """Multiply the zoom by factor (clamped) around the view centre."""
        current = self.scale_factor()
        target = min(max(current * factor, MIN_SCALE), MAX_SCALE)
        if target == current:
            return
        centre = self.view_center()
        self.scale(target / current, target / current)
        self._update_scroll_room()
        self.centerOn(centre)
        self.zoom_changed.emit(self.scale_factor())

    def set_zoom(self, scale: float) -> None:
        """Set an absolute zoom around the view centre."""
        self.zoom_by(scale / self.scale_factor())

    def fit(self) -> None:
        """Show the whole scene."""
        scene = self.scene()
        if scene is None:
            return
        rect = scene.itemsBoundingRect().adjusted(-20, -20, 20, 20)
        if rect.isEmpty():
            return
        if self.fit_scale(rect) >= FIT_FLOOR:
            self.fit_rect(rect)
            return
        across = 0.9 * self.viewport().width() / max(rect.width(), 1.0)
        self.show_top(rect, max(FIT_FLOOR, min(0.8, across)))

    def fit_rect(self, rect: QRectF, max_scale: float = 1.5) -> None:
        """Show rect whole, but never zoom in past max_scale."""
        if rect.isEmpty():
            return
        self.fitInView(rect, Qt.AspectRatioMode.KeepAspectRatio)
        s = self.scale_factor()
        if s > max_scale or s < MIN_SCALE:
            clamped = min(max(s, MIN_SCALE), max_scale)
            self.scale(clamped / s, clamped / s)
        self._update_scroll_room()
        self.centerOn(rect.center())
        self.zoom_changed.emit(self.scale_factor())

    def fit_scale(self, rect: QRectF, max_scale: float = 1.5) -> float:
        """The zoom fit_rect(rect) would pick, worked out without moving the view or touching any item."""
        if rect.isEmpty():
            return self.scale_factor()
        margin = 2  # what fitInView leaves on each side
        w, h = self.viewport().width() - 2 * margin, self.viewport().height() - 2 * margin
        s = min(w / rect.width(), h / rect.height())
        return min(max(s, MIN_SCALE), max_scale)

    def preset_zoom(self, scale: float) -> None:
        """Set the zoom before a new scene is shown: setScene then picks items or overview once."""
        self.setTransform(QTransform.fromScale(scale, scale))

    def show_top(self, rect: QRectF, scale: float) -> None:
        """Show rect's top at the top of the viewport at scale (less, down to TOP_FLOOR, to fit its width), in
        one transform change: centred when its width fits, else from its left edge."""
        room = self.viewport().width() - 24
        across = room / max(rect.width(), 1.0)
        scale = max(min(scale, across), min(scale, across_floor(across)))
        if self.scale_factor() != scale:
            self.setTransform(QTransform.fromScale(scale, scale))
        self._update_scroll_room()
        if rect.width() * scale <= room:
            self.keep_at(QPointF(rect.center().x(), rect.top()), QPointF(self.viewport().width() / 2, 12))
        else:
            self.keep_at(rect.topLeft(), QPointF(12, 12))
        self.zoom_changed.emit(self.scale_factor())

    def zoom_to_selection(self) -> None:
        """Fit the selected items, or the whole graph when nothing is selected."""
        scene = self.scene()
        if scene is None:
            return
        items = scene.selectedItems()
        if not items:
            self.fit()
            return
        rect = QRectF()
        for it in items:
            rect = rect.united(it.sceneBoundingRect())
        self.fit_rect(rect.adjusted(-60, -60, 60, 60))

    def center_on_key(self, key: str) -> bool:
        """Centre the view on a box; False when it is not drawn."""
        scene = self.scene()
        item = scene.item_for_key(key) if isinstance(scene, GraphScene) else None
        if item is None:
            return False
        if self.scale_factor() < 0.35:
            self.set_zoom(0.8)
        self.centerOn(item.sceneBoundingRect().center())
        self.centred_on.emit(item.sceneBoundingRect())
        return True

    def reveal_rect(self, rect: QRectF) -> None:
        """Bring a scene rectangle into view: centre on it, zooming out (to fit it) only when needed."""
        if rect.isEmpty():
            return
        vis = self.visible_scene_rect()
        if vis.contains(rect):
            pass
        elif rect.width() > vis.width() or rect.height() > vis.height():
            self.fit_rect(rect.adjusted(-40, -40, 40, 40), max_scale=self.scale_factor())
        else:
            self.centerOn(rect.center())
        self.centred_on.emit(rect)

    def host_rect(self, rect: QRectF) -> QRect:
        """A scene rectangle in this widget's own coordinates (where floating legends sit)."""
        return self.mapFromScene(rect).boundingRect().translated(self.viewport().pos())

    def visible_scene_rect(self) -> QRectF:
        """The part of the scene the viewport shows."""
        return self.mapToScene(self.viewport().rect()).boundingRect()

    def view_center(self) -> QPointF:
        """The scene point at the middle of the viewport."""
        return self.visible_scene_rect().center()

    def keep_at(self, scene_point: QPointF, viewport_point: QPointF) -> None:
        """Scroll so scene_point shows at viewport_point (keeps an opened group where it was)."""
        s = self.scale_factor() or 1.0
        vc = QPointF(self.viewport().width() / 2, self.viewport().height() / 2)
        self.centerOn(scene_point - (viewport_point - vc) / s)

    # input ----------------------------------------------------------------------------------------
    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 - Qt API
        delta = event.angleDelta().y() or event.angleDelta().x()
        if delta == 0:
            event.ignore()
            return
        self.zoom_at(1.0015**delta, event.position())
        event.accept()

    def zoom_at(self, factor: float, viewport_pos: QPointF) -> None:
        """Zoom by factor keeping the scene point under viewport_pos where it is."""
        anchor = self.mapToScene(viewport_pos.toPoint())
        self.zoom_by(factor)
        self.keep_at(anchor, viewport_pos)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        if event.button() == Qt.MouseButton.MiddleButton:
            self._pan_from = event.position()
            self.viewport().setCursor(Qt.CursorShape.ClosedHandCursor)
            event.accept()
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        if self._pan_from is not None:
            d = event.position() - self._pan_from
            self._pan_from = event.position()
            self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() - int(d.x()))
            self.verticalScrollBar().setValue(self.verticalScrollBar().value() - int(d.y()))
            event.accept()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        if self._pan_from is not None and event.button() == Qt.MouseButton.MiddleButton:
            self._pan_from = None
            self.viewport().unsetCursor()
            event.accept()
            return
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt API
        if event.key() == Qt.Key.Key_Escape and self.scene() is not None:
            self.scene().clearSelection()
            event.accept()
            return
        super().keyPressEvent(event)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt API
        if _onnx_paths(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event) -> None:  # noqa: N802 - Qt API
        if _onnx_paths(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt API
        paths = _onnx_paths(event)
        if paths:
            event.acceptProposedAction()
            self.file_dropped.emit(paths[0])
        else:
            event.ignore()



def _widened(view: GraphView, rect: QRectF, zoom: float) -> QRectF:
    """rect as wide as the pane's whole graph when that width fits the pane at zoom (no side cut off)."""
    scene = view.scene()
    whole = layout_rect(scene.layout).adjusted(-20, 0, 20, 0) if isinstance(scene, GraphScene) else rect
    if whole.width() * zoom > view.viewport().width() - 24:
        return rect
    return QRectF(whole.left(), rect.top(), whole.width(), rect.height())


def _pane_plan(view: GraphView, focus: QRectF | None) -> tuple[QRectF, float] | None:
    """(what to show, the zoom it wants): the whole graph when readable fitted, else focus or the graph as
    wide as the pane (at most 0.8, at least TOP_FLOOR)."""
    scene = view.scene()
    if not isinstance(scene, GraphScene):
        return None
    whole = layout_rect(scene.layout).adjusted(-20, -20, 20, 20)
    if view.fit_scale(whole) >= READABLE:
        return whole, view.fit_scale(whole)
    rect = whole if focus is None or focus.isEmpty() else focus.adjusted(-40, -40, 40, 40)
    if view.fit_scale(rect, 0.8) >= READABLE:
        return rect, view.fit_scale(rect, 0.8)
    across = (view.viewport().width() - 24) / max(rect.width(), 1.0)
    return rect, min(0.8, max(across, across_floor(across)))


def fit_panes(panes: list[tuple[GraphView, QRectF | None]], hold=None) -> None:
    """Open linked side-by-side panes at one zoom, each fitted: its whole graph when every pane's graph is
    readable so, else its focus (e.g. the fused nodes) or its graph, from the top and as wide as the pane.

    hold(True/False) pauses the panes' links meanwhile (one pane following the other would re-place it);
    they stay paused until the event loop has laid the panes out, then the panes are fitted again."""

    def place() -> None:
        plans = [(v, plan) for v, focus in panes if (plan := _pane_plan(v, focus)) is not None]
        if not plans:
            return
        zoom = min(s for _v, (_r, s) in plans)
        for view, (rect, _s) in plans:
            view.setTransform(QTransform.fromScale(zoom, zoom))
            view._update_scroll_room()
            port = view.viewport()
            if rect.height() * zoom <= port.height() and rect.width() * zoom <= port.width():
                view.centerOn(_widened(view, rect, zoom).center())
            else:
                view.show_top(_widened(view, rect, zoom), zoom)

    def settled() -> None:
        if hold is not None:  # an earlier fit's settle may have released the links: hold them again
            hold(True)
        place()
        if hold is not None:
            hold(False)

    if hold is not None:
        hold(True)
    place()
    QTimer.singleShot(0, settled)
