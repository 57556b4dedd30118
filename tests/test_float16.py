"""float16 models as GPUs run them: the rules fuse the float16 conversions of the committed exports (made
here, by onnxruntime's own converter with the I/O types kept), `fuse/scan/tune --float16` convert before
scanning, the output check of a float16 model uses float16's tolerances (fusion.pipeline.TOLERANCES) against
the float16 original, with the conversion's own difference from the float32 original beside it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import fuseview
from fuseview.cli import main
from fuseview.fusion.float16 import to_float16
from fuseview.fusion.pipeline import TOLERANCES, _judged_by_floor, scan_for_fusion, tolerances
from fuseview.fusion.validate import OutputDiff, Validation

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "assets" / "models"
LLAMA = MODELS / "current" / "llama_2l_sdpa_past_ts17.onnx"
# the rules each family's float32 export gets, which its float16 conversion must get too
FAMILIES = {
    "bert": (MODELS / "bert_2l_ts17.onnx", {"attention_mha", "attention_packed", "skip_layer_norm_bias",
                                            "embed_layer_norm", "gelu_erf", "bias_gelu_erf"}),
    "gpt2": (MODELS / "current" / "gpt2_2l_sdpa_ts17.onnx", {"attention_mha", "attention_packed",
                                                             "skip_layer_norm_bias", "bias_fast_gelu"}),
    "llama": (LLAMA, {"attention_gqa_rotary", "attention_gqa_rotary_qkv", "attention_mha", "skip_rms_norm",
                      "rms_norm", "quick_gelu"}),
    "mlp_erf": (MODELS / "mlp_gelu_erf_ts17.onnx", {"bias_gelu_erf"}),
    "mlp_tanh": (MODELS / "mlp_gelu_tanh_ts17.onnx", {"bias_fast_gelu"}),
}


@pytest.fixture(scope="module")
def fp16(tmp_path_factory) -> dict[str, Path]:
    """The float16 conversions (fuse --float16's own) of the committed models, and of each with the
    Softmax kept in float32 between Casts (softmax(dtype=float32) as eager transformers writes it)."""
    folder = tmp_path_factory.mktemp("fp16")
    made = {}
    for name, (path, _rules) in FAMILIES.items():
        model = onnx.load(path)
        for tag, keep in (("", ()), ("_f32softmax", ("Softmax",))):
            out = folder / f"{name}{tag}.onnx"
            onnx.save(to_float16(model, path.parent, keep), out)
            made[name + tag] = out
    return made


def _rules(path: Path, provider: str | None) -> set[str]:
    return {c.rule for c in scan_for_fusion(onnx.load(path), {}, path, provider).candidates}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("tag", ["", "_f32softmax"])
def test_each_family_fuses_in_float16_as_in_float32(fp16, family, tag):
    path, wanted = FAMILIES[family]
    assert wanted <= _rules(path, None)  # the float32 export itself
    got = _rules(fp16[family + tag], None)  # no provider: every float type offered
    assert wanted <= got, f"{family}{tag}: float16 lacks {sorted(wanted - got)}"


OTHERS = ["current/t5_2l_sdpa_ts17", "current/llama_2l_sdpa_dynamo", "current/gpt2_2l_sdpa_dynamo",
          "current/bert_2l_sdpa_dynamo", "decoders/gemma_2l_sdpa_ts17", "families/yolo_silu_ts17",
          "vit_2l_dynamo18"]


@pytest.mark.parametrize("name", OTHERS)
def test_other_exports_get_the_same_rules_in_float16(name):
    path = MODELS / f"{name}.onnx"
    model = onnx.load(path)
    fp32 = {c.rule for c in scan_for_fusion(model, {}, path, None).candidates}
    half = {c.rule for c in scan_for_fusion(to_float16(model), {}, path, None).candidates}
    assert fp32 and half == fp32


def test_attention_with_its_softmax_in_float32_validates_in_float16(fp16):
    outcome = fuseview.fuse(fp16["bert_f32softmax"], provider="cuda")
    rules = {c.rule for c in outcome.result.applied}
    assert {"attention_packed", "skip_layer_norm_bias", "embed_layer_norm"} <= rules
    assert outcome.validation is not None and outcome.validation.ok
    assert not any(n.op_type == "Softmax" for n in outcome.model.graph.node)


def test_float16_gelu_constants_are_matched_within_their_rounding_only(fp16):
    model = onnx.load(fp16["mlp_erf"])
    consts = {n.output[0]: n for n in model.graph.node if n.op_type == "Constant"}
    sqrt2 = [t for t, n in consts.items()
             if abs(float(onnx.numpy_helper.to_array(n.attribute[0].t)) - 1.4142) < 1e-3]
    value = float(onnx.numpy_helper.to_array(consts[sqrt2[0]].attribute[0].t))
    assert sqrt2 and abs(value - np.sqrt(2)) > 1e-4  # float16's 1.41406, beyond the float32 tolerance
    assert "bias_gelu_erf" in _rules(fp16["mlp_erf"], None)
    # a constant off by more than float16's rounding step is no GELU
    for t in sqrt2:
        consts[t].attribute[0].t.CopyFrom(onnx.numpy_helper.from_array(np.array(1.43, np.float16)))
    path = fp16["mlp_erf"].with_name("mlp_erf_wrong.onnx")
    onnx.save(model, path)
    scan = scan_for_fusion(onnx.load(path), {}, path, None)
    assert not {"bias_gelu_erf", "gelu_erf"} & {c.rule for c in scan.candidates}
    assert any("= 1.42969, expected 1.41421" in m.reason for m in scan.near_misses if "gelu_erf" in m.rule)


def test_llama_offers_group_query_attention_on_cuda_only_in_float16(fp16):
    fp32 = scan_for_fusion(onnx.load(LLAMA), {}, LLAMA, "cuda")
    assert not any(c.fused_op == "GroupQueryAttention" for c in fp32.candidates)
    assert any("convert the model to fp16" in m.reason for m in fp32.near_misses)
    half = scan_for_fusion(onnx.load(fp16["llama"]), {}, fp16["llama"], "cuda")
    gqa = [c for c in half.candidates if c.fused_op == "GroupQueryAttention"]
    assert {c.rule for c in gqa} >= {"attention_gqa_rotary", "attention_gqa_rotary_qkv"}
    # the CPU EP has no float16 MultiHeadAttention kernel: a near miss there, naming the dtype
    cpu = scan_for_fusion(onnx.load(fp16["bert"]), {}, fp16["bert"], "cpu")
    assert "attention_mha" not in {c.rule for c in cpu.candidates}
    assert any("no float16 MultiHeadAttention kernel on CPU" in m.reason for m in cpu.near_misses)


def test_fuse_float16_writes_a_validated_float16_model_with_gqa(tmp_path, capsys):
    out = tmp_path / "llama16.onnx"
    assert main(["fuse", str(LLAMA), "--float16", "--provider", "cuda", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "attention_gqa_rotary_qkv -> com.microsoft:GroupQueryAttention" in text
    assert "validated on onnxruntime at float16 tolerances" in text
    assert "atol 0.01, rtol 0.01 (float16 tolerances)" in text
    assert "float16 original vs the float32 original (its own noise floor): max |diff|" in text
    assert "float16 on the CPU EP" in text  # what the CPU check does and does not prove
    model = onnx.load(out)
    source = onnx.load(LLAMA)
    assert [(i.name, i.type.tensor_type.elem_type) for i in model.graph.input] == \
        [(i.name, i.type.tensor_type.elem_type) for i in source.graph.input]  # I/O types kept
    assert {o.type.tensor_type.elem_type for o in model.graph.output} == {TensorProto.FLOAT}
    assert any(n.op_type == "GroupQueryAttention" for n in model.graph.node)
    assert {t.data_type for t in model.graph.initializer if t.data_type in (1, 10) and len(t.dims) == 2} \
        == {TensorProto.FLOAT16}
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])  # it loads as written


def test_float16_is_judged_at_its_own_tolerances_which_can_fail(fp16, tmp_path, capsys):
    path = fp16["gpt2"]
    kind, atol, rtol = tolerances(onnx.load(path))
    assert (kind, (atol, rtol)) == ("float16", TOLERANCES["float16"])
    assert tolerances(onnx.load(FAMILIES["gpt2"][0]))[0] == "float32"
    outcome = fuseview.fuse(path, provider="cuda")  # a float16 file, no --float16: its precision's
    v = outcome.validation
    assert v is not None and v.ok and (v.atol, v.rtol, v.precision) == (*TOLERANCES["float16"], "float16")
    assert outcome.floor is None  # no float32 original to measure the conversion against
    assert v.max_abs > 1e-6  # float16 rewrites are not bit-exact: a float32 atol of 1e-7 refuses them
    out = tmp_path / "f.onnx"
    argv = ["fuse", str(path), "--provider", "cuda", "--atol", "1e-7", "--rtol", "0", "-o", str(out)]
    assert main(argv) == 2
    assert "beyond tolerance" in capsys.readouterr().err and not out.exists()


def test_api_fuse_float16_measures_the_conversion_beside():
    outcome = fuseview.fuse(FAMILIES["mlp_tanh"][0], float16=True, provider="cuda")
    v, floor = outcome.validation, outcome.floor
    assert v is not None and floor is not None and v.precision == floor.precision == "float16"
    assert floor.max_abs > 0  # the float16 original differs from the float32 one by itself
    assert "noise floor" in (outcome.floor_line() or "")
    with pytest.raises(TypeError, match="--float16"):
        fuseview.fuse(FAMILIES["mlp_tanh"][0], float16="yes")


def test_fuse_float16_of_a_float16_model_is_refused(fp16, tmp_path, capsys):
    assert main(["fuse", str(fp16["mlp_erf"]), "--float16", "-o", str(tmp_path / "x.onnx")]) == 2
    assert "float16 already" in capsys.readouterr().err


def test_scan_float16_lists_the_conversions_candidates(capsys):
    assert main(["scan", str(LLAMA), "--float16", "--provider", "cuda", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    ops = {c["fused_op"] for c in report["candidates"]}
    assert "GroupQueryAttention" in ops


def _wrapped_rms(out_type: int, residual: bool) -> onnx.ModelProto:
    """transformers' RMSNorm of a float16 model: x.float(), x * rsqrt(mean(x^2) + eps), .to(float16) * w
    (out_type: the type the result is cast back to), after a residual Add when asked."""
    x = "sum" if residual else "x"
    nodes = ([helper.make_node("Add", ["x", "r"], ["sum"])] if residual else []) + [
        helper.make_node("Cast", [x], ["x32"], to=TensorProto.FLOAT),
        helper.make_node("Pow", ["x32", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1], keepdims=1),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["std"]),
        helper.make_node("Div", ["one", "std"], ["inv"]),
        helper.make_node("Mul", ["x32", "inv"], ["normed"]),
        helper.make_node("Cast", ["normed"], ["n16"], to=out_type),
        helper.make_node("Mul", ["w", "n16"], ["y"]),
    ]
    wtype = np.float16 if out_type == TensorProto.FLOAT16 else np.float32
    inits = [onnx.numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             onnx.numpy_helper.from_array(np.array(1e-6, np.float32), "eps"),
             onnx.numpy_helper.from_array(np.array(1.0, np.float32), "one"),
             onnx.numpy_helper.from_array(np.linspace(0.5, 1.5, 64).astype(wtype), "w")]
    names = ("x", "r")[:1 + residual]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT16, [1, 8, 64]) for n in names]
    g = helper.make_graph(nodes, "rms", io, [helper.make_tensor_value_info("y", out_type, [1, 8, 64])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("residual", [False, True])
def test_rms_norm_computed_in_float32_between_casts_is_fused_in_float16(tmp_path, residual):
    path = tmp_path / "rms.onnx"
    onnx.save(_wrapped_rms(TensorProto.FLOAT16, residual), path)
    scan = scan_for_fusion(onnx.load(path), {}, path, "cuda")
    rule = "skip_rms_norm" if residual else "rms_norm"
    (cand,) = [c for c in scan.candidates if c.rule == rule]
    assert len(cand.nodes) == 9 + residual  # both Casts inside
    outcome = fuseview.fuse(path, accept=[cand.id])
    v = outcome.validation
    assert v is not None and v.ok and v.precision == "float16"
    (node,) = [n for n in outcome.model.graph.node if n.op_type != "Constant"]
    assert "Simplified" in node.op_type and node.input[0] == "x"  # the float16 input, no Cast left


def test_a_norm_that_changes_the_type_keeps_its_input_cast(tmp_path):
    path = tmp_path / "rms32.onnx"
    onnx.save(_wrapped_rms(TensorProto.FLOAT, False), path)  # float16 in, float32 out
    scan = scan_for_fusion(onnx.load(path), {}, path, None)
    (cand,) = [c for c in scan.candidates if c.rule == "rms_norm"]
    assert len(cand.nodes) == 8  # the float32 norm of the Cast's output: the Cast to float32 stays
    outcome = fuseview.fuse(path, accept=[cand.id])
    assert outcome.validation is not None and outcome.validation.ok
    assert [n.op_type for n in outcome.model.graph.node if n.op_type != "Constant"][0] == "Cast"


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_tune_float16_tunes_the_conversion_at_float16_tolerances(tmp_path):
    res = fuseview.tune(FAMILIES["mlp_tanh"][0], float16=True, provider="cpu", budget=8, runs=5, sessions=2,
                        ort_optimizer="off")
    config = res.report.config
    assert config["float16"] is True and (config["atol"], config["rtol"]) == TOLERANCES["float16"]
    out = res.save_model(tmp_path / "t.onnx")
    model = onnx.load(out)
    assert any(t.data_type == TensorProto.FLOAT16 for t in model.graph.initializer)
    assert model.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    plain = fuseview.tune(FAMILIES["mlp_tanh"][0], provider="cpu", budget=5, runs=5, sessions=2,
                          ort_optimizer="off")
    assert (plain.report.config["atol"], plain.report.config["rtol"]) == TOLERANCES["float32"]


def test_a_float16_model_the_cpu_cannot_run_is_written_unvalidated_and_says_so(tmp_path, capsys):
    # BiasSplitGelu has a CUDA kernel only: the CPU EP cannot run this (valid) float16 model at all
    nodes = [helper.make_node("Add", ["x", "c"], ["s"]),
             helper.make_node("BiasSplitGelu", ["s", "b"], ["y"], domain="com.microsoft")]
    inits = [onnx.numpy_helper.from_array(np.ones(8, np.float16), n) for n in ("c", "b")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 4, 4])], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = 8
    path, out = tmp_path / "cuda_only.onnx", tmp_path / "out.onnx"
    onnx.save(m, path)
    assert main(["fuse", str(path), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    lines = [ln for ln in text.splitlines() if "does not run on onnxruntime's CPU EP" in ln]
    assert len(lines) == 1 and "BiasSplitGelu" in lines[0] and "set the input dims" not in lines[0]
    assert "validated on" not in text and "validate " not in text and out.is_file()


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_sweep_float16_resumes_only_a_float16_item(tmp_path, capsys):
    import shutil

    model = tmp_path / "mlp.onnx"
    shutil.copy(FAMILIES["mlp_tanh"][0], model)
    out = tmp_path / "s"
    argv = ["sweep", str(model), "-o", str(out), "--budget", "6", "--runs", "4", "--sessions", "2",
            "--threads", "1", "--quiet", "--ort-opt", "all"]

    def status() -> str:
        return json.loads((out / "sweep.json").read_text())["items"][0]["status"]

    assert main([*argv, "--float16"]) == 0 and status() == "tuned"
    report = json.loads((out / "mlp.tune.json").read_text())
    assert report["config"]["float16"] is True and report["config"]["atol"] == TOLERANCES["float16"][0]
    assert main([*argv, "--float16"]) == 0 and status() == "done before"
    assert main(argv) == 0 and status() == "tuned"  # a float32 sweep does not take the float16 report
    capsys.readouterr()


def _validation(max_abs: float, ok: bool) -> Validation:
    return Validation("onnxruntime", [OutputDiff("logits", max_abs, max_abs, ok)], atol=1e-2, rtol=1e-2,
                      precision="float16")


def test_a_float16_output_past_tolerance_passes_only_within_twice_the_conversions_own_floor():
    # the float16 original sits 0.019 from the float32 one; two float16 models may sit on either side of it
    floor = _validation(0.019, False)
    near = _validation(0.024, False)
    notes = _judged_by_floor(near, floor, _validation(0.03, False), atol=1e-2)
    assert near.ok and len(notes) == 1 and "within its noise floor" in notes[0]
    far = _validation(0.024, False)
    assert _judged_by_floor(far, floor, _validation(0.2, False), atol=1e-2) == [] and not far.ok


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_profile_against_a_float16_fusion_compares_at_float16_tolerances(fp16, tmp_path, capsys):
    fused = tmp_path / "gpt2_16_fused.onnx"
    assert main(["fuse", str(fp16["gpt2"]), "--provider", "cuda", "-o", str(fused)]) == 0  # not bit-exact
    capsys.readouterr()
    argv = ["profile", str(fp16["gpt2"]), "--against", str(fused), "--runs", "2", "--warmup", "1",
            "--threads", "1", "--quiet", "--dim", "sequence=16"]
    assert main(argv) == 0  # float32's 1e-4 would call this valid float16 fusion broken (exit 3)
    out = capsys.readouterr().out
    assert "atol 0.01, rtol 0.01, a float16 model): PASS" in out
    assert main([*argv, "--atol", "1e-7", "--rtol", "0"]) == 3  # the check can still fail: asked tighter
