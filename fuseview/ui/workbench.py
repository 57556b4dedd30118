"""The fusion workbench inside the main window: scan, candidates on the graph, apply, linked panes, export."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMenu, QSplitter, QVBoxLayout, QWidget

from fuseview.dims import parse_dim_text
from fuseview.errors import FuseviewError
from fuseview.graph.document import ModelDocument
from fuseview.graph.geometry import node_key
from fuseview.graph.scopes import common_scope
from fuseview.provenance import RULE_KEY
from fuseview.session import FUSED, ORIGINAL, FusedResult, Marks, Session
from fuseview.session.exports import fused_pane_title
from fuseview.session.panes import candidate_marks
from fuseview.session.session import Laid
from fuseview.ui.candidates_panel import CandidatesPanel
from fuseview.ui.compare_view import FusedPane, PaneTitle, keys_for_names
from fuseview.ui.fusion_target_bar import FusionTargetBar
from fuseview.ui.graph_scene import BoxItem, GraphScene
from fuseview.ui.graph_view import fit_panes
from fuseview.ui.legend import Legend
from fuseview.ui.pane_links import PaneLinks
from fuseview.ui.profile_panel import ProfilePanel
from fuseview.ui.tune_dialog import TuneRunner
from fuseview.ui.window_menus import add_action
from fuseview.ui.workbench_files import WorkbenchFiles
from fuseview.ui.workspace import PlotsWorkspace

BOTH, ORIGINAL_ONLY, FUSED_ONLY = "both", "original", "fused"


def _scope_text(doc: ModelDocument, names: list[str]) -> str:
    scopes = [doc.graph.node(n).scope for n in names if n in doc.graph.node_by_name]
    if not scopes:
        return ""
    return "/".join(common_scope(scopes)) or "(top level)"


# the Profile dock's share of the window's height when it opens: the graphs keep the larger part
PROFILE_SHARE = 0.4
PANE_ROOM = 370  # px each graph pane keeps beside the candidates dock (its frame and the splitter within)


class Workbench(QObject):
    """Adds the candidates dock, the fused pane, the Fusion menu and the profile dock to a MainWindow."""

    scanned = Signal()  # the candidates of the opened model are known
    ort_checked = Signal()  # the dock knows which candidates onnxruntime fuses by itself
    applied = Signal()  # the fused model is built and shown
    apply_failed = Signal(str)

    def __init__(self, win):
        super().__init__(win)
        self.win = win
        self.session: Session = win.session
        self._seen_scene: GraphScene | None = None
        self.pane_links = PaneLinks(self)
        self.files = WorkbenchFiles(self)
        self._build_panes()
        self.panel = CandidatesPanel(win)
        # candidates on top, the inspector below them, both on the right
        win.removeDockWidget(win.inspector)
        win.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.panel)
        win.splitDockWidget(self.panel, win.inspector, Qt.Orientation.Vertical)
        win.inspector.show()
        self.panel.candidate_selected.connect(self.focus_candidate)
        self.panel.apply_requested.connect(self.apply)
        self.profile_panel = ProfilePanel(win, session=self.session)
        # the right column runs the full height: the profile dock sits under the graphs only
        win.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        win.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.profile_panel)
        self.profile_panel.visibilityChanged.connect(lambda shown: shown and self._size_profile_dock())
        self.profile_panel.nodeActivated.connect(self.pane_links.select_node)
        self.profile_panel.opTypeActivated.connect(self.pane_links.highlight_op)
        self.profile_panel.heatmapChanged.connect(self.session.set_heat)
        self.profile_panel.hide()  # shown after Apply, by --profile, or from the View menu
        self._build_actions()
        self.target_bar = FusionTargetBar(self.session)  # what the model is fused for: over the filters
        self.panel.widget().layout().insertWidget(0, self.target_bar)
        self.workspace = PlotsWorkspace(self)  # a profile's plots take the centre (View → Plots Workspace)
        events = self.session.events
        events.document.connect(lambda e: self._new_document(e.doc))
        events.scanned.connect(lambda _e: self._scan_done())
        events.scan_failed.connect(lambda e: self.win.error("Cannot scan for fusion candidates", e.error))
        events.ort_checked.connect(lambda e: self._ort_done(e.does_it))
        events.ort_failed.connect(lambda e: self._ort_failed(e.error))
        events.heat.connect(lambda _e: self._apply_heat())
        events.profiled.connect(lambda e: self._profiled(e.report))
        events.pane.connect(self._draw_pane)
        events.decisions.connect(lambda _e: self._decisions_changed())
        events.applied.connect(self._apply_done)
        events.apply_failed.connect(self._apply_failed)
        events.dims.connect(lambda e: self.profile_panel.show_dims(e.dims))
        self.profile_panel.dims.editingFinished.connect(lambda: self.take_dims("Input dims not taken"))
        win.document_shown.connect(self._shown)

    # construction ---------------------------------------------------------------------------------
    def _build_panes(self) -> None:
        win = self.win
        view = win.takeCentralWidget()
        left = QWidget()
        col = QVBoxLayout(left)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        self.original_title = PaneTitle("Original")
        col.addWidget(self.original_title)
        col.addWidget(view, 1)
        self.original_title.hide()  # only needed once there are two panes
        self.legend = Legend(view)
        self.fused_pane = FusedPane("Fused")
        self.fused_pane.expand_requested.connect(win.expand_group)
        self.fused_pane.collapse_requested.connect(win.collapse_group)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(self.fused_pane)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setStretchFactor(0, 1)
        self.splitter.setStretchFactor(1, 1)
        self.fused_pane.hide()
        win.setCentralWidget(self.splitter)
        for v, other in ((win.view, self.fused_pane.view), (self.fused_pane.view, win.view)):
            v.horizontalScrollBar().valueChanged.connect(lambda _v, v=v: self.pane_links._follow(v))
            v.verticalScrollBar().valueChanged.connect(lambda _v, v=v: self.pane_links._follow(v))
            v.zoom_changed.connect(lambda _s, v=v: self.pane_links._follow(v))
            del other

    def _add(self, menu: QMenu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        return add_action(self.win, menu, text, slot, shortcut, tip)

    def _build_actions(self) -> None:
        win, p = self.win, self.panel
        mb = win.menuBar()
        file_menu = mb.actions()[0].menu()
        quit_act = file_menu.actions()[-1]
        sub = QMenu("Fusion", file_menu)
        file_menu.insertMenu(quit_act, sub)
        file_menu.insertSeparator(quit_act)
        files = self.files
        self.save_fused_action = self._add(sub, "Save &Fused Model…", files.choose_save_fused, "Ctrl+Shift+S")
        self._add(sub, "Save &Plan…", self.files.choose_save_plan)
        self._add(sub, "&Open Plan…", self.files.choose_open_plan)
        sub.addSeparator()
        self._add(sub, "Save Profile &Report…", self.files.choose_save_report)
        self._add(sub, "Export Profile P&lots as PNG…", lambda: self.files.choose_export_plots("png"))
        self._add(sub, "Export Profile Plots as S&VG…", lambda: self.files.choose_export_plots("svg"))
        self.file_fusion_menu = sub

        fm = QMenu("F&usion", mb)
        mb.insertMenu(mb.actions()[-1] if len(mb.actions()) > 2 else None, fm)
        self.fusion_menu = fm
        self._add(fm, "&Next Candidate", lambda: self._step(1), "N")
        self._add(fm, "&Previous Candidate", lambda: self._step(-1), "P")
        self._add(fm, "&Accept Candidate", p.accept_current, "A")
        self._add(fm, "&Reject Candidate", p.reject_current, "R")
        self._add(fm, "Accept Whole R&ule", lambda: p.accept_rule(), "Shift+A")
        self._add(fm, "Reject Whole Ru&le", lambda: p.reject_rule(), "Shift+R")
        self._add(fm, "Accept A&ll Candidates", p.accept_all)
        fm.addSeparator()
        self._add(fm, "&Undo Decision", p.undo, QKeySequence.StandardKey.Undo)
        self._add(fm, "Re&do Decision", p.redo, ["Ctrl+Shift+Z", "Ctrl+Y"])
        fm.addSeparator()
        self.apply_action = self._add(fm, "Apply A&ccepted", self.apply, ["Ctrl+Return", "Ctrl+Enter"])
        self.tuner = TuneRunner(self)  # Fusion → Tune…: measured decisions
        self.tuner.install(fm)
        fm.addSeparator()
        group = QActionGroup(self)
        self.mode_actions: dict[str, QAction] = {}
        for mode, text, key in (
            (BOTH, "Original and Fused Side by Side", "F7"),
            (ORIGINAL_ONLY, "Original Only", "F8"),
            (FUSED_ONLY, "Fused Only", "F9"),
        ):
            a = self._add(fm, text, lambda _=False, m=mode: self.set_pane_mode(m), key)
            a.setCheckable(True)
            group.addAction(a)
            self.mode_actions[mode] = a
        self.mode_actions[BOTH].setChecked(True)
        self.pane_mode = BOTH
        win.panels_menu.addAction(p.toggleViewAction())
        win.panels_menu.addAction(self.profile_panel.toggleViewAction())

    # files and linked panes (ui.workbench_files, ui.pane_links) ---------------------------------------
    def save_fused(self, path) -> Path:
        """Write the fused model atomically (never over the source model)."""
        return self.session.save_fused(path)

    def save_plan(self, path) -> Path:
        """Write the decisions as a plan JSON (atomic, never over the source model)."""
        return self.session.save_plan(path)

    def open_plan(self, path) -> list[str]:
        """Apply a plan's decisions by id (one undoable step); returns the ids this model lacks."""
        return self.files.open_plan(path)

    def unsaved(self) -> list[str]:
        """What would be lost now: 'N decisions' not saved as a plan, 'the fused model' not saved."""
        return self.session.unsaved()

    def save_unsaved(self) -> bool:
        """Ask where to save each unsaved thing; True when all of it was saved."""
        return self.files.save_unsaved()

    def select_original(self, names: list[str], reveal: bool = False) -> None:
        """Select original nodes by name in the left pane (opening the groups that hide them)."""
        self.pane_links.select_original(names, reveal)

    def select_fused(self, names: list[str]) -> None:
        """Select fused nodes by name in the right pane and centre on the first."""
        self.pane_links.select_fused(names)

    def highlight_op(self, op_type: str) -> None:
        """Highlight every node of an op type in both panes."""
        self.pane_links.highlight_op(op_type)

    # opening and scanning -------------------------------------------------------------------------
    def _root(self) -> ModelDocument | None:
        return self.session.root

    def _on_root(self) -> bool:
        return self.session.on_root

    def _shown(self) -> None:
        if self.session.scan_pending:
            self.win.session.set_status("Scanning for fusion candidates…")
            self.session.start_scan()
        scene = self.win.scene
        if scene is not self._seen_scene and scene is not None:
            self._seen_scene = scene
            scene.selectionChanged.connect(self.pane_links._original_selection)
            scene.context_hook = self._context_menu
            self.paint_original()
            fused = self.session.fused
            if fused is not None and self._on_root() and self.win.expanded != fused.expanded:
                self._relayout_fused()
            self._apply_heat()

    def _new_document(self, doc: ModelDocument | None) -> None:
        self._clear_fused()
        self.panel.set_decisions(None)
        self.legend.set_rules([])
        self.legend.set_scale(None)
        if doc is not None:
            self.profile_panel.set_models(doc.path if doc.path else doc.model, None)

    def _scan_done(self) -> None:
        scan, seconds, doc = self.session.scan, self.session.scan_seconds, self.session.root
        scopes = {c.id: _scope_text(doc, c.nodes) for c in scan.candidates}
        self.panel.set_decisions(self.session.decisions, scopes)
        # the Conflicts column takes what a dock of half the window leaves while each graph pane keeps 360 px
        self.panel.widen_conflicts(min(self.win.width() // 2, self.win.width() - 2 * PANE_ROOM))
        width = min(self.panel.decide_width(), self.win.width() // 2)
        if self.panel.width() < width:  # the columns a reviewer decides by, in sight without scrolling
            self.win.resizeDocks([self.panel], [width], Qt.Orientation.Horizontal)
            QTimer.singleShot(0, self.win.refit)  # the graph pane narrowed: fitted again
        self.paint_original()
        target = self.session.scan_for
        self.win.session.set_status(
            f"{len(scan.candidates)} fusion candidates, {len(scan.near_misses)} near misses "
            f"({f'for {target.upper()}, ' if target else ''}scan {seconds * 1000:.0f} ms)",
            10000,
        )
        self.scanned.emit()
        self.session.start_ort_check()

    def _ort_done(self, does_it: dict) -> None:
        self.panel.set_ort_does_it(does_it)
        self.ort_checked.emit()

    def _ort_failed(self, exc: BaseException) -> None:
        # the column stays empty; the scan and everything else are unaffected
        self.win.session.set_status(f"onnxruntime's own fusions unknown: {exc}", 10000)

    # the overlay ----------------------------------------------------------------------------------
    def candidate_keys(self, cid: str) -> tuple[list[str], set[tuple]]:
        """Drawn keys of a candidate's nodes in the original pane, and the scopes that hide some."""
        c = self.session.decisions.by_id[cid]
        return keys_for_names(self.session.root.graph, self.win.scene, c.nodes)

    def paint_original(self) -> None:
        """Set the original pane's candidate marks, legend, near-miss tips and focus from the decisions."""
        scene, d = self.win.scene, self.session.decisions
        if scene is None:
            return
        if d is None or not self._on_root():
            self.session.set_marks(ORIGINAL, Marks())
            self.legend.set_rules([])
            return
        entries = (
            (c.rule, d.colors[c.rule], d.status(c.id), self.candidate_keys(c.id)[0]) for c in d.candidates
        )
        marks = candidate_marks(entries)
        self.session.set_marks(ORIGINAL, marks)
        counts = d.counts()
        self.legend.set_rules([(r, d.colors[r], counts[r]) for r in d.rules], len(marks.swatches))
        for name, misses in d.misses_of_node.items():
            idx = self.session.root.graph.node_by_name.get(name)
            if idx is not None:
                tip = "\n".join(f"Near miss {m.rule}: {m.reason}" for m in misses)
                scene.set_extra_tip(node_key(idx), tip)
        cid = self.panel.current_id()
        if cid:
            self.session.set_focus(ORIGINAL, self.candidate_keys(cid)[0])

    def _paint_fused(self) -> None:
        scene, d = self.fused_pane.scene, self.session.decisions
        if scene is None or d is None or self.session.fused is None:
            return
        graph = self.session.fused.doc.graph
        entries = []
        for n in graph.nodes:
            rule = n.metadata.get(RULE_KEY)
            if rule and rule in d.colors:
                entries.append((rule, d.colors[rule], "applied", keys_for_names(graph, scene, [n.name])[0]))
        self.session.set_marks(FUSED, candidate_marks(entries))
        applied = [c for c in d.candidates if c.id in self.session.fused.applied]
        per: dict[str, int] = {}
        for c in applied:
            per[c.rule] = per.get(c.rule, 0) + 1
        self.fused_pane.legend.set_rules([(r, d.colors[r], n) for r, n in per.items()])

    def _decisions_changed(self) -> None:
        self.paint_original()

    def _context_menu(self, item: BoxItem, menu: QMenu) -> None:
        d = self.session.decisions
        if d is None or item.box.kind != "node" or item.box.node is None or not self._on_root():
            return
        name = self.session.root.graph.nodes[item.box.node].name
        for cid in d.of_node.get(name, []):
            status = d.status(cid)
            menu.addAction(f"Accept {cid} ({status})", lambda cid=cid: self._decide(cid, True))
            menu.addAction(f"Reject {cid}", lambda cid=cid: self._decide(cid, False))
            menu.addAction(f"Show {cid} in the list", lambda cid=cid: self.panel.select_id(cid))
        for m in d.misses_of_node.get(name, []):
            menu.addAction(f"Near miss {m.rule}: {m.reason[:80]}").setEnabled(False)
        if not menu.isEmpty():
            menu.addSeparator()

    def _decide(self, cid: str, accept: bool) -> None:
        if self.session.decisions is None:
            return
        done = self.session.accept(cid) if accept else self.session.reject(cid)
        if done:  # the session's decisions event repaints the graph
            self.panel.refresh()

    # stepping and focus ---------------------------------------------------------------------------
    def _step(self, delta: int) -> None:
        self.panel.step(delta)

    def focus_candidate(self, cid: str) -> None:
        """Outline a candidate's nodes and centre the view on them (opening groups that hide them)."""
        scene = self.win.scene
        if scene is None or self.session.decisions is None or not self._on_root():
            return
        if not cid:
            self.session.set_focus(ORIGINAL, [])
            return
        keys, hidden = self.candidate_keys(cid)
        if hidden:
            opened = self.win.current_open()
            for s in hidden:
                opened |= {tuple(s[:k]) for k in range(len(s) + 1)}
            self.win.relayout(frozenset(opened), lambda: self._centre_focus(cid))
            return
        self._centre_focus(cid)

    def _centre_focus(self, cid: str) -> None:
        scene, view = self.win.scene, self.win.view
        self.session.set_focus(ORIGINAL, self.candidate_keys(cid)[0])
        rect = scene.focus_rect()
        if rect.isEmpty():
            return
        vis = view.visible_scene_rect()
        if view.scale_factor() < 0.35 or rect.width() > vis.width() or rect.height() > vis.height():
            view.fit_rect(rect.adjusted(-80, -80, 80, 80), max_scale=1.0)
        else:
            view.centerOn(rect.center())
        view.centred_on.emit(rect)

    # apply and the fused pane ---------------------------------------------------------------------
    def apply(self) -> bool:
        """Build the fused model from the accepted candidates in the background; False if none."""
        d, doc = self.session.decisions, self.session.root
        if d is None or doc is None:
            return False
        if not d.accepted():
            self.win.session.set_status("No accepted candidates to apply.", 8000)
            return False
        expanded = self.win.expanded if self._on_root() else None
        if not self.take_dims("Not applied"):  # Apply validates on the inputs the Outputs tab will use
            return False
        # The one pipeline `fuseview fuse` runs (session.apply): same weights, checks, validation, tolerances.
        return self.session.apply(None, expanded) is not None

    def take_dims(self, failure: str) -> bool:
        """The Profile dock's dims box into the session's dims (they feed scan, Apply and the profile)."""
        try:
            self.session.set_dims(parse_dim_text(self.profile_panel.dims.text()))
        except FuseviewError as exc:
            self.win.session.set_status(f"{failure}: {exc}", 15000)
            return False
        return True

    def _apply_done(self, event) -> None:
        try:
            self._applied(event.fused, event.extra)
        except Exception as exc:  # noqa: BLE001 - a drawing failure must not take the window down
            self.win.error("Cannot apply the fusions", exc)

    def _apply_failed(self, event) -> None:
        self.apply_failed.emit(self.win.error("Cannot apply the fusions", event.error))

    def _profiled(self, report: dict | None) -> None:
        self.panel.set_profile(report)
        if self.session.fused is not None and report is not None:
            title = self.fused_pane.title
            self.fused_pane.set_title(fused_pane_title(report, title.full_text), title.details)

    def _applied(self, fused: FusedResult, laid: Laid) -> None:
        lay, paths = laid.layout, laid.extras
        fdoc, applied, notes = fused.doc, fused.applied, fused.notes
        scene = self.fused_pane.show_layout(fdoc, lay, paths)
        self._hook_fused(scene)
        self._paint_fused()
        self.panel.refresh()
        self.paint_original()
        figures = self.validation_text()
        short = "not validated" if fused.validation is None else figures.split(": ", 1)[-1]
        if fused.validation is not None and fused.validation.precision != "float32":
            short = f"{fused.validation.precision} {short}"  # judged at its precision's tolerances
        # counted as `fuseview info` and `fuse` count them, drawn boxes apart (Constants fold into consumers)
        self.fused_pane.set_title(
            f"Fused — {fdoc.graph.count_text(self.session.root.graph)}, {len(applied)} fusions · {short}",
            "\n".join([figures, *([fused.report.floor] if fused.report and fused.report.floor else []),
                       *notes]),
        )
        self.original_title.set_full_text(f"Original — {self.session.root.graph.count_text()}")
        self.set_pane_mode(self.pane_mode)
        # the Profile dock does not open itself over the graphs: the status line says where it is
        self.fit_panes()
        self.win.session.set_status(fused.report.status_line() if fused.report else figures, 15000)
        self.profile_panel.set_models(self.session.root.path or self.session.root.model, fused.model)
        self._apply_heat()
        self.applied.emit()

    def fit_panes(self) -> None:
        """Both panes fitted at one zoom (whole, or from the top), the fused one framed on its fused nodes."""
        if self.fused_pane.scene is not None:
            fit_panes([(self.win.view, None), (self.fused_pane.view, self.fused_pane.scene.marked_rect())],
                      hold=lambda on: setattr(self.pane_links, "hold_views", on))

    def validation_text(self) -> str:
        """'validated on onnxruntime: max |diff| 3e-07, max rel 1e-05 over 3 input sets (ok)' or why not."""
        return "" if self.session.fused is None else self.session.fused.validation_text()

    def _hook_fused(self, scene: GraphScene) -> None:
        scene.state = self.session.panes[FUSED]  # the fused pane draws the session's state
        scene.selectionChanged.connect(self.pane_links._fused_selection)

    def _draw_pane(self, event) -> None:
        scene = self.fused_pane.scene
        if event.role == FUSED and scene is not None and scene.state is event.state:
            scene.draw_part(event.part, event.state)

    def _relayout_fused(self) -> None:
        scene = self.fused_pane.relayout(self.win.expanded)
        self.session.fused.expanded = self.win.expanded
        if scene is not None:
            self._hook_fused(scene)
            self._paint_fused()
            self.pane_links._original_selection()
            self.pane_links._follow(self.win.view)

    def _clear_fused(self) -> None:
        self.fused_pane.clear()
        self.fused_pane.hide()
        self.original_title.hide()

    def tidy_docks(self) -> None:
        """Give the graph most of the window: a modest profile dock, a readable candidates dock."""
        win = self.win
        width = min(max(460, int(win.width() * 0.36), self.panel.decide_width()), win.width() // 2)
        win.resizeDocks([self.panel], [width], Qt.Orientation.Horizontal)
        win.resizeDocks(
            [self.panel, win.inspector], [win.height() // 2, win.height() // 3], Qt.Orientation.Vertical
        )
        if self.profile_panel.isVisible():
            self._size_profile_dock()

    def _size_profile_dock(self) -> None:
        # shown from View → Profile, the dock would take its size hint (two thirds of the height)
        self.win.resizeDocks([self.profile_panel], [int(self.win.height() * PROFILE_SHARE)],
                             Qt.Orientation.Vertical)

    def set_pane_mode(self, mode: str) -> None:
        """Show the original and fused panes side by side, or only one of them."""
        self.pane_mode = mode
        self.mode_actions[mode].setChecked(True)
        has_fused = self.session.fused is not None
        left = self.splitter.widget(0)
        left.setVisible(mode != FUSED_ONLY or not has_fused)
        self.fused_pane.setVisible(has_fused and mode != ORIGINAL_ONLY)
        self.original_title.setVisible(has_fused)
        if has_fused and mode == BOTH:
            w = max(self.splitter.width(), 2)
            self.splitter.setSizes([w // 2, w - w // 2])

    # heat map -------------------------------------------------------------------------------------
    def set_heatmap(self, values: dict | None) -> None:
        """Colour both panes by each node's share of time ({'original': {name: share}, 'fused': …})."""
        self.session.set_heat(values)

    def _heat_keys(self, graph, scene: GraphScene, shares: dict[str, float]) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, v in shares.items():
            keys, _h = keys_for_names(graph, scene, [name])
            for k in keys[:1]:
                out[k] = out.get(k, 0.0) + float(v)
        return out

    def _apply_heat(self) -> None:
        root = self.session.root
        panes = [(self.win.scene, root.graph if root else None, ORIGINAL, self.legend)]
        if self.session.fused is not None:
            panes.append((self.fused_pane.scene, self.session.fused.doc.graph, FUSED, self.fused_pane.legend))
        for scene, graph, role, legend in panes:
            if scene is None or graph is None:
                continue
            if self.session.heat is None or not self._on_root():
                self.session.set_pane_heat(role, None)
                legend.set_scale(None)
                continue
            values = self._heat_keys(graph, scene, self.session.heat.get(role) or {})
            self.session.set_pane_heat(role, values)
            top = max(values.values(), default=0.0)
            legend.set_scale("Share of time (median per run)", "0%", f"{top * 100:.1f}%")
