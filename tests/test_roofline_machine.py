"""The machine's roofline (runtime/machine.py): measured in onnxruntime, repeatable within 2x, cached once."""

from __future__ import annotations

import json

import pytest

from fuseview.runtime.machine import cache_path, machine_key, machine_roofline, measure_machine


@pytest.mark.slow
def test_measured_roofline_is_within_2x_of_a_second_measurement():
    a = measure_machine("cpu", threads=1)
    b = measure_machine("cpu", threads=1)
    for key in ("peak_gflops", "peak_gbps"):
        assert a[key] > 0 and b[key] > 0
        assert 0.5 <= a[key] / b[key] <= 2.0, (key, a[key], b[key])
    assert "MatMul" in a["method"] and "Add" in a["method"] and a["provider"] == "CPUExecutionProvider"
    assert a["ridge_flops_per_byte"] == pytest.approx(a["peak_gflops"] / a["peak_gbps"])


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_measured_once_then_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = machine_roofline("cpu", threads=1)
    assert not first["cached"] and cache_path().is_file()
    stored = json.loads(cache_path().read_text())["machines"][machine_key("cpu", 1)]
    assert stored["peak_gflops"] == first["peak_gflops"]
    again = machine_roofline("cpu", threads=1)
    assert again["cached"] and again["peak_gflops"] == first["peak_gflops"]
    assert again["measured"] == first["measured"]


@pytest.mark.slow
def test_a_broken_cache_costs_only_a_measurement(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache_path().parent.mkdir(parents=True)
    bad = {"version": 1, "machines": {machine_key("cpu", 1): {"peak_gflops": -1}}}
    cache_path().write_text(json.dumps(bad))
    got = machine_roofline("cpu", threads=1)
    assert not got["cached"] and got["peak_gflops"] > 0
    cache_path().write_text("not json")
    assert machine_roofline("cpu", threads=1)["peak_gbps"] > 0


def test_the_device_path_binds_inputs_and_outputs_on_the_cpu_device():
    got = measure_machine("cpu", threads=1, budget_s=0.4, bind=True)
    assert got["peak_gflops"] > 0 and got["peak_gbps"] > 0
    assert "bound on the device (IO binding)" in got["method"]
    assert "gpu" not in got and "TF32" not in got["method"]  # no GPU here: the CPU device's roofs


def test_a_gpu_roofline_is_cached_per_gpu_and_driver():
    a = machine_key("cuda", 0, "NVIDIA H100 80GB HBM3 driver 580.159.04")
    b = machine_key("cuda", 0, "NVIDIA H200 driver 580.159.04")
    assert a != b and a != machine_key("cuda", 0)
    assert a.endswith("bound on the device") and "driver 580.159.04" in a
