"""A model newer than the installed onnxruntime reads: said once, in one whole line naming the file and
"max supported IR version", before any work (not as a failed run blamed on dims or on a fused model)."""

from __future__ import annotations

import functools
import os
import re

from fuseview.errors import FuseviewError

_ORT_TEXT = re.compile(r"Unsupported model IR version: (\d+), max supported IR version: (\d+)")


class IRVersionError(FuseviewError):
    """The model's IR version is above what this onnxruntime reads."""

    whole_line = True  # the CLI never cuts it: the figures are its end


def ir_message(where: str, ir: int | str, most: int | str) -> str:
    """The one line for a model at IR version `ir` where onnxruntime reads up to `most`."""
    import onnxruntime as ort

    return (f"{where}: IR version {ir} is newer than onnxruntime {ort.__version__} reads (max supported IR"
            f" version {most}); save the model with an older onnx (model.ir_version = {most} if its opsets"
            " allow) or install a newer onnxruntime")


def from_ort_error(where: str, text: str) -> IRVersionError | None:
    """The IRVersionError an onnxruntime load error stands for, or None when it is about something else."""
    m = _ORT_TEXT.search(text)
    return IRVersionError(ir_message(where, m[1], m[2])) if m else None


@functools.lru_cache(maxsize=1)
def max_ir_version() -> int | None:
    """The highest IR version the installed onnxruntime loads (asked of it once), None if it will not say."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 1 << 20  # onnxruntime refuses it and names its own maximum
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types
        m = _ORT_TEXT.search(str(exc))
        return int(m[2]) if m else None
    return None


def file_ir_version(path: str | os.PathLike) -> int | None:
    """A model file's ir_version from its first bytes (onnx writes field 1 first), None if not there."""
    try:
        with open(path, "rb") as f:
            head = f.read(11)
    except OSError:
        return None
    if not head or head[0] != 0x08:  # field 1, varint
        return None
    value, shift = 0, 0
    for b in head[1:]:
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7
    return None


def check_ir_version(path: str | os.PathLike) -> None:
    """IRVersionError naming the file when onnxruntime cannot read its IR version."""
    ir = file_ir_version(path)
    if ir is None:
        return
    most = max_ir_version()
    if most is not None and ir > most:
        raise IRVersionError(ir_message(str(path), ir, most))
