"""The roofline section of the profile report: written per model, checked, old reports still load."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

import fuseview
from fuseview.commands.profile import print_report
from fuseview.runtime.report import load_report, save_report
from fuseview.runtime.roofline import GEMM_OPS, non_gemm_share

GPT2 = "tests/data/gpt2/gpt2_2l_ts17.onnx"
BERT = "assets/models/current/bert_2l_sdpa_ts17.onnx"


def _profile_against_fused(path):
    fused = fuseview.fuse(path).model
    return fuseview.profile(path, against=fused, runs=6, sessions=2, threads=1)  # the typed report


@pytest.mark.parametrize("path", [GPT2, BERT])
def test_fused_model_spends_a_smaller_share_outside_gemms(path, tmp_path):
    typed = _profile_against_fused(path)
    rep = typed.to_json()
    original, fused = (m["roofline"] for m in rep["models"])
    assert fused["non_gemm_share"] < original["non_gemm_share"]
    # the share is the nodes' own, recomputed from the report's per-node medians
    assert original["non_gemm_share"] == pytest.approx(non_gemm_share(rep["models"][0]["nodes"]))
    for roof in (original, fused):
        assert roof["machine"]["peak_gflops"] > 0 and roof["machine"]["peak_gbps"] > 0
        assert roof["nodes"] and {n["bound"] for n in roof["nodes"]} <= {"memory", "compute"}
        for n in roof["nodes"]:
            if n["time_us"] > 0:
                assert n["achieved_gbps"] == pytest.approx(n["bytes"] / n["time_us"] / 1e3)
    # fused attention nodes are costed (not estimated) and their FLOPs are the original's attention work
    assert any(n["op_type"] in GEMM_OPS and n["domain"] == "com.microsoft" and not n["estimated"]
               for n in fused["nodes"])
    assert fused["flops"] == pytest.approx(original["flops"], rel=0.01)
    assert fused["bytes"] < original["bytes"]
    text = io.StringIO()
    print_report(typed, text)
    assert (f"non-GEMM share of the node time: model {original['non_gemm_share']:.1%},"
            f" against {fused['non_gemm_share']:.1%}") in text.getvalue()
    assert "top memory-bound nodes" in text.getvalue() and "machine roofline: peak" in text.getvalue()
    path_out = save_report(rep, tmp_path / "r.json")
    back = load_report(path_out)
    assert back["models"][1]["roofline"]["non_gemm_share"] == fused["non_gemm_share"]
    # a version 2 report (no roofline) still loads
    old = json.loads(path_out.read_text())
    old["schema_version"] = 2
    for m in old["models"]:
        del m["roofline"]
    (tmp_path / "v2.json").write_text(json.dumps(old))
    assert load_report(tmp_path / "v2.json")["schema_version"] == 2


def test_api_costs_use_the_profile_dims():
    costs = fuseview.costs(GPT2, {"seq": 16})
    lm_head = [c for c in costs.values() if c.op_type == "MatMul"][-1]
    at_128 = [c for c in fuseview.costs(GPT2).values() if c.op_type == "MatMul"][-1]
    assert at_128.flops == 8 * lm_head.flops  # a MatMul's FLOPs scale with the sequence length


def test_scan_gain_counts_the_traffic_a_candidate_removes_at_the_measured_bandwidth():
    import onnx

    from fuseview.dims import resolve_dims
    from fuseview.fusion.scan import scan_file
    from fuseview.runtime.costs import candidate_costs
    from fuseview.runtime.roofline import tensor_shapes
    from fuseview.session.reports import ScanReport

    rep = fuseview.profile(GPT2, runs=3, warmup=1, threads=1).to_json()
    scan = scan_file(GPT2, {})
    costs = candidate_costs(rep, scan.candidates)
    roof = rep["models"][0]["roofline"]
    rows = {r["node"]: r for r in roof["nodes"]}
    gbps = roof["machine"]["peak_gbps"]
    model = onnx.load(GPT2)
    shapes = tensor_shapes(model, resolve_dims(model))
    gelu = next(c for c in scan.candidates if c.rule == "bias_fast_gelu")
    # independently: each removed tensor written once and read by each node of the candidate that takes it
    reads = {t: sum(list(n.input).count(t) for n in gelu.match.node_list) for t in gelu.removed_tensors}
    expect = sum(4 * int(np.prod(shapes[t][0])) * (1 + reads[t]) for t in gelu.removed_tensors)
    assert gelu.traffic_bytes == expect >= 2 * gelu.saved_bytes
    for c in scan.candidates:
        cost = costs[c.id]
        assert cost.traffic_us == pytest.approx(c.traffic_bytes / gbps / 1e3)
        timed = [rows[n] for n in c.nodes if n in rows]
        total = sum(r["time_us"] for r in timed)
        if total > 0:
            share = sum(r["time_us"] for r in timed if r["bound"] == "compute") / total
            assert cost.compute_share == pytest.approx(share)
            assert cost.bound == ("compute" if share > 0.5 else "memory")
            assert cost.bound + "-bound" in cost.gain_text()
    js = ScanReport.of(scan, costs).to_json()["candidates"]
    assert all(c["traffic_us"] == costs[c["id"]].traffic_us for c in js)
