"""The Profile dock's Roofline card: a real original-vs-fused GPT-2 profile drawn offscreen, clicks select."""

from __future__ import annotations

import json
import math

import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtTest import QTest

import fuseview
from fuseview.runtime.report import save_report
from fuseview.ui.profile_plots import FUSED, ORIGINAL
from fuseview.ui.roofline_card import (
    RooflineCard,
    family_color,
    fusion_arrows,
    roof_distance_heat,
    roofline_points,
)
from tests import test_ui_profile_panel as dock_tests
from tests.conftest import GPT2_MODELS

GPT2 = GPT2_MODELS / "gpt2_2l_ts17.onnx"
panel = dock_tests.panel  # the Profile dock fixture, shown at 1200x700


@pytest.fixture(scope="module")
def report():
    fused = fuseview.fuse(GPT2, dims={"seq": 16}).model
    return fuseview.profile(GPT2, against=fused, runs=3, warmup=1, dims={"seq": 16}, sessions=2).to_json()


def test_points_and_arrows_come_from_the_report(report):
    points = roofline_points(report)
    assert points[ORIGINAL] and points[FUSED]
    rows = {n["node"]: n for n in report["models"][0]["roofline"]["nodes"]}
    p = points[ORIGINAL][0]
    assert p.x == pytest.approx(rows[p.node]["flops"] / rows[p.node]["bytes"])
    assert p.y == pytest.approx(rows[p.node]["achieved_gflops"])
    arrows = fusion_arrows(report)
    assert arrows
    fusions = {f["node"]: f for f in report["comparison"]["fusions"]}
    a = next(a for a in arrows if a.fused.op_type == "Attention")
    origin = [rows[n] for n in fusions[a.fused.node]["origin"] if n in rows]
    assert a.original.flops == sum(n["flops"] for n in origin)  # the original nodes, summed
    assert a.original.time_us == pytest.approx(sum(n["time_us"] for n in origin))


def test_card_draws_roofs_points_and_arrows_and_a_click_selects(qtbot, report, tmp_path):
    card = RooflineCard()
    qtbot.addWidget(card)
    card.resize(900, 600)
    card.show()
    card.set_report(report)
    assert card.has_data and len(card.arrows) == len(fusion_arrows(report))
    scatter = card._scatter[FUSED]
    spot = scatter.points()[0]
    brush = spot.brush().color().name()
    assert brush == family_color(spot.data().op_type, spot.data().domain)
    with qtbot.waitSignal(card.pointClicked) as got:
        card.click(FUSED, spot.data().node)
    assert got.args == [FUSED, spot.data().node]
    # arrow heads point along their line on screen (pyqtgraph: 0 points left, 90 up)
    assert 90 < card._angle(0, 0, 1, 1, 1, 1) < 180 and -180 < card._angle(0, 1, 1, 0, 1, 1) < -90
    assert card._angle(1, 0, 0, 0, 1, 1) == 0
    out = card.export(tmp_path / "roofline.png")
    assert out.stat().st_size > 5000


def test_a_real_mouse_click_on_a_point_selects_the_node(qtbot, panel, report, tmp_path):
    panel.open_report(save_report(report, tmp_path / "r.json"))
    panel.tabs.setCurrentWidget(panel.roofline_card)
    card = panel.roofline_card
    qtbot.waitExposed(card.plot)
    qtbot.wait(50)
    target = max(card.points[ORIGINAL], key=lambda p: p.flops)  # the lm_head MatMul (the fused model's too)
    vb = card.plot.getPlotItem().getViewBox()
    pos = card.plot.mapFromScene(vb.mapViewToScene(QPointF(math.log10(target.x), math.log10(target.y))))
    with qtbot.waitSignal(panel.nodeActivated, timeout=3000) as got:
        QTest.mouseClick(card.plot.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    hit = next(p for p in card.points[got.args[0]] if p.node == got.args[1])
    at = card.plot.mapFromScene(vb.mapViewToScene(QPointF(math.log10(hit.x), math.log10(hit.y))))
    assert (at - pos).manhattanLength() <= 12  # the point under the click (original or fused lm_head)


def test_an_old_report_says_it_has_no_roofline(qtbot, panel, report, tmp_path):
    old = json.loads(json.dumps(report))
    old["schema_version"] = 2
    for m in old["models"]:
        del m["roofline"]
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(old))
    panel.open_report(path)
    assert not panel.roofline_card.has_data
    assert "schema 3" in panel.roofline_card.message.text()
    assert panel.node_plots[ORIGINAL].has_data  # the rest of the panel still shows the old report


def test_candidates_tooltip_says_what_the_traffic_costs_and_where_the_time_is(qtbot):
    from fuseview.fusion.scan import scan_file
    from fuseview.session.decisions import Decisions
    from fuseview.ui.candidates_panel import MEASURED_COLUMNS, CandidatesPanel

    rep = fuseview.profile(GPT2, runs=3, warmup=1, threads=1).to_json()  # the window's dock holds the dict
    panel = CandidatesPanel()
    qtbot.addWidget(panel)
    panel.set_decisions(Decisions(scan_file(GPT2, {})))
    panel.set_profile(rep)
    table = panel.table
    for r in range(table.rowCount()):
        cid = table.item(r, 0).data(256)
        tip = table.item(r, MEASURED_COLUMNS[0]).toolTip()
        cost = panel.costs[cid]
        assert cost.gain_text() in tip and f"{cost.traffic_us:.3g} µs" in tip
        assert ("compute-bound" in tip) == (cost.bound == "compute")


def test_heat_map_by_distance_to_the_roof(qtbot, panel, report, tmp_path):
    panel.open_report(save_report(report, tmp_path / "r.json"))
    with qtbot.waitSignal(panel.heatmapChanged) as got:
        panel.roofline_card.heat_box.setChecked(True)
    heat = got.args[0]
    assert heat == roof_distance_heat(report) and set(heat) == {ORIGINAL, FUSED}
    rows = {n["node"]: n for n in report["models"][0]["roofline"]["nodes"]}
    for name, d in heat[ORIGINAL].items():
        assert 0.0 <= d <= 1.0
        frac = rows[name]["roof_fraction"]
        if frac is not None:
            assert d == pytest.approx(1 - min(frac, 1.0))
    with qtbot.waitSignal(panel.heatmapChanged) as got:
        panel.roofline_card.heat_box.setChecked(False)
    assert got.args[0] is None  # the dock's own heat map is off: the graph goes back to plain
