"""The fusion workbench in the real window (offscreen): candidates, decisions, apply, linked panes, export."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QColor

from fuseview.errors import FuseviewError
from fuseview.fusion.scan import scan_file
from fuseview.graph.geometry import group_key, node_key
from fuseview.ui import dialogs
from fuseview.ui.main_window import MainWindow
from tests.conftest import GPT2_MODELS, ROOT

GPT2_2L = GPT2_MODELS / "gpt2_2l_ts17.onnx"
GPT2_12L = GPT2_MODELS / "gpt2_12l_ts17.onnx"
MS = 60_000


@pytest.fixture
def win(qtbot, tmp_path, monkeypatch) -> MainWindow:
    monkeypatch.setattr(dialogs, "show_error", lambda parent, title, message: None)
    w = MainWindow(settings=QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    yield w
    w.session.jobs.shutdown()


def open_scanned(qtbot, w: MainWindow, path: Path) -> None:
    with qtbot.waitSignal(w.workbench.scanned, timeout=MS):
        w.open_file(path)
    qtbot.waitUntil(lambda: not w.busy, timeout=MS)


def node_keys(w: MainWindow, names) -> set[str]:
    g = w.workbench.session.root.graph
    return {node_key(g.node_by_name[n]) for n in names}


def apply_and_wait(qtbot, w: MainWindow) -> None:
    with qtbot.waitSignal(w.workbench.applied, timeout=MS):
        assert w.workbench.apply()


def press(qtbot, w: MainWindow, key, modifier=Qt.KeyboardModifier.NoModifier) -> None:
    w.activateWindow()
    w.view.setFocus()
    qtbot.keyClick(w.view, key, modifier)


def test_candidates_highlighted_per_rule_with_legend(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    wb = win.workbench
    scan = scan_file(GPT2_2L)  # an independent scan of the same file
    assert {c.id for c in wb.session.decisions.candidates} == {c.id for c in scan.candidates}
    assert len(scan.candidates) > 5
    marked = win.scene.marked_keys()
    expected = set().union(*(node_keys(win, c.nodes) for c in scan.candidates))
    assert set(marked) == expected  # the 2-layer model is drawn flat: every candidate node has its box
    for c in scan.candidates:  # a node in one rule's candidates only wears that rule's colour
        for k in node_keys(win, c.nodes):
            owners = {o.rule for o in scan.candidates if k in node_keys(win, o.nodes)}
            if owners == {c.rule}:
                assert marked[k] == QColor(wb.session.decisions.colors[c.rule]).name()
    legend = wb.legend.plain_text()
    for rule, n in wb.session.decisions.counts().items():
        assert f"{rule} {n}" in legend
    assert wb.panel.table.rowCount() == len(scan.candidates)


def test_row_selection_centres_and_outlines_the_candidate(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    wb = win.workbench
    last = wb.session.decisions.candidates[-1]
    win.view.fit()
    win.view.set_zoom(1.0)
    win.view.centerOn(win.scene.sceneRect().topLeft())
    assert wb.panel.select_id(last.id)
    assert set(win.scene.focused_keys()) == node_keys(win, last.nodes)
    rect = win.scene.focus_rect()
    assert rect.adjusted(-5, -5, 5, 5).contains(
        win.view.view_center()
    ) or win.view.visible_scene_rect().contains(rect)


def test_collapsed_group_gets_a_marker_and_row_opens_it(qtbot, win):
    open_scanned(qtbot, win, GPT2_12L)  # 12 layers: opens with layer groups collapsed
    wb = win.workbench
    badges = {it.key: it.badge for it in win.scene.boxes.values() if it.badge}
    assert badges and all(k.startswith("g:") for k in badges)
    c = next(c for c in wb.session.decisions.candidates if "h.7" in wb.panel.scopes[c.id])
    with qtbot.waitSignal(win.document_shown, timeout=MS):
        wb.panel.select_id(c.id)
    assert set(win.scene.focused_keys()) == node_keys(win, c.nodes)


def test_keyboard_next_previous_accept_reject_and_typing(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    wb, d = win.workbench, win.workbench.session.decisions
    ids = wb.panel.visible_ids()
    press(qtbot, win, Qt.Key.Key_N)
    assert wb.panel.current_id() == ids[0]
    press(qtbot, win, Qt.Key.Key_N)
    assert wb.panel.current_id() == ids[1]
    press(qtbot, win, Qt.Key.Key_P)
    assert wb.panel.current_id() == ids[0]
    press(qtbot, win, Qt.Key.Key_A)
    assert d.status(ids[0]) == "accepted"
    for other in d.by_id[ids[0]].conflicts:
        assert d.status(other) == "rejected"
    press(qtbot, win, Qt.Key.Key_N)
    press(qtbot, win, Qt.Key.Key_R)
    assert d.status(ids[1]) == "rejected"
    # typing in the search line must not decide anything
    before = dict(d.plan.decisions)
    current = wb.panel.current_id()
    win.search.focus()
    qtbot.keyClicks(win.search.edit, "narp")
    assert win.search.edit.text() == "narp"
    assert d.plan.decisions == before and wb.panel.current_id() == current


def test_conflicts_greyed_with_reason_rule_accept_undo_redo(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    wb, d = win.workbench, win.workbench.session.decisions
    c = next(c for c in d.candidates if c.rule == "fused_matmul" and c.conflicts)  # vs attention
    wb.panel.select_id(c.id)
    wb.panel.accept_current()
    other = c.conflicts[0]
    assert d.status(c.id) == "accepted" and d.status(other) == "rejected"
    assert d.conflict_text(other) == f"fused_matmul (accepted) at {c.nodes[0]}"
    row = wb.panel.visible_ids().index(other)
    assert wb.panel.table.item(row, 6).text() == d.conflict_text(other)
    assert c.id in wb.panel.table.item(row, 6).toolTip()  # the ids, for whoever needs them
    assert wb.panel.table.item(row, 0).foreground().color() == QColor("#9aa3ad")  # greyed
    # rejected candidates are drawn faded on the graph
    faded = [it for it in win.scene.boxes.values() if it.mark is not None and it.mark_faded]
    assert faded
    # whole rule
    wb.panel.accept_rule("bias_fast_gelu")
    assert all(d.status(x.id) == "accepted" for x in d.candidates if x.rule == "bias_fast_gelu")
    snapshot = dict(d.plan.decisions)
    press(qtbot, win, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert all(d.status(x.id) != "accepted" for x in d.candidates if x.rule == "bias_fast_gelu")
    press(qtbot, win, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert d.status(c.id) == "pending" and d.status(other) == "pending"
    press(qtbot, win, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    press(qtbot, win, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert d.plan.decisions == snapshot
    assert not wb.panel.buttons["redo"].isEnabled()


def test_near_miss_in_tooltip_and_inspector(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    d = win.workbench.session.decisions
    miss = d.scan.near_misses[0]
    name = miss.nodes[0]
    item = win.scene.boxes[node_key(win.workbench.session.root.graph.node_by_name[name])]
    assert miss.reason in item.toolTip()
    win.scene.select_keys([item.key])
    text = win.inspector.text()
    assert "Near misses" in text and miss.reason in text
    assert miss.reason in win.workbench.panel.info.text()


def test_apply_builds_fused_model_and_links_selection(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    wb = win.workbench
    wb.panel.accept_all()
    with qtbot.waitSignal(wb.applied, timeout=MS):
        press(qtbot, win, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    fdoc = wb.session.fused.doc
    hist = fdoc.op_histogram()
    # accept-all takes the packed-projection Attention over MultiHeadAttention (the bigger fusion)
    assert hist.get("com.microsoft:Attention", 0) + hist.get("com.microsoft:MultiHeadAttention", 0) == 2
    assert "com.microsoft:SkipLayerNormalization" in hist
    assert wb.fused_pane.isVisible() and wb.fused_pane.scene is not None
    assert wb.session.fused.validation.ok
    assert "max |diff|" in wb.fused_pane.title.full_text and "(ok)" in wb.fused_pane.title.full_text
    assert "validated on onnxruntime" in wb.fused_pane.title.toolTip()
    assert all(wb.session.decisions.status(i) == "applied" for i in wb.session.decisions.accepted())
    # fused -> original
    mha = next(n for n in fdoc.graph.nodes if n.op_type in ("Attention", "MultiHeadAttention"))
    wb.fused_pane.scene.select_keys([node_key(mha.index)])
    origin = json.loads(mha.metadata["fuseview.origin"])
    assert set(win.scene.selected_keys()) == node_keys(win, origin)
    # original -> fused
    wb.fused_pane.scene.clearSelection()
    win.scene.select_keys([node_key(win.workbench.session.root.graph.node_by_name[origin[3]])])
    assert wb.fused_pane.scene.selected_keys() == [node_key(mha.index)]
    # one pane at a time
    wb.set_pane_mode("fused")
    assert not wb.splitter.widget(0).isVisible() and wb.fused_pane.isVisible()
    wb.set_pane_mode("both")
    assert wb.splitter.widget(0).isVisible()


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_panes_keep_collapse_state_and_viewport_in_step(qtbot, win):
    open_scanned(qtbot, win, GPT2_12L)
    wb = win.workbench
    wb.panel.accept_rule("skip_layer_norm_bias")
    apply_and_wait(qtbot, win)
    fscene = wb.fused_pane.scene
    layer = group_key(next(it.box.scope for it in win.scene.boxes.values() if "h.2" in it.box.scope))
    assert layer in fscene.boxes  # same collapsed groups on both sides
    scope = tuple(win.scene.boxes[layer].box.scope)
    with qtbot.waitSignal(win.document_shown, timeout=MS):
        win.expand_group(scope)
    assert wb.fused_pane.scene is not fscene
    assert layer not in wb.fused_pane.scene.boxes and layer in wb.fused_pane.scene.frames
    # scroll the original: the fused pane follows to the same place (the last output, then the layer)
    win.view.set_zoom(0.5)
    out_key = next(k for k in win.scene.boxes if k.startswith("out:"))
    for key in (out_key, layer):
        item = win.scene.boxes.get(key) or win.scene.frames[key]
        win.view.centerOn(item.sceneBoundingRect().center())
        fused = wb.fused_pane.scene.boxes.get(key) or wb.fused_pane.scene.frames[key]
        assert (
            fused.sceneBoundingRect()
            .adjusted(-300, -300, 300, 300)
            .contains(wb.fused_pane.view.view_center())
        )
    assert abs(wb.fused_pane.view.scale_factor() - win.view.scale_factor()) < 1e-6


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_save_fused_model_atomic_and_never_the_source(qtbot, win, tmp_path, monkeypatch):
    src = tmp_path / "model.onnx"
    src.write_bytes(GPT2_2L.read_bytes())
    before = _digest(src)
    open_scanned(qtbot, win, src)
    wb = win.workbench
    wb.panel.accept_all()
    apply_and_wait(qtbot, win)
    with pytest.raises(FuseviewError, match="source model"):
        wb.save_fused(src)
    with pytest.raises(FuseviewError, match="source model"):
        wb.save_fused(tmp_path / "." / "model.onnx")
    assert _digest(src) == before
    out = wb.save_fused(tmp_path / "fused.onnx")
    m = onnx.load(str(out))
    assert any(n.op_type in ("Attention", "MultiHeadAttention") for n in m.graph.node)

    # a write that fails half way leaves neither the target nor a temp file
    def broken(model, path):
        Path(path).write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(onnx, "save_model", broken)
    with pytest.raises(OSError):
        wb.save_fused(tmp_path / "other.onnx")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "settings.ini") == [
        "fused.onnx",
        "model.onnx",
    ]
    assert _digest(src) == before


def test_plan_save_and_open_round_trip(qtbot, win, tmp_path):
    open_scanned(qtbot, win, GPT2_2L)
    wb, d = win.workbench, win.workbench.session.decisions
    wb.panel.accept_rule("attention_mha")
    wb.panel.reject_rule("fast_gelu")
    saved = dict(d.plan.decisions)
    plan = wb.save_plan(tmp_path / "plan.json")
    wb.panel.accept_all()
    assert d.plan.decisions != saved
    assert wb.open_plan(plan) == []
    assert d.plan.decisions == saved
    wb.panel.undo()  # opening a plan is one undoable step
    assert d.plan.decisions != saved
    data = json.loads(plan.read_text())
    data["decisions"].append({"id": "attention_mha-00000000", "rule": "attention_mha", "decision": "accept"})
    (tmp_path / "other.json").write_text(json.dumps(data))
    assert wb.open_plan(tmp_path / "other.json") == ["attention_mha-00000000"]
    assert "not in this model" in win.statusBar().currentMessage()
    with pytest.raises(FuseviewError, match="source model"):
        wb.save_plan(GPT2_2L)


def test_heatmap_from_profile_panel_colours_boxes(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    pp = win.profile_panel
    if pp is None:
        pytest.skip("profile panel not in this build yet")
    g = win.workbench.session.root.graph
    names = [n.name for n in g.visible_nodes()[:5]]
    pp.heatmapChanged.emit({"original": {n: 0.1 * (i + 1) for i, n in enumerate(names)}, "fused": {}})
    assert set(win.scene.heat_keys()) == node_keys(win, names)
    assert "Share of time" in win.workbench.legend.plain_text()
    pp.heatmapChanged.emit(None)
    assert win.scene.heat_keys() == []


def _fuseview(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    return subprocess.run(
        [sys.executable, "-m", "fuseview", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_open_with_plan_apply_screenshot(tmp_path):
    scan = scan_file(GPT2_2L)
    first = scan.candidates[0]
    (tmp_path / "plan.json").write_text(
        json.dumps(
            {
                "format": "fuseview-plan",
                "decisions": [{"id": first.id, "rule": first.rule, "decision": "accept"}],
            }
        )
    )
    out = tmp_path / "shot.png"
    r = _fuseview(
        "open", str(GPT2_2L), "--plan", str(tmp_path / "plan.json"), "--apply", "--screenshot", str(out)
    )
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000
    only = _fuseview("open", str(GPT2_2L), "--plan", str(tmp_path / "plan.json"), "--screenshot", str(out))
    assert only.returncode == 0, only.stderr  # decisions loaded and shown, nothing applied
    bad = _fuseview("open", str(GPT2_2L), "--plan", str(tmp_path / "missing.json"), "--screenshot", str(out))
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and "missing.json" in bad.stderr


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_open_apply_profile_screenshot(tmp_path):
    out = tmp_path / "wb.png"
    r = _fuseview("open", str(GPT2_2L), "--apply", "--profile", "--screenshot", str(out))
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 20_000


def test_context_menu_on_a_node_accepts_and_rejects(qtbot, win):
    from PySide6.QtWidgets import QMenu

    open_scanned(qtbot, win, GPT2_2L)
    d = win.workbench.session.decisions
    c = next(c for c in d.candidates if c.rule == "bias_fast_gelu")
    item = win.scene.boxes[node_key(win.workbench.session.root.graph.node_by_name[c.nodes[-1]])]
    menu = QMenu()
    win.scene.context_hook(item, menu)
    actions = {a.text(): a for a in menu.actions()}
    actions[f"Accept {c.id} (pending)"].trigger()
    assert d.status(c.id) == "accepted"
    assert (
        win.workbench.panel.table.item(win.workbench.panel.visible_ids().index(c.id), 5).text() == "accepted"
    )
    actions[f"Reject {c.id}"].trigger()
    assert d.status(c.id) == "rejected"
    actions[f"Show {c.id} in the list"].trigger()
    assert win.workbench.panel.current_id() == c.id


def test_profile_bars_select_nodes_and_op_types_in_the_panes(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    pp = win.profile_panel
    if pp is None:
        pytest.skip("profile panel not in this build yet")
    wb = win.workbench
    wb.panel.accept_rule("attention_mha")
    apply_and_wait(qtbot, win)
    g = wb.session.root.graph
    softmax = next(n for n in g.nodes if n.op_type == "Softmax")
    pp.nodeActivated.emit("original", softmax.name)
    assert win.scene.selected_keys() == [node_key(softmax.index)]
    fg = wb.session.fused.doc.graph
    mha = next(n for n in fg.nodes if n.op_type == "MultiHeadAttention")
    pp.nodeActivated.emit("fused", mha.name)
    assert wb.fused_pane.scene.selected_keys() == [node_key(mha.index)]
    pp.opTypeActivated.emit("Gemm")
    gemms = {node_key(n.index) for n in g.visible_nodes() if n.op_type == "Gemm"}
    assert set(win.scene.highlighted_keys()) == gemms
    assert len(wb.fused_pane.scene.highlighted_keys()) == len(gemms)  # attention fusion keeps the Gemms


def test_fused_nodes_take_the_scope_of_what_they_replaced():
    from fuseview.fusion.apply import apply_candidates
    from fuseview.fusion.plan import Plan
    from fuseview.graph.loader import document_from_model, load_document
    from fuseview.session.links import adopt_origin_scopes, link_graphs

    path = GPT2_MODELS / "gpt2_12l_dynamo.onnx"  # dynamo keeps scopes in metadata the fused nodes lack
    doc = load_document(path)
    scan = scan_file(path)
    plan = Plan(scan.candidates)
    plan.accept("attention_mha")
    fdoc = document_from_model(apply_candidates(doc.model, scan, plan.accepted()).model)
    mha = [n for n in fdoc.graph.nodes if n.op_type == "MultiHeadAttention"]
    assert len(mha) == 12 and all(n.scope == () for n in mha)
    adopt_origin_scopes(doc.graph, fdoc.graph)
    links = link_graphs(doc.graph, fdoc.graph)
    for n in mha:
        origin = links.to_original[n.name]
        assert n.scope and all(doc.graph.node(o).scope[: len(n.scope)] == n.scope for o in origin)
    assert len({n.scope for n in mha}) == 12  # one attention per layer, each in its own layer's scope


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_options_alone_open_the_demo(tmp_path):
    out = tmp_path / "demo.png"
    r = _fuseview("--screenshot", str(out))  # no subcommand, no model: `open` on the bundled demo
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 20_000


def test_dock_says_which_fusions_onnxruntime_makes_by_itself(qtbot, win):
    from fuseview.fusion.ort_compare import compare_with_ort
    from fuseview.ui.candidates_panel import COLUMNS, ORT_COLUMN

    assert COLUMNS[ORT_COLUMN] == "ORT does it"
    with qtbot.waitSignal(win.workbench.ort_checked, timeout=60000):
        open_scanned(qtbot, win, GPT2_2L)
    panel = win.workbench.panel
    candidates = win.workbench.session.decisions.candidates
    expected = compare_with_ort(str(GPT2_2L), candidates, "all", "cpu").does_it
    words = {True: "yes", False: "no", None: "?"}
    ids = panel.visible_ids()
    assert [panel.table.item(r, ORT_COLUMN).text() for r in range(len(ids))] == [
        words[expected[cid]] for cid in ids
    ]
    by_rule = {}
    for cid in ids:
        by_rule.setdefault(win.workbench.session.decisions.by_id[cid].rule, set()).add(expected[cid])
    # onnxruntime fuses the tanh GELU itself but never this export's attention: the column tells them apart
    assert by_rule["bias_fast_gelu"] == {True} and by_rule["attention_mha"] == {False}
