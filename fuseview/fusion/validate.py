"""Run the original and the fused model on the same inputs and measure the difference per output."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from fuseview.fusion.reference_ops import REFERENCE_OPS
from fuseview.runtime.inputs import make_feeds

ATOL = 1e-4
RTOL = 1e-3


@dataclass
class OutputDiff:
    """Max absolute and relative difference of one graph output."""

    name: str
    max_abs: float
    max_rel: float
    ok: bool


@dataclass
class Validation:
    """How the fused model compares with the original on generated inputs."""

    engine: str  # "onnxruntime" or "reference"
    outputs: list[OutputDiff]

    @property
    def ok(self) -> bool:
        """True when every output is within tolerance."""
        return all(o.ok for o in self.outputs)

    def to_json(self) -> dict:
        """JSON-ready summary."""
        return {
            "engine": self.engine,
            "ok": self.ok,
            "outputs": [
                {"name": o.name, "max_abs": o.max_abs, "max_rel": o.max_rel, "ok": o.ok} for o in self.outputs
            ],
        }


def run_model(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], reference: bool, base_dir: str | None = None
) -> list[np.ndarray]:
    """Outputs of a model: onnxruntime CPU with its graph optimizations off, or the reference evaluator."""
    if reference:
        from onnx.reference import ReferenceEvaluator

        return [np.asarray(x) for x in ReferenceEvaluator(model, new_ops=REFERENCE_OPS).run(None, feeds)]
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 4  # fatal only: errors reach the user as one line
    data = model.SerializeToString()
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return [np.asarray(x) for x in sess.run(None, feeds)]


def compare_outputs(names: list[str], a: list[np.ndarray], b: list[np.ndarray]) -> list[OutputDiff]:
    """Max abs / rel difference per output (b relative to reference a)."""
    diffs = []
    for name, x, y in zip(names, a, b, strict=True):
        if x.shape != y.shape:
            diffs.append(OutputDiff(name, float("inf"), float("inf"), False))
            continue
        if x.dtype.kind not in "fc":
            same = bool(np.array_equal(x, y))
            diffs.append(OutputDiff(name, 0.0 if same else float("inf"), 0.0 if same else float("inf"), same))
            continue
        xd, yd = x.astype(np.float64), y.astype(np.float64)
        d = np.abs(xd - yd)
        max_abs = float(d.max()) if d.size else 0.0
        max_rel = float((d / np.maximum(np.abs(xd), 1e-6)).max()) if d.size else 0.0
        ok = bool(np.allclose(yd, xd, rtol=RTOL, atol=ATOL, equal_nan=True))
        diffs.append(OutputDiff(name, max_abs, max_rel, ok))
    return diffs


def validate(
    original: onnx.ModelProto,
    fused: onnx.ModelProto,
    reference_only: bool,
    dims: dict[str, int] | None = None,
    seed: int = 0,
) -> Validation:
    """Run both models on the same generated inputs (reference evaluator if reference-only ops are in)."""
    feeds = make_feeds(original, dims, seed=seed)
    names = [o.name for o in original.graph.output]
    a = run_model(original, feeds, reference_only)
    b = run_model(fused, feeds, reference_only)
    return Validation("reference" if reference_only else "onnxruntime", compare_outputs(names, a, b))
