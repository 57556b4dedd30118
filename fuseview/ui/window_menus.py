"""The window's File and View menus, the inner-graph breadcrumb, and the one way to add a menu action."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QLabel, QMainWindow, QMenu, QToolBar

from fuseview.ui import trace_view
from fuseview.ui.export import render_scene

Shortcut = str | QKeySequence | QKeySequence.StandardKey | Sequence[str] | None


def add_action(win: QMainWindow, menu: QMenu, text: str, slot: Callable, shortcut: Shortcut = None,
               tip: str = "") -> QAction:
    """Add an action to menu and to the window (its shortcut works while the menu bar is hidden too)."""
    act = QAction(text, win)
    if shortcut is not None:
        seqs = shortcut if isinstance(shortcut, (list, tuple)) else [shortcut]
        act.setShortcuts([QKeySequence(s) for s in seqs])
    if tip:
        act.setStatusTip(tip)
    act.triggered.connect(slot)
    menu.addAction(act)
    win.addAction(act)
    return act


def build_breadcrumb(win) -> None:
    """The path bar shown only while an inner graph is open: where we are, and the way back."""
    win.crumb_bar = QToolBar("Graph path", win)
    win.crumb_bar.setObjectName("graph_path")
    win.crumb_label = QLabel("")
    win.crumb_bar.addWidget(win.crumb_label)
    up = QAction("▲ Up", win)
    up.triggered.connect(win.go_up)
    win.crumb_bar.addAction(up)
    win.addToolBarBreak(Qt.ToolBarArea.TopToolBarArea)
    win.addToolBar(Qt.ToolBarArea.TopToolBarArea, win.crumb_bar)
    win.crumb_bar.hide()


def build_menus(win) -> None:
    """File and View menus; later panels add their toggles to win.panels_menu."""
    mb = win.menuBar()
    file = mb.addMenu("&File")
    add_action(win, file, "&Open…", win.choose_file, QKeySequence.StandardKey.Open)
    win.recent_menu = file.addMenu("Open &Recent")
    win.recent_menu.aboutToShow.connect(lambda: win.recent.fill_menu(win.recent_menu, win.request_open))
    win.export_action = add_action(
        win, file, "&Export Image…", lambda: choose_export(win), "Ctrl+E", "Save the drawing as SVG or PNG"
    )
    trace_view.install(win, file)  # File → Compare Traces… (torch.profiler / onnxruntime traces)
    file.addSeparator()
    add_action(win, file, "&Quit", win.close, QKeySequence.StandardKey.Quit)

    view = mb.addMenu("&View")
    add_action(win, view, "&Find…", win.search.focus, QKeySequence.StandardKey.Find)
    add_action(win, view, "Find &Next", win.search.next_hit, "F3")
    add_action(win, view, "Find &Previous", win.search.previous_hit, "Shift+F3")
    view.addSeparator()
    add_action(win, view, "&Fit", win.view.fit, "F")
    add_action(win, view, "Zoom to &Selection", win.view.zoom_to_selection, "Z")
    add_action(win, view, "Zoom &In", lambda: win.view.zoom_by(1.25), ["Ctrl+=", "Ctrl++"])
    add_action(win, view, "Zoom &Out", lambda: win.view.zoom_by(0.8), "Ctrl+-")
    add_action(win, view, "Actual Si&ze", lambda: win.view.set_zoom(1.0), "Ctrl+0")
    add_action(win, view, "&Clear Selection", win.clear_selection, "Esc")
    add_action(win,
        view, "Select &Between", win.select_between, "Ctrl+B",
        "With two nodes selected: select every node on a path from one to the other",
    )
    view.addSeparator()
    add_action(win, view, "&Expand All", win.expand_all, "Ctrl+Shift+E", "Flat graph: every node")
    add_action(win, view, "&Collapse All", win.collapse_all, "Ctrl+Shift+C", "Group nodes by name scope")
    add_action(win, view, "Expand Selected &Group", win.expand_selected, "E")
    add_action(win, view, "Collapse &Parent Group", win.collapse_selected, "C")
    view.addSeparator()
    add_action(win,
        view, "Open &Inner Graph", win.open_selected_inner, "Ctrl+Down",
        "Open the selected node's If/Loop/Scan body or local function",
    )
    add_action(win, view, "Back to &Outer Graph", win.go_up, "Ctrl+Up")
    win.functions_menu = view.addMenu("Local &Functions")
    win.functions_menu.aboutToShow.connect(lambda: fill_functions(win))
    view.addSeparator()
    view.addAction(win.inspector.toggleViewAction())
    view.addAction(win.search.toggleViewAction())
    win.panels_menu = view  # later panels (candidates, profile) add their toggle actions here


def fill_functions(win) -> None:
    """Local Functions menu: the model's functions, each opening from the main graph."""
    win.functions_menu.clear()
    root = win.session.root
    keys = sorted(root.functions) if root is not None else []
    if not keys:
        win.functions_menu.addAction("(none in this model)").setEnabled(False)
        return
    for key in keys:
        act = win.functions_menu.addAction(key)
        act.triggered.connect(lambda _=False, key=key: win.open_function(key))


def choose_export(win) -> None:
    """File → Export Image: the whole drawing as SVG or PNG."""
    if win.scene is None:
        return
    stem = Path(win.doc.path).stem if win.doc and win.doc.path else "graph"
    path, _ = QFileDialog.getSaveFileName(win, "Export image", f"{stem}.svg", "SVG (*.svg);;PNG (*.png)")
    if not path:
        return
    try:
        info = render_scene(win.scene, path)
    except Exception as exc:  # noqa: BLE001 - shown to the user, the window stays
        win.error("Cannot export", exc)
        return
    win.session.set_status(f"Wrote {path} ({info['width']}×{info['height']})", 8000)
