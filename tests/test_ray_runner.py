"""The runner contract without Ray: a packed model (its external weights shipped as bytes) measures and
digests as the file does, the environment fingerprint, --target parsing, and `import fuseview` without ray."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.cli import main
from fuseview.errors import FuseviewError
from fuseview.runtime.runner import MeasureRequest, PackedModel, measure, pack_model
from fuseview.targets import parse_target
from fuseview.targets.local import LocalTarget

from .conftest import ROOT


def _external_model(folder) -> str:
    """A MatMul + Relu model whose weight lives in a side file (external data)."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "ext.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="ext.weights",
                    size_threshold=0)
    return str(path)


def test_a_packed_model_with_external_weights_measures_and_digests_as_its_file(tmp_path):
    path = _external_model(tmp_path)
    graph, files = pack_model(path)
    assert list(files) == ["weights0.bin"] and files["weights0.bin"].name == "ext.weights"
    packed = PackedModel(graph, {k: p.read_bytes() for k, p in files.items()})
    common = dict(dims={"batch": 4}, sessions=2, runs=4, warmup=1, digests=True)
    shipped = measure(MeasureRequest([packed], **common))
    here = measure(MeasureRequest([path], **common))
    assert shipped.digests == here.digests and len(shipped.digests[0]["y"]) == 64
    assert shipped.times[0].shape == (2, 2) and np.all(shipped.times[0] > 0)
    assert shipped.providers[0]["provider"] == "CPUExecutionProvider"
    env = shipped.environment
    assert env["hostname"] and env["cpu_cores"] >= 1 and env["memory_bytes"] > 0 and env["onnxruntime"]
    assert "CPUExecutionProvider" in env["providers"]


def test_local_target_times_as_the_ab_timer_does_and_says_where(tmp_path):
    path = _external_model(tmp_path)
    times, providers = LocalTarget().time_models([path, path], {"x": np.ones((2, 64), np.float32)},
                                                 "cpu", "disabled", 1, 2, 4, 1)
    assert [t.shape for t in times] == [(2, 2), (2, 2)] and len(providers) == 2
    assert LocalTarget().environment()["target"] == {"kind": "local"}


@pytest.mark.parametrize("spec, expected", [(None, ("local", None)), ("local", ("local", None)),
                                            ("ray:auto", ("ray", "auto")),
                                            ("ray:10.0.0.5:6379", ("ray", "10.0.0.5:6379")),
                                            ("ray:ray://h:10001", ("ray", "ray://h:10001"))])
def test_target_specs(spec, expected):
    assert parse_target(spec) == expected


@pytest.mark.parametrize("spec", ["ray:", "rayx", "ssh:host", ""])
def test_bad_targets_are_one_line_exit_2(spec, tmp_path, capsys):
    if spec == "":
        assert parse_target("") == ("local", None)
        return
    with pytest.raises(FuseviewError):
        parse_target(spec)
    out = tmp_path / "r.json"
    rc = main(["profile", _external_model(tmp_path), "--target", spec, "--json", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("fuseview: error: --target")
    assert not out.exists()


def test_importing_fuseview_and_its_target_modules_never_imports_ray():
    code = ("import sys, fuseview, fuseview.api, fuseview.targets, fuseview.workflows.sweep,"
            " fuseview.runtime.runner, fuseview.commands.sweep, fuseview.cli; fuseview.sweep;"
            " print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_local_sweep_writes_a_report_and_model_per_item_and_skips_them_when_run_again(tmp_path, capsys):
    path = _external_model(tmp_path)
    out = tmp_path / "sweep"
    out.mkdir()
    argv = ["sweep", path, "-o", str(out), "--dims-set", "batch=2", "--dims-set", "batch=8", "--budget", "20",
            "--runs", "6", "--sessions", "2", "--threads", "1", "--quiet"]
    assert main(argv) == 0
    table = capsys.readouterr().out
    names = ["ext.batch2", "ext.batch8"]
    for n in names:
        assert (out / f"{n}.onnx").is_file() and (out / f"{n}.tune.json").is_file()
        assert n in table
    import json

    summary = json.loads((out / "sweep.json").read_text())
    assert [r["item"] for r in summary["items"]] == names
    assert all(r["status"] == "tuned" and r["node"] == "local" for r in summary["items"])
    assert [r["dims"] for r in summary["items"]] == [{"batch": 2}, {"batch": 8}]
    assert main(argv) == 0  # resumed: nothing left to do
    again = json.loads((out / "sweep.json").read_text())
    assert all(r["status"] == "done before" for r in again["items"])


def test_the_tune_dialog_offers_the_target_and_remembers_a_ray_address(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from fuseview.targets import open_target
    from fuseview.ui.target_selector import TargetSelector, environment_text
    from fuseview.ui.tune_dialog import TuneDialog

    dialog = TuneDialog()
    qtbot.addWidget(dialog)
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    dialog.target.settings = settings
    assert dialog.target.spec() in ("local",) or dialog.target.spec().startswith("ray:")
    dialog.target.combo.setCurrentText("ray:10.0.0.5:6379")
    assert dialog.target.remember() == "ray:10.0.0.5:6379"
    again = TargetSelector(settings=settings)
    assert again.spec() == "ray:10.0.0.5:6379" and again.combo.findText("ray:10.0.0.5:6379") > 0
    again.combo.setCurrentText("ssh:box")
    with pytest.raises(FuseviewError):
        again.spec()
    target = open_target("local", "auto", 5)
    assert target.describe() == {"kind": "local"} and target.budget_s == 5
    assert environment_text(target.environment()).startswith("measured on this machine")
