"""The trace workspace's flame page: one typical step before and after, per thread, on one linear µs axis."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from fuseview.traces.categories import ANNOTATION, COMPILED, KERNEL, MEMORY, OP, OVERHEAD
from fuseview.traces.timeline import Timeline

CATEGORY_COLORS = {OP: "#4c78a8", COMPILED: "#f58518", KERNEL: "#54a24b", MEMORY: "#b279a2",
                   OVERHEAD: "#bab0ac", ANNOTATION: "#e0e0e0"}
ROW = 1.0  # height of one nesting level


class FlameView(QWidget):
    """Two flame charts (before above, after below) of each trace's median step, x axes linked."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.note = QLabel("Open traces to see one step of each, per thread.")
        self.note.setWordWrap(True)
        self.plots = {role: pg.PlotWidget(background="w") for role in ("before", "after")}
        self.bars: dict[str, pg.BarGraphItem] = {}
        self.timelines: dict[str, Timeline] = {}
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.note)
        for p in self.plots.values():
            p.setMenuEnabled(False)
            p.getPlotItem().getAxis("bottom").setLabel("µs from the step's start (linear)")
            p.getPlotItem().invertY(True)
            lay.addWidget(p, 1)
        self.plots["after"].setXLink(self.plots["before"])

    def show_timelines(self, timelines: list[Timeline]) -> None:
        """Draw each trace's step; a trace without steps is said so."""
        self.timelines = {t.role: t for t in timelines}
        said = []
        for role, plot in self.plots.items():
            plot.clear()
            t = self.timelines.get(role)
            if t is None:
                plot.setTitle(f"{role}: no counted step to show", color="#5b6573")
                continue
            self._draw(plot, t)
            left = f", {t.dropped} shortest events not drawn" if t.dropped else ""
            said.append(f"{role}: step {t.step} (the median step, {t.step_us:.0f} µs){left}")
        self.note.setText("; ".join(said) + ". Colour: op, compiled kernel, device kernel, memory, overhead."
                          if said else "No steps to show.")

    def _draw(self, plot: pg.PlotWidget, t: Timeline) -> None:
        depth_rows = int(t.depth.max()) + 2 if len(t.depth) else 1
        y = t.thread * depth_rows + t.depth
        brushes = [pg.mkBrush(CATEGORY_COLORS.get(c, "#888888")) for c in t.categories]
        bars = pg.BarGraphItem(x0=t.start, width=np.maximum(t.dur, 1e-3), y=y * ROW, height=0.9 * ROW,
                               brushes=brushes, pen=pg.mkPen("#ffffff", width=0.3))
        plot.addItem(bars)
        self.bars[t.role] = bars
        # the names of the widest events, where there is room for some of the name
        wide = [i for i in np.argsort(-t.dur, kind="stable")[:40].tolist() if t.dur[i] > 0.04 * t.step_us]
        for i in wide:
            text = pg.TextItem(t.names[i][:40], color="#1b2430", anchor=(0, 0.5))
            text.setPos(float(t.start[i]), float(y[i]) * ROW)
            plot.addItem(text)
        axis = plot.getPlotItem().getAxis("left")
        axis.setTicks([[(i * depth_rows * ROW, name) for i, name in enumerate(t.threads)], []])
        plot.setTitle(f"{t.role}: step {t.step}, {t.step_us:.0f} µs", color="#1b2430", size="10pt")
        plot.setXRange(0, max(t.step_us, 1.0), padding=0.02)

    def bar_count(self, role: str) -> int:
        """Rectangles drawn for a trace."""
        t = self.timelines.get(role)
        return len(t.start) if t is not None and role in self.bars else 0
