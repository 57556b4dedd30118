"""Choices made per provider and shape: linear_3d (computed Reshapes around a Gemm made light) and the
kernel measured slower on a provider (SkipLayerNormalization on CPU from 8 rows) left as a near miss."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.fusion.apply import apply_candidates, check_fused
from fuseview.fusion.kernels import SLOWER, measured_slower
from fuseview.fusion.plan import Plan
from fuseview.fusion.rules import rule_by_name
from fuseview.fusion.scan import scan_file, scan_model
from fuseview.fusion.validate import validate

ROOT = Path(__file__).resolve().parent.parent
GPT2 = ROOT / "tests" / "data" / "gpt2" / "gpt2_12l_ts17.onnx"
RNG = np.random.default_rng(0)
K, N = 8, 6


def _i64(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _linear_model(opset: int, constant_out: bool = False) -> onnx.ModelProto:
    """x [B, S, K] -> Reshape([-1, K] computed from x's shape) -> Gemm -> Reshape([B, S, N] computed)."""
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["sx"]),
        n("Gather", ["sx", "i2"], ["k"], axis=0),
        n("Unsqueeze", ["k", "ax0"], ["ku"]),
        n("Concat", ["m1", "ku"], ["shape_in"], axis=0),
        n("Reshape", ["x", "shape_in"], ["flat"]),
        n("Gemm", ["flat", "w", "bias"], ["g"]),
        n("Gather", ["sx", "i0"], ["b"], axis=0),
        n("Gather", ["sx", "i1"], ["s"], axis=0),
        n("Unsqueeze", ["b", "ax0"], ["bu"]),
        n("Unsqueeze", ["s", "ax0"], ["su"]),
        n("Concat", ["bu", "su", "nn"], ["shape_out"], axis=0),
        n("Reshape", ["g", "shape_out" if not constant_out else "fixed_out"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(RNG.standard_normal((K, N)).astype(np.float32), "w"),
        numpy_helper.from_array(RNG.standard_normal(N).astype(np.float32), "bias"),
        _i64("m1", [-1]), _i64("nn", [N]), _i64("ax0", [0]), _i64("fixed_out", [2, 5, N]),
        *(numpy_helper.from_array(np.array(i, np.int64), f"i{i}") for i in range(3)),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", N])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("opset", [13, 17])
def test_linear_3d_reads_the_leading_dims_once(opset: int) -> None:
    m = _linear_model(opset)
    r = scan_model(m, {"B": 2, "S": 5}, rules=[rule_by_name("linear_3d")])
    assert [c.rule for c in r.candidates] == ["linear_3d"], [x.reason for x in r.near_misses]
    plan = Plan(r.candidates)
    plan.accept_all()
    res = apply_candidates(m, r, plan.accepted())
    check_fused(res.model)
    ops = sorted(x.op_type for x in res.model.graph.node)
    lead = ["Shape"] if opset >= 15 else ["Shape", "Slice"]
    # the Gather/Unsqueeze chains are gone
    assert ops == sorted(["Concat", "Gemm", "Reshape", "Reshape", *lead])
    for dims in ({"B": 2, "S": 5}, {"B": 3, "S": 1}):  # the fused model is not fixed to the scan's dims
        v = validate(m, res.model, False, dims)
        assert v.ok, v.to_json()


def test_linear_3d_leaves_a_constant_target_alone() -> None:
    r = scan_model(_linear_model(17, constant_out=True), {"B": 2, "S": 5}, rules=[rule_by_name("linear_3d")])
    assert not r.candidates and not r.near_misses


def test_measured_slower_counts_rows() -> None:
    assert measured_slower("cpu", "com.microsoft", "SkipLayerNormalization", [1, 128, 64]) is not None
    assert measured_slower("CPUExecutionProvider", "com.microsoft", "SkipLayerNormalization", [2, 4, 768])
    assert measured_slower("cpu", "com.microsoft", "SkipLayerNormalization", [1, 1, 64]) is None  # decode
    assert measured_slower("cpu", "com.microsoft", "SkipLayerNormalization", [1, "seq", 64]) is None
    assert measured_slower("cuda", "com.microsoft", "SkipLayerNormalization", [1, 128, 64]) is None
    assert measured_slower("cpu", "com.microsoft", "FastGelu", [1, 128, 64]) is None
    assert all(rows >= 1 and why for table in SLOWER.values() for rows, why in table.values())


def test_skip_layer_norm_is_a_near_miss_on_cpu_at_a_prompt_but_fused_at_a_decode_step() -> None:
    def skips(result):
        return [c for c in result.candidates if c.fused_op == "SkipLayerNormalization"]

    prompt = scan_file(GPT2, provider="cpu")
    assert not skips(prompt)
    why = [m for m in prompt.near_misses if "SkipLayerNormalization kernel is slower" in m.reason]
    assert len(why) >= 24 and "128 rows" in why[0].reason
    assert len(skips(scan_file(GPT2, {"seq": 1}, provider="cpu"))) >= 24
    assert len(skips(scan_file(GPT2, provider="cuda"))) >= 24
