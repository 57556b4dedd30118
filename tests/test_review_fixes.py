"""The last review's fixes (issue 39, "First"), each pinned by a test that fails on 2aa26b1's code."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from tests.conftest import ROOT
from tests.test_ui_workbench import win  # noqa: F401 - the window fixture

DECODER = ROOT / "assets" / "models" / "kvcache" / "gpt2_2l_past_ts17_decode.onnx"
CAPTURE = ROOT / "tests" / "data" / "traces" / "provenance" / "mlp_block_onnx"


def _gqa_graph(key: str) -> onnx.GraphProto:
    """A GroupQueryAttention (4 heads over 2 KV heads, head size 16) whose key is `key` ("" : packed)."""
    node = helper.make_node("GroupQueryAttention", ["q", key, "v" if key else "", "pk", "pv", "sl", "tl"],
                            ["out", "pk2", "pv2"], domain="com.microsoft", num_heads=4, kv_num_heads=2)
    return helper.make_graph([node], "g", [helper.make_tensor_value_info("q", TensorProto.FLOAT, None)],
                             [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])


def test_gqa_with_a_key_of_unknown_shape_is_not_taken_for_packed_qkv():
    """A key input whose shape the propagation does not know is still a key: Q is heads*16 wide."""
    from fuseview.graph.shapes import propagate

    shapes = propagate(_gqa_graph("k"), {"q": [1, 4, 64], "pk": [1, 2, 3, 16]}, {}, {})
    assert shapes["out"] == [1, 4, 64] and shapes["pk2"] == [1, 2, 7, 16]
    packed = propagate(_gqa_graph(""), {"q": [1, 4, 128], "pk": [1, 2, 3, 16]}, {}, {})  # Q|K|V: 4+2+2 heads
    assert packed["out"] == [1, 4, 64] and packed["pk2"] == [1, 2, 7, 16]


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_a_sweep_item_sent_as_a_proto_is_tuned_at_the_decode_step(tmp_path):
    """A Ray node receives the model as a proto: it is tuned at the decode step as a file would be."""
    from fuseview.workflows.tune import tune_item

    settings = {"budget_s": 4.0, "runs": 2, "sessions": 2, "max_batches": 1, "warmup": 0, "seeds": 1,
                "ort_optimizer": "off"}
    out = tune_item(onnx.load(str(DECODER)), settings, tmp_path, "item")
    assert out["report"]["config"]["dims"]["seq"] == 1, out["report"]["config"]["dims"]  # not 128 new tokens
    assert out["report"]["notes"][0].startswith("a KV-cache decoder: measured at its decode step, seq=1")
    assert (tmp_path / "item.onnx").is_file()


def test_capture_join_with_onnx_times_loads_and_scans_its_model_once(monkeypatch):
    """The join and the onnxruntime times share one load and one scan (spies around the real functions)."""
    import fuseview.fusion.pipeline as pipeline
    from fuseview.traces.report import build_report
    from fuseview.traces.stats import load_trace
    from fuseview.traces.torch_log import read_compile_log
    from fuseview.workflows.onnx_join import capture_join

    calls = {"load": 0, "scan": 0}
    load, scan = pipeline.load_for_fusion, pipeline.scan_for_fusion

    def counted_load(*a, **k):
        calls["load"] += 1
        return load(*a, **k)

    def counted_scan(*a, **k):
        calls["scan"] += 1
        return scan(*a, **k)

    monkeypatch.setattr(pipeline, "load_for_fusion", counted_load)
    monkeypatch.setattr(pipeline, "scan_for_fusion", counted_scan)
    after = load_trace(CAPTURE / "compiled.json")
    log = read_compile_log(CAPTURE / "torch_trace", after)
    rep = build_report(load_trace(CAPTURE / "eager.json"), after, log)
    rows = capture_join(CAPTURE, rep, ort_time=True, runs=2) or []
    assert any(r.ort_before_us for r in rows)
    assert calls == {"load": 1, "scan": 1}


@pytest.mark.parametrize("rh", [9, 30])
def test_flame_box_takes_the_row_height_a_paint_read_once(qtbot, rh):
    """box(i, row_height): a paint passes the height it read once; without it the chart's own is used."""
    from fuseview.traces.stats import load_trace
    from fuseview.traces.timeline import step_timeline
    from fuseview.ui.trace_flame import FlameChart, TimeScale

    chart = FlameChart(TimeScale())
    qtbot.addWidget(chart)
    chart.set_timeline(step_timeline(load_trace(CAPTURE / "eager.json"), "before"), "eager")
    assert chart.box(0, rh).height() == rh - 2
    assert chart.box(0) == chart.box(0, chart.row_height)
    assert chart.box(1, rh).top() - chart.box(1).top() == chart._rows[1] * (rh - chart.row_height)


def test_accept_all_still_over_tolerance_when_the_budget_ends_keeps_the_original(monkeypatch):
    """The budget ends while the bisection repairs accept-all (the repair is where BudgetSpent is raised,
    as a search validation reaching the deadline raises it): the set over tolerance is never shipped."""
    from fuseview.tuning import search as search_mod
    from fuseview.tuning.settings import TuneSettings
    from fuseview.workflows.tune import tune
    from tests.test_tune import FAST, MLP, tanh_gelu_rule

    def budget_ends(self, base, items, stage):
        raise search_mod.BudgetSpent()

    monkeypatch.setattr(search_mod.Search, "repair_accuracy", budget_ends)
    res = tune(MLP, TuneSettings(budget_s=30, atol=1e-5, rtol=1e-4, **FAST), rules=[tanh_gelu_rule()])
    rep = res.report
    assert rep.stopped == "budget"
    assert any("before accept-all was validated: the original is kept" in n for n in rep.notes), rep.notes
    assert res.unchanged and rep.final.chosen == "original" and res.plan.accepted() == []


def test_a_projection_bias_the_scan_cannot_read_is_never_dropped():
    """A query bias onnxruntime reads (a Constant's sparse_value) but the scan's index does not: no packed
    Q|K|V projection is made without it, and the fused model computes what the original does."""
    import numpy as np
    from onnx import numpy_helper

    from fuseview.fusion.apply import apply_candidates
    from fuseview.fusion.plan import Plan
    from fuseview.fusion.scan import scan_model
    from tests.test_fusion_encoders import _feeds, _run

    path = ROOT / "assets" / "models" / "bert_2l_notypes_ts17.onnx"
    model = onnx.load(str(path))
    name = "enc.encoder.layer.0.attention.self.query.bias"
    t = next(t for t in model.graph.initializer if t.name == name)
    bias = numpy_helper.to_array(t) + np.linspace(-0.5, 0.5, t.dims[0], dtype=np.float32)  # not zero
    model.graph.initializer.remove(t)
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(bias, name),
                                       numpy_helper.from_array(np.arange(bias.size, dtype=np.int64), "i"),
                                       list(bias.shape))
    constant = helper.make_node("Constant", [], [name], sparse_value=sparse, name="sparse_bias")
    model.graph.node.insert(0, constant)
    scan = scan_model(model, base_dir=path.parent)
    assert not [c for c in scan.candidates if c.rule == "attention_packed"]
    assert [c for c in scan.candidates if c.rule == "attention_mha"]  # the attention still fuses
    plan = Plan(scan.candidates)
    plan.accept_all()
    fused = apply_candidates(model, scan, plan.accepted()).model
    feeds = _feeds(model)
    for a, b in zip(_run(model, feeds), _run(fused, feeds), strict=True):
        assert float(np.max(np.abs(a - b))) <= 1e-4


def _status_of(table, cid: str) -> str:
    from fuseview.ui.candidates_panel import COLUMNS

    col = COLUMNS.index("Status")
    rows = [r for r in range(table.rowCount()) if table.item(r, 0).data(256) == cid]
    assert len(rows) == 1
    return table.item(rows[0], col).text()


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_apply_chosen_set_shows_the_tunes_decisions_again_and_a_new_model_drops_the_tune(win, qtbot):  # noqa: F811
    """After a real (short) tune the user overrides a decision; Apply chosen set puts the tune's back in the
    table too; opening another model forgets the tune (the session holds it, not the dialog)."""
    from fuseview.tuning.settings import TuneSettings
    from tests.test_ui_workbench import open_scanned

    model = ROOT / "assets" / "models" / "mlp_gelu_erf_ts17.onnx"
    open_scanned(qtbot, win, model)
    wb = win.workbench
    with qtbot.waitSignal(wb.tuner.finished, timeout=120_000) as sig:
        assert wb.tuner.start(TuneSettings(threads=1, budget_s=4, runs=2, sessions=2, max_batches=1, warmup=0,
                                           seeds=1, ort_optimizer="off")) is not None
    first = sig.args[0].report.decisions[0]
    table = wb.panel.table
    tuned = _status_of(table, first.candidate)
    wb.panel.select_id(first.candidate)
    (wb.panel.reject_current if first.decision == "accept" else wb.panel.accept_current)()
    assert _status_of(table, first.candidate) != tuned
    wb.tuner.apply_chosen()
    assert wb.session.decisions.plan.state(first.candidate) == first.decision
    assert _status_of(table, first.candidate) == tuned
    open_scanned(qtbot, win, ROOT / "assets" / "models" / "convnet_bn_relu_ts17.onnx")
    assert wb.tuner.result is None
