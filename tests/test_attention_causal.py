"""GroupQueryAttention runs causal=1 (onnxruntime's faster path) only where the model's own mask hides every
later key (rules/attention_causal.py, evaluated in onnxruntime); the model's mask stays its attention_bias,
so left-padded batches stay exact. A mask that lets later keys through keeps causal=0."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from fuseview.dims import cache_length_dims
from fuseview.fusion.pipeline import FuseOptions, build_fused, scan_for_fusion
from fuseview.fusion.plan import Plan
from fuseview.fusion.rules.attention_causal import _hides_later_keys
from fuseview.fusion.validate import run_model
from fuseview.fusion.validate_cache import validate_cache_lengths
from fuseview.runtime.inputs import make_feeds
from tests.test_attention_current import assert_left_padded_outputs_match

from .conftest import ASSET_MODELS

MAX_ABS = 1e-4
DECODERS = ["kvcache/llama_2l_past_ts17_seqdims", "current/llama_2l_sdpa_past_ts17", "optimum/llama_2l_past",
            "decoders/mistral_2l_sdpa_past_ts17", "current/llama_2l_sdpa_ts17"]


def _fused(model: onnx.ModelProto) -> onnx.ModelProto:
    scan = scan_for_fusion(model)
    plan = Plan(scan.candidates)
    plan.accept_all()
    return build_fused(model, scan, plan.accepted(), FuseOptions(validate=False)).model


def _causal(fused: onnx.ModelProto) -> list[int]:
    return [int(onnx.helper.get_attribute_value(a)) for n in fused.graph.node
            if n.op_type == "GroupQueryAttention" for a in n.attribute if a.name == "causal"]


@pytest.mark.parametrize("rel", DECODERS)
def test_a_causal_mask_runs_the_causal_kernel_and_matches_the_original(rel: str) -> None:
    model = onnx.load(ASSET_MODELS / f"{rel}.onnx")
    fused = _fused(model)
    assert _causal(fused) == [1, 1]
    assert all(len(n.input) > 10 and n.input[10] for n in fused.graph.node
               if n.op_type == "GroupQueryAttention")  # the model's mask is still applied
    for past, new, v in validate_cache_lengths(model, fused, news=(1, 16)):
        assert v.ok and v.max_abs <= MAX_ABS, (rel, past, new, v.figures())


@pytest.mark.parametrize("past", [0, 4])
def test_left_padding_stays_exact_with_the_causal_kernel(past: int) -> None:
    model = onnx.load(ASSET_MODELS / "kvcache" / "llama_2l_past_ts17_seqdims.onnx")
    fused = _fused(model)
    assert _causal(fused) == [1, 1]
    assert_left_padded_outputs_match(model, fused, past, seed=5)


@pytest.mark.parametrize("rel", DECODERS[:2])
def test_a_mask_that_shows_later_keys_keeps_causal_0(rel: str) -> None:
    """The export's key <= query comparison turned into key >= query: each token sees the later keys and
    not the earlier ones. The kernel's causal path would hide them: causal=0, and the output still matches."""
    assert_the_compare_made_op_keeps_causal_0(rel, "GreaterOrEqual")


def assert_the_compare_made_op_keeps_causal_0(rel: str, op: str) -> None:
    """The export's one key <= query comparison made `op`: the block keeps causal=0 and still matches."""
    model = onnx.load(ASSET_MODELS / f"{rel}.onnx")
    compares = [n for n in model.graph.node if n.op_type == "LessOrEqual"]
    assert len(compares) == 1
    compares[0].op_type = op
    fused = _fused(model)
    assert _causal(fused) == [0, 0]
    for past, new, v in validate_cache_lengths(model, fused, news=(1, 16)):
        assert v.ok and v.max_abs <= MAX_ABS, (rel, past, new, v.figures())


DYNAMO = ["current/llama_2l_sdpa_past_dynamo", "decoders/gemma_2l_sdpa_past_dynamo"]


@pytest.mark.parametrize("rel", DYNAMO)
def test_tokens_masked_by_the_lowest_float_change_only_on_padded_rows(rel: str) -> None:
    """The dynamo exports hide a left-padded token's every key with the lowest float, not -inf: the model
    averages every key for it, causal=1 the earlier ones. Only the padded tokens' rows differ (their logits
    and the cache they write, which no unpadded token reads); with the padding in the past, nothing does."""
    model = onnx.load(ASSET_MODELS / f"{rel}.onnx")
    fused = _fused(model)
    assert _causal(fused) == [1, 1]
    names = [o.name for o in model.graph.output]
    for past, pad in ((0, 3), (4, 3)):
        feeds = make_feeds(model, cache_length_dims(model, past, 8), seed=5)
        feeds["attention_mask"][:, :pad] = 0
        a = dict(zip(names, run_model(model, feeds, reference=False), strict=True))
        b = dict(zip(names, run_model(fused, feeds, reference=False), strict=True))
        padded_rows = max(0, pad - past)  # new tokens at padded positions
        for name in names:
            axis = 1 if name == "logits" else 2  # [B, S, vocab]; present [B, KVH, past + S, D]
            first = padded_rows if name == "logits" else pad
            d = np.abs(np.asarray(a[name]) - np.asarray(b[name]))
            assert np.take(d, range(first, d.shape[axis]), axis=axis).max() <= MAX_ABS, (rel, past, name)
        changed = np.abs(a["logits"][:, :padded_rows] - b["logits"][:, :padded_rows])
        assert (changed.size > 0 and changed.max() > 1e-3) == bool(padded_rows), (rel, past)  # the kernel's


def test_a_real_token_that_sees_no_key_keeps_causal_0() -> None:
    """The dynamo export's key <= query made key < query: the first token, a real one, sees no key (the
    model averages them all, with the lowest float everywhere); causal=1 would show it itself, so the block
    keeps causal=0 and matches."""
    assert_the_compare_made_op_keeps_causal_0(DYNAMO[0], "Less")


def test_the_later_keys_check() -> None:
    past, new = 3, 4
    later = np.arange(past + new)[None, :] > past + np.arange(new)[:, None]
    assert _hides_later_keys(later[None, None], past, new)
    assert _hides_later_keys(later[None, None] | True, past, new)  # hiding more is still causal
    shown = later.copy()
    shown[1, -1] = False  # the last key seen by the second new token
    assert not _hides_later_keys(shown[None, None], past, new)
    assert not _hides_later_keys(later[-1:][None, None], past, new)  # the last row broadcast to all four
    assert _hides_later_keys(np.zeros((1, 1, 1, past + 1), bool), past, 1)  # decode step: no later key
