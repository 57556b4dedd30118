"""Encoders from exporters nobody here tuned for (dynamo opset 18/20, BERT without token types, ViT, MPNet):
every attention, SkipLayerNormalization and embedding found, applied, and equal to the original on a
batch of 3 with a right-padded mask; plus hand-built symbolic-shape cases."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.fusion.apply import apply_candidates, check_fused
from fuseview.fusion.graphindex import GraphIndex
from fuseview.fusion.plan import Plan
from fuseview.fusion.scan import load_model, scan_model
from fuseview.graph.unify import Unifier, same_shape

from .conftest import ASSET_MODELS

# model -> (attention blocks, LayerNormalizations in the export, EmbedLayerNormalization expected)
ENCODERS = {
    "roberta_2l_dynamo18": (2, 5, 1),  # positions from a cumsum over the padding: the kernel's position_ids
    "distilbert_2l_dynamo20": (2, 5, 1),
    "bert_2l_notypes_dynamo18": (2, 5, 1),
    "bert_2l_notypes_ts17": (2, 5, 1),
    "vit_2l_dynamo18": (2, 5, 0),
    "bert_2l_sdpa_dynamo18": (2, 5, 1),  # SDPA decomposed: K^T over [B*H, S, D], NaN guard, bool mask
    "mpnet_2l_ts17": (2, 5, 1),  # relative-position bias, then the mask: two Adds are one attention_bias
    "mpnet_2l_dynamo18": (2, 5, 1),
}


def _feeds(model: onnx.ModelProto, batch: int = 3, seq: int = 11) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    feeds = {}
    for vi in model.graph.input:
        name = vi.name
        if name == "pixel_values":
            feeds[name] = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
        elif name == "attention_mask":
            m = np.ones((batch, seq), np.int64)
            m[-1, seq - 3 :] = 0  # right padding on the last row
            feeds[name] = m
        else:
            ids = rng.integers(2, 1000, size=(batch, seq), dtype=np.int64)
            ids[-1, seq - 3 :] = 1  # RoBERTa's pad id where the mask pads: its positions then differ per row
            feeds[name] = ids
    return feeds


def _run(model: onnx.ModelProto, feeds) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_encoder_exports_fuse_fully_and_match(name):
    path = ASSET_MODELS / f"{name}.onnx"
    model = load_model(path)
    scan = scan_model(model, base_dir=path.parent)
    attn, lns, embed = ENCODERS[name]
    by_rule = collections.Counter(c.rule for c in scan.candidates)
    assert by_rule["attention_mha"] == attn, [n.reason for n in scan.near_misses if n.rule == "attention_mha"]
    assert by_rule["embed_layer_norm"] == embed
    assert all(c.saved_bytes is not None for c in scan.candidates), "every candidate says what it saves"
    assert not [n for n in scan.near_misses if "must match the input" in n.reason]
    plan = Plan(scan.candidates)
    plan.accept_all()
    fused = apply_candidates(model, scan, plan.accepted()).model
    check_fused(fused)
    ops = collections.Counter(n.op_type for n in fused.graph.node)
    assert ops["Attention"] == attn and ops["MultiHeadAttention"] == 0  # Q|K|V packed into one projection
    assert ops["EmbedLayerNormalization"] == embed
    # every LayerNormalization of the export is fused: into the embedding or a SkipLayerNormalization
    assert ops["SkipLayerNormalization"] + ops["EmbedLayerNormalization"] + ops["LayerNormalization"] == lns
    assert ops["LayerNormalization"] <= 1
    feeds = _feeds(model)
    for a, b in zip(_run(model, feeds), _run(fused, feeds), strict=True):
        assert a.shape == b.shape
        assert float(np.max(np.abs(a - b))) <= 1e-4


def test_constant_segment_row_folds_into_positions():
    path = ASSET_MODELS / "bert_2l_notypes_ts17.onnx"
    model = load_model(path)
    scan = scan_model(model, base_dir=path.parent)
    cand = next(c for c in scan.candidates if c.rule == "embed_layer_norm")
    fused = apply_candidates(model, scan, [cand.id]).model
    node = next(n for n in fused.graph.node if n.op_type == "EmbedLayerNormalization")
    assert node.input[1] == "" and node.input[4] == ""  # no segment ids, no segment table
    assert node.input[3].endswith("_position_plus_segment")


def test_unifier_binds_symbols_consistently():
    u = Unifier()
    assert u.shape(["unk__0", 128, 64], [1, 128, 64])
    assert u.dim("unk__0", 1) and not u.dim("unk__0", 2)  # bound to 1 above
    assert same_shape(["batch", None, 64], [3, 7, 64])
    assert not same_shape([2, 128, 64], [1, 128, 64])
    assert not same_shape(["a", "a"], [2, 3])  # one symbol cannot be two numbers
    assert same_shape(None, [1, 2])


def _skip_ln_model(via_gather_elements: bool) -> onnx.ModelProto:
    """x[batch,4,16] + s, LayerNormalization; s comes through GatherElements (onnx infers unk dims)."""
    h = 16
    nodes = [helper.make_node("Relu", ["x"], ["r"])]
    if via_gather_elements:
        nodes += [
            helper.make_node("Shape", ["x"], ["xs"]),
            helper.make_node("Expand", ["zero_idx", "xs"], ["idx"]),
            helper.make_node("GatherElements", ["r", "idx"], ["s"], axis=2),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["r"], ["s"]))
    nodes += [
        helper.make_node("Add", ["x", "s"], ["sum"]),
        helper.make_node("LayerNormalization", ["sum", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5),
    ]
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(np.zeros((1, 1, 1), np.int64), "zero_idx"),
        numpy_helper.from_array((1 + 0.1 * rng.standard_normal(h)).astype(np.float32), "gamma"),
        numpy_helper.from_array((0.1 * rng.standard_normal(h)).astype(np.float32), "beta"),
    ]
    g = helper.make_graph(
        nodes,
        "skip",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, h])],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_symbolic_batch_through_gather_elements_still_fuses():
    model = _skip_ln_model(True)
    index = GraphIndex(model, {"batch": 2})
    assert index.shape("s") == [2, 4, 16]  # concrete with the chosen dims, not ['unk__0', ...]
    scan = scan_model(model, {"batch": 2})
    cands = [c for c in scan.candidates if c.rule == "skip_layer_norm"]
    assert len(cands) == 1 and cands[0].saved_bytes == 2 * 4 * 16 * 4
    fused = apply_candidates(model, scan, [cands[0].id]).model
    x = np.random.default_rng(1).standard_normal((5, 4, 16)).astype(np.float32)  # another batch
    a, b = _run(model, {"x": x})[0], _run(fused, {"x": x})[0]
    assert float(np.max(np.abs(a - b))) <= 1e-5


@pytest.mark.parametrize("name", ["gpt2_12l_ts13", "gpt2_12l_dynamo", "gpt2_2l_ts17"])
def test_gpt2_packed_qkv_becomes_contrib_attention(name):
    from .conftest import GPT2_MODELS

    path = GPT2_MODELS / f"{name}.onnx"
    model = load_model(path)
    scan = scan_model(model, base_dir=path.parent)
    packed = [c for c in scan.candidates if c.rule == "attention_packed"]
    layers = sum(1 for n in model.graph.node if n.op_type == "Softmax")
    assert len(packed) == layers and all(c.saved_bytes is not None for c in packed)
    plan = Plan(scan.candidates)
    plan.accept_all()
    fused = apply_candidates(model, scan, plan.accepted()).model
    check_fused(fused)
    ops = collections.Counter(n.op_type for n in fused.graph.node)
    assert ops["Attention"] == layers and ops["MultiHeadAttention"] == 0
    assert ops["Split"] == 0  # the Q|K|V split and its per-head reshapes are gone
    before = collections.Counter(n.op_type for n in model.graph.node)
    # the shape chains that only fed the projection's and heads' reshapes go with them
    assert ops["Shape"] + ops["Concat"] < before["Shape"] + before["Concat"]
    feeds = _feeds(model, batch=2, seq=9)
    for a, b in zip(_run(model, feeds), _run(fused, feeds), strict=True):
        assert float(np.max(np.abs(a - b))) <= 1e-4


@pytest.mark.parametrize(
    ("op_name", "opset"), [("RMSNormalization", 23), ("SimplifiedLayerNormalization", 17)]
)
def test_add_plus_rms_norm_op_becomes_skip_simplified(op_name, opset):
    """Residual Add + an RMSNorm that is already one op (ONNX opset 23 or onnxruntime's) -> fused skip form,
    with the residual sum still available to the next layer."""
    h = 16
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Add", ["r", "x"], ["sum"]),
        helper.make_node(op_name, ["sum", "gamma"], ["y"], axis=-1, epsilon=1e-5),
        helper.make_node("Add", ["y", "sum"], ["z"]),
    ]
    gamma = (1 + 0.1 * np.random.default_rng(0).standard_normal(h)).astype(np.float32)
    g = helper.make_graph(
        nodes,
        "rms",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", h])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(gamma, "gamma")],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    scan = scan_model(model)
    cands = [c for c in scan.candidates if c.rule == "skip_rms_norm"]
    assert len(cands) == 1
    fused = apply_candidates(model, scan, [cands[0].id]).model
    assert [n.op_type for n in fused.graph.node] == ["Relu", "SkipSimplifiedLayerNormalization", "Add"]
    x = np.random.default_rng(1).standard_normal((3, 5, h)).astype(np.float32)
    a, b = _run(model, {"x": x})[0], _run(fused, {"x": x})[0]
    assert float(np.max(np.abs(a - b))) <= 1e-5


@pytest.mark.parametrize(
    "name", sorted(p.stem for p in ASSET_MODELS.glob("*.onnx") if not p.stem.startswith("gpt2_96l"))
)
def test_every_candidate_says_what_it_saves(name):
    """Saved bytes are computed with the chosen dims on every export (no 'saves ?'), symbolic batch or not."""
    path = ASSET_MODELS / f"{name}.onnx"
    scan = scan_model(load_model(path), base_dir=path.parent)
    assert scan.candidates
    assert [c.id for c in scan.candidates if c.saved_bytes is None] == []
