"""Attention rule: exact matches on real GPT-2 / BERT / Llama exports, hand-built graphs, near misses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.fusion.apply import apply_candidates, check_fused
from fuseview.fusion.graphindex import GraphIndex
from fuseview.fusion.rules import attention_mha, embedding
from fuseview.fusion.rules.attention_mha import find_attention, near_misses
from fuseview.fusion.scan import scan_model
from fuseview.fusion.toolkit import ScanContext

from .conftest import GPT2_MODELS, ROOT

RULE = attention_mha.RULES[0]
ASSETS = ROOT / "assets" / "models"

# model path, attention layers
REAL = [
    (GPT2_MODELS / "gpt2_12l_ts13.onnx", 12),
    (GPT2_MODELS / "gpt2_12l_ts17.onnx", 12),
    (GPT2_MODELS / "gpt2_12l_dynamo.onnx", 12),
    (ASSETS / "bert_2l_ts13.onnx", 2),
    (ASSETS / "bert_2l_ts17.onnx", 2),
    (ASSETS / "llama_2l_ts17.onnx", 2),
    (ASSETS / "llama_2l_gqa_ts17.onnx", 2),
    (ASSETS / "llama_2l_dynamo.onnx", 2),
]


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _token_feeds(model: onnx.ModelProto, pad: str, batch: int = 3, seq: int = 11) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    mask = np.ones((batch, seq), np.int64)
    if pad == "right":
        mask[-1, -3:] = 0
    elif pad == "left":
        mask[-1, :3] = 0
    feeds = {}
    for i in model.graph.input:
        if i.name == "attention_mask":
            feeds[i.name] = mask
        elif "type" in i.name:
            feeds[i.name] = np.zeros((batch, seq), np.int64)
        elif "position" in i.name:
            feeds[i.name] = np.tile(np.arange(seq, dtype=np.int64), (batch, 1))
        else:
            feeds[i.name] = rng.integers(0, 1000, (batch, seq), dtype=np.int64)
    return feeds


def _max_diff(a: onnx.ModelProto, b: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> float:
    ra, rb = _session(a).run(None, feeds), _session(b).run(None, feeds)
    return max(float(np.max(np.abs(x - y))) for x, y in zip(ra, rb, strict=True))


def _fuse_all(model: onnx.ModelProto):
    scan = scan_model(model, rules=[RULE])
    result = apply_candidates(model, scan, [c.id for c in scan.candidates])
    return scan, result.model


@pytest.mark.parametrize(("path", "layers"), REAL, ids=[p.stem for p, _ in REAL])
def test_real_export_every_layer_fused_exactly(path: Path, layers: int) -> None:
    if not path.exists():
        pytest.fail(f"{path} is missing")
    model = onnx.load(str(path))
    scan, fused = _fuse_all(model)
    assert len(scan.candidates) == layers
    assert all(c.fused_op == "MultiHeadAttention" and c.domain == "com.microsoft" for c in scan.candidates)
    assert not [c for c in scan.candidates if c.conflicts]  # attention blocks never overlap each other
    ops = [n.op_type for n in fused.graph.node]
    assert ops.count("MultiHeadAttention") == layers
    assert ops.count("Softmax") == 0
    check_fused(fused)
    for pad in ("ones", "right"):
        assert _max_diff(model, fused, _token_feeds(model, pad)) <= 1e-4, pad


def test_gpt2_left_padding_also_exact() -> None:
    """The model's own additive mask is passed through, so left padding keeps the original arithmetic."""
    model = onnx.load(str(GPT2_MODELS / "gpt2_12l_ts17.onnx"))
    _scan, fused = _fuse_all(model)
    assert _max_diff(model, fused, _token_feeds(model, "left")) <= 1e-4


def test_fused_node_attributes_from_the_graph() -> None:
    model = onnx.load(str(GPT2_MODELS / "gpt2_12l_dynamo.onnx"))
    found, misses = find_attention(ScanContext(GraphIndex(model)))
    assert not misses
    a = found[0]
    assert (a.num_heads, a.head_size, a.scale) == (4, 16, 0.25)
    assert a.bias == "where"  # the causal + padding additive mask built once for all layers
    # dynamo merges heads straight to [-1, hidden]: that Reshape is re-emitted after the fused node
    assert a.reshape_out is not None


# ------------------------------------------------------------------------------------ hand-built graphs
B, S, H, D = 2, 5, 4, 16
HID = H * D


def _attention_graph(scale_value=0.25, scale_shape=(), softmax_axis=-1, extra_output: str | None = None,
                     extra_consumer: str | None = None, heads=(H, D), mask: str = "add",
                     k_perm=(0, 2, 3, 1)) -> onnx.ModelProto:
    """q, k, v [B,S,HID] + additive mask [B,1,S,S] -> textbook attention, with knobs to break it."""
    inits = [
        numpy_helper.from_array(np.array([0, 0, heads[0], heads[1]], np.int64), "split_shape"),
        numpy_helper.from_array(np.array([0, 0, -1], np.int64), "merge_shape"),
        numpy_helper.from_array(np.full(scale_shape, scale_value, np.float32), "scale"),
    ]
    nodes = [
        helper.make_node("Reshape", ["q", "split_shape"], ["q4"], name="q_split"),
        helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3], name="q_t"),
        helper.make_node("Reshape", ["k", "split_shape"], ["k4"], name="k_split"),
        helper.make_node("Transpose", ["k4"], ["kt"], perm=list(k_perm), name="k_t"),
        helper.make_node("Reshape", ["v", "split_shape"], ["v4"], name="v_split"),
        helper.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3], name="v_t"),
        helper.make_node("MatMul", ["qh", "kt"], ["scores"], name="qk"),
        helper.make_node("Mul", ["scores", "scale"], ["scaled"], name="scale_mul"),
    ]
    if mask == "add":
        nodes.append(helper.make_node("Add", ["scaled", "mask"], ["masked"], name="mask_add"))
    else:
        fill = -1.0 if mask == "where_mild" else -1e9
        inits.append(numpy_helper.from_array(np.array(fill, np.float32), "neg"))
        nodes.append(helper.make_node("Cast", ["mask"], ["mask_b"], to=TensorProto.BOOL, name="mask_cast"))
        nodes.append(helper.make_node("Where", ["mask_b", "neg", "scaled"], ["masked"], name="mask_where"))
    nodes += [
        helper.make_node("Softmax", ["masked"], ["probs"], axis=softmax_axis, name="softmax"),
        helper.make_node("MatMul", ["probs", "vh"], ["ctx"], name="pv"),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3], name="ctx_t"),
        helper.make_node("Reshape", ["ctx_t", "merge_shape"], ["out"], name="merge"),
    ]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, [B, S, HID])]
    if extra_output:
        outputs.append(helper.make_tensor_value_info(extra_output, TensorProto.FLOAT, None))
    if extra_consumer:
        nodes.append(helper.make_node("Identity", [extra_consumer], ["side"], name="side_use"))
        outputs.append(helper.make_tensor_value_info("side", TensorProto.FLOAT, None))
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [B, S, HID]) for n in ("q", "k", "v")]
    inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [B, 1, S, S]))
    graph = helper.make_graph(nodes, "attention", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _qkv_feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((B, S, HID)).astype(np.float32) for n in ("q", "k", "v")}
    causal = np.triu(np.ones((S, S), bool), 1)
    mask = np.where(causal, np.float32(-3.4028235e38), np.float32(0)).astype(np.float32)
    feeds["mask"] = np.broadcast_to(mask, (B, 1, S, S)).copy()
    return feeds


def _reasons(model: onnx.ModelProto) -> list[str]:
    return [r for _n, r in near_misses(ScanContext(GraphIndex(model)))]


def test_hand_built_match_is_exact() -> None:
    model = _attention_graph()
    scan, fused = _fuse_all(model)
    assert len(scan.candidates) == 1
    c = scan.candidates[0]
    assert set(c.nodes) == {"q_split", "q_t", "k_split", "k_t", "v_split", "v_t", "qk", "scale_mul",
                            "mask_add", "softmax", "pv", "ctx_t", "merge"}
    (mha,) = [n for n in fused.graph.node if n.op_type == "MultiHeadAttention"]
    attrs = {a.name: helper.get_attribute_value(a) for a in mha.attribute}
    assert attrs["num_heads"] == H and attrs["scale"] == pytest.approx(0.25)
    assert list(mha.input) == ["q", "k", "v", "", "", "mask"]
    assert {p.key for p in mha.metadata_props} >= {"fuseview.origin", "fuseview.rule"}
    assert _max_diff(model, fused, _qkv_feeds()) <= 1e-5


def test_transposed_k_form_and_custom_scale() -> None:
    """K as Transpose(0,2,1,3) then (0,1,3,2); a non-default scale is carried as the scale attribute."""
    model = _attention_graph(scale_value=0.3)
    # rebuild k path: k4 -> (0,2,1,3) -> (0,1,3,2)
    g = model.graph
    kt = next(n for n in g.node if n.name == "k_t")
    kt.output[0] = "kh"
    del kt.attribute[:]
    kt.attribute.append(helper.make_attribute("perm", [0, 2, 1, 3]))
    idx = list(g.node).index(kt)
    g.node.insert(idx + 1, helper.make_node("Transpose", ["kh"], ["kt"], perm=[0, 1, 3, 2], name="k_tt"))
    (a,), _ = find_attention(ScanContext(GraphIndex(model)))
    assert a.scale == pytest.approx(0.3)
    _scan, fused = _fuse_all(model)
    assert _max_diff(model, fused, _qkv_feeds()) <= 1e-5


def test_wrong_replacement_scale_would_be_caught() -> None:
    """The numeric check is sensitive: the same graph fused with a slightly wrong scale differs clearly."""
    model = _attention_graph()
    _scan, fused = _fuse_all(model)
    for n in fused.graph.node:
        if n.op_type == "MultiHeadAttention":
            for at in n.attribute:
                if at.name == "scale":
                    at.f = 0.26
    assert _max_diff(model, fused, _qkv_feeds()) > 1e-3


@pytest.mark.parametrize(("kwargs", "reason"), [
    ({"scale_shape": (1, H, 1, 1)}, "not a scalar constant"),  # a per-head scale tensor is not a scalar scale
    ({"softmax_axis": 2}, "axis"),
    ({"extra_output": "probs"}, "graph output"),
    ({"extra_consumer": "scaled"}, "outside the match"),
    ({"heads": (3, 16)}, "hidden"),
    ({"heads": (4, 8)}, "hidden"),
    ({"mask": "where_mild"}, "fill"),  # a select with a fill that still counts after Softmax
    ({"k_perm": (0, 2, 1, 3)}, "K transpose"),
])
def test_non_matches_give_no_candidate_and_a_reason(kwargs: dict, reason: str) -> None:
    model = _attention_graph(**kwargs)
    scan = scan_model(model, rules=[RULE])
    assert scan.candidates == []
    reasons = _reasons(model)
    assert len(reasons) == 1 and reason in reasons[0], reasons


def test_boolean_mask_by_where_becomes_an_additive_bias() -> None:
    """Where(masked_out, -1e9, scores) is fused with attention_bias = Where(masked_out, -1e9, 0)."""
    model = _attention_graph(mask="where")
    scan, fused = _fuse_all(model)
    assert len(scan.candidates) == 1 and "mask_where" in scan.candidates[0].nodes
    ops = [n.op_type for n in fused.graph.node]
    assert ops.count("MultiHeadAttention") == 1 and "Softmax" not in ops
    feeds = _qkv_feeds()
    feeds["mask"] = (feeds["mask"] < 0).astype(np.float32)  # 1 where masked out (the Cast makes it bool)
    assert _max_diff(model, fused, feeds) <= 1e-5


def test_mask_without_query_axis_is_a_near_miss() -> None:
    """A [B,1,1,T] key-padding bias cannot be MultiHeadAttention's attention_bias (needs [.,.,S,T])."""
    model = _attention_graph()
    g = model.graph
    g.input[3].CopyFrom(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [B, 1, 1, S]))
    assert scan_model(model, rules=[RULE]).candidates == []
    assert any("query axis" in r for r in _reasons(model))


def test_scan_does_not_modify_the_model() -> None:
    model = onnx.load(str(GPT2_MODELS / "gpt2_12l_ts13.onnx"))
    before = model.SerializeToString()
    scan_model(model, rules=[RULE])
    assert model.SerializeToString() == before


# ------------------------------------------------------------------------------- EmbedLayerNormalization
EMBED_RULE = embedding.RULES[0]


def _embedding_graph(positions: str = "slice", sum_is_output: bool = False,
                     segment: bool = True) -> onnx.ModelProto:
    """input_ids / token_type_ids [batch, seq] -> word + position (+ segment) embeddings -> LayerNorm."""
    rng = np.random.default_rng(3)
    buf = np.arange(16, dtype=np.int64)[None, :]
    if positions == "reversed":
        buf = buf[:, ::-1].copy()
    inits = [
        numpy_helper.from_array(rng.standard_normal((50, 8)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "P"),
        numpy_helper.from_array(rng.standard_normal((2, 8)).astype(np.float32), "T"),
        numpy_helper.from_array((1 + 0.1 * rng.standard_normal(8)).astype(np.float32), "gamma"),
        numpy_helper.from_array((0.1 * rng.standard_normal(8)).astype(np.float32), "beta"),
        numpy_helper.from_array(buf, "pos_buf"),
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array([0], np.int64), "zero1"),
        numpy_helper.from_array(np.array([1], np.int64), "one1"),
    ]
    nodes = [
        helper.make_node("Shape", ["input_ids"], ["ids_shape"], name="shape"),
        helper.make_node("Gather", ["ids_shape", "one"], ["seq_len"], axis=0, name="seq_len"),
        helper.make_node("Unsqueeze", ["seq_len", "zero1"], ["seq_end"], name="seq_end"),
        helper.make_node("Slice", ["pos_buf", "zero1", "seq_end", "one1", "one1"], ["pos_ids"],
                         name="pos_slice"),
        helper.make_node("Gather", ["W", "input_ids"], ["word"], name="word_gather"),
        helper.make_node("Gather", ["P", "pos_ids"], ["pos"], name="pos_gather"),
    ]
    if segment:
        nodes += [helper.make_node("Gather", ["T", "token_type_ids"], ["seg"], name="seg_gather"),
                  helper.make_node("Add", ["word", "seg"], ["ws"], name="add_seg"),
                  helper.make_node("Add", ["ws", "pos"], ["emb"], name="add_pos")]
    else:
        nodes.append(helper.make_node("Add", ["word", "pos"], ["emb"], name="add_pos"))
    nodes.append(helper.make_node("LayerNormalization", ["emb", "gamma", "beta"], ["out"], axis=-1,
                                  epsilon=1e-12, name="ln"))
    ids = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])]
    if segment:
        ids.append(helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", "seq"]))
    outs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "seq", 8])]
    if sum_is_output:
        outs.append(helper.make_tensor_value_info("emb", TensorProto.FLOAT, ["batch", "seq", 8]))
    graph = helper.make_graph(nodes, "embedding", ids, outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _embedding_feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4)
    feeds = {"input_ids": rng.integers(0, 50, (3, 7), dtype=np.int64)}
    if any(i.name == "token_type_ids" for i in model.graph.input):
        feeds["token_type_ids"] = rng.integers(0, 2, (3, 7), dtype=np.int64)
    return feeds


@pytest.mark.parametrize(("segment", "sum_is_output"), [(True, False), (False, False), (True, True)])
def test_embedding_hand_built_is_exact(segment: bool, sum_is_output: bool) -> None:
    model = _embedding_graph(segment=segment, sum_is_output=sum_is_output)
    scan = scan_model(model, rules=[EMBED_RULE])
    assert len(scan.candidates) == 1
    fused = apply_candidates(model, scan, [scan.candidates[0].id]).model
    (eln,) = [n for n in fused.graph.node if n.op_type == "EmbedLayerNormalization"]
    casts = [n for n in fused.graph.node if n.op_type == "Cast"]
    assert len(casts) == (2 if segment else 1)  # int64 ids -> int32 for the kernel
    assert ("emb" in eln.output) == sum_is_output
    check_fused(fused)
    assert _max_diff(model, fused, _embedding_feeds(model)) <= 1e-5


def test_embedding_positions_not_arange_is_a_near_miss() -> None:
    model = _embedding_graph(positions="reversed")
    assert scan_model(model, rules=[EMBED_RULE]).candidates == []
    from fuseview.fusion.rules.embedding import find_embeddings

    _found, misses = find_embeddings(ScanContext(GraphIndex(model)))
    assert len(misses) == 1 and "position indices" in misses[0][1]


def test_bert_embedding_fused_exactly() -> None:
    model = onnx.load(str(ASSETS / "bert_2l_ts17.onnx"))
    scan = scan_model(model, rules=[EMBED_RULE])
    assert len(scan.candidates) == 1
    fused = apply_candidates(model, scan, [scan.candidates[0].id]).model
    assert [n.op_type for n in fused.graph.node].count("EmbedLayerNormalization") == 1
    for pad in ("ones", "right"):
        assert _max_diff(model, fused, _token_feeds(model, pad)) <= 1e-4


def test_gpt2_dynamo_embedding_exact_with_embedding_sum() -> None:
    """dynamo GPT-2: Gather(wte, Reshape(input_ids, [-1, S])) + Gather(wpe, Unsqueeze(Range(0, S, 1)))."""
    model = onnx.load(str(GPT2_MODELS / "gpt2_12l_dynamo.onnx"))
    scan = scan_model(model, rules=[EMBED_RULE])
    assert len(scan.candidates) == 1
    fused = apply_candidates(model, scan, [scan.candidates[0].id]).model
    (eln,) = [n for n in fused.graph.node if n.op_type == "EmbedLayerNormalization"]
    assert eln.output[2] == "add_17"  # the embedding sum also feeds the first residual Add
    for pad in ("ones", "right"):
        assert _max_diff(model, fused, _token_feeds(model, pad)) <= 1e-4


def test_gpt2_ts_embedding_is_not_offered() -> None:
    """ts GPT-2 reads the word-embedding tensor's shape for the positions and the mask: not fusable as is."""
    model = onnx.load(str(GPT2_MODELS / "gpt2_12l_ts17.onnx"))
    assert scan_model(model, rules=[EMBED_RULE]).candidates == []


def test_attention_near_misses_reach_the_scan_result() -> None:
    # a wrong softmax axis is a near miss of attention_mha, reported by scan like pattern rules' misses
    model = onnx.load(str(GPT2_MODELS / "gpt2_2l_ts17.onnx"))
    sm = next(n for n in model.graph.node if n.op_type == "Softmax")
    for a in sm.attribute:
        if a.name == "axis":
            a.i = 1
    result = scan_model(model)
    reasons = [n.reason for n in result.near_misses if n.rule == "attention_mha"]
    assert len(reasons) == 1 and "axis" in reasons[0].lower()
    assert sum(c.rule == "attention_mha" for c in result.candidates) == 1
