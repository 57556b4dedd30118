"""`fuseview info` builds a lean document (inner tensors' unknown dims left unnamed): its report must be the
full document's, byte for byte, on every model of the repository, refused models' errors included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuseview.errors import FuseviewError
from fuseview.graph.loader import load_document
from fuseview.reports import InfoReport

ROOT = Path(__file__).resolve().parent.parent
MODELS = sorted(p for d in ("tests/data", "assets/models") for p in (ROOT / d).rglob("*.onnx"))


def _info(path: Path, inner_dims: bool) -> str:
    try:
        doc = load_document(path, inner_dims=inner_dims)
    except FuseviewError as exc:
        return f"error: {exc}"
    return json.dumps(InfoReport.of(doc).to_json(), indent=1)


def test_models_found() -> None:
    assert len(MODELS) >= 20


@pytest.mark.slow  # 77 models, ~20 s of CPU
@pytest.mark.parametrize("path", MODELS, ids=lambda p: str(p.relative_to(ROOT)))
def test_lean_info_is_the_full_one(path: Path) -> None:
    assert _info(path, inner_dims=False) == _info(path, inner_dims=True)


def test_lean_skips_only_what_info_does_not_show(tmp_path: Path) -> None:
    """A graph output onnx cannot shape (after a contrib op) is still named by fuseview's propagation."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gelu", ["x"], ["r"], domain="com.microsoft"),
             helper.make_node("Reshape", ["r", "s"], ["y"])]
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=opsets), path)
    lean = InfoReport.of(load_document(path, inner_dims=False))
    assert lean.outputs == [{"name": "y", "dtype": "float32", "shape": ["n", 4]}]
    assert lean.outputs == InfoReport.of(load_document(path)).outputs
