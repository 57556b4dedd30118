"""Build assets/eyelike_linreg.onnx: ridge regression by a few gradient steps on (X^T X + lambda*I) w = X^T y.

The regularised normal matrix is written the way exporters write it, Add(A, Mul(EyeLike(A), lambda)), which is
what fuseview's add_eyelike rule fuses into one reference-only AddEyeLike op. Uses onnx.helper only.

Requires: onnx
"""

from __future__ import annotations

import sys
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest
import onnx
from onnx import TensorProto, helper

STEPS = 3


def build(lam: float = 0.1, lr: float = 0.01) -> onnx.ModelProto:
    """The linear-regression model (X [n, d], y [n, 1]) -> w [d, 1]."""
    nodes = [
        helper.make_node("Transpose", ["X"], ["Xt"], name="Xt", perm=[1, 0]),
        helper.make_node("MatMul", ["Xt", "X"], ["A"], name="XtX"),
        helper.make_node("EyeLike", ["A"], ["I"], name="eye"),
        helper.make_node("Mul", ["I", "lambda"], ["lamI"], name="lambda_eye"),
        helper.make_node("Add", ["A", "lamI"], ["R"], name="ridge"),
        helper.make_node("MatMul", ["Xt", "y"], ["b"], name="Xty"),
        helper.make_node("Mul", ["b", "lr"], ["w1"], name="step1"),
    ]
    w = "w1"
    for k in range(2, STEPS + 2):
        nodes += [
            helper.make_node("MatMul", ["R", w], [f"Rw{k}"], name=f"Rw{k}"),
            helper.make_node("Sub", [f"Rw{k}", "b"], [f"g{k}"], name=f"grad{k}"),
            helper.make_node("Mul", [f"g{k}", "lr"], [f"d{k}"], name=f"scale{k}"),
            helper.make_node("Sub", [w, f"d{k}"], [f"w{k}"], name=f"step{k}"),
        ]
        w = f"w{k}"
    nodes.append(helper.make_node("Identity", [w], ["w"], name="out"))
    graph = helper.make_graph(
        nodes,
        "ridge_regression",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", 4]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1]),
        ],
        [helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 1])],
        [
            helper.make_tensor("lambda", TensorProto.FLOAT, [], [lam]),
            helper.make_tensor("lr", TensorProto.FLOAT, [], [lr]),
        ],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8, producer_name="fuseview-scripts"
    )
    onnx.checker.check_model(model, full_check=True)
    return model


if __name__ == "__main__":
    out = Path(
        sys.argv[1]
        if len(sys.argv) > 1
        else Path(__file__).resolve().parent.parent / "assets" / "eyelike_linreg.onnx"
    )
    onnx.save_model(build(), str(out))
    print(f"wrote {out}")
