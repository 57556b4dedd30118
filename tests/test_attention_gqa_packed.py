"""Packed Q, K, V for GroupQueryAttention (attention_gqa_qkv, attention_gqa_rotary_qkv): where the three
projections are x @ W (+ b) of one x, one MatMul over [Wq | Wk | Wv] (+ one Add of [bq | bk | bv]) feeds
the op's packed query, key and value omitted; equal to the original in onnxruntime at every cache length.

The narrow exports carry no projection bias (Llama) or a head size onnxruntime's rotary refuses (Qwen2, 8):
the fixtures below edit a committed export the way other models differ (a bias on every projection, no
rotary at all), so that each packed form is met on a graph that torch exported."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from fuseview.fusion.pipeline import FuseOptions, build_fused, scan_for_fusion
from fuseview.fusion.plan import Plan
from fuseview.fusion.validate_cache import validate_cache_lengths

from .conftest import ASSET_MODELS

MAX_ABS = 1e-4


def _load(rel: str) -> onnx.ModelProto:
    return onnx.load(ASSET_MODELS / f"{rel}.onnx")


def with_projection_bias(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A copy with `+ b` (b ~ N(0, 0.25)) after every q/k/v projection MatMul, as Qwen2 has."""
    rng = np.random.default_rng(seed)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {t.name: t for t in out.graph.initializer}
    nodes = []
    for n in out.graph.node:
        nodes.append(n)
        if n.op_type == "MatMul" and any(f"{p}_proj/" in n.name for p in "qkv") and n.input[1] in inits:
            b, y = n.output[0] + "_bias", n.output[0]
            out.graph.initializer.append(numpy_helper.from_array(
                (rng.standard_normal(inits[n.input[1]].dims[1]) * 0.5).astype(np.float32), b))
            n.output[0] = y + "_nobias"
            nodes.append(onnx.helper.make_node("Add", [y + "_nobias", b], [y], name=n.name + "_bias"))
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def without_rotary(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose attention reads the heads before rotate_half's rotary (x*cos + cat(-x2, x1)*sin is
    replaced by x), the rotary's nodes dropped: a grouped-query decoder without rotary positions."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    prod = {o: n for n in out.graph.node for o in n.output}
    rename = {}
    for n in out.graph.node:
        a, b = (prod.get(x) for x in n.input[:2]) if n.op_type == "Add" else (None, None)
        if a is None or b is None or (a.op_type, b.op_type) != ("Mul", "Mul"):
            continue
        cat = prod.get(b.input[0])
        neg = prod.get(cat.input[0]) if cat is not None and cat.op_type == "Concat" else None
        if neg is not None and neg.op_type == "Neg":
            rename[n.output[0]] = a.input[0]
    assert rename, "no rotate_half rotary found"
    for n in out.graph.node:
        for i, x in enumerate(n.input):
            n.input[i] = rename.get(x, x)
    wanted = {o.name for o in out.graph.output}
    while True:
        used = {x for n in out.graph.node for x in n.input} | wanted
        keep = [n for n in out.graph.node if any(o in used for o in n.output)]
        if len(keep) == len(out.graph.node):
            return out
        del out.graph.node[:]
        out.graph.node.extend(keep)


def _fuse_all(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str], object]:
    scan = scan_for_fusion(model)
    plan = Plan(scan.candidates)
    plan.accept_all()
    ids = set(plan.accepted())
    rules = sorted({c.rule for c in scan.candidates if c.id in ids and c.rule.startswith("attention")})
    return build_fused(model, scan, plan.accepted(), FuseOptions(validate=False)).model, rules, scan


def _assert_packed(fused: onnx.ModelProto, layers: int, biased: bool) -> list[onnx.NodeProto]:
    gqas = [n for n in fused.graph.node if n.op_type == "GroupQueryAttention"]
    assert len(gqas) == layers
    producers = {o: n for n in fused.graph.node for o in n.output}
    for n in gqas:
        assert list(n.input[1:3]) == ["", ""]  # key and value packed into the query
        head = producers[n.input[0]]
        if biased:
            assert head.op_type == "Add"
            head = producers[head.input[0]]
        assert head.op_type == "MatMul"
    return gqas


CASES: dict[str, tuple[str, Callable[[onnx.ModelProto], onnx.ModelProto], str, bool]] = {
    # name: (export, edit, the rule that fuses it, whether the projections have a bias)
    "llama_rotary_bias": ("kvcache/llama_2l_past_ts17_seqdims", with_projection_bias,
                          "attention_gqa_rotary_qkv", True),
    "llama_no_rotary": ("kvcache/llama_2l_past_ts17_seqdims", without_rotary, "attention_gqa_qkv", False),
    "llama_dynamo_no_rotary": ("current/llama_2l_sdpa_past_dynamo", without_rotary, "attention_gqa_qkv",
                               False),
    "qwen2_no_rotary_bias": ("decoders/qwen2_2l_sdpa_past_ts17", without_rotary, "attention_gqa_qkv", True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_packed_projections_fuse_and_match_the_original_at_every_cache_length(case: str) -> None:
    rel, edit, rule, biased = CASES[case]
    model = edit(_load(rel))
    onnx.checker.check_model(model)
    fused, rules, _scan = _fuse_all(model)
    assert rules == [rule]
    gqas = _assert_packed(fused, 2, biased)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in gqas[0].attribute}
    assert bool(attrs.get("do_rotary", 0)) == rule.endswith("rotary_qkv")
    for past, new, v in validate_cache_lengths(model, fused, news=(1, 16)):
        assert v.ok and v.max_abs <= MAX_ABS, (case, past, new, v.figures())


def test_projections_of_different_inputs_stay_three_and_the_near_miss_says_why() -> None:
    """The key projection reads a copy of the layer's input (as a cross-attention reads another tensor):
    no packed form; the unpacked rotary form still fuses and the packed rule's near miss names the reason."""
    model = _load("kvcache/llama_2l_past_ts17_seqdims")
    nodes = []
    for n in model.graph.node:
        if n.op_type == "MatMul" and "k_proj/" in n.name:
            copy = n.input[0] + "_copy"
            nodes.append(onnx.helper.make_node("Identity", [n.input[0]], [copy], name=n.name + "_copy"))
            n.input[0] = copy
        nodes.append(n)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    fused, rules, scan = _fuse_all(model)
    assert rules == ["attention_gqa_rotary"]
    gqas = [n for n in fused.graph.node if n.op_type == "GroupQueryAttention"]
    assert len(gqas) == 2 and all(n.input[1] and n.input[2] for n in gqas)
    reasons = [m.reason for m in scan.near_misses if m.rule == "attention_gqa_rotary_qkv"]
    assert len(reasons) == 2 and all("different tensors" in r for r in reasons)
    for past, new, v in validate_cache_lengths(model, fused, pasts=(0, 16), news=(1,)):
        assert v.ok and v.max_abs <= MAX_ABS, (past, new, v.figures())
