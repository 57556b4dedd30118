"""The shortcuts that keep start-up and scans fast give the same answers as the long way."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from fuseview.fusion.kernels import default_provider

ROOT = Path(__file__).resolve().parent.parent
GPT2 = ROOT / "tests" / "data" / "gpt2" / "gpt2_12l_ts17.onnx"


def test_default_provider_agrees_with_onnxruntime() -> None:
    import onnxruntime as ort

    has_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    assert default_provider()[0] == ("cuda" if has_cuda else "cpu")


def _imports_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
                         capture_output=True, text=True, check=True, cwd=ROOT, timeout=120)
    return set(out.stdout.split())


def test_a_cpu_build_is_told_without_importing_onnxruntime() -> None:
    import onnxruntime as ort

    mods = _imports_after("from fuseview.fusion.kernels import default_provider; print(default_provider())")
    if "CUDAExecutionProvider" in ort.get_available_providers():
        assert "onnxruntime" in mods  # a CUDA build is asked
    else:
        assert "onnxruntime" not in mods


def test_reports_are_imported_when_first_named() -> None:
    mods = _imports_after("from fuseview.reports import InfoReport")
    assert "fuseview.reports.model" in mods
    assert not {"fuseview.reports.tune", "fuseview.reports.trace", "fuseview.stats"} & mods
    import fuseview.reports as reports
    from fuseview.reports.tune import TuneReport

    assert reports.TuneReport is TuneReport
    assert set(reports.__all__) == set(reports._MODULE)


def test_candidate_traffic_counts_each_read_of_a_removed_tensor() -> None:
    from fuseview.fusion.scan import scan_file

    result = scan_file(GPT2, provider="cpu")
    checked = 0
    for c in result.candidates:
        if c.match is None or c.saved_bytes is None:
            continue
        nodes = c.match.node_list
        reads = Counter(i for n in nodes for i in n.input)
        want = sum((result.index.nbytes(t) or 0) * (1 + reads[t]) for t in c.removed_tensors)
        # the long way: every node's inputs scanned for each removed tensor
        slow = sum((result.index.nbytes(t) or 0) * (1 + sum(1 for n in nodes for i in n.input if i == t))
                   for t in c.removed_tensors)
        assert c.traffic_bytes == want == slow
        checked += 1
    assert checked > 40


def test_raw_constants_read_as_onnx_reads_them() -> None:
    import numpy as np
    import onnx
    from onnx import numpy_helper

    from fuseview.graph.seeds import raw_array as _to_array

    arrays = [np.array([1, -1, 3], np.int64), np.array(5, np.int64), np.zeros((0,), np.int64),
              np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 2], np.int32), np.array([1.5])]
    tensors = [numpy_helper.from_array(a, "x") for a in arrays]
    tensors.append(onnx.helper.make_tensor("y", onnx.TensorProto.INT64, [2], [4, 5]))  # typed field, not raw
    for t in tensors:
        got, want = _to_array(t), numpy_helper.to_array(t)
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
        assert got.flags.writeable == want.flags.writeable
