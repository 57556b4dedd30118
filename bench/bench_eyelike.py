"""Time 10,000 ReferenceEvaluator runs of the EyeLike ridge-regression example before and after fusing."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from onnx.reference import ReferenceEvaluator

from fuseview.fusion.apply import apply_plan
from fuseview.fusion.plan import Plan
from fuseview.fusion.reference_ops import REFERENCE_OPS
from fuseview.fusion.scan import load_model, scan_model

RUNS = 10_000
MODEL = Path(__file__).resolve().parent.parent / "assets" / "eyelike_linreg.onnx"


def main() -> None:
    """Print run times of the original and the AddEyeLike-fused model, and their max difference."""
    model = load_model(MODEL)
    scan = scan_model(model)
    plan = Plan(scan.candidates)
    plan.accept("add_eyelike")
    fused = apply_plan(model, plan.accepted()).model
    rng = np.random.default_rng(0)
    feeds = {
        "X": rng.standard_normal((32, 4)).astype(np.float32),
        "y": rng.standard_normal((32, 1)).astype(np.float32),
    }
    evs = {"original": ReferenceEvaluator(model), "fused": ReferenceEvaluator(fused, new_ops=REFERENCE_OPS)}
    outs = {}
    for name, ev in evs.items():
        outs[name] = ev.run(None, feeds)[0]
    times = {name: [] for name in evs}
    for _round in range(3):  # interleave to share the machine's noise fairly
        for name, ev in evs.items():
            t = time.perf_counter()
            for _ in range(RUNS // 3 + (1 if _round < RUNS % 3 else 0)):
                ev.run(None, feeds)
            times[name].append(time.perf_counter() - t)
    print(f"model       {MODEL.name}: {len(model.graph.node)} -> {len(fused.graph.node)} nodes")
    for name in evs:
        print(f"{name:<11} {RUNS} ReferenceEvaluator runs: {sum(times[name]):.3f} s")
    ratio = sum(times["original"]) / sum(times["fused"])
    print(
        f"speed-up    {ratio:.2f}x   max |diff| {float(np.max(np.abs(outs['original'] - outs['fused']))):.3g}"
    )


if __name__ == "__main__":
    main()
