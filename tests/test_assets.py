"""The committed models in assets/models: listed, loadable, runnable, shaped like their architecture."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx.reference import ReferenceEvaluator

from fuseview.graph.loader import load_document

MODELS = Path(__file__).resolve().parent.parent / "assets" / "models"
INDEX = json.loads((MODELS / "INDEX.json").read_text())
ENTRIES = INDEX["models"]
NAMES = sorted(ENTRIES)
BATCH, SEQ = 1, 8
# ReferenceEvaluator is pure Python: cross-check onnxruntime with it on the small graphs only.
REFERENCE_MAX_NODES = 1000
# the 96-layer layout graph (~20,000 nodes) takes the time of all others together: slow; the 2- and 12-layer
# GPT-2 exports keep the same checks in the fast set
BIG_NODES = 10_000
SIZED = [pytest.param(n, marks=pytest.mark.slow) if ENTRIES[n]["nodes"] > BIG_NODES else n for n in NAMES]


def _feed(entry: dict) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1234)
    feed = {}
    for spec in entry["inputs"]:
        dims = [BATCH if d == "batch" else SEQ if d == "seq" else d for d in spec["shape"]]
        assert all(isinstance(d, int) for d in dims), f"unexpected symbolic dim in {spec}"
        if spec["name"] == "input_ids":
            feed[spec["name"]] = rng.integers(0, entry["vocab_size"], size=dims).astype(spec["dtype"])
        elif spec["name"] == "attention_mask":
            feed[spec["name"]] = np.ones(dims, dtype=spec["dtype"])
        elif spec["name"] == "token_type_ids":
            t = np.zeros(dims, dtype=spec["dtype"])
            t[:, SEQ // 2 :] = 1
            feed[spec["name"]] = t
        else:
            feed[spec["name"]] = rng.standard_normal(dims).astype(spec["dtype"])
    return feed


@cache
def _ort_outputs(name: str) -> tuple[np.ndarray, ...]:
    entry = ENTRIES[name]
    sess = ort.InferenceSession(str(MODELS / entry["file"]), providers=["CPUExecutionProvider"])
    return tuple(sess.run(None, _feed(entry)))


def test_index_records_versions_and_lists_every_file() -> None:
    about = INDEX["_about"]
    for key in ("torch", "transformers", "onnx", "onnxruntime", "seed"):
        assert about.get(key) not in (None, ""), key
    on_disk = {p.name for p in MODELS.glob("*.onnx")}
    listed = {e["file"] for e in ENTRIES.values()}
    assert on_disk == listed


def test_sizes_stay_committable() -> None:
    sizes = {n: (MODELS / e["file"]).stat().st_size for n, e in ENTRIES.items()}
    assert all(s < 6_000_000 for s in sizes.values()), sizes
    assert sum(sizes.values()) < 15_000_000
    assert all(sizes[n] == ENTRIES[n]["bytes"] for n in NAMES)


@pytest.mark.parametrize("name", SIZED)
def test_loads_with_recorded_node_count_and_ops(name: str) -> None:
    entry = ENTRIES[name]
    doc = load_document(MODELS / entry["file"])
    assert len(doc.graph.nodes) == entry["nodes"]
    assert doc.op_histogram() == entry["ops"]
    assert doc.graph.inputs == [i["name"] for i in entry["inputs"]]
    assert doc.graph.outputs == [o["name"] for o in entry["outputs"]]
    assert doc.opsets.get("", doc.opsets.get("ai.onnx")) == entry["opset"]
    assert entry["ort_vs_torch_max_abs_diff"] < 1e-4


@pytest.mark.parametrize("name", SIZED)
def test_runs_in_onnxruntime_with_finite_outputs(name: str) -> None:
    entry = ENTRIES[name]
    outs = _ort_outputs(name)
    assert len(outs) == len(entry["outputs"])
    for out, spec in zip(outs, entry["outputs"], strict=True):
        want = [BATCH if d == "batch" else SEQ if d == "seq" else d for d in spec["shape"]]
        assert list(out.shape) == want, spec["name"]
        assert np.isfinite(out).all(), spec["name"]
        assert float(np.std(out)) > 0, f"{spec['name']} is constant"


# onnx's reference GatherElements (np.choose, at most 32 choices, then a fallback that mis-reshapes) fails
# on BERT/RoBERTa's buffered token-type gather over 130 positions; those exports are checked against
# torch at export time (INDEX.json ort_vs_torch_max_abs_diff) instead.
REFERENCE_BROKEN_OPS = {"GatherElements"}


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in NAMES
        if ENTRIES[n]["nodes"] <= REFERENCE_MAX_NODES and not REFERENCE_BROKEN_OPS & set(ENTRIES[n]["ops"])
    ],
)
def test_onnxruntime_agrees_with_reference_evaluator(name: str) -> None:
    entry = ENTRIES[name]
    ref = ReferenceEvaluator(onnx.load(str(MODELS / entry["file"])))
    expected = ref.run(None, _feed(entry))
    for got, want in zip(_ort_outputs(name), expected, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-3)


def _ops(name: str) -> dict[str, int]:
    return ENTRIES[name]["ops"]


def test_bert_has_embeddings_layernorm_erf_gelu_and_masked_attention() -> None:
    for name in ("bert_2l_ts17", "bert_2l_ts13"):
        ops, layers = _ops(name), ENTRIES[name]["layers"]
        assert ops["Erf"] == layers  # one erf GELU per layer
        assert ops["Softmax"] == layers
        assert ops["Gather"] >= 3  # word, position, token-type embeddings
        assert ops.get("Where", 0) + ops.get("Sub", 0) >= 1  # the padding mask
    # Embeddings + 2 per layer: 5 LayerNorms, native at 17, decomposed at 13.
    assert _ops("bert_2l_ts17")["LayerNormalization"] == 5
    ts13 = _ops("bert_2l_ts13")
    assert "LayerNormalization" not in ts13
    assert ts13["ReduceMean"] == 2 * 5 and ts13["Sqrt"] == 5 and ts13["Pow"] >= 5


def test_bert_ts13_reduce_mean_takes_axes_attribute() -> None:
    model = onnx.load(str(MODELS / ENTRIES["bert_2l_ts13"]["file"]), load_external_data=False)
    rms = [n for n in model.graph.node if n.op_type == "ReduceMean"]
    assert rms and all(any(a.name == "axes" for a in n.attribute) for n in rms)
    assert all(len(n.input) == 1 for n in rms)


def test_llama_has_rmsnorm_rotary_silu_and_causal_attention() -> None:
    for name in ("llama_2l_ts17", "llama_2l_gqa_ts17", "llama_2l_dynamo"):
        ops, layers = _ops(name), ENTRIES[name]["layers"]
        norms = 2 * layers + 1  # input + post-attention per layer, and the final norm
        assert ops["Pow"] == norms and ops["ReduceMean"] == norms and ops["Sqrt"] == norms
        assert "LayerNormalization" not in ops  # RMSNorm has no mean subtraction
        assert ops["Sin"] >= 1 and ops["Cos"] >= 1  # rotary tables
        assert ops["Neg"] == 2 * layers  # rotate_half on q and k
        assert ops["Sigmoid"] == layers  # SiLU = x * sigmoid(x)
        assert ops["Softmax"] == layers
    assert ENTRIES["llama_2l_gqa_ts17"]["kv_heads"] < ENTRIES["llama_2l_gqa_ts17"]["heads"]
    assert ENTRIES["llama_2l_dynamo"]["exporter"] == "dynamo"


def test_gpt2_96l_is_the_big_layout_graph() -> None:
    entry = ENTRIES["gpt2_96l_ts13"]
    ops, layers = entry["ops"], entry["layers"]
    assert layers == 96 and 19_000 <= entry["nodes"] <= 21_000
    assert ops["Softmax"] == layers and ops["Tanh"] == layers  # eager attention, tanh GELU
    assert ops["Gemm"] == 4 * layers  # Conv1D: c_attn, c_proj, c_fc, mlp.c_proj
    assert ops["ReduceMean"] == 2 * (2 * layers + 1)  # decomposed LayerNorm at opset 13


def test_mlps_have_their_gelu_form() -> None:
    tanh, erf = _ops("mlp_gelu_tanh_ts17"), _ops("mlp_gelu_erf_ts17")
    assert tanh["Tanh"] == 2 and "Erf" not in tanh
    assert erf["Erf"] == 2 and "Tanh" not in erf
    assert tanh["LayerNormalization"] == erf["LayerNormalization"] == 2


def test_convnet_keeps_batchnorm_unfolded() -> None:
    ops = _ops("convnet_bn_relu_ts17")
    assert ops["Conv"] == 2 and ops["BatchNormalization"] == 2 and ops["Relu"] == 2
    assert ops["MaxPool"] == 1 and ops["GlobalAveragePool"] == 1 and ops["Gemm"] == 1
