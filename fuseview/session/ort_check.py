"""The size guard of the window's onnxruntime own-fusions check (Session.start_ort_check)."""

from __future__ import annotations

from pathlib import Path

import onnx

from fuseview.errors import FuseviewError

# onnxruntime loads every weight to optimize a graph: past this the window skips its own-fusions check
ORT_CHECK_WEIGHT_LIMIT = 1 << 30


def ort_check_fits(model: onnx.ModelProto, folder: Path | None, path: Path | None) -> None:
    """FuseviewError (the window's status line) when the weights onnxruntime would load for the check are
    over ORT_CHECK_WEIGHT_LIMIT: the window opens a model lazily and stays small; the CLI runs it on ask."""
    from fuseview.graph.lazy_weights import weight_bytes
    from fuseview.units import format_bytes

    size = weight_bytes(model, folder)
    if size > ORT_CHECK_WEIGHT_LIMIT:
        raise FuseviewError(
            f"not checked: onnxruntime would load {format_bytes(size)} of weights, over the window's "
            f"{format_bytes(ORT_CHECK_WEIGHT_LIMIT)}; "
            f"`fuseview scan --ort-check all {path or 'MODEL'}` runs it"
        )
