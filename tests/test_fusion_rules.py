"""Each fusion rule on minimal hand-built graphs: matches, and the non-matches that must not fuse."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.fusion.apply import apply_candidates, check_fused
from fuseview.fusion.plan import Plan
from fuseview.fusion.rules import catalogue, rule_by_name
from fuseview.fusion.scan import scan_model
from fuseview.fusion.validate import validate
from fuseview.provenance import CANDIDATE_KEY, ORIGIN_KEY, RULE_KEY

# ---------------------------------------------------------------------------------- graph builders
F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def const(name: str, value) -> onnx.TensorProto:
    """An initializer from a value (float32 unless it is already an integer array)."""
    arr = np.asarray(value)
    if arr.dtype.kind == "f":
        arr = arr.astype(np.float32)
    return numpy_helper.from_array(arr, name)


def model(nodes, inputs, outputs, inits=(), opset=17, extra_outputs=()) -> onnx.ModelProto:
    """A model from (name, shape) inputs/outputs (float32)."""
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F, s) for n, s in list(outputs) + list(extra_outputs)],
        list(inits),
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def node(op, ins, outs, name=None, **attrs):
    """A named node (named after its first output by default)."""
    return helper.make_node(op, ins, outs, name=name or f"n_{outs[0]}", **attrs)


def layer_norm_nodes(x="x", out="y", eps=1e-5, axis=-1, opset18=False, pow_exp=2.0, prefix=""):
    """Decomposed LayerNorm nodes and their initializers (opset-13 axes attribute or opset-18 axes input)."""
    p = prefix
    inits = [
        const(f"{p}two", pow_exp),
        const(f"{p}eps", eps),
        const(f"{p}gamma", RNG.random(8) + 0.5),
        const(f"{p}beta", RNG.standard_normal(8)),
    ]
    if opset18:
        inits.append(const(f"{p}axes", np.array([axis], np.int64)))
        rm = dict()
        r1 = node("ReduceMean", [x, f"{p}axes"], [f"{p}mean"])
        r2 = node("ReduceMean", [f"{p}sq", f"{p}axes"], [f"{p}var"])
    else:
        rm = {"axes": [axis]}
        r1 = node("ReduceMean", [x], [f"{p}mean"], **rm)
        r2 = node("ReduceMean", [f"{p}sq"], [f"{p}var"], **rm)
    nodes = [
        r1,
        node("Sub", [x, f"{p}mean"], [f"{p}d"]),
        node("Pow", [f"{p}d", f"{p}two"], [f"{p}sq"]),
        r2,
        node("Add", [f"{p}var", f"{p}eps"], [f"{p}ve"]),
        node("Sqrt", [f"{p}ve"], [f"{p}std"]),
        node("Div", [f"{p}d", f"{p}std"], [f"{p}nrm"]),
        node("Mul", [f"{p}nrm", f"{p}gamma"], [f"{p}sc"]),
        node("Add", [f"{p}sc", f"{p}beta"], [out]),
    ]
    return nodes, inits


def tanh_gelu_nodes(x="x", out="y", order="gpt2", cube="pow", c=0.044715):
    """tanh-GELU in GPT-2's ts order (0.5*x first) or torch's approximate='tanh' order (x*x*x, then *0.5)."""
    inits = [
        const("half", 0.5),
        const("three", 3.0),
        const("c", c),
        const("k", np.sqrt(2 / np.pi)),
        const("one", 1.0),
    ]
    if cube == "pow":
        cube_nodes = [node("Pow", [x, "three"], ["x3"])]
    else:
        cube_nodes = [node("Mul", [x, x], ["x2"]), node("Mul", ["x2", x], ["x3"])]
    core = cube_nodes + [
        node("Mul", ["c", "x3"], ["cx3"]),
        node("Add", [x, "cx3"], ["inner"]),
        node("Mul", ["k", "inner"], ["arg"]),
        node("Tanh", ["arg"], ["t"]),
        node("Add", ["one", "t"], ["t1"]),
    ]
    if order == "gpt2":
        nodes = [node("Mul", ["half", x], ["hx"])] + core + [node("Mul", ["hx", "t1"], [out])]
    else:
        nodes = core + [node("Mul", [x, "t1"], ["xt"]), node("Mul", ["xt", "half"], [out])]
    return nodes, inits


def erf_gelu_nodes(x="x", out="y", sqrt2=1.4142135623730951):
    """erf-GELU as torch exports it: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    inits = [const("s2", sqrt2), const("one", 1.0), const("half", 0.5)]
    nodes = [
        node("Div", [x, "s2"], ["xd"]),
        node("Erf", ["xd"], ["e"]),
        node("Add", ["e", "one"], ["e1"]),
        node("Mul", [x, "e1"], ["xe"]),
        node("Mul", ["xe", "half"], [out]),
    ]
    return nodes, inits


def scan(m, *rules):
    """Scan with the named rules only."""
    return scan_model(m, rules=[rule_by_name(r) for r in rules])


def fuse_and_validate(m, *rules, dims=None, target_opset=None):
    """Apply every candidate of the rules, check the model, compare outputs; returns the fused model."""
    r = scan(m, *rules)
    assert r.candidates, [n.reason for n in r.near_misses]
    plan = Plan(r.candidates)
    plan.accept_all()
    res = apply_candidates(m, r, plan.accepted(), target_opset)
    check_fused(res.model)
    v = validate(m, res.model, bool(res.reference_only_ops), dims)
    assert v.ok, v.to_json()
    return res.model


def ops(m):
    return [n.op_type for n in m.graph.node]


def test_catalogue_rules_are_described():
    for r in catalogue():
        assert r.name and r.description and r.runs_on and r.fused_op


# ------------------------------------------------------------------------------------------ layer norm
@pytest.mark.parametrize("opset18", [False, True])
def test_layer_norm_matches_both_axes_forms(opset18):
    nodes, inits = layer_norm_nodes(opset18=opset18)
    m = model(nodes, [("x", [2, 5, 8])], [("y", [2, 5, 8])], inits, opset=18 if opset18 else 17)
    fused = fuse_and_validate(m, "layer_norm")
    assert ops(fused) == ["LayerNormalization"]
    n = fused.graph.node[0]
    meta = {p.key: p.value for p in n.metadata_props}
    assert meta[RULE_KEY] == "layer_norm" and len(eval(meta[ORIGIN_KEY])) == 9 and meta[CANDIDATE_KEY]


def test_layer_norm_wrong_axis_is_a_near_miss():
    nodes, inits = layer_norm_nodes(axis=1)
    m = model(nodes, [("x", [2, 5, 8])], [("y", [2, 5, 8])], inits)
    r = scan(m, "layer_norm")
    assert not r.candidates
    assert any("axis" in n.reason for n in r.near_misses)


def test_layer_norm_wrong_constant_does_not_match():
    nodes, inits = layer_norm_nodes(pow_exp=3.0)
    m = model(nodes, [("x", [2, 5, 8])], [("y", [2, 5, 8])], inits)
    r = scan(m, "layer_norm")
    assert not r.candidates
    assert any("expected 2" in n.reason for n in r.near_misses)


def test_layer_norm_extra_consumer_and_graph_output_are_not_offered():
    nodes, inits = layer_norm_nodes()
    nodes.append(node("Relu", ["d"], ["extra"]))
    m = model(nodes, [("x", [2, 5, 8])], [("y", [2, 5, 8]), ("extra", [2, 5, 8])], inits)
    r = scan(m, "layer_norm")
    assert not r.candidates and any("also used by" in n.reason for n in r.near_misses)
    nodes, inits = layer_norm_nodes()
    m = model(nodes, [("x", [2, 5, 8])], [("y", [2, 5, 8])], inits, extra_outputs=[("std", [2, 5, 1])])
    r = scan(m, "layer_norm")
    assert not r.candidates and any("graph output" in n.reason for n in r.near_misses)


def test_scan_never_changes_the_model():
    nodes, inits = layer_norm_nodes()
    m = model(nodes, [("x", [2, 5, 8])], [("y", [2, 5, 8])], inits)
    before = m.SerializeToString()
    r = scan_model(m)
    apply_candidates(m, r, [c.id for c in r.candidates])
    assert m.SerializeToString() == before


# ------------------------------------------------------------------------------------------ skip layer norm
def test_skip_layer_norm_exposes_the_residual_sum():
    nodes, inits = layer_norm_nodes(x="s")
    nodes = [node("Add", ["a", "b"], ["s"])] + nodes + [node("Add", ["s", "y"], ["z"])]
    m = model(nodes, [("a", [1, 5, 8]), ("b", [1, 5, 8])], [("z", [1, 5, 8])], inits)
    fused = fuse_and_validate(m, "skip_layer_norm")
    sk = [n for n in fused.graph.node if n.op_type == "SkipLayerNormalization"]
    assert len(sk) == 1 and sk[0].output[3] == "s"


def test_skip_layer_norm_bias_variant():
    nodes, inits = layer_norm_nodes(x="s")
    nodes = [node("Add", ["a", "bias"], ["ab"]), node("Add", ["ab", "b"], ["s"])] + nodes
    inits.append(const("bias", RNG.standard_normal(8)))
    m = model(nodes, [("a", [1, 5, 8]), ("b", [1, 5, 8])], [("y", [1, 5, 8])], inits)
    fused = fuse_and_validate(m, "skip_layer_norm_bias")
    assert ops(fused) == ["SkipLayerNormalization"] and len(fused.graph.node[0].input) == 5


def test_skip_layer_norm_needs_matching_shapes():
    nodes, inits = layer_norm_nodes(x="s")
    nodes = [node("Add", ["a", "b"], ["s"])] + nodes
    m = model(nodes, [("a", [2, 5, 8]), ("b", [2, 1, 8])], [("y", [2, 5, 8])], inits)
    r = scan(m, "skip_layer_norm")
    assert not r.candidates and any("skip must match" in n.reason for n in r.near_misses)


# ------------------------------------------------------------------------------------------ rms norm
def _rms(recip="reciprocal"):
    inits = [const("two", 2.0), const("eps", 1e-6), const("gamma", RNG.random(8) + 0.5), const("onef", 1.0)]
    nodes = [
        node("Pow", ["x", "two"], ["sq"]),
        node("ReduceMean", ["sq"], ["ms"], axes=[-1]),
        node("Add", ["ms", "eps"], ["mse"]),
        node("Sqrt", ["mse"], ["r"]),
    ]
    if recip == "reciprocal":
        nodes += [node("Reciprocal", ["r"], ["ir"]), node("Mul", ["x", "ir"], ["n"])]
    else:
        nodes += [node("Div", ["onef", "r"], ["ir"]), node("Mul", ["x", "ir"], ["n"])]
    nodes.append(node("Mul", ["gamma", "n"], ["y"]))
    return model(nodes, [("x", [1, 5, 8])], [("y", [1, 5, 8])], inits)


@pytest.mark.parametrize("recip", ["reciprocal", "div_one"])
def test_rms_norm(recip):
    # the model keeps opset 17: onnxruntime's SimplifiedLayerNormalization, as the scan labels it
    fused = fuse_and_validate(_rms(recip), "rms_norm")
    assert ops(fused) == ["SimplifiedLayerNormalization"] and fused.opset_import[0].version == 17
    assert scan(_rms(recip), "rms_norm").candidates[0].fused_op == "SimplifiedLayerNormalization"
    # asked for opset 23: converted, and the standard RMSNormalization passes onnx's full checker
    fused = fuse_and_validate(_rms(recip), "rms_norm", target_opset=23)
    assert ops(fused) == ["RMSNormalization"] and fused.opset_import[0].version == 23
    onnx.checker.check_model(fused, full_check=True)


def test_rms_norm_not_offered_inside_layer_norm():
    nodes, inits = layer_norm_nodes()
    m = model(nodes, [("x", [2, 5, 8])], [("y", [2, 5, 8])], inits)
    r = scan(m, "rms_norm")
    assert not r.candidates and not r.near_misses


# ------------------------------------------------------------------------------------------ gelu family
@pytest.mark.parametrize("order,cube", [("gpt2", "pow"), ("torch", "mul"), ("gpt2", "mul"), ("torch", "pow")])
def test_fast_gelu_every_operand_order(order, cube):
    nodes, inits = tanh_gelu_nodes(order=order, cube=cube)
    m = model(nodes, [("x", [1, 5, 8])], [("y", [1, 5, 8])], inits)
    assert ops(fuse_and_validate(m, "fast_gelu")) == ["FastGelu"]


def test_fast_gelu_wrong_constant():
    nodes, inits = tanh_gelu_nodes(c=0.05)
    m = model(nodes, [("x", [1, 5, 8])], [("y", [1, 5, 8])], inits)
    r = scan(m, "fast_gelu")
    assert not r.candidates and any("0.044715" in n.reason for n in r.near_misses)


def test_erf_gelu_and_bias_gelu():
    nodes, inits = erf_gelu_nodes()
    m = model(nodes, [("x", [1, 5, 8])], [("y", [1, 5, 8])], inits)
    assert ops(fuse_and_validate(m, "gelu_erf")) == ["Gelu"]
    nodes, inits = erf_gelu_nodes(x="xb")
    nodes.insert(0, node("Add", ["x", "bias"], ["xb"]))
    inits.append(const("bias", RNG.standard_normal(8)))
    m = model(nodes, [("x", [1, 5, 8])], [("y", [1, 5, 8])], inits)
    assert ops(fuse_and_validate(m, "bias_gelu_erf", "gelu_erf")) == ["BiasGelu"]


def test_erf_gelu_wrong_constant_and_graph_output():
    nodes, inits = erf_gelu_nodes(sqrt2=1.5)
    m = model(nodes, [("x", [1, 5, 8])], [("y", [1, 5, 8])], inits)
    assert not scan(m, "gelu_erf").candidates
    nodes, inits = erf_gelu_nodes()
    m = model(nodes, [("x", [1, 5, 8])], [("y", [1, 5, 8])], inits, extra_outputs=[("e", [1, 5, 8])])
    r = scan(m, "gelu_erf")
    assert not r.candidates and any("graph output" in n.reason for n in r.near_misses)


def test_quick_gelu():
    nodes = [node("Mul", ["x", "a"], ["xa"]), node("Sigmoid", ["xa"], ["s"]), node("Mul", ["s", "x"], ["y"])]
    m = model(nodes, [("x", [1, 5, 8])], [("y", [1, 5, 8])], [const("a", 1.702)])
    fused = fuse_and_validate(m, "quick_gelu")
    assert ops(fused) == ["QuickGelu"]
    assert abs(onnx.helper.get_attribute_value(fused.graph.node[0].attribute[0]) - 1.702) < 1e-6
    nodes = [node("Mul", ["x", "a"], ["xa"]), node("Sigmoid", ["xa"], ["s"]), node("Mul", ["s", "z"], ["y"])]
    m = model(nodes, [("x", [1, 5, 8]), ("z", [1, 5, 8])], [("y", [1, 5, 8])], [const("a", 1.702)])
    assert not scan(m, "quick_gelu").candidates


# ------------------------------------------------------------------------------------------ linear
def test_matmul_add_gemm_2d_only():
    inits = [const("w", RNG.standard_normal((8, 4))), const("b", RNG.standard_normal(4))]
    nodes = [node("MatMul", ["x", "w"], ["mm"]), node("Add", ["mm", "b"], ["y"])]
    m = model(nodes, [("x", [5, 8])], [("y", [5, 4])], inits)
    assert ops(fuse_and_validate(m, "matmul_add_gemm")) == ["Gemm"]
    m3 = model(nodes, [("x", [2, 5, 8])], [("y", [2, 5, 4])], inits)
    r = scan(m3, "matmul_add_gemm")
    assert not r.candidates and any("2-D" in n.reason for n in r.near_misses)


@pytest.mark.parametrize("form", ["div", "mul", "transpose_b", "transpose_a_scaled"])
def test_fused_matmul(form):
    inits = [const("s", 8.0 if form == "div" else 0.125)]
    if form == "div":
        nodes = [node("MatMul", ["a", "b"], ["mm"]), node("Div", ["mm", "s"], ["y"])]
        shapes = [("a", [2, 3, 5, 4]), ("b", [2, 3, 4, 6])]
        out = [2, 3, 5, 6]
    elif form == "mul":
        nodes = [node("MatMul", ["a", "b"], ["mm"]), node("Mul", ["s", "mm"], ["y"])]
        shapes = [("a", [2, 3, 5, 4]), ("b", [2, 3, 4, 6])]
        out = [2, 3, 5, 6]
    elif form == "transpose_b":
        nodes = [node("Transpose", ["b"], ["bt"], perm=[0, 1, 3, 2]), node("MatMul", ["a", "bt"], ["y"])]
        shapes = [("a", [2, 3, 5, 4]), ("b", [2, 3, 6, 4])]
        out = [2, 3, 5, 6]
    else:
        nodes = [
            node("Transpose", ["a"], ["at"], perm=[0, 2, 1]),
            node("MatMul", ["at", "b"], ["mm"]),
            node("Mul", ["mm", "s"], ["y"]),
        ]
        shapes = [("a", [3, 4, 5]), ("b", [3, 4, 6])]
        out = [3, 5, 6]
    m = model(nodes, shapes, [("y", out)], inits)
    assert ops(fuse_and_validate(m, "fused_matmul")) == ["FusedMatMul"]


def test_fused_matmul_rejects_other_permutations_and_non_scalar_scale():
    nodes = [node("Transpose", ["b"], ["bt"], perm=[0, 2, 3, 1]), node("MatMul", ["a", "bt"], ["y"])]
    m = model(nodes, [("a", [2, 3, 5, 4]), ("b", [2, 4, 3, 6])], [("y", [2, 3, 5, 6])])
    r = scan(m, "fused_matmul")
    assert not r.candidates and any("perm" in n.reason for n in r.near_misses)
    nodes = [node("MatMul", ["a", "b"], ["mm"]), node("Mul", ["mm", "s"], ["y"])]
    m = model(nodes, [("a", [5, 4]), ("b", [4, 6])], [("y", [5, 6])], [const("s", RNG.random(6))])
    assert not scan(m, "fused_matmul").candidates


# ------------------------------------------------------------------------------------------ conv
def _conv_bn(act=None, with_bias=True):
    c = 4
    inits = [
        const("w", RNG.standard_normal((c, 3, 3, 3))),
        const("scale", RNG.random(c) + 0.5),
        const("shift", RNG.standard_normal(c)),
        const("mean", RNG.standard_normal(c)),
        const("var", RNG.random(c) + 0.1),
    ]
    conv_in = ["x", "w"]
    if with_bias:
        inits.append(const("cb", RNG.standard_normal(c)))
        conv_in.append("cb")
    nodes = [
        node("Conv", conv_in, ["c"], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["bn"], epsilon=1e-3),
    ]
    out = "bn"
    if act == "Clip":
        inits += [const("lo", 0.0), const("hi", 6.0)]
        nodes.append(node("Clip", ["bn", "lo", "hi"], ["y"]))
        out = "y"
    elif act:
        nodes.append(node(act, ["bn"], ["y"]))
        out = "y"
    return model(nodes, [("x", [1, 3, 6, 6])], [(out, [1, c, 6, 6])], inits)


@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_bn_folds_weights(with_bias):
    fused = fuse_and_validate(_conv_bn(with_bias=with_bias), "conv_bn")
    assert ops(fused) == ["Conv"] and len(fused.graph.node[0].input) == 3


@pytest.mark.parametrize("act", ["Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh"])
def test_conv_bn_activation_to_fused_conv(act):
    fused = fuse_and_validate(_conv_bn(act), "conv_activation")
    assert ops(fused) == ["FusedConv"]


def test_conv_bn_training_mode_not_folded():
    m = _conv_bn()
    m.graph.node[1].attribute.append(onnx.helper.make_attribute("training_mode", 1))
    assert not scan(m, "conv_bn").candidates


# ------------------------------------------------------------------------------------------ constants
def test_fold_constant_transpose_of_weight():
    inits = [const("w", RNG.standard_normal((16, 8)))]
    nodes = [node("Transpose", ["w"], ["wt"], perm=[1, 0]), node("MatMul", ["x", "wt"], ["y"])]
    m = model(nodes, [("x", [2, 8])], [("y", [2, 16])], inits)
    r = scan(m, "fold_constants")
    assert len(r.candidates) == 1 and r.candidates[0].nodes == ["n_wt"]
    fused = fuse_and_validate(m, "fold_constants")
    assert ops(fused) == ["MatMul"] and "wt" in {t.name for t in fused.graph.initializer}


def test_fold_constants_ignores_views_and_runtime_inputs():
    inits = [const("w", RNG.standard_normal((6, 8))), const("shape", np.array([8, 6], np.int64))]
    nodes = [node("Reshape", ["w", "shape"], ["wr"]), node("MatMul", ["x", "wr"], ["y"])]
    m = model(nodes, [("x", [2, 8])], [("y", [2, 6])], inits)
    assert not scan(m, "fold_constants").candidates
    nodes = [node("Transpose", ["x"], ["xt"], perm=[1, 0]), node("Relu", ["xt"], ["y"])]
    m = model(nodes, [("x", [2, 8])], [("y", [8, 2])])
    assert not scan(m, "fold_constants").candidates


# ------------------------------------------------------------------------------------------ eyelike
def test_add_eyelike_plain_and_scaled():
    nodes = [node("EyeLike", ["a"], ["i"]), node("Add", ["a", "i"], ["y"])]
    m = model(nodes, [("a", [4, 4])], [("y", [4, 4])])
    fused = fuse_and_validate(m, "add_eyelike")
    assert ops(fused) == ["AddEyeLike"]
    nodes = [
        node("EyeLike", ["a"], ["i"], k=1),
        node("Mul", ["i", "lam"], ["li"]),
        node("Add", ["li", "a"], ["y"]),
    ]
    m = model(nodes, [("a", [4, 5])], [("y", [4, 5])], [const("lam", 0.3)])
    fuse_and_validate(m, "add_eyelike")


def test_add_eyelike_not_for_broadcasting_add():
    nodes = [node("EyeLike", ["l"], ["i"]), node("Add", ["a", "i"], ["y"])]
    m = model(nodes, [("a", [2, 4, 4]), ("l", [4, 4])], [("y", [2, 4, 4])])
    r = scan(m, "add_eyelike")
    assert not r.candidates and r.near_misses


def test_constants_seen_through_identity():
    nodes, inits = erf_gelu_nodes(x="xb")
    nodes = [node("Identity", ["bias0"], ["bias"]), node("Add", ["x", "bias"], ["xb"])] + nodes
    inits.append(const("bias0", RNG.standard_normal(8)))
    m = model(nodes, [("x", [1, 5, 8])], [("y", [1, 5, 8])], inits)
    assert "BiasGelu" in ops(fuse_and_validate(m, "bias_gelu_erf"))


def test_layer_norm_on_opset_13_keeps_the_opset_unless_asked():
    nodes, inits = layer_norm_nodes()
    m = model(nodes, [("x", [2, 5, 8])], [("y", [2, 5, 8])], inits, opset=13)
    r = scan(m, "layer_norm")
    res = apply_candidates(m, r, [c.id for c in r.candidates])
    # opset 13 kept: LayerNormalization runs as onnxruntime's ONNX-domain contrib op there
    assert res.model.opset_import[0].version == 13 and ops(res.model) == ["LayerNormalization"]
    assert any("contrib op" in n for n in check_fused(res.model))
    assert validate(m, res.model, False).ok
    res = apply_candidates(m, r, [c.id for c in r.candidates], target_opset=17)
    assert res.model.opset_import[0].version == 17 and any("converted 13 -> 17" in n for n in res.notes)
    onnx.checker.check_model(res.model, full_check=True)
    assert m.opset_import[0].version == 13


def test_validation_catches_a_wrong_replacement():
    nodes = [node("Mul", ["x", "a"], ["xa"]), node("Sigmoid", ["xa"], ["s"]), node("Mul", ["s", "x"], ["y"])]
    m = model(nodes, [("x", [1, 5, 8])], [("y", [1, 5, 8])], [const("a", 1.702)])
    fused = fuse_and_validate(m, "quick_gelu")
    wrong = onnx.ModelProto()
    wrong.CopyFrom(fused)
    wrong.graph.node[0].attribute[0].f = 1.0
    v = validate(m, wrong, False)
    assert not v.ok and v.outputs[0].max_abs > 1e-3


def test_conv_bn_residual_add_relu_to_fused_conv_with_z():
    m = _conv_bn()
    g = m.graph
    g.node.extend([node("Add", ["z", "bn"], ["s"]), node("Relu", ["s"], ["y"])])
    g.input.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 6, 6]))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6]))
    fused = fuse_and_validate(m, "conv_activation")
    assert ops(fused) == ["FusedConv"] and fused.graph.node[0].input[3] == "z"
