"""The fused model's pane beside the original, and the drawn keys of named nodes."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from fuseview.graph.document import GraphDocument, ModelDocument
from fuseview.graph.geometry import Layout, group_key, node_key
from fuseview.graph.groups import group_scopes
from fuseview.graph.layout import layout_graph
from fuseview.ui.graph_scene import GraphScene, is_big
from fuseview.ui.graph_view import GraphView
from fuseview.ui.legend import Legend

PANE_TITLE_STYLE = "QLabel { background: #e8edf3; color: #1b2430; padding: 3px 8px; font-weight: bold; }"


class PaneTitle(QLabel):
    """A pane's title strip: too long, it breaks at " · " into two lines ending in "…" (the tooltip: all)."""

    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.setStyleSheet(PANE_TITLE_STYLE)
        self.setMinimumWidth(1)  # a long title must not widen the pane (the splitter halves them)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.full_text = ""
        self.details = ""
        self.set_full_text(text)

    def set_full_text(self, text: str, details: str = "") -> None:
        """Show text, elided to the width; the tooltip carries all of it and details."""
        self.full_text, self.details = text, details
        self._elide()

    def _elide(self) -> None:
        room = max(10, self.contentsRect().width() - 16)
        fm = self.fontMetrics()
        shown = fm.elidedText(self.full_text, Qt.TextElideMode.ElideRight, room)
        if shown != self.full_text and " · " in self.full_text:  # two lines, broken at a " · ", each elided
            head, tail = self.full_text.split(" · ", 1)
            shown = "\n".join(fm.elidedText(t, Qt.TextElideMode.ElideRight, room) for t in (head, tail))
        super().setText(shown)
        tip = self.full_text if shown.replace("\n", " · ") != self.full_text else ""
        self.setToolTip("\n".join(t for t in (tip, self.details) if t))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._elide()


def keys_for_names(graph: GraphDocument, scene: GraphScene, names: list[str]) -> tuple[list[str], set[tuple]]:
    """Drawn box keys of named nodes (their collapsed group's key when hidden), and the scopes hiding them."""
    keys: list[str] = []
    hidden: set[tuple] = set()
    scopes = group_scopes(graph)
    for name in names:
        idx = graph.node_by_name.get(name)
        if idx is None:
            continue
        n = graph.nodes[idx]
        if n.folded_into is not None:
            n = graph.nodes[n.folded_into]
        k = node_key(n.index)
        if k in scene.boxes:
            keys.append(k)
            continue
        scope = scopes[n.index]
        hidden.add(scope)
        for d in range(len(scope), 0, -1):
            g = group_key(scope[:d])
            if g in scene.boxes:
                keys.append(g)
                break
    return list(dict.fromkeys(keys)), hidden


class FusedPane(QWidget):
    """A titled GraphView showing the fused model (laid out like the original pane)."""

    expand_requested = Signal(tuple)
    collapse_requested = Signal(tuple)

    def __init__(self, title: str, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        self.title = PaneTitle(title)
        lay.addWidget(self.title)
        self.view = GraphView(self)
        lay.addWidget(self.view, 1)
        self.legend = Legend(self.view, "Applied fusions")
        self.doc: ModelDocument | None = None
        self.scene: GraphScene | None = None
        self.layout_: Layout | None = None

    def set_title(self, text: str, details: str = "") -> None:
        """The strip above the view (elided to fit; text and details in its tooltip)."""
        self.title.set_full_text(text, details)

    def show_layout(self, doc: ModelDocument, lay: Layout, paths=None) -> GraphScene:
        """Draw a laid-out document (replaces the previous scene)."""
        old = self.scene
        self.doc = doc
        self.layout_ = lay
        scene = GraphScene(doc.graph, lay, self, paths=paths, lazy=is_big(lay))
        scene.expand_requested.connect(self.expand_requested)
        scene.collapse_requested.connect(self.collapse_requested)
        self.scene = scene
        self.view.setScene(scene)
        if old is not None:
            old.deleteLater()
        return scene

    def relayout(self, expanded) -> GraphScene | None:
        """Lay the document out again with another expansion (synchronously: fused graphs are smaller)."""
        if self.doc is None:
            return None
        return self.show_layout(self.doc, layout_graph(self.doc.graph, expanded))

    def clear(self) -> None:
        """Show nothing."""
        self.doc = None
        self.layout_ = None
        if self.scene is not None:
            self.view.setScene(None)
            self.scene.deleteLater()
            self.scene = None
        self.legend.set_rules([])
        self.legend.set_scale(None)
