"""`fuseview profile` end to end on real models: table, report file, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from fuseview.cli import main
from fuseview.reports.profile import ProfileReport
from fuseview.runtime import samples
from fuseview.runtime.report import load_report
from tests.conftest import GPT2_MODELS

GPT2 = GPT2_MODELS / "gpt2_2l_ts17.onnx"


@pytest.fixture(scope="module")
def gelu_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("gelu")
    paths = {}
    for name, m in (("orig", samples.gelu_original()), ("fused", samples.gelu_fused()),
                    ("broken", samples.gelu_fused(bias=0.5))):
        paths[name] = d / f"{name}.onnx"
        onnx.save(m, paths[name])
    return paths


def test_profile_gpt2_writes_a_valid_report(tmp_path, capsys):
    out = tmp_path / "gpt2.json"
    rc = main(["profile", str(GPT2), "--runs", "2", "--warmup", "1", "--dim", "seq=32", "--json", str(out),
               "--threads", "1"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "latency  p50" in cap.out and "Gemm" in cap.out and "report written" in cap.out
    assert "profile 3/3" in cap.err  # progress goes to stderr
    rep = load_report(out)
    feeds = {f["name"]: f for f in rep["inputs"]["feeds"]}
    assert feeds["input_ids"]["shape"] == [1, 32] and feeds["input_ids"]["max"] < 1000
    assert feeds["attention_mask"]["min"] == feeds["attention_mask"]["max"] == 1
    assert rep["inputs"]["dims"] == {"batch": 1, "seq": 32}
    assert rep["comparison"] is None and rep["models"][0]["runs"] == 2


def test_against_fused_prints_per_fusion_rows_and_passes(gelu_files, tmp_path, capsys):
    rc = main(["profile", str(gelu_files["orig"]), "--against", str(gelu_files["fused"]), "--runs", "3",
               "--quiet", "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "outputs (atol 0.0001, rtol 0.001): PASS" in out
    assert "fused_gelu" in out and "FastGelu" in out
    rep = load_report(tmp_path / "r.json")
    assert rep["comparison"]["fusions"][0]["time"]["original_nodes"] == 8
    # where each node ran, before and after: all on the CPU EP here, so nothing moved to the CPU
    orig, fused = rep["models"]
    assert orig["placement"]["providers"]["CPUExecutionProvider"]["nodes"] == len(orig["nodes"])
    cpu = "CPUExecutionProvider"
    assert fused["placement"]["providers"][cpu]["nodes"] == len(fused["nodes"]) < len(orig["nodes"])
    assert rep["comparison"]["placement_flag"] is None
    typed = ProfileReport.from_json(rep)
    assert typed.models[1].placement == fused["placement"] and typed.comparison.placement_flag is None
    assert f"placement: CPU {len(orig['nodes'])} nodes 100% of node time; Memcpy nodes 0" in out


def test_broken_fusion_exits_3(gelu_files, capsys):
    rc = main(["profile", str(gelu_files["orig"]), "--against", str(gelu_files["broken"]), "--runs", "2",
               "--quiet"])
    out = capsys.readouterr().out
    assert rc == 3 and "FAIL" in out


def test_npz_inputs(gelu_files, tmp_path, capsys):
    x = np.random.default_rng(0).standard_normal((2, 5, 64)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    assert main(["profile", str(gelu_files["orig"]), "--inputs", str(tmp_path / "in.npz"), "--runs", "1",
                 "--quiet", "--json", str(tmp_path / "r.json")]) == 0
    rep = load_report(tmp_path / "r.json")
    assert rep["inputs"]["seed"] is None and rep["inputs"]["dims"] == {"batch": 2, "seq": 5}
    np.savez(tmp_path / "bad.npz", y=x)
    assert main(["profile", str(gelu_files["orig"]), "--inputs", str(tmp_path / "bad.npz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing x" in err[0]


def _one_line_error(args: list[str]) -> str:
    r = subprocess.run([sys.executable, "-m", "fuseview", "profile", *args], capture_output=True, text=True)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fuseview: error:"), r.stderr
    return lines[0]


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_bad_input_is_one_line_exit_2(gelu_files, tmp_path):
    m = str(gelu_files["orig"])
    assert "not found" in _one_line_error([str(tmp_path / "absent.onnx")])
    (tmp_path / "junk.onnx").write_bytes(b"\x00garbage")
    assert "not an ONNX model" in _one_line_error([str(tmp_path / "junk.onnx")])  # the loader's words
    assert "NAME=VALUE" in _one_line_error([m, "--dim", "seq"])
    assert "no such input dim" in _one_line_error([m, "--dim", "nope=3"])
    assert "--runs" in _one_line_error([m, "--runs", "0"])
    assert "inputs differ" in _one_line_error([m, "--against", str(GPT2)])
    assert "folder does not exist" in _one_line_error([m, "--json", str(tmp_path / "no" / "r.json")])
    # GPT-2 here has 256 positions: a longer sequence fails inside onnxruntime, still in one line
    assert "failed to run the model" in _one_line_error([str(GPT2), "--dim", "seq=512", "--runs", "1"])


@pytest.mark.skipif("CUDAExecutionProvider" in ort.get_available_providers(), reason="CUDA build present")
def test_provider_cuda_on_a_cpu_machine(gelu_files):
    line = _one_line_error([str(gelu_files["orig"]), "--provider", "cuda"])
    assert "no CUDAExecutionProvider" in line and "pip install onnxruntime-gpu" in line


def test_report_json_is_strict_json(gelu_files, tmp_path):
    main(["profile", str(gelu_files["orig"]), "--runs", "1", "--quiet", "--json", str(tmp_path / "r.json")])
    text = (tmp_path / "r.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


def test_against_a_model_fused_by_fuseview(tmp_path, capsys):
    """The fusion engine's own output: every fused node is attributed, timed and within tolerance."""
    fused = tmp_path / "fused.onnx"
    # fused for a 4-token prompt: SkipLayerNormalization is fused on CPU below 8 rows (fusion.kernels.SLOWER)
    assert main(["fuse", str(GPT2), "-o", str(fused), "--no-validate", "--dim", "seq=4"]) == 0
    capsys.readouterr()
    rc = main(["profile", str(GPT2), "--against", str(fused), "--runs", "2", "--warmup", "1",
               "--dim", "seq=16", "--quiet", "--threads", "1", "--json", str(tmp_path / "r.json")])
    assert rc == 0, capsys.readouterr().out
    rep = load_report(tmp_path / "r.json")
    fusions = rep["comparison"]["fusions"]
    assert len(fusions) >= 3 and {f["op_type"] for f in fusions} >= {"FastGelu", "SkipLayerNormalization"}
    fused_ops = {o["op_type"] for o in rep["models"][1]["op_types"]}
    original_names = {n["name"] for n in rep["models"][0]["nodes"]}
    seen: set[str] = set()
    for f in fusions:
        assert f["passed"] and f["compared"], f
        assert f["op_type"] in fused_ops and set(f["op_types"]) <= fused_ops
        t = f["time"]
        assert t["fused_us"] > 0 and t["original_us"] > 0 and t["missing"] == [], t
        assert t["fused_nodes"] == t["fused_timed"] == len(f["nodes"])
        # each original node is replaced by one fusion only, and ran in the original model
        assert not seen & set(f["origin"]) and set(f["origin"]) <= original_names
        seen |= set(f["origin"])
