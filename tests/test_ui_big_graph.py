"""The window on a graph of thousands of unscoped nodes (offscreen): it opens as runs of nodes, and search,
highlight, open and close work on them (issue 38, finding 6: 50,000 such nodes took 71 s to open)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtGui import QColor

from fuseview.graph.document import Node
from fuseview.graph.geometry import group_key, node_key
from fuseview.graph.groups import group_scopes
from fuseview.graph.layout import layout_graph
from fuseview.graph.loader import load_document
from fuseview.session import ORIGINAL
from fuseview.session.panes import Marks
from fuseview.ui import dialogs, graph_scene, style
from fuseview.ui.graph_scene import BoxItem, GraphScene
from fuseview.ui.graph_view import GraphView
from fuseview.ui.main_window import MainWindow
from tests.big_graphs import write_big_model

LOAD_MS = 60_000
N = 6_500  # 7 runs of about 930 nodes


@pytest.fixture
def win(qtbot, tmp_path, monkeypatch) -> MainWindow:
    monkeypatch.setattr(dialogs, "show_error", lambda *a: pytest.fail(f"error dialog: {a[1:]}"))
    w = MainWindow(settings=QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(1200, 800)
    w.show()
    yield w
    w.session.jobs.shutdown()


def test_a_big_unscoped_graph_opens_with_few_items_and_stays_usable(qtbot, win, tmp_path, monkeypatch):
    path = write_big_model(tmp_path, N)
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.open_file(path)
    # before: flat, 6,502 boxes and 6,501 routes made as Qt items (13,004 with the overview)
    assert len(win.scene.items()) < 30
    assert win.counts()["boxes"] == 7 + 2 and win.counts()["nodes"] == N

    # zooming walks no node: the status line's counts were two passes over every node a wheel step
    looked = []
    with monkeypatch.context() as m:
        m.setattr(Node, "visible", property(lambda n: looked.append(n) or n.folded_into is None))
        for _ in range(5):
            win.view.zoom_by(1.25)
    assert "zoom" in win.counts_label.text() and looked == []

    # find a node deep inside: its run opens, it is selected; only that run's nodes get items
    target = 5_000
    run = group_scopes(win.doc.graph)[target]
    win.reveal_node(target)
    qtbot.waitUntil(lambda: win.scene.selected_keys() == [node_key(target)], timeout=LOAD_MS)
    assert group_key(run) in win.scene.frames and win.counts()["boxes"] < 1_000

    # an op type: drawn hits highlighted, the closed runs that hold the others too
    win.highlight_op("Neg")
    highlighted = {it.key for it in win.scene.highlighted_items()}
    assert sum(k.startswith("g:") for k in highlighted) == 6 and len(highlighted) > 400

    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.collapse_group(run)
    assert group_key(run) in win.scene.boxes and win.counts()["boxes"] == 9


def _open_and_apply_all(qtbot, win, tmp_path):
    """The 6,500-node model opened (3,250 Sigmoid·Mul pairs: as many quick_gelu candidates), every
    candidate accepted and applied: the workbench."""
    path = write_big_model(tmp_path, N, "silu")
    with qtbot.waitSignal(win.workbench.scanned, timeout=LOAD_MS):
        win.open_file(path)
    qtbot.waitUntil(lambda: not win.busy, timeout=LOAD_MS)
    wb = win.workbench
    wb.panel.accept_all()
    with qtbot.waitSignal(wb.applied, timeout=LOAD_MS):
        assert wb.apply()
    return wb


@pytest.mark.slow  # about 20 s: a scan, an Apply and a validation of 6,500 nodes
def test_both_panes_of_a_big_unscoped_graph_have_the_same_runs(qtbot, win, tmp_path):
    wb = _open_and_apply_all(qtbot, win, tmp_path)
    # 3,250 fused nodes, under the bound: they sit in the runs of the nodes they replaced, not flat
    runs = {k for k, it in win.scene.boxes.items() if it.box.kind == "group"}
    assert len(runs) == 7 and set(wb.fused_pane.scene.boxes) == runs | {"in:x", "out:y"}
    run = win.scene.boxes[min(runs)].box.scope
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.expand_group(run)
    qtbot.waitUntil(lambda: group_key(run) in wb.fused_pane.scene.frames, timeout=LOAD_MS)
    fused = [it for it in wb.fused_pane.scene.boxes.values() if it.box.kind == "node"]
    # one QuickGelu a pair, in the run of its Sigmoid (a pair across a run's end goes with its first node)
    graph, scopes = win.doc.graph, group_scopes(win.doc.graph)
    sigmoids = [n for n in graph.nodes if n.op_type == "Sigmoid" and scopes[n.index] == run]
    assert len(fused) == len(sigmoids) > 400 and {it.box.label for it in fused} == {"QuickGelu"}


def _painted(win: MainWindow) -> list:
    """The box items in the view after a paint (a lazy scene makes them as the view paints)."""
    win.view.viewport().repaint()
    return [it for it in win.scene.items(win.view.visible_scene_rect()) if isinstance(it, BoxItem)]


def test_a_big_graph_expanded_whole_makes_items_only_where_the_view_looks(qtbot, win, tmp_path):
    path = write_big_model(tmp_path, N)
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.open_file(path)
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.expand_all()
    assert win.counts()["boxes"] == N + 2 and win.counts()["edges"] == N + 1  # every node laid out
    shown = _painted(win)
    # before: an item per box and per edge (13,004 at 6,500 nodes), made on the UI thread before any paint
    assert shown and len(win.scene.items()) < 1_000

    # found, selected and centred: its item is made where the view goes; an op type's hits wear their
    # highlight on the items made later too, and a candidate mark set by key shows on its node
    target = 5_001  # a Neg (odd index)
    win.session.set_marks(ORIGINAL, Marks(colors={node_key(target): "#d62728"}))
    win.highlight_op("Neg")
    assert len(win.scene.highlighted_keys()) == N // 2
    win.reveal_node(target)
    assert win.scene.selected_keys() == [node_key(target)]
    shown = _painted(win)
    item = win.scene.boxes[node_key(target)]
    assert item in shown and item.isSelected() and item.highlighted and item.mark == QColor("#d62728")
    negs = [it for it in shown if it.box.label == "Neg"]
    assert len(negs) > 3 and all(it.highlighted for it in negs)
    assert all(not it.highlighted for it in shown if it.box.label == "Relu")

    # far out: the overview picture, the selection drawn over it; no item made for the zoom
    made = len(win.scene.items())
    win.view.set_zoom(0.002)
    win.view.viewport().repaint()
    assert win.scene.overview_on and len(win.scene.items()) == made
    assert any(QColor(style.SELECTION) == c for c, _r in win.scene.overlay_rects())

    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.collapse_all()
    assert win.counts()["boxes"] == 7 + 2


def test_a_lazy_scene_drops_far_items_but_keeps_the_selection(qtbot, tmp_path, monkeypatch):
    doc = load_document(write_big_model(tmp_path, N))
    lay = layout_graph(doc.graph, None)
    scene = GraphScene(doc.graph, lay, lazy=True)
    view = GraphView()
    qtbot.addWidget(view)
    view.resize(800, 600)
    view.show()
    view.setScene(scene)
    view.set_zoom(0.8)
    monkeypatch.setattr(graph_scene, "_KEEP_ITEMS", 200)
    scene.select_keys([node_key(10)])
    for i in range(0, N, 500):  # down the chain, a view at a time
        view.centerOn(scene.boxes[node_key(i)].sceneBoundingRect().center())
        view.viewport().repaint()
        assert scene.made_counts()["boxes"] < 200 + 60
    assert node_key(10) in scene.selected_keys() and scene.boxes[node_key(10)].scene() is scene


@pytest.mark.slow  # about 25 s: a scan, an Apply and a validation of 6,500 nodes
def test_both_panes_expanded_whole_link_their_selections(qtbot, win, tmp_path):
    wb = _open_and_apply_all(qtbot, win, tmp_path)
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.expand_all()
    fused_graph = wb.session.fused.doc.graph
    flat = lambda: not any(b.kind == "group" for b in wb.fused_pane.scene.layout.boxes)  # noqa: E731
    qtbot.waitUntil(flat, timeout=LOAD_MS)  # the fused pane follows the expansion
    fscene = wb.fused_pane.scene
    assert win.scene.lazy and fscene.lazy  # 6,500 and 3,250 boxes, each with its edge
    wb.fused_pane.view.viewport().repaint()
    assert len(fscene.items()) < 1_000 and len(win.scene.items()) < 1_000

    # a fused node far down, picked by key: its two original nodes are selected and brought into view
    gelu = next(n for n in reversed(fused_graph.nodes) if n.op_type == "QuickGelu")
    originals = wb.session.links.to_original[gelu.name]
    fscene.select_keys([node_key(gelu.index)])
    wanted = {node_key(wb.session.root.graph.node_by_name[o]) for o in originals}
    assert len(wanted) == 2 and set(win.scene.selected_keys()) == wanted
    win.view.viewport().repaint()
    assert win.view.visible_scene_rect().intersects(win.scene.keys_rect(wanted))
    assert all(win.scene.boxes[k].isSelected() for k in wanted)
