"""The workbench's two panes kept in step: a selection in one selects its counterparts in the other (and
scrolls them into view), and scrolling or zooming one moves the other to the same place."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF

from fuseview.session import FUSED
from fuseview.ui.compare_view import keys_for_names
from fuseview.ui.graph_scene import BoxItem, GraphScene


class PaneLinks:
    """Linked selection and viewports of the original and fused panes (a part of Workbench)."""

    # linked selection -----------------------------------------------------------------------------
    def _original_selection(self) -> None:
        scene = self.win.scene
        if scene is None or not self._on_root():
            return
        names = [
            self.root_doc.graph.nodes[it.box.node].name
            for it in scene.selectedItems()
            if isinstance(it, BoxItem) and it.box.kind == "node" and it.box.node is not None
        ]
        self.panel.show_node(names[0] if len(names) == 1 else None)
        if len(names) == 1:
            self._inspect_fusion(names[0])
        if self._syncing or self.fused is None or self.fused_pane.scene is None:
            return
        fused_names = [f for n in names for f in self.links.to_fused.get(n, [])]
        keys, _hidden = keys_for_names(self.fused.doc.graph, self.fused_pane.scene, fused_names)
        self._syncing = True
        try:
            self.fused_pane.scene.select_keys(keys)
        finally:
            self._syncing = False

    def _inspect_fusion(self, name: str) -> None:
        d = self.decisions
        if d is None:
            return
        rows = [(cid, f"{d.status(cid)}  {d.conflict_text(cid)}".strip()) for cid in d.of_node.get(name, [])]
        if rows:
            self.win.inspector.add_section(f"Fusion candidates ({len(rows)})", rows)
        misses = d.misses_of_node.get(name, [])
        if misses:
            self.win.inspector.add_section(
                f"Near misses ({len(misses)})", [(m.rule, m.reason) for m in misses]
            )

    def _fused_selection(self) -> None:
        fscene = self.fused_pane.scene
        if self._syncing or fscene is None or self.fused is None or not self._on_root():
            return
        graph = self.fused.doc.graph
        names = [
            graph.nodes[it.box.node].name
            for it in fscene.selectedItems()
            if isinstance(it, BoxItem) and it.box.kind == "node" and it.box.node is not None
        ]
        originals = [o for n in names for o in self.links.to_original.get(n, [])]
        self.select_original(originals, reveal=True)
        boxes = [it for it in fscene.selectedItems() if isinstance(it, BoxItem)]
        if len(boxes) == 1:  # the inspector shows the fused node (its origin, rule, candidate)
            self.win.inspector.show_box(self.fused.doc, boxes[0].box)

    def select_original(self, names: list[str], reveal: bool = False) -> None:
        """Select original nodes by name in the left pane (opening the groups that hide them).

        With reveal, the left pane scrolls to them (the fused pane follows, linked).
        """
        scene = self.win.scene
        if scene is None:
            return
        keys, hidden = keys_for_names(self.root_doc.graph, scene, names)
        if hidden:
            opened = self.win.current_open()
            for s in hidden:
                opened |= {tuple(s[:k]) for k in range(len(s) + 1)}
            self.win.relayout(frozenset(opened), lambda: self.select_original(names, reveal))
            return
        self._syncing = True
        try:
            scene.select_keys(keys)
        finally:
            self._syncing = False
        if reveal and keys:
            rect = scene.keys_rect(keys)
            self.win.view.reveal_rect(rect)  # the legend steps aside (GraphView.centred_on)
        self.panel.show_node(names[0] if len(names) == 1 else None)

    def select_fused(self, names: list[str]) -> None:
        """Select fused nodes by name in the right pane and centre on the first."""
        fscene = self.fused_pane.scene
        if fscene is None or self.fused is None:
            return
        keys, hidden = keys_for_names(self.fused.doc.graph, fscene, names)
        if hidden and self._on_root():  # both panes share one expansion: open the groups in the original
            opened = self.win.current_open()
            for s in hidden:
                opened |= {tuple(s[:k]) for k in range(len(s) + 1)}
            self.win.relayout(frozenset(opened), lambda: self.select_fused(names))
            return
        fscene.select_keys(keys)
        if keys:
            self.fused_pane.view.center_on_key(keys[0])

    def select_node(self, role: str, name: str) -> None:
        """A profile bar was clicked: select that node in the matching pane."""
        if role == "fused" and self.fused is not None:
            self.select_fused([name])
            return
        graph = self.root_doc.graph if self.root_doc else None
        if graph is not None and name in graph.node_by_name:
            idx = graph.node_by_name[name]
            node = graph.nodes[idx]
            self.win.reveal_node(node.folded_into if node.folded_into is not None else idx)

    def highlight_op(self, op_type: str) -> None:
        """Highlight every node of an op type in both panes."""
        self.win.highlight_op(op_type)
        fscene = self.fused_pane.scene
        if fscene is not None and self.fused is not None:
            graph = self.fused.doc.graph
            names = [n.name for n in graph.nodes if n.visible and n.op_type == op_type]
            self.session.set_highlight(FUSED, keys_for_names(graph, fscene, names)[0])

    # the viewports in step ------------------------------------------------------------------------
    def _follow(self, src) -> None:
        if self._syncing or self.fused is None or self.fused_pane.scene is None or self.win.scene is None:
            return
        if not (self.fused_pane.isVisible() and self.splitter.widget(0).isVisible()):
            return
        left = src is self.win.view
        dst = self.fused_pane.view if left else self.win.view
        sscene = self.win.scene if left else self.fused_pane.scene
        dscene = self.fused_pane.scene if left else self.win.scene
        sgraph = self.root_doc.graph if left else self.fused.doc.graph
        dgraph = self.fused.doc.graph if left else self.root_doc.graph
        mapping = self.links.to_fused if left else self.links.to_original
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
