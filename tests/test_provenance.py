"""Exact attribution through Inductor's provenance, on real captures made by scripts/make_traces.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fuseview.cli import main
from fuseview.errors import FuseviewError
from fuseview.traces.attribution import attribute_provenance, extern_op
from fuseview.traces.categories import COMPILED
from fuseview.traces.report import build_report, load_report, save_report
from fuseview.traces.stats import load_trace
from fuseview.traces.torch_log import read_compile_log

CAPTURES = Path(__file__).resolve().parent / "data" / "traces" / "provenance"
CASES = ("mlp_block", "op_attention", "graph_break", "conv_bn_relu", "gpt2_block")


def load(case: str):
    d = CAPTURES / case
    return load_trace(d / "eager.json"), load_trace(d / "compiled.json"), read_compile_log(d / "torch_trace")


def by_source(kernels, snippet: str):
    return [k for k in kernels if any(snippet in s.code for s in k.source)]


@pytest.mark.parametrize("case", CASES)
def test_every_kernel_is_attributed_by_provenance(case):
    before, after, log = load(case)
    kernels = attribute_provenance(before, after, log)
    compiled = {e.name for e in after.events if e.category == COMPILED}
    assert compiled and compiled <= {k.name for k in kernels}
    for k in kernels:
        g = log.by_key()[k.graph]
        assert set(k.post_grad) <= set(g.post_grad) and set(k.pre_grad) <= set(g.pre_grad)
        assert k.post_grad and k.pre_grad and k.source
        assert len(k.kernel_steps) == after.steps and len(k.replaced_steps) == before.steps
        # what it replaced was found in the eager trace, under the op types of its pre-grad nodes (those
        # its provenance names, then the nodes of its graph it rewrote, region_claims)
        assert k.matched_before and set(k.matched_before) <= set(k.aten) | set(k.region_aten)
        assert k.replaced_us > 0 and k.time_us > 0
    externs = [k for k in kernels if k.kind == "extern"]
    assert all(extern_op(k.key) for k in externs)


def test_mlp_block_kernels_point_at_their_lines():
    before, after, log = load("mlp_block")
    kernels = attribute_provenance(before, after, log)
    (norm,) = by_source(kernels, "h = self.norm(x)")
    assert norm.kind == "fused" and norm.matched_before == ("aten::layer_norm",)
    assert "var_mean" in norm.post_grad_aten and norm.name.startswith("graph_0_cpp_fused_native_layer_norm")
    gelu = [k for k in by_source(kernels, "gelu(self.up(h))") if k.kind == "fused"]
    assert len(gelu) == 1 and "aten::gelu" in gelu[0].matched_before and "erf" in gelu[0].post_grad_aten
    # the two Linear layers run as two extern addmm kernels, each tied to its own line, in code order
    addmm = sorted((k for k in kernels if k.kind == "extern"), key=lambda k: int(k.key.rsplit(":", 1)[1]))
    assert [k.name for k in addmm] == ["extern_kernels.addmm"] * 2
    assert "self.up(h)" in addmm[0].source[-1].code and "self.down(h)" in addmm[1].source[-1].code


def test_graph_break_keeps_the_two_graphs_apart():
    before, after, log = load("graph_break")
    assert [g.key for g in log.graphs] == ["0/0", "1/0"]
    kernels = {k.graph: k for k in attribute_provenance(before, after, log)}
    assert set(kernels) == {"0/0", "1/0"}
    assert kernels["0/0"].matched_before == ("aten::add", "aten::cos", "aten::relu")
    assert kernels["1/0"].matched_before == ("aten::mul", "aten::sigmoid", "aten::sin")
    assert "torch.cos(x)" in kernels["0/0"].source[0].code
    assert "torch.sin(a)" in kernels["1/0"].source[0].code
    # the eager trace had Python frames: each kernel's ops are found in its own function's ops only
    assert kernels["0/0"].replaced_us > 0 and kernels["1/0"].replaced_us > 0


def test_conv_bn_relu_and_gpt2_sources():
    before, after, log = load("conv_bn_relu")
    kernels = attribute_provenance(before, after, log)
    bn = [k for k in kernels if "batch_norm" in k.name]
    assert len(bn) == 1 and {"aten::batch_norm", "aten::relu"} <= set(bn[0].matched_before)
    assert any(k.name == "extern_kernels.convolution" for k in kernels)
    before, after, log = load("gpt2_block")
    kernels = attribute_provenance(before, after, log)
    # every kernel was reached from the block's forward; its own lines may lie in helpers it called
    assert all(any(s.file.endswith("modeling_gpt2.py") for s in k.stack) for k in kernels)
    (gelu,) = [k for k in kernels if "tanh" in k.name]
    assert any(s.file.endswith("activations.py") and "torch.tanh" in s.code for s in gelu.source)
    fallback = [k for k in kernels if k.key.startswith("torch.ops.aten._scaled_dot_product")]
    assert len(fallback) == 1 and fallback[0].kind == "extern"


def test_report_v2_round_trip_and_v1_still_loads(tmp_path):
    before, after, log = load("op_attention")
    rep = build_report(before, after, log)
    assert rep["schema_version"] == 2 and rep["provenance_log"] == log.path
    ks = rep["diff"]["fused_kernels"]
    assert ks and all(k["attribution"] == "provenance" for k in ks)
    assert all(k["provenance"]["source"][0]["line"] > 0 for k in ks)
    back = load_report(save_report(rep, tmp_path / "v2.json"))
    assert back["diff"]["fused_kernels"][0]["provenance"] == ks[0]["provenance"]
    # a version-1 report (no attribution fields) loads as kernels attributed by name
    old = json.loads((tmp_path / "v2.json").read_text())
    old["schema_version"] = 1
    del old["provenance_log"]
    old["diff"]["fused_kernels"] = []
    for t in old["traces"]:
        del t["excluded_steps"]
    (tmp_path / "v1.json").write_text(json.dumps(old))
    assert load_report(tmp_path / "v1.json")["schema_version"] == 2
    bad = json.loads((tmp_path / "v2.json").read_text())
    bad["diff"]["fused_kernels"][0]["attribution"] = "name"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(FuseviewError, match="provenance"):
        load_report(tmp_path / "bad.json")


def test_without_a_log_kernels_are_guessed_and_labelled():
    before, after, _ = load("mlp_block")
    ks = build_report(before, after)["diff"]["fused_kernels"]
    assert ks and all(k["attribution"] == "name" and k["provenance"] is None for k in ks)


def test_cli_opens_a_capture_folder(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["trace", str(CAPTURES / "graph_break"), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "compiled kernels by Inductor's provenance" in text and "GUESSED" not in text
    assert "[0/0] graph_1_cpp_fused_add_cos_relu_0" in text and "[1/0] graph_2_cpp_fused" in text
    assert "faster than the ops it replaced" in text or "slower than the ops it replaced" in text
    assert load_report(out)["diff"]["fused_kernels"][0]["attribution"] == "provenance"
    d = CAPTURES / "graph_break"
    assert main(["trace", str(d / "eager.json"), str(d / "compiled.json"), "--provenance",
                 str(d / "torch_trace")]) == 0
    assert capsys.readouterr().out.count("(fused)") == 2


def _one_line_error(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fuseview: error: ")
    return err[0]


def test_bad_provenance_logs_are_one_line_errors(tmp_path, capsys):
    src = CAPTURES / "mlp_block"
    log = next((src / "torch_trace").glob("*.log")).read_text()
    args = [str(src / "eager.json"), str(src / "compiled.json"), "--provenance"]
    cases = {
        "garbage": "hello world\n",
        "header not JSON": log.replace('] {"artifact"', '] {"artifact"[', 1),
        "edited payload": log.replace("cppCodeToPost", "cppCodeToPast", 1),
        "cut": log[: len(log) // 2],
        "no provenance": "".join(line + "\n" for line in log.splitlines()
                                 if "provenance_tracking" not in line and not line.startswith("\t{")),
    }
    for why, text in cases.items():
        d = tmp_path / why.replace(" ", "_")
        d.mkdir()
        (d / "x.log").write_text(text)
        line = _one_line_error(["trace", *args, str(d)], capsys)
        assert "TORCH_TRACE" in line or "provenance" in line, (why, line)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no TORCH_TRACE log" in _one_line_error(["trace", *args, str(empty)], capsys)
    assert "not a capture" in _one_line_error(["trace", str(empty)], capsys)


def test_importing_fuseview_never_imports_torch():
    code = ("import sys, fuseview, fuseview.cli, fuseview.capture, fuseview.traces.attribution, "
            "fuseview.traces.torch_log, fuseview.commands.trace; assert 'torch' not in sys.modules, 'torch'")
    subprocess.run([sys.executable, "-c", code], check=True)


CUDA = CAPTURES.parent / "provenance_cuda"  # hand-made from the documented formats (no GPU here)


def test_cuda_triton_kernels_join_by_correlation_and_flows():
    before = load_trace(CUDA / "eager.json")
    after = load_trace(CUDA / "compiled.json")
    kernels = attribute_provenance(before, after, read_compile_log(CUDA / "torch_trace"))
    fused = {k.graph: k for k in kernels if k.kind == "fused"}
    # one Triton name in two graphs: kept apart by the Torch-Compiled Region around each launch; graph
    # 1/0's launch and kernel have no args.correlation, only their ac2g flow events link them
    assert set(fused) == {"0/0", "1/0"}
    assert {k.name for k in fused.values()} == {"triton_poi_fused_add_relu_0"}
    assert fused["0/0"].kernel_steps == (6.0,) * 3 and fused["1/0"].kernel_steps == (5.0,) * 3
    # device time against device time: the eager ops' GPU kernels, found through the Python frames
    assert fused["0/0"].replaced_from == "device"
    assert fused["0/0"].replaced_steps == (10.0,) * 3 and fused["1/0"].replaced_steps == (8.0,) * 3
    assert fused["0/0"].source[0].code == "return torch.relu(y + 1)"
    assert fused["1/0"].source[0].line == 13
    (mm,) = [k for k in kernels if k.kind == "extern"]
    assert mm.name == "extern_kernels.mm" and mm.matched_before == ("aten::matmul",)
    assert mm.kernel_steps == (29.0,) * 3 and mm.replaced_steps == (30.0,) * 3


def test_cuda_flows_alone_link_a_launch_to_its_kernel():
    raw = load_trace(CUDA / "compiled.json").raw
    names = raw.names
    launches = [i for i in range(len(raw)) if names[raw.name_id[i]] == "cuLaunchKernelEx"]
    kernels = [i for i in range(len(raw)) if names[raw.name_id[i]] == "triton_poi_fused_add_relu_0"
               and raw.cats[raw.cat_id[i]] == "kernel"]
    assert len(launches) == len(kernels) == 6
    assert sorted(raw.corr[i] for i in launches) == sorted(raw.corr[i] for i in kernels)
    assert all(raw.corr[i] >= 0 for i in launches)


def test_a_rewritten_pattern_is_compared_with_all_the_eager_ops_it_replaced():
    """Issue 37.4: Inductor rewrote GPT-2's eager attention (matmul, softmax, matmul) into one SDPA call
    whose provenance names only its inputs' nodes (views, split); the nodes its data reaches through
    unnamed nodes are its own too, so SDPA is compared with the matmuls and softmax, not only the views."""
    rep = build_report(*load("gpt2_block")[:2], load("gpt2_block")[2])
    sdpa = next(k for k in rep["diff"]["fused_kernels"] if "scaled_dot_product" in k["name"])
    assert {"aten::matmul", "aten::softmax"} <= set(sdpa["matched_before"])
    assert {"aten::matmul", "aten::softmax"} <= set(sdpa["provenance"]["region_aten"])
    assert {"matmul", "attn_weights_1"} <= set(sdpa["provenance"]["region_pre_grad"])
    named = set(sdpa["provenance"]["pre_grad"])
    assert "matmul" not in named and "split" in named  # provenance first, the region's nodes apart
    missing = {m["aten"] for m in rep["diff"]["unclaimed_pre_grad"]}
    assert not missing & {"aten::matmul", "aten::softmax"}
    # the kernel's lines carry its replaced time: they add up to it
    lines = sdpa["provenance"]["lines"]
    assert sum(ln["replaced_us"] for ln in lines) == pytest.approx(sdpa["replaced_us"])
    assert any("softmax" in ln["code"] for ln in lines)
    assert build_report(*load("mlp_block"))["diff"]["unclaimed_pre_grad"] == []


def test_nodes_no_kernel_claims_are_listed():
    # the graph's views feeding the addmm kernels: no provenance names them, no rewrite reaches them
    rep = build_report(*load("gpt2_block")[:2], load("gpt2_block")[2])
    missing = {m["node"]: m for m in rep["diff"]["unclaimed_pre_grad"]}
    assert missing and all(m["aten"] == "aten::view" and m["graph"] == "0/0" for m in missing.values())


def test_json_never_lands_on_a_capture_input(tmp_path, capsys):
    import shutil

    cap = tmp_path / "cap"
    shutil.copytree(CAPTURES / "graph_break", cap)
    log = next((cap / "torch_trace").glob("*.log"))
    before = {p: p.read_bytes() for p in (cap / "eager.json", cap / "compiled.json", log)}
    for target in before:
        line = _one_line_error(["trace", str(cap), "--json", str(target)], capsys)
        assert "input" in line or "overwrite" in line, line
    assert all(p.read_bytes() == data for p, data in before.items())
