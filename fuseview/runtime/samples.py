"""Small real models built with onnx.helper: a slow-node model and a tanh-GELU original/fused/broken trio."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fuseview.provenance import CANDIDATE_KEY, ORIGIN_KEY, RULE_KEY
from fuseview.runtime.ir_version import clamp_ir

# IR 10 has node metadata_props; onnx.helper would stamp a newer IR than onnxruntime reads.
IR_VERSION = 10
OPSET = 17


def _model(nodes, inputs, outputs, inits, ms_domain: bool = False) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", OPSET)]
    if ms_domain:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=opsets, ir_version=clamp_ir(IR_VERSION),
                             producer_name="fuseview-samples")


def slow_node_model(n: int = 256, tiny: int = 8) -> onnx.ModelProto:
    """One big MatMul among several tiny element-wise nodes: the MatMul should dominate any profile."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [tiny])
    t = helper.make_tensor_value_info("t", TensorProto.FLOAT, [tiny])
    w = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Relu", ["s"], ["s1"], name="tiny_relu"),
        helper.make_node("Neg", ["s1"], ["s2"], name="tiny_neg"),
        helper.make_node("Abs", ["s2"], ["t"], name="tiny_abs"),
        helper.make_node("MatMul", ["x", "w"], ["m1"], name="big_matmul_1"),
        helper.make_node("MatMul", ["m1", "w"], ["m2"], name="big_matmul_2"),
        helper.make_node("MatMul", ["m2", "w"], ["y"], name="big_matmul_3"),
    ]
    return _model(nodes, [x, s], [y, t], [w])


GELU_NODES = ["gelu_pow", "gelu_mul_c", "gelu_add_x", "gelu_mul_k", "gelu_tanh", "gelu_add_1", "gelu_mul_x",
              "gelu_mul_half"]


def _gelu_frame(hidden: int, inner: int):
    rng = np.random.default_rng(1)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", hidden])
    w1 = numpy_helper.from_array((rng.standard_normal((hidden, inner)) * 0.5).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((inner, hidden)) * 0.1).astype(np.float32), "w2")
    pre = helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc_in")
    post = helper.make_node("MatMul", ["gelu_out", "w2"], ["y"], name="fc_out")
    return x, y, [w1, w2], pre, post


def gelu_original(hidden: int = 64, inner: int = 256, k: float = 0.044715) -> onnx.ModelProto:
    """MatMul -> decomposed tanh-GELU (8 nodes, as exporters write it) -> MatMul."""
    x, y, inits, pre, post = _gelu_frame(hidden, inner)
    c = {"three": 3.0, "k": k, "sqrt2pi": math.sqrt(2.0 / math.pi), "one": 1.0, "half": 0.5}
    inits += [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in c.items()]
    gelu = [
        helper.make_node("Pow", ["h", "three"], ["g1"], name="gelu_pow"),
        helper.make_node("Mul", ["g1", "k"], ["g2"], name="gelu_mul_c"),
        helper.make_node("Add", ["h", "g2"], ["g3"], name="gelu_add_x"),
        helper.make_node("Mul", ["g3", "sqrt2pi"], ["g4"], name="gelu_mul_k"),
        helper.make_node("Tanh", ["g4"], ["g5"], name="gelu_tanh"),
        helper.make_node("Add", ["g5", "one"], ["g6"], name="gelu_add_1"),
        helper.make_node("Mul", ["h", "g6"], ["g7"], name="gelu_mul_x"),
        helper.make_node("Mul", ["g7", "half"], ["gelu_out"], name="gelu_mul_half"),
    ]
    return _model([pre, *gelu, post], [x], [y], inits)


def gelu_fused(hidden: int = 64, inner: int = 256, bias: float | None = None) -> onnx.ModelProto:
    """The same model with the GELU as one com.microsoft FastGelu carrying fuseview.origin metadata.

    A nonzero `bias` is a deliberately broken fusion (FastGelu adds it before the activation).
    """
    x, y, inits, pre, post = _gelu_frame(hidden, inner)
    ins = ["h"]
    if bias is not None:
        inits.append(numpy_helper.from_array(np.full((inner,), bias, np.float32), "gelu_bias"))
        ins.append("gelu_bias")
    fused = helper.make_node("FastGelu", ins, ["gelu_out"], name="fused_gelu", domain="com.microsoft")
    for key, value in ((ORIGIN_KEY, json.dumps(GELU_NODES)), (RULE_KEY, "fast_gelu_tanh"),
                       (CANDIDATE_KEY, "fast_gelu_tanh:gelu_pow")):
        p = fused.metadata_props.add()
        p.key, p.value = key, value
    return _model([pre, fused, post], [x], [y], inits, ms_domain=True)
