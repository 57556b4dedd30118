"""What the profiling panel reads from a report: |diff| histograms (compare.py, report.py) and plot rows."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fuseview.errors import FuseviewError
from fuseview.runtime.compare import HIST_EDGES, diff_histogram, tensor_diff
from fuseview.runtime.report import load_report, validate
from fuseview.ui.profile_plots import (
    FUSED,
    ORIGINAL,
    fusion_rows,
    model_roles,
    node_labels,
    op_type_rows,
    strip_common_scope,
)


def test_diff_histogram_counts_zeros_and_decades():
    d = np.array([0.0, 0.0, 0.0, 3e-13, 1.5e-7, 9e-7, 2e-4, 0.5, 7.0, 1e5, np.inf])
    h = diff_histogram(d)
    assert h["edges"] == HIST_EDGES and len(h["counts"]) == len(HIST_EDGES) - 1
    assert h["zero"] == 3
    decade = {round(np.log10(lo)): c for lo, c in zip(h["edges"], h["counts"], strict=False)}
    assert decade[-12] == 1  # 3e-13 is below the first edge: counted in the first bin
    assert decade[-7] == 2 and decade[-4] == 1 and decade[-1] == 1 and decade[0] == 1
    assert decade[1] == 2  # 1e5 and inf go to the last bin
    assert h["zero"] + sum(h["counts"]) == d.size


def test_tensor_diff_carries_the_histogram():
    ref = np.linspace(-1, 1, 1000, dtype=np.float32)
    got = ref.copy()
    got[:10] += np.float32(1e-3)
    h = tensor_diff(ref, got, 1e-4, 1e-3)["abs_diff_hist"]
    assert h["zero"] == 990 and sum(h["counts"]) == 10
    assert "abs_diff_hist" not in tensor_diff(ref, ref[:5], 1, 1)  # shapes differ: nothing to count


def _report(outputs: dict) -> dict:
    model = {
        "role": "model",
        "path": None,
        "provider": {},
        "ort_opt_level": "disabled",
        "runs": 1,
        "warmup": 0,
        "latency_ms": {"mean": 1.0, "p50": 1.0, "p90": 1.0},
        "run_us": {"mean": 1.0, "p50": 1.0, "p90": 1.0},
        "node_sum_us": {"mean": 1.0, "p50": 1.0, "p90": 1.0},
        "nodes": [],
        "op_types": [],
        "cuda_kernel_events": False,
    }
    return {
        "schema_version": 1,
        "kind": "fuseview.profile",
        "created": "now",
        "environment": {
            "onnxruntime": "1",
            "providers": [],
            "cpu": None,
            "gpu": None,
            "platform": "x",
            "python": "3",
        },
        "inputs": {"source": "generated", "seed": 0, "dims": {}, "feeds": []},
        "models": [model, {**model, "role": "against"}],
        "comparison": {"atol": 0, "rtol": 0, "outputs": outputs, "passed": True, "fusions": []},
    }


@pytest.mark.parametrize(
    "hist, needle",
    [
        ({"zero": 1, "edges": [1e-3, 1e-2], "counts": [1, 2]}, "counts must be 1 counts"),
        ({"zero": 1, "edges": [1e-2, 1e-3], "counts": [1]}, "positive and increasing"),
        ({"zero": 1, "edges": [0, 1e-3], "counts": [1]}, "positive and increasing"),
        ({"zero": "1", "edges": [1e-3, 1e-2], "counts": [1]}, "zero has the wrong type"),
        ({"edges": [1e-3, 1e-2], "counts": [1]}, "has no 'zero'"),
        ({"zero": 0, "edges": [1e-3, 1e-2], "counts": [-1]}, "counts must be"),
    ],
)
def test_bad_histograms_are_refused(hist, needle):
    with pytest.raises(FuseviewError, match=needle):
        validate(_report({"y": {"abs_diff_hist": hist}}))


def test_histogram_is_optional_and_round_trips(tmp_path):
    good = diff_histogram(np.array([0.0, 1e-6]))
    validate(_report({"y": {"max_abs": 0.0}}))  # a version-1 report from before histograms
    p = tmp_path / "r.json"
    p.write_text(json.dumps(_report({"y": {"abs_diff_hist": good}})))
    assert load_report(p)["comparison"]["outputs"]["y"]["abs_diff_hist"] == good


def test_roles_and_rows():
    rep = _report({})
    rep["models"][0]["op_types"] = [
        {"op_type": "MatMul", "provider": "CUDAExecutionProvider", "p50_us": 5.0},
        {"op_type": "MatMul", "provider": "CPUExecutionProvider", "p50_us": 1.0},
        {"op_type": "Add", "provider": "CPUExecutionProvider", "p50_us": 2.0},
    ]
    rep["models"][1]["op_types"] = [{"op_type": "Fused", "provider": "CPUExecutionProvider", "p50_us": 3.0}]
    assert model_roles(rep) == [ORIGINAL, FUSED]
    ops, times = op_type_rows(rep)
    assert ops == ["MatMul", "Fused", "Add"]
    assert times == {ORIGINAL: [6.0, None, 2.0], FUSED: [None, 3.0, None]}
    t = {"node": "/m/h.0/F", "op_type": "F", "fused_p50_us": 1.0, "original_p50_us": 4.0}
    rep["comparison"]["reverse_fusion_times"] = [t, {**t, "node": "/m/h.1/F", "original_p50_us": 9.0}]
    assert model_roles(rep) == [FUSED, ORIGINAL]
    rows = fusion_rows(rep)
    assert [r.fused_node for r in rows] == ["/m/h.1/F", "/m/h.0/F"] and rows[0].label == "F  h.1/F"
    assert strip_common_scope(["/a/b/c", "/a/b/d/e"]) == ["c", "d/e"]
    assert strip_common_scope(["/a/x"]) == ["x"]


def test_node_labels():
    nodes = [
        {"name": "/m/t/h.0/attn/MultiHeadAttention_fused", "op_type": "MultiHeadAttention"},
        {"name": "/m/t/h.0/attn/node_7", "op_type": "Softmax"},
    ]
    assert node_labels(nodes) == ["MultiHeadAttention_fused", "Softmax  node_7"]  # shared scope dropped
