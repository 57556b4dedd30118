"""fuseview.capture.compare_compile on a real function (needs torch: .ci/run installs the [torch] extra)."""

from __future__ import annotations

import json
import os

import pytest

from fuseview.cli import main
from fuseview.traces.report import load_report

pytestmark = pytest.mark.torch
if os.environ.get("FUSEVIEW_REQUIRE_TORCH") == "1":
    import torch  # noqa: F401 - CI installs the extra: a missing torch must fail there, not skip
else:
    torch = pytest.importorskip("torch")


def scaled_gelu(x, w):
    h = torch.nn.functional.gelu(x @ w)
    return torch.nn.functional.layer_norm(h, (h.shape[-1],)) * 2.0


def test_compare_compile_writes_a_folder_fuseview_opens(tmp_path, capsys):
    from fuseview.capture import compare_compile

    torch.manual_seed(0)
    x, w = torch.randn(16, 32), torch.randn(32, 32)
    out = compare_compile(scaled_gelu, (x, w), tmp_path / "cap", steps=4, warmup=2)
    assert f"fuseview trace {out}" in capsys.readouterr().out
    info = json.loads((out / "capture.json").read_text())
    assert info["steps"] == 4 and info["first_call_s"] > 0
    assert list((out / "torch_trace").glob("*.log"))
    report = tmp_path / "r.json"
    assert main(["trace", str(out), "--json", str(report)]) == 0
    text = capsys.readouterr().out
    assert "compiled kernels by Inductor's provenance" in text
    kernels = load_report(report)["diff"]["fused_kernels"]
    fused = [k for k in kernels if k["kind"] == "fused"]
    assert fused and all(k["attribution"] == "provenance" for k in kernels)
    # the kernels come from this file's lines, and the eager ops they replaced were found
    lines = {s["line"] for k in fused for s in k["provenance"]["source"] if s["file"] == __file__}
    assert lines and {"aten::gelu", "aten::layer_norm"} <= {m for k in fused for m in k["matched_before"]}
    assert all(s["code"] for k in fused for s in k["provenance"]["source"])


def test_compare_compile_refuses_bad_arguments(tmp_path):
    from fuseview.capture import compare_compile
    from fuseview.errors import FuseviewError

    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(FuseviewError, match="not a folder"):
        compare_compile(scaled_gelu, (torch.ones(2, 2), torch.ones(2, 2)), f)
    with pytest.raises(FuseviewError, match="at least 1"):
        compare_compile(scaled_gelu, (torch.ones(2, 2), torch.ones(2, 2)), tmp_path / "d", steps=0)
