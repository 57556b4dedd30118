"""Models fuseview builds itself load in the installed onnxruntime when onnx is newer (#35 item 1)."""

from __future__ import annotations

from collections.abc import Iterator

import onnx
import onnxruntime as ort
import pytest

from fuseview.runtime import ir_version, machine, profiling, samples


@pytest.fixture
def onnx_newer(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """onnx claims an IR version one past what this onnxruntime reads: the probe must step back."""
    ir_version.max_ir_version.cache_clear()
    newer = int(onnx.IR_VERSION) + 1
    monkeypatch.setattr(onnx, "IR_VERSION", newer)
    yield newer
    ir_version.max_ir_version.cache_clear()


def _loads(model: onnx.ModelProto) -> None:
    ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_probe_clamps_to_what_onnxruntime_reads(onnx_newer: int) -> None:
    with pytest.raises(Exception, match="IR version"):
        _loads(onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []), ir_version=onnx_newer))
    ceiling = ir_version.max_ir_version()
    assert ceiling < onnx_newer
    assert ir_version.clamp_ir() == ceiling
    assert ir_version.clamp_ir(5) == 5
    assert ir_version.clamp_ir(onnx_newer) == ceiling


def test_every_built_model_loads(onnx_newer: int) -> None:
    ceiling = ir_version.max_ir_version()
    built = [profiling.noop_chain(4), machine._matmul_model(8), machine._add_model(8),
             samples.slow_node_model(8, 4)]
    for model in built:
        assert model.ir_version <= ceiling
        _loads(model)
