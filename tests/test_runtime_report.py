"""The JSON report: schema_version 1, written atomically, round-trips, bad files refused in one line."""

from __future__ import annotations

import json

import pytest

from fuseview.errors import FuseviewError
from fuseview.runtime import samples
from fuseview.runtime.job import ProfileRequest, run_profile
from fuseview.runtime.report import SCHEMA_VERSION, load_report, save_report


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    import onnx

    d = tmp_path_factory.mktemp("rep")
    onnx.save(samples.gelu_original(), d / "orig.onnx")
    onnx.save(samples.gelu_fused(), d / "fused.onnx")
    req = ProfileRequest(model=str(d / "orig.onnx"), against=str(d / "fused.onnx"), provider="cpu", runs=3,
                         warmup=1, dims={"seq": 16}, seed=5, ort_fusions=True)
    return run_profile(req)


def test_report_contents(report):
    assert report["schema_version"] == SCHEMA_VERSION == 1
    env = report["environment"]
    assert env["onnxruntime"] and "CPUExecutionProvider" in env["providers"] and env["cpu"]
    assert env["gpu"] is None  # CUDA not used
    assert report["inputs"]["seed"] == 5 and report["inputs"]["dims"] == {"batch": 1, "seq": 16}
    assert report["inputs"]["feeds"][0]["shape"] == [1, 16, 64]
    roles = [m["role"] for m in report["models"]]
    assert roles == ["model", "against"]
    for m in report["models"]:
        assert m["provider"]["provider"] == "CPUExecutionProvider" and m["ort_opt_level"] == "disabled"
        assert m["nodes"] and m["op_types"] and m["latency_ms"]["p50"] > 0
    (f,) = report["comparison"]["fusions"]
    assert f["time"]["original_nodes"] == 8 and f["passed"]
    assert [x["role"] for x in report["ort_fusions"]] == ["model", "against"]


def test_round_trip(report, tmp_path):
    path = save_report(report, tmp_path / "r.json")
    assert load_report(path) == json.loads(json.dumps(report))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no temp file left


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda r: r.update(schema_version=2), "schema_version 2"),
        (lambda r: r.update(kind="other"), "not a fuseview profile report"),
        (lambda r: r["environment"].pop("onnxruntime"), "environment has no 'onnxruntime'"),
        (lambda r: r["models"][0].update(nodes="x"), "models\\[0\\].nodes has the wrong type"),
        (lambda r: r["models"][1]["latency_ms"].pop("p90"), "latency_ms.p90"),
        (lambda r: r["models"][0]["nodes"][0].pop("provider"), "nodes\\[0\\] has no 'provider'"),
        (lambda r: r.update(models=[]), "no models"),
    ],
)
def test_invalid_reports_are_refused(report, tmp_path, edit, needle):
    bad = json.loads(json.dumps(report))
    edit(bad)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(FuseviewError, match=needle):
        load_report(p)


def test_unreadable_report(tmp_path):
    (tmp_path / "x.json").write_text("{nope")
    with pytest.raises(FuseviewError, match="not a readable JSON"):
        load_report(tmp_path / "x.json")
    with pytest.raises(FuseviewError, match="not found"):
        load_report(tmp_path / "missing.json")
