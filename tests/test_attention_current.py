"""Attention in the exports people make today (transformers 5.x, default sdpa attention, both exporters,
with and without a KV cache, T5's relative-bias attention): every layer fuses, and every fused model
matches the original in onnxruntime CPU at past length 0/1/64 and 1/16 new tokens.

The same holds for decoders the rules were not written against (assets/models/decoders: Qwen2, Mistral,
Phi-3, GPT-NeoX, OPT, Gemma; scripts/make_decoder_exports.py)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import onnx
import pytest

from fuseview.dims import cache_length_dims, has_kv_cache
from fuseview.fusion.pipeline import FuseOptions, build_fused, load_for_fusion, scan_for_fusion
from fuseview.fusion.plan import Plan
from fuseview.fusion.validate import run_model
from fuseview.fusion.validate_cache import validate_cache_lengths
from fuseview.runtime.compare import tensor_diffs
from fuseview.runtime.inputs import make_feeds

from .conftest import ASSET_MODELS

CURRENT = ASSET_MODELS / "current"
DECODERS = ASSET_MODELS / "decoders"
_INDEXES = {f: json.loads((f / "INDEX.json").read_text())["models"] for f in (CURRENT, DECODERS)}
FOLDER = {name: folder for folder, models in _INDEXES.items() for name in models}
INDEX = {name: _INDEXES[folder][name] for name, folder in FOLDER.items()}
ATTENTION_OPS = ("MultiHeadAttention", "Attention", "GroupQueryAttention")
MAX_ABS = 1e-4  # observed <= 1.2e-6 on every model and length


def _fuse(name: str) -> tuple[onnx.ModelProto, onnx.ModelProto, object]:
    model = load_for_fusion(FOLDER[name] / f"{name}.onnx")
    scan = scan_for_fusion(model)
    plan = Plan(scan.candidates)
    plan.accept_all()
    out = build_fused(model, scan, plan.accepted(), FuseOptions(validate=False))
    return model, out.model, scan


@pytest.mark.parametrize("name", sorted(INDEX))
def test_every_attention_layer_fuses_and_validates(name: str) -> None:
    info = INDEX[name]
    model, fused, scan = _fuse(name)
    ops = Counter(n.op_type for n in fused.graph.node)
    assert sum(ops[o] for o in ATTENTION_OPS) == info["layers"], ops
    assert ops["Softmax"] == 0  # no attention layer left unfused
    assert not [m for m in scan.near_misses if m.rule == "attention_mha"]
    runs = validate_cache_lengths(model, fused)
    assert len(runs) == (6 if info["has_kv_cache"] else 2)
    for past, new, v in runs:
        assert v.ok and v.max_abs <= MAX_ABS, (past, new, v.figures())


@pytest.mark.parametrize("name", [n for n in sorted(INDEX) if INDEX[n]["has_kv_cache"]])
def test_kv_cache_dims_follow_the_graph(name: str) -> None:
    model = load_for_fusion(FOLDER[name] / f"{name}.onnx")
    assert has_kv_cache(model)
    dims = cache_length_dims(model, 64, 16)
    shapes = {vi.name: [d.dim_param for d in vi.type.tensor_type.shape.dim] for vi in model.graph.input}
    assert dims[shapes["past_key_values.0.key"][2]] == 64
    assert dims[shapes["attention_mask"][1]] == 80
    assert dims[shapes["input_ids"][1]] == 16


@pytest.mark.parametrize("name", ["gpt2_2l_sdpa_past_ts17", "gpt2_2l_sdpa_past_dynamo"])
def test_gpt2_cache_goes_into_multihead_attention(name: str) -> None:
    """K = Concat(past, new) per head: the Concats join the match; the fused op reads past, writes present."""
    _model, fused, _scan = _fuse(name)
    mhas = [n for n in fused.graph.node if n.op_type == "MultiHeadAttention"]
    assert len(mhas) == INDEX[name]["layers"]
    presents = sorted(o for n in mhas for o in n.output[1:])
    assert presents == sorted(o.name for o in fused.graph.output if o.name.startswith("present"))
    assert all(len(n.input) == 8 and n.input[7] for n in mhas)  # past_key, past_value given
    assert not [n for n in fused.graph.node if n.op_type == "Concat" and n.output[0] in presents]


def test_t5_relative_bias_goes_in_as_attention_bias() -> None:
    """T5: unscaled scores plus a relative-position bias; the key split stays where the bias reads it."""
    _model, fused, scan = _fuse("t5_2l_sdpa_ts17")
    fused_ops = [n for n in fused.graph.node if n.op_type in ATTENTION_OPS]
    assert len(fused_ops) == 2
    for n in fused_ops:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        assert attrs["scale"] == pytest.approx(1.0)
        assert len(n.input) >= 6 and n.input[5]  # attention_bias: position bias + mask
    by_rule = Counter(c.rule for c in scan.candidates)
    assert by_rule["attention_mha"] == 2


@pytest.mark.parametrize("name", [n for n in sorted(INDEX) if INDEX[n]["kv_heads"] < INDEX[n]["heads"]])
def test_grouped_kv_heads_become_group_query_attention(name: str) -> None:
    """Llama's repeat_kv goes into GroupQueryAttention (the model's mask as attention_bias, so any mask keeps
    the original's numbers; causal=1 where that mask is causal, as every export's is:
    rules/attention_causal.py); with a cache it writes the model's present key and value."""
    model, fused, _scan = _fuse(name)
    info = INDEX[name]
    gqas = [n for n in fused.graph.node if n.op_type == "GroupQueryAttention"]
    assert len(gqas) == info["layers"]
    for n in gqas:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        want = (info["heads"], info["kv_heads"], 1)
        assert (attrs["num_heads"], attrs["kv_num_heads"], attrs["causal"]) == want
        assert n.input[10]  # attention_bias
    if info["has_kv_cache"]:
        presents = sorted(o for n in gqas for o in n.output[1:])
        assert presents == sorted(o.name for o in fused.graph.output if o.name.startswith("present"))


@pytest.mark.parametrize("name", sorted(INDEX))
@pytest.mark.parametrize("past", [0, 4])
def test_left_padded_mask_stays_exact(name: str, past: int) -> None:
    """Rows the mask hides entirely (left padding without a cache): the sdpa exports zero them through a
    Where(IsNaN) guard; the fused model gets the mask clamped and zeroes those rows, instead of the NaN the
    fused kernels would write (and every later layer would spread). The dynamo exports average every key
    for such a row (the lowest float, not -inf); causal=1 averages the earlier ones: those padded tokens'
    rows are the only ones that differ."""
    model, fused, _scan = _fuse(name)
    lowest_float_rows = INDEX[name]["exporter"] == "dynamo" and any(
        n.op_type == "GroupQueryAttention" for n in fused.graph.node)
    assert_left_padded_outputs_match(model, fused, past, seed=1, padded_rows=not lowest_float_rows)


PAD = 3  # left-padded positions


def assert_left_padded_outputs_match(model, fused, past: int, seed: int, padded_rows: bool = True) -> None:
    """Original and fused agree on 8 new tokens over `past` cached ones with the first 3 keys masked; with
    padded_rows False, on every row but the padded tokens' (logits rows, the cache positions they write)."""
    if past and not has_kv_cache(model):
        pytest.skip("no KV cache")
    feeds = make_feeds(model, cache_length_dims(model, past, 8), seed=seed)
    feeds["attention_mask"][:, :PAD] = 0
    names = [o.name for o in model.graph.output]
    a = run_model(model, feeds, reference=False)
    b = run_model(fused, feeds, reference=False)
    if not padded_rows:
        cut = {n: (1, max(0, PAD - past)) if n == "logits" else (2, PAD) for n in names}
        a, b = ([np.take(x, range(cut[n][1], x.shape[cut[n][0]]), axis=cut[n][0])
                 for n, x in zip(names, side, strict=True)] for side in (a, b))
    diffs = tensor_diffs(names, a, b)
    assert all(d["passed"] and d["max_abs"] <= MAX_ABS for d in diffs.values()), diffs


def test_the_decoders_cover_six_architectures_by_both_exporters_with_and_without_a_cache() -> None:
    mine = [INDEX[n] for n, f in FOLDER.items() if f == DECODERS]
    kinds = {(e["architecture"], e["exporter"], e["has_kv_cache"]) for e in mine}
    archs = {e["architecture"] for e in mine}
    assert len(archs) == 6 and len(kinds) == 24
    assert all(e["bytes"] < 500_000 for e in mine)


@pytest.mark.parametrize("name", ["phi3_2l_sdpa_past_ts17", "gpt_neox_2l_sdpa_past_dynamo"])
def test_packed_projections_split_per_tensor_or_per_head_stay_in_front_of_the_fused_op(name: str) -> None:
    """Phi-3 slices Q, K, V from one projection; GPT-NeoX splits each head's [q|k|v]: the slices stay and
    feed the fused op, whose head count is the model's."""
    _model, fused, scan = _fuse(name)
    info = INDEX[name]
    ops = [n for n in fused.graph.node if n.op_type in ATTENTION_OPS]
    assert len(ops) == info["layers"]
    for n in ops:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        assert attrs["num_heads"] == info["heads"]
    assert any(n.op_type in ("Slice", "Split") for n in fused.graph.node)
