"""GELU family: erf/tanh-GELU -> Gelu/FastGelu, bias variants (also Add + ONNX Gelu), SiLU -> QuickGelu."""

from __future__ import annotations

import math

import numpy as np
import onnx

from fuseview.fusion.rule import MS_DOMAIN, ONNX_DOMAIN, Match, Miss, Replacement, Rule
from fuseview.fusion.rules._common import (
    all_checks,
    float_input,
    last_axis_vector,
    linear_3d,
    linear_3d_check,
    linear_3d_matmul,
    scalar,
)

SQRT2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _erf_core(op, x):
    scaled = op.Or(op.Div(x, op.const(SQRT2)), op.Mul(x, op.const(1.0 / SQRT2)))
    return op.Add(op.Erf(scaled), op.const(1.0))


def _tanh_core(op, x):
    cube = op.Or(op.Pow(x, op.const(3.0)), op.Mul(op.Mul(x, x), x))
    inner = op.Add(x, op.Mul(cube, op.const(0.044715)))
    return op.Add(op.Tanh(op.Mul(inner, op.const(SQRT_2_OVER_PI))), op.const(1.0))


def _half_x_core(op, x, core):
    """0.5 * x * core(x) in any of its three bracketings (operand order inside each Mul is free)."""
    c, half = core(op, x), op.const(0.5)
    return op.Or(op.Mul(op.Mul(x, c), half), op.Mul(op.Mul(x, half), c), op.Mul(x, op.Mul(c, half)))


def _gelu_erf(op, x):
    return _half_x_core(op, x, _erf_core)


def _bias_gelu_erf(op, x0, bias):
    return _half_x_core(op, op.Add(x0, bias, _label="bias_add"), _erf_core)


def _linear_gelu_erf(op, x0):
    # A separate pattern (not an op.Or with the bias Add): its size sets the near-miss threshold.
    return _half_x_core(op, linear_3d(op, x0), _erf_core)


def _fast_gelu(op, x):
    return _half_x_core(op, x, _tanh_core)


def _bias_fast_gelu(op, x0, bias):
    return _half_x_core(op, op.Add(x0, bias, _label="bias_add"), _tanh_core)


def _linear_fast_gelu(op, x0):
    return _half_x_core(op, linear_3d(op, x0), _tanh_core)


def _onnx_gelu(approximate: str):
    """Add(bias) + the ONNX Gelu op (opset 20, dynamo exports) with the given approximation."""

    def fn(op, x0, bias):
        return op.Gelu(
            op.Add(x0, bias, _label="bias_add"),
            _label="gelu",
            _attrs={"approximate": approximate},
            _defaults={"approximate": "none"},
        )

    fn.__name__ = f"add_onnx_gelu_{approximate}"
    return fn


def _bias_check(m):
    if "gemm" in m.nodes:
        return linear_3d_check(m)
    if m.value("bias") is None:
        return f"{m['bias']} is not a constant bias"
    return last_axis_vector(m, "bias", "x0")


def _bias_replace(m):
    if "gemm" in m.nodes:
        mm, out = linear_3d_matmul(m, m["x0"])
        return [mm, Replacement([out, m["bias"]])]
    return Replacement([m["x0"], m["bias"]])


def _quick_gelu(op, x):
    """x * sigmoid(alpha * x); without the scale it is SiLU / Swish (alpha = 1)."""
    return op.Mul(x, op.Sigmoid(op.Optional(op.Mul(x, op.constant("alpha"), _label="scale"), x)))


def _quick_alpha(m) -> float | None:
    return scalar(m, "alpha") if "scale" in m.nodes else 1.0


def _quick_check(m):
    a = _quick_alpha(m)
    if a is None:
        return f"{m['alpha']} is not a scalar constant"
    if a <= 0:
        return f"sigmoid scale {a:g} is not positive"
    return None


# ------------------------------------------------------------------------------- HardSigmoid / HardSwish
def const_through_cast(index, tensor: str) -> np.ndarray | None:  # noqa: ANN001
    """A constant's value, also through a Cast of a constant (TorchScript writes Clip bounds so)."""
    v = index.const_value(tensor)
    prod = index.producer.get(tensor)
    if v is None and prod is not None and prod[0].op_type == "Cast":
        src = index.const_value(prod[0].input[0])
        to = index.attr(prod[0], "to")
        if src is not None and to:
            v = src.astype(onnx.helper.tensor_dtype_to_np_dtype(to))
    return v


def clip_bounds(m: Match, label: str) -> tuple[float | None, float | None]:
    """Clip's (min, max) from its constant inputs (opset >= 11) or attributes; None where unbounded or
    not a constant (then ``nan``)."""
    node = m.node(label)
    lo = m.attr(label, "min", None)
    hi = m.attr(label, "max", None)
    for pos in (1, 2):
        if len(node.input) > pos and node.input[pos]:
            v = const_through_cast(m.index, node.input[pos])
            val = float("nan") if v is None or v.size != 1 else float(np.ravel(v)[0])
            lo, hi = (val, hi) if pos == 1 else (lo, val)
    return lo, hi


def _shifted_clip(op, x):
    """Clip(x + shift, lo, hi) (bounds as inputs from opset 11, attributes before)."""
    shifted = op.Add(x, op.constant("shift"), _label="shift_add")
    return op.Clip(shifted, op.opt(op.var("lo")), op.opt(op.var("hi")), _label="clip")


def _relu6_shifted(op, x):
    """Clip(x + shift, 0, top) / top (or * 1/top): a HardSigmoid written out."""
    return op.AnyOp(("Div", "Mul"), _shifted_clip(op, x), op.constant("top"), _label="scale")


def _hard_sigmoid(op, x):
    return _relu6_shifted(op, x)


def _hard_swish(op, x):
    gate = op.Or(op.HardSigmoid(x, _label="hsig"), _relu6_shifted(op, x))
    # x * gate, or (x * Clip(x + 3, 0, 6)) / 6 as MobileNetV3 code writes it.
    inner = op.Mul(x, _shifted_clip(op, x), _label="gate_mul")
    scaled = op.AnyOp(("Div", "Mul"), inner, op.constant("top"), _label="scale")
    return op.Or(op.Mul(x, gate, _label="gate_mul"), scaled)


def _hard_params(m: Match) -> tuple[float, float] | str:
    """(alpha, beta) of the HardSigmoid the match computes, or the reason it is not one."""
    if "hsig" in m.nodes:
        return float(m.attr("hsig", "alpha", 0.2)), float(m.attr("hsig", "beta", 0.5))
    lo, hi = clip_bounds(m, "clip")
    shift, top = scalar(m, "shift"), scalar(m, "top")
    if shift is None or top is None:
        return "the shift and the scale must be scalar constants"
    if m.node("scale").op_type == "Mul":
        top = 1.0 / top if top else 0.0
    if lo != 0.0 or hi is None or top <= 0 or abs(hi - top) > 1e-5 * top:
        return f"Clip({lo}, {hi}) then / {top:g} is not a 0..1 gate"
    return 1.0 / top, shift / top


def _hard_sigmoid_check(m: Match) -> str | None:
    p = _hard_params(m)
    return p if isinstance(p, str) else None


def _hard_swish_check(m: Match) -> str | None:
    p = _hard_params(m)
    if isinstance(p, str):
        return p
    alpha, beta = p
    if abs(alpha - 1 / 6) > 1e-5 or abs(beta - 0.5) > 1e-5:
        return f"gate is HardSigmoid(alpha={alpha:g}, beta={beta:g}); HardSwish needs 1/6 and 0.5"
    return None


def _hard_sigmoid_replace(m: Match) -> Replacement:
    params = _hard_params(m)
    if isinstance(params, str):
        raise Miss(params)
    alpha, beta = params
    return Replacement([m["x"]], {"alpha": alpha, "beta": beta})


RULES = [
    Rule(
        name="gelu_erf",
        description="0.5*x*(1+erf(x/sqrt(2))) -> Gelu",
        fused_op="Gelu",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_gelu_erf,),
        check=float_input("x"),
        priority=10,
        replace=lambda m: Replacement([m["x"]]),
    ),
    Rule(
        name="bias_gelu_erf",
        description="Add(bias) then erf-GELU or ONNX Gelu -> BiasGelu",
        fused_op="BiasGelu",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_bias_gelu_erf, _linear_gelu_erf, _onnx_gelu("none")),
        check=all_checks(float_input("x0"), _bias_check),
        priority=11,
        replace=_bias_replace,
    ),
    Rule(
        name="fast_gelu",
        description="0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))) -> FastGelu",
        fused_op="FastGelu",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_fast_gelu,),
        check=float_input("x"),
        priority=10,
        replace=lambda m: Replacement([m["x"]]),
    ),
    Rule(
        name="bias_fast_gelu",
        description="Add(bias) then tanh-GELU or ONNX Gelu(tanh) -> FastGelu with bias",
        fused_op="FastGelu",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_bias_fast_gelu, _linear_fast_gelu, _onnx_gelu("tanh")),
        check=all_checks(float_input("x0"), _bias_check),
        priority=11,
        replace=_bias_replace,
    ),
    Rule(
        name="quick_gelu",
        description="x*sigmoid(alpha*x) (alpha 1.702), SiLU/Swish x*sigmoid(x) -> QuickGelu",
        fused_op="QuickGelu",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_quick_gelu,),
        check=all_checks(float_input("x"), _quick_check),
        priority=5,
        replace=lambda m: Replacement([m["x"]], {"alpha": _quick_alpha(m)}),
    ),
    Rule(
        name="hard_swish",
        description="x * HardSigmoid(x) or x * relu6(x + 3) / 6 -> HardSwish (ONNX, opset 14)",
        fused_op="HardSwish",
        domain=ONNX_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_hard_swish,),
        check=all_checks(float_input("x"), _hard_swish_check),
        priority=9,
        replace=lambda m: Replacement([m["x"]]),
    ),
    Rule(
        name="hard_sigmoid",
        description="Clip(x + 3, 0, 6) / 6 -> HardSigmoid",
        fused_op="HardSigmoid",
        domain=ONNX_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_hard_sigmoid,),
        check=all_checks(float_input("x"), _hard_sigmoid_check),
        priority=6,
        replace=_hard_sigmoid_replace,
    ),
]
