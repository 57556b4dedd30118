"""The trace workspace's "Compile vs ONNX" page: per source line, Inductor's kernels beside fuseview's
fusions of the capture's model.onnx (fuseview.workflows.onnx_join), lines where they disagree first."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from fuseview.units import format_us

COLUMNS = ["source line", "code", "who fuses", "eager ops", "eager µs/step", "Inductor kernels",
           "kernels µs/step", "ONNX nodes before", "after fuseview's fusions", "onnxruntime µs before",
           "µs after"]
MAX_COLUMN_PX = 230
WHO = {(True, True): "both", (True, False): "only Inductor", (False, True): "only fuseview",
       (False, False): "neither"}


class JoinPanel(QWidget):
    """A table of the per-line join, or a line saying why there is none."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.note = QLabel("A capture made with compare_compile(..., onnx=True) shows here, per source line,"
                           " what torch.compile and fuseview each fused.")
        self.note.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.note)
        lay.addWidget(self.table, 1)

    def set_rows(self, rows: list | None) -> None:
        """Show the join's rows (None: the capture has no model.onnx)."""
        rows = [r for r in rows or [] if r.kernels or r.onnx_before]
        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            cells = [f"{r.file}:{r.line}", r.code, WHO[(r.inductor_fuses, r.onnx_fuses)],
                     ", ".join(sorted(r.eager_ops)), format_us(r.eager_us), ", ".join(r.kernels),
                     format_us(r.kernel_us), ", ".join(r.onnx_before),
                     ", ".join(r.onnx_after) if r.fusions else "(no fusion)",
                     format_us(r.ort_before_us if r.node_names else None),  # '-': not profiled
                     format_us(r.ort_after_us if r.node_names else None)]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                tip = "\n".join([text, *r.fusions]) if c == 8 else text
                if c == 0 and r.modules:
                    tip += "\nin " + ", ".join(r.modules)
                item.setToolTip(tip)
                self.table.setItem(i, c, item)
        self.table.resizeColumnsToContents()
        for c in range(self.table.columnCount()):  # every column in view: long cells elide (tooltips whole)
            self.table.setColumnWidth(c, min(self.table.columnWidth(c), MAX_COLUMN_PX))
        if rows:
            self.note.setText(f"{len(rows)} source lines: lines where one compiler fuses and the other does"
                              " not first (time per step; Inductor's kernels by provenance, fuseview's"
                              " candidates of the capture's model.onnx; onnxruntime p50 per run of the"
                              " line's nodes, at the exported shapes)")
