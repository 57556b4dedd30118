"""The trace workspace's kernel page: each compiled kernel against the eager ops it replaced, on screen.

The top half turns a report's fused_kernels into rows (no Qt): the kernel, its graph, its time per step
with its spread over the steps, the replaced ops and their time, the ratio with its direction spelled out,
and the source lines. The bottom half shows a linear-axis bar chart, a table and the selected kernel's
post-grad nodes and source code.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QSplitter, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from fuseview.traces.compare import ratio_phrase
from fuseview.ui import profile_plots as plots
from fuseview.ui.trace_graph import PostGradGraph

REPLACED, KERNEL = "replaced ops (before)", "kernel (after)"
COLUMNS = ["kernel", "graph", "kind", "attribution", "kernel µs/step (p50 [min–max])",
           "replaced ops µs/step", "kernel vs the ops it replaced", "replaced ops", "source lines"]
# the rows the plot shows without scrolling, when the tab is tall enough (issue 37: the top 10)
SHOWN_ROWS = 10


def _short(op: str) -> str:
    return op.rsplit("::", 1)[-1]


def source_lines(k: dict) -> str:
    """The kernel's source lines, `file:line` joined (empty when attributed by name)."""
    p = k.get("provenance")
    if not p:
        return ""
    seen = []
    for s in p["source"]:
        t = f"{Path(s['file']).name}:{s['line']}"
        if t not in seen:
            seen.append(t)
    return ", ".join(seen)


def kernel_name(k: dict) -> str:
    """The kernel's name; an extern kernel's with its debug handle (two addmm kernels stay apart)."""
    return k["provenance"]["kernel"] if k.get("kind") == "extern" and k.get("provenance") else k["name"]


def kernel_label(k: dict) -> str:
    """The plot's row label: the kernel and the ops it replaced (on screen, not only in a tooltip)."""
    name = kernel_name(k)
    ops = "+".join(sorted({_short(m) for m in k["matched_before"]})) or "nothing found"
    return f"{name}  ←  {ops}"


def replaced_ops(k: dict) -> str:
    """The eager ops a kernel replaced: those its provenance names first, then those of its graph's nodes
    it rewrote (SDPA's matmul and softmax)."""
    region = (k.get("provenance") or {}).get("region_aten") or []
    named = [m for m in k["matched_before"] if m not in region]
    text = ", ".join(named) or "none found"
    return text + (f"; rewritten with them: {', '.join(region)}" if region else "")


def kernel_rows(report: dict) -> list[dict]:
    """One row per compiled kernel of the report (empty for a single trace)."""
    d = report.get("diff") or {}
    rows = []
    for k in d.get("fused_kernels") or []:
        spread = (k.get("per_step") or {}).get("kernel_us")
        span = (f" [{spread['min']:.1f}–{spread['max']:.1f}]" if spread else "")
        p = k.get("provenance") or {}
        rows.append({
            "label": kernel_label(k), "name": kernel_name(k), "graph": p.get("graph", ""),
            "kind": k.get("kind", "fused"),
            "attribution": "provenance" if k.get("attribution") == "provenance" else "name (a guess)",
            "time_us": k["time_us"], "time_text": f"{k['time_us']:.1f}{span}",
            "replaced_us": k["replaced_us"],
            "verdict": ratio_phrase(k["time_us"], k["replaced_us"], k.get("speedup")),
            "ops": replaced_ops(k), "source": source_lines(k),
            "post_grad": p.get("post_grad", []), "code": [
                f"{Path(s['file']).name}:{s['line']}  {s['code']}" for s in p.get("source", [])],
            "interval": (k.get("speedup") or {}).get("summary", ""),
        })
    return rows


class KernelPanel(QWidget):
    """Bars (linear µs per step), a table of every kernel and the selected kernel's nodes and code."""

    kernel_selected = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[dict] = []
        self.plot = plots.BarChart("kernels", "Each compiled kernel vs the eager ops it replaced (total time"
                                   " per step)", "µs per step (linear)", value_text=plots.fmt_us)
        self.plot.barClicked.connect(lambda row, _s: self.select(row))
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.currentCellChanged.connect(lambda r, _c, _pr, _pc: self.select(r))
        self.detail = QLabel("Select a kernel to see its graph nodes and source lines.")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.detail.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.graph = PostGradGraph()
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.plot)
        split.addWidget(self.table)
        below = QSplitter(Qt.Orientation.Horizontal)
        below.addWidget(self.detail)
        below.addWidget(self.graph)
        below.setSizes([400, 600])
        split.addWidget(below)
        split.setSizes([330, 200, 270])
        self.split = split
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(split)

    def show_report(self, report: dict, empty_message: str,
                    graph_codes: dict | None = None) -> None:
        """Fill the plot and the table from a report (graph_codes: post-grad code per compiled graph)."""
        self.rows = kernel_rows(report)
        self.graph.set_codes(graph_codes or {})
        if self.rows:
            self.plot.set_bars([r["label"] for r in self.rows],
                               {REPLACED: [r["replaced_us"] for r in self.rows],
                                KERNEL: [r["time_us"] for r in self.rows]},
                               [f"{r['name']}\n{r['verdict']}\n{r['source']}" for r in self.rows])
        else:
            self.plot.show_message(empty_message)
        t = self.table
        t.setRowCount(len(self.rows))
        for i, r in enumerate(self.rows):
            cells = [r["name"], r["graph"], r["kind"], r["attribution"], r["time_text"],
                     f"{r['replaced_us']:.1f}", r["verdict"], r["ops"], r["source"]]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                t.setItem(i, c, item)
        t.resizeColumnsToContents()
        self.detail.setText("Select a kernel to see its graph nodes and source lines." if self.rows else "")
        self._share()

    def _share(self) -> None:
        """The plot as tall as its top 10 rows (at most 60 % of the tab), then the table, then the details."""
        total = self.split.height()
        if total <= 0 or not self.rows:
            return
        plot = min(self.plot.wanted_height(min(len(self.rows), SHOWN_ROWS)), int(total * 0.6))
        table = min(int(total * 0.25), max(total - plot - 120, 80))
        self.split.setSizes([plot, table, max(total - plot - table, 0)])

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        """Share the height again at the new size."""
        super().resizeEvent(event)
        self._share()

    def select(self, row: int) -> None:
        """Show one kernel's nodes and source code below the table (and select its row)."""
        if not 0 <= row < len(self.rows):
            return
        r = self.rows[row]
        if self.table.currentRow() != row:
            self.table.setCurrentCell(row, 0)
        lines = [f"{r['name']} ({r['kind']}, attributed by {r['attribution']}): {r['verdict']}"]
        if r["interval"]:
            lines.append(f"replaced/kernel: {r['interval']}")
        lines.append(f"replaced eager ops: {r['ops']}")
        if r["post_grad"]:
            lines.append(f"post-grad nodes: {', '.join(r['post_grad'])}")
        lines += r["code"] or ["(no source lines: attributed by the kernel's name, a guess)"]
        self.detail.setText("\n".join(lines))
        if r["graph"]:
            same = {x["name"]: x["post_grad"] for x in self.rows if x["graph"] == r["graph"]}
            self.graph.show_kernel(r["graph"], same, r["name"])
        self.kernel_selected.emit(row)
