"""The load check refuses node names that are not UTF-8 and untyped attributes, in the main graph and in
bodies, with the first offending node named (graph/loader.py: a join per column passes the usual model,
the node-by-node walk finds what it refuses)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.errors import FuseviewError
from fuseview.graph.loader import read_model


def _model(nodes: list[onnx.NodeProto]) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, [2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _write(tmp_path: Path, model: onnx.ModelProto, swap: tuple[bytes, bytes] | None = None) -> Path:
    data = model.SerializeToString()
    if swap is not None:  # protobuf writes no string that is not UTF-8: edit the bytes
        assert data.count(swap[0]) == 1 and len(swap[0]) == len(swap[1])
        data = data.replace(*swap)
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("field", ["name", "input"])
def test_a_node_text_not_utf8_is_refused_with_its_node(tmp_path: Path, field: str) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"),
             helper.make_node("Relu", ["a"], ["b"], name="QQQQ" if field == "name" else "second")]
    if field == "input":
        nodes.append(helper.make_node("Add", ["b", "QQQQ"], ["c"], name="third"))
        nodes.insert(0, helper.make_node("Relu", ["x"], ["QQQQ"], name="zero"))
        swap = (b"\n\x01b\n\x04QQQQ", b"\n\x01b\n\x04\xff\xfe\xfd\xfc")
    else:
        swap = (b"QQQQ", b"\xff\xfe\xfd\xfc")
    with pytest.raises(FuseviewError, match=r"node \d has a name that is not valid UTF-8"):
        read_model(_write(tmp_path, _model(nodes), swap))


def test_an_untyped_attribute_is_refused(tmp_path: Path) -> None:
    node = helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.1)
    node.attribute[0].type = onnx.AttributeProto.UNDEFINED
    with pytest.raises(FuseviewError, match=r"attribute 'alpha' of node 0 \(LeakyRelu\) has no type"):
        read_model(_write(tmp_path, _model([node])))


def test_a_body_is_walked_for_its_names(tmp_path: Path) -> None:
    body = helper.make_graph([helper.make_node("Identity", ["x"], ["inner"], name="QQQQ")], "then", [],
                             [helper.make_tensor_value_info("inner", TensorProto.FLOAT, [2])])
    cond = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(True)))
    branch = helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body.__deepcopy__())
    branch.attribute[1].g.node[0].name = "else"
    with pytest.raises(FuseviewError, match="has a name that is not valid UTF-8"):
        read_model(_write(tmp_path, _model([cond, branch]), (b"QQQQ", b"\xff\xfe\xfd\xfc")))


def test_plain_names_pass(tmp_path: Path) -> None:
    model = read_model(_write(tmp_path, _model([helper.make_node("Relu", ["x"], ["y"], name="QQQQ")])))
    assert model.graph.node[0].name == "QQQQ"
