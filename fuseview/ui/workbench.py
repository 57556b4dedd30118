"""The fusion workbench inside the main window: scan, candidates on the graph, apply, linked panes, export."""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMenu, QSplitter, QVBoxLayout, QWidget

from fuseview.dims import parse_dim_text
from fuseview.errors import FuseviewError
from fuseview.graph.document import ModelDocument
from fuseview.graph.geometry import node_key
from fuseview.graph.layout import layout_graph
from fuseview.graph.loader import document_from_model
from fuseview.graph.scopes import common_scope
from fuseview.provenance import RULE_KEY
from fuseview.runtime.report import fused_pane_title
from fuseview.ui.candidates_panel import CandidatesPanel
from fuseview.ui.compare_view import (
    FusedPane,
    Links,
    PaneTitle,
    adopt_origin_scopes,
    keys_for_names,
    link_graphs,
)
from fuseview.ui.decisions import Decisions
from fuseview.ui.graph_scene import BoxItem, GraphScene, route_paths
from fuseview.ui.legend import Legend
from fuseview.ui.pane_links import PaneLinks
from fuseview.ui.workbench_files import WorkbenchFiles
from fuseview.view_state import candidate_marks

try:  # the profile panel is written in parallel (ISSUE5_API.md); the workbench works without it
    from fuseview.ui.profile_panel import ProfilePanel
except ImportError:  # pragma: no cover - only until fuseview/ui/profile_panel.py exists
    ProfilePanel = None  # type: ignore[assignment,misc]

BOTH, ORIGINAL_ONLY, FUSED_ONLY = "both", "original", "fused"


def _scope_text(doc: ModelDocument, names: list[str]) -> str:
    scopes = [doc.graph.node(n).scope for n in names if n in doc.graph.node_by_name]
    if not scopes:
        return ""
    return "/".join(common_scope(scopes)) or "(top level)"


class Workbench(PaneLinks, WorkbenchFiles, QObject):
    """Adds the candidates dock, the fused pane, the Fusion menu and the profile dock to a MainWindow."""

    scanned = Signal()  # the candidates of the opened model are known
    ort_checked = Signal()  # the dock knows which candidates onnxruntime fuses by itself
    applied = Signal()  # the fused model is built and shown
    apply_failed = Signal(str)

    def __init__(self, win):
        super().__init__(win)
        self.win = win
        self.root_doc: ModelDocument | None = None
        self.decisions: Decisions | None = None
        self.scan = None
        self._ort_job = None
        self.scan_seconds = 0.0
        self.fused: dict | None = None  # model, doc, links, applied ids, validation, notes, saved
        self._saved_decisions: dict = {}  # the decisions as last saved (or opened) as a plan
        self.links = Links()
        self.heat: dict | None = None
        self._scan_job = None
        self._seen_scene: GraphScene | None = None
        self._fused_expanded = None
        self._syncing = False
        self._build_panes()
        self.panel = CandidatesPanel(win)
        # candidates on top, the inspector below them, both on the right
        win.removeDockWidget(win.inspector)
        win.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.panel)
        win.splitDockWidget(self.panel, win.inspector, Qt.Orientation.Vertical)
        win.inspector.show()
        self.panel.candidate_selected.connect(self.focus_candidate)
        self.panel.changed.connect(self._decisions_changed)
        self.panel.apply_requested.connect(self.apply)
        self.profile_panel = ProfilePanel(win) if ProfilePanel is not None else None
        if self.profile_panel is not None:
            win.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.profile_panel)
            self.profile_panel.nodeActivated.connect(self.select_node)
            self.profile_panel.opTypeActivated.connect(self.highlight_op)
            self.profile_panel.heatmapChanged.connect(self.set_heatmap)
            self.profile_panel.profileFinished.connect(self._profiled)
            self.profile_panel.hide()  # shown after Apply, by --profile, or from the View menu
        self._build_actions()
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
            v.horizontalScrollBar().valueChanged.connect(lambda _v, v=v: self._follow(v))
            v.verticalScrollBar().valueChanged.connect(lambda _v, v=v: self._follow(v))
            v.zoom_changed.connect(lambda _s, v=v: self._follow(v))
            del other

    def _act(self, menu: QMenu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        act = QAction(text, self.win)
        if shortcut is not None:
            seqs = shortcut if isinstance(shortcut, (list, tuple)) else [shortcut]
            act.setShortcuts([QKeySequence(s) for s in seqs])
        if tip:
            act.setStatusTip(tip)
        act.triggered.connect(slot)
        menu.addAction(act)
        self.win.addAction(act)
        return act

    def _build_actions(self) -> None:
        win, p = self.win, self.panel
        mb = win.menuBar()
        file_menu = mb.actions()[0].menu()
        quit_act = file_menu.actions()[-1]
        sub = QMenu("Fusion", file_menu)
        file_menu.insertMenu(quit_act, sub)
        file_menu.insertSeparator(quit_act)
        self.save_fused_action = self._act(sub, "Save &Fused Model…", self.choose_save_fused, "Ctrl+Shift+S")
        self._act(sub, "Save &Plan…", self.choose_save_plan)
        self._act(sub, "&Open Plan…", self.choose_open_plan)
        sub.addSeparator()
        self._act(sub, "Save Profile &Report…", self.choose_save_report)
        self._act(sub, "Export Profile P&lots as PNG…", lambda: self.choose_export_plots("png"))
        self._act(sub, "Export Profile Plots as S&VG…", lambda: self.choose_export_plots("svg"))
        self.file_fusion_menu = sub

        fm = QMenu("F&usion", mb)
        mb.insertMenu(mb.actions()[-1] if len(mb.actions()) > 2 else None, fm)
        self.fusion_menu = fm
        self._act(fm, "&Next Candidate", lambda: self._step(1), "N")
        self._act(fm, "&Previous Candidate", lambda: self._step(-1), "P")
        self._act(fm, "&Accept Candidate", p.accept_current, "A")
        self._act(fm, "&Reject Candidate", p.reject_current, "R")
        self._act(fm, "Accept Whole R&ule", lambda: p.accept_rule(), "Shift+A")
        self._act(fm, "Reject Whole Ru&le", lambda: p.reject_rule(), "Shift+R")
        self._act(fm, "Accept A&ll Candidates", p.accept_all)
        fm.addSeparator()
        self._act(fm, "&Undo Decision", p.undo, QKeySequence.StandardKey.Undo)
        self._act(fm, "Re&do Decision", p.redo, ["Ctrl+Shift+Z", "Ctrl+Y"])
        fm.addSeparator()
        self.apply_action = self._act(fm, "Apply A&ccepted", self.apply, ["Ctrl+Return", "Ctrl+Enter"])
        fm.addSeparator()
        group = QActionGroup(self)
        self.mode_actions: dict[str, QAction] = {}
        for mode, text, key in (
            (BOTH, "Original and Fused Side by Side", "F7"),
            (ORIGINAL_ONLY, "Original Only", "F8"),
            (FUSED_ONLY, "Fused Only", "F9"),
        ):
            a = self._act(fm, text, lambda _=False, m=mode: self.set_pane_mode(m), key)
            a.setCheckable(True)
            group.addAction(a)
            self.mode_actions[mode] = a
        self.mode_actions[BOTH].setChecked(True)
        self.pane_mode = BOTH
        win.panels_menu.addAction(p.toggleViewAction())
        if self.profile_panel is not None:
            win.panels_menu.addAction(self.profile_panel.toggleViewAction())

    # opening and scanning -------------------------------------------------------------------------
    def _root(self) -> ModelDocument | None:
        stack = getattr(self.win, "nav_stack", None)
        return stack[0][1] if stack else self.win.doc

    def _on_root(self) -> bool:
        return self.win.doc is not None and self.win.doc is self._root()

    def _shown(self) -> None:
        root = self._root()
        if root is not self.root_doc:
            self._new_document(root)
        scene = self.win.scene
        if scene is not self._seen_scene and scene is not None:
            self._seen_scene = scene
            scene.selectionChanged.connect(self._original_selection)
            scene.context_hook = self._context_menu
            self._paint_original()
            if self.fused is not None and self._on_root() and self.win.expanded != self._fused_expanded:
                self._relayout_fused()
            self._apply_heat()

    def _new_document(self, doc: ModelDocument | None) -> None:
        self.root_doc = doc
        self.decisions = None
        self._saved_decisions = {}
        self.scan = None
        if self._ort_job is not None:
            self._ort_job.cancel()
            self._ort_job = None
        self._clear_fused()
        self.panel.set_decisions(None)
        self.legend.set_rules([])
        self.heat = None
        self.legend.set_scale(None)
        if self.profile_panel is not None and doc is not None:
            self.profile_panel.set_models(doc.path if doc.path else doc.model, None)
        if doc is None:
            return
        model, base = doc.model, (doc.path.parent if doc.path else None)
        path = str(doc.path) if doc.path else None

        def work(progress):
            from fuseview.fusion.scan import scan_model

            progress("scanning for fusion candidates", 0.1)
            t0 = time.perf_counter()
            result = scan_model(model, base_dir=base, path=path)
            return result, time.perf_counter() - t0

        if self._scan_job is not None:
            self._scan_job.cancel()
        self.win.statusBar().showMessage("Scanning for fusion candidates…")
        self._scan_job = self.win.runner.start(work, "scan", None, self._scan_done, self._scan_failed, None)

    def _scan_done(self, job, result) -> None:
        if job is not self._scan_job:
            return
        self._scan_job = None
        scan, seconds = result
        doc = self.root_doc
        if doc is None:
            return
        self.scan, self.scan_seconds = scan, seconds
        self.decisions = Decisions(scan, str(doc.path) if doc.path else None)
        self._saved_decisions = self._decision_snapshot()
        scopes = {c.id: _scope_text(doc, c.nodes) for c in scan.candidates}
        self.panel.set_decisions(self.decisions, scopes)
        self._paint_original()
        self.win.statusBar().showMessage(
            f"{len(scan.candidates)} fusion candidates, {len(scan.near_misses)} near misses "
            f"(scan {seconds * 1000:.0f} ms)",
            10000,
        )
        self.scanned.emit()
        self._start_ort_check(doc, scan)

    def _start_ort_check(self, doc: ModelDocument, scan) -> None:
        """In the background: which candidates onnxruntime's own optimizer fuses anyway (dock column)."""
        model = doc.model

        def work(progress):
            from fuseview.fusion.ort_compare import compare_with_ort

            progress("asking onnxruntime which fusions it makes itself", 0.1)
            return compare_with_ort(model, scan.candidates, "all", "cpu").does_it

        if self._ort_job is not None:
            self._ort_job.cancel()
        self._ort_job = self.win.runner.start(work, "ort check", None, self._ort_done, self._ort_failed, None)

    def _ort_done(self, job, does_it) -> None:
        if job is not self._ort_job:
            return
        self._ort_job = None
        if self.scan is not None:
            self.panel.set_ort_does_it(does_it)
            self.ort_checked.emit()

    def _ort_failed(self, job, exc) -> None:
        if job is not self._ort_job:
            return
        self._ort_job = None  # the column stays empty; the scan and everything else are unaffected
        self.win.statusBar().showMessage(f"onnxruntime's own fusions unknown: {exc}", 10000)

    def _scan_failed(self, job, exc) -> None:
        if job is not self._scan_job:
            return
        self._scan_job = None
        self.win.error("Cannot scan for fusion candidates", exc)

    # the overlay ----------------------------------------------------------------------------------
    def candidate_keys(self, cid: str) -> tuple[list[str], set[tuple]]:
        """Drawn keys of a candidate's nodes in the original pane, and the scopes that hide some."""
        c = self.decisions.by_id[cid]
        return keys_for_names(self.root_doc.graph, self.win.scene, c.nodes)

    def _paint_original(self) -> None:
        scene, d = self.win.scene, self.decisions
        if scene is None:
            return
        if d is None or not self._on_root():
            scene.set_marks({})
            self.legend.set_rules([])
            return
        entries = (
            (c.rule, d.colors[c.rule], d.status(c.id), self.candidate_keys(c.id)[0]) for c in d.candidates
        )
        scene.draw_marks(candidate_marks(entries))
        counts = d.counts()
        self.legend.set_rules([(r, d.colors[r], counts[r]) for r in d.rules])
        for name, misses in d.misses_of_node.items():
            idx = self.root_doc.graph.node_by_name.get(name)
            item = scene.boxes.get(node_key(idx)) if idx is not None else None
            if item is not None:
                item.set_extra_tip("\n".join(f"Near miss {m.rule}: {m.reason}" for m in misses))
        cid = self.panel.current_id()
        if cid:
            scene.set_focus(self.candidate_keys(cid)[0])

    def _paint_fused(self) -> None:
        scene, d = self.fused_pane.scene, self.decisions
        if scene is None or d is None or self.fused is None:
            return
        graph = self.fused["doc"].graph
        entries = []
        for n in graph.nodes:
            rule = n.metadata.get(RULE_KEY)
            if rule and rule in d.colors:
                entries.append((rule, d.colors[rule], "applied", keys_for_names(graph, scene, [n.name])[0]))
        scene.draw_marks(candidate_marks(entries))
        applied = [c for c in d.candidates if c.id in self.fused["applied"]]
        per: dict[str, int] = {}
        for c in applied:
            per[c.rule] = per.get(c.rule, 0) + 1
        self.fused_pane.legend.set_rules([(r, d.colors[r], n) for r, n in per.items()])

    def _decisions_changed(self) -> None:
        self._paint_original()

    def _context_menu(self, item: BoxItem, menu: QMenu) -> None:
        d = self.decisions
        if d is None or item.box.kind != "node" or item.box.node is None or not self._on_root():
            return
        name = self.root_doc.graph.nodes[item.box.node].name
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
        if self.decisions is None:
            return
        done = self.decisions.accept(cid) if accept else self.decisions.reject(cid)
        if done:
            self.panel.refresh()
            self._decisions_changed()

    # stepping and focus ---------------------------------------------------------------------------
    def _step(self, delta: int) -> None:
        self.panel.step(delta)

    def focus_candidate(self, cid: str) -> None:
        """Outline a candidate's nodes and centre the view on them (opening groups that hide them)."""
        scene = self.win.scene
        if scene is None or self.decisions is None or not self._on_root():
            return
        if not cid:
            scene.set_focus([])
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
        scene.set_focus(self.candidate_keys(cid)[0])
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
        d, doc = self.decisions, self.root_doc
        if d is None or doc is None:
            return False
        ids = d.accepted()
        if not ids:
            self.win.statusBar().showMessage("No accepted candidates to apply.", 8000)
            return False
        scan, model = self.scan, doc.model
        expanded = self.win.expanded if self._on_root() else None
        original_graph = doc.graph

        base = doc.path.parent if doc.path else None
        try:  # the Profile dock's dims, so Apply validates on the inputs its Outputs tab will use
            dims = parse_dim_text(self.profile_panel.dims.text()) if self.profile_panel is not None else {}
        except FuseviewError as exc:
            self.win.statusBar().showMessage(f"Not applied: {exc}", 15000)
            return False

        def work(progress):
            from fuseview.fusion.pipeline import FuseOptions, build_fused

            # The one pipeline `fuseview fuse` runs: same dims, weights, checks, validation and tolerances.
            outcome = build_fused(model, scan, ids, FuseOptions(dims=dims, strict=False), base, progress)
            res, val, notes = outcome.result, outcome.validation, outcome.notes
            progress("laying out", 0.7)
            fdoc = document_from_model(res.model, types_from=original_graph)  # its tensors' types
            adopt_origin_scopes(original_graph, fdoc.graph)
            lay = layout_graph(fdoc.graph, expanded)
            progress("drawing", 0.9)
            return res, val, notes, fdoc, expanded, lay, route_paths(lay)

        self.win.start_job(
            "apply",
            work,
            "Applying",
            self._applied,
            failure="Cannot apply the fusions",
            on_failed=self.apply_failed.emit,
        )
        return True

    def _profiled(self, report: dict) -> None:
        self.panel.set_profile(report)
        if self.fused is not None:
            title = self.fused_pane.title
            self.fused_pane.set_title(fused_pane_title(report, title.full_text), title.details)

    def _applied(self, result) -> None:
        res, val, notes, fdoc, expanded, lay, paths = result
        d = self.decisions
        applied = {c.id for c in res.applied}
        d.applied = applied
        self.links = link_graphs(self.root_doc.graph, fdoc.graph)
        self.fused = {
            "model": res.model,
            "doc": fdoc,
            "applied": applied,
            "validation": val,
            "notes": notes,
            "result": res,
        }
        self._fused_expanded = expanded
        scene = self.fused_pane.show_layout(fdoc, lay, paths)
        self._hook_fused(scene)
        self._paint_fused()
        self.panel.refresh()
        self._paint_original()
        figures = self.validation_text()
        short = "not validated" if val is None else figures.split(": ", 1)[-1]
        # counted as `fuseview info` and `fuse` count them, drawn boxes apart (Constants fold into consumers)
        self.fused_pane.set_title(
            f"Fused — {fdoc.graph.count_text(self.root_doc.graph)}, {len(applied)} fusions · {short}",
            figures + ("\n" + "\n".join(notes) if notes else ""),
        )
        self.original_title.set_full_text(f"Original — {self.root_doc.graph.count_text()}")
        self.set_pane_mode(self.pane_mode)
        # the Profile dock does not open itself over the graphs: the status line says where it is
        self.fused_pane.view.setTransform(self.win.view.transform())
        self._follow(self.win.view)
        self.win.statusBar().showMessage(
            f"Applied {len(applied)} fusions: {figures}" + ("; " + "; ".join(notes) if notes else ""), 15000
        )
        if self.profile_panel is not None:
            self.profile_panel.set_models(self.root_doc.path or self.root_doc.model, res.model)
        self._apply_heat()
        self.applied.emit()

    def validation_text(self) -> str:
        """'validated on onnxruntime: max |diff| 3e-07, max rel 1e-05 over 3 input sets (ok)' or why not."""
        if self.fused is None:
            return ""
        val = self.fused["validation"]
        return "not validated" if val is None else val.headline()

    def _hook_fused(self, scene: GraphScene) -> None:
        scene.selectionChanged.connect(self._fused_selection)

    def _relayout_fused(self) -> None:
        scene = self.fused_pane.relayout(self.win.expanded)
        self._fused_expanded = self.win.expanded
        if scene is not None:
            self._hook_fused(scene)
            self._paint_fused()
            self._original_selection()
            self._follow(self.win.view)

    def _clear_fused(self) -> None:
        self.fused = None
        self.links = Links()
        self.fused_pane.clear()
        self.fused_pane.hide()
        self.original_title.hide()

    def tidy_docks(self) -> None:
        """Give the graph most of the window: a modest profile dock, a readable candidates dock."""
        win = self.win
        width = min(640, max(460, int(win.width() * 0.36)))
        win.resizeDocks([self.panel], [width], Qt.Orientation.Horizontal)
        win.resizeDocks(
            [self.panel, win.inspector], [win.height() // 2, win.height() // 3], Qt.Orientation.Vertical
        )
        if self.profile_panel is not None and self.profile_panel.isVisible():
            win.resizeDocks([self.profile_panel], [int(win.height() * 0.4)], Qt.Orientation.Vertical)

    def set_pane_mode(self, mode: str) -> None:
        """Show the original and fused panes side by side, or only one of them."""
        self.pane_mode = mode
        self.mode_actions[mode].setChecked(True)
        has_fused = self.fused is not None
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
        self.heat = values
        self._apply_heat()

    def _heat_keys(self, graph, scene: GraphScene, shares: dict[str, float]) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, v in shares.items():
            keys, _h = keys_for_names(graph, scene, [name])
            for k in keys[:1]:
                out[k] = out.get(k, 0.0) + float(v)
        return out

    def _apply_heat(self) -> None:
        panes = [(self.win.scene, self.root_doc.graph if self.root_doc else None, "original", self.legend)]
        if self.fused is not None:
            panes.append((self.fused_pane.scene, self.fused["doc"].graph, "fused", self.fused_pane.legend))
        for scene, graph, role, legend in panes:
            if scene is None or graph is None:
                continue
            if self.heat is None or not self._on_root():
                scene.set_heatmap(None)
                legend.set_scale(None)
                continue
            values = self._heat_keys(graph, scene, self.heat.get(role) or {})
            scene.set_heatmap(values)
            top = max(values.values(), default=0.0)
            legend.set_scale("Share of time (median per run)", "0%", f"{top * 100:.1f}%")
