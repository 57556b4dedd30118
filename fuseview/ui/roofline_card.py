"""The Profile dock's Roofline card: each node's achieved GFLOP/s against its FLOPs per byte, log-log.

The two roofs are the machine's measured bandwidth (a slope) and peak FLOP/s (flat); original and fused
nodes are points coloured by op family as in the graph (circles original, triangles fused), and each
fusion is an arrow from its original nodes (FLOPs, bytes and median times summed) to its fused node(s).
Clicking a point selects the node. The top half reads the report's roofline section (no Qt drawing);
pyqtgraph is imported when the card first draws, as the other plots do (profile_plots.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QWidget

from fuseview.colors import PALETTE
from fuseview.ui import style
from fuseview.ui.profile_plots import FUSED, ORIGINAL, PlotCard, fmt_us, load_pyqtgraph, models_by_role

ROOF_COLOR = "#1b2430"
ARROW_COLOR = "#e07b00"
CPU_EP = "CPUExecutionProvider"
SYMBOLS = {ORIGINAL: "o", FUSED: "t"}


@dataclass(frozen=True)
class RoofPoint:
    """A node (or a fusion's summed nodes) on the roofline: x FLOPs per byte, y achieved GFLOP/s."""

    role: str
    node: str
    op_type: str
    domain: str
    flops: float
    bytes: float
    time_us: float
    bound: str = ""

    @property
    def x(self) -> float:
        """Arithmetic intensity (FLOP/byte)."""
        return self.flops / self.bytes

    @property
    def y(self) -> float:
        """Achieved GFLOP/s (FLOPs over the median time)."""
        return self.flops / self.time_us / 1e3

    def tip(self) -> str:
        """Tooltip: the node, its costs, time and achieved rates."""
        return (f"{self.role}: {self.op_type} {self.node}\n{self.flops:.3g} FLOP, {self.bytes:.3g} bytes"
                f" ({self.x:.3g} FLOP/byte), {fmt_us(self.time_us)} median\n{self.y:.3g} GFLOP/s,"
                f" {self.bytes / self.time_us / 1e3:.3g} GB/s"
                + (f"; {self.bound}-bound" if self.bound else ""))


def _decade_ticks(lo: int, hi: int) -> list[tuple[float, str]]:
    step = max(1, math.ceil((hi - lo) / 8))
    return [(float(e), f"1e{e}") for e in range(lo, hi + 1, step)]


def _placeable(flops: float, nbytes: float, time_us: float) -> bool:
    return flops > 0 and nbytes > 0 and time_us > 0  # a log axis has no place for a zero


def roofline_points(report: dict) -> dict[str, list[RoofPoint]]:
    """Per role, its nodes with FLOPs, bytes and a time (nodes that only move data have no place here)."""
    out: dict[str, list[RoofPoint]] = {}
    for role, m in models_by_role(report).items():
        roof = m.get("roofline")
        if not roof:
            continue
        out[role] = [RoofPoint(role, n["node"], n["op_type"], n.get("domain", ""), n["flops"], n["bytes"],
                               n["time_us"], n["bound"])
                     for n in roof["nodes"] if _placeable(n["flops"], n["bytes"], n["time_us"])]
    return out


def machine_of(report: dict) -> dict | None:
    """The measured machine roofline of the report (the same for every model of one profile)."""
    for m in report.get("models", []):
        if m.get("roofline"):
            return m["roofline"]["machine"]
    return None


@dataclass(frozen=True)
class FusionArrow:
    """One fusion: its original nodes summed, and its fused node(s) summed."""

    label: str
    original: RoofPoint
    fused: RoofPoint


def fusion_arrows(report: dict) -> list[FusionArrow]:
    """An arrow per applied fusion whose original and fused nodes both have FLOPs, bytes and a time."""
    by_role = models_by_role(report)
    if ORIGINAL not in by_role or FUSED not in by_role:
        return []
    rows = {role: {n["node"]: n for n in (m.get("roofline") or {}).get("nodes", [])}
            for role, m in by_role.items()}
    cmp = report.get("comparison") or {}
    out = []
    for f in cmp.get("fusions") or []:
        ends = []
        for role, names, node in ((ORIGINAL, f.get("origin", []), f["origin"][0] if f.get("origin") else ""),
                                  (FUSED, f.get("nodes") or [f["node"]], f["node"])):
            got = [rows[role][n] for n in names if n in rows[role]]
            flops, nbytes = sum(n["flops"] for n in got), sum(n["bytes"] for n in got)
            time_us = sum(n["time_us"] for n in got)
            op = got[0]["op_type"] if len(got) == 1 else f"{len(got)} nodes"
            ends.append(RoofPoint(role, node, op if role == ORIGINAL else f["op_type"],
                                  f.get("domain", ""), flops, nbytes, time_us))
        if all(_placeable(p.flops, p.bytes, p.time_us) for p in ends):
            out.append(FusionArrow(f.get("rule") or f["op_type"], ends[0], ends[1]))
    return out


def roof_distance_heat(report: dict) -> dict[str, dict[str, float]]:
    """Per role, each costed node's distance below the roof: 0 on (or above) it, 1 far below.

    The roof at a node's intensity is min(peak FLOP/s, intensity × bandwidth); a node without FLOPs is
    measured against the bandwidth alone (achieved GB/s over the peak GB/s).
    """
    out: dict[str, dict[str, float]] = {}
    for role, m in models_by_role(report).items():
        roof = m.get("roofline")
        if not roof:
            continue
        gbps = roof["machine"]["peak_gbps"]
        heat = out.setdefault(role, {})
        for n in roof["nodes"]:
            frac = n.get("roof_fraction")
            if frac is None:
                frac = n["achieved_gbps"] / gbps if gbps > 0 else 1.0
            heat[n["node"]] = 1.0 - min(max(float(frac), 0.0), 1.0)
    return out


def family_color(op_type: str, domain: str) -> str:
    """The op family's strong colour, as the graph draws the node."""
    return PALETTE.get(style.op_category(op_type, domain), PALETTE["other"])[0]


def time_source_text(report: dict) -> str:
    """Which time places the points: the GPU kernels', CUDA's host-side launches, or the CPU's run time."""
    if any((m.get("roofline") or {}).get("time_source") == "device" for m in report["models"]):
        return "node times: device (GPU kernels)"
    on_gpu = any((m.get("provider") or {}).get("provider", CPU_EP) != CPU_EP for m in report["models"])
    return "node times: host-side (CUDA launches, not the device)" if on_gpu else "node times: CPU run time"


class RooflineCard(PlotCard):
    """Log-log roofline of a profile report; clicking a point emits (role, node name)."""

    pointClicked = Signal(str, str)
    heatToggled = Signal(bool)  # colour the graph by distance to the roof (True) or as before (False)

    def __init__(self, name: str = "roofline", title: str = "Roofline: achieved GFLOP/s vs FLOPs per byte",
                 parent: QWidget | None = None) -> None:
        super().__init__(name, title, parent)
        self.points: dict[str, list[RoofPoint]] = {}
        self.arrows: list[FusionArrow] = []
        self._scatter: dict[str, object] = {}
        self.heat_box = QCheckBox("Heat map: distance to the roof")
        self.heat_box.setToolTip("colour the graph's nodes by how far below the roof they run (dark: far)")
        self.heat_box.toggled.connect(self.heatToggled.emit)
        layout = self.layout()
        assert layout is not None
        layout.insertWidget(0, self.heat_box)  # type: ignore[attr-defined]

    def set_report(self, report: dict) -> None:
        """Draw the report's roofline, or say why there is none (an older report, no costed node)."""
        machine = machine_of(report)
        self.points = roofline_points(report)
        self.arrows = fusion_arrows(report)
        if machine is None:
            self.show_message("no roofline in this report (made before schema 3): profile again")
            return
        if not any(self.points.values()):
            self.show_message("no node with FLOPs, bytes and a time in this report")
            return
        item = self._show_plot()
        self._drawn = ("set_report", (report,))
        pg = load_pyqtgraph()
        pts = [p for ps in self.points.values() for p in ps] + [e for a in self.arrows for e in (a.original,
                                                                                                  a.fused)]
        peak, bw = machine["peak_gflops"], machine["peak_gbps"]
        ridge = peak / bw
        x_lo = math.floor(math.log10(min([p.x for p in pts] + [ridge])) - 0.5)
        x_hi = math.ceil(math.log10(max([p.x for p in pts] + [ridge])) + 0.5)
        y_lo = math.floor(math.log10(min(p.y for p in pts)) - 0.5)
        # nodes whose tensors stay in cache can sit above the DRAM roof: the axis keeps them in view
        y_hi = math.ceil(math.log10(max([p.y for p in pts] + [peak])) + 0.3)
        lx = [float(x_lo), math.log10(ridge), float(x_hi)]
        item.addItem(pg.PlotDataItem(lx, [x_lo + math.log10(bw), math.log10(peak), math.log10(peak)],
                                     pen=pg.mkPen(ROOF_COLOR, width=2)))
        for text, x, y, anchor in ((f"{bw:.3g} GB/s", x_lo + 0.1, x_lo + 0.1 + math.log10(bw), (0, 1)),
                                   (f"{peak:.3g} GFLOP/s", x_hi - 0.1, math.log10(peak), (1, 1))):
            label = pg.TextItem(text, color=ROOF_COLOR, anchor=anchor)
            label.setPos(x, y)
            item.addItem(label)
        self._scatter = {}
        item.addLegend(offset=(10, 10), labelTextColor=ROOF_COLOR, brush=pg.mkBrush(255, 255, 255, 220))
        for role, ps in self.points.items():
            colors = [family_color(p.op_type, p.domain) for p in ps]
            scatter = pg.ScatterPlotItem(
                x=[math.log10(p.x) for p in ps], y=[math.log10(p.y) for p in ps], data=ps,
                symbol=SYMBOLS.get(role, "o"), size=9 if role == ORIGINAL else 11,
                brush=[pg.mkBrush(c) for c in colors],
                pen=pg.mkPen("#ffffff" if role == ORIGINAL else ROOF_COLOR, width=1),
                hoverable=True, tip=lambda x, y, data: data.tip(), name=role)
            scatter.sigClicked.connect(self._clicked)
            item.addItem(scatter)
            self._scatter[role] = scatter
        for a in self.arrows:
            x0, y0 = math.log10(a.original.x), math.log10(a.original.y)
            x1, y1 = math.log10(a.fused.x), math.log10(a.fused.y)
            item.addItem(pg.PlotDataItem([x0, x1], [y0, y1], pen=pg.mkPen(ARROW_COLOR, width=1.5)))
            head = pg.ArrowItem(pos=(x1, y1), angle=self._angle(x0, y0, x1, y1, x_hi - x_lo, y_hi - y_lo),
                                headLen=10, brush=ARROW_COLOR, pen=None)
            head.setToolTip(f"{a.label}: {a.original.tip()}\n→ {a.fused.tip()}")
            item.addItem(head)
        for axis, lo, hi, label in (("bottom", x_lo, x_hi, "FLOPs per byte moved (log)"),
                                    ("left", y_lo, y_hi, "achieved GFLOP/s (log)")):
            ax = item.getAxis(axis)
            ax.setTicks([_decade_ticks(lo, hi), []])
            ax.setLabel(label)
        item.setXRange(x_lo, x_hi, padding=0)
        item.setYRange(y_lo, y_hi, padding=0)
        item.showGrid(x=True, y=True, alpha=0.2)
        n_nodes = sum(len(p) for p in self.points.values())
        # in the card's header, under its title (as every card says how much of its data shows)
        self.note = (f"{n_nodes} nodes, {len(self.arrows)} fusions as arrows · ridge {ridge:.2g} FLOP/byte"
                     f" · {time_source_text(report)}")
        self._show_header()

    def _angle(self, x0: float, y0: float, x1: float, y1: float, x_span: float, y_span: float) -> float:
        """The arrow head's angle on screen (pyqtgraph: 0 points left, 90 up), from the plot's aspect."""
        w, h = max(self.plot.width(), 1), max(self.plot.height(), 1)
        dx, dy = (x1 - x0) / x_span * w, (y1 - y0) / y_span * h
        return math.degrees(math.atan2(dy, -dx)) if (dx or dy) else 0.0  # 0 left, 90 up (y up)

    def _clicked(self, _scatter, spots, *_args) -> None:
        if spots is not None and len(spots):
            p = spots[0].data()
            self.pointClicked.emit(p.role, p.node)

    def click(self, role: str, node: str) -> None:
        """What a mouse click on that node's point does (tests and keyboard use call this directly)."""
        scatter = self._scatter[role]
        spots = [s for s in scatter.points() if s.data().node == node]  # type: ignore[attr-defined]
        self._clicked(scatter, spots)

    def export_size(self) -> tuple[int, int]:
        """A square-ish plot: decades on both axes read alike."""
        return 1000, 720
