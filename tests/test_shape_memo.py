"""Shape propagation reuses a node's result for a later node of the same op, attributes and input contents
(graph/shapes.py): these check that the reuse never crosses different inputs, or a tensor read before it
was made."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fuseview.graph.seeds import constant_seeds
from fuseview.graph.shapes import propagate
from fuseview.graph.table import NodeTable


def _axes(name: str) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array([0], np.int64), name)


def _layers(x_shapes: list[list[int]]) -> onnx.GraphProto:
    """One Shape -> Gather -> Unsqueeze -> Concat -> Reshape chain per input (the same ops and attributes)."""
    nodes, inputs, outputs = [], [], []
    for k, shape in enumerate(x_shapes):
        inputs.append(helper.make_tensor_value_info(f"x{k}", TensorProto.FLOAT, shape))
        nodes += [
            helper.make_node("Shape", [f"x{k}"], [f"s{k}"]),
            helper.make_node("Gather", [f"s{k}", "zero"], [f"g{k}"], axis=0),
            helper.make_node("Unsqueeze", [f"g{k}", "axes"], [f"u{k}"]),
            helper.make_node("Concat", [f"u{k}", "minus1"], [f"c{k}"], axis=0),
            helper.make_node("Reshape", [f"x{k}", f"c{k}"], [f"r{k}"]),
        ]
        outputs.append(helper.make_tensor_value_info(f"r{k}", TensorProto.FLOAT, None))
    inits = [_axes("axes"), numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    return helper.make_graph(nodes, "layers", inputs, outputs, inits)


def _run(g: onnx.GraphProto, inputs: dict[str, list[int]]) -> dict[str, list[int]]:
    seeded, small = constant_seeds(g)
    return propagate(g, {**inputs, **seeded}, small, {}, NodeTable.of(g))


def test_equal_layers_on_different_shapes_keep_their_own_shapes() -> None:
    shapes = [[2, 3, 4], [2, 3, 4], [5, 6, 7], [2, 3, 4]]
    got = _run(_layers(shapes), {f"x{k}": s for k, s in enumerate(shapes)})
    for k, s in enumerate(shapes):
        assert got[f"r{k}"] == [s[0], s[1] * s[2]]
    got["r0"].append(99)  # each tensor's shape is its own list
    assert got["r1"] == [2, 12] and got["r3"] == [2, 12]


def test_a_tensor_read_before_its_node_is_read_again_once_made() -> None:
    """Nodes out of order: the first Unsqueeze reads g before Gather made it (unknown then, as always); the
    second, identical one reads it after and must not reuse the first's unknown result."""
    g = helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["g", "axes"], ["early"]),
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "zero"], ["g"], axis=0),
            helper.make_node("Unsqueeze", ["g", "axes"], ["late"]),
            helper.make_node("Concat", ["late", "late"], ["c"], axis=0),
            helper.make_node("Reshape", ["y", "c"], ["r"]),
        ],
        "out_of_order",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [9])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("early", TensorProto.INT64, None)],
        [_axes("axes"), numpy_helper.from_array(np.array(0, np.int64), "zero")],
    )
    got = _run(g, {"x": [3, 5], "y": [9]})
    assert "early" not in got  # its input was not made yet when it ran
    assert got["late"] == [1] and got["r"] == [3, 3]


def test_seeds_of_equal_constants_are_each_their_own() -> None:
    """The weightless copy's equal constants are read once; each name still gets its shape and value."""
    nodes = [helper.make_node("Constant", [], [f"k{i}"], value=numpy_helper.from_array(np.array([i % 2, 7]),
                                                                                          f"t{i % 2}"))
             for i in range(4)]
    g = helper.make_graph(nodes, "consts", [], [helper.make_tensor_value_info("k0", TensorProto.INT64, None)])
    for weightless in (False, True):
        shapes, values = constant_seeds(g, NodeTable.of(g), weightless=weightless)
        assert shapes == {f"k{i}": [2] for i in range(4)}
        assert [values[f"k{i}"].tolist() for i in range(4)] == [[0, 7], [1, 7], [0, 7], [1, 7]]
        shapes["k0"].append(1)
        assert shapes["k2"] == [2]
