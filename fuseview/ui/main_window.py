"""The main window: graph view in the middle, docks around it, loading and layout off the UI thread."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QPointF, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QProgressBar,
    QPushButton,
    QToolBar,
    QWidget,
)

from fuseview.graph.document import ModelDocument
from fuseview.graph.geometry import Layout, group_key, node_key
from fuseview.graph.layout import initial_expansion, layout_graph
from fuseview.graph.loader import load_document
from fuseview.graph.navigation import inner_graphs, open_inner
from fuseview.ui import dialogs, trace_view
from fuseview.ui.compare_view import keys_for_names
from fuseview.ui.export import render_scene
from fuseview.ui.graph_scene import BoxItem, GraphScene, layout_rect, route_paths
from fuseview.ui.graph_view import GraphView
from fuseview.ui.inspector import Inspector
from fuseview.ui.search import SearchBar, nodes_of_op
from fuseview.ui.workers import Job, JobRunner
from fuseview.view_state import nodes_between

Expansion = frozenset | None
MAX_RECENT = 10
# Graphs with fewer visible nodes are re-laid out on the UI thread: faster than a thread round trip.
SYNC_RELAYOUT_NODES = 1500
# Layouts with more items are added to the scene a slice at a time, the event loop running in between.
INCREMENTAL_ITEMS = 5000
BUILD_SLICE_S = 0.03
EXPANSION_MODES = ("auto", "flat", "collapsed")


def collapsed_expansion(doc: ModelDocument) -> frozenset:
    """'Collapse all': the initial grouping of a big graph, or only the top level of a small one."""
    return initial_expansion(doc.graph) or frozenset({()})


def expansion_for(doc: ModelDocument, mode: str) -> Expansion:
    """The expansion a newly opened document starts with: auto, flat or collapsed."""
    if mode == "flat":
        return None
    if mode == "collapsed":
        return collapsed_expansion(doc)
    return initial_expansion(doc.graph)


# the kinds of background work, one slot each (the profile panel runs its own profiling thread)
JOB_KINDS = ("layout", "apply")


@dataclass
class JobSlot:
    """A running job of one kind: what to call with its result and how to title its failure."""

    job: Job
    title: str
    on_done: Callable
    extra: tuple
    failure: str
    on_failed: Callable | None = None
    message: str = ""
    fraction: float = 0.0


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
        self.expansion_mode = expansion_mode if expansion_mode in EXPANSION_MODES else "auto"
        self.doc: ModelDocument | None = None  # the graph on screen: the model's, or a body/function in it
        # where we came from while an inner graph (If/Loop body, function) is open: (label, doc, expanded)
        self.nav_stack: list[tuple[str, ModelDocument, Expansion]] = []
        self.expanded: Expansion = None
        self.layout_: Layout | None = None
        self.scene: GraphScene | None = None
        self.last_error = ""
        # both off for unattended runs (--screenshot): errors go to error_shown only, recent files untouched
        self.show_dialogs = True
        self.remember_files = True
        self.runner = JobRunner(self)
        self._slots: dict[str, JobSlot] = {}
        self._after_layout = None  # callable run once the pending re-layout is shown

        self.setWindowTitle("fuseview")
        self.resize(1400, 900)
        self.setAcceptDrops(True)
        self.view = GraphView(self)
        self.view.file_dropped.connect(self.request_open)
        self.view.zoom_changed.connect(lambda _s: self._update_status())
        self.setCentralWidget(self.view)
        self.inspector = Inspector(self)
        self.inspector.inner_graph_requested.connect(self.open_inner_graph)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.inspector)
        self._build_breadcrumb()
        self.search = SearchBar(self)
        self.search.go_to.connect(self.reveal_node)
        self.search.highlight_op.connect(self.highlight_op)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.search)
        self._build_status()
        self._build_menus()
        self._show_placeholder()
        # the fusion workbench: candidates dock, fused pane beside this view, Fusion menu, profile dock
        from fuseview.ui.workbench import Workbench

        self.workbench = Workbench(self)
        self.profile_panel = self.workbench.profile_panel

    # construction ---------------------------------------------------------------------------------
    def _build_status(self) -> None:
        bar = self.statusBar()
        self.counts_label = QLabel("")
        bar.addWidget(self.counts_label, 1)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(240)
        self.progress.setTextVisible(True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(lambda: self.cancel_job())
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.cancel_button)
        self.progress.hide()
        self.cancel_button.hide()

    def _build_breadcrumb(self) -> None:
        # shown only while an inner graph is open: where we are, and the way back
        self.crumb_bar = QToolBar("Graph path", self)
        self.crumb_bar.setObjectName("graph_path")
        self.crumb_label = QLabel("")
        self.crumb_bar.addWidget(self.crumb_label)
        up = QAction("▲ Up", self)
        up.triggered.connect(self.go_up)
        self.crumb_bar.addAction(up)
        self.addToolBarBreak(Qt.ToolBarArea.TopToolBarArea)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.crumb_bar)
        self.crumb_bar.hide()

    def _action(self, menu: QMenu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        act = QAction(text, self)
        if shortcut is not None:
            if isinstance(shortcut, (list, tuple)):
                act.setShortcuts([QKeySequence(s) for s in shortcut])
            else:
                act.setShortcut(QKeySequence(shortcut))
        if tip:
            act.setStatusTip(tip)
        act.triggered.connect(slot)
        menu.addAction(act)
        self.addAction(act)  # shortcuts work while the menu bar is hidden too
        return act

    def _build_menus(self) -> None:
        mb = self.menuBar()
        file = mb.addMenu("&File")
        self._action(file, "&Open…", self.choose_file, QKeySequence.StandardKey.Open)
        self.recent_menu = file.addMenu("Open &Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        self.export_action = self._action(
            file, "&Export Image…", self.choose_export, "Ctrl+E", "Save the drawing as SVG or PNG"
        )
        trace_view.install(self, file)  # File → Compare Traces… (torch.profiler / onnxruntime traces)
        file.addSeparator()
        self._action(file, "&Quit", self.close, QKeySequence.StandardKey.Quit)

        view = mb.addMenu("&View")
        self._action(view, "&Find…", self.search.focus, QKeySequence.StandardKey.Find)
        self._action(view, "Find &Next", self.search.next_hit, "F3")
        self._action(view, "Find &Previous", self.search.previous_hit, "Shift+F3")
        view.addSeparator()
        self._action(view, "&Fit", self.view.fit, "F")
        self._action(view, "Zoom to &Selection", self.view.zoom_to_selection, "Z")
        self._action(view, "Zoom &In", lambda: self.view.zoom_by(1.25), ["Ctrl+=", "Ctrl++"])
        self._action(view, "Zoom &Out", lambda: self.view.zoom_by(0.8), "Ctrl+-")
        self._action(view, "Actual Si&ze", lambda: self.view.set_zoom(1.0), "Ctrl+0")
        self._action(view, "&Clear Selection", self.clear_selection, "Esc")
        self._action(
            view, "Select &Between", self.select_between, "Ctrl+B",
            "With two nodes selected: select every node on a path from one to the other",
        )
        view.addSeparator()
        self._action(view, "&Expand All", self.expand_all, "Ctrl+Shift+E", "Flat graph: every node")
        self._action(view, "&Collapse All", self.collapse_all, "Ctrl+Shift+C", "Group nodes by name scope")
        self._action(view, "Expand Selected &Group", self.expand_selected, "E")
        self._action(view, "Collapse &Parent Group", self.collapse_selected, "C")
        view.addSeparator()
        self._action(
            view, "Open &Inner Graph", self.open_selected_inner, "Ctrl+Down",
            "Open the selected node's If/Loop/Scan body or local function",
        )
        self._action(view, "Back to &Outer Graph", self.go_up, "Ctrl+Up")
        self.functions_menu = view.addMenu("Local &Functions")
        self.functions_menu.aboutToShow.connect(self._fill_functions)
        view.addSeparator()
        view.addAction(self.inspector.toggleViewAction())
        view.addAction(self.search.toggleViewAction())
        self.panels_menu = view  # later panels (candidates, profile) add their toggle actions here

    def _show_placeholder(self) -> None:
        self.counts_label.setText("Open an ONNX model: File → Open (Ctrl+O) or drop a .onnx file here.")

    # opening --------------------------------------------------------------------------------------
    def choose_file(self) -> None:
        """File → Open: pick an .onnx file."""
        start = str(Path(self.doc.path).parent) if self.doc and self.doc.path else ""
        path, _ = QFileDialog.getOpenFileName(
            self, "Open ONNX model", start, "ONNX models (*.onnx);;All files (*)"
        )
        if path:
            self.request_open(path)

    def request_open(self, path: str | os.PathLike) -> Job | None:
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

    def open_file(self, path: str | os.PathLike) -> Job:
        """Load and lay out a model in the background; errors show a dialog and keep what was open."""
        path = str(path)
        mode = self.expansion_mode

        def work(progress):
            doc = load_document(path, progress=lambda m, f: progress(m, 0.6 * f))
            progress("laying out", 0.65)
            expanded = expansion_for(doc, mode)
            lay = layout_graph(doc.graph, expanded)
            progress("drawing", 0.9)
            return doc, expanded, lay, route_paths(lay)

        return self._start(work, f"Opening {Path(path).name}", self._opened, path)

    def show_document(self, doc: ModelDocument) -> Job:
        """Show an already loaded document (the command line loads before opening the window)."""
        mode = self.expansion_mode

        def work(progress):
            progress("laying out", 0.1)
            expanded = expansion_for(doc, mode)
            lay = layout_graph(doc.graph, expanded)
            progress("drawing", 0.9)
            return doc, expanded, lay, route_paths(lay)

        return self._start(
            work, f"Laying out {doc.path.name if doc.path else 'model'}", self._opened, str(doc.path or "")
        )

    def _opened(self, result, path: str) -> None:
        doc, expanded, lay, paths = result
        if self.job_running("apply"):
            self._slots["apply"].job.cancel()  # its fused model belongs to the model being replaced
            self._end("apply")
        self.doc = doc
        self.nav_stack = []
        self.crumb_bar.hide()
        self.search.set_graph(doc.graph, doc.op_histogram())
        self.inspector.clear()
        self.setWindowTitle(f"{Path(path).name} — fuseview" if path else "fuseview")
        if path and self.remember_files:
            self._remember(path)
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
                self.statusBar().showMessage(w, 10000)
            self.document_shown.emit()

        self._show_layout(expanded, lay, paths, shown)
        if not placed:
            place()  # a big graph is still being built: it fills in where the user looks

    # jobs -----------------------------------------------------------------------------------------
    # One slot per kind of work: a new job cancels only the running job of its own kind, so collapsing a
    # group (a layout) never cancels an Apply, and each failure is titled by what failed.
    def start_job(
        self, kind: str, fn, title: str, on_done, *extra, failure: str = "", on_failed=None
    ) -> Job:
        """Run fn(progress) off the UI thread in the slot of its kind, replacing only that kind's job.

        A failure shows an error titled failure, then calls on_failed(message) when given.
        """
        if kind not in JOB_KINDS:
            raise ValueError(f"unknown job kind {kind!r}")
        old = self._slots.pop(kind, None)
        if old is not None:
            old.job.cancel()
        job = self.runner.start(
            fn, title, self._job_progress, self._job_done, self._job_failed, self._job_cancelled
        )
        self._slots[kind] = JobSlot(job, title, on_done, extra, failure or f"{title} failed", on_failed)
        self._show_progress()
        self.busy_changed.emit(True)
        return job

    def _start(self, fn, title: str, on_done, *extra) -> Job:
        failure = "Cannot open the model" if on_done == self._opened else "Cannot lay out the graph"
        return self.start_job("layout", fn, title, on_done, *extra, failure=failure)

    @property
    def busy(self) -> bool:
        """Whether any job (load, layout, apply) is running for this window."""
        return bool(self._slots)

    def job_running(self, kind: str) -> bool:
        """Whether a job of this kind (layout, apply) is running."""
        return kind in self._slots

    def _slot_of(self, job: Job) -> str | None:
        return next((k for k, slot in self._slots.items() if slot.job is job), None)

    def _show_progress(self) -> None:
        # the bar follows the newest running job; it hides when none is left
        if not self._slots:
            self.progress.hide()
            self.cancel_button.hide()
            return
        slot = list(self._slots.values())[-1]
        self.progress.setValue(int(slot.fraction * 1000))
        self.progress.setFormat(f"{slot.message or slot.title}: %p%")
        self.progress.show()
        self.cancel_button.show()

    def _end(self, kind: str) -> JobSlot:
        slot = self._slots.pop(kind)
        self._show_progress()
        if not self._slots:
            self.busy_changed.emit(False)
        return slot

    def _job_progress(self, job: Job, message: str, fraction: float) -> None:
        kind = self._slot_of(job)
        if kind is not None:
            slot = self._slots[kind]
            slot.message, slot.fraction = message, fraction
            self._show_progress()

    def _job_done(self, job: Job, result) -> None:
        kind = self._slot_of(job)
        if kind is None:
            return
        slot = self._end(kind)
        try:
            slot.on_done(result, *slot.extra)
        except Exception as exc:  # noqa: BLE001 - a drawing failure must not take the window down
            self.error(slot.failure, exc)

    def _job_failed(self, job: Job, exc: BaseException) -> None:
        kind = self._slot_of(job)
        if kind is None:
            return
        slot = self._end(kind)
        if kind == "layout":
            self._after_layout = None
        self.error(slot.failure, exc)
        if slot.on_failed is not None:
            slot.on_failed(self.last_error)

    def _job_cancelled(self, job: Job) -> None:
        kind = self._slot_of(job)
        if kind is not None:
            self._end(kind)

    def cancel_job(self, kind: str | None = None) -> None:
        """Stop the newest running job (or the one of this kind); the window keeps what it showed before."""
        if kind is None:
            kind = next(reversed(self._slots), None)
        if kind is None or kind not in self._slots:
            return
        self._slots[kind].job.cancel()  # the thread stops at its next progress report; its result is dropped
        if kind == "layout":
            self._after_layout = None
        self._end(kind)
        self.statusBar().showMessage("Cancelled.", 5000)

    def error(self, title: str, exc: BaseException) -> None:
        """Show a failure titled by what failed (a dialog unless unattended); the window stays usable."""
        message = dialogs.error_text(exc)
        self.last_error = message
        self.statusBar().showMessage(message, 15000)
        self.error_shown.emit(message)
        if self.show_dialogs:
            dialogs.show_error(self, title, message)

    # layout and scene -----------------------------------------------------------------------------
    def _show_layout(self, expanded: Expansion, lay: Layout, paths=None, then=None) -> None:
        """Show a layout; then() runs once every item is in the scene (a big one is built in slices)."""
        old = self.scene
        keep = old.selected_keys() if old is not None and not old.building else []
        op = self.search.ops.currentData() if old is not None else ""
        self.expanded = expanded
        self.layout_ = lay
        big = len(lay.boxes) + len(lay.routes) + len(lay.frames) > INCREMENTAL_ITEMS
        scene = GraphScene(self.doc.graph, lay, self, paths=paths, incremental=big)
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

        timer = getattr(self, "_build_timer", None)
        if timer is not None:
            timer.stop()  # a scene still being built was replaced: its then() never runs
        self._build_done = finish
        if not scene.building:
            self._build_step()
            return
        # Built across event-loop turns: the window keeps painting (the visible part fills in first)
        # instead of freezing for the whole build.
        if timer is None:
            timer = self._build_timer = QTimer(self)
            timer.setInterval(0)
            timer.timeout.connect(self._build_step)
        timer.start()

    def _build_step(self) -> None:
        scene = self.scene
        timer = getattr(self, "_build_timer", None)
        try:
            if scene is not None and scene.building:
                # the turn after the last slice runs before then(): Qt's queued polish of the last items
                # happens while no worker (the fusion scan starts on document_shown) competes for the GIL
                scene.build_some(BUILD_SLICE_S)
                return
            if timer is not None:
                timer.stop()
            if scene is not None:
                scene.items(self.view.visible_scene_rect())  # brings Qt's item index up to date now, too
            done, self._build_done = self._build_done, None
            if done is not None:
                done()
        except Exception as exc:  # noqa: BLE001 - a drawing failure must not take the window down
            if timer is not None:
                timer.stop()
            self._build_done = None
            self.error("Cannot show the model", exc)

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

        def work(progress):
            progress("laying out", 0.1)
            lay = layout_graph(doc.graph, expanded)
            progress("drawing", 0.9)
            return expanded, lay, route_paths(lay)

        self._start(work, "Laying out", self._relaid, then)

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
        for n in self.doc.graph.nodes:
            for k in range(1, len(n.scope) + 1):
                opened.add(n.scope[:k])
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
            self.relayout(collapsed_expansion(self.doc), self.view.fit)

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
        self.statusBar().showMessage("The selected node has no subgraph or local function.", 5000)

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
        self.nav_stack.append((label, self.doc, self.expanded))
        self._show_inner(inner, expansion_for(inner, self.expansion_mode))

    def go_up(self) -> None:
        """Back to the graph that holds the inner graph on screen."""
        if not self.nav_stack:
            return
        _label, outer, expanded = self.nav_stack.pop()
        self._show_inner(outer, expanded)

    def _show_inner(self, doc: ModelDocument, expanded: Expansion) -> None:
        self.doc = doc
        self.search.set_graph(doc.graph, doc.op_histogram())
        self.inspector.clear()
        path = " ▸ ".join(["main"] + [label for label, _d, _e in self.nav_stack])
        self.crumb_label.setText(f"  Graph: {path}   ")
        self.crumb_bar.setVisible(bool(self.nav_stack))
        self.relayout(expanded, self.view.fit)

    def _fill_functions(self) -> None:
        self.functions_menu.clear()
        root = self.nav_stack[0][1] if self.nav_stack else self.doc
        keys = sorted(root.functions) if root is not None else []
        if not keys:
            self.functions_menu.addAction("(none in this model)").setEnabled(False)
            return
        for key in keys:
            act = self.functions_menu.addAction(key)
            act.triggered.connect(lambda _=False, key=key: self._open_function(key))

    def _open_function(self, key: str) -> None:
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
            self.statusBar().showMessage("Select exactly two nodes to select everything between them.", 6000)
            return 0
        graph = self.doc.graph
        first, second = (graph.nodes[it.box.node].name for it in picked)
        names = nodes_between(graph, first, second)
        if not names:
            self.statusBar().showMessage("No path joins these two nodes.", 6000)
            return 0
        keys, _hidden = keys_for_names(graph, self.scene, names)  # hidden ones: their collapsed group
        self.scene.select_keys(keys)
        self.statusBar().showMessage(f"Selected {len(names)} nodes between the two.", 6000)
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
        scope = self.doc.graph.nodes[index].scope
        opened = self.current_open() | {tuple(scope[:k]) for k in range(len(scope) + 1)}
        self.relayout(frozenset(opened), show)

    def highlight_op(self, op_type: str) -> None:
        """Highlight every drawn node of op_type, and the collapsed groups that hold others."""
        if self.scene is None or self.doc is None:
            return
        if not op_type:
            self.scene.set_highlight([])
            self._update_status()
            return
        graph = self.doc.graph
        keys: list[str] = []
        hidden = 0
        groups = {tuple(it.box.scope): k for k, it in self.scene.boxes.items() if it.box.kind == "group"}
        for i in nodes_of_op(graph, op_type):
            k = node_key(i)
            if k in self.scene.boxes:
                keys.append(k)
                continue
            hidden += 1
            scope = graph.nodes[i].scope
            for d in range(len(scope), 0, -1):
                if scope[:d] in groups:
                    keys.append(groups[scope[:d]])
                    break
        self.scene.set_highlight(keys)
        shown = len(keys) - hidden if hidden else len(keys)
        msg = f"{op_type}: {shown + hidden} nodes"
        if hidden:
            msg += f", {hidden} inside collapsed groups (highlighted)"
        self.statusBar().showMessage(msg, 10000)

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

    # files ----------------------------------------------------------------------------------------
    def recent_files(self) -> list[str]:
        """Recently opened files, newest first."""
        value = self.settings.value("recent", [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in (value or [])]

    def _remember(self, path: str) -> None:
        p = str(Path(path).resolve())
        files = [p] + [f for f in self.recent_files() if f != p]
        self.settings.setValue("recent", files[:MAX_RECENT])
        self.settings.sync()

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        files = self.recent_files()
        if not files:
            self.recent_menu.addAction("(none)").setEnabled(False)
            return
        for i, f in enumerate(files):
            act = self.recent_menu.addAction(f"&{i + 1 if i < 9 else 0}  {Path(f).name}  —  {Path(f).parent}")
            act.triggered.connect(lambda _=False, f=f: self.request_open(f))
        self.recent_menu.addSeparator()
        self.recent_menu.addAction("Clear list", lambda: self.settings.setValue("recent", []))

    def choose_export(self) -> None:
        """File → Export Image: the whole drawing as SVG or PNG."""
        if self.scene is None:
            return
        stem = Path(self.doc.path).stem if self.doc and self.doc.path else "graph"
        path, _ = QFileDialog.getSaveFileName(self, "Export image", f"{stem}.svg", "SVG (*.svg);;PNG (*.png)")
        if not path:
            return
        try:
            info = render_scene(self.scene, path)
        except Exception as exc:  # noqa: BLE001
            self.error("Cannot export", exc)
            return
        self.statusBar().showMessage(f"Wrote {path} ({info['width']}×{info['height']})", 8000)

    # window events --------------------------------------------------------------------------------
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
        self.runner.shutdown()
        if self.trace_view is not None:
            self.trace_view.shutdown()
        if self.profile_panel is not None and hasattr(self.profile_panel, "shutdown"):
            self.profile_panel.shutdown()  # its profile thread must end before the window goes
        super().closeEvent(event)
