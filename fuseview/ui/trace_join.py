"""The trace workspace's "Compile vs ONNX" page: per source line, Inductor's kernels beside fuseview's
fusions of the capture's model.onnx (fuseview.workflows.onnx_join), lines where they disagree first.

Every row is counted once: a kernel's time is split across its lines by the eager time of each line's
ops, a fused ONNX node's across its lines by the onnxruntime time of the nodes it replaced there, so the
columns add up to the totals row. The numbers come first and the text columns wrap, so the table fits a
1400 px window."""

from __future__ import annotations

from PySide6.QtWidgets import QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from fuseview.traces.display import JOIN_SPLIT as SPLIT
from fuseview.units import format_us

COLUMNS = ["source line", "who fuses", "eager µs/step", "Inductor µs/step", "ONNX µs before",
           "ONNX µs after", "eager ops", "Inductor kernels", "ONNX nodes → after fuseview's fusions"]
NUMBERS = range(2, 6)
WIDTHS = {0: 260, 1: 100, 6: 160, 7: 230}  # px; the numbers fit their text, the last column stretches
WHO = {(True, True): "both", (True, False): "only Inductor", (False, True): "only fuseview",
       (False, False): "neither"}
TIPS = {2: "eager ops' time per step on this line (their part of each kernel's replaced ops)",
        3: "Inductor kernels' time per step, each split across its lines by the eager time of each"
           " line's ops",
        4: "onnxruntime p50 per run of this line's ONNX nodes, before fuseview's fusions",
        5: "after fuseview's fusions: a fused node's time split across its lines by the time of the nodes"
           " it replaced there"}


def _cells(r) -> list[str]:
    onnx = ", ".join(r.onnx_before) or "no node"
    after = f"{onnx} → {', '.join(r.onnx_after)}" if r.fusions else f"{onnx} (no fusion)"
    return [f"{r.where}  {r.code}".strip(), WHO[(r.inductor_fuses, r.onnx_fuses)],
            format_us(r.eager_us, "µs"), format_us(r.kernel_us, "µs"),
            format_us(r.ort_before_us, "µs"), format_us(r.ort_after_us, "µs"),  # '-': not profiled
            ", ".join(sorted(r.eager_ops)), ", ".join(r.kernels), after]


def _total(rows: list) -> list[str]:
    def total(vals: list) -> str:
        have = [v for v in vals if v is not None]
        return format_us(sum(have), "µs") if have else "-"

    return ["all lines", "", total([r.eager_us for r in rows]), total([r.kernel_us for r in rows]),
            total([r.ort_before_us for r in rows]), total([r.ort_after_us for r in rows]), "", "", ""]


class JoinPanel(QWidget):
    """A table of the per-line join, or a line saying why there is none."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.note = QLabel("A capture made with compare_compile(..., onnx=True) shows here, per source line,"
                           " what torch.compile and fuseview each fused.")
        self.note.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        for c, tip in TIPS.items():
            head = self.table.horizontalHeaderItem(c)
            if head is not None:
                head.setToolTip(tip)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(True)
        self.table.verticalHeader().setVisible(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.note)
        lay.addWidget(self.table, 1)

    def set_rows(self, rows: list | None) -> None:
        """Show the join's rows and their totals (None: the capture has no model.onnx)."""
        rows = [r for r in rows or [] if r.shown]
        self.table.setRowCount(len(rows) + 1 if rows else 0)
        for i, r in enumerate(rows):
            for c, text in enumerate(_cells(r)):
                item = QTableWidgetItem(text)
                tip = "\n".join([text, *r.fusions]) if c == 8 else text
                if c == 0 and r.modules:
                    tip += "\nin " + ", ".join(r.modules)
                item.setToolTip(tip + (f"\n({SPLIT})" if c in NUMBERS else ""))
                self.table.setItem(i, c, item)
        if rows:
            for c, text in enumerate(_total(rows)):
                item = QTableWidgetItem(text)
                item.setToolTip(f"the sum of the rows above ({SPLIT})")
                self.table.setItem(len(rows), c, item)
        head = self.table.horizontalHeader()
        self.table.resizeColumnsToContents()
        for c in NUMBERS:
            head.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        for c, px in WIDTHS.items():
            self.table.setColumnWidth(c, px)
        head.setStretchLastSection(True)
        self.table.resizeRowsToContents()
        if rows:
            self.note.setText(f"{len(rows)} source lines: lines where one compiler fuses and the other does"
                              " not first (time per step; Inductor's kernels by provenance, fuseview's"
                              " fusions of the capture's model.onnx applied together, as fuseview fuse does;"
                              " onnxruntime p50 per run at the exported shapes). "
                              + SPLIT[0].upper() + SPLIT[1:] + ".")
