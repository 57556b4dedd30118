"""What the Session fuses for (session.fusion_target, no Qt): the scan's provider and the float16 conversion,
evented like the Profile dock's settings, on the committed exports."""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest

from fuseview.errors import FuseviewError
from fuseview.graph.loader import load_document
from fuseview.precision import precision
from fuseview.session import Session
from fuseview.session.fusion_target import FusionSettings, label
from fuseview.tuning.settings import TuneSettings

from .conftest import ASSET_MODELS
from .test_session import record, wait_for

LLAMA = ASSET_MODELS / "current" / "llama_2l_sdpa_past_ts17.onnx"
GPT2 = ASSET_MODELS / "current" / "gpt2_2l_sdpa_ts17.onnx"
MLP = ASSET_MODELS / "mlp_gelu_tanh_ts17.onnx"


def opened(path) -> tuple[Session, list[str]]:
    s = Session()
    seen = record(s)
    wait_for(s.open(path))
    return s, seen


def test_settings_check_and_resolve_the_provider():
    assert FusionSettings().scan_provider() is None  # any: the kernel table filters nothing
    assert FusionSettings("cuda").scan_provider() == "cuda"
    has_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    assert FusionSettings("auto").scan_provider() == ("cuda" if has_cuda else "cpu")
    with pytest.raises(FuseviewError, match="provider 'tpu'"):
        Session().set_fusion_settings(provider="tpu")


def test_another_provider_rescans_and_keeps_the_decisions_of_the_candidates_it_still_has():
    s, seen = opened(LLAMA)
    wait_for(s.start_scan())
    gqa = [c for c in s.scan.candidates if c.fused_op == "GroupQueryAttention"]
    other = next(c for c in s.scan.candidates if c.fused_op != "GroupQueryAttention" and not c.conflicts)
    assert gqa and s.scan_for is None
    s.accept(gqa[0].id)
    s.accept(other.id)
    seen.clear()
    job = s.set_fusion_settings(provider="cuda")
    wait_for(job)
    assert seen[0] == "fusion_settings" and "scanned" in seen and s.scan_for == "cuda"
    assert not [c for c in s.scan.candidates if c.fused_op == "GroupQueryAttention"]
    misses = [m.reason for m in s.scan.near_misses if "GroupQueryAttention kernel on CUDA" in m.reason]
    assert misses and "MultiHeadAttention with repeated KV (fp32)" in misses[0]
    assert s.decisions.accepted() == [other.id]  # the GQA decision went with its candidate
    assert s.set_fusion_settings(provider="cuda") is None  # unchanged: no event, no rescan
    assert seen.count("fusion_settings") == 1


def test_float16_shows_the_conversion_and_apply_judges_it_at_float16_tolerances(tmp_path):
    s, seen = opened(GPT2)
    original = s.root
    s.set_dims({"sequence": 16})
    seen.clear()
    wait_for(s.set_fusion_settings(float16=True))
    assert seen[:2] == ["fusion_settings", "document"]
    assert s.converted_from is original and s.root is not original and s.root.path is None
    assert precision(s.root.model) == "float16" and precision(original.model) == "float32"
    assert "Cast" in s.root.op_histogram()  # the graph on show is the one fused: the converter's Casts
    assert s.dims == {"sequence": 16}  # the conversion keeps the inputs
    assert s.source_path() == GPT2.resolve() and label(s) == f"{GPT2.name} (float16 conversion)"
    wait_for(s.start_scan())
    assert s.scan.candidates
    s.accept_all()
    wait_for(s.apply())
    v, rep = s.fused.validation, s.fused.report
    assert v is not None and v.ok and v.precision == "float16" and (v.atol, v.rtol) == (1e-2, 1e-2)
    assert "at float16 tolerances" in s.fused.validation_text()
    assert rep.floor and rep.floor.startswith("float16 original vs the float32 original")
    out = s.save_fused(tmp_path / "fp16.fused.onnx")
    saved = onnx.load(out)
    assert precision(saved) == "float16" and len(saved.graph.node) < len(s.root.model.graph.node)
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    with pytest.raises(FuseviewError, match="source model"):  # the float32 file is still the source
        s.save_fused(GPT2)
    wait_for(s.set_fusion_settings(float16=False))
    assert s.root is original and s.converted_from is None and s.dims == {"sequence": 16}


def test_a_model_opened_with_float16_on_is_converted_and_a_float16_model_is_shown_as_it_is(tmp_path):
    s = Session()
    s.set_fusion_settings(float16=True)  # nothing open: nothing to convert
    assert s.root is None
    wait_for(s.open(MLP))
    assert s.converted_from is not None and precision(s.root.model) == "float16"
    fp16 = tmp_path / "mlp_fp16.onnx"
    onnx.save(s.root.model, fp16)
    wait_for(s.open(fp16))
    assert s.converted_from is None and s.root.path == fp16  # float16 already: fused as it is
    assert s.set_fusion_settings(float16=False) is None and s.root.path == fp16


def test_switching_back_before_the_conversion_is_shown_keeps_the_float32_model():
    s, _seen = opened(GPT2)
    job = s.set_fusion_settings(float16=True)
    s.set_fusion_settings(float16=False)  # switched back before the conversion was shown
    wait_for(job)
    assert s.converted_from is None and s.root.path == GPT2


@pytest.mark.slow
def test_the_conversion_on_show_is_tuned_as_tune_float16_and_its_decisions_set_by_id():
    s, _seen = opened(MLP)
    wait_for(s.set_fusion_settings(provider="cpu", float16=True))  # the provider tune measures on
    wait_for(s.start_scan())
    ids = {c.id for c in s.scan.candidates}
    assert ids and s.scan_for == "cpu"
    tuned = []
    s.events.tuned.connect(lambda e: tuned.append(e.result))
    settings = TuneSettings(provider="cpu", threads=1, runs=5, sessions=2, max_batches=1, warmup=1, seeds=1,
                            ort_optimizer="off", budget_s=8)
    wait_for(s.tune(settings))
    rep = tuned[0].report
    assert rep.config["float16"] is True and precision(tuned[0].original) == "float16"
    assert {d.candidate for d in rep.decisions} == ids  # the same conversion: the same candidate ids
    decided = {d.candidate: d.decision for d in rep.decisions}
    assert {cid: s.decisions.plan.decisions.get(cid) for cid in ids} == decided


def test_the_provider_attribute_is_the_settings_provider():
    s = Session()
    doc = load_document(MLP)
    s.adopt(doc, s.initial_expansion(doc))
    s.provider = "cpu"  # the old attribute is the settings' provider
    assert s.fusion_settings.provider == "cpu" and s.provider == "cpu"
    s.provider = None
    assert s.fusion_settings.provider == "any" and s.provider is None


@pytest.mark.slow
def test_the_profile_of_the_conversion_on_show_is_float16_and_judged_at_its_tolerances():
    s, _seen = opened(GPT2)
    wait_for(s.set_fusion_settings(float16=True))
    wait_for(s.start_scan())
    s.accept_all()
    wait_for(s.apply({"sequence": 8}))
    s.set_profile_settings(provider="cpu", runs=3, warmup=1, threads=1, sessions=2)
    wait_for(s.profile(s.profile_settings.request(s.root.model, s.fused.model, {"sequence": 8})))
    rep = s.profile_report
    assert rep is not None and [m["precision"] for m in rep["models"]] == ["float16", "float16"]
    cmp = rep["comparison"]
    assert cmp["precision"] == "float16" and (cmp["atol"], cmp["rtol"]) == (1e-2, 1e-2) and cmp["passed"]
    assert cmp["placement_flag"] is None  # both wholly on the CPU EP: nothing moved
