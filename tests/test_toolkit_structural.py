"""The structural helpers every imperative rule builds on: absorb, check_contained, the shape-input walk and
the dims engine's reads of node inputs, on small real graphs (GraphIndex over an onnx model)."""

from __future__ import annotations

import random

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.fusion.graphindex import GraphIndex
from fuseview.fusion.toolkit import Miss, ScanContext, shape_inputs_walk


def _reshape_model(extra_reader: bool = False, shape_as_output: bool = False) -> onnx.ModelProto:
    """y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])) with the shape chain as TorchScript writes
    it; optionally the Gather also read by an Identity (outside) or the Shape a graph output."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["b"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["b", "axes"], ["b1"], name="unsqueeze"),
        helper.make_node("Concat", ["b1", "minus1"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape"),
    ]
    if extra_reader:
        nodes.append(helper.make_node("Identity", ["b"], ["b_copy"], name="outside"))
        outs.append(helper.make_tensor_value_info("b_copy", TensorProto.INT64, None))
    if shape_as_output:
        outs.append(helper.make_tensor_value_info("shape", TensorProto.INT64, None))
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    graph = helper.make_graph(nodes, "g", [x], outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _chain(model: onnx.ModelProto) -> tuple[ScanContext, onnx.NodeProto, set[int]]:
    ctx = ScanContext(GraphIndex(model))
    reshape = next(n for n in ctx.index.nodes if n.op_type == "Reshape")
    ids: set[int] = set()
    shape_inputs_walk(ctx.structure, reshape.input[1], ids)
    return ctx, reshape, ids


def test_the_shape_input_walk_stops_at_shape_and_skips_constants() -> None:
    ctx, _reshape, ids = _chain(_reshape_model())
    names = sorted(ctx.index.name(ctx.structure.by_id[i]) for i in ids)
    assert names == ["concat", "gather", "shape", "unsqueeze"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_absorb_takes_in_a_whole_chain_whatever_the_order_of_the_ids(seed: int) -> None:
    ctx, reshape, ids = _chain(_reshape_model())
    order = list(ids)
    random.Random(seed).shuffle(order)
    core = [reshape]
    matched = ctx.structure.absorb(core, order)
    assert matched == ids | {id(reshape)}
    assert sorted(n.name for n in core) == ["concat", "gather", "reshape", "shape", "unsqueeze"]
    ctx.structure.check_contained(core, matched, {"y"})


def test_absorb_leaves_a_node_read_outside_and_all_it_feeds_on() -> None:
    ctx, reshape, ids = _chain(_reshape_model(extra_reader=True))
    core = [reshape]
    ctx.structure.absorb(core, ids)
    # the Gather is read by the Identity too: it stays, and so do the Shape feeding it
    assert sorted(n.name for n in core) == ["concat", "reshape", "unsqueeze"]


def test_absorb_leaves_a_graph_output() -> None:
    ctx, reshape, ids = _chain(_reshape_model(shape_as_output=True))
    core = [reshape]
    ctx.structure.absorb(core, ids)
    assert "shape" not in {n.name for n in core}


def test_check_contained_names_the_outside_reader_and_the_graph_output() -> None:
    ctx, reshape, ids = _chain(_reshape_model(extra_reader=True))
    core = [reshape] + [ctx.structure.by_id[i] for i in ids]
    with pytest.raises(Miss, match="intermediate b is also used by outside outside the match"):
        ctx.structure.check_contained(core, {id(n) for n in core}, {"y"})
    ctx, reshape, ids = _chain(_reshape_model(shape_as_output=True))
    core = [reshape] + [ctx.structure.by_id[i] for i in ids]
    with pytest.raises(Miss, match="intermediate shape is a graph output"):
        ctx.structure.check_contained(core, {id(n) for n in core}, {"y"})


def test_dims_read_a_split_without_sizes_and_a_slice_with_empty_trailing_inputs() -> None:
    """Inputs as the node lists them, empty names included: Split(x) with no sizes input halves the axis,
    Slice(x, starts, ends, axes, '') slices with step 1."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 8])
    nodes = [
        helper.make_node("Split", ["x", ""], ["p", "q"], name="split", axis=2, num_outputs=2),
        helper.make_node("Slice", ["p", "s", "e", "a", ""], ["r"], name="slice"),
        helper.make_node("Add", ["r", "q"], ["y"], name="add"),
    ]
    inits = [numpy_helper.from_array(np.array([1], np.int64), n) for n in ("s", "a")]
    inits.append(numpy_helper.from_array(np.array([5], np.int64), "e"))
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    d = ScanContext(GraphIndex(model)).dims
    assert d.dim("q", 2) == 4
    assert d.dim("r", 1) == 4 and d.dim("r", 2) == 4
    assert d.dim("y", 0) == ("param", "batch")
    assert d.same(("dim", "y", 0), ("dim", "x", 0))
