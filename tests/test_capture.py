"""fuseview.capture.compare_compile on a real function (needs torch: .ci/run installs the [torch] extra)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from fuseview.cli import main
from fuseview.errors import FuseviewError
from fuseview.traces.report import load_report

pytestmark = pytest.mark.torch
if os.environ.get("FUSEVIEW_REQUIRE_TORCH") == "1":
    import torch  # noqa: F401 - CI installs the extra: a missing torch must fail there, not skip
else:
    torch = pytest.importorskip("torch")


EARLIER = Path(__file__).parent / "data" / "traces" / "provenance" / "mlp_block"


def scaled_gelu(x, w):
    h = torch.nn.functional.gelu(x @ w)
    return torch.nn.functional.layer_norm(h, (h.shape[-1],)) * 2.0


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_compare_compile_writes_a_folder_fuseview_opens(tmp_path, capsys):
    from fuseview.capture import compare_compile

    torch.manual_seed(0)
    x, w = torch.randn(16, 32), torch.randn(32, 32)
    shutil.copytree(EARLIER, tmp_path / "cap")  # an earlier capture there: replaced whole, never mixed
    old_logs = {p.name for p in (tmp_path / "cap" / "torch_trace").glob("*.log")}
    out = compare_compile(scaled_gelu, (x, w), tmp_path / "cap", steps=4, warmup=2)
    assert f"fuseview trace {out}" in capsys.readouterr().out
    logs = list((out / "torch_trace").glob("*.log"))
    assert len(logs) == 1 and logs[0].name not in old_logs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap"]  # no temp folder left beside it
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
    for bad in ({"steps": 0}, {"warmup": 2.5}, {"steps": True}, {"time_limit_s": float("inf")},
                {"time_limit_s": -1}, {"time_limit_s": "60"}):
        with pytest.raises(FuseviewError, match="must be"):
            compare_compile(scaled_gelu, (torch.ones(2, 2), torch.ones(2, 2)), tmp_path / "d", **bad)
    assert not (tmp_path / "d").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(FuseviewError, match="not an earlier capture"):
        compare_compile(scaled_gelu, (torch.ones(2, 2), torch.ones(2, 2)), tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _fails_in(calls: int):
    """A function that fails on its calls-th call (after working before)."""
    count = [0]

    def f(x):
        count[0] += 1
        if count[0] >= calls:
            raise RuntimeError("the user's function failed")
        return torch.relu(x)

    return f


def _slow(x):
    time.sleep(0.4)
    return x + 1


def _very_slow(x):
    time.sleep(30)
    return x + 1


@pytest.mark.parametrize(("fn", "kwargs", "error"), [
    (_fails_in(2), {}, RuntimeError),  # fails in the eager warm-up
    (_fails_in(6), {"steps": 2, "warmup": 2}, RuntimeError),  # fails while profiling: eager.json written
    (torch.relu, {"backend": "no_such_backend"}, Exception),  # fails when compiling, after the eager trace
    (_slow, {"time_limit_s": 1.0}, FuseviewError),  # past the time limit between calls
    (_very_slow, {"time_limit_s": 1.0}, FuseviewError),  # past it inside one call: the alarm
], ids=["warm-up", "profiling", "compile", "time limit", "alarm"])
def test_a_failed_capture_leaves_the_earlier_one_whole(tmp_path, fn, kwargs, error):
    from fuseview.capture import compare_compile

    cap = tmp_path / "cap"
    shutil.copytree(EARLIER, cap)
    before = _snapshot(cap)
    t0 = time.monotonic()
    with pytest.raises(error) as exc:
        compare_compile(fn, (torch.ones(4, 4),), cap, **kwargs)
    assert time.monotonic() - t0 < 20
    if error is FuseviewError:
        assert "time limit of 1 s" in str(exc.value)
    assert _snapshot(cap) == before  # the earlier capture's log and traces, byte for byte
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap"]  # and no half-written folder beside it
    fresh = tmp_path / "fresh"
    with pytest.raises(error):
        compare_compile(fn, (torch.ones(4, 4),), fresh, **kwargs)
    assert not fresh.exists()
