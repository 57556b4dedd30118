"""Exports made by Hugging Face Optimum (assets/models/optimum, scripts/make_optimum_exports.py): its own
input names and dims (`past_sequence_length + sequence_length`), position_ids, the sdpa scale computed at run
time as a square root on both Q and K, GPT-2's causal mask sliced to the concatenated key's length, T5's eager
attention (a float Cast before Softmax, heads merged by [B, -1, hidden]). Every attention layer fuses and the
fused model validates with no --dim."""

from __future__ import annotations

import json
from collections import Counter

import onnx
import pytest

from fuseview.fusion.pipeline import FuseOptions, build_fused, load_for_fusion, scan_for_fusion
from fuseview.fusion.plan import Plan
from fuseview.fusion.validate import validate

from .conftest import ASSET_MODELS
from .test_attention_kvcache import fuse_with_no_dim

OPTIMUM = ASSET_MODELS / "optimum"
INDEX = json.loads((OPTIMUM / "INDEX.json").read_text())["models"]
ATTENTION_OPS = ("MultiHeadAttention", "Attention", "GroupQueryAttention")
# attention layers per file: T5's decoder has self- and cross-attention in each of its 2 layers
LAYERS = {"t5_2l_decoder_past": 4}


def _attention_ops(name: str) -> tuple[onnx.ModelProto, onnx.ModelProto, Counter]:
    model = load_for_fusion(OPTIMUM / f"{name}.onnx")
    scan = scan_for_fusion(model)
    plan = Plan(scan.candidates)
    plan.accept_all()
    fused = build_fused(model, scan, plan.accepted(), FuseOptions(validate=False)).model
    kinds = Counter(n.op_type for n in fused.graph.node if n.op_type in ATTENTION_OPS + ("Softmax", "Sqrt"))
    return model, fused, kinds


@pytest.mark.parametrize("name", sorted(INDEX))
def test_every_optimum_attention_layer_fuses_and_validates(name: str) -> None:
    model, fused, kinds = _attention_ops(name)
    layers = LAYERS.get(name, INDEX[name]["layers"])
    assert sum(kinds[o] for o in ATTENTION_OPS) == layers, kinds
    assert not kinds["Softmax"] and not kinds["Sqrt"], kinds
    v = validate(model, fused, False, seeds=2)
    assert v.ok and v.max_abs <= 1e-4, v.figures()


def test_optimum_llama_goes_into_group_query_attention() -> None:
    """Optimum's Llama sizes its mask by the repeated key's shape: the block takes that Shape over and
    computes [B, H, P + S, D] from the new key heads and the past, so GroupQueryAttention fuses."""
    model, fused, kinds = _attention_ops("llama_2l_past")
    assert kinds["GroupQueryAttention"] == INDEX["llama_2l_past"]["layers"]
    from fuseview.fusion.validate_cache import validate_cache_lengths

    for past, new, v in validate_cache_lengths(model, fused):
        assert v.ok and v.max_abs <= 1e-4, (past, new, v.figures())


def test_the_scale_computed_at_run_time_is_one_factor() -> None:
    """Optimum's sdpa multiplies Q and K^T each by sqrt(1/sqrt(D)) computed from Q's shape: one scale."""
    _model, fused, _kinds = _attention_ops("gpt2_2l_past")
    for n in fused.graph.node:
        if n.op_type == "MultiHeadAttention":
            scale = next(a.f for a in n.attribute if a.name == "scale")
            assert scale == pytest.approx(1 / 16 ** 0.5)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(INDEX))
def test_fuse_an_optimum_export_with_no_dim(name: str, tmp_path) -> None:
    ops = fuse_with_no_dim(OPTIMUM / f"{name}.onnx", tmp_path / "f.onnx")
    assert sum(ops[o] for o in ATTENTION_OPS) == LAYERS.get(name, INDEX[name]["layers"])
