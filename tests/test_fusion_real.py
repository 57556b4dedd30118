"""Fusion on real exports: GPT-2 (ts13/ts17/dynamo), and the BERT/Llama/MLP/CNN exports in assets/models."""

from __future__ import annotations

import collections
from pathlib import Path

import onnx
import pytest

from fuseview.fusion.apply import apply_candidates, check_fused
from fuseview.fusion.plan import Plan
from fuseview.fusion.scan import load_model, scan_model
from fuseview.fusion.validate import validate

from .conftest import GPT2_MODELS, ONNX_BACKEND_DATA

ASSETS = Path(__file__).resolve().parent.parent / "assets" / "models"
LAYERS = {"gpt2_2l_ts17": 2, "gpt2_12l_ts13": 12, "gpt2_12l_ts17": 12, "gpt2_12l_dynamo": 12}


def fuse_all(path: Path):
    model = load_model(path)
    scan = scan_model(model, base_dir=path.parent)
    plan = Plan(scan.candidates)
    plan.accept_all()
    return model, scan, apply_candidates(model, scan, plan.accepted())


def fused_ops(m: onnx.ModelProto) -> collections.Counter:
    return collections.Counter(n.op_type for n in m.graph.node)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_gpt2_exports_fuse_and_match(name):
    path = GPT2_MODELS / f"{name}.onnx"
    model, _scan, res = fuse_all(path)
    layers = LAYERS[name]
    ops = fused_ops(res.model)
    # at least what onnxruntime's transformers optimizer fuses (2 per layer + final LayerNorm), plus attention
    assert (
        ops["SkipLayerNormalization"] + ops["LayerNormalization"] + ops["EmbedLayerNormalization"]
        >= 2 * layers + 1
    )
    assert ops["FastGelu"] == layers
    check_fused(res.model)
    v = validate(model, res.model, False)
    assert v.ok and max(o.max_abs for o in v.outputs) <= 1e-4, v.to_json()


@pytest.mark.slow  # measured over 10 s; `-m "not slow"` skips it
def test_gpt2_96l_candidates():
    path = ASSETS / "gpt2_96l_ts13.onnx"
    _model, scan, res = fuse_all(path)
    ops = fused_ops(res.model)
    assert ops["SkipLayerNormalization"] >= 192 and ops["FastGelu"] == 96
    by_rule = collections.Counter(c.rule for c in scan.candidates)
    assert by_rule["layer_norm"] == 193 and by_rule["fast_gelu"] + by_rule["bias_fast_gelu"] >= 96
    assert all(c.saved_bytes is not None for c in scan.candidates if c.rule != "attention_mha")


ASSET_EXPECT = {
    "bert_2l_ts13": {"SkipLayerNormalization": 4},
    "bert_2l_ts17": {"SkipLayerNormalization": 4},
    "llama_2l_ts17": {"SkipSimplifiedLayerNormalization": 4},
    "llama_2l_dynamo": {"SkipSimplifiedLayerNormalization": 4},
    "mlp_gelu_erf_ts17": {"BiasGelu": 2},
    "mlp_gelu_tanh_ts17": {"FastGelu": 2},
    "convnet_bn_relu_ts17": {"FusedConv": 2},
}


@pytest.mark.parametrize("name", sorted(ASSET_EXPECT))
def test_asset_exports(name):
    path = ASSETS / f"{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path} not exported in this checkout (scripts/ makes it)")
    model, _scan, res = fuse_all(path)
    ops = fused_ops(res.model)
    for op, n in ASSET_EXPECT[name].items():
        assert ops[op] >= n, ops
    check_fused(res.model)
    v = validate(model, res.model, False)
    assert v.ok, v.to_json()


def test_backend_cnn_conv_bn_and_activation():
    path = ONNX_BACKEND_DATA / "light" / "light_resnet50.onnx"
    _model, scan, res = fuse_all(path)
    rules = collections.Counter(c.rule for c in res.applied)
    assert rules["conv_bn"] + rules["conv_activation"] == 53  # every Conv+BN pair of ResNet-50
    assert rules["conv_activation"] >= 30
    check_fused(res.model)
