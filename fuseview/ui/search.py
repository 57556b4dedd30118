"""Find nodes by name, op type or tensor name; step through hits; highlight every node of an op type."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import QComboBox, QLabel, QLineEdit, QToolBar, QWidget

from fuseview.graph.document import GraphDocument


def find_nodes(graph: GraphDocument, query: str) -> list[int]:
    """Nodes matching a query, in node order (case-insensitive).

    A node's exact name finds that node. A query that names an op type of the graph (`softmax`)
    finds the nodes of that type; any other query finds nodes whose name, or the name of a tensor
    they read or write, contains it. Folded constants count as hits of the node they are drawn in.
    """
    q = query.strip().lower()
    if not q:
        return []
    exact = graph.node_by_name.get(query.strip())
    if exact is not None:
        n = graph.nodes[exact]
        return [n.index if n.folded_into is None else n.folded_into]
    if any(n.op_type.lower() == q for n in graph.nodes):
        return sorted(
            {
                n.index if n.folded_into is None else n.folded_into
                for n in graph.nodes
                if n.op_type.lower() == q
            }
        )
    hits: set[int] = set()
    for n in graph.nodes:
        target = n.index if n.folded_into is None else n.folded_into
        if q in n.name.lower():
            hits.add(target)
        elif any(q in t.lower() for t in n.inputs if t) or any(q in t.lower() for t in n.outputs if t):
            hits.add(target)
    return sorted(hits)


def nodes_of_op(graph: GraphDocument, op_type: str) -> list[int]:
    """Visible nodes of exactly this op type."""
    return [n.index for n in graph.nodes if n.visible and n.op_type == op_type]


class SearchBar(QToolBar):
    """Search line (Enter / F3 step through hits) and an op-type highlighter."""

    go_to = Signal(int)  # node index to reveal, select and centre
    highlight_op = Signal(str)  # '' clears the highlight
    finished = Signal()  # Enter or Esc in the search line: the graph takes the keys again
    _ALL_OPS = "Highlight op type…"

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Search", parent)
        self.setObjectName("search")
        self.setMovable(False)
        self.graph: GraphDocument | None = None
        self.hits: list[int] = []
        self.position = -1
        self._hits_for = ""
        self.edit = QLineEdit()
        self.edit.setPlaceholderText("Find node name, op type or tensor (Ctrl+F, Enter / F3 for next)")
        self.edit.setClearButtonEnabled(True)
        self.edit.setMinimumWidth(320)
        self.edit.returnPressed.connect(self._enter)
        self.edit.installEventFilter(self)
        self.edit.textChanged.connect(self._text_changed)
        self.addWidget(self.edit)
        self.count_label = QLabel("")
        self.count_label.setMinimumWidth(90)
        self.count_label.setContentsMargins(8, 0, 8, 0)
        self.addWidget(self.count_label)
        self.addAction("◀", self.previous_hit).setToolTip("Previous hit (Shift+F3)")
        self.addAction("▶", self.next_hit).setToolTip("Next hit (F3)")
        self.addSeparator()
        self.ops = QComboBox()
        self.ops.setMinimumWidth(200)
        self.ops.setToolTip("Highlight every node of one op type")
        self.ops.currentIndexChanged.connect(self._op_chosen)
        self.addWidget(self.ops)
        self.set_graph(None)

    def set_graph(self, graph: GraphDocument | None, op_counts: dict[str, int] | None = None) -> None:
        """Search in this graph (None: nothing loaded)."""
        self.graph = graph
        self.hits, self.position, self._hits_for = [], -1, ""
        self.count_label.setText("")
        self.ops.blockSignals(True)
        self.ops.clear()
        self.ops.addItem(self._ALL_OPS, "")
        for op, c in (op_counts or {}).items():
            self.ops.addItem(f"{op} ({c})", op)
        self.ops.blockSignals(False)
        self.setEnabled(graph is not None)

    def focus(self) -> None:
        """Put the cursor in the search line with its text selected."""
        self.edit.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.edit.selectAll()

    def _enter(self) -> None:
        self.next_hit()
        self.finished.emit()

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        """Esc in the search line hands the keys back to the graph (the text stays for F3)."""
        if obj is self.edit and event.type() in (QEvent.Type.ShortcutOverride, QEvent.Type.KeyPress) \
                and event.key() == Qt.Key.Key_Escape:
            event.accept()
            if event.type() == QEvent.Type.KeyPress:
                self.finished.emit()
            return event.type() == QEvent.Type.KeyPress
        return super().eventFilter(obj, event)

    def _text_changed(self, _text: str) -> None:
        self._hits_for = ""
        self.count_label.setText("")

    def _refresh_hits(self) -> None:
        query = self.edit.text()
        if query != self._hits_for:
            self.hits = find_nodes(self.graph, query) if self.graph is not None else []
            self.position = -1
            self._hits_for = query

    def next_hit(self) -> None:
        """Go to the next hit (wraps around)."""
        self._step(+1)

    def previous_hit(self) -> None:
        """Go to the previous hit (wraps around)."""
        self._step(-1)

    def _step(self, direction: int) -> None:
        self._refresh_hits()
        if not self.hits:
            self.count_label.setText("no match" if self.edit.text().strip() else "")
            return
        self.position = (self.position + direction) % len(self.hits)
        self.count_label.setText(f"{self.position + 1} of {len(self.hits)}")
        self.go_to.emit(self.hits[self.position])

    def _op_chosen(self, index: int) -> None:
        self.highlight_op.emit(self.ops.itemData(index) or "")

    def choose_op(self, op_type: str) -> None:
        """Select an op type in the highlighter ('' clears)."""
        i = self.ops.findData(op_type)
        self.ops.setCurrentIndex(max(i, 0))
