"""Shapes onnx leaves unknown or calls unk__N, written in the model's own dim names (graph/dim_names.py)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fuseview.graph.loader import document_from_model


def _model() -> onnx.ModelProto:
    """x[batch, seq, 8] -> Shape -> Gather(0), Gather(1) -> Mul -> Concat(., 8) -> Reshape: [batch*seq, 8]."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    c = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("i0", 0), ("i1", 1), ("eight", [8]))]
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["b"]),
        helper.make_node("Gather", ["s", "i1"], ["t"]),
        helper.make_node("Mul", ["b", "t"], ["bt"]),
        helper.make_node("Unsqueeze", ["bt", "axes"], ["bt1"]),
        helper.make_node("Concat", ["bt1", "eight"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["flat"]),
        helper.make_node("Relu", ["flat"], ["y"]),
    ]
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    g = helper.make_graph(nodes, "g", [x], [y], [*c, axes])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_shape_arithmetic_reads_as_the_inputs_dims():
    m = _model()
    inferred = onnx.shape_inference.infer_shapes(m)
    onnx_says = {vi.name: vi for vi in inferred.graph.value_info}["flat"].type.tensor_type.shape.dim
    assert [d.dim_param[:5] for d in onnx_says] == ["unk__", "unk__"]  # onnx invents both
    doc = document_from_model(m)
    assert doc.graph.tensors["flat"].shape == ("batch*seq", 8)
    assert doc.graph.tensors["y"].shape == ("batch*seq", 8) and doc.graph.tensors["y"].dtype == "float32"
