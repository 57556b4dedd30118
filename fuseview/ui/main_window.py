"""The main window: graph view in the middle, docks around it, loading and layout off the UI thread.

The window is a view over a fuseview.session.Session: the open document, the navigation stack and the
expansion live there; background work runs on the session's job service (ui.job_bar shows it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QPointF, QSettings, Qt, Signal
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QFileDialog, QLabel, QMainWindow, QWidget

from fuseview.graph.document import ModelDocument
from fuseview.graph.geometry import Layout, group_key, node_key
from fuseview.graph.groups import Expansion, collapsed_expansion, group_scopes
from fuseview.graph.layout import layout_graph
from fuseview.graph.navigation import inner_graphs, open_inner
from fuseview.session import ORIGINAL, Session, fusion_target
from fuseview.session.jobs import JobHandle
from fuseview.session.panes import nodes_between
from fuseview.ui import dialogs, style, trace_view
from fuseview.ui.compare_view import keys_for_names
from fuseview.ui.graph_scene import BoxItem, GraphScene, is_big, layout_paths, layout_rect
from fuseview.ui.graph_view import GraphView
from fuseview.ui.inspector import Inspector
from fuseview.ui.job_bar import JobBar
from fuseview.ui.recent_files import RecentFiles
from fuseview.ui.scene_builder import SceneBuilder
from fuseview.ui.search import SearchBar, nodes_of_op
from fuseview.ui.window_menus import build_breadcrumb, build_menus
from fuseview.ui.workers import qt_job_service

# Graphs with fewer visible nodes are re-laid out on the UI thread: faster than a thread round trip.
SYNC_RELAYOUT_NODES = 1500


class MainWindow(QMainWindow):
    """fuseview's window."""

    document_shown = Signal()  # a layout of the current document is on screen (after open or re-layout)
    busy_changed = Signal(bool)
    error_shown = Signal(str)

    def __init__(
        self, settings: QSettings | None = None, expansion_mode: str = "auto", parent: QWidget | None = None
    ):
        super().__init__(parent)
        self.settings = settings if settings is not None else QSettings("fuseview", "fuseview")
        self.recent = RecentFiles(self.settings)
        self.session = Session(qt_job_service(self), expansion_mode)
        self.session.layout_extras = layout_paths  # built in the worker beside each layout
        self.session.events.pane.connect(self._draw_pane)
        self.layout_: Layout | None = None
        self.scene: GraphScene | None = None
        self.last_error = ""
        # both off for unattended runs (--screenshot): errors go to error_shown only, recent files untouched
        self.show_dialogs = True
        self.remember_files = True

        self.setWindowTitle("fuseview")
        self.resize(1400, 900)
        self.setAcceptDrops(True)
        self.view = GraphView(self)
        self.view.file_dropped.connect(self.request_open)
        self.view.zoom_changed.connect(lambda _s: self._update_status())
        self.setCentralWidget(self.view)
        self.builder = SceneBuilder(self.view, self.error, self)
        self.inspector = Inspector(self)
        self.inspector.inner_graph_requested.connect(self.open_inner_graph)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.inspector)
        build_breadcrumb(self)
        self.search = SearchBar(self)
        self.search.go_to.connect(self.reveal_node)
        self.search.highlight_op.connect(self.highlight_op)
        self.search.finished.connect(lambda: self.view.setFocus(Qt.FocusReason.OtherFocusReason))
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.search)
        self._build_status()
        build_menus(self)
        self._show_placeholder()
        # the fusion workbench: candidates dock, fused pane beside this view, Fusion menu, profile dock
        from fuseview.ui.workbench import Workbench

        self.workbench = Workbench(self)
        self.profile_panel = self.workbench.profile_panel
        # after the workbench's: it takes the new model first, then the window draws it
        self.session.events.document.connect(self._opened)
        self.session.events.open_failed.connect(lambda e: self.error(e.title, e.error))
        self.session.events.navigated.connect(self._show_inner)
        self._relayout_then = None
        self.session.events.relaid.connect(self._session_relaid)
        # the one writer of the status line: views say things through session.set_status
        self.session.events.status.connect(lambda e: self.show_status(e.text, e.timeout_ms))
        self.refit: Callable[[], None] = lambda: None  # place the opened graph again (set when opened)

    # the session's state, as the window's views read it ------------------------------------------
    @property
    def doc(self) -> ModelDocument | None:
        """The graph on screen: the model's, or a body/function in it."""
        return self.session.doc

    @property
    def nav_stack(self) -> list:
        """Where we came from while an inner graph is open (fuseview.session.NavEntry each)."""
        return self.session.nav_stack

    @property
    def expanded(self) -> Expansion:
        """The open scopes of the graph on screen (None: flat)."""
        return self.session.expanded

    @property
    def expansion_mode(self) -> str:
        """How a newly opened graph starts: auto, flat or collapsed."""
        return self.session.expansion_mode

    @expansion_mode.setter
    def expansion_mode(self, mode: str) -> None:
        self.session.expansion_mode = mode

    def _draw_pane(self, event) -> None:
        if event.role == ORIGINAL and self.scene is not None:
            self.scene.draw_part(event.part, event.state)

    # construction ---------------------------------------------------------------------------------
    def _build_status(self) -> None:
        bar = self.statusBar()
        self.counts_label = QLabel("")
        bar.addWidget(self.counts_label, 1)
        self.jobs = JobBar(self.session.jobs, bar, self)
        self.jobs.busy_changed.connect(self.busy_changed.emit)
        self.jobs.busy_changed.connect(lambda _busy: self.doc is None and self._show_placeholder())
        self.progress, self.cancel_button = self.jobs.progress, self.jobs.cancel_button
        self.cancel_button.clicked.connect(lambda: self.cancel_job())

    def show_status(self, text: str, timeout_ms: int = 0) -> None:
        """A status message cut at a word to fit the bar (the whole of it in the bar's tooltip)."""
        bar = self.statusBar()
        room = bar.width() - 24 - sum(w.width() for w in (self.progress, self.cancel_button) if w.isVisible())
        self.statusBar().showMessage(style.elide_words(text, bar.fontMetrics(), room), timeout_ms)
        bar.setToolTip(text)

    def _show_placeholder(self) -> None:
        busy = self.jobs.describe(stage=False)  # while the first model loads, what loads, not "Open"
        self.counts_label.setText(busy or "Open an ONNX model: File → Open (Ctrl+O) or drop a .onnx file.")

    # opening --------------------------------------------------------------------------------------
    def choose_file(self) -> None:
        """File → Open: pick an .onnx file."""
        start = str(Path(self.doc.path).parent) if self.doc and self.doc.path else ""
        path, _ = QFileDialog.getOpenFileName(
            self, "Open ONNX model", start, "ONNX models (*.onnx);;All files (*)"
        )
        if path:
            self.request_open(path)

    def request_open(self, path: str | os.PathLike) -> JobHandle | None:
        """Open a file the user picked (menu, recent list, drop): first ask about unsaved work."""
        if not self.confirm_discard(f"Open {Path(path).name}"):
            return None
        return self.open_file(path)

    def confirm_discard(self, doing: str) -> bool:
        """Save / Discard / Cancel when decisions or a fused model are unsaved; False means stop."""
        what = self.workbench.unsaved()
        if not what or not self.show_dialogs:
            return True
        answer = dialogs.ask_unsaved(
            self, "Unsaved work", f"{doing}: {' and '.join(what)} not saved. Save before going on?"
        )
        if answer == dialogs.SAVE:
            return self.workbench.save_unsaved()
        return answer == dialogs.DISCARD

    def open_file(self, path: str | os.PathLike) -> JobHandle:
        """Load and lay out a model in the background (Session.open); an error shows a dialog."""
        return self.session.open(path)

    def show_document(self, doc: ModelDocument) -> JobHandle:
        """Show an already loaded document (the command line loads before opening the window)."""
        return self.session.open(doc)

    def _opened(self, event) -> None:
        if event.laid is None:  # adopted without a layout (a caller that draws it itself)
            return
        doc, path = event.doc, str(event.doc.path or "")
        expanded, lay, paths = event.laid.expanded, event.laid.layout, event.laid.extras
        self.crumb_bar.hide()
        self.search.set_graph(doc.graph, doc.op_histogram())
        self.inspector.clear()
        title = fusion_target.label(self.session)  # 'model.onnx (float16 conversion)' while one is on show
        self.setWindowTitle(f"{title} — fuseview" if title else "fuseview")
        if path and self.remember_files:
            self.recent.remember(path)
        # The first zoom is worked out from the layout before the scene exists: fitting first and then
        # zooming in would hide and show every item of a big graph twice (overview picture in between).
        whole = layout_rect(lay)
        fit = self.view.fit_scale(whole.adjusted(-20, -20, 20, 20))
        tall = fit < 0.25  # a tall graph fitted whole is unreadable: start at its top, at a readable zoom
        self.view.preset_zoom(0.8 if tall else fit)
        placed = []

        def place() -> None:
            placed.append(True)
            if tall:
                self.view.show_top(whole, 0.8)
            elif self.scene.building:
                self.view.fit_rect(whole.adjusted(-20, -20, 20, 20))
            else:
                self.view.fit()

        def shown() -> None:
            if not placed:
                place()
            for w in doc.warnings:
                self.session.set_status(w, 10000)
            self.document_shown.emit()

        self._show_layout(expanded, lay, paths, shown)
        if not placed:
            place()  # a big graph is still being built: it fills in where the user looks
        self.refit = place  # the candidates dock may widen once the scan fills it: place the graph again

    # jobs (every one goes through session.jobs; one job per kind, a newer one replaces it) --------
    @property
    def busy(self) -> bool:
        """Whether any job (load, layout, apply) is running for this window."""
        return self.jobs.busy

    def job_running(self, kind: str) -> bool:
        """Whether a job of this kind (layout, apply) is running."""
        return bool(self.jobs.active(kind))

    def cancel_job(self, kind: str | None = None) -> None:
        """Stop the newest running job (or the one of this kind); the window keeps what it showed before."""
        if self.jobs.cancel(kind) is not None:
            self.session.set_status("Cancelled.", 5000)

    def error(self, title: str, exc: BaseException) -> str:
        """Show a failure titled by what failed (a dialog unless unattended); the window stays usable."""
        message = dialogs.error_text(exc)
        self.last_error = message
        self.session.set_status(message, 15000)
        self.error_shown.emit(message)
        if self.show_dialogs:
            dialogs.show_error(self, title, message)
        return message

    # layout and scene -----------------------------------------------------------------------------
    def _show_layout(self, expanded: Expansion, lay: Layout, paths=None, then=None) -> None:
        """Show a layout; then() runs once every item is in the scene (a big one is built in slices)."""
        old = self.scene
        keep = old.selected_keys() if old is not None and not old.building else []
        op = self.search.ops.currentData() if old is not None else ""
        self.session.expanded = expanded
        self.layout_ = lay
        state = self.session.panes[ORIGINAL]
        scene = GraphScene(self.doc.graph, lay, self, paths=paths, state=state, lazy=is_big(lay))
        scene.expand_requested.connect(self.expand_group)
        scene.collapse_requested.connect(self.collapse_group)
        scene.selectionChanged.connect(self._selection_changed)
        self.scene = scene
        self.view.setScene(scene)
        if old is not None:
            old.deleteLater()

        def finish() -> None:
            if keep:
                scene.select_keys(keep)
            if op:
                self.highlight_op(op)
            self._selection_changed()
            if then is not None:
                then()

        self.builder.build(scene, finish)

    def relayout(self, expanded: Expansion, then=None) -> None:
        """Lay out the current document again with another expansion; then() runs once it is shown."""
        if self.doc is None:
            return
        doc = self.doc
        if len(doc.graph.nodes) < SYNC_RELAYOUT_NODES:
            if self.job_running("layout"):
                self.cancel_job("layout")
            try:
                lay = layout_graph(doc.graph, expanded)
            except Exception as exc:  # noqa: BLE001
                self.error("Cannot lay out the graph", exc)
                return
            self._relaid((expanded, lay, None), then)
            return

        self._relayout_then = then  # a newer request replaces this one, and its then() with it
        self.session.relayout(expanded)

    def _session_relaid(self, event) -> None:
        then, self._relayout_then = self._relayout_then, None
        laid = event.laid
        try:
            self._relaid((laid.expanded, laid.layout, laid.extras), then)
        except Exception as exc:  # noqa: BLE001 - a drawing failure must not take the window down
            self.error("Cannot lay out the graph", exc)

    def _relaid(self, result, then) -> None:
        expanded, lay, paths = result

        def shown() -> None:
            if then is not None:
                then()
            self.document_shown.emit()

        self._show_layout(expanded, lay, paths, shown)

    def _anchor(self, item) -> tuple[QPointF, QPointF] | None:
        if item is None:
            return None
        r = item.sceneBoundingRect()
        top = QPointF(r.center().x(), r.top())
        return top, self.view.mapFromScene(top).toPointF()

    def _keep_anchor(self, anchor, new_key: str) -> None:
        if anchor is None or self.scene is None:
            return
        item = self.scene.boxes.get(new_key) or self.scene.frames.get(new_key)
        if item is None:
            return
        r = item.sceneBoundingRect()
        self.view.keep_at(QPointF(r.center().x(), r.top()), anchor[1])

    def current_open(self) -> set:
        """Scopes open in the current expansion (every scope when flat)."""
        if self.expanded is not None:
            return set(self.expanded)
        # flat: every scope is open
        opened = {()}
        for scope in set(group_scopes(self.doc.graph)):
            for k in range(1, len(scope) + 1):
                opened.add(scope[:k])
        return opened

    def expand_group(self, scope: tuple) -> None:
        """Open a collapsed group, keeping it where it was on screen."""
        if self.doc is None:
            return
        key = group_key(tuple(scope))
        anchor = self._anchor(self.scene.boxes.get(key) if self.scene else None)
        opened = self.current_open() | {tuple(scope[:k]) for k in range(len(scope) + 1)}
        self.relayout(frozenset(opened), lambda: self._keep_anchor(anchor, key))

    def collapse_group(self, scope: tuple) -> None:
        """Close an expanded group (and every group inside it), keeping it where it was on screen."""
        if self.doc is None or not scope:
            return
        scope = tuple(scope)
        key = group_key(scope)
        anchor = self._anchor(self.scene.frames.get(key) if self.scene else None)
        opened = {s for s in self.current_open() if s[: len(scope)] != scope}
        self.relayout(frozenset(opened), lambda: self._keep_anchor(anchor, key))

    def expand_all(self) -> None:
        """Show every node (flat layout)."""
        if self.doc is not None:
            self.relayout(None, self.view.fit)

    def collapse_all(self) -> None:
        """Group nodes by name scope."""
        if self.doc is not None:
            self.relayout(collapsed_expansion(self.doc.graph), self.view.fit)

    def _selected_boxes(self) -> list[BoxItem]:
        return [it for it in self.scene.selectedItems() if isinstance(it, BoxItem)] if self.scene else []

    def expand_selected(self) -> None:
        """Expand the selected group box."""
        for it in self._selected_boxes():
            if it.box.kind == "group":
                self.expand_group(tuple(it.box.scope))
                return

    def collapse_selected(self) -> None:
        """Collapse the group that holds the selected node (or the selected frame's group)."""
        for it in self._selected_boxes():
            if it.box.scope and it.box.kind == "node":
                self.collapse_group(tuple(it.box.scope))
                return
            if it.box.kind == "group" and len(it.box.scope) > 1:
                self.collapse_group(tuple(it.box.scope[:-1]))
                return

    # inner graphs -----------------------------------------------------------------------------------
    def open_selected_inner(self) -> None:
        """Open the first inner graph (body or local function) of the selected node."""
        for it in self._selected_boxes():
            if it.box.kind == "node" and it.box.node is not None and self.doc is not None:
                found = inner_graphs(self.doc, it.box.node)
                if found:
                    self.open_inner_graph(it.box.node, found[0][1])
                    return
        self.session.set_status("The selected node has no subgraph or local function.", 5000)

    def open_inner_graph(self, node_index: int, key: str) -> None:
        """Show a body of a node (key 'sub:<attr>') or a local function ('fn:<domain:name>') as the graph."""
        if self.doc is None:
            return
        try:
            inner = open_inner(self.doc, node_index if node_index >= 0 else None, key)
        except Exception as exc:  # noqa: BLE001
            self.error("Cannot open the inner graph", exc)
            return
        if key.startswith("fn:"):
            label = f"function {key[3:]}"
        else:
            label = f"{self.doc.graph.nodes[node_index].name} ▸ {key[4:]}"
        self.session.enter(label, inner)  # navigated: _show_inner draws it

    def go_up(self) -> None:
        """Back to the graph that holds the inner graph on screen."""
        self.session.go_up()

    def _show_inner(self, event) -> None:
        doc, expanded = event.doc, event.expanded
        self.search.set_graph(doc.graph, doc.op_histogram())
        self.inspector.clear()
        path = " ▸ ".join(self.session.path_labels())
        self.crumb_label.setText(f"  Graph: {path}   ")
        self.crumb_bar.setVisible(bool(self.nav_stack))
        self.relayout(expanded, self.view.fit)

    def open_function(self, key: str) -> None:
        """Open a local function of the model (from the main graph)."""
        while self.nav_stack:  # functions belong to the model: open them from the main graph
            self.go_up()
        self.open_inner_graph(-1, f"fn:{key}")

    # selection, search, highlight -----------------------------------------------------------------
    def select_between(self) -> int:
        """Two nodes selected: select every node on a dataflow path between them; returns how many."""
        if self.scene is None or self.doc is None:
            return 0
        picked = [it for it in self._selected_boxes() if it.box.kind == "node" and it.box.node is not None]
        if len(picked) != 2:
            self.session.set_status("Select exactly two nodes to select everything between them.", 6000)
            return 0
        graph = self.doc.graph
        first, second = (graph.nodes[it.box.node].name for it in picked)
        names = nodes_between(graph, first, second)
        if not names:
            self.session.set_status("No path joins these two nodes.", 6000)
            return 0
        keys, _hidden = keys_for_names(graph, self.scene, names)  # hidden ones: their collapsed group
        self.scene.select_keys(keys)
        self.session.set_status(f"Selected {len(names)} nodes between the two.", 6000)
        return len(names)

    def clear_selection(self) -> None:
        """Esc: nothing selected, no op-type highlight."""
        if self.scene is not None:
            self.scene.clearSelection()
        self.search.choose_op("")

    def _selection_changed(self) -> None:
        if self.scene is None or self.doc is None:
            return
        boxes = self._selected_boxes()
        if len(boxes) == 1:
            self.inspector.show_box(self.doc, boxes[0].box)
        elif boxes:
            self.inspector.show_many(len(boxes))
        else:
            self.inspector.clear()
        self._update_status()

    def reveal_node(self, index: int) -> None:
        """Select and centre a node, opening the groups that hide it."""
        if self.doc is None or self.scene is None:
            return
        key = node_key(index)

        def show() -> None:
            if self.scene is not None and key in self.scene.boxes:
                self.scene.select_keys([key])
                self.view.center_on_key(key)

        if key in self.scene.boxes:
            show()
            return
        scope = group_scopes(self.doc.graph)[index]
        opened = self.current_open() | {tuple(scope[:k]) for k in range(len(scope) + 1)}
        self.relayout(frozenset(opened), show)

    def highlight_op(self, op_type: str) -> None:
        """Highlight every drawn node of op_type, and the collapsed groups that hold others."""
        if self.scene is None or self.doc is None:
            return
        if not op_type:
            self.session.set_highlight(ORIGINAL, [])
            self._update_status()
            return
        graph = self.doc.graph
        keys: list[str] = []
        hidden = 0
        groups = {tuple(b.scope): b.key for b in self.scene.layout.boxes if b.kind == "group"}
        scopes = group_scopes(graph)
        for i in nodes_of_op(graph, op_type):
            k = node_key(i)
            if k in self.scene.boxes:
                keys.append(k)
                continue
            hidden += 1
            scope = scopes[i]
            for d in range(len(scope), 0, -1):
                if scope[:d] in groups:
                    keys.append(groups[scope[:d]])
                    break
        self.session.set_highlight(ORIGINAL, keys)
        shown = len(keys) - hidden if hidden else len(keys)
        msg = f"{op_type}: {shown + hidden} nodes"
        if hidden:
            msg += f", {hidden} inside collapsed groups (highlighted)"
        self.session.set_status(msg, 10000)

    # status ---------------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Nodes of the document (as `fuseview info` counts), those drawn, boxes, edges, frames, selected."""
        if self.doc is None or self.scene is None:
            return {"nodes": 0, "drawn": 0, "boxes": 0, "edges": 0, "frames": 0, "selected": 0}
        c = self.scene.counts()
        nodes, drawn = self.doc.graph.node_counts()
        return {
            "nodes": nodes,
            "drawn": drawn,
            "boxes": c["boxes"],
            "edges": c["routes"],
            "frames": c["frames"],
            "selected": len(self._selected_boxes()),
        }

    def _update_status(self) -> None:
        if self.doc is None:
            return
        c = self.counts()
        self.counts_label.setText(
            f"{self.doc.graph.count_text()}   {c['boxes']:,} boxes   {c['edges']:,} edges   "
            f"{c['selected']} selected   zoom {self.view.scale_factor() * 100:.0f}%"
        )

    # files and window events ----------------------------------------------------------------------
    def recent_files(self) -> list[str]:
        """Recently opened files, newest first."""
        return self.recent.files()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt API
        if trace_view.trace_paths(event.mimeData()):
            event.acceptProposedAction()
            return
        self.view.dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt API
        if trace_view.handle_drop(self, event.mimeData()):
            event.acceptProposedAction()
            return
        self.view.dropEvent(event)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt API
        if not self.confirm_discard("Quit"):
            event.ignore()
            return
        self.end_jobs()
        super().closeEvent(event)

    def end_jobs(self) -> None:
        """Cancel every job, profile and trace read and wait for them (their temp folders go with them)."""
        self.session.jobs.shutdown()
        for part in (self.profile_panel, self.trace_view):  # their threads end before the window goes
            if part is not None:
                part.shutdown()
