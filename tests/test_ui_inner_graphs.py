"""Opening If/Loop bodies and model-local functions as graphs of their own, and coming back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from PySide6.QtCore import QSettings

from fuseview.graph.geometry import node_key
from fuseview.graph.loader import load_document
from fuseview.graph.navigation import function_document, inner_graphs, subgraph_document
from fuseview.ui import dialogs
from fuseview.ui.main_window import MainWindow

LOAD_MS = 30_000


def _model_with_inner_graphs(path: Path) -> Path:
    """x -> Loop(3 times: y = y*2 + 1, then If on the sum inside the body) -> local function Twice -> out."""
    f32 = TensorProto.FLOAT
    then_g = helper.make_graph(
        [helper.make_node("Identity", ["acc2"], ["t"], name="then_id")],
        "then",
        [],
        [helper.make_tensor_value_info("t", f32, [2])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["acc2"], ["e"], name="else_neg")],
        "else",
        [],
        [helper.make_tensor_value_info("e", f32, [2])],
    )
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["acc", "two"], ["acc1"], name="body_mul"),
            helper.make_node("Add", ["acc1", "one"], ["acc2"], name="body_add"),
            helper.make_node("ReduceSum", ["acc2"], ["s"], name="body_sum", keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["pos"], name="body_gt"),
            helper.make_node(
                "If", ["pos"], ["acc_out"], name="body_if", then_branch=then_g, else_branch=else_g
            ),
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
        ],
        "loop_body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc", f32, [2]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", f32, [2]),
        ],
    )
    twice = helper.make_function(
        "local",
        "Twice",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"], name="fn_add")],
        [helper.make_opsetid("", 17)],
    )
    inits = [
        numpy_helper.from_array(np.array(3, np.int64), "trips"),
        numpy_helper.from_array(np.array(True), "cond"),
        numpy_helper.from_array(np.array(2.0, np.float32), "two"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
    ]
    g = helper.make_graph(
        [
            helper.make_node("Loop", ["trips", "cond", "x"], ["looped"], name="the_loop", body=body),
            helper.make_node("Twice", ["looped"], ["out"], domain="local", name="call_twice"),
        ],
        "main",
        [helper.make_tensor_value_info("x", f32, [2])],
        [helper.make_tensor_value_info("out", f32, [2])],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    m.functions.append(twice)
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return path


def test_navigation_documents(tmp_path: Path) -> None:
    doc = load_document(_model_with_inner_graphs(tmp_path / "inner.onnx"))
    loop = doc.graph.node_by_name["the_loop"]
    assert inner_graphs(doc, loop) == [("the_loop ▸ body", "sub:body")]
    body = subgraph_document(doc, loop, "body")
    assert [n.name for n in body.graph.nodes][:2] == ["body_mul", "body_add"]
    assert body.model.graph.node[0].name == "body_mul"  # the view's proto matches the view's graph
    # nested: the If inside the body opens too
    if_idx = body.graph.node_by_name["body_if"]
    then = subgraph_document(body, if_idx, "then_branch")
    assert [n.op_type for n in then.graph.nodes] == ["Identity"]
    call = doc.graph.node_by_name["call_twice"]
    assert inner_graphs(doc, call) == [("call_twice ▸ function local:Twice", "fn:local:Twice")]
    fn = function_document(doc, "local:Twice")
    assert [n.name for n in fn.graph.nodes] == ["fn_add"] and fn.graph.inputs == ["a"]


@pytest.fixture
def win(qtbot, tmp_path, monkeypatch):
    shown: list = []
    monkeypatch.setattr(dialogs, "show_error", lambda parent, title, message: shown.append(message))
    w = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.show()
    yield w
    w.session.jobs.shutdown()


def test_open_body_then_nested_if_then_back_up(qtbot, win, tmp_path: Path) -> None:
    path = _model_with_inner_graphs(tmp_path / "inner.onnx")
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.open_file(path)
    loop = win.doc.graph.node_by_name["the_loop"]
    win.scene.select_keys([node_key(loop)])
    assert "body" in win.inspector.text() and "Inner graphs" in win.inspector.text()

    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.open_selected_inner()
    labels = {it.box.label for it in win.scene.boxes.values() if it.box.kind == "node"}
    assert labels == {"Mul", "Add", "ReduceSum", "Greater", "If", "Identity"}
    assert win.crumb_bar.isVisibleTo(win) and "the_loop ▸ body" in win.crumb_label.text()

    if_idx = win.doc.graph.node_by_name["body_if"]
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.inspector.inner_graph_requested.emit(if_idx, "sub:else_branch")
    assert {it.box.label for it in win.scene.boxes.values() if it.box.kind == "node"} == {"Neg"}
    assert "body_if ▸ else_branch" in win.crumb_label.text()

    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.go_up()
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.go_up()
    assert {it.box.label for it in win.scene.boxes.values() if it.box.kind == "node"} == {"Loop", "Twice"}
    assert not win.crumb_bar.isVisibleTo(win)


def test_open_local_function_from_menu_and_search_inside(qtbot, win, tmp_path: Path) -> None:
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.open_file(_model_with_inner_graphs(tmp_path / "inner.onnx"))
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.open_function("local:Twice")
    assert [it.box.label for it in win.scene.boxes.values() if it.box.kind == "node"] == ["Add"]
    assert "function local:Twice" in win.crumb_label.text()
    # a node without inner graphs says so instead of failing
    win.scene.select_keys([node_key(0)])
    win.open_selected_inner()
    assert "no subgraph" in win.statusBar().currentMessage()
