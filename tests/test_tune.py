"""`fuseview tune`: real onnxruntime timings decide; a slower fusion is rejected, a wrong one is found by
bisection, the saved plan re-applies to the same bytes, and a cancelled tune keeps a valid best-so-far."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from fuseview.cli import main
from fuseview.errors import FuseviewError
from fuseview.fusion.rule import MS_DOMAIN, Replacement, Rule
from fuseview.fusion.rules import catalogue
from fuseview.reports.tune import TuneReport
from fuseview.stats import verdict
from fuseview.tuning.settings import TuneSettings
from fuseview.workflows.tune import tune

from .conftest import ASSET_MODELS, ROOT

MLP = ASSET_MODELS / "mlp_gelu_erf_ts17.onnx"
CONV = ASSET_MODELS / "convnet_bn_relu_ts17.onnx"
# one intra-op thread: on a machine whose cores are shared, a thread pool makes runs bimodal
FAST = dict(runs=15, sessions=3, max_batches=2, warmup=2, seeds=1, ort_optimizer="off", threads=1)


_NUM = r"(\d+(?:\.\d+)?(?:e-?\d+)?)"
_QUOTED = re.compile(rf"{_NUM}x \[{_NUM}, {_NUM}\] (faster|slower|no difference|cannot tell)")


def assert_reasons_agree_with_their_figures(rep: TuneReport) -> None:
    """Every interval a reason quotes carries stats.verdict's word for it; no reason says faster or
    slower unless an interval it quotes (excluding 1) says so; the final verdict is never null."""
    threshold = rep.config["threshold"]
    texts = [d.reason for d in rep.decisions] + [g.reason for g in rep.groups] + [rep.final.reason]
    for text in texts:
        quoted = _QUOTED.findall(text)
        for _ratio, lo, hi, word in quoted:
            assert verdict(float(lo), float(hi), threshold) == word, text
            if word == "faster":
                assert float(lo) > 1, text
            if word == "slower":
                assert float(hi) < 1, text
        for word in ("faster", "slower"):
            if re.search(rf"\b{word}\b", text):
                assert any(q[3] == word for q in quoted), text
    assert rep.to_json()["final"]["verdict"] in ("faster", "slower", "no difference", "cannot tell")
    from tests.test_tune_texts import assert_tune_text_reads_once

    if "dims" in rep.config:  # a whole report (not a hand-made reason check): issue 37.4, its CLI summary
        assert_tune_text_reads_once(rep)


def assert_the_decision_rule_holds(rep: TuneReport) -> None:
    """A subset ships only when faster than both; the original only when accept-all is measured slower."""
    f = rep.final
    if f.chosen == "tuned":
        assert f.against_original.verdict == "faster" and f.against_accept_all.verdict == "faster"
    if f.chosen == "original" and f.against_accept_all is not None:
        assert f.against_accept_all.verdict == "faster", f.reason  # the original over accept-all
    if f.chosen == "accept_all" and f.against_original.verdict != "faster":
        assert "by default" in f.reason and "fusion removes work" in f.reason


def _rule(name: str) -> Rule:
    return next(r for r in catalogue() if r.name == name)


def _detour_replace(m, repeats: int = 4) -> list[Replacement]:
    """Gelu, then MatMuls by the identity: the same values, several wide matrix products more to compute
    (each about twice the model's own work at these widths), so the slowdown shows on a loaded machine."""
    width = int(m.shape("x")[-1])
    out = m.outputs[0]
    eye = f"{out}_identity"
    steps = [f"{out}_gelu"] + [f"{out}_eye{i}" for i in range(1, repeats)] + [out]
    reps = [Replacement([m["x"]], op="Gelu", domain=MS_DOMAIN, outputs=[steps[0]],
                        initializers={eye: np.eye(width, dtype=np.float32)})]
    reps += [Replacement([a, eye], op="MatMul", domain="", outputs=[b])
             for a, b in zip(steps, steps[1:], strict=False)]
    return reps


def slow_gelu_rule() -> Rule:
    """erf-GELU -> Gelu followed by an identity MatMul: a real "fusion" that is genuinely slower."""
    g = _rule("gelu_erf")
    return Rule(name="gelu_detour", description="erf-GELU -> Gelu + identity MatMul (slower on purpose)",
                fused_op="Gelu", domain=MS_DOMAIN, runs_on=("cpu",), patterns=g.patterns, check=g.check,
                replace=_detour_replace)


def tanh_gelu_rule() -> Rule:
    """erf-GELU -> FastGelu (the tanh approximation): off by up to ~1e-3, a real numeric error."""
    g = _rule("gelu_erf")
    return Rule(name="gelu_as_tanh", description="erf-GELU -> FastGelu (an approximation)",
                fused_op="FastGelu", domain=MS_DOMAIN, runs_on=("cpu",), patterns=g.patterns, check=g.check,
                replace=lambda m: Replacement([m["x"]]))


@pytest.mark.slow  # a real tune: its final check measures until it decides or the budget ends
def test_a_slower_fusion_is_rejected_and_the_original_kept():
    res = tune(MLP, TuneSettings(budget_s=60, **{**FAST, "max_batches": 3}), rules=[slow_gelu_rule()])
    rep = res.report
    assert len(rep.decisions) == 2 and all(d.rule == "gelu_detour" for d in rep.decisions)
    assert all(d.decision == "reject" for d in rep.decisions)
    (group,) = rep.groups
    assert group.effect is not None and group.effect.verdict == "slower", group.reason
    assert group.effect.speedup_p50 < 0.7  # time without / time with: well below 1
    assert rep.final.chosen == "original" and res.unchanged and res.plan.accepted() == []
    assert rep.baseline["accept_all"]["effect"]["verdict"] == "slower"
    assert_reasons_agree_with_their_figures(rep)
    assert_the_decision_rule_holds(rep)


def _identity_check(m) -> str | None:
    w = m.value("w")
    if w is None or w.ndim != 2 or w.shape[0] != w.shape[1] or not np.array_equal(w, np.eye(len(w))):
        return "not an identity matrix"
    return None


def drop_identity_rule() -> Rule:
    """MatMul by an identity matrix -> Identity: the same values without the matrix product (much faster)."""
    return Rule(name="drop_identity_matmul", description="MatMul(x, I) -> x", fused_op="Identity", domain="",
                runs_on=("cpu",), patterns=(lambda op, x: op.MatMul(x, op.constant("w")),),
                check=_identity_check, replace=lambda m: Replacement([m["x"]]))


@pytest.mark.slow  # a real tune: its final check measures until it decides or the budget ends
def test_when_accept_all_is_faster_tune_starts_from_it_and_keeps_what_helps(tmp_path):
    # a model with real waste in it: the detour GELUs of the slower rule, written out as a model
    from fuseview.fusion.apply import apply_candidates
    from fuseview.fusion.scan import scan_model

    base = onnx.load(str(MLP))
    scan = scan_model(base, {}, [slow_gelu_rule()])
    wasteful = tmp_path / "wasteful.onnx"
    onnx.save(apply_candidates(base, scan, [c.id for c in scan.candidates]).model, wasteful)
    res = tune(wasteful, TuneSettings(budget_s=90, **FAST), rules=[drop_identity_rule(), *catalogue()])
    rep = res.report
    assert rep.baseline["accept_all"]["effect"]["verdict"] == "faster"
    drops = [d for d in rep.decisions if d.rule == "drop_identity_matmul"]
    assert len(drops) == 8 and all(d.decision == "accept" for d in drops), [d.reason for d in drops]
    assert all("accept-all" in d.reason for d in drops)
    (group,) = [g for g in rep.groups if g.rule == "drop_identity_matmul"]
    assert group.outcome == "accept" and group.effect.verdict == "faster" and group.effect.speedup_p50 > 1.5
    # a subset ships only when measured faster than accept-all too; here accept-all holds the big win
    assert rep.final.chosen in ("tuned", "accept_all") and rep.final.against_original.verdict == "faster"
    assert_reasons_agree_with_their_figures(rep)
    assert_the_decision_rule_holds(rep)


@pytest.mark.slow  # a real tune: its final check measures until it decides or the budget ends
def test_bisection_finds_the_fusions_that_break_the_tolerance():
    # the catalogue's own GELU rules (and FusedMatMul, which would take the same nodes first) make way
    # for the approximating rule, so accept-all holds its two candidates beside the exact LayerNorm ones
    skip = ("gelu_erf", "bias_gelu_erf", "fused_matmul")
    rules = [r for r in catalogue() if r.name not in skip] + [tanh_gelu_rule()]
    settings = TuneSettings(budget_s=30, atol=1e-5, rtol=1e-4, **FAST)  # bisection comes before timings
    res = tune(MLP, settings, rules=rules)
    rep = res.report
    wrong = {d.candidate for d in rep.decisions if d.rule == "gelu_as_tanh"}
    assert len(wrong) == 2
    assert set(rep.baseline["over_tolerance"]) == wrong
    assert rep.baseline["accept_all"]["accepted"] == len(rep.decisions) - 2 - 2  # minus the conflicting
    for d in rep.decisions:
        if d.candidate in wrong:
            assert d.decision == "reject" and d.stage == "accuracy" and d.reason.startswith("accuracy: over")
            assert d.max_abs is not None and d.max_abs > 1e-5
        else:
            assert d.stage != "accuracy", d
    assert any("bisection found 2 candidate(s)" in n for n in rep.notes)
    # the accepted set, whatever the timings chose, is within the tight tolerance
    if res.outcome is not None:
        assert res.outcome.validation is not None and res.outcome.validation.ok
    assert_reasons_agree_with_their_figures(rep)
    assert_the_decision_rule_holds(rep)


@pytest.mark.slow  # a real tune: its final check measures until it decides or the budget ends
def test_saved_plan_reapplies_to_the_same_model_bytes(tmp_path, capsys):
    out, plan, report = tmp_path / "tuned.onnx", tmp_path / "plan.json", tmp_path / "tune.json"
    rc = main(["tune", str(CONV), "-o", str(out), "--budget", "15", "--runs", "8", "--sessions", "2",
               "--keep-neutral", "--threads", "1", "--save-plan", str(plan), "--json", str(report),
               "--quiet"])
    assert rc == 0, capsys.readouterr()
    rep = TuneReport.load(report)
    assert rep.output == str(out) and rep.plan == str(plan)
    saved = json.loads(plan.read_text())
    assert {d["id"] for d in saved["decisions"]} == {d.candidate for d in rep.decisions}
    refused = tmp_path / "fused.onnx"
    assert main(["fuse", str(CONV), "--plan", str(plan), "-o", str(refused)]) == 0
    assert out.read_bytes() == refused.read_bytes()
    accepted = [d["id"] for d in saved["decisions"] if d["decision"] == "accept"]
    assert accepted == rep.accepted()
    assert len(onnx.load(str(out)).graph.node) == rep.final.nodes


@pytest.mark.slow  # a real tune: its final check measures until it decides or the budget ends
def test_cancel_keeps_a_valid_best_so_far():
    cancel = threading.Event()

    def progress(message: str, _fraction: float) -> None:
        # after accept-all's measurement, at the next one, whichever the search makes (a group's timing
        # when accept-all is not faster; leaving a group out of it when it is)
        if "(batch" in message and "accept-all" not in message:
            cancel.set()

    res = tune(MLP, TuneSettings(budget_s=120, **FAST), progress=progress, cancel=cancel)
    rep = res.report
    assert rep.stopped == "cancelled"
    # the MLP's 6 candidates for CPU at seq=128 (its SkipLayerNormalization ones are CPU near misses there)
    assert len(rep.decisions) == 6 and {d.decision for d in rep.decisions} <= {"accept", "reject"}
    # top-down from accept-all: what was not measured yet is kept as accept-all does
    assert any(d.reason.startswith("in accept-all") for d in rep.decisions)
    assert any("stopped early (cancelled)" in n for n in rep.notes)
    assert res.plan.accepted() == rep.accepted()
    assert rep.final.verdict == "cannot tell" and rep.to_json()["final"]["verdict"] == "cannot tell"
    for d in rep.decisions:
        if d.decision == "accept":
            assert d.effect is None or d.effect.verdict != "slower"
    if res.outcome is not None:
        assert res.outcome.validation.ok
    TuneReport.from_json(json.loads(json.dumps(rep.to_json())))


@pytest.mark.slow  # a real tune: its final check measures until it decides or the budget ends
def test_ctrl_c_writes_the_best_so_far_and_exits_130(tmp_path):
    out, report = tmp_path / "tuned.onnx", tmp_path / "tune.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fuseview", "tune", str(MLP), "-o", str(out), "--budget", "300",
         "--json", str(report), "--runs", "8", "--sessions", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    for line in proc.stderr:  # wait until the search is under way
        if "timing" in line or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "keeping the best set so far" in stderr
    rep = TuneReport.load(report)
    assert rep.stopped == "cancelled"
    onnx.checker.check_model(onnx.load(str(out)))
    assert "wrote" in stdout


@pytest.mark.slow  # a real tune: its final check measures until it decides or the budget ends
def test_report_round_trip_and_bad_reports(tmp_path):
    res = tune(CONV, TuneSettings(budget_s=10, **FAST))
    assert_reasons_agree_with_their_figures(res.report)
    assert_the_decision_rule_holds(res.report)
    d = res.report.to_json()
    assert d["final"]["verdict"] is not None and d["final"]["summary"].startswith("chosen ")
    assert d["kind"] == "fuseview.tune" and d["schema_version"] == 2
    for key in ("provider", "ort_opt", "threads", "dims", "budget_s", "seconds"):
        assert key in d["config"]
    assert d["config"]["ort_opt"] == "all"
    back = TuneReport.from_json(json.loads(json.dumps(d)))
    assert back.to_json() | {"fuseview_version": None} == d | {"fuseview_version": None}
    for bad in ({**d, "kind": "x"}, {**d, "schema_version": 3}, {**d, "decisions": [{"candidate": 1}]},
                {**d, "final": {**d["final"], "chosen": "mine"}}):
        with pytest.raises(FuseviewError):
            TuneReport.from_json(bad)
    # schema 1 kept the environment under config: it still loads, the environment moved to the top
    env = d["environment"]
    assert env["target"] == {"kind": "local"} and "environment" not in d["config"]
    old = {k: v for k, v in d.items() if k != "environment"}
    old = {**old, "schema_version": 1, "config": {**d["config"], "environment": env}}
    back = TuneReport.from_json(json.loads(json.dumps(old)))
    assert back.environment == env and "environment" not in back.config
    assert back.to_json() | {"fuseview_version": None} == d | {"fuseview_version": None}


@pytest.mark.parametrize("argv, words", [
    (["tune", "missing.onnx", "-o", "x.onnx"], "no such model file"),
    (["tune", str(CONV), "-o", "out.onnx", "--budget", "0"], "--budget"),
    (["tune", str(CONV), "-o", str(CONV)], "refusing to overwrite"),
    (["tune", str(CONV), "-o", "nodir/out.onnx"], "folder does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(argv, words, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fuseview: error:") and words in err[0], err


@pytest.mark.slow  # a real tune: its final check measures until it decides or the budget ends
def test_python_api_tunes_a_model_in_memory():
    import fuseview

    model = onnx.load(str(CONV))
    res = fuseview.tune(model, budget_s=10, **FAST)
    assert res.report.model is None and len(res.report.decisions) == len(fuseview.scan(CONV).candidates)
    assert res.report.final.chosen in ("tuned", "original", "accept_all")
    assert_reasons_agree_with_their_figures(res.report)
    assert_the_decision_rule_holds(res.report)
    with pytest.raises(TypeError):
        fuseview.tune(CONV, no_such_setting=1)


def test_settings_defaults_are_the_pipelines():
    from fuseview import defaults
    from fuseview.fusion import validate
    from fuseview.fusion.pipeline import TOLERANCES

    s = TuneSettings()  # the one set of validation defaults (fuseview.defaults), as validate's
    assert (s.atol, s.rtol) == (None, None)  # unset: the model's precision's (fusion.pipeline.TOLERANCES)
    assert (*s.tolerance(), s.seeds) == (defaults.ATOL, defaults.RTOL, defaults.DEFAULT_SEEDS)
    assert (validate.ATOL, validate.RTOL, validate.DEFAULT_SEEDS) == (*s.tolerance(), s.seeds)
    assert TOLERANCES["float32"] == s.tolerance()
    assert s.ort_opt == "all" and s.budget_s == 120 and s.threads == 0


def test_importing_fuseview_stays_cheap_and_tune_is_lazy():
    code = ("import sys, fuseview; assert 'onnxruntime' not in sys.modules; f = fuseview.tune;"
            " assert callable(f) and 'onnxruntime' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert out.stdout.strip() == "ok"
    assert Path(MLP).is_file()


def _big_gelu_model(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """x @ w + b, then erf GELU written out (a bias_gelu_erf candidate), with a 2 MiB weight in the file."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = rng.standard_normal((512, 1024)).astype(np.float32) / 16
    c = {name: numpy_helper.from_array(np.array(v, np.float32), name)
         for name, v in (("sqrt2", 1.4142135), ("one", 1.0), ("half", 0.5))}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["a"]),
             helper.make_node("Div", ["a", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["a", "e1"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(rng.standard_normal(1024).astype(np.float32), "b"), *c.values()]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 512])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence", 1024])
    g = helper.make_graph(nodes, "big_gelu", [x], [y], inits)
    path = tmp_path / "big_gelu.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path, w


@pytest.mark.slow  # a real tune: its final check measures until it decides or the budget ends
def test_a_big_model_is_tuned_with_its_weights_left_on_disk(tmp_path, monkeypatch):
    # the loader leaves big weights in the file (graph.lazy_weights); tune must not read them all in:
    # variants are built weightless, sessions reach the weights through the file, the output streams them
    import fuseview.tuning.run as run
    from fuseview.graph import loader
    from fuseview.graph.lazy_weights import has_disk_weights

    path, w = _big_gelu_model(tmp_path)
    monkeypatch.setattr(loader, "LAZY_FILE_BYTES", 0)
    materialized = []
    real = run.with_weights
    monkeypatch.setattr(run, "with_weights", lambda m, b: materialized.append(1) or real(m, b))
    res = tune(path, TuneSettings(budget_s=15, dims={"sequence": 4}, **FAST))
    assert has_disk_weights(res.original) and not materialized
    assert res.report.decisions, "the model has candidates to decide"
    out = res.save_model(tmp_path / "tuned.onnx")
    written = onnx.load(str(out))
    assert all(t.data_location == onnx.TensorProto.DEFAULT for t in written.graph.initializer)
    got = next(t for t in written.graph.initializer if t.name == "w")
    assert np.array_equal(onnx.numpy_helper.to_array(got), w)
    assert len(written.graph.node) == len(res.model.graph.node)


@pytest.mark.slow  # a real tune: its final check measures until it decides or the budget ends
def test_fewer_sessions_when_they_would_not_fit_in_memory(monkeypatch):
    from fuseview.runtime import ab

    size = MLP.stat().st_size
    monkeypatch.setattr(ab, "available_memory", lambda: 5 * size)  # room for 2 of 2 x 3 sessions
    assert ab.sessions_that_fit([str(MLP), str(MLP)], 3)[0] == 1
    monkeypatch.setattr(ab, "available_memory", lambda: 100 * size)
    assert ab.sessions_that_fit([str(MLP), str(MLP)], 3) == (3, None)
    monkeypatch.setattr(ab, "available_memory", lambda: 5 * size)
    res = tune(MLP, TuneSettings(budget_s=15, **FAST))  # the note comes with the first measurement
    assert any("session(s) per model instead of 3" in n for n in res.report.notes)
    # one session per model in each batch: at most max_batches (2) in a search step's measurement
    assert all(d.effect is None or d.stage == "final" or d.effect.sessions <= 2 for d in res.report.decisions)


GPT2_PAST = ASSET_MODELS / "current" / "gpt2_2l_sdpa_past_ts17.onnx"  # wpe: 256 positions
LLAMA_PAST = ASSET_MODELS / "current" / "llama_2l_sdpa_past_ts17.onnx"  # rotary angles computed: no table


def test_the_one_decode_step_rule_measures_a_real_cache_length():
    from fuseview.dims import DECODE_PAST_DEFAULT, run_dims
    from fuseview.fusion.pipeline import load_for_fusion

    gpt2, llama = load_for_fusion(GPT2_PAST), load_for_fusion(LLAMA_PAST)
    d = run_dims(gpt2, {})
    assert d.values == {"sequence": 1, "past_sequence": 255, "total_sequence": 256}  # capped by wpe (256)
    assert d.note and "decode step" in d.note and "position table of 256" in d.note
    d = run_dims(llama, {})
    assert DECODE_PAST_DEFAULT == 256 and d.values["past_sequence"] == 256 and d.values["sequence"] == 1
    assert d.values["total_sequence"] == 257 and "the default 256" in d.note
    d = run_dims(llama, {"past_sequence": 64})  # --dim overrides the cache length
    assert d.values["past_sequence"] == 64 and d.values["sequence"] == 1 and "set by --dim" in d.note
    d = run_dims(llama, {"sequence": 8})  # a prompt of 8 tokens, as the user asked
    assert d.note is None and d.values["sequence"] == 8
    assert run_dims(load_for_fusion(MLP), {}).note is None  # no cache: the dims as they were


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_a_kv_cache_decoder_is_tuned_at_its_decode_step_over_a_real_cache(capsys, tmp_path):
    # the dims and the note are the point, not the verdict: short budgets (the final check stops at them)
    rep = tune(LLAMA_PAST, TuneSettings(budget_s=6, **FAST)).report
    assert rep.config["dims"] == {"sequence": 1, "total_sequence": 257, "past_sequence": 256}
    assert rep.notes[0].startswith("a KV-cache decoder: measured at its decode step, sequence=1 new token")
    assert rep.environment["target"] == {"kind": "local"}
    rc = main(["tune", str(GPT2_PAST), "-o", str(tmp_path / "t.onnx"), "--budget", "4", "--runs", "8",
               "--sessions", "2", "--threads", "1", "--seeds", "1", "--ort-optimizer", "off", "--quiet",
               "--dim", "past_sequence=32"])
    out = capsys.readouterr().out
    assert rc == 0 and "dims sequence=1, total_sequence=33, past_sequence=32" in out
    assert "note       a KV-cache decoder: measured at its decode step" in out  # stated in the output


@pytest.mark.parametrize("reason", [
    # issue 32's contradictions, as the old search wrote them
    "its group is faster (0.97x [0.63, 1.49] no difference); on its own 1.01x [0.90, 1.12] no difference",
    "its rule's group is faster: 1.05x [0.99, 1.12] faster",
    "group showed no difference (0.79x [0.70, 1.44] no difference); not tried alone",
])
def test_the_reason_check_catches_a_reason_that_contradicts_its_figures(reason):
    from fuseview.reports.tune import Decision, FinalCheck

    final = FinalCheck("accept_all", 1, 3, None, None, None)
    decisions = [Decision("c1", "r", "accept", reason, "group")]
    rep = TuneReport("m.onnx", {"threshold": 0.02}, {}, final, [], decisions)
    with pytest.raises(AssertionError):
        assert_reasons_agree_with_their_figures(rep)
    fine = "kept as accept-all does: the set with it is 0.97x [0.63, 1.49] cannot tell"
    rep.decisions[0].reason = fine
    assert_reasons_agree_with_their_figures(rep)
