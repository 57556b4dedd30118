"""One naming of nodes across graph, fusion and runtime, on a model whose nodes have no names."""

from __future__ import annotations

import onnx
from onnx import helper

from fuseview.fusion.pipeline import build_fused, scan_for_fusion
from fuseview.fusion.plan import Plan
from fuseview.graph.loader import document_from_model
from fuseview.naming import unique_node_names
from fuseview.provenance import ORIGIN_KEY
from fuseview.runtime.job import ProfileRequest, run_profile

from .conftest import ASSET_MODELS

MLP = ASSET_MODELS / "mlp_gelu_tanh_ts17.onnx"


def test_unique_names_rules():
    nodes = [helper.make_node("Relu", ["a"], ["b"]), helper.make_node("Relu", ["b"], ["c"], name="r"),
             helper.make_node("Relu", ["c"], ["d"], name="r"),
             helper.make_node("Relu", ["d"], ["e"], name="Relu_0")]
    assert unique_node_names(nodes) == ["Relu_0", "r", "r__2", "Relu_0__3"]


def _unnamed(tmp_path):
    m = onnx.load(str(MLP))
    for n in m.graph.node:
        n.name = ""
    p = tmp_path / "unnamed.onnx"
    onnx.save(m, p)
    return m, p


def test_candidates_are_found_in_the_viewer_and_timed_per_fusion(tmp_path):
    model, path = _unnamed(tmp_path)
    scan = scan_for_fusion(model, {"seq": 8}, path)
    assert scan.candidates, "the MLP's GELU should be a candidate"
    doc = document_from_model(model)
    viewer_names = set(doc.graph.node_by_name)
    for c in scan.candidates:
        assert set(c.nodes) <= viewer_names, c.nodes
    plan = Plan(scan.candidates, str(path))
    plan.accept_all()
    outcome = build_fused(model, scan, plan.accepted(), base_dir=tmp_path)
    # nodes the fusion left alone keep the names the viewer gave them in the original
    fused_names = unique_node_names(outcome.model.graph.node)
    kept = {n.output[0]: nm for n, nm in zip(outcome.model.graph.node, fused_names, strict=True)
            if not any(p.key == ORIGIN_KEY for p in n.metadata_props)}
    original_names = dict(zip((n.output[0] for n in model.graph.node),
                              unique_node_names(model.graph.node), strict=True))
    unchanged = [t for t in kept if t in original_names]
    assert unchanged and all(kept[t] == original_names[t] for t in unchanged)
    fused = tmp_path / "fused.onnx"
    onnx.save(outcome.model, fused)
    rep = run_profile(ProfileRequest(model=str(path), against=str(fused), runs=2, warmup=1, dims={"seq": 8}))
    # the model is the original, --against the fused one: per-fusion times sit on each fusion
    fusions = [f["time"] for f in rep["comparison"]["fusions"]]
    assert fusions and all(fusions)
    for t in fusions:
        assert t["missing"] == [] and t["original_timed"] > 0 and t["original_us"] > 0, t


def test_window_finds_and_links_candidates_of_an_unnamed_model(qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import QSettings

    from fuseview.graph.geometry import node_key
    from fuseview.ui import dialogs
    from fuseview.ui.main_window import MainWindow

    _model, path = _unnamed(tmp_path)
    monkeypatch.setattr(dialogs, "show_error", lambda parent, title, message: None)
    w = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.show()
    try:
        with qtbot.waitSignal(w.workbench.scanned, timeout=60_000):
            w.open_file(path)
        qtbot.waitUntil(lambda: not w.busy, timeout=60_000)
        wb = w.workbench
        graph = wb.session.root.graph
        assert wb.session.scan.candidates
        for c in wb.session.scan.candidates:
            keys, _hidden = wb.candidate_keys(c.id)
            assert set(keys) == {node_key(graph.node_by_name[n]) for n in c.nodes}
        wb.panel.accept_all()
        with qtbot.waitSignal(wb.applied, timeout=60_000):
            assert wb.apply()
        qtbot.waitUntil(lambda: not w.busy, timeout=60_000)
        assert wb.session.fused.validation.ok
    finally:
        w.session.jobs.shutdown()
