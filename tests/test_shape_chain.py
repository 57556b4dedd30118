"""shape_chain: Reshape targets computed from Shape at run time become constants with 0 / -1, only where
that holds for every batch and sequence."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.fusion.apply import apply_candidates
from fuseview.fusion.scan import scan_model


def _model(layout: str) -> onnx.ModelProto:
    """x[batch, seq, 16] -> Reshape(x, target computed from Shape(x)) -> Relu."""
    nodes = [
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("Gather", ["xs", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["xs", "i1"], ["s"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
        helper.make_node("Unsqueeze", ["s", "ax0"], ["s1"]),
    ]
    if layout == "heads":  # [b, s, 4, 4]
        nodes.append(helper.make_node("Concat", ["b1", "s1", "four", "four"], ["target"], axis=0))
    elif layout == "flat":  # [b * s, 16]
        nodes += [
            helper.make_node("Mul", ["b1", "s1"], ["bs"]),
            helper.make_node("Concat", ["bs", "sixteen"], ["target"], axis=0),
        ]
    else:  # [s, b, 16]: two dims moved, no constant can say that
        nodes.append(helper.make_node("Concat", ["s1", "b1", "sixteen"], ["target"], axis=0))
    nodes += [helper.make_node("Reshape", ["x", "target"], ["r"]), helper.make_node("Relu", ["r"], ["y"])]
    inits = [
        numpy_helper.from_array(np.array(0, np.int64), "i0"),
        numpy_helper.from_array(np.array(1, np.int64), "i1"),
        numpy_helper.from_array(np.array([0], np.int64), "ax0"),
        numpy_helper.from_array(np.array([4], np.int64), "four"),
        numpy_helper.from_array(np.array([16], np.int64), "sixteen"),
    ]
    g = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize(("layout", "target"), [("heads", [0, 0, 4, 4]), ("flat", [-1, 16])])
def test_computed_target_becomes_constant(layout, target):
    model = _model(layout)
    scan = scan_model(model)
    cands = [c for c in scan.candidates if c.rule == "shape_chain"]
    assert len(cands) == 1
    fused = apply_candidates(model, scan, [cands[0].id]).model
    ops = [n.op_type for n in fused.graph.node]
    assert ops == ["Reshape", "Relu"]
    init = {t.name: numpy_helper.to_array(t) for t in fused.graph.initializer}
    assert list(init[fused.graph.node[0].input[1]]) == target
    rng = np.random.default_rng(0)
    for b, s in ((1, 1), (3, 7), (2, 128)):  # other batch and sequence than the scan's
        x = rng.standard_normal((b, s, 16)).astype(np.float32)
        np.testing.assert_array_equal(_run(model, x), _run(fused, x))


def test_moved_dims_are_left_alone():
    scan = scan_model(_model("swapped"))
    assert not [c for c in scan.candidates if c.rule == "shape_chain"]
