"""Costs per node (runtime/roofline.py): FLOPs and bytes exact on hand-built graphs."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.runtime.roofline import node_costs, tensor_shapes

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), ms=False):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, F, None) for n in outputs],
                              [numpy_helper.from_array(np.ones(s, np.float32), n) for n, s in inits])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("com.microsoft", 1)] if ms else [])
    return helper.make_model(graph, opset_imports=opsets)


def _one(model, dims=None):
    costs = node_costs(model, dims or {})
    assert len(costs) == 1
    c = next(iter(costs.values()))
    assert not c.estimated
    return c


def test_matmul_batched():
    m = _model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], [("a", [2, 3, 4])], ["y"],
               [("b", [4, 5])])
    c = _one(m)
    assert (c.flops, c.bytes) == (2 * 4 * 2 * 3 * 5, (24 + 20 + 30) * 4)
    assert c.intensity == pytest.approx(240 / 296)


def test_matmul_symbolic_dims_take_the_profiled_values():
    m = _model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], [("a", ["batch", "seq", 4])],
               ["y"], [("b", [4, 5])])
    c = _one(m, {"batch": 2, "seq": 3})
    assert (c.flops, c.bytes) == (240, 296)


def test_gemm_trans_b_with_bias():
    m = _model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1)], [("a", [3, 4])], ["y"],
               [("b", [5, 4]), ("c", [5])])
    c = _one(m)
    assert (c.flops, c.bytes) == (2 * 4 * 15 + 15, (12 + 20 + 5 + 15) * 4)


def test_conv_with_bias():
    m = _model([helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3])], [("x", [1, 2, 5, 5])],
               ["y"], [("w", [3, 2, 3, 3]), ("b", [3])])
    c = _one(m)
    out = 1 * 3 * 3 * 3
    assert (c.flops, c.bytes) == (2 * 2 * 9 * out + out, (50 + 54 + 3 + out) * 4)


def test_add_with_broadcast_counts_each_input_at_its_own_size():
    m = _model([helper.make_node("Add", ["x", "y"], ["z"])], [("x", [2, 3, 4]), ("y", [4])], ["z"])
    c = _one(m)
    assert (c.flops, c.bytes) == (24, (24 + 4 + 24) * 4)


def test_same_input_twice_is_read_once():
    m = _model([helper.make_node("Mul", ["x", "x"], ["z"])], [("x", [8])], ["z"])
    assert (_one(m).flops, _one(m).bytes) == (8, 16 * 4)


def test_softmax_five_per_element():
    m = _model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [("x", [2, 8])], ["y"])
    c = _one(m)
    assert (c.flops, c.bytes) == (5 * 16, 32 * 4)


def test_layernorm_with_and_without_bias():
    m = _model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)], [("x", [2, 3, 8])],
               ["y"], [("g", [8]), ("b", [8])])
    c = _one(m)
    assert (c.flops, c.bytes) == (48 * 7, (48 + 8 + 8 + 48) * 4)
    m = _model([helper.make_node("LayerNormalization", ["x", "g"], ["y"], axis=-1)], [("x", [2, 3, 8])],
               ["y"], [("g", [8])])
    assert _one(m).flops == 48 * 6


def _mha_with_cache():
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "", "", "pk", "pv"],
                            ["y", "present_k", "present_v"], domain="com.microsoft", num_heads=2, name="mha")
    return _model([node], [("q", [1, 4, 16]), ("k", [1, 4, 16]), ("v", [1, 4, 16]), ("pk", [1, 2, 6, 8]),
                           ("pv", [1, 2, 6, 8])], ["y", "present_k", "present_v"], ms=True)


def test_multi_head_attention_with_a_cache():
    m = _mha_with_cache()
    c = _one(m)
    b, heads, s, t, h = 1, 2, 4, 6 + 4, 8  # keys: 6 cached + 4 new
    assert c.flops == b * heads * s * t * (2 * h + 2 * h + 6)
    assert c.bytes == (3 * 64 + 2 * 96 + 64 + 2 * 160) * 4


def test_contrib_shapes_match_what_onnxruntime_returns():
    m = _mha_with_cache()
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
             .astype(np.float32) for i in m.graph.input}
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds), strict=True))
    shapes = tensor_shapes(m, {})
    for name, value in got.items():
        assert shapes[name][0] == list(value.shape), name


def test_unknown_op_is_estimated_not_silently_exact():
    m = _model([helper.make_node("Hardmax", ["x"], ["y"])], [("x", [2, 8])], ["y"])
    c = next(iter(node_costs(m, {}).values()))
    assert c.estimated and c.flops == 16


def test_shape_reads_no_data_and_gather_reads_its_rows():
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["table", "idx"], ["rows"], name="gather")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [4, 8]),
                                           helper.make_tensor_value_info("idx", TensorProto.INT64, [3])],
                              [helper.make_tensor_value_info("s", TensorProto.INT64, None),
                               helper.make_tensor_value_info("rows", F, None)],
                              [numpy_helper.from_array(np.ones((1000, 8), np.float32), "table")])
    costs = node_costs(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), {})
    assert costs["shape"].bytes == 2 * 8
    assert costs["gather"].bytes == 24 * 4 * 2 + 3 * 8
    assert costs["gather"].flops == 0


@pytest.mark.parametrize("path", ["tests/data/gpt2/gpt2_2l_ts17.onnx",
                                  "assets/models/current/llama_2l_sdpa_past_ts17.onnx"])
def test_committed_exports_are_costed_without_estimates(path):
    from fuseview.dims import resolve_dims

    m = onnx.load(path)
    costs = node_costs(m, resolve_dims(m))
    assert costs and not [c for c in costs.values() if c.estimated]
    assert sum(c.flops for c in costs.values() if c.op_type == "MatMul") > 0


@pytest.mark.parametrize("path", ["tests/data/gpt2/gpt2_2l_ts17.onnx",
                                  "assets/models/current/bert_2l_sdpa_ts17.onnx",
                                  "assets/models/current/llama_2l_sdpa_ts17.onnx",
                                  "assets/models/current/gpt2_2l_sdpa_past_ts17.onnx"])
def test_fusion_keeps_the_flops_and_cuts_the_bytes(path):
    """The fused ops' definitions count the work of the nodes they replace (within 1 %), on less traffic."""
    import fuseview

    fused = fuseview.fuse(path).model
    before, after = fuseview.costs(path), fuseview.costs(fused)
    assert not [c for c in after.values() if c.estimated]
    flops = [sum(c.flops for c in costs.values()) for costs in (before, after)]
    assert flops[1] == pytest.approx(flops[0], rel=0.01)
    assert sum(c.bytes for c in after.values()) < 0.7 * sum(c.bytes for c in before.values())
