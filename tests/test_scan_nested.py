"""What the scan skips changes nothing: an Optional root's shorter form (the Mul of a LayerNorm whose beta
Add matched) only where the matcher proved its match a strict subset of the longer one, and a pattern at a
node only where it provably fails with at most two nodes matched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.fusion.bounds import fruitless, largest
from fuseview.fusion.graphindex import GraphIndex
from fuseview.fusion.matcher import PatternMatcher, _fails_shallow, match_rule
from fuseview.fusion.rule import MS_DOMAIN, Replacement, Rule
from fuseview.fusion.rules import catalogue, rule_by_name
from fuseview.fusion.scan import scan_model

from .conftest import ASSET_MODELS


def _model(nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _layer_norm() -> onnx.ModelProto:
    n = helper.make_node
    nodes = [
        n("ReduceMean", ["x"], ["m"], "mean", axes=[-1]),
        n("Sub", ["x", "m"], ["d"], "sub"),
        n("Pow", ["d", "two"], ["sq"], "pow"),
        n("ReduceMean", ["sq"], ["v"], "var", axes=[-1]),
        n("Add", ["v", "eps"], ["ve"], "add_eps"),
        n("Sqrt", ["ve"], ["s"], "sqrt"),
        n("Div", ["d", "s"], ["nd"], "div"),
        n("Mul", ["nd", "gamma"], ["sc"], "scale"),
        n("Add", ["sc", "beta"], ["y"], "shift"),
    ]
    inits = {"two": np.array(2.0), "eps": np.array(1e-5), "gamma": np.ones(8), "beta": np.zeros(8)}
    return _model(nodes, inits)


def _node(model: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for n in model.graph.node if n.name == name)


def test_the_layer_norm_mul_is_proved_a_subset_and_skipped() -> None:
    model = _layer_norm()
    index = GraphIndex(model)
    rule = rule_by_name("layer_norm")
    long, _ = match_rule(index, rule, _node(model, "shift"))
    assert long is not None and [n.name for n in long.nested_roots] == ["scale"]
    short, _ = match_rule(index, rule, _node(model, "scale"))  # what the scan skips: the same less the Add
    assert short is not None
    assert {n.name for n in short.nodes.values()} == {n.name for n in long.nodes.values()} - {"shift"}
    (cand,) = scan_model(model, rules=[rule]).candidates
    assert "shift" in cand.nodes and len(cand.nodes) == 9


def _scaled_rule(check_needs_c: bool) -> Rule:
    def pattern(op, a, b):
        mul = op.Mul(op.Relu(a, _label="relu"), b, _label="mul")
        return op.Optional(op.Add(mul, op.constant("c"), _label="add"), mul)

    def check(m):
        return "no constant c" if check_needs_c and "c" not in m.bindings else None

    return Rule("test_scaled", "Relu*b (+c)", "X", MS_DOMAIN, ("reference",), patterns=(pattern,),
                check=check, replace=lambda m: Replacement([m["a"]]))


def test_a_shorter_form_that_fails_its_check_is_still_matched_and_reported() -> None:
    n = helper.make_node
    model = _model(
        [n("Relu", ["x"], ["r"], "relu"), n("Mul", ["r", "x"], ["p"], "mul"),
         n("Add", ["p", "c"], ["y"], "add")],
        {"c": np.zeros(8)},
    )
    index = GraphIndex(model)
    strict = _scaled_rule(check_needs_c=True)
    long, _ = match_rule(index, strict, _node(model, "add"))
    assert long is not None and long.nested_roots == ()  # the Mul alone fails the check: not skipped
    result = scan_model(model, rules=[strict])
    assert [c.nodes for c in result.candidates] == [["relu", "mul", "add"]]
    assert [(m.rule, m.nodes, m.reason) for m in result.near_misses] == [
        ("test_scaled", ("relu", "mul"), "no constant c")
    ]
    lax = _scaled_rule(check_needs_c=False)
    long, _ = match_rule(index, lax, _node(model, "add"))
    assert long is not None and [x.name for x in long.nested_roots] == ["mul"]
    result = scan_model(model, rules=[lax])
    assert [c.nodes for c in result.candidates] == [["relu", "mul", "add"]] and not result.near_misses


def test_a_larger_state_that_failed_keeps_the_shorter_form() -> None:
    """Transpose+MatMul*scale fails (perm), MatMul*scale matches: the MatMul's own near miss stays."""
    n = helper.make_node
    model = _model(
        [n("Transpose", ["x"], ["t"], "transpose", perm=[1, 0, 2]), n("MatMul", ["t", "w"], ["mm"], "matmul"),
         n("Mul", ["mm", "s"], ["y"], "scale")],
        {"w": np.ones((8, 4)), "s": np.array(0.5)},
    )
    index = GraphIndex(model)
    rule = rule_by_name("fused_matmul")
    long, _ = match_rule(index, rule, _node(model, "scale"))
    assert long is not None and long.nested_roots == ()
    result = scan_model(model, rules=[rule])
    assert any(m.nodes == ("transpose", "matmul") for m in result.near_misses)


SHALLOW_MODELS = [
    ASSET_MODELS / "llama_2l_ts17.onnx",
    ASSET_MODELS / "mlp_gelu_erf_ts17.onnx",
    ASSET_MODELS / "bert_2l_ts13.onnx",
    Path(__file__).parent / "data" / "gpt2" / "gpt2_2l_ts17.onnx",
]


@pytest.mark.parametrize("path", SHALLOW_MODELS, ids=lambda p: p.name)
def test_a_pattern_skipped_as_failing_shallow_matches_nothing_there(path: Path) -> None:
    """Where _fails_shallow skips a pattern, the matcher itself finds no state and fails with at most two
    nodes matched (never a near miss): at every node of real exports, for every declarative pattern."""
    model = onnx.load(str(path))
    index = GraphIndex(model)
    skipped = 0
    for rule in catalogue():
        for pattern in rule.compiled:
            if pattern.min_nodes < 2:
                continue
            for node in model.graph.node:
                if node.op_type not in pattern.root_ops or not _fails_shallow(index, pattern, node):
                    continue
                skipped += 1
                pm = PatternMatcher(index, pattern)
                assert next(pm.match_root(node), None) is None, (rule.name, node.name)
                assert pm.failure is None or pm.failure.depth < 3, (rule.name, node.name, pm.failure)
    assert skipped > 0


@pytest.mark.parametrize("path", SHALLOW_MODELS, ids=lambda p: p.name)
def test_a_pattern_fruitless_in_a_graph_matches_and_nears_nothing_there(path: Path) -> None:
    """Where bounds.fruitless lets the scan skip a pattern (an op type it needs is absent from the graph),
    the matcher itself finds no state and never fails deep enough for a near miss, at any node."""
    model = onnx.load(str(path))
    index = GraphIndex(model)
    skipped = 0
    for rule in catalogue():
        for pattern in rule.compiled:
            if not fruitless(pattern, index.by_op):
                continue
            for node in model.graph.node:
                if node.op_type not in pattern.root_ops:
                    continue
                skipped += 1
                pm = PatternMatcher(index, pattern)
                assert next(pm.match_root(node), None) is None, (rule.name, node.name)
                depth = pm.failure.depth if pm.failure else 0
                assert depth < pattern.near_miss_depth, (rule.name, node.name, pm.failure)
    assert skipped > 0


def test_fruitless_needs_the_absent_op_and_a_shallow_bound() -> None:
    """gelu_erf needs an Erf: fruitless without one, not with one; matmul_integer_to_float without its
    MatMulInteger may still fail four nodes deep (a near miss), so it is not fruitless."""
    (gelu,) = rule_by_name("gelu_erf").compiled
    assert fruitless(gelu, {"Mul", "Add", "Div", "Sqrt"})
    assert not fruitless(gelu, {"Mul", "Add", "Div", "Sqrt", "Erf"})
    (int_mm,) = rule_by_name("matmul_integer_to_float").compiled
    assert not fruitless(int_mm, {"Mul", "Add", "Cast"})


def test_largest_leaves_out_alternatives_through_an_absent_op() -> None:
    """A LayerNorm's 1/std as Mul(d, Reciprocal(std)) holds one node more than Div(d, std): the bound says
    so, and drops it in a graph with no Reciprocal, where the Div form is then the largest."""
    (ln,) = rule_by_name("layer_norm").compiled
    assert largest(ln, frozenset()) == {"shift": 10, "scale": 9}
    assert largest(ln, frozenset({"Reciprocal"})) == {"shift": 9, "scale": 8}
    model = _layer_norm()
    index = GraphIndex(model)
    states = list(PatternMatcher(index, ln).match_root(_node(model, "shift")))
    assert max(len(s.nodes) for s in states) == 9 == largest(ln, frozenset({"Reciprocal"}))["shift"]
