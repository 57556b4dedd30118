"""The trace workspace's flame page: one typical step before and after, per thread, on one time scale.

Each row is one nesting level at least one line of text tall; a box's label is its name elided to the
box (none where not even one letter fits, never over a neighbour's); the wheel zooms the time axis about
the pointer, a drag pans it, a double click fits the longer step again; hovering a box shows its whole
name, category and time. Both charts share one scale (µs per pixel) and one origin (the step's start).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QMouseEvent, QPainter, QPen, QWheelEvent
from PySide6.QtWidgets import QLabel, QScrollArea, QToolTip, QVBoxLayout, QWidget

from fuseview.traces.categories import ANNOTATION, COMPILED, KERNEL, MEMORY, OP, OVERHEAD
from fuseview.traces.display import shown_name
from fuseview.traces.timeline import Timeline, visible

CATEGORY_COLORS = {OP: "#4c78a8", COMPILED: "#f58518", KERNEL: "#54a24b", MEMORY: "#b279a2",
                   OVERHEAD: "#bab0ac", ANNOTATION: "#e0e0e0"}
LIGHT = {OVERHEAD, ANNOTATION}  # pale boxes: dark text
MARGIN = 96  # px left of the time axis for the thread names
AXIS = 22  # px of the time axis above the rows
ZOOM = 1.25  # per wheel notch


class TimeScale:
    """The shared time axis: the µs at the left edge and µs per pixel; charts redraw when it changes."""

    def __init__(self) -> None:
        self.x0 = 0.0
        self.us_per_px = 1.0
        self.fitted = True  # no zoom or pan since the last fit: a resize fits again
        self.charts: list[FlameChart] = []

    def fit(self, span_us: float, width_px: int) -> None:
        """Show 0..span_us across width_px."""
        self.x0 = 0.0
        self.us_per_px = max(span_us, 1e-3) / max(width_px, 50)
        self.fitted = True
        self.changed()

    def zoom(self, factor: float, at_us: float) -> None:
        """Zoom by factor (>1: in) keeping the time under the pointer in place."""
        new = min(max(self.us_per_px / factor, 1e-6), 1e9)
        self.x0 = at_us - (at_us - self.x0) * new / self.us_per_px
        self.us_per_px = new
        self.fitted = False
        self.changed()

    def pan(self, dx_px: float) -> None:
        """Move the view by dx_px pixels (positive: later times come into view)."""
        self.x0 += dx_px * self.us_per_px
        self.fitted = False
        self.changed()

    def changed(self) -> None:
        """Redraw every chart on this scale."""
        for c in self.charts:
            c.update()


class FlameChart(QWidget):
    """One trace's step: a row per (thread, depth), boxes on the shared time scale, labels that fit."""

    hovered = Signal(str)

    def __init__(self, scale: TimeScale, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.scale = scale
        scale.charts.append(self)
        self.timeline: Timeline | None = None
        self._names: dict[int, str] = {}
        self.title = ""
        self.label_rects: list[QRectF] = []  # where the last paint put each label (for tests and checks)
        self._rows = np.zeros(0, dtype=np.int64)
        self._row_count = 0
        self._thread_rows: list[tuple[int, str]] = []
        self._drag: float | None = None
        self.setMouseTracking(True)

    @property
    def row_height(self) -> int:
        """One nesting level: a line of text and a little air."""
        return QFontMetrics(self.font()).height() + 4

    def set_timeline(self, t: Timeline | None, title: str) -> None:
        """Show a step (None: only the title)."""
        self.timeline, self.title = t, title
        self._names = {}  # shown names, made once per event (a paint draws thousands)
        if t is None:
            self._rows, self._row_count, self._thread_rows = np.zeros(0, dtype=np.int64), 0, []
        else:
            depth_rows = np.ones(len(t.threads), dtype=np.int64)
            for th in range(len(t.threads)):
                sel = t.thread == th
                depth_rows[th] = int(t.depth[sel].max()) + 1 if sel.any() else 1
            first = np.concatenate([[0], np.cumsum(depth_rows)[:-1]]).astype(np.int64)
            self._rows = first[t.thread] + t.depth
            self._row_count = int(depth_rows.sum())
            self._thread_rows = [(int(first[i]), name) for i, name in enumerate(t.threads)]
        self.setMinimumHeight(AXIS + 18 + max(self._row_count, 1) * self.row_height + 4)
        self.update()

    def _x(self, us: float) -> float:
        return MARGIN + (us - self.scale.x0) / self.scale.us_per_px

    def _us(self, x: float) -> float:
        return self.scale.x0 + (x - MARGIN) * self.scale.us_per_px

    def shown(self, i: int) -> str:
        """Event i's name as shown (relative paths, no address noise), computed once."""
        name = self._names.get(i)
        if name is None:
            assert self.timeline is not None
            name = self._names[i] = shown_name(self.timeline.names[i])
        return name

    def box(self, i: int, row_height: int | None = None) -> QRectF:
        """The rectangle of event i on screen (row_height: self.row_height, read once by a paint)."""
        t = self.timeline
        assert t is not None
        rh = self.row_height if row_height is None else row_height
        x = self._x(float(t.start[i]))
        w = max(float(t.dur[i]) / self.scale.us_per_px, 1.0)
        return QRectF(x, AXIS + 18 + int(self._rows[i]) * rh, w, rh - 2)

    def event_at(self, pos: QPointF) -> int | None:
        """The event under a point, innermost first, else None."""
        t = self.timeline
        if t is None or pos.x() < MARGIN:
            return None
        row = int((pos.y() - AXIS - 18) // self.row_height)
        us = self._us(pos.x())
        tol = self.scale.us_per_px  # a box narrower than a pixel is drawn one pixel wide
        hit = np.nonzero((self._rows == row) & (t.start <= us) & (t.start + np.maximum(t.dur, tol) >= us))[0]
        return int(hit[-1]) if len(hit) else None

    def hover_text(self, i: int) -> str:
        """The whole name, category, length and start of event i."""
        t = self.timeline
        assert t is not None
        return (f"{self.shown(i)}\n{t.categories[i]}: {float(t.dur[i]):.1f} µs,"
                f" from {float(t.start[i]):.1f} µs into the step")

    # painting ---------------------------------------------------------------------------------------
    def paintEvent(self, _event) -> None:  # noqa: N802 - Qt's name
        p = QPainter(self)
        p.fillRect(self.rect(), QColor("#ffffff"))
        fm = QFontMetrics(self.font())
        rh = fm.height() + 4  # self.row_height, read once for the thousands of boxes below
        p.setPen(QColor("#1b2430"))
        p.drawText(QRectF(4, 0, self.width() - 8, 18), Qt.AlignmentFlag.AlignVCenter, self.title)
        self._paint_axis(p, fm)
        self.label_rects = []
        t = self.timeline
        if t is None:
            p.end()
            return
        for row, name in self._thread_rows:
            y = AXIS + 18 + row * rh
            p.setPen(QColor("#5b6573"))
            p.drawText(QRectF(2, y, MARGIN - 6, rh),
                       Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                       fm.elidedText(name, Qt.TextElideMode.ElideRight, MARGIN - 6))
        p.setClipRect(QRectF(MARGIN, AXIS + 18, self.width() - MARGIN, self.height()))
        left, right = self._us(MARGIN), self._us(self.width())
        visible = np.nonzero((t.start <= right) & (t.start + t.dur >= left))[0]
        label_end: dict[int, float] = {}  # per row, where the last label ended: none drawn over it
        for i in visible[np.lexsort((t.start[visible], self._rows[visible]))].tolist():
            r = self.box(i, rh)
            cat = t.categories[i]
            p.fillRect(r, QColor(CATEGORY_COLORS.get(cat, "#888888")))
            p.setPen(QPen(QColor("#ffffff"), 1))
            p.drawRect(r)
            text_left = max(r.left(), float(MARGIN)) + 3
            room = min(r.right(), float(self.width())) - 3 - text_left
            row = int(self._rows[i])
            if room < fm.horizontalAdvance("M…") or text_left < label_end.get(row, -1.0):
                continue
            text = fm.elidedText(self.shown(i), Qt.TextElideMode.ElideRight, int(room))
            if not text or text == "…":
                continue
            rect = QRectF(text_left, r.top(), fm.horizontalAdvance(text), r.height())
            p.setPen(QColor("#1b2430" if cat in LIGHT else "#ffffff"))
            p.drawText(rect, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, text)
            label_end[row] = rect.right() + 2
            self.label_rects.append(rect)
        p.end()

    def _paint_axis(self, p: QPainter, fm: QFontMetrics) -> None:
        y = AXIS + 16
        p.setPen(QColor("#9aa3ad"))
        p.drawLine(MARGIN, y, self.width(), y)
        span = (self.width() - MARGIN) * self.scale.us_per_px
        step = 10 ** np.floor(np.log10(max(span / 6, 1e-6)))
        for mult in (1, 2, 5, 10):
            if span / (step * mult) <= 8:
                step *= mult
                break
        first = np.ceil(self.scale.x0 / step) * step
        last_right = -1.0
        for k in range(40):
            us = first + k * step
            x = self._x(us)
            if x > self.width():
                break
            label = f"{us:g} µs"
            w = fm.horizontalAdvance(label)
            p.drawLine(int(x), y - 4, int(x), y)
            if x - w / 2 > last_right and x - w / 2 >= MARGIN - 4:
                p.drawText(QRectF(x - w / 2, 18, w, AXIS - 6), Qt.AlignmentFlag.AlignCenter, label)
                last_right = x + w / 2 + 4

    # interaction ------------------------------------------------------------------------------------
    def wheelEvent(self, e: QWheelEvent) -> None:  # noqa: N802 - Qt's name
        """Zoom the time axis about the pointer (vertical wheel); let a scroll area have the rest."""
        if e.modifiers() & Qt.KeyboardModifier.ShiftModifier or not e.angleDelta().y():
            e.ignore()
            return
        notches = e.angleDelta().y() / 120
        self.scale.zoom(ZOOM ** notches, self._us(e.position().x()))
        e.accept()

    def mousePressEvent(self, e: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        """Start a pan."""
        self._drag = e.position().x()

    def mouseReleaseEvent(self, _e: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        """End a pan."""
        self._drag = None

    def mouseDoubleClickEvent(self, _e: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        """Fit the longer step again."""
        view = self.parent()
        while view is not None and not isinstance(view, FlameView):
            view = view.parent()
        if view is not None:
            view.fit()

    def mouseMoveEvent(self, e: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        """Pan while dragging; else tell what is under the pointer."""
        if self._drag is not None:
            self.scale.pan(self._drag - e.position().x())
            self._drag = e.position().x()
            return
        i = self.event_at(e.position())
        text = self.hover_text(i) if i is not None else ""
        self.setToolTip(text)
        if text:
            QToolTip.showText(e.globalPosition().toPoint(), text, self)
        self.hovered.emit(text)


class FlameView(QWidget):
    """Two flame charts (before above, after below) of each trace's median step, on one time scale."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.note = QLabel("Open traces to see one step of each, per thread.")
        self.note.setWordWrap(True)
        self.scale = TimeScale()
        self.charts = {role: FlameChart(self.scale) for role in ("before", "after")}
        self.timelines: dict[str, Timeline] = {}  # as drawn
        self.full: list[Timeline] = []  # as read
        self.python = False
        body = QWidget()
        inner = QVBoxLayout(body)
        inner.setContentsMargins(0, 0, 0, 0)
        for c in self.charts.values():
            inner.addWidget(c)
        inner.addStretch(1)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setWidget(body)
        # the viewport's width is what a fit fills: it is only laid out once the tab is shown (a fit made
        # while hidden read a stale width), and a scroll bar coming or going changes it alone
        self.scroll.viewport().installEventFilter(self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.note)
        lay.addWidget(self.scroll, 1)

    def set_python(self, on: bool) -> None:
        """Draw Python-function frames too (on), or not (the default)."""
        self.python = on
        self.show_timelines(self.full)

    def show_timelines(self, timelines: list[Timeline]) -> None:
        """Draw each trace's step (Python frames only when asked); a trace without steps is said so."""
        self.full = list(timelines)
        self.timelines = {t.role: visible(t, self.python) for t in timelines}
        said = []
        for role, chart in self.charts.items():
            t = self.timelines.get(role)
            if t is None:
                chart.set_timeline(None, f"{role}: no counted step to show")
                continue
            chart.set_timeline(t, f"{role}: step {t.step}, {t.step_us:.0f} µs")
            left = f", {t.dropped} shortest events not drawn" if t.dropped else ""
            said.append(f"{role}: step {t.step} (the median step, {t.step_us:.0f} µs){left}")
        self.note.setText("; ".join(said) + ". Colour: op, compiled kernel, device kernel, memory, overhead."
                          " Wheel: zoom the time axis; drag: pan; double click: fit; hover: whole name."
                          if said else "No steps to show.")
        self.fit()

    def fit(self) -> None:
        """Fit the longer of the two steps into the charts' width (both keep that one scale)."""
        span = max((t.step_us for t in self.timelines.values()), default=1.0)
        width = self.scroll.viewport().width() - MARGIN - 8
        self.scale.fit(span * 1.02, width)

    def resizeEvent(self, e) -> None:  # noqa: N802 - Qt's name
        """Keep the whole step in view while the zoom is still the fitted one."""
        super().resizeEvent(e)
        if self.scale.fitted:
            self.fit()

    def eventFilter(self, obj, e) -> bool:  # noqa: N802 - Qt's name
        """Fit again when the viewport is resized (shown for the first time, a scroll bar) and unzoomed."""
        if obj is self.scroll.viewport() and e.type() == QEvent.Type.Resize and self.scale.fitted:
            self.fit()
        return super().eventFilter(obj, e)

    def bar_count(self, role: str) -> int:
        """Rectangles drawn for a trace."""
        t = self.timelines.get(role)
        return len(t.start) if t is not None and self.charts[role].timeline is t else 0
