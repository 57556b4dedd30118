"""The weightless copy made with the main graph's NodeTable (the scan's way: the load check's attribute kinds
pick what to strip) is the copy made by walking every node."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fuseview.graph.inference import weightless_copy
from fuseview.graph.table import NodeTable


def _model() -> onnx.ModelProto:
    big = numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(64, 64), "w")
    shape = numpy_helper.from_array(np.array([64, 64], np.int64), "s")
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["inner_w"], value=big),
         helper.make_node("Add", ["y", "inner_w"], ["z"])],
        "then", [], [helper.make_tensor_value_info("z", TensorProto.FLOAT, [64, 64])])
    nodes = [
        helper.make_node("Constant", [], ["w_c"], value=big),
        helper.make_node("Constant", [], ["s_c"], value=shape),
        helper.make_node("ConstantOfShape", ["s_c"], ["fill"],
                         value=numpy_helper.from_array(np.array([0.5], np.float32))),
        helper.make_node("Add", ["x", "w_c"], ["a"]),
        helper.make_node("Reshape", ["a", "s_c"], ["y"]),
        helper.make_node("Constant", [], ["cond"], value=numpy_helper.from_array(np.array(True))),
        helper.make_node("If", ["cond"], ["out"], then_branch=body, else_branch=body),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_the_copy_by_table_is_the_copy_by_walk() -> None:
    model = _model()
    before = model.SerializeToString()
    walked = weightless_copy(model)
    by_table = weightless_copy(model, table=NodeTable.of(model.graph))
    assert by_table.SerializeToString() == walked.SerializeToString()
    assert model.SerializeToString() == before  # the source keeps its weights
    consts = {n.output[0]: n.attribute[0].t for n in by_table.graph.node if n.op_type == "Constant"}
    assert not consts["w_c"].raw_data and list(consts["w_c"].dims) == [64, 64]  # stripped, dims kept
    assert numpy_helper.to_array(consts["s_c"]).tolist() == [64, 64]  # a shape constant stays whole
    inner = by_table.graph.node[-1].attribute[0].g.node[0].attribute[0].t
    assert not inner.raw_data  # bodies stripped too
