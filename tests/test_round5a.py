"""Hostile input round 5 (A): outputs that would replace each other, sweeps that survive their items and
distrust forged reports, forged roofline figures, IR-version messages, degenerate `--inputs`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuseview.cli import main

from .test_ray_runner import _external_model

SWEEP = ["--budget", "10", "--runs", "4", "--sessions", "2", "--threads", "1", "--quiet"]


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("clash", ["output", "plan"])
def test_fuse_refuses_an_output_that_an_emitted_file_would_replace(tmp_path, capsys, clash):
    model = _external_model(tmp_path)
    folder = tmp_path / "same"
    folder.mkdir()
    out = folder / "decisions.json" if clash == "output" else tmp_path / "f.onnx"
    argv = ["fuse", model, "-o", str(out), "--emit", "ort-config", str(folder)]
    if clash == "plan":
        argv += ["--save-plan", str(folder / "ort_config.json")]
    assert main(argv) == 2
    err = _err_line(capsys)
    assert "the same file as --emit" in err
    assert list(folder.iterdir()) == [] and not out.exists()


def _sweep_items(out: Path) -> dict[str, dict]:
    return {r["item"]: r for r in json.loads((out / "sweep.json").read_text())["items"]}


def test_a_local_sweep_goes_on_past_a_failing_item_and_names_it(tmp_path, capsys):
    good = _external_model(tmp_path)
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07not a model at all")
    out = tmp_path / "new" / "folder"  # created by the sweep, as docs/ray.md's example needs
    assert main(["sweep", str(bad), good, "-o", str(out), *SWEEP]) == 2
    captured = capsys.readouterr()
    assert "broken" in captured.out and "ext" in captured.out and "verdict" in captured.out.splitlines()[0]
    assert len(captured.err.strip().splitlines()) == 1 and "broken" in captured.err
    items = _sweep_items(out)
    assert items["broken"]["status"].startswith("failed: ") and items["ext"]["status"] == "tuned"
    assert not (out / "broken.onnx").exists() and (out / "ext.onnx").is_file()
    assert items["ext"]["verdict"] and items["ext"]["x_original"] is not None
    assert items["ext"]["x_accept_all"] is not None  # "-" on every row before


@pytest.mark.parametrize("forged", ["{}", '{"kind": "fuseview.tune"', "other-model", "other-dims", "[1]",
                                    '{"kind": "fuseview.tune", "schema_version": 1}'])
def test_resume_reruns_an_item_whose_report_is_forged_or_anothers(tmp_path, capsys, forged):
    model = _external_model(tmp_path)
    out = tmp_path / "s"
    argv = ["sweep", model, "-o", str(out), "--dims-set", "batch=2", *SWEEP]
    assert main(argv) == 0
    report = out / "ext.batch2.tune.json"
    if forged == "other-model":
        d = json.loads(report.read_text())
        d["model"] = str(tmp_path / "another" / "ext.onnx")
        report.write_text(json.dumps(d))
    elif forged == "other-dims":
        d = json.loads(report.read_text())
        d["config"]["dims"] = {"batch": 7}
        report.write_text(json.dumps(d))
    else:
        report.write_text(forged)
    capsys.readouterr()
    assert main(argv) == 0
    assert _sweep_items(out)["ext.batch2"]["status"] == "tuned"
    assert main(argv) == 0  # the fresh report is trusted
    assert _sweep_items(out)["ext.batch2"]["status"] == "done before"


@pytest.mark.parametrize("kind", ["file", "link", "model-is-folder"])
def test_sweep_checks_its_outputs_before_any_tuning(tmp_path, capsys, kind):
    model = _external_model(tmp_path)
    out = tmp_path / "s"
    if kind == "file":
        out.write_text("x")
    elif kind == "link":
        (tmp_path / "real").mkdir()
        out.symlink_to(tmp_path / "real")
    else:
        (out / "ext.onnx").mkdir(parents=True)
    assert main(["sweep", model, "-o", str(out), *SWEEP]) == 2
    assert "tuning" not in _err_line(capsys)
    assert not (tmp_path / "real" / "sweep.json").exists() and not (out / "sweep.json").exists() \
        if kind != "file" else out.read_text() == "x"


GPT2 = "tests/data/gpt2/gpt2_2l_ts17.onnx"


@pytest.fixture(scope="module")
def gpt2_profile(tmp_path_factory) -> Path:
    import fuseview

    path = tmp_path_factory.mktemp("prof") / "p.json"
    fuseview.profile(GPT2, runs=3, warmup=1, threads=1).save(path)
    return path


def _no_constants(text: str):
    def refuse(name):
        raise AssertionError(f"{name} in --json output")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("value", ["0", "-5", "1e-300", "1e308", "1" + "0" * 400, "-0.0"])
@pytest.mark.parametrize("key", ["peak_gbps", "peak_gflops", "time_us"])
def test_scan_refuses_a_forged_roofline_in_one_line(gpt2_profile, tmp_path, capsys, key, value):
    d = json.loads(gpt2_profile.read_text())
    roof = d["models"][0]["roofline"]
    target = roof["nodes"][0] if key == "time_us" else roof["machine"]
    if key == "time_us" and value in ("0", "1e-300", "-0.0"):
        value = "-1"  # a zero or tiny time is a possible measurement; a negative one is not
    target[key] = "@@"
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(d).replace('"@@"', value))
    code = main(["scan", GPT2, "--profile", str(forged), "--json"])
    captured = capsys.readouterr()
    if code == 0:
        _no_constants(captured.out)  # what the message says on failure: Infinity in the JSON
    # none of these is a measurement: refused in one line naming the field
    assert code == 2 and len(captured.err.strip().splitlines()) == 1 and key in captured.err


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_a_cached_roofline_without_method_is_measured_again(tmp_path, monkeypatch):
    from fuseview.runtime.machine import cache_path, machine_key, machine_roofline

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache_path().parent.mkdir(parents=True)
    entry = {"peak_gflops": 50.0, "peak_gbps": 10.0, "ridge_flops_per_byte": 5.0, "provider": "cpu",
             "threads": 1, "onnxruntime": "1", "cpu": "x", "host": "h", "measured": "now"}  # no "method"
    cache_path().write_text(json.dumps({"version": 1, "machines": {machine_key("cpu", 1): entry}}))
    got = machine_roofline("cpu", threads=1)
    assert not got["cached"] and isinstance(got["method"], str)
    assert machine_roofline("cpu", threads=1)["cached"]  # the fresh entry is kept


MLP = "assets/models/mlp_gelu_erf_ts17.onnx"


@pytest.mark.parametrize("case", ["batch0", "nan"])
def test_fuse_refuses_inputs_with_nothing_to_validate_on(tmp_path, capsys, case):
    import numpy as np

    x = np.zeros((0, 8, 64), np.float32) if case == "batch0" else np.full((1, 8, 64), np.nan, np.float32)
    npz = tmp_path / "in.npz"
    np.savez(npz, x=x)
    out = tmp_path / "f.onnx"
    assert main(["fuse", MLP, "-o", str(out), "--inputs", str(npz)]) == 2
    err = _err_line(capsys)
    assert "nothing to validate on" in err and not out.exists()


def test_api_load_of_a_model_proto_is_one_line():
    import onnx

    import fuseview
    from fuseview.errors import FuseviewError

    with pytest.raises(FuseviewError) as info:
        fuseview.load(onnx.load(MLP))
    assert "\n" not in str(info.value) and "must be a file name, not ModelProto" in str(info.value)


def test_a_command_that_writes_nothing_there_removes_old_temp_files_of_killed_runs(tmp_path, capsys):
    import os
    import shutil
    import subprocess
    import sys

    from fuseview.atomic import TEMP_PREFIX

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()  # its pid is gone once it returned
    model = tmp_path / "m.onnx"
    shutil.copy(MLP, model)
    old, fresh = tmp_path / f"{TEMP_PREFIX}{dead}-a.onnx", tmp_path / f"{TEMP_PREFIX}{dead}-b.onnx"
    for p in (old, fresh):
        p.write_bytes(b"half a model")
    os.utime(old, (os.path.getmtime(old) - 3600,) * 2)  # killed an hour ago
    assert main(["scan", str(model)]) == 0  # scan writes nothing into the model's folder
    assert not old.exists() and fresh.exists()  # a recent one may be another namespace's live write


@pytest.fixture(scope="module")
def too_new(tmp_path_factory) -> Path:
    """The MLP at one IR version above what the installed onnxruntime reads (asked of onnxruntime)."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(MLP)
    model.ir_version = 10_000
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        raise AssertionError("onnxruntime read IR version 10000")
    except Exception as exc:  # noqa: BLE001
        most = int(str(exc).split("max supported IR version: ")[1].split()[0].strip(",."))
    model.ir_version = most + 1
    path = tmp_path_factory.mktemp("ir") / "newer.onnx"
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("command", [["profile", "--runs", "2"], ["tune", "--budget", "5"], ["fuse"]])
def test_a_model_newer_than_onnxruntime_is_named_in_one_whole_line(too_new, tmp_path, capsys, command):
    argv = [command[0], str(too_new), *command[1:]]
    if command[0] != "profile":
        argv += ["-o", str(tmp_path / "out.onnx")]
    assert main(argv) == 2
    err = _err_line(capsys)
    assert str(too_new) in err and "max supported IR version" in err and err.rstrip().endswith("onnxruntime")
    assert "--dim" not in err and "fused model" not in err and "…" not in err
    assert not (tmp_path / "out.onnx").exists()
