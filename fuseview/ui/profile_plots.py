"""The profiling panel's plots (pyqtgraph): horizontal grouped bars, the |diff| histogram, PNG/SVG export.

The top half turns a profile report into rows for the plots (no Qt); the bottom half draws them.
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyqtgraph as pg
import pyqtgraph.exporters as pg_exporters
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QLabel, QStackedWidget, QVBoxLayout, QWidget

from fuseview.errors import FuseviewError

ORIGINAL, FUSED = "original", "fused"
COLORS = {
    ORIGINAL: "#4c78a8",
    FUSED: "#f58518",
    "max abs": "#54a24b",
    "max rel": "#b279a2",
    "hist": "#72b7b2",
}
TOP_N = 15
LABEL_CHARS = 44


# ------------------------------------------------------------------------------------ report -> rows
def model_roles(report: dict) -> list[str]:
    """ "original" / "fused" for each of the report's models, in report order."""
    n = len(report["models"])
    if n == 1:
        return [ORIGINAL]
    cmp = report.get("comparison") or {}
    # run_profile puts fusion records on the second model; reverse_fusion_times means the first is fused.
    if not cmp.get("fusions") and cmp.get("reverse_fusion_times"):
        return [FUSED, ORIGINAL]
    return [ORIGINAL, FUSED][:n]


def models_by_role(report: dict) -> dict[str, dict]:
    """The report's models keyed by role."""
    return dict(zip(model_roles(report), report["models"], strict=True))


def op_type_rows(report: dict, top: int = TOP_N) -> tuple[list[str], dict[str, list[float]]]:
    """The top op types by median time per run (the larger of the models), with each model's time (us)."""
    per_role = {
        role: {o["op_type"]: float(o["p50_us"]) for o in m["op_types"]}
        for role, m in models_by_role(report).items()
    }
    ops = sorted(
        {op for times in per_role.values() for op in times},
        key=lambda op: -max(t.get(op, 0.0) for t in per_role.values()),
    )[:top]
    return ops, {role: [times.get(op, 0.0) for op in ops] for role, times in per_role.items()}


def slowest_nodes(model: dict, top: int = TOP_N) -> list[dict]:
    """The model's slowest nodes by median time per run."""
    return sorted(model["nodes"], key=lambda n: -float(n["p50_us"]))[:top]


@dataclass
class FusionRow:
    """One applied fusion: its label, the replaced nodes' time against the fused nodes' time (us)."""

    label: str
    original_us: float
    fused_us: float
    fused_node: str
    original_node: str | None


def fusion_rows(report: dict, top: int = TOP_N) -> list[FusionRow]:
    """Per applied fusion, replaced nodes' time against the fused node's (sums of per-node medians)."""
    cmp = report.get("comparison") or {}
    rows = []
    for f in cmp.get("fusions") or []:
        t = f.get("time")
        if t and t.get("fused_p50_us") is not None:
            origin = f.get("origin") or []
            rows.append(
                FusionRow(
                    f"{f.get('rule', t['op_type'])}: {t['node']}",
                    t["original_p50_us"],
                    t["fused_p50_us"],
                    t["node"],
                    origin[0] if origin else None,
                )
            )
    for t in cmp.get("reverse_fusion_times") or []:
        if t.get("fused_p50_us") is not None:
            rows.append(
                FusionRow(
                    f"{t['op_type']}: {t['node']}", t["original_p50_us"], t["fused_p50_us"], t["node"], None
                )
            )
    rows.sort(key=lambda r: -r.original_us)
    return rows[:top]


def heatmap(report: dict) -> dict[str, dict[str, float]]:
    """Each model's share of time per node: {"original": {node: share}, "fused": {...}}."""
    out: dict[str, dict[str, float]] = {ORIGINAL: {}, FUSED: {}}
    for role, m in models_by_role(report).items():
        out[role] = {n["name"]: float(n["share"]) for n in m["nodes"]}
    return out


def short_label(text: str, chars: int = LABEL_CHARS) -> str:
    """The end of a long node name (its most telling part), with an ellipsis in front."""
    return text if len(text) <= chars else "…" + text[-(chars - 1) :]


def fmt_us(us: float) -> str:
    """Microseconds in a readable unit."""
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} µs"


# ------------------------------------------------------------------------------------ drawing
def _decade_ticks(lo: int, hi: int) -> list[tuple[float, str]]:
    step = max(1, math.ceil((hi - lo) / 8))
    return [(float(e), f"1e{e}") for e in range(lo, hi + 1, step)]


class _Bars(pg.BarGraphItem):
    """BarGraphItem that reports which bar was clicked."""

    def __init__(self, on_click, **opts):
        super().__init__(**opts)
        self._on_click = on_click

    def mouseClickEvent(self, ev):  # noqa: N802 - pyqtgraph's name
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        p = ev.pos()
        o = self.opts
        for i, (y, h) in enumerate(zip(o["y"], o["height"], strict=True)):
            if y - h / 2 <= p.y() <= y + h / 2:
                ev.accept()
                self._on_click(i)
                return


class PlotCard(QWidget):
    """A pyqtgraph plot with a message shown in its place when there is nothing to plot."""

    def __init__(self, name: str, title: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.name = name
        self.plot = pg.PlotWidget(background="w")
        self.plot.setTitle(title, color="#1b2430", size="10pt")
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideButtons()
        self.message = QLabel()
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.message.setStyleSheet("color: #5b6573;")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.message)
        self.stack.addWidget(self.plot)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.stack)
        self.has_data = False
        self.show_message("no profile yet: Run, or Open report…")

    def show_message(self, text: str) -> None:
        """Show a line of text instead of the plot."""
        self.plot.clear()
        self.message.setText(text)
        self.stack.setCurrentWidget(self.message)
        self.has_data = False

    def _show_plot(self) -> pg.PlotItem:
        item = self.plot.getPlotItem()
        item.clear()
        if item.legend is not None:
            item.legend.clear()
        self.stack.setCurrentWidget(self.plot)
        self.has_data = True
        return item

    def export(self, path: Path) -> Path:
        """Write the plot as PNG or SVG (by suffix) atomically: temp file in the same folder, then rename."""
        item = self.plot.getPlotItem()
        suffix = path.suffix.lower()
        exporter = pg_exporters.SVGExporter(item) if suffix == ".svg" else pg_exporters.ImageExporter(item)
        if suffix != ".svg":
            exporter.parameters()["width"] = max(1000, int(item.sceneBoundingRect().width()))
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=suffix, dir=path.parent)
        os.close(fd)
        try:
            if exporter.export(tmp) is False:
                raise FuseviewError(f"{path}: could not write the plot")
            if os.path.getsize(tmp) == 0:
                raise FuseviewError(f"{path}: the plot export wrote nothing")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path


class BarChart(PlotCard):
    """Horizontal bars, one row per label and one bar per series in each row; clicks emit (row, series)."""

    barClicked = Signal(int, str)

    def __init__(
        self, name: str, title: str, x_label: str, log_x: bool = False, parent: QWidget | None = None
    ):
        super().__init__(name, title, parent)
        self.x_label = x_label
        self.log_x = log_x
        self.labels: list[str] = []
        self.bars: dict[str, _Bars] = {}

    def set_bars(self, labels: list[str], series: dict[str, list[float | None]]) -> None:
        """Draw rows top to bottom; series maps a name (also its colour key) to one value per row."""
        item = self._show_plot()
        self.labels = list(labels)
        self.bars = {}
        n, k = len(labels), len(series)
        h = 0.8 / max(k, 1)
        lo = 0.0
        if self.log_x:
            vals = [v for vs in series.values() for v in vs if v]
            lo = math.floor(math.log10(min(vals))) - 1 if vals else -12
        if k > 1:
            item.addLegend(offset=(-10, 10), labelTextColor="#1b2430", brush=pg.mkBrush(255, 255, 255, 220))
        for s, (name, values) in enumerate(series.items()):
            ys = [(n - 1 - r) + (s - (k - 1) / 2) * h for r in range(n)]
            ends = [self._x(v, lo) for v in values]
            bars = _Bars(
                lambda i, name=name: self.barClicked.emit(i, name),
                x0=[lo] * n,
                y=ys,
                height=h * 0.92,
                width=[e - lo for e in ends],
                brush=COLORS.get(name, "#888888"),
                pen=None,
                name=name,
            )
            item.addItem(bars)
            self.bars[name] = bars
        left = item.getAxis("left")
        left.setTicks([[(float(n - 1 - r), short_label(t)) for r, t in enumerate(labels)], []])
        width = max((QFontMetrics(left.font()).horizontalAdvance(short_label(t)) for t in labels), default=40)
        left.setWidth(min(width + 14, 360))
        bottom = item.getAxis("bottom")
        bottom.setLabel(self.x_label)
        if self.log_x:
            hi = max(
                [math.ceil(e) for e in (self._x(v, lo) for vs in series.values() for v in vs)] + [lo + 1]
            )
            bottom.setTicks([_decade_ticks(int(lo), int(hi)), []])
            item.setXRange(lo, hi, padding=0.02)
        else:
            bottom.setTicks(None)
            item.setXRange(0, max([v or 0 for vs in series.values() for v in vs] + [1e-9]), padding=0.05)
        item.setYRange(-0.6, n - 0.4, padding=0)
        item.showGrid(x=True, y=False, alpha=0.25)

    def _x(self, v: float | None, lo: float) -> float:
        if not v:
            return lo
        return max(math.log10(v), lo) if self.log_x else float(v)

    def bar_count(self) -> int:
        """Number of rows drawn (0 when a message is shown)."""
        return len(self.labels) if self.has_data else 0

    def click(self, row: int, series: str) -> None:
        """What a mouse click on that bar does (tests and keyboard use call this directly)."""
        self.bars[series]._on_click(row)


class HistogramChart(PlotCard):
    """|diff| counts per decade on a log axis, with the exact zeros as a bar of their own."""

    def set_histogram(self, hist: dict) -> None:
        """Draw an abs_diff_hist record: {"zero": n, "edges": [...], "counts": [...]}."""
        item = self._show_plot()
        exps = [math.log10(e) for e in hist["edges"]]
        xs = [(a + b) / 2 for a, b in zip(exps, exps[1:], strict=False)]
        zero_x = exps[0] - 1.5
        item.addItem(
            pg.BarGraphItem(
                x=[zero_x] + xs,
                height=[hist["zero"]] + list(hist["counts"]),
                width=0.9,
                brush=COLORS["hist"],
                pen=None,
            )
        )
        ticks = [(zero_x, "0")] + [(e, f"1e{round(e)}") for e in exps[:: max(1, len(exps) // 8)]]
        bottom = item.getAxis("bottom")
        bottom.setTicks([ticks, []])
        bottom.setLabel("element-wise |fused − original| (decades; the first bar counts exact zeros)")
        item.getAxis("left").setLabel("elements")
        item.setXRange(zero_x - 0.6, exps[-1] + 0.2, padding=0)
        item.showGrid(x=False, y=True, alpha=0.25)
        self.counts = [hist["zero"]] + list(hist["counts"])
