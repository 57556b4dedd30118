"""The window's everyday manners (offscreen, real window, real models): legend, jobs, prompts, panes, fit."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QSettings, Qt

from fuseview.colors import assign_rule_colors
from fuseview.graph.geometry import node_key
from fuseview.session.decisions import rule_order
from fuseview.ui import dialogs
from fuseview.ui.graph_view import FIT_FLOOR
from fuseview.ui.main_window import MainWindow
from tests.conftest import GPT2_MODELS

GPT2_2L = GPT2_MODELS / "gpt2_2l_ts17.onnx"
GPT2_12L = GPT2_MODELS / "gpt2_12l_ts17.onnx"
MS = 60_000


@pytest.fixture
def errors(monkeypatch) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(dialogs, "show_error", lambda parent, title, message: seen.append((title, message)))
    return seen


@pytest.fixture
def win(qtbot, tmp_path, errors) -> MainWindow:
    w = MainWindow(settings=QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    yield w
    w.session.jobs.shutdown()


def open_scanned(qtbot, w: MainWindow, path) -> None:
    with qtbot.waitSignal(w.workbench.scanned, timeout=MS):
        w.open_file(path)
    qtbot.waitUntil(lambda: not w.busy, timeout=MS)


def apply_all(qtbot, w: MainWindow) -> None:
    w.workbench.panel.accept_all()
    with qtbot.waitSignal(w.workbench.applied, timeout=MS):
        assert w.workbench.apply()


def test_legend_folds_moves_takes_its_clicks_and_steps_aside(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    legend = win.workbench.legend
    assert legend.isVisible() and legend.body.isVisible()
    assert legend.heading().startswith("Candidates (")
    tall = legend.height()
    qtbot.mouseClick(legend.header, Qt.MouseButton.LeftButton)
    assert legend.collapsed and not legend.body.isVisible() and legend.height() < tall
    qtbot.mouseClick(legend.header, Qt.MouseButton.LeftButton)
    assert not legend.collapsed and legend.body.isVisible()
    # a drag on the header moves it; it stays inside the view
    before = legend.pos()
    start = legend.header.rect().center()
    qtbot.mousePress(legend.header, Qt.MouseButton.LeftButton, pos=start)
    qtbot.mouseMove(legend.header, start + QPoint(-200, 120))
    qtbot.mouseRelease(legend.header, Qt.MouseButton.LeftButton, pos=start + QPoint(-200, 120))
    assert legend.moved and legend.pos() != before
    assert win.view.rect().contains(legend.geometry())
    # a click on the legend never selects a node hidden below it
    win.scene.clearSelection()
    qtbot.mouseClick(legend.body, Qt.MouseButton.LeftButton)
    assert win.scene.selected_keys() == []
    # a node centred under the legend: the legend steps into a corner that leaves it free
    covered = legend.geometry().adjusted(10, 10, -10, -10)
    legend.avoid(covered)
    assert not legend.geometry().intersects(covered)
    # focusing a candidate never leaves the legend over its nodes
    cid = win.workbench.session.decisions.candidates[0].id
    win.workbench.focus_candidate(cid)
    qtbot.waitUntil(lambda: not win.busy, timeout=MS)
    rect = win.view.host_rect(win.scene.focus_rect())
    assert not legend.geometry().intersects(rect) or legend.collapsed


def test_rule_colours_follow_the_rule_not_the_model(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    first = dict(win.workbench.session.decisions.colors)
    open_scanned(qtbot, win, GPT2_12L)
    second = dict(win.workbench.session.decisions.colors)
    shared = set(first) & set(second)
    assert len(shared) >= 3
    # the colours are given as a set (no two alike): the same rules get the same colours in every model
    assert all(first[r] == second[r] for r in shared) and set(first) == set(second)
    assert first == assign_rule_colors(first, rule_order())
    assert len(set(second.values())) == len(second)  # no two rules of a model share a colour


def test_apply_keeps_the_graphs_in_front_and_names_the_fused_legend(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    pane_before = win.view.size()
    apply_all(qtbot, win)
    wb = win.workbench
    assert wb.profile_panel is None or not wb.profile_panel.isVisible()  # no dock opened itself
    assert win.view.height() >= pane_before.height() - 40
    assert wb.fused_pane.legend.heading().startswith("Applied fusions (")
    assert wb.legend.heading().startswith("Candidates (")
    # a narrow pane elides its title instead of clipping it; the tooltip keeps all of it
    title = wb.fused_pane.title
    wb.splitter.setSizes([1000, 180])
    qtbot.waitUntil(lambda: title.text().endswith("…"), timeout=5000)
    assert title.full_text in title.toolTip()
    fm = title.fontMetrics()  # a long title takes two lines, each elided to the width
    assert max(fm.horizontalAdvance(line) for line in title.text().split("\n")) <= title.width()


def test_selecting_a_fused_node_brings_its_originals_into_view(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    apply_all(qtbot, win)
    wb = win.workbench
    fdoc = wb.session.fused.doc
    mha = next(n for n in fdoc.graph.nodes if n.op_type in ("Attention", "MultiHeadAttention"))
    originals = wb.session.links.to_original[mha.name]
    keys = [node_key(win.workbench.session.root.graph.node_by_name[o]) for o in originals]
    # look somewhere else first: the graph's far end
    win.view.set_zoom(1.0)
    far = max(win.scene.boxes.values(), key=lambda it: it.sceneBoundingRect().bottom())
    win.view.centerOn(far.sceneBoundingRect().center())
    assert not win.view.visible_scene_rect().intersects(win.scene.keys_rect(keys))
    wb.fused_pane.scene.select_keys([node_key(mha.index)])
    assert set(win.scene.selected_keys()) == set(keys)
    assert win.view.visible_scene_rect().intersects(win.scene.keys_rect(keys))


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_collapsing_a_group_does_not_cancel_apply(qtbot, win, errors):
    open_scanned(qtbot, win, GPT2_12L)
    win.workbench.panel.accept_all()
    with qtbot.waitSignal(win.workbench.applied, timeout=MS):
        assert win.workbench.apply()
        assert win.job_running("apply")
        win.collapse_all()  # a layout job or a synchronous re-layout: either way the Apply goes on
    assert errors == []
    assert win.workbench.session.fused is not None


def test_a_failed_apply_is_titled_by_what_failed(qtbot, win, errors, monkeypatch):
    open_scanned(qtbot, win, GPT2_2L)
    win.workbench.panel.accept_all()

    def broken(*_a, **_k):
        raise RuntimeError("the apply step broke")

    monkeypatch.setattr("fuseview.fusion.pipeline.apply_candidates", broken)
    with qtbot.waitSignal(win.workbench.apply_failed, timeout=MS) as failed:
        win.workbench.apply()
    assert errors == [("Cannot apply the fusions", "RuntimeError: the apply step broke")]
    assert failed.args == ["RuntimeError: the apply step broke"]
    assert not win.busy and not win.progress.isVisible()


@pytest.mark.parametrize("answer", [dialogs.CANCEL, dialogs.DISCARD, dialogs.SAVE])
def test_unsaved_decisions_prompt_on_open_and_quit(qtbot, win, monkeypatch, tmp_path, answer):
    open_scanned(qtbot, win, GPT2_2L)
    asked: list[str] = []

    def ask(parent, title, message):
        asked.append(message)
        return answer

    monkeypatch.setattr(dialogs, "ask_unsaved", ask)
    plan = tmp_path / "decisions.plan.json"
    monkeypatch.setattr(win.workbench.files, "_save_dialog", lambda title, name, filt: str(plan))
    assert win.request_open(GPT2_12L) is not None  # nothing decided yet: no question
    open_scanned(qtbot, win, GPT2_2L)
    assert asked == []
    win.workbench.panel.accept_all()
    assert win.workbench.unsaved()
    job = win.request_open(GPT2_12L)
    assert len(asked) == 1 and "decisions" in asked[0]
    if answer == dialogs.CANCEL:
        assert job is None and win.doc.path == GPT2_2L
        assert not win.close() and win.isVisible()  # quitting asks too, and Cancel keeps the window
        assert len(asked) == 2
        return
    assert job is not None
    if answer == dialogs.SAVE:
        assert plan.is_file() and "decision" in plan.read_text()
    qtbot.waitUntil(lambda: not win.busy, timeout=MS)


def test_fit_never_shrinks_a_tall_graph_to_a_hairline(qtbot, win):
    win.expansion_mode = "flat"
    win.resize(700, 420)
    with qtbot.waitSignal(win.document_shown, timeout=MS):
        win.open_file(GPT2_12L)
    qtbot.waitUntil(lambda: not win.busy, timeout=MS)
    whole = win.scene.itemsBoundingRect()
    assert win.view.fit_scale(whole) < FIT_FLOOR  # the whole graph would be a hairline here
    win.view.fit()
    assert win.view.scale_factor() >= FIT_FLOOR
    assert win.view.visible_scene_rect().intersects(whole)


def test_fuseview_model_shows_the_window_before_loading(qtbot, monkeypatch, tmp_path):
    from fuseview.cli import main

    calls = []
    monkeypatch.setattr("fuseview.ui.app.run_app", lambda **kw: calls.append(kw) or 0)
    monkeypatch.setattr("fuseview.graph.loader.load_document", lambda *a, **k: pytest.fail("loaded first"))
    assert main([str(GPT2_12L)]) == 0
    assert calls == [{"path": str(GPT2_12L), "expansion_mode": "auto", "end_process": True}]
    # what run_app then does: the window is up and its progress bar runs while the model loads
    w = MainWindow(settings=QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.show()
    w.open_file(GPT2_12L)
    assert w.isVisible() and w.progress.isVisible() and w.doc is None
    qtbot.waitUntil(lambda: w.doc is not None and not w.busy, timeout=MS)
    w.session.jobs.shutdown()


def test_fuseview_missing_model_is_one_line_and_no_window(capsys):
    from fuseview.cli import main

    assert main(["/no/such/model.onnx"]) == 2
    err = capsys.readouterr().err
    assert err == "fuseview: error: /no/such/model.onnx: no such file\n"


def test_select_between_two_nodes(qtbot, win):
    from fuseview.session.panes import nodes_between

    open_scanned(qtbot, win, GPT2_2L)
    g = win.doc.graph
    ln = next(n for n in g.nodes if n.op_type == "LayerNormalization")
    mm = next(n for n in g.nodes if n.index > ln.index and n.op_type == "MatMul")
    win.scene.select_keys([node_key(ln.index), node_key(mm.index)])
    expected = nodes_between(g, ln.name, mm.name)
    assert len(expected) > 2
    assert win.select_between() == len(expected)
    assert set(win.scene.selected_keys()) == {node_key(g.node_by_name[n]) for n in expected}
    win.scene.select_keys([node_key(ln.index)])
    assert win.select_between() == 0 and "exactly two" in win.statusBar().currentMessage()


def test_legend_steps_aside_from_a_search_hit_in_a_small_pane(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    legend = win.workbench.legend
    win.workbench.splitter.setSizes([260, 0])
    win.resize(700, 420)
    qtbot.waitUntil(lambda: win.view.viewport().width() < 420, timeout=5000)
    g = win.doc.graph
    for node in [n for n in g.nodes if n.op_type == "MatMul"][:4]:
        legend.set_collapsed(False)
        legend.corner, legend.moved = "top-right", False
        legend.set_rules(legend.rules)
        win.reveal_node(node.index)
        box = win.view.host_rect(win.scene.boxes[node_key(node.index)].sceneBoundingRect())
        assert legend.collapsed or not legend.geometry().intersects(box)


def test_pane_state_is_what_the_scene_draws_and_redraws_a_scene(qtbot, win):
    from fuseview.ui.graph_scene import GraphScene

    open_scanned(qtbot, win, GPT2_2L)
    wb = win.workbench
    state = win.scene.state
    assert state.marks.colors == win.scene.marked_keys() and state.marks.colors
    cid = wb.session.decisions.candidates[0].id
    wb.focus_candidate(cid)
    assert state.focus == win.scene.focused_keys() == wb.candidate_keys(cid)[0]
    win.highlight_op("MatMul")
    assert state.highlight and all(win.scene.boxes[k].highlighted for k in state.highlight)
    win.scene.select_keys(state.focus[:2])
    assert sorted(state.selection) == sorted(state.focus[:2])
    # a new scene of the same layout draws the same overlay from the plain state alone
    other = GraphScene(win.doc.graph, win.layout_)
    other.draw_state(state)
    assert other.marked_keys() == win.scene.marked_keys()
    assert other.focused_keys() == win.scene.focused_keys()
    assert other.state.highlight == state.highlight
