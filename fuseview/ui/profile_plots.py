"""The profiling panel's plots (pyqtgraph): horizontal grouped bars, the |diff| histogram, PNG/SVG export.

The top half turns a profile report into rows for the plots (no Qt); the bottom half draws them.
pyqtgraph is imported when a plot is first drawn, not with the window: it is 0.3 s of the window's start.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import QEventLoop, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QApplication, QLabel, QStackedWidget, QVBoxLayout, QWidget

from fuseview.atomic import write_atomic
from fuseview.errors import FuseviewError
from fuseview.graph.scopes import common_scope
from fuseview.stats import by_median
from fuseview.units import format_us

if TYPE_CHECKING:
    import pyqtgraph as pg

ORIGINAL, FUSED = "original", "fused"
COLORS = {
    ORIGINAL: "#4c78a8",
    FUSED: "#f58518",
    "max abs": "#54a24b",
    "max rel": "#b279a2",
    "hist": "#72b7b2",
}
TOP_N = 15
LABEL_CHARS = 60
LABEL_PX = 300  # widest row label; longer ones are elided in the middle
BAR_SHARE = 0.92  # of a series' band in its row: the rest is the gap between bars
VALUE_PT = 8  # value labels' font size


def value_font() -> QFont:
    """The font of the bars' value labels."""
    font = QFont()
    font.setPointSize(VALUE_PT)
    return font


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


def op_type_rows(report: dict, top: int = TOP_N) -> tuple[list[str], dict[str, list[float | None]]]:
    """The top op types by median time per run (the larger of the models); None where a model has none."""
    per_role: dict[str, dict[str, float]] = {}
    for role, m in models_by_role(report).items():
        times = per_role.setdefault(role, {})
        for o in m["op_types"]:  # one entry per (op type, provider): a CUDA run may place an op on both
            times[o["op_type"]] = times.get(o["op_type"], 0.0) + float(o["p50_us"])
    ops = sorted(
        {op for times in per_role.values() for op in times},
        key=lambda op: (-max(t.get(op, 0.0) for t in per_role.values()), op),
    )[:top]
    return ops, {role: [times.get(op) for op in ops] for role, times in per_role.items()}


def slowest_nodes(model: dict, top: int = TOP_N) -> list[dict]:
    """The model's slowest nodes by median time per run."""
    return [n for n, _share in by_median(model["nodes"])][:top]


@dataclass
class FusionRow:
    """One applied fusion: its label, the replaced nodes' time against the fused nodes' time (us).

    Spreads are [p25, p75] of the summed times over the profiled runs; measurable is False when the
    difference is within that spread or the profiler's per-node floor (None: an old report, not known).
    """

    label: str
    original_us: float
    fused_us: float
    fused_node: str
    original_node: str | None
    original_spread: list[float] | None = None
    fused_spread: list[float] | None = None
    measurable: bool | None = None

    def tip(self) -> str:
        """Tooltip text: both times with their spread, then the speed-up or 'not measurable'."""
        def part(name: str, us: float, spread: list[float] | None) -> str:
            runs = f" (runs {fmt_us(spread[0])}–{fmt_us(spread[1])})" if spread else ""
            return f"{name} {fmt_us(us)}{runs}"

        original = part("replaced", self.original_us, self.original_spread)
        head = f"{self.fused_node}\n{original}, {part('fused', self.fused_us, self.fused_spread)}"
        if self.measurable is False:
            return head + "\nnot measurable: within the runs' spread or the profiler's per-node floor"
        if self.fused_us:
            return head + f"\nspeed-up {self.original_us / self.fused_us:.2f}x"
        return head


def fusion_rows(report: dict, top: int = TOP_N) -> list[FusionRow]:
    """Per applied fusion, replaced nodes' time against the fused node's (sums of per-node medians)."""
    cmp = report.get("comparison") or {}
    found = []  # (rule or op type, time record, first replaced node)
    for f in cmp.get("fusions") or []:
        t = f.get("time")
        if t and t.get("fused_p50_us") is not None:
            found.append((f.get("rule", t["op_type"]), t, (f.get("origin") or [None])[0]))
    for t in cmp.get("reverse_fusion_times") or []:
        if t.get("fused_p50_us") is not None:
            found.append((t["op_type"], t, None))
    found.sort(key=lambda x: -x[1]["original_p50_us"])
    found = found[:top]
    names = strip_common_scope([t["node"] for _, t, _ in found])
    return [
        FusionRow(short_label(name, f"{rule}  "), t["original_p50_us"], t["fused_p50_us"], t["node"], first,
                  t.get("original_spread_us"), t.get("fused_spread_us"), t.get("measurable"))
        for (rule, t, first), name in zip(found, names, strict=True)
    ]


def overhead_note(report: dict) -> str:
    """'' or a note on the profiler's per-node floor, for plot titles (version 1 reports have none)."""
    ovh = report.get("profiler_overhead")
    if not ovh:
        return ""
    return f" · profiler floor {ovh['node_floor_us']:.1f} µs/node, +{ovh['per_event_us']:.1f} µs per event"


def op_floor_us(report: dict) -> dict[str, float]:
    """Op type -> the profiler's floor in its time (nodes x per-node floor) for the original model."""
    ovh = report.get("profiler_overhead")
    if not ovh:
        return {}
    model = models_by_role(report).get(ORIGINAL) or report["models"][0]
    out: dict[str, float] = {}
    for o in model["op_types"]:
        floor = o.get("overhead_us", o["nodes"] * ovh["node_floor_us"])
        out[o["op_type"]] = out.get(o["op_type"], 0.0) + floor
    return out


def node_labels(nodes: list[dict]) -> list[str]:
    """Row labels for nodes: op type and name less the scope all share (no op type when the name has it)."""
    out = []
    for n, name in zip(nodes, strip_common_scope([n["name"] for n in nodes]), strict=True):
        has_op = name.rsplit("/", 1)[-1].startswith(n["op_type"])
        out.append(short_label(name, "" if has_op else f"{n['op_type']}  "))
    return out


def heatmap(report: dict) -> dict[str, dict[str, float]]:
    """Each model's share of time per node by median per run: {"original": {node: share}, "fused": {...}}."""
    out: dict[str, dict[str, float]] = {ORIGINAL: {}, FUSED: {}}
    for role, m in models_by_role(report).items():
        out[role] = {n["name"]: share for n, share in by_median(m["nodes"])}
    return out


def short_label(name: str, prefix: str = "", chars: int = LABEL_CHARS) -> str:
    """prefix + the end of a long node name (its most telling part), an ellipsis where it was cut."""
    room = max(chars - len(prefix), 12)
    return prefix + (name if len(name) <= room else "…" + name[-(room - 1) :])


def strip_common_scope(names: list[str]) -> list[str]:
    """Node names less their shared scope ("/m/transformer/h.0/attn/Softmax" -> "h.0/attn/Softmax")."""
    common = len(common_scope([tuple(n.split("/")[:-1]) for n in names]))
    return ["/".join(n.split("/")[common:]) for n in names]


def fmt_us(us: float) -> str:
    """Microseconds in a readable unit (fuseview.units, written µs)."""
    return format_us(us, "µs")


# ------------------------------------------------------------------------------------ drawing
def load_pyqtgraph():  # noqa: ANN201 - the pyqtgraph module
    """pyqtgraph, imported on first use (importing fuseview.ui stays light)."""
    import pyqtgraph

    return pyqtgraph


@functools.cache
def _items() -> tuple[type, type]:
    """(bars that report clicks and show a tooltip per bar, a view box whose wheel scrolls rows)."""
    pg = load_pyqtgraph()

    class Bars(pg.BarGraphItem):
        """BarGraphItem that reports which bar was clicked and shows a tooltip per bar."""

        def __init__(self, on_click, tips: list[str], **opts):
            super().__init__(**opts)
            self._on_click = on_click
            self._tips = tips
            self.setAcceptHoverEvents(True)

        def _bar_at(self, y: float) -> int | None:
            o = self.opts
            heights = np.broadcast_to(np.asarray(o["height"], dtype=float), np.shape(o["y"]))
            for i, (c, h) in enumerate(zip(o["y"], heights, strict=True)):
                if c - h / 2 <= y <= c + h / 2:
                    return i
            return None

        def mouseClickEvent(self, ev):  # noqa: N802 - pyqtgraph's name
            i = self._bar_at(ev.pos().y()) if ev.button() == Qt.MouseButton.LeftButton else None
            if i is not None:
                ev.accept()
                self._on_click(i)

        def hoverEvent(self, ev):  # noqa: N802 - pyqtgraph's name
            i = None if ev.isExit() else self._bar_at(ev.pos().y())
            self.setToolTip(self._tips[i] if i is not None else "")

    class RowsViewBox(pg.ViewBox):
        """A ViewBox whose mouse wheel scrolls the rows of a bar chart instead of zooming."""

        def wheelEvent(self, ev, axis=None):  # noqa: N802 - pyqtgraph's name
            self.translateBy(y=ev.delta() / 120)
            ev.accept()

    return Bars, RowsViewBox


class PlotCard(QWidget):
    """A pyqtgraph plot under a wrapping title (with the series' legend: outside the data), and a message
    shown in the plot's place when there is nothing to plot."""

    def __init__(self, name: str, title: str, parent: QWidget | None = None, scroll_rows: bool = False):
        super().__init__(parent)
        self.name = name
        self.title = title
        self.legend_html = ""  # the series' colour keys, shown after the title
        self.note = ""  # how much of the data shows ("top 5 of 15 · scroll for more")
        self._drawn: tuple[str, tuple] | None = None  # the last set_* call, replayed by export
        self._scroll_rows = scroll_rows
        self._plot: pg.PlotWidget | None = None  # made when first drawn (see the module's docstring)
        self.header = QLabel()
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setStyleSheet("color: #1b2430;")
        self.message = QLabel()
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.message.setStyleSheet("color: #5b6573;")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.message)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.header)
        lay.addWidget(self.stack, 1)
        self.has_data = False
        self.show_message("no profile yet: Run, or Open report…")

    @property
    def plot(self) -> pg.PlotWidget:
        """The pyqtgraph plot (made on first use)."""
        if self._plot is None:
            view_box = _items()[1]() if self._scroll_rows else None
            self._plot = load_pyqtgraph().PlotWidget(background="w", viewBox=view_box)
            self._plot.setMenuEnabled(False)
            self._plot.setMouseEnabled(x=False, y=False)
            self._plot.hideButtons()
            self.stack.addWidget(self._plot)
            if self._scroll_rows:  # rows and value labels follow the data area's size, once laid out
                self._plot.getPlotItem().getViewBox().sigResized.connect(lambda _vb: self.fit_rows())
        return self._plot

    def fit_rows(self) -> int:
        """Lay the rows out for the plot's size (bar charts); how many rows show."""
        return 0

    def show_message(self, text: str) -> None:
        """Show a line of text instead of the plot."""
        if self._plot is not None:
            self._plot.clear()
        self._drawn = None
        self.legend_html, self.note = "", ""
        self._show_header()
        self.message.setText(text)
        self.stack.setCurrentWidget(self.message)
        self.has_data = False

    def _show_plot(self) -> pg.PlotItem:
        item = self.plot.getPlotItem()
        item.clear()
        self.stack.setCurrentWidget(self.plot)
        self.has_data = True
        return item

    def set_title(self, title: str) -> None:
        """Change the plot's title."""
        self.title = title
        self._show_header()

    def header_html(self) -> str:
        """The title, then the series' colour keys and how much of the data shows."""
        extra = " · ".join(t for t in (self.legend_html, escape(self.note)) if t)
        more = f"<br><span style='color:#5b6573'>{extra}</span>" if extra else ""
        return f"<b>{escape(self.title)}</b>{more}"

    def _show_header(self) -> None:
        self.header.setText(self.header_html())

    def _clone(self) -> PlotCard:
        return type(self)(self.name, self.title)

    def export_size(self) -> tuple[int, int]:
        """Pixel size of an exported plot (bar charts grow with their rows)."""
        return 1000, 560

    def export(self, path: Path) -> Path:
        """Write the plot as PNG or SVG (by suffix) atomically: temp file in the same folder, then rename."""
        if self._drawn is None:
            raise FuseviewError(f"{path}: the {self.name} plot has no data")
        suffix = path.suffix.lower()
        # Drawn again in an off-screen copy at the export size: the panel's own plot may sit in a hidden tab
        # that was never laid out, and its size is the dock's, not one that suits a file.
        copy = self._clone()
        copy.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen)
        w, h = self.export_size()
        copy.resize(w, h)
        copy.show()
        getattr(copy, self._drawn[0])(*self._drawn[1])
        copy.title, copy.legend_html = self.title, self.legend_html
        copy.plot.setTitle(copy.header_html(), color="#1b2430", size="10pt")
        QApplication.processEvents(QEventLoop.ProcessEventsFlag.ExcludeUserInputEvents)

        import pyqtgraph.exporters as pg_exporters

        def write(tmp: str) -> None:
            if suffix == ".svg":
                copy._write_svg(tmp)
            elif pg_exporters.ImageExporter(copy.plot.getPlotItem()).export(tmp) is False:
                raise FuseviewError(f"{path}: could not write the plot")

        try:
            write_atomic(path, write, allow_empty=False)
        finally:
            copy.close()
            copy.deleteLater()
        return path

    def _write_svg(self, filename: str) -> None:
        # pyqtgraph's SVGExporter cannot parse the path data Qt 6.11's QSvgGenerator writes, so the scene
        # is painted straight into a QSvgGenerator (text stays text, bars stay vector shapes).
        rect = self.plot.getPlotItem().sceneBoundingRect()
        w, h = int(rect.width()), int(rect.height())
        gen = QSvgGenerator()
        gen.setFileName(filename)
        gen.setSize(QSize(w, h))
        gen.setViewBox(QRect(0, 0, w, h))
        gen.setResolution(self.plot.logicalDpiX())  # the default 72 dpi would shrink the axes' text
        gen.setTitle(self.title)
        painter = QPainter(gen)
        try:
            painter.fillRect(QRectF(0, 0, w, h), QColor("white"))
            self.plot.scene().render(painter, QRectF(0, 0, w, h), rect)
        finally:
            painter.end()


class BarChart(PlotCard):
    """Horizontal bars, one row per label and one bar per series in each row; clicks emit (row, series)."""

    barClicked = Signal(int, str)

    def __init__(
        self,
        name: str,
        title: str,
        x_label: str,
        log_x: bool = False,
        value_text=None,
        legend: bool = True,
        parent: QWidget | None = None,
    ):
        super().__init__(name, title, parent, scroll_rows=True)
        self.x_label = x_label
        self.log_x = log_x
        self.value_text = value_text or (lambda v: f"{v:.3g}")
        self.legend = legend  # without a legend, each bar's value text starts with its series name
        self.labels: list[str] = []
        self.bars: dict[str, Any] = {}  # series name -> its bars (_items' Bars)
        self.values: list[tuple[Any, float]] = []  # each bar's value label and the x of the bar's end
        self._series_count = 1
        self._lo, self._max_x = 0.0, 1.0  # x axis start (log: a decade below the least value), largest end

    def set_bars(
        self, labels: list[str], series: dict[str, list[float | None]], names: list[str] | None = None
    ) -> None:
        """Draw rows top to bottom, first series on top in each row; a series' name is also its colour key.

        names: the full name of each row for the tooltips (labels may be shortened).
        """
        item = self._show_plot()
        self._drawn = ("set_bars", (labels, series, names))
        self.labels = list(labels)
        self.bars = {}
        self.values = []
        n, k = len(labels), len(series)
        h = 0.9 / max(k, 1)
        values = [v for vs in series.values() for v in vs if v]
        self._lo = 0.0
        if self.log_x:
            self._lo = math.floor(math.log10(min(values))) - 1 if values else -12
        lo = self._lo
        self._max_x = max([self._x(v, lo) for v in values] + [lo + (1 if self.log_x else 1e-9)])
        self.legend_html = ""
        if k > 1 and self.legend:  # in the header, outside the data
            self.legend_html = " ".join(
                f"<span style='color:{COLORS.get(name, '#888888')}'>■</span> {escape(name)}"
                for name in series
            )
        font = value_font()
        for s, (name, vals) in enumerate(series.items()):
            ys = [(n - 1 - r) - (s - (k - 1) / 2) * h for r in range(n)]
            ends = [self._x(v, lo) for v in vals]
            tips = [
                f"{full}\n{name}: {self.value_text(v) if v is not None else 'none'}"
                for full, v in zip(names or labels, vals, strict=True)
            ]
            bars = _items()[0](
                lambda i, name=name: self.barClicked.emit(i, name),
                tips,
                x0=[lo] * n,
                y=ys,
                height=h * BAR_SHARE,
                width=[e - lo for e in ends],
                brush=COLORS.get(name, "#888888"),
                pen=None,
                name=name,
            )
            item.addItem(bars)
            self.bars[name] = bars
            for y, e, v in zip(ys, ends, vals, strict=True):
                value = self.value_text(v) if v is not None else "none"
                text = load_pyqtgraph().TextItem(value if self.legend else f"{name} {value}", anchor=(0, 0.5))
                text.setFont(font)
                text.textItem.document().setDocumentMargin(1)
                text.setPos(e, y)
                item.addItem(text)
                self.values.append((text, e))
        # every bar says its value and the header its unit: the rows get the axis' height
        item.hideAxis("bottom")
        self._series_count = k
        self.fit_rows()

    def _row_px(self) -> float:
        """Pixels a row takes: each bar as tall as its value label, so a label never reaches the next bar."""
        return math.ceil(QFontMetrics(value_font()).height() + 3) * self._series_count / BAR_SHARE / 0.9

    def wanted_height(self, rows: int) -> int:
        """The card height that shows rows rows (its header wrapped at the card's width, the x axis)."""
        return self.header.heightForWidth(max(self.width(), 200)) + math.ceil(rows * self._row_px()) + 30

    def fit_rows(self) -> int:
        """Show the top rows that the plot's height holds ("top N of M" in the header); the rest scroll."""
        n = len(self.labels)
        if not self.has_data or n == 0:
            return 0
        item = self.plot.getPlotItem()
        vb = item.getViewBox()
        self._elide_rows(item)
        height = vb.height() if vb.height() > 0 else self.plot.height() - 40
        fit = max(1, min(n, int(height // self._row_px())))
        vb.setMouseEnabled(x=False, y=fit < n)
        vb.setLimits(yMin=-0.6, yMax=n - 0.4, minYRange=fit, maxYRange=fit)
        vb.setYRange(n - 0.4 - fit, n - 0.4, padding=0)
        self.note = f"{self.x_label} · " if self.x_label else ""
        self.note += f"top {fit} of {n}, scroll for more" if fit < n else f"all {n}"
        self._show_header()
        self.place_values()
        return fit

    def _elide_rows(self, item) -> None:
        # pyqtgraph drops a tick label wider than its axis: elide in the middle (op type and name's end stay),
        # to at most 40 % of the card, so a narrow card keeps room for its bars
        left = item.getAxis("left")
        fm = QFontMetrics(left.font())
        room = max(60, min(LABEL_PX, int(self.width() * 0.4)))
        n = len(self.labels)
        shown = [fm.elidedText(t, Qt.TextElideMode.ElideMiddle, room) for t in self.labels]
        left.setTicks([[(float(n - 1 - r), t) for r, t in enumerate(shown)], []])
        axis_width = max((fm.horizontalAdvance(t) for t in shown), default=40) + 14
        if left.width() != axis_width:
            left.setWidth(axis_width)

    def place_values(self) -> None:
        """Size the x axis so each value label fits beside its bar, else put it inside the bar's end."""
        if not self.has_data or not self.values:
            return
        item = self.plot.getPlotItem()
        width = item.getViewBox().width()
        if width <= 0:
            return
        fm = QFontMetrics(value_font())
        lo, top = self._lo, self._max_x - self._lo
        pads = [(e - lo, fm.horizontalAdvance(t.toPlainText()) + 8) for t, e in self.values]
        span = max([top] + [x * width / (width - w) for x, w in pads if width - w > width / 2])
        span = min(span, top * 2.5)
        for (text, _e), (x, w) in zip(self.values, pads, strict=True):
            inside = x / span * width + w > width
            text.setAnchor((1, 0.5) if inside else (0, 0.5))
            text.setColor("#ffffff" if inside else "#3b4350")
        item.setXRange(lo, lo + span, padding=0)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        """Refit the rows and the value labels to the new size."""
        super().resizeEvent(event)
        self.fit_rows()

    def _clone(self) -> BarChart:
        return BarChart(self.name, self.title, self.x_label, self.log_x, self.value_text)

    def export_size(self) -> tuple[int, int]:
        """1000 px wide, about 40 px per row."""
        return 1000, max(360, 110 + 40 * len(self.labels))

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
        self._drawn = ("set_histogram", (hist,))
        exps = [math.log10(e) for e in hist["edges"]]
        xs = [(a + b) / 2 for a, b in zip(exps, exps[1:], strict=False)]
        zero_x = exps[0] - 1.5
        item.addItem(
            load_pyqtgraph().BarGraphItem(
                x=[zero_x] + xs,
                height=[hist["zero"]] + list(hist["counts"]),
                width=0.9,
                brush=COLORS["hist"],
                pen=None,
            )
        )
        ticks = [(zero_x, "0")] + [(e, f"1e{round(e)}") for e in exps[::2]]
        bottom = item.getAxis("bottom")
        bottom.setTicks([ticks, []])
        bottom.setLabel(None)  # said in the header, which wraps: a narrow card cuts no axis title
        self.note = "elements per decade of element-wise |fused − original|; the first bar counts exact zeros"
        self._show_header()
        item.setXRange(zero_x - 0.6, exps[-1] + 0.2, padding=0)
        item.showGrid(x=False, y=True, alpha=0.25)
        self.counts = [hist["zero"]] + list(hist["counts"])
