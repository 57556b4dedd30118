"""The workbench's two panes kept in step: a selection in one selects its counterparts in the other (and
scrolls them into view), and scrolling or zooming one moves the other to the same place."""

from __future__ import annotations

from PySide6.QtCore import QObject, QPointF, QRectF

from fuseview.session import FUSED
from fuseview.ui.compare_view import keys_for_names
from fuseview.ui.graph_scene import BoxItem, GraphScene


class PaneLinks(QObject):
    """Linked selection and viewports of the workbench's original and fused panes."""

    def __init__(self, wb) -> None:
        # a QObject child of the workbench: Qt drops a dying scene's signals to it with the window
        super().__init__(wb)
        self.wb = wb  # the Workbench: its session, panes and panels
        self._syncing = False  # one pane is following the other: its own signals are not news
        self.hold_views = False  # the panes are being fitted each on its own: neither follows the other

    # linked selection -----------------------------------------------------------------------------
    def _original_selection(self) -> None:
        scene = self.wb.win.scene
        if scene is None or not self.wb.session.on_root:
            return
        names = [
            self.wb.session.root.graph.nodes[it.box.node].name
            for it in scene.selectedItems()
            if isinstance(it, BoxItem) and it.box.kind == "node" and it.box.node is not None
        ]
        self.wb.panel.show_node(names[0] if len(names) == 1 else None)
        if len(names) == 1:
            self._inspect_fusion(names[0])
        if self._syncing or self.wb.session.fused is None or self.wb.fused_pane.scene is None:
            return
        fused_names = [f for n in names for f in self.wb.session.links.to_fused.get(n, [])]
        keys, _hidden = keys_for_names(self.wb.session.fused.doc.graph, self.wb.fused_pane.scene, fused_names)
        self._syncing = True
        try:
            self.wb.fused_pane.scene.select_keys(keys)
        finally:
            self._syncing = False

    def _inspect_fusion(self, name: str) -> None:
        d = self.wb.session.decisions
        if d is None:
            return
        rows = [
            (cid, ", ".join(t for t in (d.status(cid), d.conflict_text(cid)) if t))
            for cid in d.of_node.get(name, [])
        ]
        if rows:
            self.wb.win.inspector.add_section(f"Fusion candidates ({len(rows)})", rows)
        misses = d.misses_of_node.get(name, [])
        if misses:
            self.wb.win.inspector.add_section(
                f"Near misses ({len(misses)})", [(m.rule, m.reason) for m in misses]
            )

    def _fused_selection(self) -> None:
        fscene = self.wb.fused_pane.scene
        if self._syncing or fscene is None or self.wb.session.fused is None or not self.wb.session.on_root:
            return
        graph = self.wb.session.fused.doc.graph
        names = [
            graph.nodes[it.box.node].name
            for it in fscene.selectedItems()
            if isinstance(it, BoxItem) and it.box.kind == "node" and it.box.node is not None
        ]
        originals = [o for n in names for o in self.wb.session.links.to_original.get(n, [])]
        self.select_original(originals, reveal=True)
        boxes = [it for it in fscene.selectedItems() if isinstance(it, BoxItem)]
        if len(boxes) == 1:  # the inspector shows the fused node (its origin, rule, candidate)
            self.wb.win.inspector.show_box(self.wb.session.fused.doc, boxes[0].box)

    def select_original(self, names: list[str], reveal: bool = False) -> None:
        """Select original nodes by name in the left pane (opening the groups that hide them).

        With reveal, the left pane scrolls to them (the fused pane follows, linked).
        """
        scene = self.wb.win.scene
        if scene is None:
            return
        keys, hidden = keys_for_names(self.wb.session.root.graph, scene, names)
        if hidden:
            opened = self.wb.win.current_open()
            for s in hidden:
                opened |= {tuple(s[:k]) for k in range(len(s) + 1)}
            self.wb.win.relayout(frozenset(opened), lambda: self.select_original(names, reveal))
            return
        self._syncing = True
        try:
            scene.select_keys(keys)
        finally:
            self._syncing = False
        if reveal and keys:
            rect = scene.keys_rect(keys)
            self.wb.win.view.reveal_rect(rect)  # the legend steps aside (GraphView.centred_on)
        self.wb.panel.show_node(names[0] if len(names) == 1 else None)

    def select_fused(self, names: list[str]) -> None:
        """Select fused nodes by name in the right pane and centre on the first."""
        fscene = self.wb.fused_pane.scene
        if fscene is None or self.wb.session.fused is None:
            return
        keys, hidden = keys_for_names(self.wb.session.fused.doc.graph, fscene, names)
        if hidden and self.wb.session.on_root:  # the panes share one expansion: open the original's groups
            opened = self.wb.win.current_open()
            for s in hidden:
                opened |= {tuple(s[:k]) for k in range(len(s) + 1)}
            self.wb.win.relayout(frozenset(opened), lambda: self.select_fused(names))
            return
        fscene.select_keys(keys)
        if keys:
            self.wb.fused_pane.view.center_on_key(keys[0])

    def select_node(self, role: str, name: str) -> None:
        """A profile bar was clicked: select that node in the matching pane."""
        if role == "fused" and self.wb.session.fused is not None:
            self.select_fused([name])
            return
        graph = self.wb.session.root.graph if self.wb.session.root else None
        if graph is not None and name in graph.node_by_name:
            idx = graph.node_by_name[name]
            node = graph.nodes[idx]
            self.wb.win.reveal_node(node.folded_into if node.folded_into is not None else idx)

    def highlight_op(self, op_type: str) -> None:
        """Highlight every node of an op type in both panes."""
        self.wb.win.highlight_op(op_type)
        fscene = self.wb.fused_pane.scene
        if fscene is not None and self.wb.session.fused is not None:
            graph = self.wb.session.fused.doc.graph
            names = [n.name for n in graph.nodes if n.visible and n.op_type == op_type]
            self.wb.session.set_highlight(FUSED, keys_for_names(graph, fscene, names)[0])

    # the viewports in step ------------------------------------------------------------------------
    def _follow(self, src) -> None:
        wb = self.wb
        if self._syncing or self.hold_views or wb.session.fused is None:
            return
        if wb.fused_pane.scene is None or wb.win.scene is None:
            return
        if not (self.wb.fused_pane.isVisible() and self.wb.splitter.widget(0).isVisible()):
            return
        left = src is self.wb.win.view
        dst = self.wb.fused_pane.view if left else self.wb.win.view
        sscene = self.wb.win.scene if left else self.wb.fused_pane.scene
        dscene = self.wb.fused_pane.scene if left else self.wb.win.scene
        sgraph = self.wb.session.root.graph if left else self.wb.session.fused.doc.graph
        dgraph = self.wb.session.fused.doc.graph if left else self.wb.session.root.graph
        mapping = self.wb.session.links.to_fused if left else self.wb.session.links.to_original
        centre = src.view_center()
        s = src.scale_factor() or 1.0
        reach = 300.0 / s
        near = [
            it
            for it in sscene.items(QRectF(centre.x() - reach, centre.y() - reach, 2 * reach, 2 * reach))
            if isinstance(it, BoxItem)
        ]
        self._syncing = True
        try:
            if abs(dst.scale_factor() - s) > 1e-9:
                dst.set_zoom(s)
            for it in sorted(near, key=lambda i: (i.sceneBoundingRect().center() - centre).manhattanLength()):
                target = self._counterpart(it, sgraph, dgraph, dscene, mapping)
                if target is None:
                    continue
                at = src.mapFromScene(it.sceneBoundingRect().center())
                dst.keep_at(target.sceneBoundingRect().center(), QPointF(at))
                return
        finally:
            self._syncing = False

    @staticmethod
    def _counterpart(item: BoxItem, sgraph, dgraph, dscene: GraphScene, mapping) -> BoxItem | None:
        box = item.box
        if box.kind == "node" and box.node is not None:
            names = mapping.get(sgraph.nodes[box.node].name, [])
            keys, _h = keys_for_names(dgraph, dscene, names)
            return dscene.boxes.get(keys[0]) if keys else None
        return dscene.boxes.get(box.key)
