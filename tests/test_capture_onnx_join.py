"""Issue 28.4: torch.compile beside fuseview's ONNX fusions of the same module, joined by source line.

The committed capture (scripts/make_traces.py --only mlp_block_onnx) is compare_compile(..., onnx=True)
of an MLP block: LayerNorm, Linear, GELU, Linear, residual add, each on its own line of make_traces.py.
"""

from __future__ import annotations

import os

import onnx
import pytest

from fuseview.cli import main
from fuseview.traces.report import build_report
from fuseview.traces.stats import load_trace
from fuseview.traces.torch_log import read_compile_log
from fuseview.workflows.onnx_join import capture_join, node_lines, user_frames
from tests.conftest import ROOT

CAPTURE = ROOT / "tests" / "data" / "traces" / "provenance" / "mlp_block_onnx"


def _rows():
    after = load_trace(CAPTURE / "compiled.json")
    rep = build_report(load_trace(CAPTURE / "eager.json"), after, read_compile_log(CAPTURE / "torch_trace",
                                                                                   after))
    rows = capture_join(CAPTURE, rep)
    assert rows is not None
    return rows


def _row(rows, code: str):
    found = [r for r in rows if code in r.code]
    assert len(found) == 1, [r.code for r in rows]
    return found[0]


def test_each_exported_node_keeps_the_user_line_it_came_from():
    model = onnx.load(str(CAPTURE / "model.onnx"), load_external_data=False)
    lines = node_lines(model)
    assert {k[0] for k in lines} == {"make_traces.py"}
    ops = sorted(n.op_type for nodes in lines.values() for n in nodes)
    assert ops == sorted(["LayerNormalization", "MatMul", "Add", "Gelu", "MatMul", "Add", "Add"])
    assert user_frames('  File "/x/site-packages/torch/nn/a.py", line 3, in f\n  File "m.py", line 9, in g') \
        == [("m.py", 9)]


def test_each_line_holds_its_kernels_and_its_fused_onnx_nodes():
    rows = _rows()
    gelu = _row(rows, "torch.nn.functional.gelu(self.up(h))")
    assert any("cpp_fused_gelu" in k for k in gelu.kernels) and any("addmm" in k for k in gelu.kernels)
    assert {"aten::gelu", "aten::linear"} <= gelu.eager_ops and gelu.eager_us > 0 and gelu.kernel_us > 0
    assert sorted(gelu.onnx_before) == ["Add", "Gelu", "MatMul"]
    assert sorted(gelu.onnx_after) == ["BiasGelu", "MatMul"] and gelu.inductor_fuses and gelu.onnx_fuses
    assert gelu.modules == ["up"]  # the Linear's nodes; the gelu's own are at the top level (no scope)
    residual = _row(rows, "x + self.down(h)")
    assert any("cpp_fused_add" in k for k in residual.kernels) and residual.inductor_fuses
    assert sorted(residual.onnx_before) == ["Add", "Add", "MatMul"] and not residual.onnx_fuses
    assert residual.modules == ["down"]
    norm = _row(rows, "self.norm(x)")
    assert norm.onnx_before == ["LayerNormalization"] and any("layer_norm" in k for k in norm.kernels)
    # lines where one compiler fuses and the other does not come first
    flags = [r.disagree for r in rows]
    assert flags == sorted(flags, reverse=True) and rows.index(residual) < rows.index(gelu)


def test_conv_bn_relu_joins_on_its_one_line():
    folder = CAPTURE.parent / "conv_bn_relu_onnx"
    after = load_trace(folder / "compiled.json")
    log = read_compile_log(folder / "torch_trace", after)
    rep = build_report(load_trace(folder / "eager.json"), after, log)
    rows = [r for r in capture_join(folder, rep) or [] if r.kernels or r.onnx_before]
    assert len(rows) == 1
    r = rows[0]
    assert "self.bn(self.conv(x))" in r.code
    assert {"aten::conv2d", "aten::batch_norm", "aten::relu"} <= r.eager_ops
    assert any("batch_norm" in k and "relu" in k for k in r.kernels) and r.inductor_fuses
    # the exporter folded the BatchNorm into the Conv; fuseview fuses the Conv with its Relu
    assert sorted(r.onnx_before) == ["Conv", "Relu"] and r.onnx_after == ["FusedConv"] and r.onnx_fuses


def test_gpt2_block_lines_hold_their_kernels_and_fused_nodes():
    folder = CAPTURE.parent / "gpt2_block_onnx"
    after = load_trace(folder / "compiled.json")
    log = read_compile_log(folder / "torch_trace", after)
    rows = capture_join(folder, build_report(load_trace(folder / "eager.json"), after, log)) or []
    gelu = _row(rows, "torch.tanh(math.sqrt(2.0 / math.pi)")
    assert any("fused_add_mul_pow_tanh" in k for k in gelu.kernels) and gelu.inductor_fuses
    assert gelu.onnx_after == ["FastGelu"] and len(gelu.onnx_before) == 8
    residual = _row(rows, "attn_output + residual")
    assert residual.onnx_after == ["SkipLayerNormalization"] and residual.inductor_fuses
    ln1 = _row(rows, "self.ln_1(hidden_states)")
    assert ln1.onnx_before == ["LayerNormalization"] and ln1.inductor_fuses and not ln1.onnx_fuses
    attn = _row(rows, "attention_interface(")
    # the attention fusion fuseview applies (accept-all: the packed Attention, not also the MHA it overlaps)
    assert attn.onnx_after == ["Attention"] and "Softmax" in attn.onnx_before
    # the module scope each line's ONNX nodes were made in (the dynamo exporter's name scopes)
    assert gelu.modules == ["block.mlp.act"] and attn.modules == ["block.attn"]
    assert ln1.modules == ["block.ln_1"]
    flags = [r.disagree for r in rows]
    assert flags == sorted(flags, reverse=True)


def test_cli_prints_the_join_for_a_capture_with_its_onnx_model(capsys):
    assert main(["trace", str(CAPTURE)]) == 0
    out = capsys.readouterr().out
    table = out[out.index("torch.compile beside fuseview's fusions"):]
    assert "[both fuse]" in table and "[only Inductor fuses" in table and "-> MatMul, BiasGelu" in table
    assert "    in up" in table  # the module scope of the gelu line's Linear


@pytest.mark.slow
@pytest.mark.torch
def test_compare_compile_onnx_exports_the_module(tmp_path):
    torch = pytest.importorskip("torch")
    if os.environ.get("FUSEVIEW_REQUIRE_TORCH") != "1":
        pytest.importorskip("onnxscript")
    from fuseview.capture import compare_compile

    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32)

        def forward(self, x):
            h = torch.nn.functional.gelu(self.up(x))
            return x + self.down(h)

    from fuseview.errors import FuseviewError

    with pytest.raises(FuseviewError, match="must be a torch.nn.Module"):
        compare_compile(torch.relu, (torch.ones(2),), tmp_path / "f", onnx=True)
    torch.manual_seed(0)
    out = compare_compile(Mlp().eval(), (torch.randn(8, 32),), tmp_path / "cap", steps=3, warmup=2, onnx=True)
    model = onnx.load(str(out / "model.onnx"))
    lines = node_lines(model)
    assert any(k[0] == "test_capture_onnx_join.py" for k in lines)
    after = load_trace(out / "compiled.json")
    rep = build_report(load_trace(out / "eager.json"), after, read_compile_log(out / "torch_trace", after))
    rows = capture_join(out, rep)
    assert rows and any(r.kernels and r.onnx_before for r in rows)


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_onnx_time_per_line_before_and_after_fusion(capsys):
    """--onnx-time: onnxruntime profiles the exported model and its fused version at the same shapes."""
    after = load_trace(CAPTURE / "compiled.json")
    log = read_compile_log(CAPTURE / "torch_trace", after)
    rows = capture_join(CAPTURE, build_report(load_trace(CAPTURE / "eager.json"), after, log), ort_time=True,
                        runs=5) or []
    timed = [r for r in rows if r.node_names]
    assert timed and all(r.ort_before_us > 0 and r.ort_after_us > 0 for r in timed)
    assert all(r.ort_before_us is None for r in rows if not r.node_names)
    assert main(["trace", str(CAPTURE), "--onnx-time"]) == 0
    assert "onnxruntime " in capsys.readouterr().out


def _gpt2_rows():
    folder = CAPTURE.parent / "gpt2_block_onnx"
    after = load_trace(folder / "compiled.json")
    log = read_compile_log(folder / "torch_trace", after)
    return folder, build_report(load_trace(folder / "eager.json"), after, log)


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_gpt2_block_lines_add_up_to_each_model_and_no_node_counts_twice():
    """Issue 37.3: a fused node's time is split across the lines it covers, never charged whole to each."""
    from fuseview.fusion.pipeline import FuseOptions, dims_for, load_for_fusion, scan_for_fusion
    from fuseview.workflows.onnx_join import add_ort_times, applied

    folder, rep = _gpt2_rows()
    rows = capture_join(folder, rep) or []
    kernels = [k for k in rep["diff"]["fused_kernels"] if k["provenance"]]
    # eager and Inductor columns: every kernel's time once, split over its lines
    assert sum(r.eager_us for r in rows) == pytest.approx(sum(k["replaced_us"] for k in kernels))
    assert sum(r.kernel_us for r in rows) == pytest.approx(sum(k["time_us"] for k in kernels))
    sdpa = [r for r in rows if any("scaled_dot_product" in k for k in r.kernels)]
    assert len(sdpa) > 1  # SDPA came from several lines: its time is shared among them, the sums hold
    # one fusion per node: no line lists both the packed and the MHA attention of the same nodes
    assert all(not ({"Attention", "MultiHeadAttention"} <= set(r.onnx_after)) for r in rows)
    path = folder / "model.onnx"
    model = load_for_fusion(path)
    found = scan_for_fusion(model, dims_for(model, FuseOptions(validate=False)), path)
    ids = [c.id for c in applied(found)]
    assert len({n for c in applied(found) for n in c.nodes}) == sum(len(c.nodes) for c in applied(found))
    assert len(ids) < len(found.candidates)  # the scan holds overlapping candidates; one of each is applied
    original, fused = add_ort_times(path, rows, runs=3, scanned=(model, found))
    timed = [r for r in rows if r.ort_before_us is not None]
    assert sum(r.ort_before_us for r in timed) == pytest.approx(original)
    assert sum(r.ort_after_us for r in timed) == pytest.approx(fused)  # every fused node once
    attn = [r for r in timed if "Attention" in r.onnx_after or "MultiHeadAttention" in r.onnx_after]
    assert len(attn) > 1 and len({round(r.ort_after_us, 6) for r in attn}) > 1  # split, not repeated


def test_cli_join_says_how_it_splits_and_prints_totals_in_microseconds(capsys):
    assert main(["trace", str(CAPTURE.parent / "gpt2_block_onnx")]) == 0
    out = capsys.readouterr().out
    table = out[out.index("torch.compile beside fuseview's fusions"):]
    assert "split across its lines by the eager time of each line's ops" in table
    assert "  all " in table and " lines: eager " in table
    assert " us" not in out.replace(" used", "")  # one spelling of the unit: µs
    assert "Attention, MultiHeadAttention" not in table
