"""Issue 19: the window's figures agree with the CLI's (counts, shapes) and its manners (focus, loading)."""

from __future__ import annotations

from PySide6.QtCore import QSettings

from fuseview.graph.loader import load_document
from fuseview.session.reports import InfoReport
from fuseview.ui.main_window import MainWindow
from tests import test_ui_workbench
from tests.test_ui_workbench import GPT2_2L, MS, open_scanned

win = test_ui_workbench.win  # the same window fixture (dialogs patched out, a private settings file)


def apply_all(qtbot, w: MainWindow) -> None:
    w.workbench.panel.accept_all()
    with qtbot.waitSignal(w.workbench.applied, timeout=MS):
        assert w.workbench.apply()
    qtbot.waitUntil(lambda: not w.busy, timeout=MS)


def test_node_counts_are_infos_with_drawn_apart(qtbot, win, tmp_path):
    open_scanned(qtbot, win, GPT2_2L)
    info = InfoReport.of(load_document(GPT2_2L)).to_json()
    c = win.counts()
    assert (c["nodes"], c["drawn"]) == (info["nodes"], info["visible_nodes"]) and c["nodes"] > c["drawn"]
    assert f"{info['nodes']:,} nodes ({info['visible_nodes']:,} drawn)" in win.counts_label.text()
    apply_all(qtbot, win)
    saved = win.workbench.save_fused(tmp_path / "fused.onnx")
    fused = InfoReport.of(load_document(saved)).to_json()
    title = win.workbench.fused_pane.title.full_text
    delta = fused["nodes"] - info["nodes"]
    drawn = fused["visible_nodes"]
    assert title.startswith(f"Fused — {fused['nodes']:,} nodes ({delta:+,}; {drawn:,} drawn)")
    assert win.workbench.original_title.full_text == f"Original — {info['nodes']:,} nodes" \
        f" ({info['visible_nodes']:,} drawn)"


def test_a_truncated_model_gets_a_dialog_that_says_so(qtbot, tmp_path):
    """A real modal box (not patched out): its text names the truncation, the window keeps its model."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    w = MainWindow(settings=QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.show()
    good = GPT2_2L.read_bytes()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(good[: len(good) // 2])
    seen: list[tuple[str, str]] = []

    def close_box() -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            seen.append((box.windowTitle(), box.text()))
            box.accept()
        else:
            QTimer.singleShot(20, close_box)

    QTimer.singleShot(20, close_box)
    w.open_file(cut)
    qtbot.waitUntil(lambda: bool(seen), timeout=MS)
    title, text = seen[0]
    assert f"truncated or corrupt ONNX file ({len(good) // 2:,} bytes, ended inside field graph." in text
    assert "cut.onnx" in text and title
    w.session.jobs.shutdown()


def test_fused_nodes_show_shapes_and_the_models_dim_names(qtbot, win):
    open_scanned(qtbot, win, GPT2_2L)
    original = win.workbench.session.root
    apply_all(qtbot, win)
    fdoc = win.workbench.session.fused.doc
    fused_boxes = [it for it in win.workbench.fused_pane.scene.boxes.values()
                   if it.box.kind == "node" and fdoc.graph.nodes[it.box.node].domain == "com.microsoft"]
    assert len(fused_boxes) >= 8  # attention, skip layer norms, FastGelu
    for it in fused_boxes:
        assert "?" not in it.sublabel and "unk__" not in it.sublabel, it.sublabel
        win.inspector.show_box(fdoc, it.box)
        text = win.inspector.text()
        node = fdoc.graph.nodes[it.box.node]
        for o in (o for o in node.outputs if o):
            t = fdoc.graph.tensors[o]
            assert t.dtype and t.shape is not None and f"{t.dtype} {t.shape_text}" in text
        assert "unk__" not in text
    # the dims are the model's own names, as its inputs call them
    assert original.graph.tensors["input_ids"].shape == ("batch", "seq")
    shapes = {t.shape for t in fdoc.graph.tensors.values() if t.shape}
    assert ("batch", "seq", 64) in shapes
    assert not any(isinstance(d, str) and d.startswith("unk__") for s in shapes for d in s)
    assert not any(isinstance(d, str) and d.startswith("unk__")
                   for t in original.graph.tensors.values() for d in (t.shape or ()))


def test_search_hands_the_keys_back_to_the_graph(qtbot, win):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    open_scanned(qtbot, win, GPT2_2L)
    win.activateWindow()
    qtbot.waitUntil(win.isActiveWindow, timeout=5000)
    win.view.setFocus()
    qtbot.keyClick(win.view, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)  # Ctrl+F
    qtbot.waitUntil(lambda: QApplication.focusWidget() is win.search.edit, timeout=5000)
    qtbot.keyClicks(win.search.edit, "Softmax")
    qtbot.keyClick(win.search.edit, Qt.Key.Key_Return)
    assert QApplication.focusWidget() is win.view and win.search.count_label.text() == "1 of 2"
    qtbot.keyClick(win.view, Qt.Key.Key_N)  # the next candidate, not an "N" typed into the box
    qtbot.keyClick(win.view, Qt.Key.Key_F)  # fit
    assert win.search.edit.text() == "Softmax"
    qtbot.keyClick(win.view, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)  # a second Ctrl+F: type on
    qtbot.waitUntil(lambda: QApplication.focusWidget() is win.search.edit, timeout=5000)
    qtbot.keyClick(win.search.edit, Qt.Key.Key_End)
    qtbot.keyClicks(win.search.edit, "_1")
    assert win.search.edit.text() == "Softmax_1"
    qtbot.keyClick(win.search.edit, Qt.Key.Key_Escape)
    assert QApplication.focusWidget() is win.view and win.search.edit.text() == "Softmax_1"


def test_while_a_model_loads_the_status_bar_says_what_and_which_stage(qtbot, win):
    from PySide6.QtCore import QTimer

    from tests.conftest import GPT2_MODELS as models

    big = models / "gpt2_12l_ts17.onnx"
    shown: list[tuple[str, str]] = []  # what the bar said at each step, read as it changes
    seen: list[tuple[str, str, bool]] = []  # and whether it fit, once the status bar has laid it out

    def look() -> None:
        if win.jobs.stage.isVisible():
            shown.append((win.counts_label.text(), win.jobs.stage.text()))
        QTimer.singleShot(0, measure)  # a fast load may be over by then: its steps are in `shown`

    def measure() -> None:
        stage = win.jobs.stage
        if stage.isVisible():
            fits = stage.width() >= stage.sizeHint().width() and win.progress.fontMetrics().horizontalAdvance(
                win.progress.text()) < win.progress.width()
            seen.append((win.counts_label.text(), stage.text(), fits))

    win.jobs.progress.valueChanged.connect(look)
    with qtbot.waitSignal(win.document_shown, timeout=MS):
        win.open_file(big)
    qtbot.waitUntil(lambda: not win.busy, timeout=MS)
    assert shown, "no progress was shown"
    assert all(label == f"Opening {big.name}…" for label, _ in shown)
    assert any(stage.startswith(f"Opening {big.name}: ") for _, stage in shown), shown
    assert all(fits for _, _, fits in seen), [st for _, st, f in seen if not f]
    assert not win.jobs.stage.isVisible() and "nodes (" in win.counts_label.text()
