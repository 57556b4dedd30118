"""`fuseview trace` end to end on the committed traces: tables, report file, one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fuseview.cli import main
from fuseview.traces.report import load_report
from tests.conftest import ROOT

TRACES = ROOT / "tests" / "data" / "traces"


def test_compare_prints_speedup_and_kernels_and_writes_report(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    rc = main(["trace", str(TRACES / "cos_relu_eager.json"), str(TRACES / "cos_relu_compiled.json"),
               "--json", str(out)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "step time: before/after" in cap.out and "independent runs" in cap.out
    assert "graph_0_cpp_fused_cos_relu_0" in cap.out and "cos+relu -> aten::cos, aten::relu" in cap.out
    rep = load_report(out)
    assert rep["diff"]["fused_kernels"][0]["name"] == "graph_0_cpp_fused_cos_relu_0"


def test_single_trace_table(capsys):
    assert main(["trace", str(TRACES / "mlp_layernorm_eager.json"), "--steps", "5"]) == 0
    out = capsys.readouterr().out
    assert "5 steps from ProfilerStep" in out and "aten::native_layer_norm" in out


def test_no_fusion_is_said_plainly(capsys):
    assert main(["trace", str(TRACES / "encoder_fastpath_eager.json"),
                 str(TRACES / "encoder_fastpath_compiled.json")]) == 0
    assert "compile fused nothing" in capsys.readouterr().out


def _one_line_error(args: list[str]) -> str:
    r = subprocess.run([sys.executable, "-m", "fuseview", "trace", *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fuseview: error: ") and "Traceback" not in r.stderr
    return lines[0]


@pytest.mark.parametrize("kind", ["missing", "onnx", "truncated", "not_a_trace", "onnx_renamed"])
def test_bad_input_exits_2_with_one_line(tmp_path, kind):
    src = TRACES / "cos_relu_eager.json"
    if kind == "missing":
        path = tmp_path / "nope.json"
    elif kind == "onnx":
        path = TRACES / "ort_mlp.onnx"
    elif kind == "onnx_renamed":
        path = tmp_path / "model.json"
        path.write_bytes((TRACES / "ort_mlp.onnx").read_bytes())
    elif kind == "truncated":
        path = tmp_path / "cut.json"
        path.write_bytes(src.read_bytes()[:-40])
    else:
        path = tmp_path / "other.json"
        path.write_text('{"nodes": [1, 2, 3]}')
    line = _one_line_error([str(src), str(path)])
    assert str(path) in line


def test_json_never_overwrites_an_input(tmp_path):
    before = tmp_path / "b.json"
    before.write_bytes((TRACES / "cos_relu_eager.json").read_bytes())
    line = _one_line_error([str(before), "--json", str(before)])
    assert "overwrite" in line
    assert before.read_bytes() == (TRACES / "cos_relu_eager.json").read_bytes()


def test_cli_text_lists_kernels_then_ops_by_self_time_without_python_frames(capsys):
    """Issue 28.2: the CLI's defaults are the workspace's: kernels first, no Python frames unless --python."""
    capture = TRACES / "provenance" / "mlp_block"
    assert main(["trace", str(capture)]) == 0
    out = capsys.readouterr().out
    kernels, events = out.index("compiled kernels by Inductor's provenance"), out.index("event (self time")
    assert kernels < events
    table = out[events:].splitlines()[1:16]
    assert any(r.strip().startswith("aten::") for r in table)
    assert not any("): " in r or "nn.Module" in r or "fuseview/capture" in r for r in table)
    assert "--python lists them" in out
    assert main(["trace", str(capture), "--python", "--top", "60"]) == 0
    out = capsys.readouterr().out
    assert "): forward" in out and "fuseview/capture" not in out
