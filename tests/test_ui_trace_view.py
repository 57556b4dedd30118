"""The trace comparison dock on the real committed traces, offscreen Qt: loading off the UI thread,
plots, diff table filters, exports, bad input, File menu and drag-and-drop in the main window."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QImage

from fuseview.traces.report import load_report
from fuseview.ui.main_window import MainWindow
from fuseview.ui.trace_kernels import kernel_label
from fuseview.ui.trace_view import (
    ADDED,
    AFTER,
    BEFORE,
    KERNEL,
    REMOVED,
    REPLACED,
    SELF,
    TOTAL,
    TraceView,
    event_rows,
)
from tests.conftest import ROOT

TRACES = ROOT / "tests" / "data" / "traces"
PAIR = [TRACES / "attention_eager.json", TRACES / "attention_compiled.json"]
PROVENANCE_CAPTURE = TRACES / "provenance" / "mlp_block_onnx"  # a capture with model.onnx: the join too


@pytest.fixture
def view(qtbot):
    v = TraceView()
    v.show_dialogs = False
    qtbot.addWidget(v)
    v.resize(1000, 700)
    v.show()
    return v


def load(qtbot, view, paths, timeout=20000):
    with qtbot.waitSignal(view.loaded, timeout=timeout):
        job = view.open_traces(paths)
        assert job is not None and view.is_running  # the read happens in the job's thread
    assert not view.is_running


def test_compare_draws_plots_and_table(qtbot, view):
    load(qtbot, view, PAIR)
    rep = view.report
    assert "step time before/after" in view.status.text()
    labels = view.event_plot.labels
    assert view.event_plot.bar_count() > 5 and set(view.event_plot.bars) == {BEFORE, AFTER}
    # self time per step by default (nested calls counted once), the number the CLI prints; linear axes
    assert view.time_stat.currentText() == SELF and not view.event_plot.log_x and not view.kernel_plot.log_x
    selfs = [{e["name"]: e["self_us"] / t["steps"] for e in t["events"]} for t in rep["traces"]]
    biggest = [max(t.get(n, 0.0) for t in selfs) for n in labels]
    assert biggest == sorted(biggest, reverse=True)
    assert any(lbl.startswith("graph_3_cpp_fused") for lbl in view.event_plot.labels)
    view.time_stat.setCurrentText(TOTAL)
    totals = [{e["name"]: e["per_step_us"] for e in t["events"]} for t in rep["traces"]]
    biggest = [max(t.get(n, 0.0) for t in totals) for n in view.event_plot.labels]
    assert biggest == sorted(biggest, reverse=True)
    kernels = [kernel_label(k) for k in rep["diff"]["fused_kernels"]]
    assert view.kernel_plot.labels == kernels and set(view.kernel_plot.bars) == {REPLACED, KERNEL}
    # each row names the ops the kernel replaced, on screen
    assert all("  ←  " in lbl for lbl in view.kernel_plot.labels)
    assert view.step_plot.bar_count() == 12
    rows = event_rows(rep)
    assert view.table.rowCount() == len(rows)
    # unsorted until asked: slowest event (either trace) first; then sortable by a number column
    assert view.table.item(0, 0).text() == rows[0]["name"]
    view.table.sortItems(7)  # Δ µs/step, ascending: the biggest saving first
    assert view.table.item(0, 0).text() == min(rows, key=lambda r: r["delta"])["name"]


def test_table_filters(qtbot, view):
    load(qtbot, view, PAIR)
    rows = event_rows(view.report)
    total = view.table.rowCount()
    assert view.apply_filters() == total
    view.filter_change.setCurrentText(ADDED)
    assert view.apply_filters() == sum(r["change"] == ADDED for r in rows) > 0
    view.filter_change.setCurrentText(REMOVED)
    view.filter_text.setText("softmax")
    visible = [view.table.item(i, 0).text() for i in range(total) if not view.table.isRowHidden(i)]
    assert visible and all("softmax" in n and n in view.report["diff"]["removed"] for n in visible)
    view.filter_change.setCurrentText("all changes")
    view.filter_text.setText("")
    view.filter_category.setCurrentText("compiled kernel")
    visible = [view.table.item(i, 0).text() for i in range(total) if not view.table.isRowHidden(i)]
    assert sorted(visible) == sorted(k["name"] for k in view.report["diff"]["fused_kernels"])


def test_no_fusion_says_so_in_the_kernel_plot(qtbot, view):
    load(qtbot, view, [TRACES / "encoder_fastpath_eager.json", TRACES / "encoder_fastpath_compiled.json"])
    assert not view.kernel_plot.has_data
    assert "compile fused nothing" in view.kernel_plot.message.text()
    assert "compile fused nothing" in view.status.text()


def test_exports(qtbot, view, tmp_path):
    load(qtbot, view, PAIR)
    rep = load_report(view.save_report(tmp_path / "r.json"))
    assert rep["diff"]["fused_kernels"] == view.report["diff"]["fused_kernels"]
    written = view.export_plots(tmp_path, "png")
    assert sorted(p.name for p in written) == ["trace_events.png", "trace_kernels.png", "trace_steps.png"]
    img = QImage(str(tmp_path / "trace_kernels.png"))
    assert img.width() == 1000 and img.height() > 300
    svg = view.export_plots(tmp_path, "svg")
    assert all(p.read_text().lstrip().startswith("<?xml") for p in svg)


@pytest.mark.parametrize("bad", ["truncated", "onnx"])
def test_bad_input_reports_and_stays_usable(qtbot, view, tmp_path, bad):
    if bad == "truncated":
        path = tmp_path / "cut.json"
        path.write_bytes(PAIR[0].read_bytes()[:5000])
    else:
        path = TRACES / "ort_mlp.onnx"
    with qtbot.waitSignal(view.failed, timeout=20000) as sig:
        view.open_traces([PAIR[0], path])
    assert str(path) in sig.args[0] and view.report is None
    assert view.open_button.isEnabled() and not view.is_running
    load(qtbot, view, PAIR)  # still usable


def test_single_onnxruntime_trace(qtbot, view):
    load(qtbot, view, [TRACES / "ort_mlp.json"])
    assert view.report["diff"] is None and not view.kernel_plot.has_data
    assert "/up/MatMul" in view.event_plot.labels
    seen = []
    view.node_requested.connect(seen.append)
    row = view.event_plot.labels.index("/up/MatMul")
    view.event_plot.click(row, BEFORE)
    assert seen == ["/up/MatMul"]


def _drop(win, paths):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    ev = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                    Qt.KeyboardModifier.NoModifier)
    win.dropEvent(ev)
    return ev


def test_window_menu_and_drop(qtbot, tmp_path):
    win = MainWindow(settings=None)
    win.show_dialogs = False
    win.remember_files = False
    qtbot.addWidget(win)
    titles = [a.text() for a in win.menuBar().actions()[0].menu().actions()]
    assert "Compare &Traces…" in titles
    assert win.trace_view is None
    win.trace_view_for()  # as the menu action does before its file dialog
    win.trace_view.show_dialogs = False
    with qtbot.waitSignal(win.trace_view.loaded, timeout=20000):
        ev = _drop(win, PAIR)
    assert ev.isAccepted()
    assert win.trace_view.report["traces"][1]["path"] == str(PAIR[1])
    win.close()


def test_window_maps_onnxruntime_events_to_nodes(qtbot):
    win = MainWindow(settings=None)
    win.show_dialogs = False
    win.remember_files = False
    qtbot.addWidget(win)
    with qtbot.waitSignal(win.document_shown, timeout=30000):
        win.open_file(TRACES / "ort_mlp.onnx")
    tv = win.trace_view_for()
    tv.show_dialogs = False
    with qtbot.waitSignal(tv.loaded, timeout=20000):
        tv.open_traces([TRACES / "ort_mlp.json"])
    tv.event_plot.click(tv.event_plot.labels.index("/norm/LayerNormalization"), BEFORE)
    qtbot.waitUntil(lambda: any(b.isSelected() for b in win.scene.boxes.values()), timeout=20000)
    selected = [k for k, b in win.scene.boxes.items() if b.isSelected()]
    node = win.doc.graph.node_by_name["/norm/LayerNormalization"]
    assert len(selected) == 1 and str(node) in str(selected[0])
    win.close()


def test_report_rows_are_plain_data():
    rep = json.loads(json.dumps(load_report_for_pair()))
    rows = event_rows(rep)
    assert {r["change"] for r in rows} == {ADDED, REMOVED, "in both"}


def load_report_for_pair():
    from fuseview.traces.report import build_report
    from fuseview.traces.stats import load_trace

    return build_report(load_trace(PAIR[0]), load_trace(PAIR[1]))


CAPTURE = TRACES / "provenance" / "mlp_block"


def test_capture_folder_shows_exact_attribution(qtbot, view):
    load(qtbot, view, [CAPTURE])
    assert view.isWindow()  # its own window, not a dock
    assert "attributed by Inductor's provenance, 0 guessed" in view.status.text()
    panel = view.kernels
    assert panel.table.rowCount() == len(view.report["diff"]["fused_kernels"]) > 0
    cols = [panel.table.horizontalHeaderItem(c).text() for c in range(panel.table.columnCount())]
    verdicts = [panel.table.item(r, cols.index("kernel vs the ops it replaced")).text()
                for r in range(panel.table.rowCount())]
    kernels = view.report["diff"]["fused_kernels"]
    assert all(v.startswith("kernel") for v in verdicts)
    for v, k in zip(verdicts, kernels, strict=True):  # words from the verdict of the kernel's interval
        assert k["speedup"]["verdict"] in v or (v.endswith("than the ops it replaced")
                                                 and k["speedup"]["verdict"] in ("faster", "slower"))
    sources = [panel.table.item(r, cols.index("source lines")).text() for r in range(panel.table.rowCount())]
    assert all(s.startswith("make_traces.py:") for s in sources)
    row = next(r for r in range(panel.table.rowCount()) if "layer_norm" in panel.table.item(r, 0).text())
    view.kernel_plot.click(row, KERNEL)
    assert panel.table.currentRow() == row
    text = panel.detail.text()
    assert "h = self.norm(x)" in text and "var_mean" in text and "aten::layer_norm" in text


def test_warm_up_run_is_left_out_and_said(qtbot, view):
    load(qtbot, view, [TRACES / "ort_mlp.json"])
    assert "left out (warm-up): model_run 1" in view.status.text()
    assert view.report["traces"][0]["steps"] == 5


def test_window_opens_the_workspace_as_its_own_window(qtbot):
    win = MainWindow(settings=None)
    win.show_dialogs = False
    win.remember_files = False
    qtbot.addWidget(win)
    win.resize(1200, 800)
    win.show()
    height = win.centralWidget().height()
    tv = win.trace_view_for()
    tv.show_dialogs = False
    with qtbot.waitSignal(tv.loaded, timeout=20000):
        tv.open_traces(PAIR)
    assert tv.isWindow() and tv.parent() is win
    assert win.centralWidget().height() == height  # the ONNX panes are not squeezed by it
    win.close()


def test_workspace_is_a_view_of_the_window_session(qtbot):
    """The window's session reads the traces (the pipeline `fuseview trace` runs); the workspace is made
    on the first traces event and draws it; a newer read supersedes the running one."""
    from fuseview.workflows.traces import open_traces

    win = MainWindow(settings=None)
    win.show_dialogs = False
    win.remember_files = False
    qtbot.addWidget(win)
    assert win.trace_view is None
    job = win.session.open_traces([PROVENANCE_CAPTURE])
    assert job.kind == "traces"
    qtbot.waitUntil(lambda: win.trace_view is not None and win.trace_view.report is not None, timeout=20000)
    tv = win.trace_view
    assert tv.session is win.session and not tv.is_running and tv.isVisible() and tv.isWindow()
    alone = open_traces([PROVENANCE_CAPTURE]).report.to_json()  # what `fuseview trace FOLDER --json` writes
    assert tv.report == win.session.traces.report.to_json() == alone
    assert tv.join.table.rowCount() > 0 and tv.flame.bar_count("before") > 0 < tv.flame.bar_count("after")
    tv.show_dialogs = False
    first = tv.open_traces(PAIR)
    with qtbot.waitSignal(tv.loaded, timeout=20000):
        second = tv.open_traces([TRACES / "ort_mlp.json"])
        assert first.cancelled and win.session.jobs.active("traces") == [second]
    assert [t["source"] for t in tv.report["traces"]] == ["onnxruntime"]
    assert "cancelled" not in tv.status.text()  # the superseded read says nothing over the newer one
    win.close()


def test_flame_view_draws_the_median_step_of_each_trace(qtbot, view):
    load(qtbot, view, [CAPTURE])
    flame = view.flame
    for role, t in (("before", view.report["traces"][0]), ("after", view.report["traces"][1])):
        tl = flame.timelines[role]
        assert tl.step_us == sorted(t["step_times_us"])[len(t["step_times_us"]) // 2]
        assert flame.bar_count(role) == len(tl.start) > 10
        assert (tl.start >= 0).all() and (tl.start < tl.step_us).all() and tl.depth.max() >= 2
    assert any(c == "compiled kernel" for c in flame.timelines["after"].categories)
    assert "median step" in flame.note.text()


def test_selecting_a_kernel_selects_its_post_grad_nodes(qtbot, view):
    load(qtbot, view, [TRACES / "provenance" / "graph_break"])
    panel = view.kernels
    for row, r in enumerate(panel.rows):
        panel.select(row)
        g = panel.graph
        assert g.graph_key == r["graph"]  # each graph drawn on its own (a graph break: two)
        doc = g._docs[r["graph"]][0]
        names = sorted(doc.graph.nodes[int(k[2:])].name for k in g.scene.selected_keys())
        assert names == sorted(r["post_grad"]) and names
        assert set(g.scene.marked_keys()) >= set(g.scene.selected_keys())


def test_a_capture_opens_on_its_kernels_without_python_frames(qtbot, view):
    """Issue 28.2: the first tab is the kernel table; Python frames only when asked; never fuseview's own."""
    load(qtbot, view, [CAPTURE])
    assert view.tabs.indexOf(view.kernels) == 0 and view.tabs.currentWidget() is view.kernels
    t = view.kernels.table
    names = [t.item(i, 0).text() for i in range(t.rowCount())]
    assert any("cpp_fused" in n for n in names) and any("extern_kernels.addmm" in n for n in names)
    verdicts = [t.item(i, 6).text() for i in range(t.rowCount())]
    assert all(v.startswith("kernel ") for v in verdicts)
    assert all(t.item(i, 8).text() for i in range(t.rowCount()))  # every kernel's source lines
    labels = view.event_plot.labels
    assert any(lbl.startswith("aten::") for lbl in labels)
    assert not any("(" in lbl and "): " in lbl for lbl in labels)  # no `file.py(12): f` frame
    shown = [view.table.item(i, 0).text() for i in range(view.table.rowCount())]
    assert not any("fuseview/capture/" in n or n.startswith("nn.Module") for n in shown)
    view.python.setChecked(True)
    shown = [view.table.item(i, 0).text() for i in range(view.table.rowCount())]
    assert any("): forward" in n for n in shown)
    assert not any("fuseview/capture/" in n for n in shown)


def test_a_frame_path_is_shown_relative_to_the_working_folder(tmp_path, monkeypatch):
    from fuseview.traces.display import shown_name

    monkeypatch.chdir(tmp_path)
    inside = str(tmp_path / "pkg" / "model.py")
    assert shown_name(f"{inside}(12): forward") == "pkg/model.py(12): forward"
    assert shown_name("/elsewhere/model.py(3): f") == "/elsewhere/model.py(3): f"
    assert shown_name("aten::addmm") == "aten::addmm"


def _overlaps(rects) -> list:
    return [(a, b) for i, a in enumerate(rects) for b in rects[i + 1:] if a.intersects(b)]


def test_flame_view_at_1200x800_reads(qtbot, view, tmp_path):
    """Issue 28.3: rows a text line tall, labels inside their boxes and never on each other, one time
    scale for both steps, zoom and pan on the time axis, hover with the whole name."""
    from PySide6.QtCore import QEvent, QPointF, Qt
    from PySide6.QtGui import QMouseEvent
    from PySide6.QtWidgets import QApplication

    from fuseview.traces.display import shown_name
    from fuseview.ui.trace_flame import FlameChart

    load(qtbot, view, [TRACES / "provenance" / "gpt2_block"])
    view.resize(1200, 800)
    view.show()
    view.tabs.setCurrentWidget(view.flame)
    qtbot.waitExposed(view)
    flame = view.flame
    flame.fit()
    shot = view.grab()
    assert shot.width() == 1200 and shot.height() == 800 and shot.save(str(tmp_path / "flame.png"))
    for role, chart in flame.charts.items():
        assert isinstance(chart, FlameChart) and chart.timeline is flame.timelines[role]
        assert chart.row_height >= chart.fontMetrics().height()
        assert len(chart.label_rects) >= 3, role
        assert not _overlaps(chart.label_rects), role
        boxes = [chart.box(i) for i in range(len(chart.timeline.start))]
        for r in chart.label_rects:  # each label inside the box it names
            assert any(b.contains(r.adjusted(1, 1, -1, -1)) for b in boxes)
    # one time scale: a µs is as wide in both charts
    before, after = flame.charts["before"], flame.charts["after"]
    assert before.box(0).width() / max(float(before.timeline.dur[0]), 1e-9) == pytest.approx(
        1 / flame.scale.us_per_px, rel=1e-6)
    assert before.scale is after.scale
    # zoom in about a point: that point stays, a µs gets wider; labels still apart; pan moves the origin
    scale0, x = flame.scale.us_per_px, 400.0
    at = before._us(x)
    qtbot.wait(1)
    flame.scale.zoom(4.0, at)
    assert flame.scale.us_per_px == pytest.approx(scale0 / 4) and before._us(x) == pytest.approx(at)
    fitted_labels = len(before.label_rects)
    before.repaint()
    assert not _overlaps(before.label_rects) and len(before.label_rects) > fitted_labels
    x0 = flame.scale.x0
    flame.scale.pan(100)
    assert flame.scale.x0 == pytest.approx(x0 + 100 * flame.scale.us_per_px)
    flame.fit()
    # hover: the whole name of the box under the pointer
    i = max(range(len(before.timeline.dur)), key=lambda k: (before.timeline.depth[k], before.timeline.dur[k]))
    centre = before.box(i).center()
    hit = before.event_at(QPointF(centre))
    assert hit == i
    assert before.hover_text(hit).split("\n")[0] == shown_name(before.timeline.names[hit])
    assert f"{float(before.timeline.dur[hit]):.1f} µs" in before.hover_text(hit)
    move = QMouseEvent(QEvent.Type.MouseMove, centre, before.mapToGlobal(centre), Qt.MouseButton.NoButton,
                       Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(before, move)
    assert before.toolTip().startswith(before.hover_text(hit).split("\n")[0])
    # Python frames (hidden by default) add rows when asked for; fuseview's own capture frames never
    rows = before.minimumHeight()
    view.python.setChecked(True)
    assert before.minimumHeight() > rows
    assert not any("fuseview/capture/" in n for n in before.timeline.names)
    assert any("): forward" in n for n in before.timeline.names)


def test_a_capture_with_its_onnx_model_shows_the_join(qtbot, view):
    """Issue 28.4: the workspace's Compile vs ONNX tab, per source line; issue 37.3: the numbers come
    first, in µs, with a totals row the lines add up to, and the columns fit 1400 px."""
    load(qtbot, view, [TRACES / "provenance" / "mlp_block_onnx"])
    t = view.join.table
    rows = {t.item(i, 0).text(): [t.item(i, c).text() for c in range(t.columnCount())]
            for i in range(t.rowCount())}
    gelu = next(v for k, v in rows.items() if "gelu(self.up(h))" in k)
    assert gelu[1] == "both" and "BiasGelu" in gelu[8] and "cpp_fused_gelu" in gelu[7]
    # its ONNX nodes' onnxruntime time before and after the fusion, profiled when the capture was opened
    from fuseview.units import format_us

    lines = [r for r in view.session.traces.join if r.shown]
    line = next(r for r in lines if "gelu(self.up(h))" in r.code)
    assert line.ort_before_us > 0 and line.ort_after_us > 0
    assert (gelu[4], gelu[5]) == (format_us(line.ort_before_us, "µs"), format_us(line.ort_after_us, "µs"))
    assert t.item(0, 1).text() in ("only Inductor", "only fuseview")  # disagreements first
    total = rows["all lines"]
    assert total[5] == format_us(sum(r.ort_after_us or 0.0 for r in lines), "µs") and total[2].endswith("µs")
    assert "split across its lines" in t.item(0, 3).toolTip()
    assert sum(t.columnWidth(c) for c in range(t.columnCount() - 1)) < 1400 - 120


def test_the_flame_axis_fits_the_longer_step_when_its_tab_is_opened(qtbot, view):
    """Issue 37.4: the flame was fitted while its tab was hidden (a stale viewport width), so a 503 µs step
    sat on an axis running to 1,200 µs; it fits when its tab is shown, and on any viewport resize."""
    load(qtbot, view, [TRACES / "provenance" / "gpt2_block"])
    view.resize(1400, 900)
    view.tabs.setCurrentWidget(view.flame)
    qtbot.waitUntil(lambda: view.flame.isVisible())
    qtbot.wait(50)  # the layouts of the newly shown tab settle
    flame = view.flame
    span = max(t.step_us for t in flame.timelines.values())
    chart = flame.charts["before"]
    end = chart._x(span)
    assert 0.85 * chart.width() <= end <= chart.width(), (end, chart.width())


def test_the_post_grad_pane_never_asks_for_a_capture_while_one_is_open(qtbot, view):
    """Issue 37.4: with a capture open it says to pick a kernel (or shows one), not to open a capture."""
    from fuseview.ui.trace_graph import NO_CAPTURE

    assert view.kernels.graph.title.text() == NO_CAPTURE
    load(qtbot, view, [CAPTURE])
    assert "open a capture" not in view.kernels.graph.title.text()
