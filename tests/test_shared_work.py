"""Work every layer's fusion repeats is computed once (fusion.shared_work, attention_gqa's length sources):
GroupQueryAttention's sequence lengths and the mask's row guard, on real exports, validated."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from fuseview.fusion.shared_work import merge_shared_work

from .conftest import ASSET_MODELS

LLAMAS = [ASSET_MODELS / "current" / "llama_2l_sdpa_past_ts17.onnx",
          ASSET_MODELS / "current" / "llama_2l_sdpa_past_dynamo.onnx",
          ASSET_MODELS / "kvcache" / "llama_2l_past_ts17_xyzdims.onnx",
          ASSET_MODELS / "kvcache" / "llama_2l_past_ts17_decode.onnx"]


@pytest.mark.parametrize("path", LLAMAS, ids=lambda p: p.stem)
def test_every_layer_reads_one_set_of_lengths_and_one_mask_guard(path):
    import fuseview

    before = fuseview.load(path)
    out = fuseview.fuse(path)  # validated against the original (the pipeline's tolerances)
    assert out.validation is not None and out.validation.ok
    g = out.model.graph
    gqa = [n for n in g.node if n.op_type == "GroupQueryAttention"]
    assert len(gqa) == 2
    # seqlens_k and total_sequence_length (inputs 5, 6) are one tensor each for every layer
    assert len({n.input[5] for n in gqa}) == 1 and len({n.input[6] for n in gqa}) == 1
    producers = {o: n for n in g.node for o in n.output}
    shapes = [n for n in g.node if n.op_type == "Shape" and producers.get(n.input[0]) is not None
              and producers[n.input[0]].op_type == "MatMul"]
    assert not shapes, f"lengths still read a layer's projection: {[n.name for n in shapes]}"
    # the mask's bias and row guard (when there is one) are computed once too
    assert len({n.input[10] if len(n.input) > 10 else "" for n in gqa}) == 1  # attention_bias
    assert sum(n.op_type == "ReduceMax" for n in g.node) <= 1
    assert fuseview.load(path) == before  # the source is never modified


def test_only_the_fusions_work_is_merged():
    """Two equal Shape nodes of the model's own stay (the user's export, not a fusion, wrote them); two
    equal fused helpers merge, a graph output is never renamed, and the source nodes are not modified."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    outs = [helper.make_tensor_value_info(o, TensorProto.INT64, [1]) for o in ("s1", "s2", "f2")]
    nodes = [helper.make_node("Shape", ["x"], ["s1"], start=0, end=1),
             helper.make_node("Shape", ["x"], ["s2"], start=0, end=1),
             helper.make_node("Shape", ["x"], ["f1"], start=0, end=1),  # made by a fusion
             helper.make_node("Shape", ["x"], ["f1b"], start=0, end=1),  # the same, another layer
             helper.make_node("Add", ["f1b", "one_b"], ["f2"])]  # reads the copy: re-pointed
    one = [onnx.numpy_helper.from_array(np.array([1], np.int64), n) for n in ("one_a", "one_b")]
    g = helper.make_graph(nodes, "g", [x], outs, one)
    listed = list(g.node)
    fused = {id(listed[2]), id(listed[3]), id(listed[4])}
    kept, merged = merge_shared_work(listed, g.initializer, fused, {"s1", "s2", "f2"})
    # the model's own Shapes stay; f1b merges into s1 (an equal earlier node, whatever made it)
    assert merged == 2 and [n.output[0] for n in kept] == ["s1", "s2", "f2"]
    assert list(kept[-1].input) == ["s1", "one_b"] and list(g.node[4].input) == ["f1b", "one_b"]


def test_a_constant_whose_data_does_not_match_its_dims_is_never_merged():
    from fuseview.fusion.shared_work import _constant_key

    t = onnx.helper.make_tensor("b", onnx.TensorProto.FLOAT, [8], [0.0] * 8)
    assert _constant_key(t) is not None
    t.data_type = onnx.TensorProto.STRING  # a hostile file's type: its 32 bytes are no 8 strings
    assert _constant_key(t) is None


def test_equal_fused_initializers_are_one_and_the_models_own_are_left_alone():
    """Each layer's rotary caches (written by the fusions, equal values) become one table; a different
    value keeps its own name."""
    from fuseview.fusion.shared_work import equal_initializers

    table = np.linspace(-1, 1, 4096 * 32, dtype=np.float32).reshape(4096, 32)
    arrays = {"l0_cos": table, "l1_cos": table.copy(), "l0_sin": table + 1,
              "l1_cos16": table.astype(np.float16)}
    made = [onnx.numpy_helper.from_array(a, name) for name, a in arrays.items()]
    assert equal_initializers(made) == {"l1_cos": "l0_cos"}
