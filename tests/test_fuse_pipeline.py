"""The one fuse pipeline: CLI and window give the same figures, bad input in one line."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data

from fuseview.cli import main
from fuseview.errors import FuseviewError
from fuseview.fusion.pipeline import FuseOptions, build_fused, dims_for, load_for_fusion, scan_for_fusion
from fuseview.fusion.plan import Plan
from fuseview.fusion.validate import validate
from fuseview.runtime import samples
from fuseview.runtime.compare import compare_outputs
from fuseview.runtime.inputs import SCALAR_FLOAT_RANGE, make_feeds
from fuseview.runtime.job import ProfileRequest, run_profile

from .conftest import GPT2_MODELS

GPT2 = GPT2_MODELS / "gpt2_2l_ts17.onnx"
MS = 120_000


def _fuse_all(path, dims=None):
    model = load_for_fusion(path)
    scan = scan_for_fusion(model, dims, path)
    plan = Plan(scan.candidates, str(path))
    plan.accept_all()  # what `fuseview fuse` does without --accept/--plan
    return model, scan, plan.accepted()


def test_window_apply_and_cli_fuse_give_identical_figures(qtbot, tmp_path, capsys, monkeypatch):
    from PySide6.QtCore import QSettings

    from fuseview.ui import dialogs
    from fuseview.ui.main_window import MainWindow

    monkeypatch.setattr(dialogs, "show_error", lambda parent, title, message: None)
    w = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.show()
    w.session.provider = "cpu"  # as `fuseview fuse` here (its auto provider): the same candidates offered
    try:
        with qtbot.waitSignal(w.workbench.scanned, timeout=MS):
            w.open_file(GPT2)
        qtbot.waitUntil(lambda: not w.busy, timeout=MS)
        w.workbench.panel.accept_all()
        w.workbench.profile_panel.dims.setText("seq=16")  # Apply validates with the Profile dock's dims
        with qtbot.waitSignal(w.workbench.applied, timeout=MS):
            assert w.workbench.apply()
        qtbot.waitUntil(lambda: not w.busy, timeout=MS)
        wb = w.workbench
        window_val = wb.session.fused.validation
        window_line = wb.validation_text()
        title = wb.fused_pane.title.full_text
        window_ids = sorted(wb.session.decisions.accepted())
        fused_model = wb.session.fused.model
    finally:
        w.session.jobs.shutdown()
    plan = tmp_path / "plan.json"
    assert main(["fuse", str(GPT2), "-o", str(tmp_path / "f.onnx"), "--save-plan", str(plan),
                 "--dim", "seq=16"]) == 0
    out = capsys.readouterr().out
    decisions = json.loads(plan.read_text())["decisions"]
    cli_ids = sorted(d["id"] for d in decisions if d["decision"] == "accept")
    assert cli_ids == window_ids
    assert window_val is not None and window_val.ok and len(window_val.runs) == 3
    assert window_line.startswith("validated on onnxruntime: max |diff| ")
    assert window_line in out  # the CLI prints the very same line
    assert window_val.figures() in title  # and the fused pane's title its figures
    assert window_val.dims == {"batch": 1, "seq": 16}
    # The same figures to the last bit when the pipeline runs again on the same ids.
    model, scan, _ids = _fuse_all(GPT2, {"seq": 16})
    again = build_fused(model, scan, window_ids, FuseOptions(dims={"seq": 16})).validation
    assert again.to_json()["outputs"] == window_val.to_json()["outputs"]
    # and the Outputs tab's comparison of the window's fused model on seed 0 shows the first set's figures
    tab = compare_outputs(model, fused_model, make_feeds(model, {"seq": 16}, seed=0))["outputs"]
    for name, d in window_val.runs[0].outputs.items():
        assert (tab[name]["max_abs"], tab[name]["max_rel"]) == (d["max_abs"], d["max_rel"])


def test_outputs_tab_shows_the_validation_figures_for_the_same_inputs(tmp_path):
    model, scan, ids = _fuse_all(GPT2, {"seq": 16})
    outcome = build_fused(model, scan, ids, FuseOptions(dims={"seq": 16}))
    fused = tmp_path / "fused.onnx"
    onnx.save(outcome.model, fused)
    seed0 = outcome.validation.runs[0]
    assert seed0.seed == 0
    direct = compare_outputs(model, outcome.model, make_feeds(model, {"seq": 16}, seed=0))
    # What the Outputs tab shows: the profile report's comparison, seed 0, same dims.
    rep = run_profile(ProfileRequest(model=str(GPT2), against=str(fused), runs=1, warmup=0, dims={"seq": 16}))
    for name, d in seed0.outputs.items():
        for source in (direct["outputs"][name], rep["comparison"]["outputs"][name]):
            assert (source["max_abs"], source["max_rel"], source["passed"]) == (
                d["max_abs"], d["max_rel"], d["passed"])


def test_several_seeds_every_output_and_a_broken_fusion_is_caught():
    orig, good, broken = samples.gelu_original(), samples.gelu_fused(), samples.gelu_fused(bias=0.5)
    v = validate(orig, good, False)
    assert [r.seed for r in v.runs] == [0, 1, 2] and v.ok
    assert len({r.feeds[0]["min"] for r in v.runs}) == 3  # really different inputs
    bad = validate(orig, broken, False, seeds=2)
    assert not bad.ok and "DIFFERS" in bad.headline() and bad.max_abs > 0.01


def _scalar_model() -> onnx.ModelProto:
    """y = x * speed, with speed a rank-0 float input: N(0, 1) would flip its sign half the time."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    s = helper.make_tensor_value_info("speed", TensorProto.FLOAT, [])
    one = helper.make_tensor_value_info("gain", TensorProto.FLOAT, [1, 1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([helper.make_node("Mul", ["x", "speed"], ["t"]),
                           helper.make_node("Mul", ["t", "gain"], ["y"])], "g", [x, s, one], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_scalar_float_inputs_stay_in_a_small_positive_range():
    m = _scalar_model()
    lo, hi = SCALAR_FLOAT_RANGE
    values = set()
    for seed in range(6):
        f = make_feeds(m, seed=seed)
        for name in ("speed", "gain"):
            assert lo <= float(f[name].min()) and float(f[name].max()) < hi
        values.add(float(f["speed"]))
        assert f["x"].min() < 0 < f["x"].max()  # tensors still N(0, 1)
    assert len(values) == 6


def _paddle_gelu(tmp_path):
    """The tanh-GELU MLP with its batch and sequence dims written as -1, as PaddlePaddle exports do."""
    m = samples.gelu_original()
    for vi in list(m.graph.input) + list(m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        dims[0].Clear()
        dims[0].dim_value = -1
        dims[1].Clear()
        dims[1].dim_value = -1
    p = tmp_path / "paddle.onnx"
    onnx.save(m, p)
    return p


def test_minus_one_dims_fuse_and_profile(tmp_path, capsys):
    src = _paddle_gelu(tmp_path)
    assert main(["fuse", str(src), "-o", str(tmp_path / "f.onnx"), "--dim", "x:1=5"]) == 0
    out = capsys.readouterr().out
    assert "validate   onnxruntime (ok)" in out and "x:0=1, x:1=5" in out
    npz = tmp_path / "in.npz"
    np.savez(npz, x=np.random.default_rng(0).standard_normal((2, 5, 64)).astype(np.float32))
    assert main(["profile", str(src), "--against", str(tmp_path / "f.onnx"), "--inputs", str(npz),
                 "--runs", "1", "--warmup", "0", "--quiet"]) == 0
    assert "x: float32 [2, 5, 64]" in capsys.readouterr().out
    assert main(["fuse", str(src), "-o", str(tmp_path / "g.onnx"), "--inputs", str(npz)]) == 0
    assert f"inputs {npz}; dims x:0=2, x:1=5" in capsys.readouterr().out
    # the scan sizes tensors with the arrays' dims too, and the two ways of giving dims do not mix
    model = load_for_fusion(src)
    assert dims_for(model, FuseOptions(inputs=str(npz))) == {"x:0": 2, "x:1": 5}
    with pytest.raises(FuseviewError, match="give one of them"):
        dims_for(model, FuseOptions(inputs=str(npz), dims={"x:1": 5}))


def _one_line(args, env=None):
    r = subprocess.run([sys.executable, "-m", "fuseview", *args], capture_output=True, text=True, env=env)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("fuseview: error:"), r.stderr
    assert "\x1b[" not in r.stderr and "[E:onnxruntime" not in r.stderr
    return lines[0]


def test_model_that_cannot_run_on_generated_inputs_is_one_line_with_the_hint(tmp_path):
    out = tmp_path / "f.onnx"
    # this GPT-2 holds 256 positions: 512 tokens fail inside onnxruntime
    line = _one_line(["fuse", str(GPT2), "-o", str(out), "--dim", "seq=512"])
    assert "does not run on generated inputs (dims batch=1, seq=512)" in line
    assert "--dim" in line and "--inputs FILE.npz" in line
    assert not out.exists()


def test_fuse_inputs_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, input_ids=np.zeros((1, 4), np.int32))
    line = _one_line(["fuse", str(GPT2), "-o", str(tmp_path / "f.onnx"), "--inputs", str(bad)])
    assert "missing attention_mask" in line or "is int32" in line
    assert "file not found" in _one_line(["fuse", str(GPT2), "-o", str(tmp_path / "f.onnx"),
                                          "--inputs", str(tmp_path / "absent.npz")])


def test_generated_inputs_above_the_limit_are_refused(tmp_path, monkeypatch):
    m = onnx.load(str(GPT2), load_external_data=False)
    with pytest.raises(FuseviewError, match="limit .*--dim NAME=VALUE"):
        make_feeds(m, {"batch": 64, "seq": 256}, max_bytes=100_000)
    assert make_feeds(m, {"seq": 8}, max_bytes=100_000)["input_ids"].shape == (1, 8)
    # 1 GiB by default: batch 2**20 x seq 128 of int64 ids and masks is 2 GiB
    with pytest.raises(FuseviewError, match=r"2 GiB \(limit 1 GiB"):
        make_feeds(m, {"batch": 1 << 20})
    import os

    env = {**os.environ, "FUSEVIEW_MAX_INPUT_BYTES": "1000"}
    for cmd in (["fuse", str(GPT2), "-o", str(tmp_path / "f.onnx")], ["profile", str(GPT2)]):
        assert "choose smaller ones with --dim" in _one_line(cmd, env)


def test_external_weights_end_up_inside_the_fused_model(tmp_path):
    m = samples.gelu_original()
    src = tmp_path / "ext.onnx"
    convert_model_to_external_data(m, all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
    onnx.save(m, src)
    model, scan, ids = _fuse_all(src)
    outcome = build_fused(onnx.load(str(src), load_external_data=False), scan, ids, base_dir=tmp_path)
    assert outcome.validation.ok
    assert not any(t.data_location == TensorProto.EXTERNAL for t in outcome.model.graph.initializer)
    w1 = next(t for t in outcome.model.graph.initializer if t.name == "w1")
    expected = next(t for t in samples.gelu_original().graph.initializer if t.name == "w1")
    assert np.array_equal(numpy_helper.to_array(w1), numpy_helper.to_array(expected))


def _add_model(c: float) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])
    k = numpy_helper.from_array(np.array([c], np.float32), "k")
    g = helper.make_graph([helper.make_node("Add", ["x", "k"], ["y"])], "add", [x], [y], [k])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_big_outputs_wait_on_disk_and_are_still_compared_exactly(monkeypatch):
    # 4.4 MB outputs: over SPILL_BYTES, so the original's outputs are memory-mapped from a temp file
    import fuseview.fusion.validate as v

    spilled: list[int] = []
    real = v._spilled

    def counting(outputs, folder, key):
        kept = real(outputs, folder, key)
        spilled.extend(int(isinstance(x, np.memmap)) for x in kept)
        return kept

    monkeypatch.setattr(v, "_spilled", counting)
    same = validate(_add_model(1.0), _add_model(1.0), False, {"n": 1_100_000}, seeds=2)
    assert same.ok and same.max_abs == 0.0 and spilled == [1, 1]
    off = validate(_add_model(1.0), _add_model(1.25), False, {"n": 1_100_000}, seeds=2)
    assert not off.ok and off.max_abs == pytest.approx(0.25)
    # a caller's cache (tune) keeps the outputs in memory, as it must outlive the call
    spilled.clear()
    cache: dict = {}
    validate(_add_model(1.0), _add_model(1.0), False, {"n": 1_100_000}, seeds=1, original_outputs=cache)
    assert spilled == [] and all(isinstance(x, np.ndarray) and not isinstance(x, np.memmap)
                                 for outs in cache.values() for x in outs)


def test_validation_sessions_run_lean(monkeypatch):
    # no CPU arena and no packed weight copies in the sessions validation makes (README "Real size")
    import fuseview.runtime.sessions as sessions

    seen = []
    real = sessions.session_options

    def recording(*args, **kwargs):
        so = real(*args, **kwargs)
        seen.append((so.enable_cpu_mem_arena, so.get_session_config_entry("session.disable_prepacking")))
        return so

    monkeypatch.setattr(sessions, "session_options", recording)
    assert validate(_add_model(1.0), _add_model(1.0), False, {"n": 8}, seeds=1).ok
    assert seen == [(False, "1"), (False, "1")]
