"""The IR version for models fuseview builds itself: onnx's newest, clamped to what onnxruntime reads.

pip installs onnx and onnxruntime independently, so onnx.helper.make_model often stamps an IR version
the installed onnxruntime refuses ("Unsupported model IR version: 14, max supported IR version: 13").
Models read from a file keep their own IR version; only the ones built here go through `clamp_ir`.
"""

from __future__ import annotations

import functools
import re

# The oldest IR onnxruntime ever read; the probe stops there.
_OLDEST_IR = 3
_MAX_RE = re.compile(r"max supported IR version:\s*(\d+)")


def _tiny_model(ir: int) -> bytes:
    import onnx
    from onnx import helper

    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "ir_probe",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=ir)
    return model.SerializeToString()


def _accepts(ir: int) -> tuple[bool, int | None]:
    import onnxruntime as ort

    try:
        ort.InferenceSession(_tiny_model(ir), providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph classes
        found = _MAX_RE.search(str(exc))
        return False, int(found.group(1)) if found else None
    return True, None


@functools.lru_cache(maxsize=1)
def max_ir_version() -> int:
    """The newest IR version the installed onnx writes and the installed onnxruntime reads (cached)."""
    import onnx

    ir = int(onnx.IR_VERSION)
    while ir > _OLDEST_IR:
        ok, stated = _accepts(ir)
        if ok:
            return ir
        # onnxruntime's message names its maximum; trust it only after a session on it loads.
        ir = stated if stated is not None and stated < ir else ir - 1
    return ir


def clamp_ir(wanted: int | None = None) -> int:
    """The IR to stamp on a model fuseview builds: wanted (default onnx's newest), at most onnxruntime's."""
    ceiling = max_ir_version()
    return ceiling if wanted is None else min(int(wanted), ceiling)

