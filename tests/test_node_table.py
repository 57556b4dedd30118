"""graph.table.NodeTable: each node's fields read once; its readers give what reading the protos gave."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.fusion.graphindex import GraphIndex
from fuseview.fusion.scan import load_model, scan_file, scan_model
from fuseview.graph.loader import read_model_table
from fuseview.graph.table import NodeTable
from fuseview.naming import unique_names, unique_node_names

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "fuseview" / "data" / "demo_gpt2_2l.onnx"
LLAMA = ROOT / "assets" / "models" / "llama_2l_gqa_ts17.onnx"


def _with_if(path: Path) -> Path:
    """A model whose If has a GRAPH attribute per branch, and unnamed nodes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    branch = [helper.make_graph([helper.make_node(op, ["x"], ["b"])], f"b{op}", [],
                                [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])])
              for op in ("Relu", "Sigmoid")]
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=branch[0], else_branch=branch[1]),
    ]
    g = helper.make_graph(nodes, "g", [x], [y], [numpy_helper.from_array(np.array(0, np.float32), "zero")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("path", [DEMO, LLAMA])
def test_columns_are_the_proto_fields(path: Path) -> None:
    model = onnx.load(path, load_external_data=False)
    t = NodeTable.of(model.graph)
    nodes = list(model.graph.node)
    assert len(t) == len(nodes) and all(a is b for a, b in zip(t.nodes, nodes, strict=True))
    assert t.names == [n.name for n in nodes] and t.op_types == [n.op_type for n in nodes]
    assert t.domains == [n.domain for n in nodes]
    assert t.inputs == [list(n.input) for n in nodes] and t.outputs == [list(n.output) for n in nodes]
    assert [[a.name for a in attrs] for attrs in t.attributes] == \
        [[a.name for a in n.attribute] for n in nodes]
    rows = t.attribute_rows()
    assert [[(name, kind) for name, kind, _ in r] for r in rows] == \
        [[(a.name, a.type) for a in n.attribute] for n in nodes]
    assert unique_names(t.names, t.op_types) == unique_node_names(nodes)


def test_attribute_rows_hold_the_bodies(tmp_path: Path) -> None:
    model = onnx.load(_with_if(tmp_path / "if.onnx"))
    rows = NodeTable.of(model.graph).attribute_rows()
    bodies = [[g.name for _, _, subs in r for g in subs] for r in rows]
    assert bodies == [[], [], [a.g.name for a in model.graph.node[2].attribute]]
    assert sorted(bodies[2]) == ["bRelu", "bSigmoid"]


@pytest.mark.parametrize("name", ["demo", "llama", "if"])
def test_a_scan_with_the_readers_table_is_the_scan_without_it(name: str, tmp_path: Path) -> None:
    path = {"demo": DEMO, "llama": LLAMA}.get(name) or _with_if(tmp_path / "if.onnx")
    with_table = scan_file(path, provider="cpu").to_json()
    model = load_model(path)  # its own table, made by the index
    without = scan_model(model, base_dir=path.parent, path=str(path), provider="cpu").to_json()
    assert json.dumps(with_table, sort_keys=True) == json.dumps(without, sort_keys=True)
    assert name == "if" or with_table["candidates"]


def test_the_index_reads_the_readers_table_and_leaves_it_as_read() -> None:
    model, table = read_model_table(DEMO)
    before = [list(ins) for ins in table.inputs]
    index = GraphIndex(model, table=table)
    assert index.nodes is table.nodes
    for n in index.nodes:
        assert index.outputs(n) == list(n.output)
        ins = list(n.input)
        while ins and not ins[-1]:
            ins.pop()
        assert index.inputs(n) == ins
        for a in n.attribute:
            assert index.attr(n, a.name) == index.attr(n, a.name)  # decoded once, the same again
    assert [list(ins) for ins in table.inputs] == before
