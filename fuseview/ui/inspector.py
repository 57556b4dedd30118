"""Inspector dock: everything about the selected box (op, attributes, tensors, folded weights)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import numpy_helper
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QDockWidget, QTreeWidget, QTreeWidgetItem, QWidget

from fuseview.graph.document import GraphDocument, ModelDocument, Node
from fuseview.graph.geometry import Box
from fuseview.graph.groups import group_scopes
from fuseview.graph.navigation import inner_graphs

_PREVIEW_VALUES = 8


def weight_preview(doc: ModelDocument, name: str) -> str:
    """The first values of an initializer or folded Constant, when its data is inside the file."""
    proto = _tensor_proto(doc, name)
    if proto is None:
        return ""
    if proto.data_location == onnx.TensorProto.EXTERNAL:
        return "(external data, not read)"
    try:
        arr = numpy_helper.to_array(proto)
    except Exception as exc:  # noqa: BLE001 - a preview is optional; say why it is missing
        return f"(cannot decode: {type(exc).__name__})"
    if arr.size == 0:
        return "(empty)"
    flat = arr.reshape(-1)[:_PREVIEW_VALUES]
    if np.issubdtype(flat.dtype, np.floating):
        vals = ", ".join(f"{float(v):.4g}" for v in flat)
    else:
        vals = ", ".join(str(v) for v in flat.tolist())
    more = ", …" if arr.size > _PREVIEW_VALUES else ""
    return f"[{vals}{more}]"


def _tensor_proto(doc: ModelDocument, name: str) -> onnx.TensorProto | None:
    cache = getattr(doc, "_fuseview_init_index", None)
    if cache is None:
        cache = {t.name: t for t in doc.model.graph.initializer}
        doc._fuseview_init_index = cache  # type: ignore[attr-defined]  # per-document lookup cache
    if name in cache:
        return cache[name]
    t = doc.graph.tensors.get(name)
    if t is not None and t.producer is not None and t.producer < len(doc.model.graph.node):
        node = doc.model.graph.node[t.producer]
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    return a.t
    return None


def tensor_type(g: GraphDocument, name: str) -> str:
    """`float32 [batch, seq, 768]` for a tensor of the graph, `?` parts where unknown."""
    t = g.tensors.get(name)
    if t is None:
        return "? ?"
    return f"{t.dtype or '?'} {t.shape_text}"


def _fmt_attr(value: object) -> str:
    if isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, list) and value and all(isinstance(v, float) for v in value):
        text = "[" + ", ".join(f"{v:.6g}" for v in value) + "]"
    else:
        text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 200 else text[:200] + "…"


_INNER_ROLE = Qt.ItemDataRole.UserRole + 1


class Inspector(QDockWidget):
    """Dock showing the selected node, group, input or output."""

    inner_graph_requested = Signal(int, str)  # node index, 'sub:<attr>' or 'fn:<domain:name>'

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Inspector", parent)
        self.setObjectName("inspector")
        self.tree = QTreeWidget()
        self.tree.setColumnCount(2)
        self.tree.setHeaderLabels(["", ""])
        self.tree.setHeaderHidden(True)
        self.tree.setRootIsDecorated(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setUniformRowHeights(True)
        self.tree.setWordWrap(False)
        self.tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.tree.header().setStretchLastSection(True)
        self.tree.itemDoubleClicked.connect(self._double_clicked)
        self.setWidget(self.tree)
        self.setAllowedAreas(Qt.DockWidgetArea.LeftDockWidgetArea | Qt.DockWidgetArea.RightDockWidgetArea)
        self.setMinimumWidth(400)
        self.clear()

    def clear(self, message: str = "Select a box to inspect it.") -> None:
        """Show only a hint."""
        self.tree.clear()
        item = QTreeWidgetItem(self.tree, [message])
        item.setFirstColumnSpanned(True)

    def _section(self, title: str) -> QTreeWidgetItem:
        item = QTreeWidgetItem(self.tree, [title])
        f = QFont(item.font(0))
        f.setBold(True)
        item.setFont(0, f)
        item.setFirstColumnSpanned(True)
        item.setExpanded(True)
        return item

    def _row(self, parent: QTreeWidgetItem, *cols: str) -> QTreeWidgetItem:
        item = QTreeWidgetItem(parent, list(cols))
        for i, c in enumerate(cols):
            item.setToolTip(i, c)
        return item

    def show_box(self, doc: ModelDocument, box: Box) -> None:
        """Fill the panel for one box of the main graph's layout."""
        self.tree.clear()
        g = doc.graph
        if box.kind == "node" and box.node is not None:
            self._show_node(doc, g.nodes[box.node])
        elif box.kind in ("input", "output"):
            self._show_tensor_box(g, box)
        elif box.kind == "group":
            self._show_group(g, box)
        # long tensor names must not push dtype and shape out of sight: cap the name column
        width = max(self.tree.viewport().width(), 300)
        self.tree.resizeColumnToContents(0)
        self.tree.setColumnWidth(0, min(self.tree.columnWidth(0), int(width * 0.45)))

    def add_section(self, title: str, rows: list[tuple[str, str]]) -> None:
        """Append a section of (name, value) rows below what is shown (the workbench's fusion facts)."""
        head = self._section(title)
        for name, value in rows:
            self._row(head, name, value)

    def show_many(self, count: int) -> None:
        """Several boxes are selected."""
        self.clear(f"{count} boxes selected.")

    def _tensor_rows(self, parent: QTreeWidgetItem, g: GraphDocument, names: tuple[str, ...]) -> None:
        for name in names:
            if not name:
                self._row(parent, "(omitted)", "")
                continue
            self._row(parent, name, tensor_type(g, name))

    def _show_node(self, doc: ModelDocument, node: Node) -> None:
        g = doc.graph
        head = self._section("Node")
        self._row(head, "op type", node.op_type)
        self._row(head, "domain", node.domain or "ai.onnx")
        self._row(head, "name", node.name)
        self._row(head, "scope", "/".join(node.scope) or "(top level)")
        self._row(head, "index", str(node.index))
        for k, v in node.metadata.items():
            self._row(head, k, _fmt_attr(v))
        if node.attributes:
            attrs = self._section(f"Attributes ({len(node.attributes)})")
            for k, v in node.attributes.items():
                self._row(attrs, k, _fmt_attr(v))
        folded = set(node.folded_inputs)
        shown_in = tuple(i for i in node.inputs if i not in folded)
        ins = self._section(f"Inputs ({len(shown_in)})")
        self._tensor_rows(ins, g, shown_in)
        outs = self._section(f"Outputs ({len(node.outputs)})")
        self._tensor_rows(outs, g, node.outputs)
        if node.folded_inputs:
            weights = self._section(f"Weights and constants ({len(node.folded_inputs)})")
            for name in node.folded_inputs:
                row = self._row(weights, name, tensor_type(g, name))
                preview = weight_preview(doc, name)
                if preview:
                    self._row(row, "values", preview)
                    row.setExpanded(True)
        inner = inner_graphs(doc, node.index)
        if inner:
            subs = self._section("Inner graphs (double-click or Ctrl+Down to open)")
            for label, key in inner:
                kind, _, name = key.partition(":")
                g_inner = node.subgraphs[name] if kind == "sub" else doc.functions[name]
                row = self._row(subs, label.split(" ▸ ", 1)[1], f"{len(g_inner.nodes)} nodes")
                row.setData(0, _INNER_ROLE, (node.index, key))

    def _double_clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        target = item.data(0, _INNER_ROLE)
        if target:
            self.inner_graph_requested.emit(int(target[0]), str(target[1]))

    def _show_tensor_box(self, g: GraphDocument, box: Box) -> None:
        name = box.key.split(":", 1)[1]
        t = g.tensors.get(name)
        head = self._section("Graph input" if box.kind == "input" else "Graph output")
        self._row(head, "name", name)
        self._row(head, "dtype", (t.dtype if t else None) or "?")
        self._row(head, "shape", t.shape_text if t else "?")
        if t is not None:
            if box.kind == "input":
                self._row(head, "consumers", str(len(t.consumers)))
            elif t.producer is not None:
                self._row(head, "producer", g.nodes[t.producer].name)

    def _show_group(self, g: GraphDocument, box: Box) -> None:
        scope = tuple(box.scope)
        grouped = group_scopes(g)
        members = [n for n in g.nodes if n.visible and grouped[n.index][: len(scope)] == scope]
        head = self._section("Group")
        self._row(head, "scope", "/".join(scope))
        self._row(head, "nodes", str(len(members)))
        ops = self._section("Ops")
        for op, c in Counter(n.op_type for n in members).most_common():
            self._row(ops, op, str(c))

    def text(self) -> str:
        """All shown text, one row per line (tab-separated columns)."""
        lines: list[str] = []

        def walk(item: QTreeWidgetItem, depth: int) -> None:
            cols = [item.text(i) for i in range(item.columnCount()) if item.text(i)]
            lines.append("  " * depth + "\t".join(cols))
            for i in range(item.childCount()):
                walk(item.child(i), depth + 1)

        for i in range(self.tree.topLevelItemCount()):
            walk(self.tree.topLevelItem(i), 0)
        return "\n".join(lines)
