"""The window states the A/B result as the CLI does: speed-up with interval and verdict, spreads, costs."""

from __future__ import annotations

import json

import onnx
import pytest
from PySide6.QtCore import QSettings

from fuseview.runtime import samples
from fuseview.runtime.job import ProfileRequest, run_profile
from fuseview.runtime.report import cannot_tell, save_report
from fuseview.stats import interval_text
from fuseview.ui import dialogs
from fuseview.ui.main_window import MainWindow
from fuseview.ui.profile_panel import ProfilePanel
from fuseview.ui.profile_texts import headline_text
from tests.conftest import ASSET_MODELS, GPT2_MODELS

MS = 90_000


@pytest.fixture(scope="module")
def gelu_report(tmp_path_factory):
    d = tmp_path_factory.mktemp("gelu_ab")
    onnx.save(samples.gelu_original(), d / "orig.onnx")
    onnx.save(samples.gelu_fused(), d / "fused.onnx")
    rep = run_profile(ProfileRequest(str(d / "orig.onnx"), str(d / "fused.onnx"), provider="cpu", runs=20,
                                     threads=1, dims={"seq": 16}, profile_runs=5))
    return save_report(rep, d / "report.json")


@pytest.fixture
def panel(qtbot):
    p = ProfilePanel()
    qtbot.addWidget(p)
    p.resize(1200, 700)
    p.show()
    yield p
    p.shutdown()


def test_headline_has_interval_and_verdict_never_a_bare_ratio(panel, gelu_report):
    panel.open_report(gelu_report)
    rep = json.loads(gelu_report.read_text())
    lat = rep["comparison"]["latency"]
    text = panel.env.text()
    if cannot_tell(lat):  # a busy machine: the interval's ends are said, the ratio withheld
        assert "Speed-up original/fused: cannot tell on this machine now" in text
        assert f"from {lat['ci'][0]:.2f}x to {lat['ci'][1]:.2f}x" in text
    else:
        ratio = interval_text(lat["speedup_p50"], *lat["ci"], lat["threshold"])  # the ends as decided
        assert "Speed-up original/fused p50" in text and ratio in text
        assert "95% CI" in text and "21 interleaved runs in 3 sessions" in text and lat["verdict"] in text
    assert "original/fused =" not in text
    assert "per-node times from 5 profiled runs" in text


def test_plots_note_the_profiler_floor_and_fusions_say_not_measurable(panel, gelu_report):
    panel.open_report(gelu_report)
    rep = json.loads(gelu_report.read_text())
    floor = rep["profiler_overhead"]["node_floor_us"]
    assert f"profiler floor {floor:.1f} µs/node" in panel.op_plot.title
    assert "profiler floor" in panel.node_plots["original"].title
    (row,) = panel._fusion_rows
    (f,) = rep["comparison"]["fusions"]
    assert row.measurable is f["time"]["measurable"] and len(row.original_spread) == 2
    tip = row.tip()
    assert ("not measurable" in tip) is (not f["time"]["measurable"])
    assert ("speed-up" in tip) is f["time"]["measurable"]
    assert "runs " in tip  # the spread across profiled runs
    assert panel.fusion_plot.labels[0].endswith("not measurable") is (not f["time"]["measurable"])


def test_version_1_report_shows_no_ratio(panel, gelu_report, tmp_path):
    rep = json.loads(gelu_report.read_text())
    rep["schema_version"] = 1
    del rep["comparison"]["latency"], rep["profiler_overhead"]
    p = tmp_path / "v1.json"
    p.write_text(json.dumps(rep))
    panel.open_report(p)
    assert "not shown" in panel.env.text() and "x [" not in panel.env.text()
    assert headline_text(rep).startswith("Speed-up: not shown")
    assert "profiler floor" not in panel.op_plot.title


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_profile_after_apply_fills_fused_title_and_candidate_costs(qtbot, tmp_path, monkeypatch):
    monkeypatch.setattr(dialogs, "show_error", lambda parent, title, message: None)
    w = MainWindow(settings=QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    try:
        with qtbot.waitSignal(w.workbench.scanned, timeout=MS):
            w.open_file(GPT2_MODELS / "gpt2_2l_ts17.onnx")
        qtbot.waitUntil(lambda: not w.busy, timeout=MS)
        wb = w.workbench
        wb.panel.accept_all()
        with qtbot.waitSignal(wb.applied, timeout=MS):
            assert wb.apply()
        before = wb.fused_pane.title.full_text
        pp = wb.profile_panel
        pp.runs.setValue(4)
        pp.warmup.setValue(1)
        pp.dims.setText("seq=16")
        with qtbot.waitSignal(pp.profileFinished, timeout=MS) as blocker:
            pp.start_profile()
        report = blocker.args[0]
        lat = report["comparison"]["latency"]
        title = wb.fused_pane.title.full_text
        assert title.startswith(before + " · latency ")
        if cannot_tell(lat):  # 4 runs on a busy machine: the interval is too wide for a ratio
            lo, hi = lat["ci"]
            said = f"speed-up: cannot tell on this machine now (95% CI from {lo:.2f}x to {hi:.2f}x)"
            assert title.endswith(said)
            assert "x [" not in title
        else:
            assert "95% CI" in title and lat["verdict"] in title
        # candidates: measured time and share of the nodes each would replace, from the original's profile
        table, panel = wb.panel.table, wb.panel
        ids = panel.visible_ids()
        assert panel.costs and set(panel.costs) == {c.id for c in wb.session.decisions.candidates}
        assert all(table.item(r, 7).text().endswith("µs") and table.item(r, 8).text().endswith("%")
                   for r in range(table.rowCount()))
        table.horizontalHeader().sectionClicked.emit(7)
        ranked = panel.visible_ids()
        us = [panel.costs[i].measured_us for i in ranked]
        assert us == sorted(us, reverse=True) and sorted(ranked) == sorted(ids)
        assert [table.item(r, 0).data(256) for r in range(table.rowCount())] == ranked  # rows follow the sort
        table.horizontalHeader().sectionClicked.emit(7)
        assert panel.visible_ids() == ids  # back to scan order
        # a report of another model does not put costs on these candidates
        other = run_profile(ProfileRequest(str(ASSET_MODELS / "mlp_gelu_tanh_ts17.onnx"), runs=1, warmup=0,
                                           profile_runs=1, provider="cpu"))
        panel.set_profile(other)
        assert panel.costs == {} and table.item(0, 7).text() == ""
    finally:
        w.session.jobs.shutdown()
        wb.profile_panel.shutdown()


def test_headline_withholds_the_ratio_when_the_interval_is_too_wide(panel, gelu_report, tmp_path):
    """Issue 19's busy-machine result, '3.62x [0.08, 167.59]': no ratio, the reason, a remedy."""
    rep = json.loads(gelu_report.read_text())
    lat = rep["comparison"]["latency"]
    lat.update(speedup_p50=3.62, ci=[0.08, 167.59], verdict="no difference")
    rep["profiler_overhead"]["per_event_us"] = 51.0
    p = tmp_path / "busy.json"
    p.write_text(json.dumps(rep))
    panel.open_report(p)
    head = panel.env.text().split("\n")[1]
    assert "cannot tell on this machine now" in head and "3.62" not in head
    assert "0.08x to 167.59x" in head and "51 µs per node event" in head and "a quieter machine" in head
    # a narrow interval keeps its ratio and verdict
    lat.update(speedup_p50=1.31, ci=[1.27, 1.35], verdict="faster")
    assert headline_text(rep).startswith("Speed-up original/fused p50 1.31x [1.27, 1.35] fused faster")
