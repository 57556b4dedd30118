"""The profile headline is measured at the deployment's onnxruntime level (default all); the per-node
profile keeps onnxruntime's optimizations off; an interval too wide to say anything says so."""

from __future__ import annotations

import onnx

from fuseview.cli import main
from fuseview.runtime import samples
from fuseview.runtime.report import cannot_tell, load_report, verdict_line

from .test_ab_verdict import with_noop_chain


def test_default_headline_is_at_ort_all_and_attribution_at_disabled(tmp_path, capsys):
    base = samples.gelu_original(hidden=16, inner=32)
    a, slow, out = tmp_path / "a.onnx", tmp_path / "slow.onnx", tmp_path / "r.json"
    onnx.save(base, a)
    onnx.save(with_noop_chain(base, 400), slow)
    rc = main(["profile", str(a), "--against", str(slow), "--runs", "40", "--threads", "1", "--profile-runs",
               "3", "--dim", "seq=8", "--json", str(out), "--quiet", "--threshold", "0.05"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    (line,) = [ln for ln in cap.out.splitlines() if ln.startswith("verdict: ")]
    # the verdict's own clause names the level; on a busy machine "cannot tell" adds its interval after it
    level = "at onnxruntime optimization all"
    busy = f"verdict: cannot tell on this machine now, {level} ("
    assert line.endswith(level) or line.startswith(busy), line
    # onnxruntime's own optimizer drops the 400 Identity nodes: where it deploys, they cost nothing
    assert "slower" not in line.split(":")[1], line
    assert "latency at ort optimization all, per-node times at disabled (optimizations off" in cap.out
    rep = load_report(out)
    assert rep["comparison"]["latency"]["ort_opt"] == "all"
    assert [m["ort_opt_level"] for m in rep["models"]] == ["disabled", "disabled"]
    assert [m["latency_ort_opt"] for m in rep["models"]] == ["all", "all"]
    # the per-node profile still has the model's own nodes: the padded one shows its Identity chain
    slow_ops = {o["op_type"]: o["nodes"] for o in rep["models"][1]["op_types"]}
    assert slow_ops.get("Identity") == 400


def _lat(lo: float, hi: float, threshold: float = 0.02) -> dict:
    return {"ci": [lo, hi], "threshold": threshold, "level": 0.95, "speedup_p50": (lo * hi) ** 0.5,
            "verdict": "no difference", "runs": 30, "method": "interleaved", "ort_opt": "all",
            "noise": {"cv_model": 0.3, "cv_against": 0.3, "warning": None, "cv_paired": 0.4}}


def test_an_interval_holding_1_and_reaching_past_the_threshold_cannot_tell():
    wide = _lat(0.6, 1.7)
    assert cannot_tell(wide)
    assert not cannot_tell({**wide, "verdict": "faster", "ci": [1.3, 2.2]})  # excludes 1: it tells
    line = verdict_line({"comparison": {"latency": wide}})
    assert line.startswith("verdict: cannot tell on this machine now, at onnxruntime optimization all (")
    assert "0.60x" in line and "1.70x" in line and "quieter machine" in line  # the interval and a remedy
    # [0.9, 1.1] holds 1 and reaches 10 % past it: no verdict (the old span rule called it "no difference")
    assert cannot_tell(_lat(0.9, 1.1))
    assert not cannot_tell(_lat(0.99, 1.015))
    assert verdict_line({"comparison": {"latency": _lat(0.99, 1.015)}}).startswith("verdict: no difference")
