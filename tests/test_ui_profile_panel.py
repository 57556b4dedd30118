"""The profiling dock: real onnxruntime runs on a real GPT-2 export and its fused version, offscreen Qt."""

from __future__ import annotations

import json
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import onnx
import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt, QTimer
from PySide6.QtGui import QImage, QMouseEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from fuseview.dims import parse_dim_text
from fuseview.fusion.apply import apply_plan
from fuseview.fusion.plan import Plan
from fuseview.fusion.scan import load_model, scan_model
from fuseview.runtime.job import ProfileRequest, run_profile
from fuseview.runtime.report import save_report
from fuseview.runtime.sessions import CUDA, available_providers
from fuseview.ui.profile_panel import ProfilePanel
from fuseview.ui.profile_plots import FUSED, ORIGINAL
from tests.conftest import GPT2_MODELS

GPT2 = GPT2_MODELS / "gpt2_2l_ts17.onnx"
DIMS = "seq=16"


@pytest.fixture(scope="module")
def fused_model():
    """GPT-2 (2 layers) with every fuseview candidate applied, in memory (as "Apply accepted" leaves it)."""
    model = load_model(GPT2)
    plan = Plan(scan_model(model).candidates)
    plan.accept_all()
    result = apply_plan(model, plan.accepted())
    assert result.applied
    return result.model


@pytest.fixture(scope="module")
def fused_path(fused_model, tmp_path_factory):
    """The fused model saved as a file."""
    path = tmp_path_factory.mktemp("fused") / "gpt2_2l_fused.onnx"
    onnx.save(fused_model, path)
    return path


@pytest.fixture(scope="module")
def report_file(fused_path, tmp_path_factory):
    """A real original-vs-fused report, made without the GUI and saved as JSON."""
    rep = run_profile(ProfileRequest(GPT2, fused_path, runs=3, warmup=1, dims={"seq": 16}))
    return save_report(rep, tmp_path_factory.mktemp("rep") / "report.json")


@pytest.fixture
def panel(qtbot):
    p = ProfilePanel()
    qtbot.addWidget(p)
    p.resize(1200, 700)
    p.show()
    yield p
    p.cancel()
    p.shutdown()


def _run(qtbot, panel, runs=3, warmup=1, timeout=60000):
    panel.runs.setValue(runs)
    panel.warmup.setValue(warmup)
    panel.dims.setText(DIMS)
    with qtbot.waitSignal(panel.profileFinished, timeout=timeout) as blocker:
        panel.start_profile()
        assert panel.is_running()
    return blocker.args[0]


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_profile_original_and_fused_fills_every_plot(qtbot, panel, fused_model):
    panel.set_models(str(GPT2), fused_model)
    report = _run(qtbot, panel)
    assert not panel.is_running() and panel.report() is report
    assert [m["role"] for m in report["models"]] == ["model", "against"]
    ops = {o["op_type"] for m in report["models"] for o in m["op_types"]}
    assert panel.op_plot.bar_count() == min(len(ops), 15)
    assert set(panel.op_plot.bars) == {ORIGINAL, FUSED}
    for role in (ORIGINAL, FUSED):
        assert panel.node_plots[role].bar_count() == 15
    applied = [f for f in report["comparison"]["fusions"] if f["time"]]
    assert panel.fusion_plot.bar_count() == min(len(applied), 15) > 0
    assert panel.diff_plot.bar_count() == len(report["comparison"]["outputs"])
    assert sum(panel.hist_plot.counts) == 16 * 1000  # every element of the [1, 16, 1000] logits
    assert "CPU — onnxruntime build has no CUDAExecutionProvider" in panel.status.text()
    assert "onnxruntime" in panel.env.text() and "seq=16" in panel.env.text()


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_event_loop_keeps_turning_while_a_profile_runs(qtbot, panel, fused_path):
    panel.set_models(GPT2, fused_path)
    stamps: list[float] = []
    timer = QTimer()
    timer.setInterval(10)
    # Ticks count only while the worker runs (drawing the plots afterwards is the UI thread's own work).
    timer.timeout.connect(lambda: panel.is_running() and stamps.append(time.perf_counter()))
    panel.runs.setValue(60)
    panel.warmup.setValue(2)
    panel.dims.setText(DIMS)
    timer.start()
    t0 = time.perf_counter()
    with qtbot.waitSignal(panel.profileFinished, timeout=90000):
        panel.start_profile()
    timer.stop()
    ran = stamps[-1] - t0
    gaps = [b - a for a, b in zip([t0, *stamps], stamps, strict=False)]
    # A frozen UI thread would show one gap as long as the whole run; a busy 2-core machine only slows ticks.
    assert ran > 0.3, "the profile was too short to prove anything"
    assert len(stamps) >= max(20, 0.25 * ran / 0.010), (len(stamps), ran)
    # a stall of 229 ms was seen once in a 1.1 s run on the shared CI machine; a freeze is the whole run
    limit = max(0.2, ran / 2)
    assert max(gaps) < limit, f"longest stall {max(gaps) * 1000:.0f} ms in a {ran:.1f} s profile"


def test_cancel_mid_run_leaves_the_panel_usable(qtbot, panel):
    temp_dirs = set(Path(tempfile.gettempdir()).glob("fuseview-profile-*"))
    panel.set_models(GPT2, None)
    panel.runs.setValue(5000)
    panel.dims.setText(DIMS)
    with qtbot.waitSignal(panel.progress.valueChanged, timeout=30000):
        panel.start_profile()
    assert panel.is_running() and panel.cancel_button.isEnabled() and not panel.run_button.isEnabled()
    panel.cancel()
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=10000)
    assert "cancelled" in panel.status.text() and panel.report() is None
    assert set(Path(tempfile.gettempdir()).glob("fuseview-profile-*")) == temp_dirs  # nothing left behind
    assert panel.run_button.isEnabled() and not panel.cancel_button.isEnabled()
    # usable: a single-model run now completes and plots one series
    report = _run(qtbot, panel, runs=2, warmup=0)
    assert len(report["models"]) == 1 and report["comparison"] is None
    assert set(panel.op_plot.bars) == {ORIGINAL}
    assert (
        panel.node_plots[FUSED].bar_count() == 0
        and "no fused model" in panel.node_plots[FUSED].message.text()
    )
    assert panel.fusion_plot.bar_count() == 0 and panel.hist_plot.has_data is False


def test_clicking_bars_names_the_op_type_or_node(qtbot, panel, report_file):
    panel.open_report(report_file)
    rep = json.loads(report_file.read_text())
    by_role = {ORIGINAL: rep["models"][0], FUSED: rep["models"][1]}
    ops: dict[str, float] = {}
    for o in by_role[ORIGINAL]["op_types"]:
        ops[o["op_type"]] = ops.get(o["op_type"], 0) + o["p50_us"]
    fused_ops = {o["op_type"]: o["p50_us"] for o in by_role[FUSED]["op_types"]}
    top_op = max(set(ops) | set(fused_ops), key=lambda k: (max(ops.get(k, 0), fused_ops.get(k, 0)), k))
    with qtbot.waitSignal(panel.opTypeActivated) as got:
        panel.op_plot.click(0, ORIGINAL)
    assert got.args == [top_op]

    slowest_fused = max(by_role[FUSED]["nodes"], key=lambda n: n["p50_us"])["name"]
    with qtbot.waitSignal(panel.nodeActivated) as got:
        panel.node_plots[FUSED].click(0, FUSED)
    assert got.args == [FUSED, slowest_fused]

    top = max(
        (f for f in rep["comparison"]["fusions"] if f["time"]), key=lambda f: f["time"]["original_p50_us"]
    )
    with qtbot.waitSignal(panel.nodeActivated) as got:
        panel.fusion_plot.click(0, FUSED)
    assert got.args == [FUSED, top["node"]]
    with qtbot.waitSignal(panel.nodeActivated) as got:
        panel.fusion_plot.click(0, ORIGINAL)
    assert got.args == [ORIGINAL, top["origin"][0]]


def test_a_real_mouse_click_on_a_bar(qtbot, panel, report_file):
    panel.open_report(report_file)
    panel.tabs.setCurrentIndex(1)
    chart = panel.node_plots[ORIGINAL]
    qtbot.waitExposed(chart.plot)
    qtbot.wait(50)  # the new tab's layout settles
    bars = chart.bars[ORIGINAL].opts
    row = 2
    x = bars["x0"][row] + bars["width"][row] / 2
    vb = chart.plot.getPlotItem().getViewBox()
    pos = chart.plot.mapFromScene(vb.mapViewToScene(QPointF(x, bars["y"][row])))
    expected = sorted(json.loads(report_file.read_text())["models"][0]["nodes"], key=lambda n: -n["p50_us"])
    with qtbot.waitSignal(panel.nodeActivated, timeout=3000) as got:
        QTest.mouseClick(chart.plot.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert got.args == [ORIGINAL, expected[row]["name"]]


def test_heatmap_shares_sum_to_one_per_model(qtbot, panel, report_file):
    panel.open_report(report_file)
    with qtbot.waitSignal(panel.heatmapChanged) as got:
        panel.heat.setChecked(True)
    heat = got.args[0]
    assert set(heat) == {ORIGINAL, FUSED}
    for role in heat:
        assert len(heat[role]) > 10
        assert sum(heat[role].values()) == pytest.approx(1.0, abs=1e-6)
    # attention fuses to contrib Attention (packed Q|K|V) or MultiHeadAttention, whichever the plan took
    assert any("Attention" in n for n in heat[FUSED]) and not any("Attention" in n for n in heat[ORIGINAL])
    with qtbot.waitSignal(panel.heatmapChanged) as got:
        panel.heat.setChecked(False)
    assert got.args == [None]


def test_report_round_trip_and_a_cuda_report_from_elsewhere(qtbot, panel, report_file, tmp_path):
    panel.open_report(report_file)
    saved = tmp_path / "again.json"
    panel.save_report(saved)
    assert [p.name for p in tmp_path.iterdir()] == ["again.json"]  # atomic: no temp file left
    other = ProfilePanel()
    qtbot.addWidget(other)
    other.open_report(saved)
    assert other.report() == panel.report()
    assert other.op_plot.labels == panel.op_plot.labels

    rep = json.loads(report_file.read_text())
    rep["environment"].update(
        onnxruntime="1.20.1", gpu="NVIDIA H200", providers=[CUDA, "CPUExecutionProvider"]
    )
    for m in rep["models"]:
        m["provider"] = {"requested": "cuda", "provider": CUDA, "reason": "asked for cuda"}
    cuda_file = tmp_path / "cuda.json"
    cuda_file.write_text(json.dumps(rep))
    other.open_report(cuda_file)
    assert other.status.text() == "Provider: CUDA — asked for cuda"
    assert "GPU NVIDIA H200" in other.env.text() and "onnxruntime 1.20.1" in other.env.text()
    assert "cuda.json" in other.env.text()


def test_a_report_without_histograms_says_so(qtbot, panel, report_file, tmp_path):
    rep = json.loads(report_file.read_text())
    for d in rep["comparison"]["outputs"].values():
        d.pop("abs_diff_hist")
    old = tmp_path / "old.json"
    old.write_text(json.dumps(rep))
    panel.open_report(old)
    assert panel.diff_plot.bar_count() == 1
    assert not panel.hist_plot.has_data and panel.hist_plot.message.text() == "no histogram in this report"


def test_export_plots_png_and_svg(qtbot, panel, report_file, tmp_path):
    panel.open_report(report_file)
    pngs = panel.export_plots(tmp_path, "png")
    names = {p.stem for p in pngs}
    assert names == {"op_types", "nodes_original", "nodes_fused", "fusions", "output_diffs", "diff_histogram",
                     "roofline"}
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        img = QImage(str(p))
        assert img.width() >= 1000 and img.height() > 200
    svgs = panel.export_plots(tmp_path, "svg")
    for p in svgs:
        root = ET.parse(p).getroot()
        assert root.tag.endswith("svg")
    texts = [t.text or "" for t in ET.parse(tmp_path / "nodes_fused.svg").findall(".//{*}text")]
    assert sum(t.endswith("µs") for t in texts) == panel.node_plots[FUSED].bar_count()  # one value per bar
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in pngs + svgs)  # no temp files
    with pytest.raises(Exception, match="png or svg"):
        panel.export_plots(tmp_path, "bmp")


def test_bad_report_shows_an_error_and_keeps_the_panel(qtbot, panel, report_file, tmp_path):
    panel.open_report(report_file)
    before = panel.report()
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "fuseview.profile", "schema_version": 1}')
    panel.open_report(bad)
    assert "Cannot open the report" in panel.status.text() and "b00020" in panel.status.styleSheet()
    assert panel.report() is before and panel.op_plot.bar_count() > 0
    (tmp_path / "junk.json").write_text("{nope")
    panel.open_report(tmp_path / "junk.json")
    assert "not a readable JSON" in panel.status.text()
    rep = json.loads(report_file.read_text())
    rep["comparison"]["outputs"]["output"]["abs_diff_hist"]["counts"] = [1, 2]
    (tmp_path / "hist.json").write_text(json.dumps(rep))
    panel.open_report(tmp_path / "hist.json")
    assert "abs_diff_hist.counts" in panel.status.text()
    panel.open_report(report_file)  # still usable
    assert panel.status.text().startswith("Provider: CPU")


def test_controls(qtbot, panel):
    assert not panel.run_button.isEnabled() and panel.run_button.toolTip() == "open a model first"
    cuda_item = panel.provider.model().item(2)
    if CUDA not in available_providers():
        assert not cuda_item.isEnabled()
        assert "onnxruntime-gpu" in panel.provider.itemData(2, Qt.ItemDataRole.ToolTipRole)
    assert parse_dim_text("seq=128, batch=2") == {"seq": 128, "batch": 2}
    panel.set_models(GPT2, None)
    panel.dims.setText("seq=abc")
    with qtbot.waitSignal(panel.profileFailed) as got:
        panel.start_profile()
    assert "seq=abc" in got.args[0] and not panel.is_running() and "b00020" in panel.status.styleSheet()
    panel.dims.setText("nosuchdim=3")
    with qtbot.waitSignal(panel.profileFailed, timeout=30000) as got:
        panel.start_profile()
    assert "no such input dim" in got.args[0]
    assert not panel.is_running() and panel.run_button.isEnabled()


def test_a_short_dock_shows_the_top_rows_and_scrolls(qtbot, panel, report_file):
    panel.open_report(report_file)
    panel.resize(1000, 330)
    qtbot.waitUntil(lambda: panel.op_plot.plot.height() < 250)
    chart = panel.op_plot
    fit = chart.fit_rows()
    assert 1 <= fit < chart.bar_count()
    assert f"top {fit} of {chart.bar_count()}, scroll for more" in chart.header.text()
    vb = chart.plot.getPlotItem().getViewBox()
    top = vb.viewRange()[1]
    assert top[1] == pytest.approx(chart.bar_count() - 0.4)  # the slowest rows first
    vb.translateBy(y=-2)  # what two wheel steps do
    assert vb.viewRange()[1][1] == pytest.approx(top[1] - 2)



def test_bars_have_tooltips_with_full_names(qtbot, panel, report_file):
    panel.open_report(report_file)
    panel.tabs.setCurrentIndex(1)
    chart = panel.node_plots[FUSED]
    qtbot.waitExposed(chart.plot)
    # hover reaches a view only in the active window: after other tests' windows, this one may not be
    panel.window().activateWindow()
    qtbot.waitUntil(panel.window().isActiveWindow, timeout=5000)
    qtbot.wait(50)  # the new tab's layout settles
    bars = chart.bars[FUSED]
    slowest = max(json.loads(report_file.read_text())["models"][1]["nodes"], key=lambda n: n["p50_us"])
    vb = chart.plot.getPlotItem().getViewBox()
    moves = [0]

    def hover_the_slowest_bar() -> bool:
        # the bar's place is read again each time: on a busy machine the tab's layout may still be settling
        x = bars.opts["x0"][0] + bars.opts["width"][0] / 2
        pos = chart.plot.mapFromScene(vb.mapViewToScene(QPointF(x, bars.opts["y"][0])))
        moves[0] += 1
        at = QPointF(pos + QPoint(moves[0] % 2, 0))
        # sent to the view itself: how the platform routes a synthetic move depends on what earlier tests'
        # windows left behind (offscreen windows all sit at one place), not on this panel
        screen_at = QPointF(chart.plot.viewport().mapToGlobal(at.toPoint()))
        none = Qt.MouseButton.NoButton
        move = QMouseEvent(QEvent.Type.MouseMove, at, screen_at, none, none, Qt.KeyboardModifier.NoModifier)
        QApplication.sendEvent(chart.plot.viewport(), move)
        return bars.toolTip() != ""

    qtbot.waitUntil(hover_the_slowest_bar, timeout=5000)
    assert bars.toolTip().startswith(f"{slowest['op_type']} {slowest['name']} (")


def test_heat_map_and_slowest_nodes_rank_by_the_median(qtbot, panel, report_file, tmp_path):
    """A node that stalled once (a huge mean and mean share): heat, bars and tips follow the median."""
    rep = json.loads(report_file.read_text())
    nodes = rep["models"][0]["nodes"]
    stalled = min(nodes, key=lambda n: n["p50_us"])
    stalled["mean_us"], stalled["share"] = 1e7, 0.99  # as a mean-based report would say
    path = tmp_path / "stalled.json"
    path.write_text(json.dumps(rep))
    panel.open_report(path)
    with qtbot.waitSignal(panel.heatmapChanged) as got:
        panel.heat.setChecked(True)
    heat = got.args[0][ORIGINAL]
    total = sum(n["p50_us"] for n in nodes)
    assert heat[stalled["name"]] == pytest.approx(stalled["p50_us"] / total)
    hottest = max(heat, key=heat.get)
    assert hottest == max(nodes, key=lambda n: n["p50_us"])["name"]
    top = panel.node_plots[ORIGINAL]
    tips = top.bars[ORIGINAL]._tips
    assert stalled["name"] not in " ".join(tips)
    assert "p90" in tips[0] and f"{heat[hottest] * 100:.1f}%" in tips[0]
