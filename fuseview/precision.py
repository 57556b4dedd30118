"""A model's float precision and the output check's tolerances for it: one table for fuse, tune and profile.

float16 rounds every value to 2^-11 of itself: a fused kernel rounding its intermediates elsewhere (or keeping
them in float32) moves the outputs by several such steps, so float16 is judged at 1e-2 where float32 is
judged at 1e-4 / 1e-3 (docs/gpu.md, the tolerance rule).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from fuseview.defaults import ATOL, FP16_ATOL, FP16_RTOL, RTOL

if TYPE_CHECKING:
    import onnx

# The output check's (atol, rtol) per float type of the model checked.
TOLERANCES: dict[str, tuple[float, float]] = {"float32": (ATOL, RTOL), "float16": (FP16_ATOL, FP16_RTOL)}
_FLOAT, _FLOAT16 = 1, 10  # onnx.TensorProto.FLOAT, FLOAT16 (stable in the ONNX standard)


def precision(model: onnx.ModelProto) -> str:
    """'float16' when most float weights of the main graph are float16 (an fp16 model), else 'float32'."""
    counts = {_FLOAT: 0, _FLOAT16: 0}
    for t in model.graph.initializer:
        if t.data_type in counts:
            counts[t.data_type] += max(1, math.prod(t.dims))
    return "float16" if counts[_FLOAT16] > counts[_FLOAT] else "float32"


def tolerances(model: onnx.ModelProto, atol: float | None = None, rtol: float | None = None
               ) -> tuple[str, float, float]:
    """(precision, atol, rtol) of the model's output check: those given, else its precision's TOLERANCES."""
    kind = precision(model)
    default_atol, default_rtol = TOLERANCES[kind]
    return kind, default_atol if atol is None else atol, default_rtol if rtol is None else rtol
