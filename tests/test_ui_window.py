"""The main window with real models (offscreen): open, search, inspect, expand/collapse, errors, cancel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import numpy_helper
from PySide6.QtCore import QMimeData, QPoint, QPointF, QSettings, Qt, QUrl
from PySide6.QtGui import QDropEvent

from fuseview.graph.geometry import group_key, node_key
from fuseview.graph.loader import load_document
from fuseview.ui import dialogs
from fuseview.ui.main_window import MainWindow
from fuseview.ui.search import find_nodes
from tests.conftest import GPT2_MODELS, ONNX_BACKEND_DATA

GPT2_2L = GPT2_MODELS / "gpt2_2l_ts17.onnx"
GPT2_12L = GPT2_MODELS / "gpt2_12l_ts13.onnx"
GPT2_48L = GPT2_MODELS / "gpt2_48l_ts13.onnx"
RESNET = ONNX_BACKEND_DATA / "light" / "light_resnet50.onnx"
LOAD_MS = 60_000


@pytest.fixture
def errors(monkeypatch) -> list[tuple[str, str]]:
    """Error dialogs the window asked for (intercepted: a modal box would block the test)."""
    shown: list[tuple[str, str]] = []
    monkeypatch.setattr(dialogs, "show_error", lambda parent, title, message: shown.append((title, message)))
    return shown


@pytest.fixture
def win(qtbot, tmp_path, errors) -> MainWindow:
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    w = MainWindow(settings=settings)
    qtbot.addWidget(w)
    w.resize(1200, 800)
    w.show()
    yield w
    w.session.jobs.shutdown()


def open_and_wait(qtbot, w: MainWindow, path: Path) -> None:
    with qtbot.waitSignal(w.document_shown, timeout=LOAD_MS):
        w.open_file(path)
    assert not w.busy


def test_open_gpt2_draws_every_node(qtbot, win):
    open_and_wait(qtbot, win, GPT2_2L)
    doc = load_document(GPT2_2L)
    visible = len(doc.graph.visible_nodes())
    counts = win.counts()
    assert counts["drawn"] == visible and counts["nodes"] == len(doc.graph.nodes)
    # a 2-layer GPT-2 is small: drawn flat, one box per visible node plus inputs and outputs
    assert counts["boxes"] == len(win.layout_.boxes) >= visible
    assert counts["edges"] > visible // 2
    assert f"{len(doc.graph.nodes):,} nodes ({visible:,} drawn)" in win.counts_label.text()
    assert win.windowTitle().startswith("gpt2_2l_ts17.onnx")
    assert win.recent_files()[0] == str(GPT2_2L.resolve())


def test_open_cnn_from_backend_data(qtbot, win):
    open_and_wait(qtbot, win, RESNET)
    convs = [k for k, it in win.scene.boxes.items() if it.box.kind == "node" and it.box.label == "Conv"]
    assert len(convs) == sum(1 for n in win.doc.graph.nodes if n.op_type == "Conv")
    assert all(win.scene.boxes[k].category == "linear" for k in convs)


def _centre(win: MainWindow) -> QPointF:
    return win.view.view_center()


def test_search_by_op_type_steps_through_hits(qtbot, win):
    open_and_wait(qtbot, win, GPT2_2L)
    expected = sorted(n.index for n in win.doc.graph.nodes if n.op_type == "Softmax" and n.visible)
    assert len(expected) == 2
    win.search.focus()
    qtbot.keyClicks(win.search.edit, "softmax")
    seen = []
    for _ in expected:
        qtbot.keyClick(win.search.edit, Qt.Key.Key_Return)
        assert win.scene.selected_keys() == [node_key(win.search.hits[win.search.position])]
        item = win.scene.boxes[win.scene.selected_keys()[0]]
        # the hit is centred in the view
        d = item.sceneBoundingRect().center() - _centre(win)
        assert abs(d.x()) < 2 and abs(d.y()) < 2
        seen.append(win.search.hits[win.search.position])
    assert seen == expected
    assert win.search.count_label.text() == "2 of 2"
    qtbot.keyClick(win, Qt.Key.Key_F3)  # wraps around
    assert win.scene.selected_keys() == [node_key(expected[0])]


def test_search_by_name_and_tensor(qtbot, win):
    open_and_wait(qtbot, win, GPT2_2L)
    g = win.doc.graph
    target = next(n for n in g.nodes if n.op_type == "LayerNormalization")
    assert find_nodes(g, target.name) == [target.index]
    tensor = target.outputs[0]
    hits = find_nodes(g, tensor)
    consumers = {c for c in g.tensors[tensor].consumers}
    assert target.index in hits and consumers <= set(hits)
    win.search.edit.setText(tensor)
    centres = []
    for _ in hits:
        win.search.next_hit()
        key = win.scene.selected_keys()[0]
        centres.append(win.scene.boxes[key].sceneBoundingRect().center())
        assert (_centre(win) - centres[-1]).manhattanLength() < 4
    assert len({(round(c.x()), round(c.y())) for c in centres}) == len(hits)  # each hit moved the view


def test_highlight_all_nodes_of_an_op_type(qtbot, win):
    open_and_wait(qtbot, win, GPT2_2L)
    win.search.choose_op("MatMul")
    expected = {node_key(n.index) for n in win.doc.graph.nodes if n.op_type == "MatMul" and n.visible}
    assert set(win.scene.highlighted_keys()) == expected
    qtbot.keyClick(win.view, Qt.Key.Key_Escape)
    assert win.scene.highlighted_keys() == []


def test_inspector_shows_op_inputs_shapes_and_weights(qtbot, win):
    open_and_wait(qtbot, win, GPT2_2L)
    g = win.doc.graph
    node = next(n for n in g.nodes if n.op_type == "LayerNormalization" and n.folded_inputs)
    win.scene.select_keys([node_key(node.index)])
    text = win.inspector.text()
    assert "LayerNormalization" in text and node.name in text
    x = node.inputs[0]
    assert f"{x}\t{g.tensors[x].dtype} {g.tensors[x].shape_text}" in text
    y = node.outputs[0]
    assert f"{y}\t{g.tensors[y].dtype} {g.tensors[y].shape_text}" in text
    # folded weight: shape and the first values, read from the file's initializer
    w = node.folded_inputs[0]
    init = next(t for t in win.doc.model.graph.initializer if t.name == w)
    first = numpy_helper.to_array(init).reshape(-1)[0]
    assert f"{w}\t{g.tensors[w].dtype} {g.tensors[w].shape_text}" in text
    assert f"[{float(first):.4g}, " in text
    assert "epsilon" in text  # attributes
    assert win.counts()["selected"] == 1


def test_keyboard_zoom_fit_and_escape(qtbot, win):
    open_and_wait(qtbot, win, GPT2_2L)
    win.view.setFocus()
    s0 = win.view.scale_factor()
    qtbot.keyClick(win.view, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    assert win.view.scale_factor() == pytest.approx(s0 * 1.25)
    qtbot.keyClick(win.view, Qt.Key.Key_Minus, Qt.KeyboardModifier.ControlModifier)
    assert win.view.scale_factor() == pytest.approx(s0)
    qtbot.keyClick(win.view, Qt.Key.Key_F)
    whole = win.scene.itemsBoundingRect()
    shown = win.view.visible_scene_rect()
    assert shown.contains(whole.adjusted(5, 5, -5, -5))
    win.scene.select_keys([next(iter(win.scene.boxes))])
    qtbot.keyClick(win.view, Qt.Key.Key_Escape)
    assert win.scene.selected_keys() == []
    # single-letter shortcuts (F fit, Z, E, C) do not steal typing in the search line
    win.view.zoom_by(1.7)  # away from fit, so a stolen F would show
    s1 = win.view.scale_factor()
    win.search.focus()
    qtbot.keyClicks(win.search.edit, "fzec")
    assert win.search.edit.text() == "fzec"
    assert win.view.scale_factor() == s1


def _top_on_screen(win: MainWindow, item) -> QPoint:
    r = item.sceneBoundingRect()
    return win.view.mapFromScene(QPointF(r.center().x(), r.top()))


def _double_click_at(qtbot, win: MainWindow, point: QPointF) -> None:
    qtbot.mouseDClick(win.view.viewport(), Qt.MouseButton.LeftButton, pos=win.view.mapFromScene(point))


def test_expand_and_collapse_a_group(qtbot, win):
    open_and_wait(qtbot, win, GPT2_12L)  # 12 layers: opens grouped by name scope
    assert win.expanded is not None
    groups = [it for it in win.scene.boxes.values() if it.box.kind == "group" and "h.3" in it.box.scope]
    assert groups, "expected the layer groups h.0..h.11 collapsed"
    group = groups[0]
    scope = tuple(group.box.scope)
    boxes_before = win.counts()["boxes"]
    win.view.set_zoom(1.0)
    win.view.centerOn(group.sceneBoundingRect().center())
    top_before = _top_on_screen(win, group)
    _double_click_at(qtbot, win, group.sceneBoundingRect().center())
    qtbot.waitUntil(lambda: group_key(scope) in win.scene.frames, timeout=LOAD_MS)
    assert win.counts()["boxes"] > boxes_before
    assert group_key(scope) not in win.scene.boxes
    frame = win.scene.frames[group_key(scope)]
    # the opened group stays where it was on screen
    top_after = _top_on_screen(win, frame)
    assert abs(top_after.x() - top_before.x()) <= 3 and abs(top_after.y() - top_before.y()) <= 3
    # its nodes are drawn now
    inside = [n.index for n in win.doc.graph.nodes if n.visible and n.scope[: len(scope)] == scope]
    assert any(node_key(i) in win.scene.boxes for i in inside)
    # double-click on the frame's header collapses it again
    header = frame.mapRectToScene(frame.header_rect())
    _double_click_at(qtbot, win, QPointF(header.left() + 30, header.center().y()))
    qtbot.waitUntil(lambda: group_key(scope) in win.scene.boxes, timeout=LOAD_MS)
    assert win.counts()["boxes"] == boxes_before


def test_expand_all_and_collapse_all(qtbot, win):
    open_and_wait(qtbot, win, GPT2_12L)
    grouped = win.counts()["boxes"]
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.expand_all()
    assert win.expanded is None
    g = win.doc.graph
    assert win.counts()["boxes"] == win.counts()["drawn"] + len(g.inputs) + len(g.outputs)
    assert win.counts()["boxes"] > grouped
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.collapse_all()
    assert win.counts()["boxes"] == grouped


def test_search_reveals_a_node_inside_a_collapsed_group(qtbot, win):
    open_and_wait(qtbot, win, GPT2_12L)
    g = win.doc.graph
    target = next(n for n in g.nodes if n.op_type == "Softmax" and "h.7" in n.scope)
    assert node_key(target.index) not in win.scene.boxes
    win.search.edit.setText(target.name)
    win.search.next_hit()
    qtbot.waitUntil(lambda: win.scene.selected_keys() == [node_key(target.index)], timeout=LOAD_MS)
    item = win.scene.boxes[node_key(target.index)]
    assert (item.sceneBoundingRect().center() - _centre(win)).manhattanLength() < 4


@pytest.mark.parametrize("kind", ["not_onnx", "empty", "missing"])
def test_bad_file_shows_error_and_keeps_previous_model(qtbot, win, errors, tmp_path, kind):
    open_and_wait(qtbot, win, GPT2_2L)
    scene, doc = win.scene, win.doc
    bad = tmp_path / "bad.onnx"
    if kind == "not_onnx":
        bad.write_bytes(b"this is not a protobuf \x00\xff\xfe" * 50)
    elif kind == "empty":
        bad.write_bytes(b"")
    with qtbot.waitSignal(win.error_shown, timeout=LOAD_MS) as sig:
        win.open_file(bad)
    assert len(errors) == 1
    title, message = errors[0]
    assert "\n" not in message and str(bad) in message
    assert sig.args == [message]
    assert win.doc is doc and win.scene is scene and win.view.scene() is scene
    assert win.counts()["boxes"] == len(win.layout_.boxes) > 0
    assert not win.busy and not win.progress.isVisible()
    open_and_wait(qtbot, win, RESNET)  # still usable


def test_cancel_long_load_keeps_window_usable(qtbot, win, errors):
    open_and_wait(qtbot, win, GPT2_2L)
    doc = win.doc
    job = win.open_file(GPT2_48L)
    assert win.busy and win.cancel_button.isVisible()
    qtbot.mouseClick(win.cancel_button, Qt.MouseButton.LeftButton)
    assert not win.busy and not win.progress.isVisible()
    assert win.doc is doc
    qtbot.waitUntil(lambda: not win.session.jobs.running(), timeout=LOAD_MS)
    del job
    qtbot.wait(50)  # let any queued signal of the cancelled job arrive: it must be ignored
    assert win.doc is doc and errors == []
    open_and_wait(qtbot, win, RESNET)
    assert win.doc.path == RESNET


def test_drop_an_onnx_file_opens_it(qtbot, win):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(GPT2_2L))])
    event = QDropEvent(
        QPointF(10, 10),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        win.view.dropEvent(event)
    assert win.doc.path == GPT2_2L


def test_open_recent_menu_lists_opened_files(qtbot, win):
    open_and_wait(qtbot, win, GPT2_2L)
    open_and_wait(qtbot, win, RESNET)
    assert win.recent_files()[:2] == [str(RESNET.resolve()), str(GPT2_2L.resolve())]
    win.recent.fill_menu(win.recent_menu, win.request_open)
    texts = [a.text() for a in win.recent_menu.actions()]
    assert any("light_resnet50.onnx" in t for t in texts) and any("gpt2_2l_ts17.onnx" in t for t in texts)
    act = next(a for a in win.recent_menu.actions() if "gpt2_2l_ts17.onnx" in a.text())
    with qtbot.waitSignal(win.document_shown, timeout=LOAD_MS):
        act.trigger()
    assert win.doc.path == Path(str(GPT2_2L.resolve()))


def test_wheel_zoom_keeps_point_under_cursor(qtbot, win):
    open_and_wait(qtbot, win, GPT2_2L)
    from PySide6.QtGui import QWheelEvent

    win.view.set_zoom(0.6)
    win.view.centerOn(win.scene.sceneRect().center())  # away from the scroll limits
    vp = win.view.viewport()
    pos = QPointF(vp.width() * 0.3, vp.height() * 0.4)
    before = win.view.mapToScene(pos.toPoint())
    s0 = win.view.scale_factor()
    ev = QWheelEvent(
        pos,
        vp.mapToGlobal(pos),
        QPoint(0, 0),
        QPoint(0, 240),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    win.view.wheelEvent(ev)
    assert win.view.scale_factor() == pytest.approx(s0 * 1.0015**240)
    after = win.view.mapToScene(pos.toPoint())
    assert (after - before).manhattanLength() < 3 / win.view.scale_factor() + 2


def test_weights_preview_values_match_numpy(qtbot, win):
    open_and_wait(qtbot, win, GPT2_2L)
    from fuseview.ui.inspector import weight_preview

    init = win.doc.model.graph.initializer[0]
    arr = numpy_helper.to_array(init).reshape(-1)
    text = weight_preview(win.doc, init.name)
    values = [float(v) for v in text.strip("[]").replace(", …", "").split(", ")]
    np.testing.assert_allclose(values, arr[: len(values)], rtol=1e-3, atol=1e-6)


def test_every_session_event_has_a_subscriber_in_the_window(win):
    """The window is views over the Session: each event the session sends is heard by one of them."""
    from fuseview.session.session import SESSION_EVENTS

    unheard = [e.type for e in win.session.events if not e.callbacks]
    assert sorted(e.type for e in win.session.events) == sorted(SESSION_EVENTS)
    assert unheard == []


def test_views_start_background_work_only_through_the_session():
    """One door to background work: the views call Session operations; none submits a job or starts a
    thread of its own (the Qt dispatch of the session's job service is the only Qt piece of it)."""
    import re

    ui = Path(__file__).resolve().parent.parent / "fuseview" / "ui"
    doors = re.compile(r"\.submit\(|threading\.Thread\(|QThread\(|QThreadPool|threading\.Event\(")
    found = {f.name: doors.findall(f.read_text(encoding="utf-8")) for f in sorted(ui.glob("*.py"))}
    assert {k: v for k, v in found.items() if v} == {}


def test_views_write_the_status_line_only_through_the_session(qtbot, win):
    """One writer of the status bar (the window's status subscriber); views call session.set_status."""
    import re

    ui = Path(__file__).resolve().parent.parent / "fuseview" / "ui"
    direct = {}
    for f in sorted(ui.glob("*.py")):
        n = len(re.findall(r"statusBar\(\)\s*\.\s*showMessage\(", f.read_text(encoding="utf-8")))
        if n:
            direct[f.name] = n
    assert direct == {"main_window.py": 1}  # the subscriber to session.events.status
    win.session.set_status("Wrote a picture", 5000)
    assert win.statusBar().currentMessage() == "Wrote a picture"
