"""The float types the rules fuse (float32 and float16) and what a model's compute type is.

A rule's fused op takes its inputs in the model's own float type; which provider has a kernel for that
type is the kernel table's to say (fusion.kernels). float16 exports wrap some work in Casts (norms computed
in float32, fp16 -> fp16 no-op Casts left by converters): a Cast between two float types is a float Cast.
"""

from __future__ import annotations

import numpy as np
import onnx

FLOAT = onnx.TensorProto.FLOAT
FLOAT16 = onnx.TensorProto.FLOAT16
FLOATS = (FLOAT, FLOAT16)
NAMES: dict[int, str] = {FLOAT: "float32", FLOAT16: "float16"}


def is_float(elem: int | None) -> bool:
    """Whether an onnx element type is one the rules fuse (float32 or float16)."""
    return elem in FLOATS


def np_dtype(elem: int | None) -> type[np.floating]:
    """The numpy type of a fused float type (float32 when unknown)."""
    return np.float16 if elem == FLOAT16 else np.float32


def type_name(elem: int | None) -> str:
    """float32 / float16 / the onnx name of another element type."""
    if elem in NAMES:
        return NAMES[elem]
    return "unknown" if not elem else onnx.TensorProto.DataType.Name(elem)


def lowest(elem: int | None) -> float:
    """The most negative finite value of the type (a mask fill that stays finite)."""
    return float(np.finfo(np_dtype(elem)).min)


def model_float_type(model: onnx.ModelProto) -> int:
    """FLOAT16 when most float weights of the main graph are float16 (an fp16 model), else FLOAT."""
    from fuseview.precision import precision

    return FLOAT16 if precision(model) == "float16" else FLOAT
