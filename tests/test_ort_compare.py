"""ort_does_it: per candidate, whether onnxruntime's own optimizer makes the same fusion (real sessions)."""

from __future__ import annotations

import collections
import json

import onnx

from fuseview.cli import main
from fuseview.fusion.ort_compare import compare_with_ort, ort_optimized
from fuseview.fusion.scan import scan_file

from .conftest import ASSET_MODELS, GPT2_MODELS


def test_scan_json_has_ort_does_it_from_a_real_session(capsys):
    path = GPT2_MODELS / "gpt2_2l_ts17.onnx"
    # a 4-token prompt: below 8 rows SkipLayerNormalization is offered on CPU too (fusion.kernels.SLOWER)
    assert main(["scan", str(path), "--json", "--ort-check", "all", "--dim", "seq=4"]) == 0
    js = json.loads(capsys.readouterr().out)
    verdicts = {c["rule"]: set() for c in js["candidates"]}
    for c in js["candidates"]:
        verdicts[c["rule"]].add(c["ort_does_it"])
    # checked against onnxruntime's saved optimized graph: it makes FastGelu and FusedMatMul itself ...
    optimized, _ = ort_optimized(path, "all")
    ort_ops = collections.Counter(n.op_type for n in optimized.graph.node)
    assert ort_ops["FastGelu"] == 2 and verdicts["bias_fast_gelu"] == {True}
    assert ort_ops["FusedMatMul"] == 2 and verdicts["fused_matmul"] == {True}
    # ... but neither attention nor SkipLayerNormalization on this export
    assert ort_ops["MultiHeadAttention"] + ort_ops["Attention"] == 0 and verdicts["attention_mha"] == {False}
    assert ort_ops["SkipLayerNormalization"] == 0 and verdicts["skip_layer_norm_bias"] == {False}
    assert js["ort_check"]["opt_level"] == "all" and isinstance(js["ort_check"]["ort_only"], list)
    # computed Reshape targets: onnxruntime folds the per-layer ones only when it can, never all of them
    assert False in verdicts["shape_chain"] and None not in verdicts["shape_chain"]


def test_without_the_flag_the_field_is_null(capsys):
    assert main(["scan", str(GPT2_MODELS / "gpt2_2l_ts17.onnx"), "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["candidates"] and all(c["ort_does_it"] is None for c in js["candidates"])


def test_basic_level_makes_no_transformer_fusion():
    path = GPT2_MODELS / "gpt2_2l_ts17.onnx"
    result = scan_file(path)
    cmp = compare_with_ort(path, result.candidates, "basic")
    by_rule = {c.rule: cmp.does_it[c.id] for c in result.candidates}
    assert by_rule["bias_fast_gelu"] is False and by_rule["attention_mha"] is False


def test_ort_only_fusions_are_listed():
    path = ASSET_MODELS / "bert_2l_ts17.onnx"
    optimized, _ = ort_optimized(path, "extended")
    created = collections.Counter(n.op_type for n in optimized.graph.node if n.domain == "com.microsoft")
    # with no candidates every fusion onnxruntime makes is one fuseview "lacks"
    alone = compare_with_ort(path, [], "extended", optimized=optimized)
    assert collections.Counter(f["op"].split(":")[-1] for f in alone.ort_only) == created
    # with fuseview's candidates only the pooler's Gemm+Tanh (FusedGemm) is left: no rule makes it
    result = scan_file(path)
    cmp = compare_with_ort(path, result.candidates, "extended", optimized=optimized)
    assert [f["op"] for f in cmp.ort_only] == ["com.microsoft:FusedGemm"]
    assert "pooler" in cmp.ort_only[0]["node"]
    assert onnx.load(str(path), load_external_data=False).graph.node
