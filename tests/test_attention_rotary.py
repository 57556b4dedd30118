"""Rotary inside GroupQueryAttention (attention_gqa_rotary): Llama exports whose positions are past +
arange(new) fuse every layer with do_rotary=1 and cos/sin caches computed from the graph, and match the
original at past 0/1/64 x new 1/16 and with a left-padded mask; positions read from a position_ids input
(Optimum) or a head size onnxruntime's rotary refuses stay a near miss, the rotary outside the op."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from fuseview.dims import cache_length_dims, has_kv_cache
from fuseview.fusion.ort_config import decisions, fusion_options
from fuseview.fusion.pipeline import FuseOptions, build_fused, load_for_fusion, scan_for_fusion
from fuseview.fusion.plan import Plan
from fuseview.fusion.rules.attention_rotary import ROTARY_CACHE_LEN
from fuseview.fusion.validate import run_model
from fuseview.fusion.validate_cache import validate_cache_lengths
from fuseview.runtime.compare import tensor_diffs
from fuseview.runtime.inputs import make_feeds
from tests.test_attention_current import assert_left_padded_outputs_match

from .conftest import ASSET_MODELS

ROTARY = [("kvcache", "llama_2l_past_ts17_seqdims"), ("kvcache", "llama_2l_past_ts17_xyzdims"),
          ("kvcache", "llama_2l_past_ts17_decode"), ("current", "llama_2l_sdpa_past_ts17"),
          ("current", "llama_2l_sdpa_past_dynamo"), ("current", "llama_2l_sdpa_ts17"),
          ("current", "llama_2l_sdpa_dynamo")]
MAX_ABS = 1e-4
ROTARY_OPS = ("Neg", "Sin", "Cos")


def _fuse(folder: str, name: str) -> tuple[onnx.ModelProto, onnx.ModelProto, object]:
    model = load_for_fusion(ASSET_MODELS / folder / f"{name}.onnx")
    scan = scan_for_fusion(model)
    plan = Plan(scan.candidates)
    plan.accept_all()
    return model, build_fused(model, scan, plan.accepted(), FuseOptions(validate=False)).model, scan


def _attrs(n: onnx.NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}


def _layers(folder: str, name: str) -> int:
    return int(json.loads((ASSET_MODELS / folder / "INDEX.json").read_text())["models"][name]["layers"])


@pytest.mark.parametrize(("folder", "name"), ROTARY)
def test_every_layer_rotates_inside_group_query_attention(folder: str, name: str) -> None:
    model, fused, _scan = _fuse(folder, name)
    gqas = [n for n in fused.graph.node if n.op_type == "GroupQueryAttention"]
    assert len(gqas) == _layers(folder, name)
    inits = {t.name: t for t in fused.graph.initializer}
    for n in gqas:
        attrs = _attrs(n)
        assert (attrs["do_rotary"], attrs["rotary_interleaved"]) == (1, 0)
        head = int(fused_head_size(model, attrs["num_heads"]))
        for cache in n.input[7:9]:
            assert list(inits[cache].dims) == [ROTARY_CACHE_LEN, head // 2]
    # the rotary's own nodes (rotate_half's Neg, the Sin/Cos of the angles) are gone with it
    assert not [n for n in fused.graph.node if n.op_type in ROTARY_OPS]
    assert [n for n in model.graph.node if n.op_type in ROTARY_OPS]


def fused_head_size(model: onnx.ModelProto, heads: int) -> int:
    """hidden / heads from the embedding table (every rotary export here has one)."""
    emb = next(t for t in model.graph.initializer if "embed_tokens" in t.name)
    return int(emb.dims[1]) // heads


@pytest.mark.parametrize(("folder", "name"), [r for r in ROTARY if has_kv_cache(onnx.load(
    ASSET_MODELS / r[0] / f"{r[1]}.onnx", load_external_data=False))])
def test_rotary_in_the_op_validates_at_every_cache_length(folder: str, name: str) -> None:
    model, fused, _scan = _fuse(folder, name)
    news = (1,) if name.endswith("_decode") else (1, 16)
    runs = validate_cache_lengths(model, fused, news=news)
    assert len(runs) == 3 * len(news)
    for past, new, v in runs:
        assert v.ok and v.max_abs <= MAX_ABS, (past, new, v.figures())


@pytest.mark.parametrize(("folder", "name"), [ROTARY[0], ROTARY[3], ROTARY[5]])
@pytest.mark.parametrize("past", [0, 4, 64])
def test_left_padded_mask_keeps_the_positions(folder: str, name: str, past: int) -> None:
    """These exports take positions from the cache length (transformers' cache_position), whatever the mask
    says: the kernel's past + arange(new) is the same with the first keys padded away."""
    model, fused, _scan = _fuse(folder, name)
    assert_left_padded_outputs_match(model, fused, past, seed=3)


def test_positions_from_a_position_ids_input_stay_outside() -> None:
    """Optimum's Llama reads position_ids: onnxruntime's rotary ignores them on the first prompt, so a
    left-padded batch (positions shifted per row) would differ. GroupQueryAttention still fuses, without
    its rotary, and the near miss says why."""
    model, fused, scan = _fuse("optimum", "llama_2l_past")
    gqas = [n for n in fused.graph.node if n.op_type == "GroupQueryAttention"]
    assert len(gqas) == 2 and all(not _attrs(n).get("do_rotary") for n in gqas)
    reasons = [m.reason for m in scan.near_misses if m.rule == "attention_gqa_rotary"]
    assert len(reasons) == 2 and all("position_ids" in r for r in reasons)
    feeds = make_feeds(model, cache_length_dims(model, 0, 8), seed=1)
    feeds["attention_mask"][:, :3] = 0
    feeds["position_ids"] = np.maximum(np.arange(8) - 3, 0)[None].astype(np.int64)
    diffs = tensor_diffs([o.name for o in model.graph.output], run_model(model, feeds, reference=False),
                         run_model(fused, feeds, reference=False))
    assert all(d["passed"] for d in diffs.values()), diffs


def test_a_head_size_the_kernel_refuses_is_a_near_miss() -> None:
    """onnxruntime's rotary needs a head size that is a multiple of 16 (Qwen2 here has 8)."""
    _model, fused, scan = _fuse("decoders", "qwen2_2l_sdpa_past_ts17")
    assert [n for n in fused.graph.node if n.op_type == "GroupQueryAttention"]
    reasons = [m.reason for m in scan.near_misses if m.rule == "attention_gqa_rotary"]
    assert reasons and all("multiple of 16" in r for r in reasons)


def test_the_rotary_decision_turns_on_attention_and_rotary_for_the_transformers_optimizer() -> None:
    """Accepting the rotary form (packed, the default: attention_gqa and the unpacked rotary form then lose
    their overlapping candidates, neither decision) still says enable_attention, and
    enable_rotary_embeddings, to onnxruntime's optimizer."""
    _model, _fused, scan = _fuse("kvcache", "llama_2l_past_ts17_seqdims")
    plan = Plan(scan.candidates)
    plan.accept_all()
    ds = decisions(scan.candidates, set(plan.accepted()))
    assert {d.rule for d in ds if d.accepted} >= {"attention_gqa_rotary_qkv"}
    assert not {"attention_gqa", "attention_gqa_rotary"} & {d.rule for d in ds}
    opts = fusion_options(ds)
    assert opts["enable_attention"] and opts["enable_rotary_embeddings"]


@pytest.mark.parametrize(("folder", "name"), ROTARY)
def test_projections_are_packed_and_every_layer_reads_one_rotary_table(folder: str, name: str) -> None:
    """attention_gqa_rotary_qkv (the default where it matches): one MatMul over [Wq | Wk | Wv] feeds
    GroupQueryAttention's packed query, key and value omitted; the layers' equal cos/sin caches are one
    initializer each (fusion.shared_work). Numerics: test_rotary_in_the_op_validates_at_every_cache_length."""
    model, fused, _scan = _fuse(folder, name)
    gqas = [n for n in fused.graph.node if n.op_type == "GroupQueryAttention"]
    assert len(gqas) == _layers(folder, name)
    assert all(list(n.input[1:3]) == ["", ""] and _attrs(n)["do_rotary"] == 1 for n in gqas)
    assert len({n.input[7] for n in gqas}) == 1 and len({n.input[8] for n in gqas}) == 1
    producers = {o: n for n in fused.graph.node for o in n.output}
    inits = {t.name: t for t in fused.graph.initializer}
    head = fused_head_size(model, _attrs(gqas[0])["num_heads"])
    width = head * (_attrs(gqas[0])["num_heads"] + 2 * _attrs(gqas[0])["kv_num_heads"])
    for n in gqas:
        mm = producers[n.input[0]]
        assert mm.op_type == "MatMul" and list(inits[mm.input[1]].dims)[1] == width
    # a layer loses its attention's two MatMuls (into the op) and two of its three projections
    matmuls = sum(n.op_type == "MatMul" for n in fused.graph.node)
    assert matmuls == sum(n.op_type == "MatMul" for n in model.graph.node) - 4 * len(gqas)
