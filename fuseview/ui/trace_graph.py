"""The trace workspace's post-grad graph: a compiled graph drawn with fuseview's layout, each kernel's
nodes outlined in a colour of their own, the selected kernel's nodes selected and centred."""

from __future__ import annotations

from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from fuseview.colors import rule_palette
from fuseview.graph.geometry import node_key
from fuseview.graph.layout import layout_graph
from fuseview.graph.loader import document_from_model
from fuseview.traces.fx_code import GraphParser
from fuseview.traces.fx_model import fx_to_onnx
from fuseview.ui.graph_scene import GraphScene
from fuseview.ui.graph_view import GraphView

NO_CAPTURE = "Post-grad graph: open a capture (with its provenance log) and pick a kernel."
PICK = "Post-grad graph: pick a kernel in the table to draw its compiled graph."


class PostGradGraph(QWidget):
    """One compiled graph at a time; show(graph, kernels, selected) draws and selects."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.codes: dict[str, str | GraphParser] = {}
        self.title = QLabel(NO_CAPTURE)
        self.view = GraphView()
        self.scene: GraphScene | None = None
        self.graph_key: str | None = None
        self._docs: dict[str, tuple] = {}
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.title)
        lay.addWidget(self.view, 1)

    def set_codes(self, codes: dict[str, str | GraphParser]) -> None:
        """The post-grad graph code of each compiled graph ("F/C" -> code)."""
        self.codes = dict(codes)
        self._docs.clear()
        self.scene = None
        self.graph_key = None
        self.view.setScene(None)
        self.title.setText(PICK if self.codes else NO_CAPTURE)

    def show_kernel(self, graph: str, kernels: dict[str, list[str]], selected: str) -> list[str]:
        """Draw graph with each kernel's post-grad nodes marked; select the selected kernel's nodes.

        kernels: kernel name -> its post-grad node names. Returns the keys of the selected boxes."""
        code = self.codes.get(graph)
        if not code:
            self.title.setText(f"no post-grad graph logged for graph {graph}")
            return []
        if graph != self.graph_key:
            if graph not in self._docs:
                doc = document_from_model(fx_to_onnx(code, f"graph {graph}"))
                self._docs[graph] = (doc, layout_graph(doc.graph))
            doc, lay = self._docs[graph]
            self.scene = GraphScene(doc.graph, lay, self)
            self.view.setScene(self.scene)
            self.graph_key = graph
        doc, _lay = self._docs[graph]
        by_name = doc.graph.node_by_name
        palette = rule_palette()
        colors = {}
        for i, nodes in enumerate(kernels.values()):
            for n in nodes:
                if n in by_name:
                    colors[node_key(by_name[n])] = QColor(palette[i % len(palette)])
        self.scene.set_marks(colors)
        keys = [node_key(by_name[n]) for n in kernels.get(selected, []) if n in by_name]
        self.scene.set_focus(keys)
        self.scene.select_keys(keys)
        self.view.zoom_to_selection()
        self.title.setText(f"graph {graph}: {len(doc.graph.nodes)} post-grad nodes; {selected}'s {len(keys)}"
                           " selected, every kernel's nodes outlined in its own colour")
        return keys
